//! SGRRLD against SGLD (and SGRRHMC against SGHMC) on the linear Gaussian model: §5.1 of
//! Durmus, Şimşekli, Moulines, Badeau & Richard, *Stochastic gradient Richardson–Romberg Markov
//! chain Monte Carlo* (NIPS 2016), Figs. 1b, 2 and 4.
//!
//! Run with `cargo run --release --example sgrrld_gaussian` (39 s wall, 78 s CPU, measured 2026-11-23 on an idle 2-core machine; longer when it is shared;
//! stage lines on stderr). The SVG plot goes to `target/sgrrld_bias_mse.svg` (in the crate
//! directory); the last line of stdout is `RESULT {json}`, a one-line machine-readable summary.
//!
//! The set-up (the paper's). `θ ~ N(0, σθ²)`, `xₙ | θ ~ N(aₙθ, σx²)` with d = 1, σθ² = 10,
//! σx² = 1, `aₙ ~ N(0, 0.5)`, N = 1000 (`LinearGaussian::synthetic_scaled`, one fixed data set),
//! minibatches of n = N/10 = 100 drawn with replacement. The posterior is Gaussian, and its exact
//! variance σ² (≈ 1.9e-3) is the target. For each step size γ, SGLD runs 21 000 iterations
//! (1000 burn-in) and SGRRLD 10 500 (500 burn-in): SGRRLD's fine chain B then makes as many
//! gradient evaluations as SGLD, which is the paper's "fixed computation time" with the two
//! chains on two cores. It is **not** an equal gradient budget: SGRRLD makes 3 minibatch
//! gradients per iteration, 31 500 in all, 1.5× SGLD's, so a second table runs SGRRLD at an
//! equal budget (7000 iterations, 500 burn-in). Every run starts at its own random point drawn
//! from the prior (the same points for every method and step size); SGRRLD is run as one
//! `Runner` call per run (`n_chains = 1`, a seed per run), the runs spread over the rayon pool and A ‖ B on two threads within each.
//! 200 runs per point for SGLD/SGRRLD, 100 for SGHMC/SGRRHMC and for the multidimensional check.
//!
//! How to read the output.
//! - First table: per γ, the bias (mean over runs of the per-run variance estimate minus σ², ± the
//!   Monte Carlo standard error sd/√runs) and the MSE (mean over runs of the squared error) of
//!   SGLD and SGRRLD; `|ratio|` is how many times smaller SGRRLD's |bias| is. `predicted` is the
//!   exact expected bias: on this model the second moments of SGLD with minibatch noise close
//!   (the noise variance is quadratic in θ), so the stationary variance at any γ is known in
//!   closed form, and SGRRLD's is `2σ²_{γ/2} − σ²_γ`; added to it is the leading finite-length
//!   term `−2σ²/(λT)` of a plug-in variance over a time horizon T (T = γ × kept iterations: half
//!   as long for SGRRLD as for SGLD). `z` = (measured − predicted)/se. SGLD's bias is O(γ)
//!   (mostly the minibatch-noise term γs₀/2), SGRRLD's O(γ²); for small γ the O(1/(Kγ))
//!   finite-length term takes over, as in the paper's Fig. 2.
//! - The requirement check: SGRRLD's |bias| at least 10× below SGLD's for γ ≤ 5e-4, with a
//!   conservative version that moves each bias 2 SE in the unfavourable direction.
//! - Wall times: both methods' batches use both cores (throughput; ratio ≈ total work ≈ 1.5), and
//!   a single run is timed alone (latency: SGLD on one thread against SGRRLD's A ‖ B, expected
//!   ≈ 1 with a free second core, and SGRRLD serial). The machine may be shared: see the load.
//! - SGHMC table: the practical SGHMC with learning rate η = γ (so the learning-rate grid is
//!   SGLD's; with friction α = 1 SGHMC *is* SGLD at step γ) and a fixed friction α = 0.5; its time
//!   step is h = √η and the friction coefficient C = α/h. SGRRHMC halves h at fixed C (η/4, α/2).
//!   `predicted` comes from the exact stationary second moments of the (θ, v) chain, plus the
//!   finite-length term `−2Cσ²/(λT)`, T = h × kept iterations. The `exact-grad` columns give the
//!   exact stationary bias with the full gradient (not simulated): then the θ-variance bias is
//!   O(h²) and extrapolation only flips its sign and shrinks it by about half; with minibatch
//!   noise there is an O(h) term, h s₀/(2C), which extrapolation removes.
//! - Multidimensional check (Fig. 1b): d = 1, 2, 5, 10, 20 (a data set per d), fixed γ = 2e-4
//!   (γλ_max ≤ 0.13 for all d: stable and in the small-step regime), MSE = mean over runs of
//!   `‖Σ̂ − Σ‖²_F`, with its relative value and the share due to bias.
//! - The plot: |bias| and MSE against γ, log-log, with the exact stationary (K → ∞) biases dashed.

#[path = "support/plot.rs"]
mod plot;
mod support;

