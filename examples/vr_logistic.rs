//! Variance-reduced gradients against control variates: SGLD, SGLD-CV, SGLD with SVRG and SGLD
//! with SAGA on Bayesian logistic regression at N = 10⁴ and 10⁵ — the comparison of Baker,
//! Fearnhead, Fox & Nemeth, *Control variates for stochastic gradient MCMC* (Statistics and
//! Computing 2019), §5.1, with the SVRG and SAGA estimators of Dubey et al. (NeurIPS 2016).
//! The figure of merit: the error of the posterior-mean estimate, `maxⱼ |mean_j − μ_j| / σ_j`
//! (posterior sds), against the datum gradients spent (setup included).
//!
//! Run with `cargo run --release --example vr_logistic` (timing in the README). Stage lines on
//! stderr; plots `target/vr_logistic_n10000.svg`, `target/vr_logistic_n100000.svg`; the last
//! line of stdout is `RESULT {json}`.
//!
//! Model: d = 5, prior N(0, 10 I), the synthetic data set of `cv_cost_scaling` (seed 2019).
//! Reference μ, σ: MALA (2 chains of 4 000 after a 500-step adapted warm-up, from the mode); its
//! Monte Carlo error is printed. Every method starts at θ = 0, with minibatches of 50 drawn with
//! replacement, and gets the same budget of `BUDGET_EPOCHS` × N datum gradients:
//! - SGLD: plain minibatches (n per step).
//! - SGLD-CV: one pass of SGD from 0, the full gradient at its end (setup, counted), then 2n per
//!   step (Baker et al.'s algorithm).
//! - SGLD-SVRG: snapshot refreshed every N/n steps (N per refresh, counted) + 2n per step.
//! - SGLD-SAGA: the table filled at θ = 0 (N, counted) + n per step; memory N·d numbers.
//!
//! The estimate at a cost c is the average of the second half of the iterates so far.
//!
//! Tuning, identical for every method: constant steps γ = η/N over η = 4ᵏ, k = −5..1, extended by
//! factors of 4 while the best η is at an end (up to 3 more); for each η, `TUNE_CHAINS` chains
//! (tuning seeds); the η with the smallest median final error is kept. (An empty cell at 1 epoch:
//! the method's setup alone costs more than one epoch.)
//!
//! SAGA computes each minibatch gradient one datum at a time (its table needs them one by one),
//! so its wall time per datum gradient is higher than the others' (printed per chain); its cost
//! in datum gradients is what the figure compares.
//! The reported curves are the median over `EVAL_CHAINS` fresh chains (other seeds) at that η.

#[path = "support/plot.rs"]
mod plot;

use rand::Rng;
use rayon::prelude::*;
use sgmcmc::diagnostics;
use sgmcmc::observe::{Control, Progress};
use sgmcmc::prelude::*;
use sgmcmc::rng::stream;
use sgmcmc::{Mala, MalaSettings, Sampler, Storage, observe::Observer};
use sgmcmc::{Saga, SgdSettings, Svrg};
use std::error::Error;
use std::sync::Mutex;
use std::time::Instant;

const N_VALUES: [usize; 2] = [10_000, 100_000];
const DIM: usize = 5;
const PRIOR_VAR: f64 = 10.0;
const DATA_SEED: u64 = 2019;
const BATCH: usize = 50;
const BUDGET_EPOCHS: f64 = 100.0;
const CHECK_EVERY: u64 = 10;
/// Cost checkpoints for the curves: this many per decade of epochs, from 0.1 epoch on.
const POINTS_PER_DECADE: f64 = 5.0;
const ETA_POW4: std::ops::RangeInclusive<i32> = -5..=1;
const TUNE_CHAINS: usize = 5;
const EVAL_CHAINS: usize = 9;
const TUNE_SEED: u64 = 21;
const EVAL_SEED: u64 = 22;
const METHODS: [&str; 4] = ["SGLD", "SGLD-CV", "SGLD-SVRG", "SGLD-SAGA"];

