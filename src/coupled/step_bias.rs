//! The step-bias check of a finished run: a short coupled companion at half the step, started
//! where the run's chains ended, whose difference from its coarse partner estimates the bias of
//! the run's step (discretisation and gradient noise together, to first order in the step).
//!
//! R̂, ESS and the Monte Carlo bound of [`Convergence`] say whether the chains agree with each
//! other and how precisely they estimate *their own* limit; a constant-step SG-MCMC chain's limit
//! is not the posterior. [`step_bias`] estimates the gap: replicate pairs of
//! [`RichardsonRomberg`] (the sampler at h and at h/2 on shared Brownian increments, see
//! [`Runner`](crate::run::runner::Runner)), one pair per chain of the run, each started at its
//! chain's last state, so that no burn-in is spent forgetting a start. For a bias `b(h) ≈ β h`,
//! `2 (mean_h − mean_{h/2}) ≈ b(h)`, per coordinate for the mean and for the sd; the pairs'
//! spread gives its standard error. [`convergence_with_bias`] folds it into the run's verdict:
//! the accuracy the run states becomes, per coordinate, `|b| + z √(MCSE² + se_b²)` (the Bonferroni
//! z of [`Convergence::error_bound`]), and a run whose estimated bias exceeds its Monte Carlo
//! error says so beside "converged".
//!
//! Cost: a pair costs 3 steps per iteration (one at h, two at h/2); at
//! [`STEP_BIAS_COST`] = 0.25 of the run's iterations the companion runs 1/12 of them.

use crate::cost::Cost;
use crate::coupled::richardson::RichardsonRomberg;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::runner::Runner;
use crate::run::{RunOutput, RunSettings, Storage};
use crate::samplers::Discretisation;
use crate::trace::diagnostics::{
    Convergence, Summary, bound_z, chains_of, convergence_of, mcse_mean, nan_max, relative_bound, summary,
};
use crate::trace::estimate::Estimate;
use ndarray::Array2;

/// The default cost of [`step_bias`]'s companion relative to the run it checks: a quarter of the
/// run's iterations (the companion's pairs run 1/12 of them, 3 steps each).
pub const STEP_BIAS_COST: f64 = 0.25;

/// Fewest iterations of a [`step_bias`] companion pair (burn-in included), whatever the run's
/// length: below, its per-pair estimates are too noisy to say anything.
pub const STEP_BIAS_MIN_ITERATIONS: u64 = 500;

/// What [`step_bias`] estimated: per coordinate, the bias of the run's mean and sd at its step,
/// with standard errors from the coupled difference series.
///
/// R̂, ESS and the Monte Carlo bound of [`Convergence`] say whether the chains agree with each
/// other and how precisely they estimate *their own* limit; a constant-step SG-MCMC chain's
/// limit is not the posterior. The companion estimates the gap: [`RichardsonRomberg`] pairs (the
/// sampler at h and at h/2 on shared Brownian increments), one per chain of the run, each started
/// at its chain's last state. For a bias `b(h) ≈ β h`, `2 (mean_h − mean_{h/2}) ≈ b(h)`, for the
/// mean and for the sd of each coordinate (discretisation and gradient noise together, to first
/// order in the step). [`convergence_with_bias`] folds it into the verdict. A pair costs 3 steps
/// per iteration, so at [`STEP_BIAS_COST`] = 0.25 the pairs run a twelfth of the run's
/// iterations. The estimate's noise limits what a short check resolves: where the minibatch
/// noise dominates the coupled chains drift apart, and the bound it adds is wide rather than
/// wrong.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct StepBias {
    /// Estimated bias of each coordinate's mean, `2 (mean_h − mean_{h/2})`, averaged over pairs.
    pub bias_mean: Vec<f64>,
    /// Its standard error (spread over the pairs; NaN with one pair).
    pub bias_mean_se: Vec<f64>,
    /// Estimated bias of each coordinate's sd, `2 (sd_h − sd_{h/2})`.
    pub bias_sd: Vec<f64>,
    /// Its standard error.
    pub bias_sd_se: Vec<f64>,
    /// The companion's pairs.
    pub pairs: usize,
    /// Iterations of each pair (burn-in included).
    pub iterations: u64,
    /// What the companion spent.
    pub cost: Cost,
    /// Its datum gradients relative to the checked run's.
    pub cost_ratio: f64,
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
/// one companion pair per chain of the run that did not diverge, started at its last state, for
/// `cost / 3` of the run's iterations (at least [`STEP_BIAS_MIN_ITERATIONS`]), its first fifth
/// discarded, seeded from the run's seed.
///
/// Errors: [`Error::InvalidParameter`] unless `0 < cost ≤ 10`; [`Error::NoSamples`] if no chain
/// of the run is left to start from; those of [`Runner`](crate::run::runner::Runner).
pub fn step_bias<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    sampler: &S,
    out: &RunOutput<S>,
    cost: f64,
) -> Result<StepBias> {
    companion(model, sampler, out, cost).map(|c| c.bias)
}

