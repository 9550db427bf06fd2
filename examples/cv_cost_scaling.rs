//! How the cost of SGLD and SGLD-CV to reach a fixed accuracy grows with the number of data N:
//! an empirical check of Baker, Fearnhead, Fox & Nemeth, *Control variates for stochastic
//! gradient MCMC* (Statistics and Computing 2019), Theorem 1 and §3.4. Their claim: after a setup
//! of about two passes over the data (SGD to find a centre θ̂, then the full gradient there), the
//! cost of SGLD-CV to a fixed accuracy does not grow with N, while SGLD's grows about linearly.
//!
//! Run with `cargo run --release --example cv_cost_scaling`: 61 s wall, 119 s CPU (measured 2026-11-23 on an idle 2-core machine; longer when it is shared;
//! the MALA reference at N = 10⁵ and the SGLD runs there take most of it). Stage lines on stderr.
//!
//! Model: Bayesian logistic regression, d = 5, prior N(0, 10 I), one synthetic data set of 10⁵
//! rows ([`LogisticRegression::synthetic`]) truncated to N = 10³, 10⁴, 10⁵. Minibatches of n = 50
//! (with replacement) for both methods.
//!
//! Accuracy target. The reference posterior mean μ and sds σ come from MALA (two chains started at
//! the mode, step adapted during a discarded warm-up); its acceptance rate and Monte Carlo error
//! (batch means, in posterior sds) are printed. A chain has reached the target at cost c when the
//! estimate of the posterior mean available at that cost, the average of the second half of its
//! iterates so far, satisfies `maxⱼ |mean_j − μ_j| / σ_j ≤ THRESHOLD` (0.3) and keeps satisfying
//! it at every later checkpoint (every 10 iterations) up to the budget B = max(300 N, 2·10⁶) datum
//! gradients, the same for both methods. A chain that does not satisfy it at the end of the budget
//! has not reached it (`null`), which is what a constant-step SGLD whose bias exceeds the
//! threshold gives. (The persistence check spans a factor B/c in cost: about 2 for SGLD at large
//! N, over 100 for SGLD-CV, so it is, if anything, stricter on SGLD-CV.)
//!
//! Cost, in datum-gradient evaluations, counted by the crate: everything from θ = 0. SGLD starts
//! at θ = 0 and its burn-in is part of its cost (the second-half average discards it). SGLD-CV
//! first runs SGD from θ = 0 (its own SGD seed per chain), then one full-gradient pass at θ̂, then
//! samples from θ̂ at 2n datum gradients per iteration; its cost is
//! [`Sampler::setup_cost`] (SGD + full gradient) plus [`Sampler::cost`], as
//! [`RunOutput::cost`](sgmcmc::RunOutput) adds them. The chains are driven step by step through
//! the [`Sampler`] trait because a run returns only the final estimate, not the running one.
//!
//! Tuning, identical for both methods: constant steps γ = η/N over the same grid of η (powers of
//! 4, then the two powers of 2 beside the best), `TUNE_CHAINS` chains per value; the best η has the
//! smallest median cost to the target (a value where more than half the chains fail is out). The
//! reported costs come from `EVAL_CHAINS` fresh chains (other seeds) at the chosen η: the median,
//! and the quartiles, of the cost to the target.
//!
//! How to read the output: per N, the reference, the tuning table (median cost per η) and the
//! chosen steps; then the summary table of costs (datum gradients and epochs, i.e. multiples of
//! N), SGLD-CV's setup and post-setup parts, and the least-squares slopes of log cost against
//! log N. Theorem 1 predicts a slope near 0 for SGLD-CV's post-setup cost and about 1 for SGLD;
//! SGLD-CV's total grows like its setup, which is linear in N once it dominates. The last line
//! of stdout is `RESULT {json}`; a plot goes to `target/cv_cost_scaling.svg`.

#[path = "support/plot.rs"]
mod plot;

use ndarray::{Array1, s};
use rand::Rng;
use rayon::prelude::*;
use sgmcmc::SgdSettings;
use sgmcmc::StepSize;
use sgmcmc::observe::{Control, Progress};
use sgmcmc::prelude::*;
use sgmcmc::rng::stream;
use sgmcmc::{Mala, MalaSettings, Sampler, Storage, observe::Observer};
use std::error::Error;
use std::sync::Mutex;
use std::time::Instant;

