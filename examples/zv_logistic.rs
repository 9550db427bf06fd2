//! ZV post-processing of SGLD and SGLD-CV output on Bayesian logistic regression: how much
//! variance the zero-variance control variates remove, and how that depends on the data size N
//! (Baker, Fearnhead, Fox & Nemeth 2019, §4, Theorem 2 and Fig. 2).
//!
//! Run with `cargo run --release --example zv_logistic` (8 s wall, 16 s CPU on an idle 2-core
//! machine). The last line
//! of stdout is `RESULT {json}`, a one-line machine-readable summary.
//!
//! # What is reproduced
//!
//! ZV control variates (Mira et al. 2013) reuse the gradient estimates an SGMCMC sampler has
//! already computed: the first-order control variates are the d components of `∇Û(θ)`, which have
//! mean zero under the posterior. Theorem 2 of Baker et al. bounds the optimal variance reduction
//! obtained with a noisy gradient `∇Û = ∇U + ξ` by `R̂ ≥ R / (1 + E‖ξ‖² / (σ(N+1)))`: with the
//! plain minibatch estimator `E‖ξ‖²` is O(N²/n), the denominator grows like N/n and **the
//! variance reduction of SGLD-ZV fades as N grows**; with the control-variate estimator (SGLD-CV)
//! `E‖ξ‖²` is O(N/n) and **the reduction does not fade** — provided the centre θ̂ is within
//! O(N^(−1/2)) of the mode, since `E‖ξ‖²` grows with `‖θ − θ̂‖²`.
//!
//! # Set-up
//!
//! One synthetic data set (`LogisticRegression::synthetic`, d = 5, prior N(0, 10 I)) of
//! N_max + N_test rows; the last N_test = 1000 rows are a held-out test set, the first N rows the
//! training set, for N = 10³, 10⁴, 10⁵ (nested data sets, one true θ). For each N, with minibatch
//! n = 100 and the same constant step rule γ = c/N (c = 0.5, so γλ ∈ [0.05, 0.1] for the
//! eigenvalues λ of the Hessian at the mode), 10 independent chains of 22 000 iterations each
//! (burn-in 2000, every 2nd draw kept) of:
//! - **SGLD**, started at θ = 0;
//! - **SGLD-CV**, centred by SGD (`ControlVariate::from_sgd`: 5000 minibatch iterations from θ = 0,
//!   steps h_k = 30/(20 + k) on U/N; its cost is counted) and started at the centre;
//! - **SGLDFP** (diagnostic): the same estimator centred at the exact MAP (Newton), to separate the
//!   effect of the gradient estimator from that of an imperfect centre.
//!
//! Draws and gradient estimates are stored (`Storage::SamplesAndGradients`), and each chain is
//! post-processed by `sgmcmc::zv_matrix` (first and second order) for two kinds of test function:
//! - `mean`: the d coordinates θ_j (posterior mean);
//! - `lpd`: the average log predictive density of the test set,
//!   `g(θ) = (1/N_test) Σ_test log p(y* | x*, θ)` (its posterior expectation is the expected log
//!   predictive density).
//!
//! # How to read the output
//!
//! The first table gives, per N and method, the cost in epochs (datum gradients / N, all chains and
//! any set-up included) and the `sd ratio` = max_j (chain sd_j / Laplace sd_j): SGLD's spread is
//! inflated by minibatch noise (more so as N grows, since γN/n grows), the CV methods' is not.
//!
//! The second table gives variance-reduction factors (VRF = plain variance / ZV variance; 1 = no
//! gain) for first (`1`) and second (`2`) order:
//! - `within`: `ZvEstimate::variance_reduction` of each chain (sample variance of g over the draws
//!   divided by that of g − cᵀh), as in the paper's box plots; geometric mean over the chains (and
//!   over the d coordinates for `mean`);
//! - `between`: the variance across the 10 chains of the plain estimate divided by the variance
//!   across chains of the ZV estimate: the reduction of the estimator's actual Monte Carlo
//!   variance, autocorrelation included (geometric mean over coordinates for `mean`). It exceeds
//!   `within` for the CV methods because g − cᵀh is nearly white noise while θ is autocorrelated.
//!   With 10 chains each variance has 9 degrees of freedom: a single ratio is uncertain by a
//!   factor of about 2.
//!
//! The third table shows the pooled LPD estimates with standard errors across chains and the
//! shift ZV makes, in combined standard errors. First-order ZV only removes noise: for any
//! constant-step SGLD, `E[∇Û(θ_k)] = 0` exactly under the chain's own stationary law (take
//! expectations in `θ_{k+1} = θ_k − γ∇Û(θ_k) + √(2γ)Z`), so its shifts are within Monte Carlo
//! error. The second-order control variates are zero-mean under the posterior but **not** under
//! the chain's law (the same argument on `θ_k²` gives `E[2 − 2θ_i ∂_iÛ] = −γE[(∂_iÛ)²]`), so
//! second-order ZV moves the estimate by several standard errors: on SGLD, whose law is far from
//! the posterior, by 1e-4 to 3e-4, towards the CV methods' values; on the CV methods by 1e-6 to
//! 1e-4 (shrinking with N, like their O(γ) discretisation bias), which is still several of their
//! tiny standard errors. So second-order ZV on a constant-step chain is not purely a variance
//! reduction (nor a bias correction one can rely on).
//!
//! # Findings (this configuration)
//!
//! First-order, within-chain VRF for the posterior mean: SGLD 1.15, 1.05, 1.04 at N = 10³, 10⁴,
//! 10⁵ (fading to nothing, as Theorem 2 predicts); SGLD-CV 17.6, 17.8, 13.2 and SGLDFP 17.7,
//! 18.5, 18.7 (not fading). SGLD-CV's smaller factor at N = 10⁵ is its centre: 5000 SGD
//! iterations leave it 0.9 posterior sds from the mode there (0.13 at N = 10³), and the CV noise
//! grows with `‖θ − θ̂‖²`; with the exact mode (SGLDFP) the factor stays at 18.7. Between-chain
//! factors are larger for the CV methods (85–200 for the mean: the ZV residual is nearly white
//! noise) and about 1 for SGLD at N ≥ 10⁴. For the LPD the first-order factors are smaller
//! (3–14) and the second-order ones 12–17 within chains.

