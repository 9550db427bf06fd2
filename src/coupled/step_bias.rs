//! The step-bias check of a finished run: a short coupled companion at half the step, started
//! where the run's chains ended, whose difference from its coarse partners estimates the bias of
//! the run's step (discretisation and gradient noise together, to first order in the step).
//!
//! R̂, ESS and the Monte Carlo bound of [`Convergence`] say whether the chains agree with each
//! other and how precisely they estimate *their own* limit; a constant-step SG-MCMC chain's limit
//! is not the posterior. [`step_bias`] estimates the gap with one **antithetic triple** per chain
//! of the run, started at its last state, so that no burn-in is spent forgetting a start: a fine
//! chain at h/2 and two coarse chains at h on its Brownian increments (each coarse step driven
//! by the pair's `(z₁ + z₂)/√2`), coarse `+` on the first minibatch of each pair of fine steps and
//! coarse `−` on the second — the subsampling coupling of antithetic multilevel SGLD (Giles,
//! Nagapetyan, Szpruch, Vollmer & Zygalakis, arXiv 1609.06144, Algorithm 2). Each chain alone has
//! the sampler's law at its step, so for a bias `b(h) ≈ β h`, `2 (mean_h − mean_{h/2}) ≈ b(h)`,
//! per coordinate for the mean and for the sd; the coupled difference series gives its standard
//! error. The minibatch noise of the two coarse steps averages to the fine pair's to first order,
//! so where it dominates (plain SGLD at N/n in the hundreds) the difference stays small instead of
//! drifting as independent minibatches make it (the pairs of [`RichardsonRomberg`](crate::RichardsonRomberg)
//! used until 2026-12, whose noise set the bound then). [`convergence_with_bias`] folds it into
//! the run's verdict: the accuracy the run states becomes, per coordinate,
//! `|b| + z √(MCSE² + se_b²)` (the Bonferroni z of [`Convergence::error_bound`]), and a run whose
//! estimated bias exceeds its Monte Carlo error says so beside "converged".
//!
//! Cost: a triple costs 4 steps per iteration (two at h/2, two at h); at
//! [`STEP_BIAS_COST`] = 0.25 of the run's iterations the companion runs 1/16 of them.

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::numeric::rng::{fill_standard_normal, stream};
use crate::run::RunOutput;
use crate::run::observe::{Control, Observer};
use crate::samplers::Discretisation;
use crate::trace::diagnostics::{
    Convergence, Summary, bound_z, chains_of, convergence_of, mcse_mean, mcse_sd, nan_max, relative_bound, summary,
};
use crate::trace::estimate::Estimate;
use ndarray::Array2;
use rayon::prelude::*;

/// The default cost of [`step_bias`]'s companion relative to the run it checks: a quarter of the
/// run's iterations (the companion's triples run 1/16 of them, 4 steps each).
pub const STEP_BIAS_COST: f64 = 0.25;

/// The most a [`Sample`](crate::Sample)'s step-bias companion grows to, relative to the run's
/// cost, where its own noise is the larger part of the stated bound (see [`Sample::bias_check`](crate::Sample::bias_check)):
/// as much as the run.
pub const STEP_BIAS_MAX_COST: f64 = 1.0;

/// Fewest iterations of a [`step_bias`] companion triple (burn-in included), whatever the run's
/// length: below, its estimates are too noisy to say anything.
pub const STEP_BIAS_MIN_ITERATIONS: u64 = 500;

/// What [`step_bias`] estimated: per coordinate, the bias of the run's mean and sd at its step,
/// with standard errors from the coupled difference series.
///
/// R̂, ESS and the Monte Carlo bound of [`Convergence`] say whether the chains agree with each
/// other and how precisely they estimate *their own* limit; a constant-step SG-MCMC chain's
/// limit is not the posterior. The companion estimates the gap (see the [module
/// docs](crate::step_bias)): one antithetic triple per chain of the run — a fine chain at h/2,
/// two coarse chains at h on its increments and on the first and second minibatch of each of its
/// pairs of steps — started at the chain's last state. For a bias `b(h) ≈ β h`,
/// `2 (mean_h − mean_{h/2}) ≈ b(h)`, for the mean and for the sd of each coordinate
/// (discretisation and gradient noise together, to first order in the step).
/// [`convergence_with_bias`] folds it into the verdict. A triple costs 4 steps per iteration, so
/// at [`STEP_BIAS_COST`] = 0.25 the triples run a sixteenth of the run's iterations.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct StepBias {
    /// Estimated bias of each coordinate's mean, `2 (mean_h − mean_{h/2})`, pooled over triples.
    pub bias_mean: Vec<f64>,
    /// Its standard error (from the coupled difference series).
    pub bias_mean_se: Vec<f64>,
    /// Estimated bias of each coordinate's sd, `2 (sd_h − sd_{h/2})`.
    pub bias_sd: Vec<f64>,
    /// Its standard error.
    pub bias_sd_se: Vec<f64>,
    /// The companion's triples (one per chain of the run).
    pub pairs: usize,
    /// Iterations of each triple (burn-in included).
    pub iterations: u64,
    /// What the companion spent.
    pub cost: Cost,
    /// Its datum gradients relative to the checked run's.
    pub cost_ratio: f64,
    /// Its wall time.
    pub wall_time: std::time::Duration,
}