struct Reference {
    mean: Vec<f64>,
    sd: Vec<f64>,
    max_mcse_in_sd: f64,
}

fn reference(model: &LogisticRegression) -> Result<Reference, Box<dyn Error>> {
    let mode = model.map()?.to_vec();
    let h = model.hessian(&mode)?;
    let mala = Mala::new(MalaSettings {
        step_size: 1.0 / h.diag().sum(),
        adapt_steps: 500,
        target_accept: 0.574,
        metric: sgmcmc::Metric::Identity,
        ..Default::default()
    })?;
    let settings = RunSettings {
        n_iter: 4_500,
        burn_in: 500,
        n_chains: 2,
        seed: 13,
        storage: Storage::Samples,
        parallel: true,
        ..Default::default()
    };
    let out = Runner::new(model, &mala).start(&mode).settings(settings).run()?;
    let summary = diagnostics::summary(&out.estimate)?;
    let mean: Vec<f64> = summary.iter().map(|s| s.mean).collect();
    let sd: Vec<f64> = summary.iter().map(|s| s.sd).collect();
    let max_mcse_in_sd = summary.iter().map(|s| s.mcse_mean / s.sd).fold(0.0, f64::max);
    Ok(Reference { mean, sd, max_mcse_in_sd })
}

fn max_err(x: &[f64], r: &Reference) -> f64 {
    x.iter().zip(&r.mean).zip(&r.sd).map(|((x, m), s)| (x - m).abs() / s).fold(0.0, f64::max)
}

/// Running sum of the iterates, its values at every check, and the (cost, error) curve.
type TrackState = (Vec<f64>, Vec<f64>, Vec<(u64, f64)>);

/// Tracks the second-half average every `CHECK_EVERY` iterations: (cost, error) pairs.
struct Tracker<'a> {
    d: usize,
    r: &'a Reference,
    setup: u64,
    budget: u64,
    state: Mutex<TrackState>,
}

impl Observer for Tracker<'_> {
    fn observe(&self, p: &Progress<'_>) -> Control {
        let Ok(mut guard) = self.state.lock() else { return Control::Stop };
        let (sum, prefix, curve) = &mut *guard;
        let d = self.d;
        if sum.is_empty() {
            sum.resize(d, 0.0);
            prefix.resize(d, 0.0);
        }
        for (s, x) in sum.iter_mut().zip(p.position) {
            *s += x;
        }
        let k = p.iteration;
        if !k.is_multiple_of(CHECK_EVERY) {
            return Control::Continue;
        }
        prefix.extend_from_slice(sum);
        let j = (k / CHECK_EVERY) as usize;
        let h = j / 2;
        let len = ((j - h) as u64 * CHECK_EVERY) as f64;
        let est: Vec<f64> = (0..d).map(|i| (sum[i] - prefix[h * d + i]) / len).collect();
        let cost = self.setup + p.cost.datum_gradients;
        curve.push((cost, max_err(&est, self.r)));
        if cost >= self.budget { Control::Stop } else { Control::Continue }
    }
}

fn drive<S: Sampler>(
    model: &LogisticRegression,
    sampler: S,
    theta0: &[f64],
    seed: u64,
    r: &Reference,
    budget: u64,
) -> sgmcmc::Result<Vec<(u64, f64)>> {
    let setup = sampler.setup_cost().datum_gradients;
    let tracker = Tracker { d: model.dim(), r, setup, budget, state: Mutex::new(Default::default()) };
    let n_iter = (budget / BATCH as u64 / CHECK_EVERY + 2) * CHECK_EVERY;
    let settings = RunSettings { n_iter, burn_in: n_iter - 1, seed, parallel: false, ..Default::default() };
    Runner::new(model, &sampler).start(theta0).settings(settings).observers(&[&tracker]).run()?;
    Ok(tracker.state.into_inner().map(|s| s.2).unwrap_or_default())
}