mod support;
use ndarray::{Array1, Array2, Axis, s};
use rayon::prelude::*;
use sgmcmc::StepSize;
use sgmcmc::prelude::*;
use sgmcmc::{Samples, SgdSettings, ZvEstimate, zv_matrix};
use sgmcmc::{Storage, ZvOrder};
use std::time::Instant;
use support::{spd_inverse, symmetric_eigenvalues};

/// Training-set sizes N.
const N_SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Held-out test rows.
const N_TEST: usize = 1_000;
/// Dimension d.
const DIM: usize = 5;
/// Prior variance σ² of the N(0, σ² I) prior.
const PRIOR_VAR: f64 = 10.0;
/// Seed of the synthetic data set.
const DATA_SEED: u64 = 2019;
/// Minibatch size n, the same for every N and every method (with replacement).
const BATCH_SIZE: usize = 100;
/// The step rule γ = STEP_C / N for every method. The Hessian of U at the MAP has eigenvalues in
/// about [0.1 N, 0.2 N] here, so γλ_max ≈ 0.1 (far from the stability limit 2) and the chains
/// relax in about 1/(γλ_min) ≈ 20 iterations.
const STEP_C: f64 = 0.5;
/// Independent chains per method and N.
const N_CHAINS: usize = 10;
/// Iterations per chain, burn-in included.
const N_ITER: u64 = 22_000;
/// Iterations discarded at the start of each chain (every method alike).
const BURN_IN: u64 = 2_000;
/// Record every THIN-th iteration (10 000 draws per chain).
const THIN: u64 = 2;
/// SGD iterations (minibatch BATCH_SIZE) for the SGLD-CV centre, for every N (5 passes at
/// N = 10⁵; a single pass there leaves the centre about 2 posterior sds from the mode)...
const SGD_ITERS: f64 = 5_000.0;
/// ...with steps h_k = SGD_A / (SGD_B + k) on U/N: the Robbins–Monro rate, with SGD_A λ_min / N > 1
/// so that the initial error is forgotten at that rate. (The library default, (10 + k)^(−0.6),
/// is too timid for this model: after 5000 iterations its centre is still ~2 sds off at N = 10⁵.)
const SGD_A: f64 = 30.0;
const SGD_B: f64 = 20.0;
/// Master seed of the chains (per N and method, a distinct offset).
const RUN_SEED: u64 = 41;