/// Data sizes (the first rows of one data set of the largest size).
const N_VALUES: [usize; 3] = [1_000, 10_000, 100_000];
/// Dimension d.
const DIM: usize = 5;
/// Prior variance σ² of the N(0, σ² I) prior.
const PRIOR_VAR: f64 = 10.0;
/// Seed of the synthetic data set.
const DATA_SEED: u64 = 2019;
/// Minibatch size n of both samplers and of the SGD centring.
const BATCH_SIZE: usize = 50;
/// Accuracy target: `maxⱼ |mean_j − μ_j| / σ_j` at most this.
const THRESHOLD: f64 = 0.3;
/// Budget per chain, in epochs (multiples of N) ...
const BUDGET_EPOCHS: f64 = 300.0;
/// ... but at least this many datum gradients.
const BUDGET_MIN: f64 = 2e6;
/// Iterations between checkpoints of the running estimate.
const CHECK_EVERY: u64 = 10;
/// Coarse grid of η = γN: 4^k for k in this range.
const ETA_POW4: std::ops::RangeInclusive<i32> = -5..=1;
/// Chains per (method, N, η) while tuning; odd, so the median is one chain's cost.
const TUNE_CHAINS: usize = 7;
/// Chains per (method, N) at the chosen η, on fresh seeds.
const EVAL_CHAINS: usize = 15;
/// Master seeds of the tuning and evaluation chains (distinct, so evaluation is on unseen seeds).
const TUNE_SEED: u64 = 11;
const EVAL_SEED: u64 = 12;
/// SGD centring: passes over the data (Baker et al. §3.4: one).
const SGD_PASSES: f64 = 1.0;
/// SGD centring: step schedule on the normalised potential U/N, `h_k = a (b + k)^(−c)`.
const SGD_STEP: StepSize = StepSize::Shifted { a: 1.0, b: 10.0, c: 0.6 };
/// MALA reference: chains, warm-up iterations (step adapted, then discarded), kept iterations.
const MALA_CHAINS: usize = 2;
const MALA_WARMUP: u64 = 500;
const MALA_KEEP: u64 = 4_000;
/// Master seed of the MALA chains.
const MALA_SEED: u64 = 13;

const METHODS: [&str; 2] = ["SGLD", "SGLD-CV"];

/// The reference posterior summary from MALA.
struct Reference {
    mean: Vec<f64>,
    sd: Vec<f64>,
    /// Largest Monte Carlo standard error of the mean over coordinates, in posterior sds.
    max_mcse_in_sd: f64,
    /// Acceptance rate after warm-up (fraction of moves), per chain.
    accept: Vec<f64>,
    step: f64,
    /// max |μ − mode| / σ.
    mode_offset_in_sd: f64,
    datum_evaluations: u64,
    seconds: f64,
}

