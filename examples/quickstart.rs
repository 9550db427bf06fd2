//! Quickstart: the trustworthy path on a synthetic Bayesian logistic regression with N = 100 000
//! data and d = 10 parameters, checked against the MAP and the Laplace approximation (accurate
//! at this N).
//!
//! Run with `cargo run --release --example quickstart`. The last line of stdout is
//! `RESULT {json}`, a one-line machine-readable summary.
//!
//! No step size is set by hand. For each of SGLD-CV and SGHMC-CV (SGLD and SGHMC with the
//! control-variate gradient centred at the mode, Baker et al. 2019), one `Sample` call finds the
//! mode, whitens the posterior with the Hessian there (the default `Precondition::Auto`: dense at
//! this d), chooses the step for exactly this run (4 chains x 20 000 kept iterations), starts the
//! chains dispersed around the mode (twice the Laplace spread, so that split-R-hat can see a
//! failure to mix), runs them, estimates the step's bias with a companion at half the step (a
//! quarter of the run's cost) and states the verdict: whether the chains mixed, and the accuracy
//! of every mean and sd with the step bias included. The summary table marks any parameter that
//! did not mix and shows the estimated bias beside the Monte Carlo errors.

mod support;
use sgmcmc::prelude::*;
use sgmcmc::{Sghmc, SghmcSettings};
use std::time::Instant;
use support::spd_inverse;

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
/// Independent chains per sampler (run in parallel with rayon).
const N_CHAINS: usize = 4;
/// Iterations per chain, burn-in included.
const N_ITER: u64 = 22_000;
/// Iterations discarded at the start of each chain.
const BURN_IN: u64 = 2_000;
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
    let ref_seconds = t_ref.elapsed().as_secs_f64();
    println!("sgmcmc quickstart: Bayesian logistic regression on synthetic data");
    println!(
        "  N = {N_DATA}, d = {DIM}, prior N(0, {PRIOR_VAR} I), minibatch n = {BATCH_SIZE} (with replacement), \
         {N_CHAINS} chains x {N_ITER} iterations (burn-in {BURN_IN}) started dispersed around the mode"
    );
    println!("  reference: MAP (Newton) and Laplace sds from the inverse Hessian, {ref_seconds:.2} s");

    // --- The trustworthy path, one call per sampler: mode, whitening and step tuned for exactly
    // this run (stated once), dispersed starts, the run, a step-bias companion at a quarter of the
    // run's cost, the verdict with the bias in its bound, and the summary table. -----------------
    let theta0 = vec![0.0; DIM];
    let cv = ControlVariate::at_mode(
        &model,
        &theta0,
        &ModeSettings::default(),
        CvSettings { batch_size: BATCH_SIZE, ..Default::default() },
    )?;
    let names: Vec<String> = (0..DIM).map(|j| format!("beta[{j}]")).collect();
    let t_run = Instant::now();
    let sgld_cv = Sample::new(&model, Sgld::new(SgldSettings::default(), cv.clone())?)
        .draws(N_ITER - BURN_IN)
        .chains(N_CHAINS)
        .burn_in(BURN_IN)
        .seed(RUN_SEED)
        .names(&names)
        .run()?;
    let sghmc_cv = Sample::new(&model, Sghmc::new(SghmcSettings::default(), cv)?)
        .draws(N_ITER - BURN_IN)
        .chains(N_CHAINS)
        .burn_in(BURN_IN)
        .seed(RUN_SEED + 1)
        .names(&names)
        .run()?;
    let run_seconds = t_run.elapsed().as_secs_f64();
    let tune_seconds = (sgld_cv.tuned.wall_time + sghmc_cv.tuned.wall_time).as_secs_f64();
    println!("  tuning (both samplers) {tune_seconds:.2} s; tuning, runs and checks {run_seconds:.2} s");
    println!("  preconditioning: {}", sgld_cv.tuned.preconditioning);

    let accuracies =
        [report("SGLD-CV", &sgld_cv, &map, &laplace_sd)?, report("SGHMC-CV", &sghmc_cv, &map, &laplace_sd)?];

    // --- Throughput. --------------------------------------------------------------------------
    println!();
    let threads = rayon::current_num_threads();
    let sgld_speed = Speed::of(&sgld_cv.output, N_DATA);
    let sghmc_speed = Speed::of(&sghmc_cv.output, N_DATA);
    for (name, split, s) in
        [("SGLD-CV", Split::of(&sgld_cv), &sgld_speed), ("SGHMC-CV", Split::of(&sghmc_cv), &sghmc_speed)]
    {
        println!(
            "{name:>8}: {:.2} s wall for {N_CHAINS} chains on {threads} threads: {:.3e} iterations/s, \
             {:.3e} datum-gradients/s; run {} datum gradients = {:.0} epochs",
            s.wall_s, s.iters_per_sec, s.grads_per_sec, s.datum_gradients, s.epochs
        );
        println!(
            "{:>8}  setup: tuning {:.1} epochs ({:.1} of gradients, {:.1} of Hessian-vector products) in {:.2} s, \
             step-bias check {:.1} epochs in {:.2} s",
            "",
            split.tuning_epochs,
            split.tuning_gradient_epochs,
            split.tuning_hvp_epochs,
            split.tuning_s,
            split.check_epochs,
            split.check_s
        );
    }
    let (sgld_acc, sghmc_acc) = (&accuracies[0].0, &accuracies[1].0);
    let total_seconds = t_total.elapsed().as_secs_f64();
    println!("total time {total_seconds:.2} s");

    // --- Machine-readable summary: hand-formatted single-line JSON. ----------------------------
    let fields: Vec<(&str, String)> = vec![
        ("sgld_cv_step_size", num(sgld_cv.tuned.step_size)),
        ("sghmc_cv_step_size", num(sghmc_cv.tuned.step_size)),
        ("sgld_cv_stated_bound", num(accuracies[0].3)),
        ("sghmc_cv_stated_bound", num(accuracies[1].3)),
        ("sgld_cv_bias_check_cost", num(sgld_cv.convergence.bias_cost.unwrap_or(f64::NAN))),
        ("sgld_cv_max_mean_error_in_sd", num(sgld_acc.max_err_in_sd)),
        ("sghmc_cv_max_mean_error_in_sd", num(sghmc_acc.max_err_in_sd)),
        ("sgld_cv_min_sd_ratio", num(sgld_acc.min_sd_ratio)),
        ("sgld_cv_max_sd_ratio", num(sgld_acc.max_sd_ratio)),
        ("sghmc_cv_min_sd_ratio", num(sghmc_acc.min_sd_ratio)),
        ("sghmc_cv_max_sd_ratio", num(sghmc_acc.max_sd_ratio)),
        ("sgld_cv_converged", accuracies[0].1.to_string()),
        ("sghmc_cv_converged", accuracies[1].1.to_string()),
        ("sgld_cv_max_rhat", num(accuracies[0].2)),
        ("sghmc_cv_max_rhat", num(accuracies[1].2)),
        ("sgld_cv_iters_per_sec", num(sgld_speed.iters_per_sec)),
        ("sghmc_cv_iters_per_sec", num(sghmc_speed.iters_per_sec)),
        ("sgld_cv_datum_gradients", sgld_speed.datum_gradients.to_string()),
        ("sghmc_cv_datum_gradients", sghmc_speed.datum_gradients.to_string()),
        ("tuning_epochs", num(Split::of(&sgld_cv).tuning_epochs + Split::of(&sghmc_cv).tuning_epochs)),
        ("sgld_cv_tuning_epochs", num(Split::of(&sgld_cv).tuning_epochs)),
        ("sgld_cv_bias_check_epochs", num(Split::of(&sgld_cv).check_epochs)),
        ("sgld_cv_run_epochs", num(sgld_speed.epochs)),
        ("sgld_cv_tuning_seconds", num(Split::of(&sgld_cv).tuning_s)),
        ("sgld_cv_run_seconds", num(sgld_speed.wall_s)),
        ("sgld_cv_bias_check_seconds", num(Split::of(&sgld_cv).check_s)),
        ("n_data", N_DATA.to_string()),
        ("dim", DIM.to_string()),
        ("batch_size", BATCH_SIZE.to_string()),
        ("n_chains", N_CHAINS.to_string()),
        ("n_iter_per_chain", N_ITER.to_string()),
        ("burn_in", BURN_IN.to_string()),
        ("threads", threads.to_string()),
        ("reference_seconds", num(ref_seconds)),
        ("tuning_seconds", num(tune_seconds)),
        ("total_seconds", num(total_seconds)),
    ];
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("RESULT {{{}}}", body.join(","));
    Ok(())
}