/// A step-bias companion's estimate and its draws (on the sampler's coordinates), so that the
/// bias of any function of the draws can be estimated from the same pairs ([`Companion::mapped`]).
#[derive(Debug, Clone)]
pub(crate) struct Companion {
    /// The bias of the coordinates.
    pub bias: StepBias,
    /// The pairs' coarse chains (step h).
    coarse: Estimate,
    /// Their fine chains (step h/2).
    fine: Estimate,
}

impl Companion {
    /// The bias of `width` quantities `f(θ)` (a map of each draw), from the same pairs.
    pub(crate) fn mapped(&self, width: usize, f: &dyn Fn(&[f64], &mut [f64])) -> Result<StepBias> {
        let mut b = pair_biases(&self.coarse.map_draws(width, f)?, &self.fine.map_draws(width, f)?)?;
        b.iterations = self.bias.iterations;
        b.cost = self.bias.cost;
        b.cost_ratio = self.bias.cost_ratio;
        Ok(b)
    }
}

/// [`step_bias`], keeping the companion's draws.
pub(crate) fn companion<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    sampler: &S,
    out: &RunOutput<S>,
    cost: f64,
) -> Result<Companion> {
    if !(cost > 0.0 && cost <= 10.0) {
        return Err(Error::invalid("step-bias cost", cost, "must be in (0, 10] (a fraction of the run's iterations)"));
    }
    let starts: Vec<Vec<f64>> =
        out.chains.iter().filter(|c| !c.diverged && c.iterations > 0).map(|c| c.sampler.position().to_vec()).collect();
    if starts.is_empty() {
        return Err(Error::NoSamples { reason: "no chain of the run to start the step-bias companion from" });
    }
    let done: u64 = out.chains.iter().map(|c| c.iterations).max().unwrap_or(0);
    let n_iter = ((cost * done as f64 / 3.0).ceil() as u64).max(STEP_BIAS_MIN_ITERATIONS);
    let settings = RunSettings {
        n_iter,
        burn_in: n_iter / 5,
        thin: 1,
        n_chains: starts.len(),
        seed: out.settings.seed ^ 0x7374_6570_6269_6173,
        storage: Storage::Samples,
        parallel: out.settings.parallel,
        check_model: false,
        ..out.settings
    };
    let rr = Runner::new(model, &RichardsonRomberg::new(sampler.clone())).starts(&starts).settings(settings).run()?;
    let mut b = pair_biases(&rr.coarse, &rr.fine)?;
    b.cost = rr.cost - rr.setup_cost;
    let run_gradients = out.cost.datum_gradients.saturating_sub(out.setup_cost.datum_gradients).max(1);
    b.cost_ratio = b.cost.datum_gradients as f64 / run_gradients as f64;
    b.iterations = n_iter;
    Ok(Companion { bias: b, coarse: rr.coarse, fine: rr.fine })
}

/// The bias estimates `2 (a − b)` of the means and sds of a Richardson–Romberg run's coarse (a)
/// and fine (b) chains, pooled over pairs, with standard errors from the coupled difference
/// series: per coarse draw, its difference from the fine chain's draws over the same time (the
/// two half-steps averaged), for the mean `δ_t = a_t − b̄_t`, for the variance
/// `e_t = (a_t − ā)² − mean over the half-steps of (b − b̄)²`; their Monte Carlo standard errors
/// by the effective sample size over all pairs (as [`mcse_mean`](crate::diagnostics::mcse_mean)),
/// and the sd's by the delta method, `se(e)/(sd_a + sd_b)`. (The spread of a handful of pairs'
/// own estimates, used until 2026-11-28, called noise significant in 8 of 31 coordinates of a run
/// whose error was a third of the claimed bias.)
pub(crate) fn pair_biases(coarse: &Estimate, fine: &Estimate) -> Result<StepBias> {
    let d = coarse.dim();
    let k = coarse.n_parts();
    let mut r = StepBias {
        bias_mean: Vec::with_capacity(d),
        bias_mean_se: Vec::with_capacity(d),
        bias_sd: Vec::with_capacity(d),
        bias_sd_se: Vec::with_capacity(d),
        pairs: k,
        iterations: 0,
        cost: Cost::default(),
        cost_ratio: f64::NAN,
    };
    for j in 0..d {
        let a = chains_of(coarse, |x| x[j])?;
        let b = chains_of(fine, |x| x[j])?;
        let (na, nb) = (a.ncols(), b.ncols());
        if na == 0 || nb % na != 0 {
            return Err(Error::NoSamples { reason: "the step-bias companion's chains kept unmatched draws" });
        }
        let per = nb / na;
        let (ma, mb) = (a.mean().unwrap_or(f64::NAN), b.mean().unwrap_or(f64::NAN));
        let (sa, sb) = (a.std(1.0), b.std(1.0));
        let fine_over = |c: usize, t: usize, f: &dyn Fn(f64) -> f64| {
            (0..per).map(|i| f(b[[c, t * per + i]])).sum::<f64>() / per as f64
        };
        let delta = Array2::from_shape_fn((a.nrows(), na), |(c, t)| a[[c, t]] - fine_over(c, t, &|x| x));
        let e = Array2::from_shape_fn((a.nrows(), na), |(c, t)| {
            (a[[c, t]] - ma).powi(2) - fine_over(c, t, &|x| (x - mb).powi(2))
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