/// Method names, in table order.
const METHODS: [&str; 3] = ["SGLD", "SGLD-CV", "SGLDFP"];
/// Their names in the JSON keys.
const KEYS: [&str; 3] = ["sgld", "sgldcv", "sgldfp"];

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Per-chain ZV results of one method at one N.
struct MethodResult {
    /// [order][test function][chain]: (plain estimate, ZV estimate, within-chain VRF).
    per_chain: Vec<Vec<Vec<(f64, f64, f64)>>>,
    /// Max over coordinates of (pooled chain sd / Laplace sd).
    sd_ratio: f64,
    /// Datum gradients, setup included.
    datum_gradients: u64,
    /// Setup datum gradients (SGD and/or the full gradient at the centre).
    setup_gradients: u64,
    /// Wall time of the run (chains in parallel), seconds.
    wall_s: f64,
    /// Wall time of the ZV post-processing (LPD evaluation + regressions), seconds.
    zv_s: f64,
}

/// Variance-reduction factors of one (method, N, order, kind of test function).
#[derive(Clone, Copy, Default)]
struct Vrf {
    within: f64,
    between: f64,
}

fn main() -> Res<()> {
    let t_total = Instant::now();
    let n_max = *N_SIZES.iter().max().ok_or("no data size")?;
    let all = LogisticRegression::synthetic(n_max + N_TEST, DIM, PRIOR_VAR, DATA_SEED)?;
    let x = all.features();
    let y = Array1::from(all.labels().to_vec());
    // Only the likelihood of the test model is used (its prior variance is irrelevant).
    let test = LogisticRegression::new(&x.slice(s![n_max.., ..]).to_owned(), &y.slice(s![n_max..]).to_owned(), 1.0)?;
    let test_idx: Vec<usize> = (0..N_TEST).collect();
    test.potential_data_sum(&[0.0; DIM], &test_idx)?;
    let lpd = |t: &[f64]| test.potential_data_sum(t, &test_idx).map_or(f64::NAN, |u| -u / N_TEST as f64);

    println!("ZV post-processing of SGLD and SGLD-CV: Bayesian logistic regression (Baker et al. 2019, Theorem 2)");
    println!(
        "  synthetic data, d = {DIM}, prior N(0, {PRIOR_VAR} I), held-out test set of {N_TEST} rows; minibatch n = \
         {BATCH_SIZE}; step gamma = {STEP_C}/N for every method; {N_CHAINS} chains x {N_ITER} iterations per \
         method (burn-in {BURN_IN}, thin {THIN}: {} draws per chain)",
        (N_ITER - BURN_IN) / THIN
    );
    println!(
        "  SGLD starts at theta = 0; SGLD-CV starts at its SGD centre ({SGD_ITERS} SGD iterations of minibatch \
         {BATCH_SIZE} from theta = 0, h_k = {SGD_A}/({SGD_B} + k) on U/N); SGLDFP (diagnostic) is the CV estimator \
         centred at the exact MAP"
    );
    println!();
    println!(
        "{:>7} {:>8} | {:>10} {:>10} {:>10} | {:>8} | {:>7} {:>7}",
        "N", "method", "start", "setup", "cost", "sd ratio", "run", "ZV"
    );
    println!(
        "{:>7} {:>8} | {:>10} {:>10} {:>10} | {:>8} | {:>7} {:>7}",
        "", "", "", "(epochs)", "(epochs)", "", "(s)", "(s)"
    );

    let mut results: Vec<[MethodResult; 3]> = Vec::new();
    let mut centre_errs = Vec::new();
    for (i, &n) in N_SIZES.iter().enumerate() {
        let train = LogisticRegression::new(&x.slice(s![..n, ..]).to_owned(), &y.slice(s![..n]).to_owned(), PRIOR_VAR)?;
        // Reference: MAP, Laplace sds and the Hessian's eigenvalue range (for the step rule).
        let map = train.map()?.to_vec();
        let hessian = train.hessian(&map)?;
        let laplace_sd: Vec<f64> =
            spd_inverse("Laplace covariance", &hessian)?.diag().iter().map(|v| v.sqrt()).collect();
        let eig = symmetric_eigenvalues("Hessian at the MAP", &hessian)?;
        let gamma = STEP_C / n as f64;
        let settings = |m: u64| RunSettings {
            n_iter: N_ITER,
            burn_in: BURN_IN,
            thin: THIN,
            n_chains: N_CHAINS,
            seed: RUN_SEED + 10 * i as u64 + m,
            storage: Storage::SamplesAndGradients,
            parallel: true,
            ..Default::default()
        };
        let cv_settings = CvSettings { batch_size: BATCH_SIZE, ..CvSettings::default() };

        let sgld = Sgld::new(SgldSettings::constant(gamma), Minibatch::new(BATCH_SIZE))?;
        let sgld_res =
            analyse(&Runner::new(&train, &sgld).start(&[0.0; DIM]).settings(settings(0)).run()?, &laplace_sd, &lpd)?;

        let sgd_settings = SgdSettings {
            batch_size: BATCH_SIZE,
            n_passes: SGD_ITERS * BATCH_SIZE as f64 / n as f64,
            step_size: StepSize::Shifted { a: SGD_A, b: SGD_B, c: 1.0 },
            seed: RUN_SEED + 10 * i as u64 + 9,
        };
        let cv = ControlVariate::from_sgd(&train, &[0.0; DIM], &sgd_settings, cv_settings)?;
        let centre = cv.centre().to_vec();
        let centre_err =
            centre.iter().zip(&map).zip(&laplace_sd).map(|((c, m), s)| ((c - m) / s).abs()).fold(0.0, f64::max);
        let sgld_cv = Sgld::new(SgldSettings::constant(gamma), cv)?;
        let cv_res =
            analyse(&Runner::new(&train, &sgld_cv).start(&centre).settings(settings(1)).run()?, &laplace_sd, &lpd)?;

        let fp = Sgld::new(SgldSettings::constant(gamma), ControlVariate::at(&train, &map, cv_settings)?)?;
        let fp_res = analyse(&Runner::new(&train, &fp).start(&map).settings(settings(2)).run()?, &laplace_sd, &lpd)?;

        println!(
            "N = {n}: gamma = {gamma:.1e}, gamma x Hessian eigenvalues in [{:.3}, {:.3}]; SGD centre max_j \
             |centre_j - MAP_j| / Laplace sd_j = {centre_err:.2}",
            gamma * eig[0],
            gamma * eig[DIM - 1]
        );
        for (m, (r, start)) in [(&sgld_res, "theta = 0"), (&cv_res, "SGD centre"), (&fp_res, "MAP")].iter().enumerate()
        {
            println!(
                "{:>7} {:>8} | {:>10} {:>10.1} {:>10.0} | {:>8.2} | {:>7.2} {:>7.2}",
                n,
                METHODS[m],
                start,
                r.setup_gradients as f64 / n as f64,
                r.datum_gradients as f64 / n as f64,
                r.sd_ratio,
                r.wall_s,
                r.zv_s
            );
        }
        centre_errs.push(centre_err);
        results.push([sgld_res, cv_res, fp_res]);
    }
    println!(
        "  setup / cost = datum gradients / N (cost: all {N_CHAINS} chains plus the setup; SGLDFP's setup counts \
         only the full gradient at the MAP, not the Newton iterations); sd ratio = max_j (chain sd_j / Laplace \
         sd_j) (1 = the posterior's spread)."
    );

    // --- Variance-reduction factors. ------------------------------------------------------------
    // vrf[i][m][order][kind]: kind 0 = mean (geometric mean over coordinates), 1 = lpd.
    let mut vrf = vec![[[[Vrf::default(); 2]; 2]; 3]; N_SIZES.len()];
    for (i, per_method) in results.iter().enumerate() {
        for (m, r) in per_method.iter().enumerate() {
            for (cell, fns) in vrf[i][m].iter_mut().zip(&r.per_chain) {
                *cell = [summarise(&fns[..DIM]), summarise(&fns[DIM..])];
            }
        }
    }
    println!();
    println!("Variance-reduction factors of ZV post-processing (plain variance / ZV variance; 1 = no gain)");
    println!(
        "{:>7} {:>8} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9}",
        "", "", "mean", "mean", "mean", "mean", "lpd", "lpd", "lpd", "lpd"
    );
    println!(
        "{:>7} {:>8} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9}",
        "N",
        "method",
        "within 1",
        "between 1",
        "within 2",
        "between 2",
        "within 1",
        "between 1",
        "within 2",
        "between 2"
    );
    for (i, &n) in N_SIZES.iter().enumerate() {
        for (m, name) in METHODS.iter().enumerate() {
            let v = &vrf[i][m];
            let cells: Vec<String> = [v[0][0], v[1][0], v[0][1], v[1][1]]
                .iter()
                .flat_map(|c| [fmt_vrf(c.within), fmt_vrf(c.between)])
                .map(|c| format!("{c:>9}"))
                .collect();
            println!(
                "{n:>7} {name:>8} | {} {} {} {} | {} {} {} {}",
                cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7]
            );
        }
    }
    println!(
        "  1 / 2 = first / second-order ZV; within = per-chain factor (geometric mean over chains, and over the {DIM} \
         coordinates for mean); between = variance across the {N_CHAINS} chains of the plain estimate / of the ZV \
         estimate (geometric mean over coordinates for mean)."
    );

    // --- The estimates themselves: pooled LPD with standard errors, and ZV's shift. -------------
    println!();
    println!("Expected log predictive density per test point, pooled over chains (+- standard error across chains)");
    println!(
        "{:>7} {:>8} | {:>22} {:>22} {:>22} | {:>8} {:>8}",
        "N", "method", "plain", "ZV 1st order", "ZV 2nd order", "shift 1", "shift 2"
    );
    // max_shift[method][order]: the largest |ZV − plain| / combined standard error over N.
    let mut max_shift = [[0.0f64; 2]; 3];
    for (i, &n) in N_SIZES.iter().enumerate() {
        for (m, name) in METHODS.iter().enumerate() {
            let r = &results[i][m];
            let plain: Vec<f64> = r.per_chain[0][DIM].iter().map(|t| t.0).collect();
            let (mp, sp) = mean_se(&plain);
            let mut cells = Vec::new();
            let mut shifts = Vec::new();
            for (max, fns) in max_shift[m].iter_mut().zip(&r.per_chain) {
                let zv: Vec<f64> = fns[DIM].iter().map(|t| t.1).collect();
                let (mz, sz) = mean_se(&zv);
                let shift = (mz - mp) / sp.hypot(sz);
                *max = max.max(shift.abs());
                cells.push(format!("{mz:>12.7} +- {sz:>7.1e}"));
                shifts.push(shift);
            }
            println!(
                "{n:>7} {name:>8} | {:>12.7} +- {:>7.1e} {} {} | {:>+8.2} {:>+8.2}",
                mp, sp, cells[0], cells[1], shifts[0], shifts[1]
            );
        }
    }
    println!(
        "  shift = (ZV - plain) / combined standard error. First-order control variates have mean zero under the \
         chain's own stationary law, second-order ones only under the posterior (see the module docs)."
    );
    let total_seconds = t_total.elapsed().as_secs_f64();
    println!();
    println!("total time {total_seconds:.1} s");

    // --- Machine-readable summary. ---------------------------------------------------------------
    let arr = |f: &dyn Fn(usize) -> f64| -> String {
        let v: Vec<String> = (0..N_SIZES.len()).map(|i| num(f(i))).collect();
        format!("[{}]", v.join(","))
    };
    let mut fields: Vec<(String, String)> =
        vec![("n_data".into(), format!("[{}]", N_SIZES.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",")))];
    for (m, key) in KEYS.iter().enumerate() {
        for (k, kind) in ["mean", "lpd"].iter().enumerate() {
            for (o, suffix) in ["", "_order2"].iter().enumerate() {
                fields.push((format!("vrf_{key}_{kind}{suffix}"), arr(&|i| vrf[i][m][o][k].within)));
                fields.push((format!("vrf_between_{key}_{kind}{suffix}"), arr(&|i| vrf[i][m][o][k].between)));
            }
        }
    }
    for (m, key) in KEYS.iter().enumerate() {
        fields.push((format!("sd_ratio_{key}"), arr(&|i| results[i][m].sd_ratio)));
        fields.push((format!("datum_gradients_{key}"), arr(&|i| results[i][m].datum_gradients as f64)));
        fields.push((format!("setup_gradients_{key}"), arr(&|i| results[i][m].setup_gradients as f64)));
        fields.push((format!("wall_s_{key}"), arr(&|i| results[i][m].wall_s)));
        fields.push((
            format!("max_lpd_shift_in_se_{key}"),
            format!("[{},{}]", num(max_shift[m][0]), num(max_shift[m][1])),
        ));
    }
    fields.push(("sgd_centre_error_in_sd".into(), arr(&|i| centre_errs[i])));
    for (k, v) in [
        ("dim", DIM.to_string()),
        ("n_test", N_TEST.to_string()),
        ("batch_size", BATCH_SIZE.to_string()),
        ("step_rule_c_over_n", num(STEP_C)),
        ("n_chains", N_CHAINS.to_string()),
        ("n_iter", N_ITER.to_string()),
        ("burn_in", BURN_IN.to_string()),
        ("thin", THIN.to_string()),
        ("sgd_iters", num(SGD_ITERS)),
        ("total_seconds", num(total_seconds)),
    ] {
        fields.push((k.into(), v));
    }
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("RESULT {{{}}}", body.join(","));
    Ok(())
}

