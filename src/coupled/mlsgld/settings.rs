//! What a multilevel run is told ([`MlSgldSettings`], [`AdaptiveSettings`], [`RmseTarget`],
//! [`MlCoupling`]) and what it returns ([`MlmcResult`], [`LevelStats`], [`MomentErrors`]).

use crate::cost::Cost;
use crate::coupled::mlsgld::allocate::{Dropped, LevelAcc, level_outputs, moment_bias_divisor};
use crate::coupled::mlsgld::coupling::MlCoupling;
use crate::error::{Error, Result};
use crate::numeric::rng::DEFAULT_SEED;
use crate::trace::diagnostics::{bound_z, nan_max, relative_bound};
use crate::trace::estimate::Estimate;
use serde::{Deserialize, Serialize};

/// Settings of [`MlSgld`](crate::MlSgld).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MlSgldSettings {
    /// m ≥ 1 in the horizons `T_l = m (l + 1) h₀`. The paper takes 5. Default 5.
    pub horizon: usize,
    /// The coupling. Default [`MlCoupling::Antithetic`].
    pub coupling: MlCoupling,
    /// Path averaging (§3.3): replace end-point values by averages over the last `W = window · h₀`
    /// of time, **the same time window for the fine and coarse paths of every level** (so the
    /// telescoping sum stays consistent), `0 < window ≤ horizon`. `None` (the default): end points.
    pub averaging_window: Option<f64>,
    /// Master seed: sample i of level l uses the stream `(seed, [l, i])`. Default [`DEFAULT_SEED`].
    pub seed: u64,
    /// Run the samples of a level in parallel on rayon (results are identical either way).
    /// Default true.
    pub parallel: bool,
    /// Keep the end points, so that the result can also be given as a signed-weight
    /// [`Estimate`] (not with averaging). Default false.
    pub keep_points: bool,
}

impl Default for MlSgldSettings {
    fn default() -> Self {
        MlSgldSettings {
            horizon: 5,
            coupling: MlCoupling::Antithetic,
            averaging_window: None,
            seed: DEFAULT_SEED,
            parallel: true,
            keep_points: false,
        }
    }
}

impl MlSgldSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        if self.horizon == 0 {
            return Err(Error::invalid("horizon", self.horizon, "must be >= 1"));
        }
        if let Some(w) = self.averaging_window
            && !(w > 0.0 && w <= self.horizon as f64)
        {
            return Err(Error::invalid("averaging_window", w, "must be in (0, horizon] (units of h0)"));
        }
        Ok(())
    }
}

/// The target root-mean-square error ε of an adaptive multilevel estimate of `π(g)`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RmseTarget {
    /// ε = this fraction of the posterior sd of g, estimated from the `n_initial` fine paths of
    /// level 2 (step h₀/4, horizon 3T₀: the least biased of the first three levels). The default, 0.1: an error a tenth of the posterior's own spread,
    /// whatever the scale of g.
    PosteriorSd(f64),
    /// ε in the units of g.
    Absolute(f64),
    /// Every coordinate's mean to RMSE ε = this fraction of its posterior sd and every sd to a
    /// relative RMSE ε, as read off the signed measure of the kept end points (needs
    /// [`MlSgldSettings::keep_points`] without an averaging window), and g to the same fraction
    /// of its sd as for [`PosteriorSd`](Self::PosteriorSd): the target for a user who wants the
    /// posterior, not one expectation. Each level takes the most samples any of the `2d + 1`
    /// outputs needs (Giles' allocation per output, each scaled by the run's current multilevel
    /// estimate of its coordinate's variance at its upper 2-standard-error value, the allocation
    /// read again from the new samples until it settles), and a level is added until every
    /// output's remaining bias is below `ε/√2` (the test on each coordinate discounts the noise of
    /// its finest correction at the Bonferroni z of [`MomentErrors::error_bound`]). On the crate's
    /// validation posteriors the target on g alone left single sds off by up to 39 %.
    ///
    /// Under this target only (the targets on g alone run as before) the coarsest level is
    /// dropped, the next one's fine paths becoming the base, when Giles' cost model says it
    /// costs more than it saves (see [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive)).
    Moments(f64),
}

impl Default for RmseTarget {
    fn default() -> Self {
        RmseTarget::PosteriorSd(0.1)
    }
}