fn reference(model: &LogisticRegression, mode: &[f64]) -> Result<Reference, Box<dyn Error>> {
    let t = Instant::now();
    let h = model.hessian(mode)?;
    // A conservative first step (1 / tr H ≤ 1 / λ_max); warm-up adapts it towards 57 % acceptance.
    let step0 = 1.0 / h.diag().sum();
    let mala = Mala::new(MalaSettings {
        step_size: step0,
        adapt_steps: MALA_WARMUP,
        target_accept: 0.574,
        metric: sgmcmc::Metric::Identity,
        ..Default::default()
    })?;
    let settings = RunSettings {
        n_iter: MALA_WARMUP + MALA_KEEP,
        burn_in: MALA_WARMUP,
        thin: 1,
        n_chains: MALA_CHAINS,
        seed: MALA_SEED,
        storage: Storage::Samples,
        parallel: true,
        ..Default::default()
    };
    let out = Runner::new(model, &mala).start(mode).settings(settings).run()?;
    let mean = out.estimate.mean()?.to_vec();
    let sd: Vec<f64> = out.estimate.variance()?.iter().map(|v| v.sqrt()).collect();
    let d = mean.len();
    // Monte Carlo error by batch means (40 batches per chain), pooled over chains.
    let mut mcse2 = vec![0.0; d];
    let mut accept = Vec::with_capacity(MALA_CHAINS);
    for c in 0..MALA_CHAINS {
        let draws = out.estimate.samples(c).ok_or("MALA run kept no samples")?.draws();
        let n = draws.nrows();
        let moves = (1..n).filter(|&k| draws.row(k) != draws.row(k - 1)).count();
        accept.push(moves as f64 / (n - 1) as f64);
        let n_batches = 40;
        let len = n / n_batches;
        for (j, m2) in mcse2.iter_mut().enumerate() {
            let col = draws.column(j);
            let bm: Vec<f64> =
                (0..n_batches).map(|b| col.slice(s![b * len..(b + 1) * len]).sum() / len as f64).collect();
            let mu = bm.iter().sum::<f64>() / n_batches as f64;
            let var_b = bm.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (n_batches - 1) as f64;
            *m2 += var_b / n_batches as f64;
        }
    }
    let k = MALA_CHAINS as f64;
    let max_mcse_in_sd = (0..d).map(|j| (mcse2[j] / (k * k)).sqrt() / sd[j]).fold(0.0, f64::max);
    let mode_offset_in_sd = (0..d).map(|j| (mean[j] - mode[j]).abs() / sd[j]).fold(0.0, f64::max);
    let step = out.chains.first().map(|c| c.sampler.step_size()).unwrap_or(f64::NAN);
    Ok(Reference {
        mean,
        sd,
        max_mcse_in_sd,
        accept,
        step,
        mode_offset_in_sd,
        datum_evaluations: out.cost.datum_gradients + out.cost.datum_potentials,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// One chain's outcome.
#[derive(Debug, Clone, Copy)]
struct ChainOutcome {
    /// Cost (setup included) from which the target holds up to the budget; `None` if it does
    /// not hold at the budget.
    hit: Option<u64>,
    /// Setup cost (SGLD-CV: SGD + full gradient; SGLD: 0).
    setup: u64,
    /// The error at the end of the budget.
    final_err: f64,
    /// SGLD-CV: max |θ̂ − μ| / σ of the centre.
    centre_err: Option<f64>,
}

fn max_err(x: &[f64], r: &Reference) -> f64 {
    x.iter().zip(&r.mean).zip(&r.sd).map(|((x, m), s)| (x - m).abs() / s).fold(0.0, f64::max)
}

/// Runs `sampler` from `theta0` on the library's runner (stream `(seed, [0])`) until its cost
/// (setup included) reaches `budget`: an observer tracks the second-half average every
/// `CHECK_EVERY` iterations and stops the chain at the first check past the budget.
fn drive<S: Sampler>(
    model: &LogisticRegression,
    sampler: S,
    theta0: &[f64],
    seed: u64,
    r: &Reference,
    budget: u64,
) -> sgmcmc::Result<ChainOutcome> {
    let setup = sampler.setup_cost().datum_gradients;
    let tracker = Tracker { d: model.dim(), r, setup, budget, state: Mutex::new(Track::default()) };
    // Every step costs at least BATCH_SIZE, so the budget is reached before this many iterations;
    // the run keeps only its last draw (the observer does the work).
    let n_iter = (budget / BATCH_SIZE as u64 / CHECK_EVERY + 2) * CHECK_EVERY;
    let settings = RunSettings { n_iter, burn_in: n_iter - 1, seed, parallel: false, ..Default::default() };
    Runner::new(model, &sampler).start(theta0).settings(settings).observers(&[&tracker]).run()?;
    let Track { costs, errs, .. } = tracker.state.into_inner().unwrap_or_default();
    let last_bad = errs.iter().rposition(|&e| e > THRESHOLD);
    let first_good = last_bad.map_or(0, |b| b + 1);
    Ok(ChainOutcome {
        hit: costs.get(first_good).copied(),
        setup,
        final_err: errs.last().copied().unwrap_or(f64::NAN),
        centre_err: None,
    })
}

/// The observer of [`drive`]: running sums of the iterates, the error of the second-half average
/// and the cost at every check.
struct Tracker<'a> {
    d: usize,
    r: &'a Reference,
    setup: u64,
    budget: u64,
    state: Mutex<Track>,
}

#[derive(Default)]
struct Track {
    /// prefix[j·d..(j+1)·d] = sum of the first j·CHECK_EVERY iterates.
    prefix: Vec<f64>,
    sum: Vec<f64>,
    costs: Vec<u64>,
    errs: Vec<f64>,
}

impl Observer for Tracker<'_> {
    fn observe(&self, p: &Progress<'_>) -> Control {
        let Ok(mut t) = self.state.lock() else { return Control::Stop };
        let d = self.d;
        if t.sum.is_empty() {
            t.sum = vec![0.0; d];
            t.prefix = vec![0.0; d];
        }
        for (s, x) in t.sum.iter_mut().zip(p.position) {
            *s += x;
        }
        let k = p.iteration;
        if !k.is_multiple_of(CHECK_EVERY) {
            return Control::Continue;
        }
        let sum = t.sum.clone();
        t.prefix.extend_from_slice(&sum);
        let j = (k / CHECK_EVERY) as usize;
        let h = j / 2;
        let len = ((j - h) as u64 * CHECK_EVERY) as f64;
        let est: Vec<f64> = (0..d).map(|i| (sum[i] - t.prefix[h * d + i]) / len).collect();
        t.errs.push(max_err(&est, self.r));
        let cost = self.setup + p.cost.datum_gradients;
        t.costs.push(cost);
        if cost >= self.budget { Control::Stop } else { Control::Continue }
    }
}

/// One chain of `method` (0 SGLD, 1 SGLD-CV) at step γ = η/N on stream `ids` of `seed`.
fn chain(
    model: &LogisticRegression,
    method: usize,
    eta: f64,
    seed: u64,
    ids: &[u64],
    r: &Reference,
    budget: u64,
) -> sgmcmc::Result<ChainOutcome> {
    let n = model.n_data() as f64;
    let step = SgldSettings { step_size: StepSize::Constant(eta / n) };
    let mut rng = stream(seed, ids);
    let theta0 = vec![0.0; model.dim()];
    if method == 0 {
        return drive(model, Sgld::new(step, Minibatch::new(BATCH_SIZE))?, &theta0, rng.next_u64(), r, budget);
    }
    let sgd = SgdSettings { batch_size: BATCH_SIZE, n_passes: SGD_PASSES, step_size: SGD_STEP, seed: rng.next_u64() };
    let cv =
        ControlVariate::from_sgd(model, &theta0, &sgd, CvSettings { batch_size: BATCH_SIZE, ..Default::default() })?;
    let centre = cv.centre().to_vec();
    let mut out = drive(model, Sgld::new(step, cv)?, &centre, rng.next_u64(), r, budget)?;
    out.centre_err = Some(max_err(&centre, r));
    Ok(out)
}

/// Sorts costs with "not reached" last.
fn sorted(costs: &[Option<u64>]) -> Vec<Option<u64>> {
    let mut v = costs.to_vec();
    v.sort_by_key(|c| c.unwrap_or(u64::MAX));
    v
}

/// The q-quantile (nearest rank) of costs, "not reached" counting as infinite.
fn quantile(costs: &[Option<u64>], q: f64) -> Option<u64> {
    let v = sorted(costs);
    let idx = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[idx]
}

fn fmt_cost(c: Option<u64>) -> String {
    c.map_or("-".to_string(), |c| format!("{:.3e}", c as f64))
}

fn num(x: f64) -> String {
    if x.is_finite() { format!("{x:e}") } else { "null".to_string() }
}

fn opt_num(c: Option<u64>) -> String {
    c.map_or("null".to_string(), |c| c.to_string())
}

fn json_array(v: impl IntoIterator<Item = String>) -> String {
    format!("[{}]", v.into_iter().collect::<Vec<_>>().join(","))
}

/// Least-squares slope of log y against log x over the points where y is known.
fn loglog_slope(x: &[f64], y: &[Option<f64>]) -> Option<f64> {
    let pts: Vec<(f64, f64)> =
        x.iter().zip(y).filter_map(|(a, b)| b.filter(|b| *b > 0.0).map(|b| (a.ln(), b.ln()))).collect();
    if pts.len() < 2 {
        return None;
    }
    let k = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / k, pts.iter().map(|p| p.1).sum::<f64>() / k);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

/// Runs `n_chains` chains for every η in `etas` (in parallel); outcomes per η.
#[allow(clippy::too_many_arguments)]
fn cells(
    model: &LogisticRegression,
    method: usize,
    n_index: usize,
    etas: &[f64],
    n_chains: usize,
    seed: u64,
    r: &Reference,
    budget: u64,
) -> Result<Vec<Vec<ChainOutcome>>, Box<dyn Error>> {
    let jobs: Vec<(usize, usize)> = (0..etas.len()).flat_map(|e| (0..n_chains).map(move |c| (e, c))).collect();
    let outcomes: Vec<sgmcmc::Result<ChainOutcome>> = jobs
        .par_iter()
        .map(|&(e, c)| {
            // The stream depends on η's value (not its position in the list), method, N and chain.
            let eta_id = (eta_pow2(etas[e]) + 1000) as u64;
            chain(model, method, etas[e], seed, &[method as u64, n_index as u64, eta_id, c as u64], r, budget)
        })
        .collect();
    let mut per_eta = vec![Vec::with_capacity(n_chains); etas.len()];
    for (&(e, _), o) in jobs.iter().zip(outcomes) {
        per_eta[e].push(o?);
    }
    Ok(per_eta)
}

/// log₂ η rounded (η is a power of 2).
fn eta_pow2(eta: f64) -> i64 {
    eta.log2().round() as i64
}

/// What is reported per (method, N).
#[derive(Debug, Clone)]
struct Chosen {
    eta: f64,
    median: Option<u64>,
    q25: Option<u64>,
    q75: Option<u64>,
    reached: usize,
    setup_median: u64,
    post_setup_median: Option<u64>,
    final_err_median: f64,
    centre_err_median: Option<f64>,
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[(v.len() - 1) / 2] }
}