use ndarray::{Array1, Array2};
use rayon::prelude::*;
use sgmcmc::Runner;
use sgmcmc::rng::stream;
use sgmcmc::{
    Discretisation, LinearGaussian, Minibatch, Model, RichardsonRomberg, RunSettings, Sampler, Sghmc, SghmcSettings,
    Sgld, SgldSettings, Sgrrhmc, Sgrrld, Storage,
};
use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};
use support::normals;
use support::{solve, symmetric_eigenvalues};

type Res<T> = Result<T, Box<dyn Error>>;

/// Number of data items N.
const N_DATA: usize = 1_000;
/// Variance of the design entries, `aₙ ~ N(0, 0.5 I)`.
const DESIGN_VAR: f64 = 0.5;
/// Observation noise variance σx².
const NOISE_VAR: f64 = 1.0;
/// Prior variance σθ².
const PRIOR_VAR: f64 = 10.0;
/// Minibatch size n = N/10, drawn with replacement.
const BATCH: usize = N_DATA / 10;
/// Seed of the synthetic data sets (the d-dimensional one uses `DATA_SEED + d`).
const DATA_SEED: u64 = 2016;
/// Seed of the random starting points.
const INIT_SEED: u64 = 51;

/// Step sizes γ (the paper's 1e-3, 5e-4, 2e-4, and smaller ones as in its Fig. 2).
const GAMMAS: [f64; 7] = [1e-3, 5e-4, 2e-4, 1e-4, 8e-5, 5e-5, 2e-5];
/// Independent runs per method and step size.
const RUNS: usize = 200;
/// Independent runs per method and step size for SGHMC and SGRRHMC.
const HMC_RUNS: usize = 100;
/// SGLD (and SGHMC): iterations per run, burn-in included, and burn-in.
const PLAIN_ITER: u64 = 21_000;
const PLAIN_BURN: u64 = 1_000;
/// SGRRLD (and SGRRHMC): iterations of chain A per run, burn-in included, and burn-in. Chain B
/// takes two half steps per iteration, so the longer chain B makes as many gradient evaluations
/// as SGLD (the paper's "fixed computation time" with the two chains on two cores).
const RR_ITER: u64 = 10_500;
const RR_BURN: u64 = 500;
/// SGRRLD at an equal total gradient budget (3 minibatch gradients per iteration: 7000 × 3 =
/// 21000 = SGLD's), with the same burn-in as SGRRLD above.
const EQ_ITER: u64 = 7_000;
const EQ_BURN: u64 = 500;
/// SGHMC friction α (fixed); the learning rate is η = γ, so the time step is h = √γ and the
/// friction coefficient C = α/h.
const SGHMC_ALPHA: f64 = 0.5;
/// Dimensions of the multidimensional check (the paper's Fig. 1b).
const MULTI_DIMS: [usize; 5] = [1, 2, 5, 10, 20];
/// Step size of the multidimensional check.
const MULTI_GAMMA: f64 = 2e-4;
/// Runs per dimension in the multidimensional check.
const MULTI_RUNS: usize = 100;
/// Repetitions of the single-run timing (the median is reported).
const TIMING_REPS: usize = 11;