/// Prints one sampler's step (whitened coordinates) and what `tune` predicted of this run before
/// it was made, the verdict with its Monte Carlo error and estimated step bias, the table, and
/// the accuracy against the Laplace approximation; returns the accuracy, whether the chains
/// mixed, the largest R-hat and the stated bound.
fn report<S>(
    name: &str,
    fit: &Sampled<S>,
    map: &[f64],
    laplace_sd: &[f64],
) -> Result<(Accuracy, bool, f64, f64), Box<dyn std::error::Error>> {
    let acc = Accuracy::of(fit.estimate(), map, laplace_sd)?;
    println!();
    println!("{name}: {fit}");
    println!(
        "  against the Laplace approximation: max |mean - MAP| = {:.3} sd, sd ratios {:.3}-{:.3}",
        acc.max_err_in_sd, acc.min_sd_ratio, acc.max_sd_ratio
    );
    let c = &fit.convergence;
    Ok((acc, c.converged, c.max_rhat, c.stated_bound()))
}

/// Accuracy of one sampler's pooled estimate against the MAP, in units of the Laplace sds.
struct Accuracy {
    max_err_in_sd: f64,
    max_sd_ratio: f64,
    min_sd_ratio: f64,
}

impl Accuracy {
    fn of(est: &Estimate, map: &[f64], laplace_sd: &[f64]) -> Result<Self, Box<dyn std::error::Error>> {
        let mean = est.mean()?;
        let var = est.variance()?;
        let d = mean.len();
        let sd_ratio: Vec<f64> = (0..d).map(|j| var[j].max(0.0).sqrt() / laplace_sd[j]).collect();
        Ok(Accuracy {
            max_err_in_sd: (0..d).map(|j| ((mean[j] - map[j]) / laplace_sd[j]).abs()).fold(0.0, f64::max),
            max_sd_ratio: sd_ratio.iter().copied().fold(0.0, f64::max),
            min_sd_ratio: sd_ratio.iter().copied().fold(f64::INFINITY, f64::min),
        })
    }
}