impl StepBias {
    /// The coordinates whose mean or sd bias stands out of its standard error by more than the
    /// Bonferroni z of [`Convergence::error_bound`].
    pub fn significant(&self) -> Vec<usize> {
        let z = bound_z(self.bias_mean.len());
        (0..self.bias_mean.len())
            .filter(|&j| {
                self.bias_mean[j].abs() > z * self.bias_mean_se[j] || self.bias_sd[j].abs() > z * self.bias_sd_se[j]
            })
            .collect()
    }
}

/// Estimates the step bias of the finished run `out` of `sampler` (see [`StepBias`]):
/// one antithetic triple per chain of the run that did not diverge, started at its last state,
/// for `cost / 4` of the run's iterations (at least [`STEP_BIAS_MIN_ITERATIONS`]), its first fifth
/// discarded, seeded from the run's seed.
///
/// Errors: [`Error::InvalidParameter`] unless `0 < cost ≤ 10`; [`Error::NoSamples`] if no chain
/// of the run is left to start from; those of the sampler's steps (a divergence of the companion
/// is an error).
pub fn step_bias<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    sampler: &S,
    out: &RunOutput<S>,
    cost: f64,
) -> Result<StepBias> {
    // Without an observer nothing stops the companion: `None` cannot come back.
    companion(model, sampler, out, cost, None, None)?
        .map(|c| c.bias)
        .ok_or(Error::NoSamples { reason: "the step-bias companion was stopped" })
}