/// ZV post-processing of every chain of a run, first and second order, for the d coordinates and
/// the test-set log predictive density `lpd` (evaluated for the chains in parallel).
fn analyse<S>(out: &RunOutput<S>, laplace_sd: &[f64], lpd: &(dyn Fn(&[f64]) -> f64 + Sync)) -> Res<MethodResult> {
    let t = Instant::now();
    let n_chains = out.estimate.n_parts();
    let chains: Vec<&Samples> =
        (0..n_chains).map(|c| out.estimate.samples(c).ok_or("a chain kept no samples")).collect::<Result<_, _>>()?;
    let lpd_values: Vec<Array1<f64>> = chains
        .par_iter()
        .map(|samples| samples.draws().outer_iter().map(|row| row.as_slice().map_or(f64::NAN, lpd)).collect())
        .collect();
    let mut per_chain: Vec<Vec<Vec<(f64, f64, f64)>>> = vec![vec![Vec::new(); DIM + 1]; 2];
    for (samples, lpd_column) in chains.iter().zip(&lpd_values) {
        let draws = samples.draws();
        let grads = samples.gradients().ok_or("a chain kept no gradients")?;
        // Test-function values: the d coordinates, then the LPD (a NaN there makes zv_matrix fail).
        let mut values = Array2::zeros((samples.len(), DIM + 1));
        values.slice_mut(s![.., ..DIM]).assign(&draws);
        values.column_mut(DIM).assign(lpd_column);
        for (o, order) in [ZvOrder::First, ZvOrder::Second].into_iter().enumerate() {
            let zv: Vec<ZvEstimate> = zv_matrix(draws, grads, values.view(), order)?;
            for (f, z) in zv.iter().enumerate() {
                per_chain[o][f].push((z.plain_estimate, z.estimate, z.variance_reduction));
            }
        }
    }
    let sd = out.estimate.variance()?.mapv(f64::sqrt);
    let sd_ratio = sd.iter().zip(laplace_sd).map(|(a, b)| a / b).fold(0.0, f64::max);
    Ok(MethodResult {
        per_chain,
        sd_ratio,
        datum_gradients: out.cost.datum_gradients,
        setup_gradients: out.setup_cost.datum_gradients,
        wall_s: out.wall_time.as_secs_f64(),
        zv_s: t.elapsed().as_secs_f64(),
    })
}