fn main() -> Res<()> {
    let t_total = Instant::now();
    let threads = rayon::current_num_threads();
    println!("SGRRLD vs SGLD on the linear Gaussian model (Durmus, Şimşekli et al. 2016, §5.1)");
    println!(
        "N = {N_DATA}, aₙ ~ N(0, {DESIGN_VAR}), σx² = {NOISE_VAR}, σθ² = {PRIOR_VAR}, minibatch n = {BATCH} (with replacement), {RUNS} runs per point, rayon threads = {threads}"
    );
    println!(
        "SGLD/SGHMC: {PLAIN_ITER} iterations ({PLAIN_BURN} burn-in); SGRRLD/SGRRHMC: {RR_ITER} iterations ({RR_BURN} burn-in), i.e. chain B makes {} gradient evaluations like SGLD, 3 per iteration in all ({} vs {} for SGLD, ×{:.2})",
        2 * RR_ITER,
        3 * RR_ITER,
        PLAIN_ITER,
        (3 * RR_ITER) as f64 / PLAIN_ITER as f64
    );

    // --- d = 1: the model, its exact posterior variance and the exact stationary laws. --------
    let model = LinearGaussian::synthetic_scaled(N_DATA, 1, DESIGN_VAR.sqrt(), NOISE_VAR, PRIOR_VAR, DATA_SEED)?;
    let post_var = model.posterior_covariance()[[0, 0]];
    let theory = Theory::new(&model, BATCH)?;
    let exact_grad = theory.exact_gradient();
    println!(
        "posterior: mean {:.6}, variance σ² = {post_var:.6e} (precision λ = {:.2}); minibatch gradient noise at the mean s₀ = {:.1}, multiplicative part q = {:.1}",
        model.posterior_mean()[0],
        theory.lambda,
        theory.s0,
        theory.q
    );
    let inits = random_inits(1, RUNS);
    let mut section = Instant::now();

    // --- SGLD vs SGRRLD over the step sizes. ---------------------------------------------------
    println!();
    println!("== Posterior variance: SGLD vs SGRRLD (bias = mean over runs − σ², ± MC standard error) ==");
    println!(
        "{:>8} | {:>21} {:>10} {:>5} {:>9} | {:>21} {:>10} {:>5} {:>9} | {:>7} | {:>7} {:>7} {:>5}",
        "gamma",
        "SGLD bias ± se",
        "predicted",
        "z",
        "MSE",
        "SGRRLD bias ± se",
        "predicted",
        "z",
        "MSE",
        "|ratio|",
        "wall s",
        "wall s",
        "ratio"
    );
    let mut sgld_rows = Vec::new();
    let mut rr_rows = Vec::new();
    let mut eq_rows = Vec::new();
    let mut walls = Vec::new();
    for (gi, &gamma) in GAMMAS.iter().enumerate() {
        eprintln!(
            "  [progress] {:.0} s: gamma = {gamma:e} ({}/{})",
            t_total.elapsed().as_secs_f64(),
            gi + 1,
            GAMMAS.len()
        );
        let sgld = Sgld::new(SgldSettings::constant(gamma), Minibatch::new(BATCH))?;
        let plain = run_plain(&model, &sgld, &inits, PLAIN_ITER, PLAIN_BURN, seed(1, gi))?;
        let rr = run_extrapolated(&model, &Sgrrld::new(sgld.clone()), &inits, RR_ITER, RR_BURN, seed(2, gi))?;
        let eq = run_extrapolated(&model, &Sgrrld::new(sgld), &inits, EQ_ITER, EQ_BURN, seed(3, gi))?;
        let s = var_stat(&plain.covs, post_var);
        let r = var_stat(&rr.covs, post_var);
        let e = var_stat(&eq.covs, post_var);
        let pred_s = theory.sgld_var(gamma) - post_var
            + finite_length(post_var, theory.lambda, 1.0, kept(PLAIN_ITER, PLAIN_BURN) * gamma);
        let pred_r = 2.0 * theory.sgld_var(gamma / 2.0) - theory.sgld_var(gamma) - post_var
            + finite_length(post_var, theory.lambda, 1.0, kept(RR_ITER, RR_BURN) * gamma);
        let (ws, wr) = (plain.wall.as_secs_f64(), rr.wall.as_secs_f64());
        println!(
            "{gamma:>8.0e} | {:>21} {:>10.3e} {:>+5.1} {:>9.2e} | {:>21} {:>10.3e} {:>+5.1} {:>9.2e} | {:>7.1} | {ws:>7.2} {wr:>7.2} {:>5.2}",
            pm(s.bias, s.se),
            pred_s,
            (s.bias - pred_s) / s.se,
            s.mse,
            pm(r.bias, r.se),
            pred_r,
            (r.bias - pred_r) / r.se,
            r.mse,
            s.bias.abs() / r.bias.abs(),
            wr / ws
        );
        sgld_rows.push((s, theory.sgld_var(gamma) - post_var));
        rr_rows.push((r, 2.0 * theory.sgld_var(gamma / 2.0) - theory.sgld_var(gamma) - post_var));
        eq_rows.push(e);
        walls.push((ws, wr, eq.wall.as_secs_f64()));
    }
    println!(
        "(columns: SGLD | SGRRLD | |bias_SGLD / bias_SGRRLD| | wall time of all {RUNS} runs of SGLD, of SGRRLD, SGRRLD/SGLD)"
    );
    println!(
        "predicted = exact stationary bias (K → ∞; minibatch noise included) + leading finite-length term −2σ²/(λT) of the plug-in variance (T = γ × kept iterations)"
    );

    println!();
    println!("Requirement: SGRRLD's variance bias at least 10× smaller than SGLD's for γ ≤ 5e-4");
    for (gi, &gamma) in GAMMAS.iter().enumerate().filter(|(_, g)| **g <= 5e-4) {
        let (s, r) = (&sgld_rows[gi].0, &rr_rows[gi].0);
        // Conservative: SGLD's |bias| two SE low against SGRRLD's two SE high.
        let cons = (s.bias.abs() - 2.0 * s.se) / (r.bias.abs() + 2.0 * r.se);
        println!(
            "  γ = {gamma:.0e}: ratio {:.1} (conservative, ±2 SE each: {cons:.1}) -> {}",
            s.bias.abs() / r.bias.abs(),
            if cons >= 10.0 {
                "met"
            } else if s.bias.abs() / r.bias.abs() >= 10.0 {
                "met at the point estimate only"
            } else {
                "NOT met"
            }
        );
    }

    println!();
    println!(
        "== SGRRLD at an equal gradient budget: {EQ_ITER} iterations ({EQ_BURN} burn-in), 3 × {EQ_ITER} = {} gradients like SGLD ==",
        3 * EQ_ITER
    );
    println!("{:>8} | {:>21} {:>9} | {:>7}", "gamma", "SGRRLD bias ± se", "MSE", "wall s");
    for (gi, &gamma) in GAMMAS.iter().enumerate() {
        let e = &eq_rows[gi];
        println!("{gamma:>8.0e} | {:>21} {:>9.2e} | {:>7.2}", pm(e.bias, e.se), e.mse, walls[gi].2);
    }

    println!("(section wall time {:.1} s)", section.elapsed().as_secs_f64());
    section = Instant::now();

    // --- Wall time of one run: SGLD on one thread against SGRRLD's A ‖ B. ----------------------
    println!();
    println!("== Wall time of a single run (median of {TIMING_REPS}), γ = 2e-4 ==");
    let timing = single_run_timing(&model, 2e-4, &inits[0])?;
    println!(
        "SGLD one chain (1 thread): {:.2} ms; SGRRLD one run, A ‖ B on 2 threads: {:.2} ms (ratio {:.2}); SGRRLD one run serial: {:.2} ms (ratio {:.2})",
        1e3 * timing.0,
        1e3 * timing.1,
        timing.1 / timing.0,
        1e3 * timing.2,
        timing.2 / timing.0
    );
    println!("How to read the wall times on 2 cores:");
    println!(
        "  - throughput (the batch columns of the first table: {RUNS} runs spread over the rayon pool, both cores busy for both methods): the ratio is the ratio of total work, expected ≈ 3·{RR_ITER}/{PLAIN_ITER} = {:.2};",
        (3 * RR_ITER) as f64 / PLAIN_ITER as f64
    );
    println!(
        "  - latency of one run with a spare core (the paper's \"fixed computation time\"): SGRRLD's critical path is chain B, as many gradients as SGLD, so the A ‖ B ratio is expected ≈ 1, but SGRRLD then occupies two cores where SGLD uses one; the serial ratio is the single-core cost (≈ 1.5)."
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "  The machine may be shared (load average now: {}); when the second core is busy the A ‖ B run cannot beat the serial one.",
            load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        );
    }

    println!("(section wall time {:.1} s)", section.elapsed().as_secs_f64());
    section = Instant::now();

    // --- SGHMC vs SGRRHMC over the same grid. ---------------------------------------------------
    println!();
    println!(
        "== Posterior variance: SGHMC vs SGRRHMC (learning rate η = γ, friction α = {SGHMC_ALPHA}: time step h = √η, friction C = α/h), {HMC_RUNS} runs =="
    );
    println!(
        "{:>8} {:>7} {:>6} | {:>21} {:>10} {:>5} {:>9} | {:>21} {:>10} {:>5} {:>9} | {:>7} | {:>10} {:>10}",
        "eta",
        "h",
        "C",
        "SGHMC bias ± se",
        "predicted",
        "z",
        "MSE",
        "SGRRHMC bias ± se",
        "predicted",
        "z",
        "MSE",
        "|ratio|",
        "exact-grad",
        "exact-grad"
    );
    let mut hmc_rows = Vec::new();
    let mut rrhmc_rows = Vec::new();
    for (gi, &eta) in GAMMAS.iter().enumerate() {
        eprintln!(
            "  [progress] {:.0} s: SGHMC eta = {eta:e} ({}/{})",
            t_total.elapsed().as_secs_f64(),
            gi + 1,
            GAMMAS.len()
        );
        let h = eta.sqrt();
        let c = SGHMC_ALPHA / h;
        let sghmc = Sghmc::new(SghmcSettings::constant(eta, SGHMC_ALPHA), Minibatch::new(BATCH))?;
        let plain = run_plain(&model, &sghmc, &inits[..HMC_RUNS], PLAIN_ITER, PLAIN_BURN, seed(4, gi))?;
        let rr = run_extrapolated(&model, &Sgrrhmc::new(sghmc), &inits[..HMC_RUNS], RR_ITER, RR_BURN, seed(5, gi))?;
        let s = var_stat(&plain.covs, post_var);
        let r = var_stat(&rr.covs, post_var);
        let stat_s = theory.sghmc_var(eta, SGHMC_ALPHA)? - post_var;
        let stat_r =
            2.0 * theory.sghmc_var(eta / 4.0, SGHMC_ALPHA / 2.0)? - theory.sghmc_var(eta, SGHMC_ALPHA)? - post_var;
        let ex_s = exact_grad.sghmc_var(eta, SGHMC_ALPHA)? - post_var;
        let ex_r = 2.0 * exact_grad.sghmc_var(eta / 4.0, SGHMC_ALPHA / 2.0)?
            - exact_grad.sghmc_var(eta, SGHMC_ALPHA)?
            - post_var;
        let pred_s = stat_s + finite_length(post_var, theory.lambda, c, kept(PLAIN_ITER, PLAIN_BURN) * h);
        let pred_r = stat_r + finite_length(post_var, theory.lambda, c, kept(RR_ITER, RR_BURN) * h);
        println!(
            "{eta:>8.0e} {h:>7.4} {c:>6.1} | {:>21} {:>10.3e} {:>+5.1} {:>9.2e} | {:>21} {:>10.3e} {:>+5.1} {:>9.2e} | {:>7.1} | {ex_s:>10.2e} {ex_r:>10.2e}",
            pm(s.bias, s.se),
            pred_s,
            (s.bias - pred_s) / s.se,
            s.mse,
            pm(r.bias, r.se),
            pred_r,
            (r.bias - pred_r) / r.se,
            r.mse,
            s.bias.abs() / r.bias.abs()
        );
        hmc_rows.push((s, stat_s));
        rrhmc_rows.push((r, stat_r));
    }
    println!(
        "(predicted: as above with finite-length term −2Cσ²/(λT), T = h × kept iterations; exact-grad: exact stationary bias of SGHMC and SGRRHMC with the full gradient, for comparison, not simulated)"
    );

    println!("(section wall time {:.1} s)", section.elapsed().as_secs_f64());
    section = Instant::now();

    // --- Multidimensional check: MSE of the covariance against d. -------------------------------
    println!();
    println!(
        "== Covariance MSE against dimension (Fig. 1b): γ = {MULTI_GAMMA:.0e}, {MULTI_RUNS} runs, MSE = mean over runs of ‖Σ̂ − Σ‖²_F =="
    );
    println!(
        "{:>3} {:>8} {:>6} | {:>10} {:>10} {:>6} | {:>10} {:>10} {:>6} | {:>7}",
        "d", "λ_max", "γλ_max", "SGLD MSE", "relative", "bias²", "SGRRLD MSE", "relative", "bias²", "ratio"
    );
    let mut multi = Vec::new();
    for (di, &d) in MULTI_DIMS.iter().enumerate() {
        eprintln!("  [progress] {:.0} s: d = {d} ({}/{})", t_total.elapsed().as_secs_f64(), di + 1, MULTI_DIMS.len());
        let m =
            LinearGaussian::synthetic_scaled(N_DATA, d, DESIGN_VAR.sqrt(), NOISE_VAR, PRIOR_VAR, DATA_SEED + d as u64)?;
        let lambda_max = symmetric_eigenvalues("posterior precision", m.posterior_precision())?
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let truth = m.posterior_covariance();
        let norm2 = truth.iter().map(|x| x * x).sum::<f64>();
        let inits_d = random_inits(d, MULTI_RUNS);
        let sgld = Sgld::new(SgldSettings::constant(MULTI_GAMMA), Minibatch::new(BATCH))?;
        let plain = run_plain(&m, &sgld, &inits_d, PLAIN_ITER, PLAIN_BURN, seed(6, di))?;
        let rr = run_extrapolated(&m, &Sgrrld::new(sgld), &inits_d, RR_ITER, RR_BURN, seed(7, di))?;
        let ((ms, bs), (mr, br)) = (frobenius_mse(&plain.covs, truth), frobenius_mse(&rr.covs, truth));
        println!(
            "{d:>3} {lambda_max:>8.1} {:>6.3} | {ms:>10.3e} {:>10.3e} {:>5.0}% | {mr:>10.3e} {:>10.3e} {:>5.0}% | {:>7.1}",
            MULTI_GAMMA * lambda_max,
            ms / norm2,
            100.0 * bs / ms,
            mr / norm2,
            100.0 * br / mr,
            ms / mr
        );
        multi.push((ms, mr));
    }
    println!(
        "(relative = MSE / ‖Σ‖²_F; bias² = share of the MSE due to the bias ‖mean Σ̂ − Σ‖²_F, the rest is Monte Carlo variance; ratio = SGLD MSE / SGRRLD MSE)"
    );
    println!("(section wall time {:.1} s)", section.elapsed().as_secs_f64());

    // --- Plot. ------------------------------------------------------------------------------------
    let svg = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("sgrrld_bias_mse.svg");
    let pts = |f: &dyn Fn(usize) -> f64| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = GAMMAS.iter().enumerate().map(|(i, &g)| (g, f(i))).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    plot::loglog_svg(
        &svg,
        &format!("Posterior variance, linear Gaussian d = 1: {RUNS} runs per point"),
        "step size γ",
        "|bias| and MSE of the variance estimate",
        &[
            plot::Series::new("|bias| SGLD", pts(&|i| sgld_rows[i].0.bias.abs())),
            plot::Series::new("|bias| SGRRLD", pts(&|i| rr_rows[i].0.bias.abs())),
            plot::Series::new("MSE SGLD", pts(&|i| sgld_rows[i].0.mse)),
            plot::Series::new("MSE SGRRLD", pts(&|i| rr_rows[i].0.mse)),
            plot::Series::dashed("|bias| SGLD, exact K → ∞", pts(&|i| sgld_rows[i].1.abs())),
            plot::Series::dashed("|bias| SGRRLD, exact K → ∞", pts(&|i| rr_rows[i].1.abs())),
        ],
    )?;
    println!();
    println!("plot: {}", svg.display());
    println!("total wall time: {:.1} s", t_total.elapsed().as_secs_f64());

    // --- RESULT line. -------------------------------------------------------------------------------
    let mut j = String::from("{");
    let mut field = |name: &str, value: String| {
        if j.len() > 1 {
            j.push(',');
        }
        let _ = write!(j, "\"{name}\":{value}");
    };
    field("posterior_var", num(post_var));
    field("runs", RUNS.to_string());
    field("gamma", arr(&GAMMAS));
    field("sgld_var_bias", arr(&sgld_rows.iter().map(|r| r.0.bias).collect::<Vec<_>>()));
    field("sgrrld_var_bias", arr(&rr_rows.iter().map(|r| r.0.bias).collect::<Vec<_>>()));
    field("sgld_var_mse", arr(&sgld_rows.iter().map(|r| r.0.mse).collect::<Vec<_>>()));
    field("sgrrld_var_mse", arr(&rr_rows.iter().map(|r| r.0.mse).collect::<Vec<_>>()));
    field("sgld_var_bias_se", arr(&sgld_rows.iter().map(|r| r.0.se).collect::<Vec<_>>()));
    field("sgrrld_var_bias_se", arr(&rr_rows.iter().map(|r| r.0.se).collect::<Vec<_>>()));
    field("sgld_var_bias_stationary_theory", arr(&sgld_rows.iter().map(|r| r.1).collect::<Vec<_>>()));
    field("sgrrld_var_bias_stationary_theory", arr(&rr_rows.iter().map(|r| r.1).collect::<Vec<_>>()));
    field("sgrrld_equal_gradients_var_bias", arr(&eq_rows.iter().map(|r| r.bias).collect::<Vec<_>>()));
    field("sgrrld_equal_gradients_var_bias_se", arr(&eq_rows.iter().map(|r| r.se).collect::<Vec<_>>()));
    field("sgrrld_equal_gradients_var_mse", arr(&eq_rows.iter().map(|r| r.mse).collect::<Vec<_>>()));
    field("sgld_wall_s", arr(&walls.iter().map(|w| w.0).collect::<Vec<_>>()));
    field("sgrrld_wall_s", arr(&walls.iter().map(|w| w.1).collect::<Vec<_>>()));
    field("wall_ratio_sgrrld_over_sgld", arr(&walls.iter().map(|w| w.1 / w.0).collect::<Vec<_>>()));
    field("single_run_wall_ratio_parallel", num(timing.1 / timing.0));
    field("single_run_wall_ratio_serial", num(timing.2 / timing.0));
    field("hmc_runs", HMC_RUNS.to_string());
    field("sghmc_eta", arr(&GAMMAS));
    field("sghmc_h", arr(&GAMMAS.iter().map(|g| g.sqrt()).collect::<Vec<_>>()));
    field("sghmc_alpha", num(SGHMC_ALPHA));
    field("sghmc_var_bias", arr(&hmc_rows.iter().map(|r| r.0.bias).collect::<Vec<_>>()));
    field("sgrrhmc_var_bias", arr(&rrhmc_rows.iter().map(|r| r.0.bias).collect::<Vec<_>>()));
    field("sghmc_var_bias_se", arr(&hmc_rows.iter().map(|r| r.0.se).collect::<Vec<_>>()));
    field("sgrrhmc_var_bias_se", arr(&rrhmc_rows.iter().map(|r| r.0.se).collect::<Vec<_>>()));
    field("sghmc_var_mse", arr(&hmc_rows.iter().map(|r| r.0.mse).collect::<Vec<_>>()));
    field("sgrrhmc_var_mse", arr(&rrhmc_rows.iter().map(|r| r.0.mse).collect::<Vec<_>>()));
    field("sghmc_var_bias_stationary_theory", arr(&hmc_rows.iter().map(|r| r.1).collect::<Vec<_>>()));
    field("sgrrhmc_var_bias_stationary_theory", arr(&rrhmc_rows.iter().map(|r| r.1).collect::<Vec<_>>()));
    field("multi_d", format!("[{}]", MULTI_DIMS.map(|d| d.to_string()).join(",")));
    field("multi_gamma", num(MULTI_GAMMA));
    field("multi_runs", MULTI_RUNS.to_string());
    field("multi_sgld_cov_mse", arr(&multi.iter().map(|m| m.0).collect::<Vec<_>>()));
    field("multi_sgrrld_cov_mse", arr(&multi.iter().map(|m| m.1).collect::<Vec<_>>()));
    j.push('}');
    println!("RESULT {j}");
    Ok(())
}