/// [`step_bias`], keeping the companion's draws: per chain of the run that did not diverge, an
/// antithetic triple (see [`StepBias`]) started at its last state for `cost / 4` of the run's
/// iterations (at least [`STEP_BIAS_MIN_ITERATIONS`]; a triple's iteration costs four steps),
/// its first fifth discarded, seeded from the run's seed; the triples run in parallel when the run
/// did. With `grow_to` (a larger cost share), the triples then go on, where their own noise is
/// the larger part of the bound, to the length that minimises the cost of a bound: see
/// [`companion_growth`]. An `observer` is asked every [`Observer::interval`] iterations
/// ([`Observer::observe_bias_check`]) whether to go on: `Ok(None)` when it stopped the
/// companion. Observing changes no draw (each triple draws from its own streams, whatever the
/// blocks it advances in).
pub(crate) fn companion<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    sampler: &S,
    out: &RunOutput<S>,
    cost: f64,
    grow_to: Option<f64>,
    observer: Option<&dyn Observer>,
) -> Result<Option<Companion>> {
    if !(cost > 0.0 && cost <= 10.0) {
        return Err(Error::invalid("step-bias cost", cost, "must be in (0, 10] (a fraction of the run's iterations)"));
    }
    let starts: Vec<Vec<f64>> =
        out.chains.iter().filter(|c| !c.diverged && c.iterations > 0).map(|c| c.sampler.position().to_vec()).collect();
    if starts.is_empty() {
        return Err(Error::NoSamples { reason: "no chain of the run to start the step-bias companion from" });
    }
    let started = std::time::Instant::now();
    let done: u64 = out.chains.iter().map(|c| c.iterations).max().unwrap_or(0);
    let n_iter = ((cost * done as f64 / 4.0).ceil() as u64).max(STEP_BIAS_MIN_ITERATIONS);
    let burn_in = n_iter / 5;
    let seed = out.settings.seed ^ 0x7374_6570_6269_6173;
    let parallel = out.settings.parallel;
    let mut triples: Vec<TripleRun<S>> = starts
        .iter()
        .enumerate()
        .map(|(c, start)| TripleRun::new(model, sampler, start, burn_in, seed, c as u64))
        .collect::<Result<_>>()?;
    // Advances every triple to iteration `to`, in blocks of the observer's interval; `false`
    // when the observer stopped it.
    let every = observer.map_or(u64::MAX, |o| o.interval().max(1));
    let advance = |triples: &mut Vec<TripleRun<S>>, to: u64| -> Result<bool> {
        let mut at = triples.iter().map(|t| t.t).min().unwrap_or(to);
        while at < to {
            let next = (at / every).saturating_add(1).saturating_mul(every).min(to);
            if parallel {
                triples.par_iter_mut().try_for_each(|t| t.advance(model, next))?;
            } else {
                triples.iter_mut().try_for_each(|t| t.advance(model, next))?;
            }
            at = next;
            if observer.is_some_and(|o| o.observe_bias_check(at, to) == Control::Stop) {
                return Ok(false);
            }
        }
        Ok(true)
    };
    if !advance(&mut triples, n_iter)? {
        return Ok(None);
    }
    let mut draws = CompanionDraws::of(model, &triples)?;
    let mut b = triple_biases(&draws)?;
    let mut total = n_iter;
    let run_gradients = out.cost.datum_gradients.saturating_sub(out.setup_cost.datum_gradients).max(1);
    if let Some(share) = grow_to {
        // The run's Monte Carlo errors of each mean and sd (the summary's, without its ranks).
        let mcse: Vec<(f64, f64)> = (0..out.estimate.dim())
            .map(|j| {
                let x = chains_of(&out.estimate, |t| t[j])?;
                Ok((mcse_mean(x.view())?, mcse_sd(x.view())?))
            })
            .collect::<Result<_>>()?;
        let spent = triples.iter().fold(Cost::default(), |c, t| c + t.cost()).datum_gradients as f64;
        let s0 = spent / run_gradients as f64;
        let most = ((share * done as f64 / 4.0).ceil() as u64).max(n_iter);
        let kept = (n_iter - burn_in) as f64;
        let want = companion_growth(&mcse, &b, s0).map_or(n_iter, |f| burn_in + (kept * f).ceil() as u64);
        let to = want.clamp(n_iter, most);
        if to > n_iter {
            if !advance(&mut triples, to)? {
                return Ok(None);
            }
            draws = CompanionDraws::of(model, &triples)?;
            b = triple_biases(&draws)?;
            total = to;
        }
    }
    b.cost = triples.iter().fold(Cost::default(), |c, t| c + t.cost());
    b.cost_ratio = b.cost.datum_gradients as f64 / run_gradients as f64;
    b.iterations = total;
    b.wall_time = started.elapsed();
    Ok(Some(Companion { bias: b, draws }))
}

/// How much longer the companion should run, as a factor on its kept iterations, from its cost
/// share so far `s₀`: where its noise `se_b` sets a coordinate's bound beside the run's Monte
/// Carlo error `m`, the cost of a bound (run and companion together) is least at the share
/// `s* = r √s₀`, `r = se_b/m` now: for a fixed run the bound's noise `√(m² + se_b²)` scales as
/// `√(1 + r² s₀/s)`, so a run of the length that meets a target costs `∝ (1 + r² s₀/s)(1 + s)`,
/// least there. The worst coordinate's r (means and sds) decides; `None` when `s* ≤ s₀`.
fn companion_growth(mcse: &[(f64, f64)], b: &StepBias, s0: f64) -> Option<f64> {
    let r = (0..mcse.len())
        .flat_map(|j| {
            let m = mcse[j].0.max(f64::MIN_POSITIVE);
            let s = mcse[j].1.max(f64::MIN_POSITIVE);
            [b.bias_mean_se[j] / m, b.bias_sd_se[j] / s]
        })
        .filter(|r| r.is_finite())
        .fold(0.0_f64, f64::max);
    let f = r / s0.max(f64::MIN_POSITIVE).sqrt();
    (f > 1.0).then_some(f)
}

