//! Quickstart: SGLD and SGHMC on a synthetic Bayesian logistic regression with N = 100 000 data
//! and d = 10 parameters, checked against the MAP and the Laplace approximation.
//!
//! Run with `cargo run --release --example quickstart` (3.3 s wall, 6.4 s CPU on an idle 2-core
//! machine, once built). The last line of stdout
//! is `RESULT {json}`, a one-line machine-readable summary.
//!
//! Tuning, in brief. The Hessian of the potential at the MAP has eigenvalues in about
//! [0.07 N, 0.16 N], so the posterior sds are about 0.008 and a (full-gradient) Langevin step
//! γ is stable for γ λ_max < 2, i.e. γ < 1e-4. With minibatches the binding constraint is not
//! stability but the gradient noise: the per-datum gradient covariance at the MAP is about H/N,
//! so the minibatch estimator has covariance about (N/n) H, and SGLD's stationary covariance is
//! about H⁻¹ + (γN / 2n) I (SGHMC's: H⁻¹ + (ηN / 2αn) I). With N/n = 1000 the added variance
//! γN/2n equals the posterior variance already at γ ≈ 1.3e-7; the values below accept a
//! spread about 2× too wide in exchange for fast mixing (relaxation in ~1/(γ λ_min) ≈ 300
//! iterations), which keeps the mean error a small fraction of a posterior sd.

use ndarray::{Array1, Array2};
use sgmcmc::linalg::spd_inverse;
use sgmcmc::prelude::*;
use std::time::Instant;

/// Number of data items N.
const N_DATA: usize = 100_000;
/// Dimension d (number of regression coefficients).
const DIM: usize = 10;
/// Prior variance σ² of the N(0, σ² I) prior.
const PRIOR_VAR: f64 = 10.0;
/// Seed of the synthetic data set.
const DATA_SEED: u64 = 2026;
/// Minibatch size n (drawn with replacement).
const BATCH_SIZE: usize = 100;

/// SGLD step size γ: `θ ← θ − γ∇Ũ(θ) + √(2γ) Z`.
const SGLD_STEP: f64 = 5e-7;
/// SGHMC learning rate η: `v ← (1−α)v − η∇Ũ(θ) + √(2αη) Z`, `θ ← θ + v`.
const SGHMC_ETA: f64 = 1e-7;
/// SGHMC friction α.
const SGHMC_FRICTION: f64 = 0.25;