/// Master seed of experiment `e` at grid point `i`; run r of an extrapolated batch adds r, so
/// the seeds of different batches never meet.
fn seed(e: u64, i: usize) -> u64 {
    1_000_000 * e + 1_000 * i as u64
}

/// Kept iterations of a run, as a float.
fn kept(n_iter: u64, burn_in: u64) -> f64 {
    (n_iter - burn_in) as f64
}

/// Random starting points, one per run, from the prior N(0, σθ² I) (the same for every method
/// and step size).
fn random_inits(d: usize, runs: usize) -> Vec<Vec<f64>> {
    (0..runs)
        .map(|r| {
            let mut rng = stream(INIT_SEED, &[d as u64, r as u64]);
            let mut x = vec![0.0; d];
            normals(&mut rng, &mut x);
            x.iter().map(|z| z * PRIOR_VAR.sqrt()).collect()
        })
        .collect()
}

/// Per-run covariance estimates of a batch of runs, and the batch's wall time.
struct Batch {
    covs: Vec<Array2<f64>>,
    wall: Duration,
}

/// `inits.len()` independent runs of a one-chain sampler (SGLD, SGHMC), in parallel over the
/// rayon pool; run r starts at `inits[r]`.
fn run_plain<S: Sampler>(
    model: &LinearGaussian,
    sampler: &S,
    inits: &[Vec<f64>],
    n_iter: u64,
    burn_in: u64,
    seed: u64,
) -> Res<Batch> {
    let settings = RunSettings {
        n_iter,
        burn_in,
        thin: 1,
        n_chains: inits.len(),
        seed,
        storage: Storage::Moments,
        parallel: true,
        ..Default::default()
    };
    let refs: Vec<&[f64]> = inits.iter().map(Vec::as_slice).collect();
    let t = Instant::now();
    let out = Runner::new(model, sampler).starts(&refs).settings(settings).run()?;
    let wall = t.elapsed();
    let covs = (0..inits.len())
        .map(|c| -> Res<Array2<f64>> { Ok(out.estimate.part(c).ok_or("missing chain")?.covariance()?) })
        .collect::<Res<Vec<_>>>()?;
    Ok(Batch { covs, wall })
}