fn chain(
    model: &LogisticRegression,
    method: usize,
    eta: f64,
    seed: u64,
    ids: &[u64],
    r: &Reference,
    budget: u64,
) -> sgmcmc::Result<Vec<(u64, f64)>> {
    let step = SgldSettings::constant(eta / model.n_data() as f64);
    let mut rng = stream(seed, ids);
    let zero = vec![0.0; model.dim()];
    let s = rng.next_u64();
    match method {
        0 => drive(model, Sgld::new(step, Minibatch::new(BATCH))?, &zero, s, r, budget),
        1 => {
            let sgd = SgdSettings { batch_size: BATCH, n_passes: 1.0, seed: rng.next_u64(), ..Default::default() };
            let cv =
                ControlVariate::from_sgd(model, &zero, &sgd, CvSettings { batch_size: BATCH, ..Default::default() })?;
            let centre = cv.centre().to_vec();
            drive(model, Sgld::new(step, cv)?, &centre, s, r, budget)
        }
        2 => drive(model, Sgld::new(step, Svrg::new(BATCH))?, &zero, s, r, budget),
        _ => drive(model, Sgld::new(step, Saga::new(BATCH))?, &zero, s, r, budget),
    }
}

/// The error of a curve at `cost` (the last check at or before it; NaN before the first).
fn err_at(curve: &[(u64, f64)], cost: f64) -> f64 {
    curve.iter().take_while(|c| c.0 as f64 <= cost).last().map_or(f64::NAN, |c| c.1)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Greater));
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