/// Independent chains per sampler (run in parallel with rayon).
const N_CHAINS: usize = 8;
/// Iterations per chain, burn-in included.
const N_ITER: u64 = 250_000;
/// Iterations discarded at the start of each chain (chains start at θ = 0, about 100 posterior
/// sds from the mode).
const BURN_IN: u64 = 10_000;
/// Master seed of the chains' random streams.
const RUN_SEED: u64 = 7;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t_total = Instant::now();

    // --- The model and the deterministic reference: MAP and Laplace approximation. -----------
    let t_ref = Instant::now();
    let model = LogisticRegression::synthetic(N_DATA, DIM, PRIOR_VAR, DATA_SEED)?;
    let map: Vec<f64> = model.map()?.to_vec();
    let hessian = model.hessian(&map)?;
    let laplace_cov = spd_inverse("Laplace covariance (inverse Hessian at the MAP)", &hessian)?;
    let laplace_sd: Vec<f64> = laplace_cov.diag().iter().map(|v| v.sqrt()).collect();
    let lambda_max = largest_eigenvalue(&hessian);
    let lambda_min = 1.0 / largest_eigenvalue(&laplace_cov);
    let ref_seconds = t_ref.elapsed().as_secs_f64();

    let n = N_DATA as f64;
    println!("sgmcmc quickstart: Bayesian logistic regression on synthetic data");
    println!(
        "  N = {N_DATA}, d = {DIM}, prior N(0, {PRIOR_VAR} I), minibatch n = {BATCH_SIZE} (with replacement), \
         {N_CHAINS} chains x {N_ITER} iterations (burn-in {BURN_IN}), started at theta = 0"
    );
    println!(
        "  reference: MAP (Newton) and Laplace sds from the inverse Hessian, {ref_seconds:.2} s; \
         Hessian eigenvalues in [{lambda_min:.3e}, {lambda_max:.3e}] = [{:.3}, {:.3}] N",
        lambda_min / n,
        lambda_max / n
    );
    println!(
        "  SGLD : gamma = {SGLD_STEP:e}  (gamma lambda_max = {:.1e}; relaxation ~ 1/(gamma lambda_min) = {:.0} iterations)",
        SGLD_STEP * lambda_max,
        1.0 / (SGLD_STEP * lambda_min)
    );
    println!(
        "  SGHMC: eta = {SGHMC_ETA:e}, alpha = {SGHMC_FRICTION}  (relaxation ~ alpha/(eta lambda_min) = {:.0} iterations)",
        SGHMC_FRICTION / (SGHMC_ETA * lambda_min)
    );

    // --- The samplers: 8 chains each, from θ = 0, streaming moments only. --------------------
    let settings = RunSettings {
        n_iter: N_ITER,
        burn_in: BURN_IN,
        thin: 1,
        n_chains: N_CHAINS,
        seed: RUN_SEED,
        storage: Storage::Moments,
        parallel: true,
        ..Default::default()
    };
    let theta0 = vec![0.0; DIM];

    let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(SGLD_STEP) }, Minibatch::new(BATCH_SIZE))?;
    let sgld_out = run(&model, &sgld, &theta0, &settings)?;

    let sghmc = Sghmc::new(
        SghmcSettings { step_size: StepSize::Constant(SGHMC_ETA), friction: SGHMC_FRICTION, noise_estimate: 0.0 },
        Minibatch::new(BATCH_SIZE),
    )?;
    // Another master seed, so that the two samplers' chains are independent of each other.
    let sghmc_out = run(&model, &sghmc, &theta0, &RunSettings { seed: RUN_SEED + 1, ..settings })?;

    let sgld_acc = Accuracy::of(&sgld_out.estimate, &map, &laplace_sd)?;
    let sghmc_acc = Accuracy::of(&sghmc_out.estimate, &map, &laplace_sd)?;

    // --- Per-coordinate table. ----------------------------------------------------------------
    println!();
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} | {:>8} {:>8} | {:>8} {:>8} | {:>8} {:>8}",
        "coord", "MAP", "SGLD", "SGHMC", "Laplace", "SGLD", "SGHMC", "SGLD", "SGHMC", "SGLD", "SGHMC"
    );
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} | {:>8} {:>8} | {:>8} {:>8} | {:>8} {:>8}",
        "", "", "mean", "mean", "sd", "err/sd", "err/sd", "mcse/sd", "mcse/sd", "sd ratio", "sd ratio"
    );
    for j in 0..DIM {
        println!(
            "{:>5} {:>10.5} {:>10.5} {:>10.5} {:>10.5} | {:>+8.3} {:>+8.3} | {:>8.3} {:>8.3} | {:>8.2} {:>8.2}",
            j,
            map[j],
            sgld_acc.mean[j],
            sghmc_acc.mean[j],
            laplace_sd[j],
            sgld_acc.err_in_sd[j],
            sghmc_acc.err_in_sd[j],
            sgld_acc.mcse_in_sd[j],
            sghmc_acc.mcse_in_sd[j],
            sgld_acc.sd_ratio[j],
            sghmc_acc.sd_ratio[j],
        );
    }
    println!(
        "  err/sd = (mean over {N_CHAINS} chains - MAP) / Laplace sd; mcse/sd = Monte Carlo standard error of that \
         mean (from the spread of the chain means) / Laplace sd; sd ratio = sampler sd / Laplace sd."
    );
    // Predicted spread: stationary covariance ≈ H⁻¹ + c I with c = γN/2n (SGLD), ηN/2αn (SGHMC).
    let extra_sgld = SGLD_STEP * n / (2.0 * BATCH_SIZE as f64);
    let extra_sghmc = SGHMC_ETA * n / (2.0 * SGHMC_FRICTION * BATCH_SIZE as f64);
    let predicted = |c: f64| -> (f64, f64) {
        let r: Vec<f64> = laplace_sd.iter().map(|s| (1.0 + c / (s * s)).sqrt()).collect();
        (r.iter().copied().fold(f64::INFINITY, f64::min), r.iter().copied().fold(0.0, f64::max))
    };
    let (p_sgld, p_sghmc) = (predicted(extra_sgld), predicted(extra_sghmc));
    println!(
        "  Minibatch noise inflates the spread, as expected with N/n = {}: the gradient noise adds about \
         gamma N/2n (SGLD) or eta N/(2 alpha n) (SGHMC) to every marginal variance, predicting sd ratios \
         {:.2}-{:.2} (SGLD) and {:.2}-{:.2} (SGHMC); the means stay within a small fraction of a posterior sd.",
        N_DATA / BATCH_SIZE,
        p_sgld.0,
        p_sgld.1,
        p_sghmc.0,
        p_sghmc.1
    );

    // --- Throughput. --------------------------------------------------------------------------
    println!();
    let threads = rayon::current_num_threads();
    let sgld_speed = Speed::of(&sgld_out, N_DATA);
    let sghmc_speed = Speed::of(&sghmc_out, N_DATA);
    for (name, s) in [("SGLD", &sgld_speed), ("SGHMC", &sghmc_speed)] {
        println!(
            "{name:>5}: {:.2} s wall for {N_CHAINS} chains on {threads} threads: {:.3e} iterations/s, \
             {:.3e} datum-gradients/s ({:.3e} iterations/s per chain); cost {} datum gradients = {:.0} epochs",
            s.wall_s, s.iters_per_sec, s.grads_per_sec, s.per_chain_iters_per_sec, s.datum_gradients, s.epochs
        );
    }

    let max_abs_mean_error = sgld_acc.max_abs_err.max(sghmc_acc.max_abs_err);
    let max_err_in_sd = sgld_acc.max_err_in_sd.max(sghmc_acc.max_err_in_sd);
    println!();
    println!(
        "max |chain mean - MAP| = {max_abs_mean_error:.3e} = {max_err_in_sd:.3} posterior sds \
         (SGLD {:.3}, SGHMC {:.3})",
        sgld_acc.max_err_in_sd, sghmc_acc.max_err_in_sd
    );
    let total_seconds = t_total.elapsed().as_secs_f64();
    println!("total time {total_seconds:.2} s");

    // --- Machine-readable summary: hand-formatted single-line JSON. ----------------------------
    let fields: Vec<(&str, String)> = vec![
        ("sgld_iters_per_sec", num(sgld_speed.iters_per_sec)),
        ("sghmc_iters_per_sec", num(sghmc_speed.iters_per_sec)),
        ("max_abs_mean_error", num(max_abs_mean_error)),
        ("max_mean_error_in_sd", num(max_err_in_sd)),
        ("sgld_max_mean_error_in_sd", num(sgld_acc.max_err_in_sd)),
        ("sghmc_max_mean_error_in_sd", num(sghmc_acc.max_err_in_sd)),
        ("sgld_max_mcse_in_sd", num(sgld_acc.max_mcse_in_sd)),
        ("sghmc_max_mcse_in_sd", num(sghmc_acc.max_mcse_in_sd)),
        ("sgld_datum_grads_per_sec", num(sgld_speed.grads_per_sec)),
        ("sghmc_datum_grads_per_sec", num(sghmc_speed.grads_per_sec)),
        ("sgld_iters_per_sec_per_chain", num(sgld_speed.per_chain_iters_per_sec)),
        ("sghmc_iters_per_sec_per_chain", num(sghmc_speed.per_chain_iters_per_sec)),
        ("sgld_wall_s", num(sgld_speed.wall_s)),
        ("sghmc_wall_s", num(sghmc_speed.wall_s)),
        ("sgld_datum_gradients", sgld_speed.datum_gradients.to_string()),
        ("sghmc_datum_gradients", sghmc_speed.datum_gradients.to_string()),
        ("sgld_max_sd_ratio", num(sgld_acc.max_sd_ratio)),
        ("sghmc_max_sd_ratio", num(sghmc_acc.max_sd_ratio)),
        ("sgld_step_size", num(SGLD_STEP)),
        ("sghmc_learning_rate", num(SGHMC_ETA)),
        ("sghmc_friction", num(SGHMC_FRICTION)),
        ("hessian_lambda_min", num(lambda_min)),
        ("hessian_lambda_max", num(lambda_max)),
        ("n_data", N_DATA.to_string()),
        ("dim", DIM.to_string()),
        ("batch_size", BATCH_SIZE.to_string()),
        ("n_chains", N_CHAINS.to_string()),
        ("n_iter_per_chain", N_ITER.to_string()),
        ("burn_in", BURN_IN.to_string()),
        ("threads", threads.to_string()),
        ("reference_seconds", num(ref_seconds)),
        ("total_seconds", num(total_seconds)),
    ];
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("RESULT {{{}}}", body.join(","));
    Ok(())
}