/// `inits.len()` independent runs of a Richardson–Romberg pair, one `Runner` call per run (so each
/// run has its own starting point), runs in parallel over the rayon pool and A ‖ B within each.
fn run_extrapolated<S: Discretisation>(
    model: &LinearGaussian,
    rr: &RichardsonRomberg<S>,
    inits: &[Vec<f64>],
    n_iter: u64,
    burn_in: u64,
    seed: u64,
) -> Res<Batch> {
    let t = Instant::now();
    let covs = inits
        .par_iter()
        .enumerate()
        .map(|(r, x0)| -> sgmcmc::Result<Array2<f64>> {
            let settings = RunSettings {
                n_iter,
                burn_in,
                thin: 1,
                n_chains: 1,
                seed: seed + r as u64,
                storage: Storage::Moments,
                parallel: true,
                ..Default::default()
            };
            Runner::new(model, rr).start(x0).settings(settings).run()?.replicate(0)?.covariance()
        })
        .collect::<sgmcmc::Result<Vec<_>>>()?;
    Ok(Batch { covs, wall: t.elapsed() })
}

/// Bias, its Monte Carlo standard error and MSE of the per-run variance estimates (d = 1).
struct Stat {
    bias: f64,
    se: f64,
    mse: f64,
}

fn var_stat(covs: &[Array2<f64>], truth: f64) -> Stat {
    let xs: Vec<f64> = covs.iter().map(|c| c[[0, 0]]).collect();
    let r = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / r;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r - 1.0)).sqrt();
    let mse = xs.iter().map(|x| (x - truth).powi(2)).sum::<f64>() / r;
    Stat { bias: mean - truth, se: sd / r.sqrt(), mse }
}