/// An antithetic triple from `start`: the fine chain at h/2 draws its minibatches and its
/// increments from the streams `(seed, [c, 1])` and `(seed, [c, 0])`; coarse chain `+` takes each
/// pair's first minibatch, `−` its second, both the pair's increments combined `(z₁ + z₂)/√2`.
/// A sampler draws a step's minibatch from the generator it is given, so a coarse chain gets the
/// fine chain's by a copy of the minibatch stream's state before the fine chain drew it (the
/// `−` chain one iteration behind, as its minibatch is drawn in the next pair); each chain's
/// own law is the sampler's, whatever the estimator. It can be advanced in stages, the draws the
/// same as in one.
struct TripleRun<S> {
    fine: S,
    plus: S,
    minus: S,
    rz: crate::numeric::rng::ChainRng,
    rf: crate::numeric::rng::ChainRng,
    start: Vec<f64>,
    /// The last pair's combined increment (for `−`'s lagging step).
    zc: Vec<f64>,
    /// Iterations done.
    t: u64,
    burn_in: u64,
    /// Kept rows, flat: `+` and `−` one per kept iteration (`−` without the last, pending), the
    /// fine chain two.
    plus_rows: Vec<f64>,
    minus_rows: Vec<f64>,
    fine_rows: Vec<f64>,
}

impl<S: Discretisation> TripleRun<S> {
    fn new<M: Model + ?Sized>(model: &M, sampler: &S, start: &[f64], burn_in: u64, seed: u64, c: u64) -> Result<Self> {
        let mut rf = stream(seed, &[c, 1]);
        let (mut fine, mut plus) = (sampler.clone(), sampler.clone());
        plus.init(model, start, &mut rf.clone())?;
        fine.init(model, start, &mut rf)?;
        Ok(TripleRun {
            fine,
            plus,
            minus: sampler.clone(),
            rz: stream(seed, &[c, 0]),
            rf,
            start: start.to_vec(),
            zc: vec![0.0; sampler.increment_len(start.len())],
            t: 0,
            burn_in,
            plus_rows: Vec::new(),
            minus_rows: Vec::new(),
            fine_rows: Vec::new(),
        })
    }

    /// Advances to iteration `to`.
    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64) -> Result<()> {
        let len = self.zc.len();
        let (mut z1, mut z2) = (vec![0.0; len], vec![0.0; len]);
        while self.t < to {
            let t = self.t + 1;
            fill_standard_normal(&mut self.rz, &mut z1);
            fill_standard_normal(&mut self.rz, &mut z2);
            // The state before the fine chain draws the pair's second minibatch (at the end of
            // its first half-step): chain − starts on it, or takes the last pair's step on it.
            let second = self.rf.clone();
            if t == 1 {
                self.minus.init(model, &self.start, &mut second.clone())?;
            } else {
                self.minus.step_fraction(model, t - 1, 1.0, &self.zc, &mut second.clone())?;
                if t - 1 > self.burn_in {
                    self.minus_rows.extend_from_slice(self.minus.position());
                }
            }
            self.fine.step_fraction(model, 2 * t - 1, 0.5, &z1, &mut self.rf)?;
            if t > self.burn_in {
                self.fine_rows.extend_from_slice(self.fine.position());
            }
            let first_next = self.rf.clone();
            self.fine.step_fraction(model, 2 * t, 0.5, &z2, &mut self.rf)?;
            self.plus.combine_increments(t, 1.0, &z1, &z2, &mut self.zc);
            self.plus.step_fraction(model, t, 1.0, &self.zc, &mut first_next.clone())?;
            if t > self.burn_in {
                self.fine_rows.extend_from_slice(self.fine.position());
                self.plus_rows.extend_from_slice(self.plus.position());
            }
            self.t = t;
        }
        Ok(())
    }

    /// The kept draws so far, `−`'s pending last step made on a copy.
    fn draws<M: Model + ?Sized>(&self, model: &M) -> Result<(Array2<f64>, Array2<f64>, Array2<f64>)> {
        let d = self.start.len();
        let mut minus_rows = self.minus_rows.clone();
        if self.t > 0 {
            let mut last = self.minus.clone();
            last.step_fraction(model, self.t, 1.0, &self.zc, &mut self.rf.clone())?;
            if self.t > self.burn_in {
                minus_rows.extend_from_slice(last.position());
            }
        }
        let shape = |v: &[f64]| Array2::from_shape_vec((v.len() / d, d), v.to_vec());
        let err = |_| Error::NoSamples { reason: "the step-bias companion's draws could not be shaped" };
        Ok((
            shape(&self.plus_rows).map_err(err)?,
            shape(&minus_rows).map_err(err)?,
            shape(&self.fine_rows).map_err(err)?,
        ))
    }

    /// What the three chains spent.
    fn cost(&self) -> Cost {
        self.fine.cost() + self.plus.cost() + self.minus.cost()
    }
}