/// Accuracy of one sampler's pooled estimate against the MAP, in units of the Laplace sds.
struct Accuracy {
    mean: Vec<f64>,
    err_in_sd: Vec<f64>,
    mcse_in_sd: Vec<f64>,
    sd_ratio: Vec<f64>,
    max_abs_err: f64,
    max_err_in_sd: f64,
    max_mcse_in_sd: f64,
    max_sd_ratio: f64,
}

impl Accuracy {
    fn of(est: &Estimate, map: &[f64], laplace_sd: &[f64]) -> Result<Self, Box<dyn std::error::Error>> {
        let mean = est.mean()?.to_vec();
        let var = est.variance()?;
        let d = mean.len();
        // Monte Carlo standard error from the between-chain spread of the chain means (the chains
        // are independent and equally long, so the pooled mean is the average of the chain means).
        let k = est.n_parts();
        let mut chain_means = Vec::with_capacity(k);
        for c in 0..k {
            chain_means.push(est.part(c).ok_or("missing chain")?.mean()?);
        }
        let mcse_in_sd: Vec<f64> = (0..d)
            .map(|j| {
                if k < 2 {
                    return f64::NAN;
                }
                let m = chain_means.iter().map(|cm| cm[j]).sum::<f64>() / k as f64;
                let s2 = chain_means.iter().map(|cm| (cm[j] - m).powi(2)).sum::<f64>() / (k - 1) as f64;
                (s2 / k as f64).sqrt() / laplace_sd[j]
            })
            .collect();
        let err_in_sd: Vec<f64> = (0..d).map(|j| (mean[j] - map[j]) / laplace_sd[j]).collect();
        let sd_ratio: Vec<f64> = (0..d).map(|j| var[j].max(0.0).sqrt() / laplace_sd[j]).collect();
        let max_abs = |v: &mut dyn Iterator<Item = f64>| v.map(f64::abs).fold(0.0, f64::max);
        Ok(Accuracy {
            max_abs_err: max_abs(&mut (0..d).map(|j| mean[j] - map[j])),
            max_err_in_sd: max_abs(&mut err_in_sd.iter().copied()),
            max_mcse_in_sd: max_abs(&mut mcse_in_sd.iter().copied()),
            max_sd_ratio: max_abs(&mut sd_ratio.iter().copied()),
            mean,
            err_in_sd,
            mcse_in_sd,
            sd_ratio,
        })
    }
}