/// Mean over runs of the squared Frobenius norm `‖Σ̂ − Σ‖²_F`, and its bias part
/// `‖mean Σ̂ − Σ‖²_F` (the rest is the variance across runs).
fn frobenius_mse(covs: &[Array2<f64>], truth: &Array2<f64>) -> (f64, f64) {
    let r = covs.len() as f64;
    let sq = |m: &Array2<f64>| m.iter().map(|x| x * x).sum::<f64>();
    let mse = covs.iter().map(|c| sq(&(c - truth))).sum::<f64>() / r;
    let mean = covs.iter().fold(Array2::zeros(truth.raw_dim()), |acc, c| acc + c) / r;
    (mse, sq(&(mean - truth)))
}

/// The leading finite-length bias of a plug-in variance: `−Var(sample mean) ≈ −2Cσ²/(λT)` for a
/// (Langevin-type) chain over a time horizon T, with C = 1 for overdamped Langevin (SGLD) and
/// the friction C for underdamped Langevin (SGHMC).
fn finite_length(var: f64, lambda: f64, friction: f64, horizon: f64) -> f64 {
    -2.0 * friction * var / (lambda * horizon)
}

/// Exact stationary variances of SGLD and SGHMC with minibatch gradients on the 1-d linear
/// Gaussian model. With `e = θ − μ`, the minibatch estimate is `λe + ξ` with `E[ξ | θ] = 0` and
/// `E[ξ² | θ] = q e² + 2ℓ e + s₀` (with replacement: `N²/n` times the variance over the data of
/// the per-datum gradients), so the second moments of the (linear) chains close exactly.
struct Theory {
    lambda: f64,
    q: f64,
    s0: f64,
}

