//! Reproduces the simulated-data experiment of Brosse, Durmus & Moulines, *The promises and
//! pitfalls of stochastic gradient Langevin dynamics* (NeurIPS 2018), §4, Figures 1 and 2: how far
//! the chain mean θ̄ₙ of LMC, SGLDFP, SGLD and SGD lands from the posterior mode θ* as the number
//! of data N grows, when the step size shrinks like 1/N and the run length grows like N.
//!
//! Run with `cargo run --release --example sgldfp_scaling`: 29 s wall, 56 s CPU (measured 2026-11-23 on an idle 2-core machine; longer when it is shared),
//! nearly all of it in the full-gradient LMC runs. Stage lines on stderr.
//!
//! Setup, as in the paper: Bayesian logistic regression in d = 2 without intercept, covariates
//! xᵢ ~ N(0, I₂), prior N(0, I), labels simulated from the model (here from a true θ with
//! N(0, 2) coordinates, [`LogisticRegression::synthetic`]). One data set of 10⁵ rows is drawn and
//! truncated to 10 values of N log-spaced from 10² to 10⁵. For each N: θ* is the exact mode
//! (Newton), the step is γ = 1/(1 + δ/4) with δ the largest eigenvalue of XᵀX (≈ N), every chain
//! starts at θ* and runs n = 1/γ iterations (≈ N/4), the first 10 % being discarded. The methods:
//! - LMC: `θ ← θ − γ∇U(θ) + √(2γ) Z` with the full gradient;
//! - SGLDFP: the same with the control-variate gradient centred at θ* (minibatch p);
//! - SGLD: the same with the plain minibatch gradient (minibatch p);
//! - SGD: `θ ← θ − γ∇Ũ(θ)` with the plain minibatch gradient, no noise (written out below: the
//!   crate has no SGD sampler).
//!
//! The paper does not state the minibatch size of this experiment; p = 10 (with replacement) is
//! used here. It averages over 100 trajectories, as this example does for SGLDFP, SGLD and SGD. A
//! full-gradient LMC run costs about N²/4 datum gradients (2.5·10⁹ at N = 10⁵), so LMC gets a fixed
//! budget per N instead: 100 runs up to N ≈ 4600, down to 2 runs at the largest N (the column
//! `R_lmc`); its standard errors show what that costs in precision.
//!
//! How to read the output. The first table gives, per N and method, the mean over the runs of the
//! distance ‖θ̄ₙ − θ*‖ (± its standard error), the quantity of the paper's Figure 1; the second the
//! distance from θ* of θ̄ₙ averaged over the runs, an estimate of ‖E θ̄ₙ − θ*‖ (the systematic part,
//! with Monte Carlo noise of about se/√R); the third the trace of the empirical covariance of the
//! chain (Figure 2, with the 1/(n − 1) normalisation of the paper), beside tr(H⁻¹) at θ*, the
//! Laplace approximation of the posterior's. Least-squares slopes of log
//! distance against log N follow: the paper reports −1 for LMC and SGLDFP and 0 for SGLD and SGD.
//! The figure is written to `target/sgldfp_scaling.svg`. The last line of stdout is
//! `RESULT {json}`, a one-line machine-readable summary.

#[path = "support/plot.rs"]
mod plot;

use ndarray::{Array1, Array2, s};
use rayon::prelude::*;
use sgmcmc::StepSize;
use sgmcmc::prelude::*;
use sgmcmc::{GradientEstimator, Storage};
use sgmcmc::{Moments, rng::stream};
use std::error::Error;
use std::time::Instant;

/// Largest number of data items; smaller data sets are its first rows.
const N_MAX: usize = 100_000;
/// Dimension d (no intercept).
const DIM: usize = 2;
/// Prior variance: prior N(0, I).
const PRIOR_VAR: f64 = 1.0;
/// Seed of the synthetic data set.
const DATA_SEED: u64 = 2018;
/// Number of values of N, log-spaced from 10² to 10⁵ (as in the paper).
const N_GRID: usize = 10;
/// Minibatch size p of SGLDFP, SGLD and SGD (with replacement); not stated in the paper.
const BATCH_SIZE: usize = 10;
/// Independent runs per (N, method) for SGLDFP, SGLD and SGD, as in the paper.
const N_RUNS: usize = 100;
/// LMC's budget per value of N, in datum gradients: a run costs about N²/4 of them (10¹⁰ over
/// the grid for one run each), so LMC gets `LMC_BUDGET / (n·N)` runs, between
/// [`LMC_MIN_RUNS`] and [`N_RUNS`].
const LMC_BUDGET: f64 = 1e9;
/// The fewest LMC runs per value of N (two, for a standard error).
const LMC_MIN_RUNS: usize = 2;
/// Master seed of the runs.
const RUN_SEED: u64 = 4_2018;

