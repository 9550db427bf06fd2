//! Multilevel SGLD on Bayesian logistic regression: a reproduction of §4 (Figs. 2 and 3) of Giles,
//! Nagapetyan, Szpruch, Vollmer & Zygalakis, *Multilevel Monte Carlo for scalable Bayesian
//! computations* (arXiv:1609.06144).
//!
//! Run with `cargo run --release --example mlsgld_logistic` (23 s wall, 45 s CPU, measured 2026-11-23 on an idle 2-core machine; longer when it is shared;
//! the MALA references at the largest N take most of it).
//!
//! Model: logistic regression with d = 3 (two N(0, 1) covariates plus an intercept column of
//! ones), prior N(0, I), labels drawn from a fixed true θ; one seeded data set of 10 000 rows,
//! truncated to N ∈ {100, 316, 1000, 3162, 10000}. Test function g(θ) = ‖θ − θ_MAP‖², multilevel
//! settings as in the paper: start at the MAP, h₀ = 1/N, horizon m = 5 (T_l = 5(l + 1)h₀),
//! minibatches of n = 10 drawn with replacement.
//!
//! Part 1 (Fig. 2), at N = 1000: the variance V_l = Var[Δ_l] of the level corrections for
//! l = 1..6 and the fitted decay rate β (least-squares slope of −log₂ V_l against l, so
//! V_l ∝ 2^(−βl)) for (a) Algorithm 1 (subsampling coupling) with plain minibatch gradients,
//! (b) the antithetic coupling with plain minibatch gradients, (c) the antithetic coupling with
//! Taylor gradients, and (d) as (c) with path averaging over the last W = 2.5 h₀ of time (half
//! the level-0 horizon, the same window for fine and coarse paths). Plot: `target/mlsgld_variance.svg`.
//!
//! Part 2 (Fig. 3): the cost to reach a relative RMSE of 10 % as N grows. The target is
//! ε = 0.1 · E_π[g], with E_π[g] from a long MALA reference per N (two chains from the MAP, step
//! adapted to acceptance 0.574 during a discarded burn-in). Costs are datum evaluations:
//! * MALA: 2N per iteration (N datum gradients + N datum potentials) times the number of
//!   iterations needed, `Var_π(g) · τ / ε²`, where τ = draws / ESS is the integrated
//!   autocorrelation time of g from the reference chains (`diagnostics::ess_mean`). Burn-in is
//!   not charged (the chains start at the MAP), which favours MALA.
//! * Adaptive ML-SGLD (`run_adaptive` with `target: RmseTarget::Absolute(ε)`; its own variance + bias estimate decides when
//!   to stop): the cost it actually spent, `result.cost` datum gradients + Hessian-vector
//!   products, the Taylor setup (N gradients + 3N Hessian-vector products at the MAP) included;
//!   the sampling part alone is printed too. Antithetic coupling with Taylor gradients (with and
//!   without averaging) over several seeds (mean cost reported), and with plain minibatch
//!   gradients (one seed, under a budget cap; `null` if the cap is hit).
//!
//! The empirical relative RMSE of the adaptive runs against the MALA reference is printed (it
//! should be ≈ 0.1 or below; the reference's own Monte Carlo error is printed beside it), and at
//! N = 1000 the empirical MSE against cost for several ε (MSE ∝ cost⁻¹ means slope −1).
//!
//! How to read the output: the paper claims β ≈ 1 for Algorithm 1 and β ≈ 2 for the antithetic
//! coupling, and that the cost of antithetic ML-SGLD with Taylor gradients grows sublinearly in N
//! (log-log slope < 1) while MALA's grows like N (slope ≈ 1, constant epochs). The last line is
//! `RESULT {json}` with per-N costs, the fitted cost slopes and the decay rates.

#[path = "support/plot.rs"]
mod plot;