fn main() -> Result<(), Box<dyn Error>> {
    let t_total = Instant::now();
    let n_max = *N_VALUES.iter().max().ok_or("no data size")?;
    let full = LogisticRegression::synthetic(n_max, DIM, PRIOR_VAR, DATA_SEED)?;
    let coarse: Vec<f64> = ETA_POW4.map(|k| 4f64.powi(k)).collect();

    println!(
        "SGLD vs SGLD-CV: cost to a fixed accuracy of the posterior mean as N grows (Baker et al. 2019, Theorem 1)"
    );
    println!(
        "  logistic regression, d = {DIM}, prior N(0, {PRIOR_VAR} I), one synthetic data set truncated to N = {N_VALUES:?}; \
         minibatch n = {BATCH_SIZE} (with replacement) for both samplers and the SGD centring"
    );
    println!(
        "  target: max_j |mean_j - mu_j| / sigma_j <= {THRESHOLD}, mean = average of the second half of the chain so far, \
         holding at every checkpoint (each {CHECK_EVERY} iterations) up to a budget of max({BUDGET_EPOCHS} N, {BUDGET_MIN:e}) \
         datum gradients; mu, sigma from MALA"
    );
    println!(
        "  both start at theta = 0; SGLD-CV pays SGD ({SGD_PASSES} pass, h_k on U/N = {SGD_STEP:?}) + one full gradient, \
         then 2n per iteration; steps gamma = eta/N, eta over 4^k, k in {ETA_POW4:?}, refined to the powers of 2 beside \
         the best; {TUNE_CHAINS} tuning chains per eta, {EVAL_CHAINS} fresh evaluation chains at the chosen eta"
    );

    let mut chosen: Vec<[Chosen; 2]> = Vec::new();
    let mut refs = Vec::new();
    let mut budgets = Vec::new();
    for (ni, &n) in N_VALUES.iter().enumerate() {
        eprintln!("  [progress] {:.0} s: N = {n}, MALA reference", t_total.elapsed().as_secs_f64());
        let x = full.features().slice(s![..n, ..]).to_owned();
        let y = Array1::from_vec(full.labels()[..n].to_vec());
        let model = LogisticRegression::new(&x, &y, PRIOR_VAR)?;
        let mode = model.map()?.to_vec();
        let r = reference(&model, &mode)?;
        let budget = (BUDGET_EPOCHS * n as f64).max(BUDGET_MIN) as u64;
        println!();
        println!(
            "N = {n}: MALA reference, {MALA_CHAINS} chains x {MALA_KEEP} kept (+{MALA_WARMUP} warm-up) iterations from the \
             mode: step {:.3e}, acceptance after warm-up {:.2?}, max mcse/sd {:.3}, max |mu - mode|/sd {:.3}, \
             {:.2e} datum evaluations, {:.1} s",
            r.step, r.accept, r.max_mcse_in_sd, r.mode_offset_in_sd, r.datum_evaluations as f64, r.seconds
        );
        let sds: Vec<String> = r.sd.iter().map(|v| format!("{v:.2e}")).collect();
        println!("  posterior mean {:.4?}, sd [{}]", r.mean, sds.join(", "));

        let mut picked: Vec<Chosen> = Vec::with_capacity(2);
        for (method, name) in METHODS.iter().enumerate() {
            eprintln!("  [progress] {:.0} s: N = {n}, tuning {name}", t_total.elapsed().as_secs_f64());
            let t = Instant::now();
            let mut etas = coarse.clone();
            let mut results = cells(&model, method, ni, &etas, TUNE_CHAINS, TUNE_SEED, &r, budget)?;
            let score = |o: &[ChainOutcome]| quantile(&o.iter().map(|c| c.hit).collect::<Vec<_>>(), 0.5);
            let best_of = |etas: &[f64], results: &[Vec<ChainOutcome>]| -> Option<usize> {
                (0..etas.len()).filter(|&e| score(&results[e]).is_some()).min_by_key(|&e| score(&results[e]))
            };
            // Refine: the powers of 2 on either side of the best coarse value.
            if let Some(b) = best_of(&etas, &results) {
                let fine = vec![etas[b] / 2.0, etas[b] * 2.0];
                let more = cells(&model, method, ni, &fine, TUNE_CHAINS, TUNE_SEED, &r, budget)?;
                etas.extend(fine);
                results.extend(more);
            }
            let mut order: Vec<usize> = (0..etas.len()).collect();
            order.sort_by(|&a, &b| etas[a].total_cmp(&etas[b]));
            println!("  {name} tuning (median cost over {TUNE_CHAINS} chains; '-' = not reached by the median chain):");
            for &e in &order {
                let hits: Vec<Option<u64>> = results[e].iter().map(|c| c.hit).collect();
                let reached = hits.iter().filter(|h| h.is_some()).count();
                let fin = median_f64(results[e].iter().map(|c| c.final_err).collect());
                println!(
                    "    eta {:>9.3e}  gamma {:>9.3e}  median cost {:>10}  reached {reached}/{TUNE_CHAINS}  median final error {fin:.3}",
                    etas[e],
                    etas[e] / n as f64,
                    fmt_cost(score(&results[e]))
                );
            }
            let tune_seconds = t.elapsed().as_secs_f64();
            let Some(b) = best_of(&etas, &results) else {
                println!("  {name}: no step size reached the target within the budget");
                picked.push(Chosen {
                    eta: f64::NAN,
                    median: None,
                    q25: None,
                    q75: None,
                    reached: 0,
                    setup_median: 0,
                    post_setup_median: None,
                    final_err_median: f64::NAN,
                    centre_err_median: None,
                });
                continue;
            };
            let eta = etas[b];
            let t = Instant::now();
            let eval = cells(&model, method, ni, &[eta], EVAL_CHAINS, EVAL_SEED, &r, budget)?.remove(0);
            let hits: Vec<Option<u64>> = eval.iter().map(|c| c.hit).collect();
            let post: Vec<Option<u64>> = eval.iter().map(|c| c.hit.map(|h| h - c.setup)).collect();
            let centre: Vec<f64> = eval.iter().filter_map(|c| c.centre_err).collect();
            let ch = Chosen {
                eta,
                median: quantile(&hits, 0.5),
                q25: quantile(&hits, 0.25),
                q75: quantile(&hits, 0.75),
                reached: hits.iter().filter(|h| h.is_some()).count(),
                setup_median: median_f64(eval.iter().map(|c| c.setup as f64).collect()) as u64,
                post_setup_median: quantile(&post, 0.5),
                final_err_median: median_f64(eval.iter().map(|c| c.final_err).collect()),
                centre_err_median: (!centre.is_empty()).then(|| median_f64(centre)),
            };
            println!(
                "  {} chosen eta {:.3e} (gamma {:.3e}); evaluation on {EVAL_CHAINS} fresh chains: median cost {} \
                 [quartiles {}, {}], reached {}/{EVAL_CHAINS}; tuning {:.1} s, evaluation {:.1} s",
                name,
                eta,
                eta / n as f64,
                fmt_cost(ch.median),
                fmt_cost(ch.q25),
                fmt_cost(ch.q75),
                ch.reached,
                tune_seconds,
                t.elapsed().as_secs_f64()
            );
            if let Some(ce) = ch.centre_err_median {
                println!(
                    "    SGD centre: median max |theta_hat - mu|/sd = {ce:.2}; median setup cost {:.3e} = {:.2} epochs",
                    ch.setup_median as f64,
                    ch.setup_median as f64 / n as f64
                );
            }
            picked.push(ch);
        }
        let [a, b]: [Chosen; 2] = picked.try_into().map_err(|_| "two methods")?;
        chosen.push([a, b]);
        refs.push(r);
        budgets.push(budget);
    }

    // --- Summary. ---------------------------------------------------------------------------------
    println!();
    println!(
        "Cost to the target (datum gradients, median over {EVAL_CHAINS} evaluation chains; epochs = cost / N; '-' = not reached)"
    );
    println!(
        "{:>7} {:>9} | {:>9} {:>10} {:>8} {:>6} {:>7} | {:>9} {:>10} {:>8} {:>10} {:>10} {:>6} {:>7}",
        "N",
        "budget",
        "SGLD eta",
        "cost",
        "epochs",
        "hit",
        "err@B",
        "CV eta",
        "total",
        "epochs",
        "setup",
        "post-setup",
        "hit",
        "err@B"
    );
    for (ni, &n) in N_VALUES.iter().enumerate() {
        let [sg, cv] = &chosen[ni];
        let ep = |c: Option<u64>| c.map_or("-".to_string(), |c| format!("{:.1}", c as f64 / n as f64));
        let eta = |e: f64| if e.is_finite() { format!("{e:.2e}") } else { "-".to_string() };
        println!(
            "{n:>7} {:>9.2e} | {:>9} {:>10} {:>8} {:>3}/{:<2} {:>7.3} | {:>9} {:>10} {:>8} {:>10.3e} {:>10} {:>3}/{:<2} {:>7.3}",
            budgets[ni] as f64,
            eta(sg.eta),
            fmt_cost(sg.median),
            ep(sg.median),
            sg.reached,
            EVAL_CHAINS,
            sg.final_err_median,
            eta(cv.eta),
            fmt_cost(cv.median),
            ep(cv.median),
            cv.setup_median as f64,
            fmt_cost(cv.post_setup_median),
            cv.reached,
            EVAL_CHAINS,
            cv.final_err_median
        );
    }
    println!(
        "  hit = evaluation chains that reached the target; err@B = median error max_j |mean_j - mu_j|/sigma_j at the \
         end of the budget B"
    );
    let nf: Vec<f64> = N_VALUES.iter().map(|&n| n as f64).collect();
    let as_f = |v: Vec<Option<u64>>| -> Vec<Option<f64>> { v.into_iter().map(|c| c.map(|c| c as f64)).collect() };
    let sgld_cost = as_f(chosen.iter().map(|c| c[0].median).collect());
    let cv_cost = as_f(chosen.iter().map(|c| c[1].median).collect());
    let cv_post = as_f(chosen.iter().map(|c| c[1].post_setup_median).collect());
    let cv_setup: Vec<Option<f64>> = chosen.iter().map(|c| Some(c[1].setup_median as f64)).collect();
    let slope_sgld = loglog_slope(&nf, &sgld_cost);
    let slope_cv = loglog_slope(&nf, &cv_cost);
    let slope_post = loglog_slope(&nf, &cv_post);
    let slope_setup = loglog_slope(&nf, &cv_setup);
    let f = |s: Option<f64>| s.map_or("n/a".to_string(), |s| format!("{s:.3}"));
    println!();
    println!(
        "log-log slopes of cost against N: SGLD {}, SGLD-CV total {}, SGLD-CV post-setup {}, SGLD-CV setup {}",
        f(slope_sgld),
        f(slope_cv),
        f(slope_post),
        f(slope_setup)
    );
    println!(
        "  Theorem 1 (Baker et al.): SGLD-CV post-setup ~ constant (slope 0), SGLD ~ linear (slope 1); setup ~ 2 passes (slope 1)."
    );

    // --- Plot. ------------------------------------------------------------------------------------
    let svg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("cv_cost_scaling.svg");
    let pts =
        |v: &[Option<f64>]| -> Vec<(f64, f64)> { nf.iter().zip(v).map(|(x, y)| (*x, y.unwrap_or(f64::NAN))).collect() };
    plot::loglog_svg(
        &svg,
        &format!("Cost to max|mean - mu|/sd <= {THRESHOLD}, logistic d = {DIM}, n = {BATCH_SIZE}"),
        "N (number of data)",
        "datum gradients (median chain)",
        &[
            plot::Series::new("SGLD", pts(&sgld_cost)),
            plot::Series::new("SGLD-CV total", pts(&cv_cost)),
            plot::Series::new("SGLD-CV after setup", pts(&cv_post)),
            plot::Series::dashed("SGLD-CV setup", pts(&cv_setup)),
        ],
    )?;
    let total_seconds = t_total.elapsed().as_secs_f64();
    println!("plot written to {}", svg.display());
    println!("total time {total_seconds:.1} s on {} threads", rayon::current_num_threads());

    // --- Machine-readable summary. ----------------------------------------------------------------
    let opt_f = |v: &[Option<f64>]| json_array(v.iter().map(|c| c.map_or("null".to_string(), num)));
    let fields: Vec<(&str, String)> = vec![
        ("n_data", json_array(N_VALUES.iter().map(|n| n.to_string()))),
        ("batch_size", BATCH_SIZE.to_string()),
        ("dim", DIM.to_string()),
        ("threshold", num(THRESHOLD)),
        ("sgld_cost", json_array(chosen.iter().map(|c| opt_num(c[0].median)))),
        ("sgldcv_cost", json_array(chosen.iter().map(|c| opt_num(c[1].median)))),
        ("sgldcv_setup_cost", json_array(chosen.iter().map(|c| c[1].setup_median.to_string()))),
        ("sgldcv_post_setup_cost", json_array(chosen.iter().map(|c| opt_num(c[1].post_setup_median)))),
        ("sgld_cost_q25", json_array(chosen.iter().map(|c| opt_num(c[0].q25)))),
        ("sgld_cost_q75", json_array(chosen.iter().map(|c| opt_num(c[0].q75)))),
        ("sgldcv_cost_q25", json_array(chosen.iter().map(|c| opt_num(c[1].q25)))),
        ("sgldcv_cost_q75", json_array(chosen.iter().map(|c| opt_num(c[1].q75)))),
        ("sgld_reached", json_array(chosen.iter().map(|c| c[0].reached.to_string()))),
        ("sgldcv_reached", json_array(chosen.iter().map(|c| c[1].reached.to_string()))),
        ("sgld_eta", json_array(chosen.iter().map(|c| num(c[0].eta)))),
        ("sgldcv_eta", json_array(chosen.iter().map(|c| num(c[1].eta)))),
        ("sgld_step", json_array(chosen.iter().zip(&N_VALUES).map(|(c, &n)| num(c[0].eta / n as f64)))),
        ("sgldcv_step", json_array(chosen.iter().zip(&N_VALUES).map(|(c, &n)| num(c[1].eta / n as f64)))),
        ("slope_sgld", slope_sgld.map_or("null".to_string(), num)),
        ("slope_sgldcv", slope_cv.map_or("null".to_string(), num)),
        ("slope_sgldcv_post_setup", slope_post.map_or("null".to_string(), num)),
        ("slope_sgldcv_setup", slope_setup.map_or("null".to_string(), num)),
        ("sgldcv_centre_err_in_sd", opt_f(&chosen.iter().map(|c| c[1].centre_err_median).collect::<Vec<_>>())),
        ("budget", json_array(budgets.iter().map(|b| b.to_string()))),
        ("tune_chains", TUNE_CHAINS.to_string()),
        ("eval_chains", EVAL_CHAINS.to_string()),
        ("mala_step", json_array(refs.iter().map(|r| num(r.step)))),
        ("mala_accept", json_array(refs.iter().map(|r| num(r.accept.iter().sum::<f64>() / r.accept.len() as f64)))),
        ("mala_max_mcse_in_sd", json_array(refs.iter().map(|r| num(r.max_mcse_in_sd)))),
        ("total_seconds", num(total_seconds)),
    ];
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("RESULT {{{}}}", body.join(","));
    Ok(())
}