/// Settings of [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive) (Giles' adaptive MLMC). Build them with
/// `AdaptiveSettings { target: RmseTarget::Absolute(0.01), ..Default::default() }`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveSettings {
    /// The target root-mean-square error ε of the estimate of `π(g)` (its bias being that of the
    /// finest level's law). Default `RmseTarget::PosteriorSd(0.1)`. (It was an absolute
    /// `rmse: f64` of 0.01, which on a parameter of posterior sd 0.017 was 0.58 sd.)
    pub target: RmseTarget,
    /// Samples taken at a new level before its variance is trusted. Default 100.
    pub n_initial: usize,
    /// Levels start at 0..=2 and are added up to this one. Default 10.
    pub max_level: usize,
    /// Stop with [`Error::BudgetExhausted`] once this many datum evaluations (gradients plus
    /// Hessian-vector products) have been spent. Default `None` (no limit).
    pub max_cost: Option<u64>,
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        AdaptiveSettings { target: RmseTarget::default(), n_initial: 100, max_level: 10, max_cost: None }
    }
}

/// Statistics of one level.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// The level l.
    pub level: usize,
    /// Samples taken.
    pub n_samples: usize,
    /// The mean of `Δ_l` (for the coarsest level the estimate uses, of `g_l`: level 0's
    /// paths, or a base level's fine paths alone).
    pub mean: f64,
    /// The sample variance of `Δ_l` (of `g_l` for the coarsest level, as for `mean`).
    pub variance: f64,
    /// The mean of the fine quantity `g_l` alone (a plain single-level estimate at level l).
    pub mean_fine: f64,
    /// The sample variance of `g_l`.
    pub variance_fine: f64,
    /// Work spent on this level.
    pub cost: Cost,
    /// Datum evaluations (gradients + Hessian-vector products) per sample.
    pub cost_per_sample: f64,
}

/// The result of a multilevel run.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct MlmcResult {
    /// The multilevel estimate `Σ_l mean(Δ_l)` of `π(g)`.
    pub estimate: f64,
    /// Its estimated variance `Σ_l V_l / N_l`.
    pub variance: f64,
    /// Per-level statistics, the coarsest level the estimate uses first (level 0 unless a
    /// [`RmseTarget::Moments`] run dropped coarser ones; see [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive)).
    pub levels: Vec<LevelStats>,
    /// Total work, the estimator's setup included.
    pub cost: Cost,
    /// Total datum-gradient evaluations divided by N.
    pub epochs: f64,
    /// The estimated remaining bias `|mean Δ_L| / (2^α − 1)` (adaptive runs; `None` for fixed).
    pub bias_estimate: Option<f64>,
    /// The signed-weight measure of the end points, if `keep_points` was set (no averaging):
    /// weight `1/N_l` on each fine point, `−1/N_l` on each coarse one (`−1/(2N_l)` on each of the
    /// antithetic pair), so that `expectation(g)` reproduces `estimate`.
    pub measure: Option<Estimate>,
    /// The absolute target RMSE ε of g the adaptive run aimed at (for
    /// [`RmseTarget::PosteriorSd`] and [`RmseTarget::Moments`], the fraction times level 2's sd
    /// of g; ∞ for `Moments` when g is constant); `None` for fixed runs.
    pub target_rmse: Option<f64>,
    /// The accuracy of every coordinate's mean and sd read off [`measure`](Self::measure), if
    /// `keep_points` was set (no averaging): the run's own error bars. Only
    /// [`RmseTarget::Moments`] targets them; other targets control the RMSE of g alone.
    pub moments: Option<MomentErrors>,
    /// The horizon (level-0 steps) of the run that produced this result.
    pub horizon: usize,
    /// How many times [`run_adaptive`](crate::MlSgld::run_adaptive) doubled the horizon because level 0
    /// had not relaxed (0 for fixed runs); the attempts' cost is in [`cost`](Self::cost).
    pub horizon_doublings: usize,
}

/// Most doublings of the horizon [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive) makes itself when level 0 has not
/// relaxed (×16 at most; every attempt's cost counts against `max_cost`).
pub const ADAPTIVE_HORIZON_DOUBLINGS: usize = 4;

/// The budget of [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive)'s own horizon doublings: all attempts together spend at
/// most this many times the first attempt's cost (and never more than `max_cost`); past it the
/// run returns [`Error::NotRelaxed`] of the last horizon tried.
pub const ADAPTIVE_RETRY_COST: u64 = 64;

/// One adaptive attempt's outcome.
pub(super) enum Attempt {
    Done(Box<MlmcResult>),
    NotRelaxed(Error, Cost),
}