use ndarray::{Array1, Array2, s};
use rand::RngExt;
use rand_distr::{Distribution, StandardNormal};
use sgmcmc::Runner;
use sgmcmc::diagnostics::{chains_of, ess_mean};
use sgmcmc::rng::stream;
use sgmcmc::{
    AdaptiveSettings, CvSettings, Error as SgError, LevelStats, LogisticRegression, Mala, MalaSettings, Minibatch,
    MlCoupling, MlSgld, MlSgldSettings, MlmcResult, RunSettings, SubsampledDiscretisation, Taylor,
};
use std::error::Error;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn Error>>;

const N_MAX: usize = 10_000;
const NS: [usize; 5] = [100, 316, 1000, 3162, 10_000];
const THETA_TRUE: [f64; 3] = [1.0, -1.5, 0.5];
const BATCH: usize = 10;
const HORIZON: usize = 5;
const REL: f64 = 0.1;
/// Averaging window in units of h₀ (half the level-0 horizon).
const WINDOW: f64 = 2.5;
/// Part 1: the N, the levels and the samples per level.
const DECAY_N: usize = 1000;
const DECAY_LEVELS: usize = 6;
const DECAY_SAMPLES: usize = 3000;
/// Seeds per N for the adaptive Taylor runs.
const SEEDS: u64 = 6;
/// Budget cap (datum evaluations) of the plain-minibatch adaptive runs.
const MINIBATCH_CAP: u64 = 300_000_000;

/// Features (two N(0, 1) covariates and a column of ones) and labels from `THETA_TRUE`.
fn data() -> (Array2<f64>, Array1<f64>) {
    let mut rng = stream(1609_06144, &[7]);
    let mut x = Array2::ones((N_MAX, 3));
    for i in 0..N_MAX {
        for j in 0..2 {
            x[[i, j]] = StandardNormal.sample(&mut rng);
        }
    }
    let y = Array1::from_shape_fn(N_MAX, |i| {
        let z: f64 = x.row(i).iter().zip(THETA_TRUE).map(|(a, b)| a * b).sum();
        let p = 1.0 / (1.0 + (-z).exp());
        if rng.random::<f64>() < p { 1.0 } else { 0.0 }
    });
    (x, y)
}

/// Least-squares slope of y against x.
fn slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return f64::NAN;
    }
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

/// Log-log slope over the points with a finite positive value.
fn loglog_slope(pts: &[(f64, Option<f64>)]) -> f64 {
    let v: Vec<(f64, f64)> =
        pts.iter().filter_map(|(x, y)| y.filter(|y| *y > 0.0 && y.is_finite()).map(|y| (x.ln(), y.ln()))).collect();
    slope(&v)
}

fn json_num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.4e}"),
        _ => "null".to_string(),
    }
}

/// V_l for l = 1..=DECAY_LEVELS.
fn decay<E: SubsampledDiscretisation, G: Fn(&[f64]) -> f64 + Sync>(
    ml: &MlSgld<E>,
    model: &LogisticRegression,
    g: &G,
) -> Res<Vec<LevelStats>> {
    let mut out = Vec::new();
    for l in 1..=DECAY_LEVELS {
        out.push(ml.level(model, g, l, DECAY_SAMPLES)?);
    }
    Ok(out)
}

fn taylor(model: &LogisticRegression, map: &[f64]) -> Res<Taylor> {
    let cv = CvSettings { batch_size: BATCH, replacement: true, cache_centre_gradients: true };
    Ok(Taylor::at(model, map, cv)?)
}

fn settings(coupling: MlCoupling, window: Option<f64>, seed: u64) -> MlSgldSettings {
    MlSgldSettings { horizon: HORIZON, coupling, averaging_window: window, seed, ..Default::default() }
}

fn total(r: &MlmcResult) -> f64 {
    (r.cost.datum_gradients + r.cost.datum_hvps) as f64
}

/// The MALA reference of one N.
struct Reference {
    mean: f64,
    var: f64,
    tau: f64,
    mcse: f64,
    accept: f64,
    step: f64,
}