impl Theory {
    fn new(model: &LinearGaussian, batch: usize) -> Res<Self> {
        if model.dim() != 1 {
            return Err("the exact theory is written for d = 1".into());
        }
        let n = model.n_data() as f64;
        let a = model.design();
        let x = model.targets();
        let mu = model.posterior_mean()[0];
        let s2 = model.noise_var();
        // Per-datum gradient ∇Uᵢ(θ) = cᵢ e + gᵢ.
        let c: Array1<f64> = a.column(0).mapv(|ai| ai * ai / s2);
        let g: Array1<f64> =
            Array1::from_shape_fn(model.n_data(), |i| (a[[i, 0]] * a[[i, 0]] * mu - a[[i, 0]] * x[i]) / s2);
        let popvar = |v: &Array1<f64>| {
            let m = v.mean().unwrap_or(0.0);
            v.iter().map(|y| (y - m).powi(2)).sum::<f64>() / n
        };
        let scale = n * n / batch as f64;
        Ok(Theory { lambda: model.posterior_precision()[[0, 0]], q: scale * popvar(&c), s0: scale * popvar(&g) })
    }

    /// The same model with the exact gradient (no minibatch noise).
    fn exact_gradient(&self) -> Theory {
        Theory { lambda: self.lambda, q: 0.0, s0: 0.0 }
    }