fn main() -> Result<(), Box<dyn Error>> {
    let t_all = Instant::now();
    let full = LogisticRegression::synthetic(*N_VALUES.iter().max().unwrap_or(&1), DIM, PRIOR_VAR, DATA_SEED)?;
    let mut json = Vec::new();
    for &n in &N_VALUES {
        let rows = full.features().slice(ndarray::s![..n, ..]).to_owned();
        let labels = ndarray::Array1::from(full.labels()[..n].to_vec());
        let model = LogisticRegression::new(&rows, &labels, PRIOR_VAR)?;
        eprintln!("[progress] N = {n}: MALA reference");
        let r = reference(&model)?;
        let budget = (BUDGET_EPOCHS * n as f64) as u64;
        println!(
            "\nN = {n}: reference by MALA, largest MCSE of the mean {:.3} posterior sds; budget {BUDGET_EPOCHS} epochs",
            r.max_mcse_in_sd
        );
        println!(
            "{:10} {}",
            "η = γN",
            ETA_POW4.clone().map(|k| format!("{:>9}", format!("4^{k}"))).collect::<String>()
        );
        let mut chosen = Vec::new();
        for (m, name) in METHODS.iter().enumerate() {
            eprintln!("[progress] N = {n}: tuning {name}");
            let score = |eta: f64| {
                let errs: Vec<f64> = (0..TUNE_CHAINS)
                    .into_par_iter()
                    .map(|c| {
                        chain(&model, m, eta, TUNE_SEED, &[n as u64, m as u64, c as u64], &r, budget)
                            .ok()
                            .and_then(|cv| cv.last().map(|x| x.1))
                            .unwrap_or(f64::INFINITY)
                    })
                    .collect();
                median(errs)
            };
            let mut etas: Vec<f64> = ETA_POW4.clone().map(|k| 4f64.powi(k)).collect();
            let mut finals: Vec<f64> = etas.iter().map(|&eta| score(eta)).collect();
            let mut extra = String::new();
            // Bracketing: while the best η is at an end of the grid, try 4× beyond it (≤ 3 more).
            for _ in 0..3 {
                let best = finals.iter().enumerate().fold(0, |b, (i, e)| if *e < finals[b] { i } else { b });
                let next = if best + 1 == etas.len() {
                    etas[best] * 4.0
                } else if best == 0 {
                    etas[0] / 4.0
                } else {
                    break;
                };
                let e = score(next);
                extra.push_str(&format!("  [η = {next}: {e:.3}]"));
                if next > etas[0] {
                    etas.push(next);
                    finals.push(e);
                } else {
                    etas.insert(0, next);
                    finals.insert(0, e);
                }
            }
            let best = finals.iter().enumerate().fold(0, |b, (i, e)| if *e < finals[b] { i } else { b });
            let shown: Vec<String> = etas
                .iter()
                .zip(&finals)
                .filter(|(eta, _)| ETA_POW4.clone().any(|k| 4f64.powi(k) == **eta))
                .map(|(_, e)| format!("{e:>9.3}"))
                .collect();
            println!("{name:10} {}{extra}   -> η = {}", shown.concat(), etas[best]);
            chosen.push(etas[best]);
        }
        // Evaluation on fresh seeds.
        let decades = (BUDGET_EPOCHS / 0.1).log10();
        let n_points = (decades * POINTS_PER_DECADE).round() as i32;
        let grid: Vec<f64> =
            (0..=n_points).map(|i| 0.1 * 10f64.powf(i as f64 / POINTS_PER_DECADE) * n as f64).collect();
        let mut series = Vec::new();
        let mut method_json = Vec::new();
        println!(
            "\nMedian error (posterior sds) of {EVAL_CHAINS} fresh chains at the chosen η, against cost in epochs:"
        );
        println!("{:10} {:>8} {:>8} {:>8} {:>8} {:>8}", "method", "1", "3", "10", "30", "100");
        for (m, name) in METHODS.iter().enumerate() {
            eprintln!("[progress] N = {n}: evaluating {name}");
            let t = Instant::now();
            let curves: Vec<Vec<(u64, f64)>> = (0..EVAL_CHAINS)
                .into_par_iter()
                .map(|c| {
                    chain(&model, m, chosen[m], EVAL_SEED, &[n as u64, m as u64, c as u64], &r, budget)
                        .unwrap_or_default()
                })
                .collect();
            let secs = t.elapsed().as_secs_f64() / EVAL_CHAINS as f64 * rayon::current_num_threads() as f64;
            let med = |cost: f64| median(curves.iter().map(|c| err_at(c, cost)).filter(|e| e.is_finite()).collect());
            let pts: Vec<(f64, f64)> = grid.iter().map(|&c| (c / n as f64, med(c))).collect();
            let at = |ep: f64| med(ep * n as f64);
            let cell = |x: f64| if x.is_finite() { format!("{x:>8.3}") } else { format!("{:>8}", "-") };
            println!(
                "{name:10} {} {} {} {} {}",
                cell(at(1.0)),
                cell(at(3.0)),
                cell(at(10.0)),
                cell(at(30.0)),
                cell(at(BUDGET_EPOCHS))
            );
            let num = |x: f64| if x.is_finite() { format!("{x:.5}") } else { "null".to_string() };
            method_json.push(format!(
                "{{\"method\":\"{name}\",\"eta\":{},\"err_at_1_epoch\":{},\"err_at_10_epochs\":{},\"err_at_budget\":{},\"cpu_s_per_chain\":{secs:.3}}}",
                chosen[m],
                num(at(1.0)),
                num(at(10.0)),
                num(at(BUDGET_EPOCHS))
            ));
            series.push(plot::Series::new(*name, pts));
        }
        let path = format!("target/vr_logistic_n{n}.svg");
        match plot::loglog_svg(
            &path,
            &format!("Posterior-mean error vs cost, logistic regression, N = {n}"),
            "cost (epochs: datum gradients / N)",
            "max error (posterior sds)",
            &series,
        ) {
            Ok(()) => println!("plot: {path}"),
            Err(e) => println!("could not write the plot: {e}"),
        }
        json.push(format!(
            "{{\"n\":{n},\"mala_max_mcse_sd\":{:.5},\"methods\":[{}]}}",
            r.max_mcse_in_sd,
            method_json.join(",")
        ));
    }
    println!(
        "RESULT {{\"example\":\"vr_logistic\",\"budget_epochs\":{BUDGET_EPOCHS},\"results\":[{}],\"total_wall_s\":{:.1}}}",
        json.join(","),
        t_all.elapsed().as_secs_f64()
    );
    Ok(())
}