/// The four methods, in table order.
const METHODS: [&str; 4] = ["LMC", "SGLDFP", "SGLD", "SGD"];

/// What the runs of one method at one N give.
#[derive(Debug, Clone, Default)]
struct Summary {
    /// Mean over runs of ‖θ̄ₙ − θ*‖.
    dist: f64,
    /// Its standard error.
    dist_se: f64,
    /// ‖(mean over runs of θ̄ₙ) − θ*‖.
    bias: f64,
    /// Mean over runs of tr(empirical covariance of the chain), with the 1/(n − 1) normalisation.
    trace: f64,
    /// Its standard error.
    trace_se: f64,
    /// Datum-gradient evaluations of all runs.
    cost: u64,
}

impl Summary {
    /// Summarises per-run chain means and covariance traces.
    fn of(means: &[Array1<f64>], traces: &[f64], mode: &Array1<f64>, cost: u64) -> Self {
        let r = means.len() as f64;
        let dists: Vec<f64> = means.iter().map(|m| norm(&(m - mode))).collect();
        let (dist, dist_se) = mean_se(&dists);
        let (trace, trace_se) = mean_se(traces);
        let avg = means.iter().fold(Array1::zeros(mode.len()), |acc, m| acc + m) / r;
        Summary { dist, dist_se, bias: norm(&(avg - mode)), trace, trace_se, cost }
    }
}

fn norm(v: &Array1<f64>) -> f64 {
    v.dot(v).sqrt()
}

/// Mean and standard error of the mean.
fn mean_se(x: &[f64]) -> (f64, f64) {
    let k = x.len() as f64;
    let m = x.iter().sum::<f64>() / k;
    let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (k - 1.0).max(1.0);
    (m, (var / k).sqrt())
}

/// Per-run chain means and covariance traces.
type PerRun = (Vec<Array1<f64>>, Vec<f64>);

/// Per-run chain means and covariance traces (1/(n − 1) normalisation) from a multi-chain run.
fn per_chain(est: &Estimate) -> Result<PerRun, Box<dyn Error>> {
    let mut means = Vec::with_capacity(est.n_parts());
    let mut traces = Vec::with_capacity(est.n_parts());
    for c in 0..est.n_parts() {
        let part = est.part(c).ok_or("missing chain in the estimate")?;
        let n = part.n_samples() as f64;
        means.push(part.mean()?);
        // The estimate's covariance is the plug-in one (divided by n); the paper divides by n − 1.
        traces.push(part.covariance()?.diag().sum() * n / (n - 1.0));
    }
    Ok((means, traces))
}

/// SGD `θ ← θ − γ∇Ũ(θ)` with minibatches of `BATCH_SIZE` from `theta0`: `n_runs` independent runs
/// (run c uses `stream(seed, [c])`, as the runner's chains do); per-run means and covariance traces
/// of the iterates after `burn_in`, and the total cost in datum gradients.
fn sgd_runs(
    model: &LogisticRegression,
    n_runs: usize,
    theta0: &[f64],
    gamma: f64,
    n_iter: u64,
    burn_in: u64,
    seed: u64,
) -> Result<(PerRun, u64), Box<dyn Error>> {
    let one = |c: usize| -> sgmcmc::Result<(Estimate, u64)> {
        let mut rng = stream(seed, &[c as u64]);
        let mut est = Minibatch::new(BATCH_SIZE);
        est.prepare(model)?;
        let mut theta = theta0.to_vec();
        let mut g = vec![0.0; theta.len()];
        let mut moments = Moments::new(theta.len());
        for k in 1..=n_iter {
            est.estimate(model, &theta, &mut rng, &mut g).unwrap();
            for (t, gi) in theta.iter_mut().zip(&g) {
                *t -= gamma * gi;
            }
            if k > burn_in {
                moments.push(&theta, 1.0)?;
            }
        }
        Ok((Estimate::from_moments(moments), est.n_datum_gradients()))
    };
    let results: Vec<sgmcmc::Result<(Estimate, u64)>> = (0..n_runs).into_par_iter().map(one).collect();
    let mut parts = Vec::with_capacity(n_runs);
    let mut cost = 0;
    for r in results {
        let (e, c) = r?;
        parts.push(e);
        cost += c;
    }
    Ok((per_chain(&Estimate::combine(parts)?)?, cost))
}