fn mala_reference<G: Fn(&[f64]) -> f64>(model: &LogisticRegression, map: &[f64], g: &G, n: usize) -> Res<Reference> {
    let burn = 4000;
    let mala = Mala::new(MalaSettings {
        step_size: 0.5 / n as f64,
        adapt_steps: burn,
        target_accept: 0.574,
        metric: sgmcmc::Metric::Identity,
        ..Default::default()
    })?;
    let rs =
        RunSettings { n_iter: burn + 20_000, burn_in: burn, n_chains: 2, seed: 77 + n as u64, ..Default::default() };
    let out = Runner::new(model, &mala).start(map).settings(rs).run()?;
    let vals = chains_of(&out.estimate, |t| t.as_slice().map_or(f64::NAN, g))?;
    let count = vals.len() as f64;
    let mean = vals.iter().sum::<f64>() / count;
    let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1.0);
    let ess = ess_mean(vals.view())?;
    let accept =
        out.chains.iter().map(|c| c.sampler.acceptance_rate_after_adaptation()).sum::<f64>() / out.chains.len() as f64;
    let step = out.chains.first().map_or(f64::NAN, |c| c.sampler.step_size());
    Ok(Reference { mean, var, tau: count / ess, mcse: (var / ess).sqrt(), accept, step })
}

/// Adaptive runs over `seeds`: (mean total cost, mean sampling cost, estimates, mean levels).
struct Adaptive {
    cost: f64,
    sampling: f64,
    estimates: Vec<f64>,
    levels: f64,
    /// Mean of the run's own MSE estimate, variance + bias estimate².
    est_mse: f64,
}