/// The multilevel accuracy of each coordinate's mean and sd as read off the signed measure
/// ([`MlmcResult::measure`]): the same telescoping sum, bias test and variance formula as for g
/// ([`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive)), applied per coordinate to `θ_j` and to `(θ_j − μ̂_j)²` from the kept
/// end points (μ̂ the measure's mean; the sd's figures by the delta method, divided by `2 sd`).
/// Per output f: standard error `√(Σ_l V_l(f)/N_l)` and remaining bias
/// `|mean Δ_L(f)| / (2^α − 1)`, α fitted to the decay of `|mean Δ_l(f)|` over l ≥ 1 and held
/// in [0.5, 1], NaN with fewer than two levels. The bias estimate includes the noise of `mean Δ_L`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct MomentErrors {
    /// The measure's mean of each coordinate.
    pub mean: Vec<f64>,
    /// The measure's sd of each coordinate (`√max(0, var)`).
    pub sd: Vec<f64>,
    /// Standard error of each mean.
    pub se_mean: Vec<f64>,
    /// Standard error of each sd.
    pub se_sd: Vec<f64>,
    /// Estimated remaining bias of each mean (absolute value).
    pub bias_mean: Vec<f64>,
    /// Estimated remaining bias of each sd (absolute value).
    pub bias_sd: Vec<f64>,
    /// The run's own accuracy claim, as
    /// [`Convergence::error_bound`](crate::diagnostics::Convergence::error_bound) but with the
    /// bias: with probability [`BOUND_PROB`](crate::diagnostics::BOUND_PROB) (Bonferroni over
    /// the 2d outputs) every mean is within `error_bound` posterior sds and every sd within
    /// `error_bound × 100 %` of the posterior's — the largest over coordinates of
    /// `max(a_mean, a_sd) / (sd − a_sd)` with the absolute bounds `a = z·se + bias` and
    /// `z = Φ⁻¹(1 − (1 − BOUND_PROB)/(4d))` (∞ if `a_sd ≥ sd`). NaN with fewer than two levels.
    /// The bias estimate takes the decay rate α of the corrections in [0.5, 1] (SGLD's weak
    /// order is 1; faster fitted decays come from the first levels' horizon relaxation).
    pub error_bound: f64,
}

impl MomentErrors {
    /// From the levels' kept points (each sample: its fine point with class +1, then its coarse
    /// points with negative classes), or `None` if a level kept none.
    pub(super) fn of(data: &[LevelAcc], mu: &[f64], dropped: &Dropped) -> Option<Self> {
        let d = mu.len();
        if data.is_empty() || data.iter().any(|a| !a.keep || a.n == 0) {
            return None;
        }
        let (level_mean, mut level_var, counts) = level_outputs(data, mu);
        for (v, n) in level_var.iter_mut().zip(&counts) {
            let nf = *n as f64;
            v.iter_mut().for_each(|v| *v /= nf);
        }
        let big_l = data.len() - 1;
        let per_output = |k: usize| -> (f64, f64, f64) {
            let total: f64 = level_mean.iter().map(|m| m[k]).sum();
            let se = level_var.iter().map(|v| v[k]).sum::<f64>().sqrt();
            let bias = if big_l == 0 {
                f64::NAN
            } else {
                let means = dropped.corrections(level_mean.iter().map(|m| m[k].abs()), |f| f[k].abs());
                means[means.len() - 1] / moment_bias_divisor(&means)
            };
            (total, se, bias)
        };
        let z = bound_z(d);
        let mut out = MomentErrors {
            mean: Vec::with_capacity(d),
            sd: Vec::with_capacity(d),
            se_mean: Vec::with_capacity(d),
            se_sd: Vec::with_capacity(d),
            bias_mean: Vec::with_capacity(d),
            bias_sd: Vec::with_capacity(d),
            error_bound: 0.0,
        };
        for j in 0..d {
            let (m, se_m, b_m) = per_output(j);
            let (v, se_v, b_v) = per_output(d + j);
            let sd = v.max(0.0).sqrt();
            out.mean.push(m);
            out.sd.push(sd);
            out.se_mean.push(se_m);
            out.se_sd.push(se_v / (2.0 * sd));
            out.bias_mean.push(b_m);
            out.bias_sd.push(b_v / (2.0 * sd));
            // Absolute bounds on the mean's and the sd's errors, then in units of the *true* sd
            // at its lower bound `sd − a_sd` (the claim is about the posterior's sd, not ours).
            let (a_m, a_sd) = (z * se_m + b_m, (z * se_v + b_v) / (2.0 * sd));
            out.error_bound = nan_max(out.error_bound, relative_bound(a_m, a_sd, sd));
        }
        Some(out)
    }
}