/// A step-bias companion's estimate and its draws (on the sampler's coordinates), so that the
/// bias of any function of the draws can be estimated from the same triples
/// ([`Companion::mapped`]).
#[derive(Debug, Clone)]
pub(crate) struct Companion {
    /// The bias of the coordinates.
    pub bias: StepBias,
    /// The triples' draws.
    draws: CompanionDraws,
}

/// Per triple, the kept draws of its coarse chains `+` and `−` (one row per kept iteration) and
/// of its fine chain (two).
#[derive(Debug, Clone)]
struct CompanionDraws {
    plus: Vec<Array2<f64>>,
    minus: Vec<Array2<f64>>,
    fine: Vec<Array2<f64>>,
}

impl CompanionDraws {
    /// The triples' kept draws.
    fn of<M: Model + ?Sized, S: Discretisation>(model: &M, triples: &[TripleRun<S>]) -> Result<Self> {
        let (mut plus, mut minus, mut fine) = (Vec::new(), Vec::new(), Vec::new());
        for t in triples {
            let (p, m, f) = t.draws(model)?;
            plus.push(p);
            minus.push(m);
            fine.push(f);
        }
        Ok(CompanionDraws { plus, minus, fine })
    }

    /// Every draw mapped by `f` to `width` quantities.
    fn mapped(&self, width: usize, f: &dyn Fn(&[f64], &mut [f64])) -> CompanionDraws {
        let map = |a: &Array2<f64>| {
            let mut out = Array2::zeros((a.nrows(), width));
            let mut buf = vec![0.0; width];
            for (row, mut o) in a.outer_iter().zip(out.outer_iter_mut()) {
                let x = row.to_vec();
                f(&x, &mut buf);
                o.assign(&ndarray::ArrayView1::from(&buf[..]));
            }
            out
        };
        CompanionDraws {
            plus: self.plus.iter().map(map).collect(),
            minus: self.minus.iter().map(map).collect(),
            fine: self.fine.iter().map(map).collect(),
        }
    }
}

impl Companion {
    /// The bias of `width` quantities `f(θ)` (a map of each draw), from the same triples.
    pub(crate) fn mapped(&self, width: usize, f: &dyn Fn(&[f64], &mut [f64])) -> Result<StepBias> {
        let mut b = triple_biases(&self.draws.mapped(width, f))?;
        b.iterations = self.bias.iterations;
        b.cost = self.bias.cost;
        b.cost_ratio = self.bias.cost_ratio;
        b.wall_time = self.bias.wall_time;
        Ok(b)
    }
}

/// The bias estimates `2 (a − b)` of the means and sds of the triples' coarse (a: both `+` and
/// `−`) and fine (b) chains, pooled over triples, with standard errors from the coupled
/// difference series: per kept iteration t, for the mean `δ_t = (a⁺_t + a⁻_t)/2 − (b_{2t−1} +
/// b_{2t})/2`, for the variance `e_t = ((a⁺_t − ā)² + (a⁻_t − ā)²)/2 − ((b_{2t−1} − b̄)² +
/// (b_{2t} − b̄)²)/2`; their Monte Carlo standard errors by the effective sample size over all
/// triples (as [`mcse_mean`](crate::diagnostics::mcse_mean)), and the sd's by the delta method,
/// `se(e)/(sd_a + sd_b)`. The antithetic pair's minibatch terms cancel in `δ` to first order, so
/// its variance is that of the discretisation's difference: far below that of independent pairs
/// under strong minibatch noise.
fn triple_biases(draws: &CompanionDraws) -> Result<StepBias> {
    let k = draws.fine.len();
    let d = draws.fine.first().map_or(0, |f| f.ncols());
    let n = draws.plus.first().map_or(0, |p| p.nrows());
    if k == 0 || n < 2 || draws.plus.iter().chain(&draws.minus).any(|a| a.nrows() != n) {
        return Err(Error::NoSamples { reason: "the step-bias companion kept too few draws" });
    }
    let mut r = StepBias {
        bias_mean: Vec::with_capacity(d),
        bias_mean_se: Vec::with_capacity(d),
        bias_sd: Vec::with_capacity(d),
        bias_sd_se: Vec::with_capacity(d),
        pairs: k,
        iterations: 0,
        cost: Cost::default(),
        cost_ratio: f64::NAN,
        wall_time: std::time::Duration::ZERO,
    };
    for j in 0..d {
        let coarse = || draws.plus.iter().chain(&draws.minus).flat_map(|a| a.column(j).to_vec());
        let fine = || draws.fine.iter().flat_map(|a| a.column(j).to_vec());
        let moments = |it: &mut dyn Iterator<Item = f64>| {
            let v: Vec<f64> = it.collect();
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0);
            (m, var.sqrt())
        };
        let ((ma, sa), (mb, sb)) = (moments(&mut coarse()), moments(&mut fine()));
        let delta = Array2::from_shape_fn((k, n), |(c, t)| {
            0.5 * (draws.plus[c][[t, j]] + draws.minus[c][[t, j]])
                - 0.5 * (draws.fine[c][[2 * t, j]] + draws.fine[c][[2 * t + 1, j]])
        });
        let e = Array2::from_shape_fn((k, n), |(c, t)| {
            let a = 0.5 * ((draws.plus[c][[t, j]] - ma).powi(2) + (draws.minus[c][[t, j]] - ma).powi(2));
            let b = 0.5 * ((draws.fine[c][[2 * t, j]] - mb).powi(2) + (draws.fine[c][[2 * t + 1, j]] - mb).powi(2));
            a - b
        });
        r.bias_mean.push(2.0 * (ma - mb));
        r.bias_mean_se.push(2.0 * mcse_mean(delta.view()).unwrap_or(f64::NAN));
        r.bias_sd.push(2.0 * (sa - sb));
        r.bias_sd_se.push(2.0 * mcse_mean(e.view()).unwrap_or(f64::NAN) / (sa + sb));
    }
    Ok(r)
}