/// Speed and cost of one run.
struct Speed {
    wall_s: f64,
    iters_per_sec: f64,
    grads_per_sec: f64,
    per_chain_iters_per_sec: f64,
    datum_gradients: u64,
    epochs: f64,
}

impl Speed {
    fn of<S>(out: &RunOutput<S>, n_data: usize) -> Self {
        // Each chain's own rate (its iterations over its own wall time), averaged over chains.
        let per_chain = out.chains.iter().map(|c| c.iterations as f64 / c.wall_time.as_secs_f64()).sum::<f64>()
            / out.chains.len() as f64;
        Speed {
            wall_s: out.wall_time.as_secs_f64(),
            iters_per_sec: out.iterations_per_second(),
            grads_per_sec: out.datum_gradients_per_second(),
            per_chain_iters_per_sec: per_chain,
            datum_gradients: out.cost.datum_gradients,
            epochs: out.cost.epochs(n_data),
        }
    }
}

/// The largest eigenvalue of a symmetric positive definite matrix, by power iteration.
fn largest_eigenvalue(a: &Array2<f64>) -> f64 {
    let d = a.nrows();
    let mut v = Array1::from_elem(d, 1.0 / (d as f64).sqrt());
    let mut lambda = 0.0;
    for _ in 0..1000 {
        let w = a.dot(&v);
        let norm = w.dot(&w).sqrt();
        if norm == 0.0 || !norm.is_finite() {
            break;
        }
        lambda = v.dot(&w);
        v = w / norm;
    }
    lambda
}

/// A JSON number (a non-finite value becomes `null`, which JSON can represent).
fn num(x: f64) -> String {
    if x.is_finite() { format!("{x}") } else { "null".to_string() }
}