/// Speed and cost of one run.
struct Speed {
    wall_s: f64,
    iters_per_sec: f64,
    grads_per_sec: f64,
    datum_gradients: u64,
    epochs: f64,
}

impl Speed {
    fn of<S>(out: &RunOutput<S>, n_data: usize) -> Self {
        Speed {
            wall_s: out.wall_time.as_secs_f64(),
            iters_per_sec: out.iterations_per_second(),
            grads_per_sec: out.datum_gradients_per_second(),
            datum_gradients: out.cost.datum_gradients,
            epochs: out.cost.epochs(n_data),
        }
    }
}

/// A JSON number (a non-finite value becomes `null`, which JSON can represent).
/// Where a `Sample` call's work went: tuning (datum gradients and Hessian-vector products, in
/// epochs of N) and the step-bias check, with their wall times.
struct Split {
    tuning_epochs: f64,
    tuning_gradient_epochs: f64,
    tuning_hvp_epochs: f64,
    tuning_s: f64,
    check_epochs: f64,
    check_s: f64,
}

impl Split {
    fn of<S>(fit: &Sampled<S>) -> Split {
        let n = N_DATA as f64;
        let c = fit.tuned.cost;
        let (g, h) = (c.datum_gradients as f64 / n, c.datum_hvps as f64 / n);
        let (check_epochs, check_s) =
            fit.bias.as_ref().map_or((0.0, 0.0), |b| (b.cost.datum_gradients as f64 / n, b.wall_time.as_secs_f64()));
        Split {
            tuning_epochs: g + h,
            tuning_gradient_epochs: g,
            tuning_hvp_epochs: h,
            tuning_s: fit.tuned.wall_time.as_secs_f64(),
            check_epochs,
            check_s,
        }
    }
}

fn num(x: f64) -> String {
    if x.is_finite() { format!("{x}") } else { "null".to_string() }
}