/// The largest eigenvalue of XᵀX for two columns, in closed form.
fn largest_eigenvalue_gram(x: &Array2<f64>) -> f64 {
    let (c0, c1) = (x.column(0), x.column(1));
    let (a, b, c) = (c0.dot(&c0), c0.dot(&c1), c1.dot(&c1));
    0.5 * (a + c) + (0.25 * (a - c).powi(2) + b * b).sqrt()
}

/// Least-squares slope of log y against log x, with its standard error (`None` with fewer than
/// three usable points).
fn loglog_slope(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> =
        x.iter().zip(y).filter(|(a, b)| **a > 0.0 && **b > 0.0).map(|(a, b)| (a.ln(), b.ln())).collect();
    if pts.len() < 3 {
        return None;
    }
    let k = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / k, pts.iter().map(|p| p.1).sum::<f64>() / k);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = sxy / sxx;
    let ssr: f64 = pts.iter().map(|p| (p.1 - my - b * (p.0 - mx)).powi(2)).sum();
    Some((b, (ssr / (k - 2.0) / sxx).sqrt()))
}

/// A JSON number (`null` if not finite).
fn num(x: f64) -> String {
    if x.is_finite() { format!("{x:e}") } else { "null".to_string() }
}

fn json_array<T, F: Fn(&T) -> String>(v: &[T], f: F) -> String {
    format!("[{}]", v.iter().map(f).collect::<Vec<_>>().join(","))
}