/// The convergence verdict of `est` (as [`convergence`](crate::diagnostics::convergence)) with
/// the step bias `bias` folded into the accuracy it states: per coordinate, a mean within
/// `|b_mean| + z √(MCSE_mean² + se²)` and an sd within `|b_sd| + z √(MCSE_sd² + se²)`, in units
/// of the sd at its lower bound; [`Convergence::bias_bound`] holds the worst, and
/// [`Convergence::step_bias`] the largest estimated bias alone. Where the bias exceeds the Monte
/// Carlo error, [`Convergence`]'s `Display` says so beside "converged".
///
/// Errors: as [`summary`](crate::diagnostics::summary); [`Error::DimensionMismatch`] if `bias`
/// is not of `est`'s dimension.
pub fn convergence_with_bias(est: &Estimate, bias: &StepBias) -> Result<Convergence> {
    let rows = rows_with_bias(est, bias)?;
    Ok(with_bias(convergence_of(&rows, est.n_parts()), &rows, bias))
}

/// The summary rows of `est` with the step bias's columns filled in.
pub(crate) fn rows_with_bias(est: &Estimate, bias: &StepBias) -> Result<Vec<Summary>> {
    crate::error::check_len("step-bias dimension", est.dim(), bias.bias_mean.len())?;
    let mut rows = summary(est)?;
    for (j, r) in rows.iter_mut().enumerate() {
        r.bias_mean = Some(bias.bias_mean[j]);
        r.bias_sd = Some(bias.bias_sd[j]);
    }
    Ok(rows)
}

/// `conv` with the bias's bound, largest estimate and cost.
pub(crate) fn with_bias(mut conv: Convergence, rows: &[Summary], bias: &StepBias) -> Convergence {
    let z = bound_z(rows.len());
    let (mut bound, mut largest) = (0.0_f64, 0.0_f64);
    // Only biases that stand out of their noise are reported as the step's; every estimate, noise
    // and all, enters the bound.
    let significant = bias.significant();
    for (j, r) in rows.iter().enumerate() {
        let quad = |mcse: f64, se: f64| (mcse * mcse + if se.is_nan() { 0.0 } else { se * se }).sqrt();
        let a_mean = bias.bias_mean[j].abs() + z * quad(r.mcse_mean, bias.bias_mean_se[j]);
        let a_sd = bias.bias_sd[j].abs() + z * quad(r.mcse_sd, bias.bias_sd_se[j]);
        bound = nan_max(bound, relative_bound(a_mean, a_sd, r.sd));
        if significant.contains(&j) {
            largest = nan_max(largest, bias.bias_mean[j].abs().max(bias.bias_sd[j].abs()) / r.sd);
        }
    }
    conv.bias_bound = Some(bound);
    conv.step_bias = Some(largest);
    conv.bias_cost = Some(bias.cost_ratio);
    conv
}