/// Within- and between-chain factors for a group of test functions (each a list of per-chain
/// (plain, ZV, within-VRF) triples), as geometric means over the group.
fn summarise(fns: &[Vec<(f64, f64, f64)>]) -> Vrf {
    let within = geo_mean(fns.iter().flat_map(|f| f.iter().map(|t| t.2)));
    let between = geo_mean(fns.iter().map(|f| {
        let plain: Vec<f64> = f.iter().map(|t| t.0).collect();
        let zv: Vec<f64> = f.iter().map(|t| t.1).collect();
        variance(&plain) / variance(&zv)
    }));
    Vrf { within, between }
}

/// Geometric mean (ratios are averaged on the log scale).
fn geo_mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, k) = v.fold((0.0, 0usize), |(s, k), x| (s + x.ln(), k + 1));
    (s / k as f64).exp()
}

/// Unbiased sample variance.
fn variance(v: &[f64]) -> f64 {
    Array1::from(v.to_vec()).var_axis(Axis(0), 1.0).into_scalar()
}

/// Mean and its standard error.
fn mean_se(v: &[f64]) -> (f64, f64) {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (m, (variance(v) / v.len() as f64).sqrt())
}

/// A variance-reduction factor for the table.
fn fmt_vrf(x: f64) -> String {
    if !x.is_finite() {
        "inf".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// A JSON number (a non-finite value becomes `null`).
fn num(x: f64) -> String {
    if x.is_finite() { format!("{x}") } else { "null".to_string() }
}