    /// SGLD at step γ: `P = (2γ + γ²s₀) / (1 − (1 − γλ)² − γ²q)` (∞ if unstable).
    fn sgld_var(&self, gamma: f64) -> f64 {
        let den = 1.0 - (1.0 - gamma * self.lambda).powi(2) - gamma * gamma * self.q;
        if den > 0.0 { (2.0 * gamma + gamma * gamma * self.s0) / den } else { f64::INFINITY }
    }

    /// Practical SGHMC with learning rate η and friction α (β̂ = 0): the stationary `Var θ` from
    /// the 3 × 3 linear system for `(P_ee, P_ev, P_vv)`, with `a = 1 − α`, `b = ηλ` and
    /// injected-plus-gradient noise `w = η²(q P_ee + s₀) + 2αη`.
    fn sghmc_var(&self, eta: f64, alpha: f64) -> Res<f64> {
        let (a, b) = (1.0 - alpha, eta * self.lambda);
        let c = eta * eta * self.q;
        let w0 = eta * eta * self.s0 + 2.0 * alpha * eta;
        let m = ndarray::arr2(&[
            [b * b + c, -2.0 * a * b, a * a - 1.0],
            [-b * (1.0 - b) + c, a * (1.0 - b) - a * b - 1.0, a * a],
            [(1.0 - b).powi(2) - 1.0 + c, 2.0 * a * (1.0 - b), a * a],
        ]);
        let p = solve("SGHMC stationary second moments", &m, &Array1::from_elem(3, -w0))?;
        Ok(p[0])
    }
}

/// Median wall times (seconds) of one run at step γ: SGLD (one chain, one thread), SGRRLD with
/// A ‖ B on two threads, SGRRLD serial.
fn single_run_timing(model: &LinearGaussian, gamma: f64, x0: &[f64]) -> Res<(f64, f64, f64)> {
    let sgld = Sgld::new(SgldSettings::constant(gamma), Minibatch::new(BATCH))?;
    let rr = Sgrrld::new(sgld.clone());
    let plain = RunSettings {
        n_iter: PLAIN_ITER,
        burn_in: PLAIN_BURN,
        n_chains: 1,
        storage: Storage::Moments,
        parallel: false,
        ..Default::default()
    };
    let rr_par = RunSettings { n_iter: RR_ITER, burn_in: RR_BURN, parallel: true, ..plain };
    let rr_ser = RunSettings { parallel: false, ..rr_par };
    let (mut t_s, mut t_p, mut t_q) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..TIMING_REPS {
        let t = Instant::now();
        Runner::new(model, &sgld).starts(&[x0]).settings(plain).run()?;
        t_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        Runner::new(model, &rr).start(x0).settings(rr_par).run()?;
        t_p.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        Runner::new(model, &rr).start(x0).settings(rr_ser).run()?;
        t_q.push(t.elapsed().as_secs_f64());
    }
    Ok((median(t_s), median(t_p), median(t_q)))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `bias ± se` in a fixed format.
fn pm(x: f64, se: f64) -> String {
    format!("{x:+.3e} ± {se:.1e}")
}

/// A JSON number (`null` if not finite).
fn num(x: f64) -> String {
    if x.is_finite() { format!("{x:.5e}") } else { "null".to_string() }
}

/// A JSON array of numbers.
fn arr(xs: &[f64]) -> String {
    format!("[{}]", xs.iter().map(|&x| num(x)).collect::<Vec<_>>().join(","))
}