fn adaptive<E: SubsampledDiscretisation, G: Fn(&[f64]) -> f64 + Sync>(
    make: &dyn Fn(u64) -> Res<MlSgld<E>>,
    model: &LogisticRegression,
    g: &G,
    target: &AdaptiveSettings,
    seeds: std::ops::Range<u64>,
) -> Res<Option<Adaptive>> {
    let (mut cost, mut sampling, mut levels, mut estimates, mut est_mse) = (0.0, 0.0, 0.0, Vec::new(), 0.0);
    for seed in seeds {
        eprintln!("  [progress] adaptive ML-SGLD, seed {seed}");
        let ml = make(seed)?;
        let r = match ml.run_adaptive(model, g, target) {
            Ok(r) => r,
            Err(SgError::BudgetExhausted { reason, datum_evaluations, estimated_rmse, .. }) => {
                println!(
                    "    (seed {seed}: budget exhausted — {reason}; spent {datum_evaluations}, est. RMSE {estimated_rmse:.3e})"
                );
                return Ok(None);
            }
            Err(e @ SgError::NotRelaxed { .. }) => {
                println!("    (seed {seed}: refused — {e})");
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        cost += total(&r);
        sampling += r.levels.iter().map(|l| (l.cost.datum_gradients + l.cost.datum_hvps) as f64).sum::<f64>();
        levels += r.levels.len() as f64;
        estimates.push(r.estimate);
        est_mse += r.variance + r.bias_estimate.unwrap_or(0.0).powi(2);
    }
    let k = estimates.len() as f64;
    Ok(Some(Adaptive { cost: cost / k, sampling: sampling / k, estimates, levels: levels / k, est_mse: est_mse / k }))
}

fn rel_rmse(est: &[f64], truth: f64) -> f64 {
    (est.iter().map(|e| (e - truth).powi(2)).sum::<f64>() / est.len() as f64).sqrt() / truth
}

fn model_of(x: &Array2<f64>, y: &Array1<f64>, n: usize) -> Res<(LogisticRegression, Vec<f64>)> {
    let model = LogisticRegression::new(&x.slice(s![..n, ..]).to_owned(), &y.slice(s![..n]).to_owned(), 1.0)?;
    let map = model.map()?.to_vec();
    Ok((model, map))
}

fn g_of(map: Vec<f64>) -> impl Fn(&[f64]) -> f64 + Sync {
    move |t: &[f64]| t.iter().zip(&map).map(|(a, b)| (a - b).powi(2)).sum::<f64>()
}

/// Part 1: returns the decay rates (alg1, antithetic, antithetic Taylor, antithetic Taylor avg).
fn part1(x: &Array2<f64>, y: &Array1<f64>) -> Res<[f64; 4]> {
    let n = DECAY_N;
    let (model, map) = model_of(x, y, n)?;
    let g = g_of(map.clone());
    println!(
        "== Part 1: Var[Δ_l] per level at N = {n} (n = {BATCH}, h₀ = 1/N, m = {HORIZON}, {DECAY_SAMPLES} samples/level)"
    );
    let names = ["Alg. 1, minibatch", "antithetic, minibatch", "antithetic, Taylor", "antith., Taylor, avg W=2.5h₀"];
    let a = decay(
        &MlSgld::sgld(settings(MlCoupling::Subsampling, None, 11), 1.0 / n as f64, Minibatch::new(BATCH), &map)?,
        &model,
        &g,
    )?;
    let b = decay(
        &MlSgld::sgld(settings(MlCoupling::Antithetic, None, 12), 1.0 / n as f64, Minibatch::new(BATCH), &map)?,
        &model,
        &g,
    )?;
    let t = taylor(&model, &map)?;
    let c =
        decay(&MlSgld::sgld(settings(MlCoupling::Antithetic, None, 13), 1.0 / n as f64, t.clone(), &map)?, &model, &g)?;
    let d =
        decay(&MlSgld::sgld(settings(MlCoupling::Antithetic, Some(WINDOW), 14), 1.0 / n as f64, t, &map)?, &model, &g)?;
    let all = [a, b, c, d];
    print!("{:>5}", "l");
    for nm in names {
        print!(" {nm:>29}");
    }
    println!();
    for l in 0..DECAY_LEVELS {
        print!("{:>5}", l + 1);
        for s in &all {
            print!(" {:>29.3e}", s[l].variance);
        }
        println!();
    }
    print!("{:>5}", "cost");
    for s in &all {
        print!(" {:>29}", format!("{:.0}/sample @ l={DECAY_LEVELS}", s[DECAY_LEVELS - 1].cost_per_sample));
    }
    println!();
    let mut betas = [0.0; 4];
    let mut series = Vec::new();
    print!("{:>5}", "β");
    for (k, s) in all.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.iter().map(|st| (st.level as f64, -st.variance.log2())).collect();
        betas[k] = slope(&pts);
        print!(" {:>29.2}", betas[k]);
        series.push(plot::Series::new(
            format!("{} (β = {:.2})", names[k], betas[k]),
            s.iter().map(|st| ((1u64 << st.level) as f64, st.variance)).collect(),
        ));
    }
    println!(
        "\n(β: least-squares slope of −log₂ V_l over l = 1..{DECAY_LEVELS}; paper: ≈1 for Alg. 1, ≈2 antithetic)\n"
    );
    let v1 = all[0][0].variance;
    for (b, name) in [(1.0, "2^(−l) reference"), (2.0, "4^(−l) reference")] {
        let pts = (1..=DECAY_LEVELS).map(|l| ((1u64 << l) as f64, v1 * 2f64.powf(-b * (l as f64 - 1.0)))).collect();
        series.push(plot::Series::dashed(name, pts));
    }
    plot::loglog_svg(
        "target/mlsgld_variance.svg",
        &format!("ML-SGLD: Var[Δ_l] at N = {n}, logistic regression d = 3"),
        "2^l = h₀ / h_l",
        "Var[Δ_l]",
        &series,
    )?;
    Ok(betas)
}

struct Row {
    n: usize,
    reference: Reference,
    cost_mala: f64,
    taylor: Option<Adaptive>,
    taylor_avg: Option<Adaptive>,
    minibatch: Option<Adaptive>,
}

fn part2_one(x: &Array2<f64>, y: &Array1<f64>, n: usize) -> Res<Row> {
    let t0 = Instant::now();
    eprintln!("  [progress] N = {n}: MALA reference and ML-SGLD");
    let (model, map) = model_of(x, y, n)?;
    let g = g_of(map.clone());
    let reference = mala_reference(&model, &map, &g, n)?;
    let eps = REL * reference.mean;
    let iters = reference.var * reference.tau / (eps * eps);
    let cost_mala = 2.0 * n as f64 * iters;
    let target =
        AdaptiveSettings { target: sgmcmc::RmseTarget::Absolute(eps), n_initial: 200, max_level: 10, max_cost: None };
    let tay = taylor(&model, &map)?;
    let make_t =
        |seed: u64| Ok(MlSgld::sgld(settings(MlCoupling::Antithetic, None, seed), 1.0 / n as f64, tay.clone(), &map)?);
    let make_a = |seed: u64| {
        Ok(MlSgld::sgld(settings(MlCoupling::Antithetic, Some(WINDOW), seed), 1.0 / n as f64, tay.clone(), &map)?)
    };
    let make_m = |seed: u64| {
        Ok(MlSgld::sgld(settings(MlCoupling::Antithetic, None, seed), 1.0 / n as f64, Minibatch::new(BATCH), &map)?)
    };
    let taylor_r = adaptive(&make_t, &model, &g, &target, 100..100 + SEEDS)?;
    let taylor_avg = adaptive(&make_a, &model, &g, &target, 200..200 + SEEDS)?;
    let capped = AdaptiveSettings { max_cost: Some(MINIBATCH_CAP), ..target };
    let minibatch = adaptive(&make_m, &model, &g, &capped, 300..301)?;
    println!(
        "N = {n:>5}: MALA E[g] = {:.4e} ± {:.1e} (acc. {:.3}, step·N {:.2}, τ {:.1}, Var/E² {:.2}) — {:.1} s",
        reference.mean,
        reference.mcse,
        reference.accept,
        reference.step * n as f64,
        reference.tau,
        reference.var / reference.mean.powi(2),
        t0.elapsed().as_secs_f64()
    );
    Ok(Row { n, reference, cost_mala, taylor: taylor_r, taylor_avg, minibatch })
}

/// MSE against cost at N = 1000 for several ε (Taylor, no averaging).
fn mse_vs_cost(x: &Array2<f64>, y: &Array1<f64>, truth: f64) -> Res<(f64, f64)> {
    let n = 1000;
    let (model, map) = model_of(x, y, n)?;
    let g = g_of(map.clone());
    let tay = taylor(&model, &map)?;
    let make =
        |seed: u64| Ok(MlSgld::sgld(settings(MlCoupling::Antithetic, None, seed), 1.0 / n as f64, tay.clone(), &map)?);
    println!(
        "\n== MSE against cost at N = {n} (antithetic + Taylor, {} seeds per ε; truth = MALA reference)",
        2 * SEEDS
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "ε/E[g]", "cost (mean)", "emp. MSE", "est. MSE", "ε²", "MSE·cost"
    );
    let (mut pts, mut pts_est) = (Vec::new(), Vec::new());
    for (k, rel) in [0.2, 0.1, 0.05, 0.025].into_iter().enumerate() {
        let eps = rel * truth;
        let target = AdaptiveSettings {
            target: sgmcmc::RmseTarget::Absolute(eps),
            n_initial: 200,
            max_level: 10,
            max_cost: None,
        };
        let first = 1000 + 100 * k as u64;
        if let Some(a) = adaptive(&make, &model, &g, &target, first..first + 2 * SEEDS)? {
            let mse = a.estimates.iter().map(|e| (e - truth).powi(2)).sum::<f64>() / a.estimates.len() as f64;
            println!(
                "{rel:>8} {:>12.3e} {mse:>12.3e} {:>12.3e} {:>12.3e} {:>10.3e}",
                a.cost,
                a.est_mse,
                eps * eps,
                mse * a.cost
            );
            pts.push((a.sampling.ln(), mse.ln()));
            pts_est.push((a.sampling.ln(), a.est_mse.ln()));
        }
    }
    let (sl, sl_est) = (slope(&pts), slope(&pts_est));
    println!(
        "log-log slopes against sampling cost: empirical MSE {sl:.2}, the runs' own MSE estimate {sl_est:.2} \
         (MSE ∝ cost⁻¹ ⇔ −1; the empirical MSE from {} runs per ε is itself uncertain by about ±40 %)",
        2 * SEEDS
    );
    Ok((sl, sl_est))
}

fn main() -> Result<(), Box<dyn Error>> {
    let start = Instant::now();
    let (x, y) = data();
    let betas = part1(&x, &y)?;
    println!("[part 1 done after {:.1} s]\n", start.elapsed().as_secs_f64());

    println!("== Part 2: cost to a relative RMSE of {REL} (ε = {REL}·E_π[g], E_π[g] from MALA)");
    let mut rows = Vec::new();
    for n in NS {
        rows.push(part2_one(&x, &y, n)?);
    }
    println!("\nCost in datum evaluations (epochs = cost / N); ML-SGLD: mean over seeds, setup included");
    println!(
        "{:>6} {:>11} {:>8} | {:>11} {:>8} {:>10} {:>5} | {:>11} {:>8} {:>5} | {:>11} {:>8}",
        "N",
        "MALA",
        "epochs",
        "ML Taylor",
        "epochs",
        "sampling",
        "L+1",
        "ML T. avg",
        "epochs",
        "L+1",
        "ML minib.",
        "epochs"
    );
    let fmt = |a: &Option<Adaptive>, n: usize| match a {
        Some(a) => (format!("{:.3e}", a.cost), format!("{:.1}", a.cost / n as f64)),
        None => ("null".to_string(), "-".to_string()),
    };
    for r in &rows {
        let (t, te) = fmt(&r.taylor, r.n);
        let (a, ae) = fmt(&r.taylor_avg, r.n);
        let (m, me) = fmt(&r.minibatch, r.n);
        println!(
            "{:>6} {:>11.3e} {:>8.1} | {t:>11} {te:>8} {:>10.3e} {:>5.1} | {a:>11} {ae:>8} {:>5.1} | {m:>11} {me:>8}",
            r.n,
            r.cost_mala,
            r.cost_mala / r.n as f64,
            r.taylor.as_ref().map_or(f64::NAN, |a| a.sampling),
            r.taylor.as_ref().map_or(f64::NAN, |a| a.levels),
            r.taylor_avg.as_ref().map_or(f64::NAN, |a| a.levels),
        );
    }
    let nf = |r: &Row| r.n as f64;
    let s_mala = loglog_slope(&rows.iter().map(|r| (nf(r), Some(r.cost_mala))).collect::<Vec<_>>());
    let s_t = loglog_slope(&rows.iter().map(|r| (nf(r), r.taylor.as_ref().map(|a| a.cost))).collect::<Vec<_>>());
    let s_ts = loglog_slope(&rows.iter().map(|r| (nf(r), r.taylor.as_ref().map(|a| a.sampling))).collect::<Vec<_>>());
    let s_a = loglog_slope(&rows.iter().map(|r| (nf(r), r.taylor_avg.as_ref().map(|a| a.cost))).collect::<Vec<_>>());
    let s_m = loglog_slope(&rows.iter().map(|r| (nf(r), r.minibatch.as_ref().map(|a| a.cost))).collect::<Vec<_>>());
    println!(
        "log-log slopes of cost against N: MALA {s_mala:.2}, ML Taylor {s_t:.2} (sampling only {s_ts:.2}), \
         ML Taylor avg {s_a:.2}, ML minibatch {s_m:.2}"
    );

    println!("\nEmpirical relative RMSE of the adaptive runs against the MALA reference (target {REL})");
    println!("{:>6} {:>12} {:>14} {:>14} {:>12}", "N", "ref rel.MCSE", "Taylor", "Taylor avg", "minibatch");
    for r in &rows {
        let e = |a: &Option<Adaptive>| a.as_ref().map_or(f64::NAN, |a| rel_rmse(&a.estimates, r.reference.mean));
        println!(
            "{:>6} {:>12.3} {:>14.3} {:>14.3} {:>12.3}",
            r.n,
            r.reference.mcse / r.reference.mean,
            e(&r.taylor),
            e(&r.taylor_avg),
            e(&r.minibatch)
        );
    }
    let truth_1000 = rows.iter().find(|r| r.n == 1000).map_or(f64::NAN, |r| r.reference.mean);
    let (mse_slope, mse_slope_est) = mse_vs_cost(&x, &y, truth_1000)?;

    let mut series = Vec::new();
    let pts = |f: &dyn Fn(&Row) -> Option<f64>| rows.iter().filter_map(|r| f(r).map(|c| (nf(r), c))).collect();
    series.push(plot::Series::new(format!("MALA (slope {s_mala:.2})"), pts(&|r| Some(r.cost_mala))));
    series.push(plot::Series::new(
        format!("ML-SGLD antith. Taylor (slope {s_t:.2})"),
        pts(&|r| r.taylor.as_ref().map(|a| a.cost)),
    ));
    series.push(plot::Series::new(
        format!("ML-SGLD antith. Taylor avg (slope {s_a:.2})"),
        pts(&|r| r.taylor_avg.as_ref().map(|a| a.cost)),
    ));
    series.push(plot::Series::new(
        format!("ML-SGLD antith. minibatch (slope {s_m:.2})"),
        pts(&|r| r.minibatch.as_ref().map(|a| a.cost)),
    ));
    series.push(plot::Series::dashed("∝ N", rows.iter().map(|r| (nf(r), 4.0 * nf(r))).collect()));
    plot::loglog_svg(
        "target/mlsgld_cost.svg",
        &format!("Cost to relative RMSE {REL} of E[‖θ − θ_MAP‖²], logistic regression d = 3"),
        "N",
        "datum evaluations",
        &series,
    )?;
    println!("\nplots: target/mlsgld_variance.svg, target/mlsgld_cost.svg");
    println!("total time {:.1} s on {} threads", start.elapsed().as_secs_f64(), rayon::current_num_threads());

    let per_n: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"n_data\":{},\"ref_mean_g\":{},\"cost_mala\":{},\"cost_mlsgld_taylor\":{},\"cost_mlsgld_taylor_sampling\":{},\"cost_mlsgld_taylor_avg\":{},\"cost_mlsgld_minibatch\":{},\"rel_rmse_taylor\":{},\"rel_rmse_taylor_avg\":{}}}",
                r.n,
                json_num(Some(r.reference.mean)),
                json_num(Some(r.cost_mala)),
                json_num(r.taylor.as_ref().map(|a| a.cost)),
                json_num(r.taylor.as_ref().map(|a| a.sampling)),
                json_num(r.taylor_avg.as_ref().map(|a| a.cost)),
                json_num(r.minibatch.as_ref().map(|a| a.cost)),
                json_num(r.taylor.as_ref().map(|a| rel_rmse(&a.estimates, r.reference.mean))),
                json_num(r.taylor_avg.as_ref().map(|a| rel_rmse(&a.estimates, r.reference.mean))),
            )
        })
        .collect();
    println!(
        "RESULT {{\"target_rel_rmse\":{REL},\"per_n\":[{}],\"slope_mala\":{},\"slope_mlsgld_taylor\":{},\"slope_mlsgld_taylor_sampling\":{},\"slope_mlsgld_taylor_avg\":{},\"slope_mlsgld_minibatch\":{},\"slope_mse_vs_cost\":{},\"slope_est_mse_vs_cost\":{},\"beta_alg1\":{},\"beta_antithetic\":{},\"beta_antithetic_taylor\":{},\"beta_antithetic_taylor_avg\":{}}}",
        per_n.join(","),
        json_num(Some(s_mala)),
        json_num(Some(s_t)),
        json_num(Some(s_ts)),
        json_num(Some(s_a)),
        json_num(Some(s_m)),
        json_num(Some(mse_slope)),
        json_num(Some(mse_slope_est)),
        json_num(Some(betas[0])),
        json_num(Some(betas[1])),
        json_num(Some(betas[2])),
        json_num(Some(betas[3])),
    );
    Ok(())
}