fn main() -> Result<(), Box<dyn Error>> {
    let t_total = Instant::now();
    let full = LogisticRegression::synthetic(N_MAX, DIM, PRIOR_VAR, DATA_SEED)?;
    let features = full.features();
    let labels = full.labels();
    let n_grid: Vec<usize> =
        (0..N_GRID).map(|k| (10f64.powf(2.0 + 3.0 * k as f64 / (N_GRID - 1) as f64)).round() as usize).collect();

    println!(
        "SGLDFP paper (Brosse, Durmus & Moulines 2018) section 4, simulated data: distance of the chain mean to the mode"
    );
    println!(
        "  logistic regression, d = {DIM}, no intercept, x_i ~ N(0, I), prior N(0, {PRIOR_VAR} I), labels simulated \
         (true theta = {:.3?}), one data set of {N_MAX} rows truncated to each N",
        full.true_theta().map(|t| t.to_vec()).unwrap_or_default()
    );
    println!(
        "  gamma = 1/(1 + delta/4), delta = lambda_max(X^T X); n = round(1/gamma) iterations from theta*, first 10% \
         discarded; minibatch p = {BATCH_SIZE} (with replacement; the paper does not state p); {N_RUNS} independent \
         runs per point (paper: 100), except LMC: R_lmc runs, a budget of {LMC_BUDGET:e} datum gradients per N"
    );
    println!();

    // results[i][m]: N index i, method m.
    let mut results: Vec<Vec<Summary>> = Vec::with_capacity(N_GRID);
    let mut gammas = Vec::with_capacity(N_GRID);
    let mut lmc_runs = Vec::with_capacity(N_GRID);
    let mut iters = Vec::with_capacity(N_GRID);
    let mut laplace_traces = Vec::with_capacity(N_GRID);
    let mut method_seconds = [0.0f64; 4];
    for (i, &n) in n_grid.iter().enumerate() {
        eprintln!("  [progress] {:.0} s: N = {n} ({}/{})", t_total.elapsed().as_secs_f64(), i + 1, n_grid.len());
        let x = features.slice(s![..n, ..]).to_owned();
        let y = Array1::from_vec(labels[..n].to_vec());
        let delta = largest_eigenvalue_gram(&x);
        let model = LogisticRegression::new(&x, &y, PRIOR_VAR)?;
        let mode = model.map()?;
        let theta_star = mode.to_vec();
        let h = model.hessian(&theta_star)?;
        let det = h[[0, 0]] * h[[1, 1]] - h[[0, 1]] * h[[1, 0]];
        laplace_traces.push((h[[0, 0]] + h[[1, 1]]) / det);

        let gamma = 1.0 / (1.0 + delta / 4.0);
        let n_iter = (1.0 / gamma).round().max(2.0) as u64;
        let burn_in = n_iter / 10;
        gammas.push(gamma);
        iters.push(n_iter);
        let step = SgldSettings { step_size: StepSize::Constant(gamma) };
        let r_lmc = ((LMC_BUDGET / (n_iter as f64 * n as f64)) as usize).clamp(LMC_MIN_RUNS, N_RUNS);
        lmc_runs.push(r_lmc);
        let settings = |m: u64, n_chains: usize| RunSettings {
            n_iter,
            burn_in,
            thin: 1,
            n_chains,
            seed: RUN_SEED + 16 * i as u64 + m,
            storage: Storage::Moments,
            parallel: true,
            ..Default::default()
        };

        let mut row = Vec::with_capacity(4);
        let t = Instant::now();
        let out = Runner::new(&model, &Sgld::lmc(step)?).start(&theta_star).settings(settings(0, r_lmc)).run()?;
        let (m, tr) = per_chain(&out.estimate)?;
        row.push(Summary::of(&m, &tr, &mode, out.cost.datum_gradients));
        method_seconds[0] += t.elapsed().as_secs_f64();

        let t = Instant::now();
        let cv = ControlVariate::at(&model, &theta_star, CvSettings { batch_size: BATCH_SIZE, ..Default::default() })?;
        let out = Runner::new(&model, &Sgld::new(step, cv)?).start(&theta_star).settings(settings(1, N_RUNS)).run()?;
        let (m, tr) = per_chain(&out.estimate)?;
        row.push(Summary::of(&m, &tr, &mode, out.cost.datum_gradients));
        method_seconds[1] += t.elapsed().as_secs_f64();

        let t = Instant::now();
        let out = Runner::new(&model, &Sgld::new(step, Minibatch::new(BATCH_SIZE))?)
            .start(&theta_star)
            .settings(settings(2, N_RUNS))
            .run()?;
        let (m, tr) = per_chain(&out.estimate)?;
        row.push(Summary::of(&m, &tr, &mode, out.cost.datum_gradients));
        method_seconds[2] += t.elapsed().as_secs_f64();

        let t = Instant::now();
        let ((m, tr), cost) =
            sgd_runs(&model, N_RUNS, &theta_star, gamma, n_iter, burn_in, RUN_SEED + 16 * i as u64 + 3)?;
        row.push(Summary::of(&m, &tr, &mode, cost));
        method_seconds[3] += t.elapsed().as_secs_f64();
        results.push(row);
    }

    // --- Tables. ----------------------------------------------------------------------------------
    let col = |i: usize, m: usize| &results[i][m];
    println!("Figure 1: mean over runs of |theta_bar_n - theta*| (+- standard error); {N_RUNS} runs, LMC R_lmc runs");
    print!("{:>7} {:>10} {:>7} {:>5}", "N", "gamma", "iters", "R_lmc");
    for name in METHODS {
        print!(" {name:>21}");
    }
    println!();
    for (i, &n) in n_grid.iter().enumerate() {
        print!("{n:>7} {:>10.3e} {:>7} {:>5}", gammas[i], iters[i], lmc_runs[i]);
        for m in 0..4 {
            print!(" {:>10.3e} +- {:>7.1e}", col(i, m).dist, col(i, m).dist_se);
        }
        println!();
    }
    println!();
    println!(
        "Systematic part: |(theta_bar_n averaged over runs) - theta*|, estimates |E theta_bar_n - theta*| \
         (Monte Carlo noise about se / sqrt(runs))"
    );
    print!("{:>7}", "N");
    for name in METHODS {
        print!(" {name:>10}");
    }
    println!();
    for (i, &n) in n_grid.iter().enumerate() {
        print!("{n:>7}");
        for m in 0..4 {
            print!(" {:>10.3e}", col(i, m).bias);
        }
        println!();
    }
    println!();
    println!(
        "Figure 2: mean over runs of the trace of the chain's empirical covariance (+- se); tr(H^-1) at theta* for scale"
    );
    print!("{:>7} {:>10}", "N", "tr(H^-1)");
    for name in METHODS {
        print!(" {name:>21}");
    }
    println!();
    for (i, &n) in n_grid.iter().enumerate() {
        print!("{n:>7} {:>10.3e}", laplace_traces[i]);
        for m in 0..4 {
            print!(" {:>10.3e} +- {:>7.1e}", col(i, m).trace, col(i, m).trace_se);
        }
        println!();
    }

    // --- Slopes. ----------------------------------------------------------------------------------
    let nf: Vec<f64> = n_grid.iter().map(|&n| n as f64).collect();
    let series = |m: usize, f: fn(&Summary) -> f64| -> Vec<f64> { results.iter().map(|r| f(&r[m])).collect() };
    let slope = |y: &[f64]| loglog_slope(&nf, y).unwrap_or((f64::NAN, f64::NAN));
    let dist_slopes: Vec<(f64, f64)> = (0..4).map(|m| slope(&series(m, |s| s.dist))).collect();
    let bias_slopes: Vec<(f64, f64)> = (0..4).map(|m| slope(&series(m, |s| s.bias))).collect();
    let trace_slopes: Vec<(f64, f64)> = (0..4).map(|m| slope(&series(m, |s| s.trace))).collect();
    println!();
    println!("Least-squares slopes of log(quantity) against log(N) over the 10 points (+- standard error of the fit):");
    println!("{:>8} {:>18} {:>18} {:>18}", "method", "distance (Fig. 1)", "systematic part", "trace cov (Fig. 2)");
    for m in 0..4 {
        println!(
            "{:>8} {:>9.3} +- {:>5.3} {:>9.3} +- {:>5.3} {:>9.3} +- {:>5.3}",
            METHODS[m],
            dist_slopes[m].0,
            dist_slopes[m].1,
            bias_slopes[m].0,
            bias_slopes[m].1,
            trace_slopes[m].0,
            trace_slopes[m].1
        );
    }
    println!("  paper (Fig. 1): slope -1 for LMC and SGLDFP, about 0 (a constant) for SGLD and SGD.");

    // --- Plot. ------------------------------------------------------------------------------------
    let svg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("sgldfp_scaling.svg");
    let mut lines: Vec<plot::Series> = (0..4)
        .map(|m| plot::Series::new(METHODS[m], nf.iter().copied().zip(series(m, |s| s.dist)).collect()))
        .collect();
    // A reference line of slope −1 through LMC's first point.
    let anchor = results[0][0].dist * nf[0];
    lines.push(plot::Series::dashed(
        "slope -1",
        vec![(nf[0], anchor / nf[0]), (nf[N_GRID - 1], anchor / nf[N_GRID - 1])],
    ));
    plot::loglog_svg(
        &svg,
        &format!("Distance of the chain mean to the mode, d = 2, p = {BATCH_SIZE}"),
        "N (number of data)",
        "mean |theta_bar_n - theta*|",
        &lines,
    )?;
    let total_seconds = t_total.elapsed().as_secs_f64();
    println!();
    println!("plot written to {}", svg.display());
    println!(
        "time: LMC {:.1} s, SGLDFP {:.1} s, SGLD {:.1} s, SGD {:.1} s; total {total_seconds:.1} s on {} threads",
        method_seconds[0],
        method_seconds[1],
        method_seconds[2],
        method_seconds[3],
        rayon::current_num_threads()
    );

    // --- Machine-readable summary. ----------------------------------------------------------------
    let key = ["lmc", "sgldfp", "sgld", "sgd"];
    let mut fields: Vec<(String, String)> = Vec::new();
    // One field per method, named `{prefix}_{method}`.
    let per_method = |fields: &mut Vec<(String, String)>, prefix: &str, values: Vec<String>| {
        for (k, v) in key.iter().zip(values) {
            fields.push((format!("{prefix}_{k}"), v));
        }
    };
    per_method(&mut fields, "slope", dist_slopes.iter().map(|s| num(s.0)).collect());
    per_method(&mut fields, "slope_se", dist_slopes.iter().map(|s| num(s.1)).collect());
    per_method(&mut fields, "slope_bias", bias_slopes.iter().map(|s| num(s.0)).collect());
    per_method(&mut fields, "slope_trace", trace_slopes.iter().map(|s| num(s.0)).collect());
    fields.push(("n_data".into(), json_array(&n_grid, |n| n.to_string())));
    fields.push(("gamma".into(), json_array(&gammas, |g| num(*g))));
    fields.push(("n_iter".into(), json_array(&iters, |n| n.to_string())));
    let arrays = |f: fn(&Summary) -> f64| (0..4).map(|m| json_array(&series(m, f), |v| num(*v))).collect();
    per_method(&mut fields, "dist", arrays(|s| s.dist));
    per_method(&mut fields, "dist_se", arrays(|s| s.dist_se));
    per_method(&mut fields, "bias", arrays(|s| s.bias));
    per_method(&mut fields, "trace", arrays(|s| s.trace));
    per_method(&mut fields, "datum_gradients", arrays(|s| s.cost as f64));
    fields.push(("laplace_trace".into(), json_array(&laplace_traces, |v| num(*v))));
    fields.push(("runs_per_point".into(), N_RUNS.to_string()));
    fields.push(("runs_per_point_lmc".into(), json_array(&lmc_runs, |r| r.to_string())));
    fields.push(("lmc_budget_per_point".into(), num(LMC_BUDGET)));
    fields.push(("batch_size".into(), BATCH_SIZE.to_string()));
    fields.push(("dim".into(), DIM.to_string()));
    fields.push(("prior_var".into(), num(PRIOR_VAR)));
    fields.push(("data_seed".into(), DATA_SEED.to_string()));
    fields.push(("total_seconds".into(), num(total_seconds)));
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("RESULT {{{}}}", body.join(","));
    Ok(())
}
