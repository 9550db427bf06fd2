//! Multilevel and antithetic multilevel SGLD (Giles, Nagapetyan, Szpruch, Vollmer & Zygalakis).

use super::SharedIncrements;
use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len, check_positive};
use crate::gradient::{SubsampledEstimator, uniform_below};
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::{DEFAULT_SEED, stream};
use crate::run::placement::{Failure, Local, Placement, rank_error};
use crate::samplers::{Sgld, SgldSettings, SubsampledDiscretisation};
use crate::trace::diagnostics::{bound_z, nan_max, relative_bound};
use crate::trace::estimate::Estimate;
use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

/// How the coarse path of a level is coupled to the fine one.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MlCoupling {
    /// Algorithm 1: one coarse path; its minibatch is n indices drawn **without replacement**
    /// from the union τ¹ ∪ τ² of the two fine minibatches; `Δ_l = g(θᶠ) − g(θᶜ)`. With an
    /// estimator drawing with replacement (the paper's setting) the coarse minibatch has the law
    /// of a fine one and the telescoping sum is exact; with one drawing **without** replacement
    /// the union can repeat an index, so the coarse minibatch is not exactly a draw without
    /// replacement and the sum is only approximately telescoping: use
    /// [`Antithetic`](Self::Antithetic) there.
    Subsampling,
    /// Algorithm 2 (the default): two coarse paths, c⁺ on τ¹ and c⁻ on τ², both with the summed
    /// Gaussian increment; `Δ_l = g(θᶠ) − ½(g(θᶜ⁺) + g(θᶜ⁻))`.
    #[default]
    Antithetic,
}

/// Settings of [`MlSgld`].
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
    /// costs more than it saves (see [`MlSgld::run_adaptive`]).
    Moments(f64),
}

impl Default for RmseTarget {
    fn default() -> Self {
        RmseTarget::PosteriorSd(0.1)
    }
}

/// Settings of [`MlSgld::run_adaptive`] (Giles' adaptive MLMC). Build them with
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
    /// [`RmseTarget::Moments`] run dropped coarser ones; see [`MlSgld::run_adaptive`]).
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
    /// How many times [`run_adaptive`](MlSgld::run_adaptive) doubled the horizon because level 0
    /// had not relaxed (0 for fixed runs); the attempts' cost is in [`cost`](Self::cost).
    pub horizon_doublings: usize,
}

/// Most doublings of the horizon [`MlSgld::run_adaptive`] makes itself when level 0 has not
/// relaxed (×16 at most; every attempt's cost counts against `max_cost`).
pub const ADAPTIVE_HORIZON_DOUBLINGS: usize = 4;

/// The budget of [`MlSgld::run_adaptive`]'s own horizon doublings: all attempts together spend at
/// most this many times the first attempt's cost (and never more than `max_cost`); past it the
/// run returns [`Error::NotRelaxed`] of the last horizon tried.
pub const ADAPTIVE_RETRY_COST: u64 = 64;

/// One adaptive attempt's outcome.
enum Attempt {
    Done(Box<MlmcResult>),
    NotRelaxed(Error, Cost),
}

/// The multilevel accuracy of each coordinate's mean and sd as read off the signed measure
/// ([`MlmcResult::measure`]): the same telescoping sum, bias test and variance formula as for g
/// ([`MlSgld::run_adaptive`]), applied per coordinate to `θ_j` and to `(θ_j − μ̂_j)²` from the kept
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
    fn of(data: &[LevelAcc], mu: &[f64], dropped: &Dropped) -> Option<Self> {
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

/// For [`RmseTarget::Moments`] at fraction `eps`: the samples each level needs (per output f of
/// θ_j and (θ_j − μ_j)², scaled by the multilevel estimate `s_j²` of θ_j's variance plus two of
/// its standard errors, resp.
/// `(2 s_j²)²` so that a variance's error is in units of the sd's relative error: Giles'
/// `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉`, the largest over outputs), and the largest scaled
/// remaining bias over outputs, `max(0, |mean Δ_L| − z se_L) / (2^α − 1)` with α fitted to the
/// decay of `|mean Δ_l|` over l ≥ 1 in [0.5, 1] (as [`MomentErrors`]) and z = `bound_z(d)`: the
/// noise of the finest correction is discounted so that 2d noisy tests do not add levels for
/// nothing. `costs` are the levels' datum evaluations per sample; μ is the coarsest level's mean
/// (level 0's unless the run dropped it); `dropped` holds the corrections of dropped levels the
/// decay fits still use.
fn moment_targets(data: &[LevelAcc], costs: &[f64], eps: f64, dropped: &Dropped) -> (Vec<f64>, f64) {
    let d = data.first().and_then(|a| a.points.first()).map_or(0, |p| p.0.len());
    let n0 = data.first().map_or(0, |a| a.points.len());
    let mut want = vec![0.0; data.len()];
    if d == 0 || n0 == 0 {
        return (want, 0.0);
    }
    let mut mu = vec![0.0; d];
    for (p, _) in &data[0].points {
        mu.iter_mut().zip(p).for_each(|(m, x)| *m += x);
    }
    mu.iter_mut().for_each(|m| *m /= n0 as f64);
    let (level_mean, level_var, counts) = level_outputs(data, &mu);
    let big_l = data.len() - 1;
    let z = bound_z(d);
    // The multilevel estimate of each θ_j's variance (the signed measure's: its telescoped
    // E[(θ_j − μ_j)²] less the square of its mean's offset from μ_j), at its upper 2-se value: a
    // value that noise has made small (early, from n_initial samples per level, when level 0's
    // law is much wider than the posterior) would ask for samples in proportion to 1/s² (1/s⁴
    // for the sd); the allocation is re-read as the samples come in ([`MlSgld::run_adaptive`]),
    // so the final one uses a precise value. Level 0's variance if the estimate is not positive
    // (it can be several times the posterior's at a large h₀).
    let s2 = moment_scales(&level_mean, &level_var, &counts, &mu);
    let mut worst_bias: f64 = 0.0;
    for k in 0..2 * d {
        let s2 = s2[k % d];
        if !(s2 > 0.0 && s2.is_finite()) {
            continue;
        }
        let scale = if k < d { s2 } else { 4.0 * s2 * s2 };
        let v: Vec<f64> = level_var.iter().map(|lv| (lv[k] / scale).max(f64::MIN_POSITIVE)).collect();
        let sum: f64 = v.iter().zip(costs).map(|(v, c)| (v * c).sqrt()).sum();
        for (l, (v, c)) in v.iter().zip(costs).enumerate() {
            want[l] = f64::max(want[l], (2.0 / (eps * eps) * (v / c).sqrt() * sum).ceil());
        }
        if big_l >= 1 {
            let means = dropped
                .corrections(level_mean.iter().map(|m| m[k].abs() / scale.sqrt()), |f| f[k].abs() / scale.sqrt());
            let se = (v[big_l] / counts[big_l].max(1) as f64).sqrt();
            worst_bias = worst_bias.max((means[means.len() - 1] - z * se).max(0.0) / moment_bias_divisor(&means));
        }
    }
    (want, worst_bias)
}

/// What an adaptive run dropped below the coarsest level it kept (see `coarser_costs`): their
/// cost, level 0's statistics (for the relaxation test), and the mean corrections `mean Δ_l`
/// of g and of each output (θ_j, (θ_j − μ_j)²) of the levels from 1 to the coarsest kept (the
/// latter's from its coupled samples), which the bias tests' decay fits still use.
#[derive(Debug, Default)]
struct Dropped {
    cost: Cost,
    level0: Option<LevelAcc>,
    g: Vec<f64>,
    moments: Vec<Vec<f64>>,
}

impl Dropped {
    /// `|mean Δ_l|` for the bias tests: the coarsest level kept's value first (unused by the
    /// fits), then the dropped corrections (by `frozen`), then those of the levels kept above it.
    fn corrections(&self, kept: impl Iterator<Item = f64>, frozen: impl Fn(&Vec<f64>) -> f64) -> Vec<f64> {
        let mut kept = kept;
        let mut out: Vec<f64> = kept.next().into_iter().collect();
        out.extend(self.moments.iter().map(frozen));
        out.extend(kept);
        out
    }
}

/// Each θ_j's variance as [`moment_targets`] scales its outputs: the multilevel estimate plus
/// two of its standard errors, or level 0's variance if the estimate is not positive.
fn moment_scales(level_mean: &[Vec<f64>], level_var: &[Vec<f64>], counts: &[usize], mu: &[f64]) -> Vec<f64> {
    let d = mu.len();
    (0..d)
        .map(|j| {
            let mean_ml: f64 = level_mean.iter().map(|m| m[j]).sum();
            let var_ml = level_mean.iter().map(|m| m[d + j]).sum::<f64>() - (mean_ml - mu[j]).powi(2);
            let se_var = level_var.iter().zip(counts).map(|(v, n)| v[d + j] / (*n).max(1) as f64).sum::<f64>().sqrt();
            if var_ml > 0.0 { var_ml + 2.0 * se_var } else { level_var[0][j] }
        })
        .collect()
}

/// A Moments run drops its coarsest level when the predicted cost of the samples it still has
/// to take is below this fraction of the cost with the level (the variances come from as few
/// as `n_initial` samples).
const COARSEST_MARGIN: f64 = 0.9;

/// The share of a coupled sample's steps at level l that are the fine path's:
/// `(1 + l)/(1 + 2l)` (antithetic: two coarse paths), `(1 + l)/(1 + 3l/2)` (subsampling); 1 at
/// level 0.
fn fine_fraction(level: usize, coupling: MlCoupling) -> f64 {
    let l = level as f64;
    match coupling {
        MlCoupling::Antithetic => (1.0 + l) / (1.0 + 2.0 * l),
        MlCoupling::Subsampling => (1.0 + l) / (1.0 + 1.5 * l),
    }
}

/// Giles' cost model for the coarsest level of an [`RmseTarget::Moments`] run (M. B. Giles,
/// *Multilevel Monte Carlo methods*, Acta Numerica 24, 2015, §2: a coarse level is worth its
/// place only if it lowers `Σ √(V_l C_l)`). A level-l sample's fine path alone is a draw of
/// `g_l`, the law the level-(l+1) corrections start from, so the estimator may start at any
/// level: `E[g_L] = E[g_k] + Σ_{l>k} E[Δ_l]`. For each output — g at RMSE `eps`, and as
/// [`moment_targets`] scales them, every θ_j's mean and variance at fraction `frac` — Giles'
/// allocation `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉`, the largest over outputs per level,
/// with the current levels, and with the coarsest dropped and the next one's fine paths as the
/// base (their variance, and the fine path's share of its per-sample cost). Returns the cost of
/// the samples each would still take beyond those already taken (a dropped level's are lost):
/// at a loose target both are 0 (the levels' initial samples already suffice) and the level
/// stays; at a tight one the cheaper wins.
fn coarser_costs(data: &[LevelAcc], eps: f64, frac: f64, coupling: MlCoupling) -> (f64, f64) {
    let costs: Vec<f64> = data.iter().map(|a| a.cost_per_sample()).collect();
    let mut drop_costs = costs[1..].to_vec();
    drop_costs[0] *= fine_fraction(data[1].level, coupling);
    let (mut want_keep, mut want_drop) = (vec![0.0; costs.len()], vec![0.0; drop_costs.len()]);
    let mut add = |v: &[f64], v1f: f64, target: f64| {
        if !(target > 0.0 && target.is_finite()) {
            return;
        }
        allocate(v, &costs, target, &mut want_keep);
        let mut vd = v[1..].to_vec();
        vd[0] = v1f;
        allocate(&vd, &drop_costs, target, &mut want_drop);
    };
    let n1 = (data[1].n.max(2) - 1) as f64;
    let vg: Vec<f64> = data.iter().map(|a| a.var()).collect();
    add(&vg, data[1].m2_f / n1, eps);
    // The coarsest level's points are all fine ones (level 0's paths, or a base level's).
    let mu = fine_mean(&data[0]);
    let d = mu.len();
    if d > 0 {
        let (level_mean, level_var, counts) = level_outputs(data, &mu);
        let s2 = moment_scales(&level_mean, &level_var, &counts, &mu);
        let fine1 = fine_variances(&data[1], &mu);
        for k in 0..2 * d {
            let s2 = s2[k % d];
            let target = if k < d { frac * s2.sqrt() } else { frac * 2.0 * s2 };
            let v: Vec<f64> = level_var.iter().map(|lv| lv[k]).collect();
            add(&v, fine1[k], target);
        }
    }
    let still = |want: &[f64], costs: &[f64], have: &[LevelAcc]| -> f64 {
        want.iter().zip(costs).zip(have).map(|((w, c), a)| c * (w - a.n as f64).max(0.0)).sum()
    };
    (still(&want_keep, &costs, data), still(&want_drop, &drop_costs, &data[1..]))
}

/// Giles' allocation for one output at RMSE `target` (variances `v`, costs per sample `costs`),
/// raising `want` to it level by level.
fn allocate(v: &[f64], costs: &[f64], target: f64, want: &mut [f64]) {
    let v: Vec<f64> = v.iter().map(|v| v.max(f64::MIN_POSITIVE)).collect();
    let sum: f64 = v.iter().zip(costs).map(|(v, c)| (v * c).sqrt()).sum();
    for ((w, v), c) in want.iter_mut().zip(&v).zip(costs) {
        *w = f64::max(*w, (2.0 / (target * target) * (v / c).sqrt() * sum).ceil());
    }
}

/// The mean of a level's fine end points (class +1), empty without kept points.
fn fine_mean(a: &LevelAcc) -> Vec<f64> {
    let fine: Vec<&Vec<f64>> = a.points.iter().filter(|(_, c)| *c > 0.0).map(|(p, _)| p).collect();
    let mut mu = vec![0.0; fine.first().map_or(0, |p| p.len())];
    for p in &fine {
        mu.iter_mut().zip(p.iter()).for_each(|(m, x)| *m += x / fine.len() as f64);
    }
    mu
}

/// The sample variance of each output (θ_j, then (θ_j − μ_j)²) over a level's fine end points.
fn fine_variances(a: &LevelAcc, mu: &[f64]) -> Vec<f64> {
    let d = mu.len();
    let (mut s1, mut s2, mut n) = (vec![0.0; 2 * d], vec![0.0; 2 * d], 0usize);
    for (p, class) in &a.points {
        if *class > 0.0 {
            for j in 0..d {
                let x = p[j] - mu[j];
                let y = x * x;
                s1[j] += x;
                s2[j] += x * x;
                s1[d + j] += y;
                s2[d + j] += y * y;
            }
            n += 1;
        }
    }
    let nf = n as f64;
    s1.iter().zip(&s2).map(|(a, b)| if n > 1 { ((b - a * a / nf) / (nf - 1.0)).max(0.0) } else { 0.0 }).collect()
}

/// `2^α − 1` for a mean or sd read off the measure, from `|mean Δ_l|` over levels (l = 0 first):
/// α fitted to their decay over l ≥ 1, capped at SGLD's weak order 1 (a faster fitted decay comes
/// from the horizon's relaxation in the first corrections, not from the step; see the docs of
/// [`MomentErrors::error_bound`]) and held at 0.5 or more.
fn moment_bias_divisor(abs_means: &[f64]) -> f64 {
    2f64.powf(decay_rate(&abs_means[1..]).clamp(0.5, 1.0)) - 1.0
}

/// Per level and output (θ_j, then (θ_j − μ_j)², j < d) from the levels' kept points: the mean
/// of `Δ_l` over samples, the sample variance of one `Δ_l`, and the number of samples.
#[allow(clippy::type_complexity)]
fn level_outputs(data: &[LevelAcc], mu: &[f64]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<usize>) {
    let d = mu.len();
    let outputs = 2 * d;
    let mut level_mean = vec![vec![0.0; outputs]; data.len()];
    let mut level_var = vec![vec![0.0; outputs]; data.len()];
    let mut counts = vec![0; data.len()];
    let mut delta = vec![0.0; outputs];
    for (l, a) in data.iter().enumerate() {
        let (mut s1, mut s2) = (vec![0.0; outputs], vec![0.0; outputs]);
        let mut n = 0usize;
        let mut flush = |delta: &mut [f64], n: &mut usize| {
            for k in 0..outputs {
                s1[k] += delta[k];
                s2[k] += delta[k] * delta[k];
                delta[k] = 0.0;
            }
            *n += 1;
        };
        for (i, (p, class)) in a.points.iter().enumerate() {
            if *class > 0.0 && i > 0 {
                flush(&mut delta, &mut n);
            }
            for j in 0..d {
                delta[j] += class * p[j];
                delta[d + j] += class * (p[j] - mu[j]) * (p[j] - mu[j]);
            }
        }
        flush(&mut delta, &mut n);
        let nf = n as f64;
        for k in 0..outputs {
            let m = s1[k] / nf;
            level_mean[l][k] = m;
            level_var[l][k] = if n > 1 { ((s2[k] - nf * m * m) / (nf - 1.0)).max(0.0) } else { 0.0 };
        }
        counts[l] = n;
    }
    (level_mean, level_var, counts)
}

/// Multilevel SGLD for `π(g)`: `E[g_L] = E[g_0] + Σ_{l=1}^{L} E[g_l − g_{l−1}]`, each term estimated
/// from independent samples, level l with time step `h_l = h₀ 2^(−l)` and horizon
/// `T_l = m(l + 1)h₀` (`s_l = T_l/h_l` steps) from θ₀.
///
/// One sample of level l ≥ 1: the fine path runs alone for `(T_l − T_{l−1})/h_l` steps, then fine
/// and coarse (the coarse from θ₀) run jointly for `T_{l−1}/h_{l−1}` coarse steps; each coarse step
/// uses the Gaussian `(ξ₁ + ξ₂)/√2` of the two fine steps it spans, and its minibatch as set by
/// [`MlCoupling`]. Level 0 is a single path.
///
/// The paths are steps of a base sampler `S`, any [`SubsampledDiscretisation`]: SGLD (the
/// method of the paper; [`MlSgld::sgld`]), SGHMC, pSGLD or preconditioned SGLD on the
/// [`Langevin`](crate::Langevin) driver, with any subsampling estimator
/// ([`Minibatch`](crate::Minibatch) with or without replacement,
/// [`ControlVariate`](crate::ControlVariate), [`Taylor`](crate::Taylor)). Its constant time step
/// is h₀ (`γ` for SGLD, `√η` for SGHMC); level l steps a fraction `2^(−l)` of it. Fine minibatches
/// are drawn by the estimator's own law; every gradient and every state is checked, an error
/// naming the level, the sample, the path and the iteration ([`Error::Sample`]).
///
/// Samples are independent: they run on rayon with per-sample streams `(seed, [l, i])`, so results
/// do not depend on the number of threads.
///
/// Reference: M. B. Giles, T. Nagapetyan, L. Szpruch, S. J. Vollmer, K. C. Zygalakis, *Multilevel
/// Monte Carlo for scalable Bayesian computations*, arXiv:1609.06144 (2016/2017); M. B. Giles,
/// *Multilevel Monte Carlo path simulation*, Operations Research 56(3), 2008.
#[derive(Debug, Clone)]
pub struct MlSgld<S> {
    settings: MlSgldSettings,
    base: S,
    h0: f64,
    theta0: Vec<f64>,
}

/// One sample of one level.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSample {
    /// `Δ_l` (for level 0, `g_0`).
    pub delta: f64,
    /// The fine quantity `g_l`.
    pub fine: f64,
    /// Its cost.
    pub cost: Cost,
    /// End points (fine, then coarse ones), if kept.
    pub points: Vec<Vec<f64>>,
    /// Level 0 only: `g` at half the horizon (step ⌈m/2⌉ of the path), for the relaxation test
    /// of [`MlSgld::run_adaptive`]; equal to `fine` on other levels.
    pub half: f64,
}

/// The three paths of a sample and their buffers, reused from sample to sample.
struct Work<S> {
    fine: S,
    c1: S,
    c2: S,
    z: SharedIncrements,
    idx1: Vec<usize>,
    idx2: Vec<usize>,
    pool: Vec<usize>,
}

impl<S: SubsampledDiscretisation> Work<S> {
    fn new(base: &S, d: usize) -> Self {
        let n = base.batch_size();
        Work {
            fine: base.clone(),
            c1: base.clone(),
            c2: base.clone(),
            z: SharedIncrements::new(d),
            idx1: vec![0; n],
            idx2: vec![0; n],
            pool: vec![0; 2 * n],
        }
    }

    fn cost(&self) -> Cost {
        self.fine.cost() + self.c1.cost() + self.c2.cost()
    }
}

/// Running average over the last `p` states of a path of `total` steps.
struct Avg {
    from: usize,
    acc: f64,
    count: usize,
}

impl Avg {
    fn new(total: usize, p: Option<usize>) -> Self {
        let p = p.unwrap_or(1).clamp(1, total.max(1));
        Avg { from: total + 1 - p, acc: 0.0, count: 0 }
    }
    #[inline]
    fn add<G: Fn(&[f64]) -> f64>(&mut self, step: usize, g: &G, x: &[f64]) {
        if step >= self.from {
            self.acc += g(x);
            self.count += 1;
        }
    }
    fn value(&self) -> f64 {
        self.acc / self.count.max(1) as f64
    }
}

/// Wraps an error of one path of one sample with where it happened.
fn at(level: usize, sample: u64, path: &'static str) -> impl Fn(Error) -> Error {
    move |e| Error::Sample { level, sample, path, source: Box::new(e) }
}

impl<E: SubsampledEstimator> MlSgld<Sgld<E>> {
    /// Multilevel SGLD (the paper's method) with level-0 step `h0` and the given estimator,
    /// from θ₀ (usually the MAP): [`MlSgld::new`] with `Sgld::new(SgldSettings::constant(h0),
    /// estimator)`.
    ///
    /// Errors: as [`MlSgld::new`]; `h0` not finite and positive.
    pub fn sgld(settings: MlSgldSettings, h0: f64, estimator: E, theta0: &[f64]) -> Result<Self> {
        check_positive("step_size", h0)?;
        Self::new(settings, Sgld::new(SgldSettings::constant(h0), estimator)?, theta0)
    }

    /// Multilevel SGLD with h₀ and the horizon derived from the posterior's curvature at θ₀
    /// (give the mode, e.g. from [`find_mode`](crate::find_mode)), so that the defaults cannot
    /// silently fail to relax:
    ///
    /// - `h₀ = 1/λ_max` (half the Euler stability limit `2/λ_max` of the coarsest level);
    /// - horizon `m = ⌈3.5 λ_max / λ_min⌉`, i.e. level-0 time `T₀ = m h₀ ≥ 3.5/λ_min`: the
    ///   slowest direction's variance relaxes as `e^{−2 λ_min T}`, which is then ≤ 1e−3.
    ///
    /// `settings.horizon` is replaced by that m; the curvature (computed as
    /// [`tune::curvature`](crate::tune::curvature) with default settings, its cost included) is
    /// returned with the sampler. [`run_adaptive`](Self::run_adaptive) still checks that level 0
    /// relaxed.
    ///
    /// Errors: as [`tune::curvature`](crate::tune::curvature) and [`MlSgld::new`];
    /// [`Error::InvalidParameter`] (`horizon`) if the condition number makes m overflow.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{RmseTarget};
    /// use sgmcmc::{AdaptiveSettings, MlSgld, MlSgldSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let mode = model.posterior_mean().to_vec();
    /// let (ml, _curvature) = MlSgld::sgld_from_curvature(&model, MlSgldSettings::default(), Minibatch::new(50), &mode)?;
    /// let g = |t: &[f64]| t[0];
    /// let r = ml.run_adaptive(&model, &g, &AdaptiveSettings { target: RmseTarget::Absolute(0.01), ..Default::default() })?;
    /// assert!((r.estimate - mode[0]).abs() < 0.05);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn sgld_from_curvature<M: Model + ?Sized>(
        model: &M,
        settings: MlSgldSettings,
        estimator: E,
        theta0: &[f64],
    ) -> Result<(Self, crate::tune::Curvature)> {
        let curv = crate::tune::curvature(model, theta0, &crate::tune::CurvatureSettings::default())?;
        let (h0, settings) = from_curvature(&curv, settings)?;
        Ok((Self::sgld(settings, h0, estimator, theta0)?, curv))
    }

    /// Multilevel SGLD on the default path, with no hand-set value: the posterior's geometry by
    /// [`tune::precondition`](crate::tune::precondition) from θ₀ (the mode, the Hessian there and
    /// the whitening [`TuneSettings::precondition`](crate::tune::TuneSettings::precondition)
    /// chooses: dense by default up to d = 1 000), then h₀ and the horizon from the curvature
    /// the **whitened** paths see, and the paths start at the mode:
    ///
    /// - `h₀ = 1/(2 λ_max)`, half the step of [`sgld_from_curvature`](Self::sgld_from_curvature),
    ///   so that the coarsest level is already in Euler's asymptotic regime: along the stiffest
    ///   whitened direction its stationary variance is `1/(1 − h₀λ/2)` = 1.33× the target's,
    ///   where h₀ = 1/λ_max gives 2× — a bias the level corrections, estimated from as few as
    ///   `n_initial` paths, must then remove. On the six posteriors of the `validation` example,
    ///   at a loose target (its `short` runs) h₀ = 1/λ_max had 1.65–3.55× the error of the best
    ///   h₀ of a grid on five of six (the grid's best: 0.25–0.5/λ_max), h₀ = 1/(2λ_max) above
    ///   1.5× on one (1.92×); at tighter targets the grid's error curves are flat within noise;
    /// - the same level-0 time `T₀ = m h₀ ≥ 3.5/λ_min` as that rule, so twice its horizon:
    ///   `m = 2⌈3.5 λ_max/λ_min⌉`;
    /// - for an estimator with independent draws (a minibatch), h₀ at most the gradient noise's
    ///   limit `2/λ_max(V)` (V measured at 10 000 Laplace draws in the whitened coordinates, its
    ///   cost in the record): beyond it the minibatch injects more noise per step than the
    ///   Langevin noise, and level 0 can diverge (it did on the RAND HIE Poisson regression, N/n
    ///   = 202). Where the cap binds, the horizon rises by the same factor (rounded up) to keep
    ///   T₀. The finer levels correct the bias the noise leaves; the cap is for stability.
    ///
    /// Whitening is what makes the multilevel method usable on ill-conditioned posteriors:
    /// unwhitened, the horizon grows with the condition number (`m = 3.5 × 10¹⁰` on a
    /// calendar-year regression); whitened densely, m = 8 (before the noise cap above). The record (mode, curvature before and
    /// after, cost) is returned with the sampler; its cost is not in the multilevel results' costs.
    ///
    /// For the posterior's means and sds rather than one expectation, set
    /// [`MlSgldSettings::keep_points`] and run [`run_adaptive`](Self::run_adaptive) with
    /// [`RmseTarget::Moments`]: on the `validation` example's six posteriors at ε = 0.1/√10 its
    /// means came within 0.046 sd and its sds within 4.9 % (a target on one expectation left
    /// single sds off by up to 15 % there, 39 % at ε = 0.1).
    ///
    /// Errors: as [`tune::precondition`](crate::tune::precondition) and [`MlSgld::new`];
    /// [`Error::InvalidParameter`] (`horizon`) if the whitened condition number makes m overflow.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{RmseTarget, tune::TuneSettings};
    /// use sgmcmc::{AdaptiveSettings, MlSgld, MlSgldSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let (ml, setup) =
    ///     MlSgld::sgld_tuned(&model, MlSgldSettings::default(), Minibatch::new(50), &[0.0; 2], &TuneSettings::default())?;
    /// // Condition number 1 once whitened: m = 8, times 6 for the minibatch's noise at N/n = 20.
    /// assert_eq!(ml.settings().horizon, 48);
    /// let g = |t: &[f64]| t[0];
    /// let r = ml.run_adaptive(&model, &g, &AdaptiveSettings { target: RmseTarget::Absolute(0.01), ..Default::default() })?;
    /// assert!((r.estimate - model.posterior_mean()[0]).abs() < 0.05);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn sgld_tuned<M: Model + ?Sized>(
        model: &M,
        settings: MlSgldSettings,
        estimator: E,
        theta0: &[f64],
        tune: &crate::tune::TuneSettings,
    ) -> Result<(Self, crate::tune::Preconditioned<Sgld<E>>)> {
        let sgld = Sgld::new(SgldSettings::default(), estimator)?;
        let mut p = crate::tune::precondition(model, &sgld, theta0, tune)?;
        let (h0, mut settings) = from_curvature(&p.whitened_curvature, settings)?;
        // Half the step, the same level-0 time (see above).
        let h0 = 0.5 * h0;
        settings.horizon = settings
            .horizon
            .checked_mul(2)
            .ok_or_else(|| Error::invalid("horizon", settings.horizon, "doubling it for h₀/2 overflows"))?;
        // The gradient noise: a plain minibatch at N/n ≫ 1 can inject far more noise per step
        // than the Langevin noise (h² λ_max(V) against 2h), and level 0 then diverges (the RAND
        // HIE Poisson regression, N/n = 202: a non-finite gradient within 4 iterations). Measured
        // at Laplace draws in the sampler's coordinates, h₀ is capped at the noise's limit
        // 2/λ_max(V) — the minibatch noise at most the injected; the finer levels correct the
        // bias it leaves, so the cap is for stability, not accuracy — and the horizon raised by
        // the same factor, so that level 0 still spans the same time.
        let mut h0 = h0;
        if p.sampler.estimator().independent_draws() {
            let identity;
            let w = match &p.whitening {
                Some(w) => w.as_ref(),
                None => {
                    identity = crate::samplers::Whitening::diagonal(&p.mode, &vec![1.0; p.mode.len()])?;
                    &identity
                }
            };
            let seed = tune.seed;
            let (noise, c) = crate::samplers::GradientNoise::estimate(
                model,
                p.sampler.estimator(),
                w,
                crate::tune::GRADIENT_NOISE_POINTS_MIN,
                &mut stream(seed, &[0x6d6c_6e6f]),
            )?;
            p.cost += c;
            let cap = 2.0 * noise.full_correction_limit();
            if h0 > cap {
                let factor = (h0 / cap).ceil();
                h0 = cap;
                settings.horizon = settings.horizon.checked_mul(factor as usize).ok_or_else(|| {
                    Error::invalid("horizon", settings.horizon, "raising it for the noise cap overflows")
                })?;
            }
        }
        let base = crate::tune::Tunable::with_step_size(&p.sampler, h0)?;
        // The horizon comes from the curvature at the mode; a posterior far from Gaussian (flat
        // directions wider than the Laplace approximation says) relaxes more slowly. Probe level
        // 0 on the whitened second moment and double the horizon until it relaxes.
        let (w, mode) = (p.whitening.clone(), p.mode.clone());
        let probe = move |t: &[f64]| -> f64 {
            let mut phi: Vec<f64> = t.iter().zip(&mode).map(|(a, b)| a - b).collect();
            if let Some(w) = &w {
                w.to_phi(t, &mut phi);
            }
            phi.iter().map(|x| x * x).sum::<f64>() / t.len() as f64
        };
        let mut doubling = 0;
        loop {
            let ml = Self::new(settings, base.clone(), &p.mode)?;
            ml.check(model)?;
            let mut acc = LevelAcc::new(0, false);
            ml.extend_level_on(&Local, model, &probe, &mut acc, RELAXATION_PROBES, &mut Budget::unlimited())?;
            p.cost += acc.cost;
            match ml.relaxation_error(&probe, &acc, 0, RELAXATION_TOL) {
                None => return Ok((ml, p)),
                Some(e) if doubling == HORIZON_DOUBLINGS => return Err(e),
                Some(_) => {
                    settings.horizon = settings.horizon.checked_mul(2).ok_or_else(|| {
                        Error::invalid("horizon", settings.horizon, "doubling it for relaxation overflows")
                    })?;
                    doubling += 1;
                }
            }
        }
    }
}

/// Level-0 paths [`MlSgld::sgld_tuned`] runs to test relaxation at each horizon.
const RELAXATION_PROBES: usize = 256;
/// Most doublings of the horizon [`MlSgld::sgld_tuned`] tries (×256 at most).
const HORIZON_DOUBLINGS: usize = 8;
/// The bias of the probe (mean squared whitened coordinate, ≈ 1 at the target) left at the
/// level-0 horizon that [`MlSgld::sgld_tuned`] accepts.
const RELAXATION_TOL: f64 = 0.02;

/// `h₀ = 1/λ_max` and the horizon `m = ⌈3.5 λ_max / λ_min⌉` (see
/// [`MlSgld::sgld_from_curvature`]).
fn from_curvature(curv: &crate::tune::Curvature, settings: MlSgldSettings) -> Result<(f64, MlSgldSettings)> {
    let lmin = curv.lambda_min.unwrap_or(curv.lambda_max).max(curv.lambda_max * 1e-15);
    let m = (3.5 * curv.lambda_max / lmin).ceil();
    if !(m.is_finite() && m < 1e15) {
        return Err(Error::invalid("horizon", m, "the condition number λ_max/λ_min is too large for a horizon"));
    }
    Ok((1.0 / curv.lambda_max, MlSgldSettings { horizon: (m as usize).max(1), ..settings }))
}

impl<S: SubsampledDiscretisation> MlSgld<S> {
    /// Multilevel estimation over paths of `base` from θ₀ (usually the MAP). The base sampler's
    /// time step must be constant: it is h₀.
    ///
    /// Errors: invalid settings; [`Error::NonFiniteState`] for a non-finite θ₀;
    /// [`Error::InvalidParameter`] (`step_size`) if the base sampler's time step is not constant.
    pub fn new(settings: MlSgldSettings, base: S, theta0: &[f64]) -> Result<Self> {
        settings.validate()?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteStart { what: "theta0" });
        }
        let h0 = base.time_step(1);
        if !base.is_constant_time_step() {
            return Err(Error::invalid("step_size", h0, "multilevel SGLD needs a constant step (it is h0)"));
        }
        check_positive("step_size", h0)?;
        Ok(MlSgld { settings, base, h0, theta0: theta0.to_vec() })
    }

    /// The settings.
    pub fn settings(&self) -> &MlSgldSettings {
        &self.settings
    }

    /// The base sampler.
    pub fn base(&self) -> &S {
        &self.base
    }

    /// The level-0 time step h₀ (the base sampler's).
    pub fn h0(&self) -> f64 {
        self.h0
    }

    /// Steps of the fine path of level l: `s_l = m (l + 1) 2^l`.
    ///
    /// Errors: [`Error::InvalidParameter`] (`level`) if that number does not fit in a `usize`.
    pub fn steps(&self, level: usize) -> Result<usize> {
        u32::try_from(level)
            .ok()
            .and_then(|l| 1usize.checked_shl(l))
            .and_then(|p| p.checked_mul(level + 1))
            .and_then(|p| p.checked_mul(self.settings.horizon))
            .ok_or_else(|| Error::invalid("level", level, "its path would have more steps than fit in a usize"))
    }

    fn window_steps(&self, fraction: f64) -> Option<usize> {
        self.settings.averaging_window.map(|w| ((w / fraction).round() as usize).max(1))
    }

    /// Sample `index` of level `level` (deterministic given the seed).
    ///
    /// Errors: [`Error::Sample`] around the path's error (non-finite gradient or state with its
    /// iteration); model and estimator errors.
    pub fn sample<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        level: usize,
        index: u64,
    ) -> Result<LevelSample> {
        self.check(model)?;
        let mut w = Work::new(&self.base, model.dim());
        self.sample_with(&mut w, model, g, level, index, false)
    }

    fn sample_with<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        w: &mut Work<S>,
        model: &M,
        g: &G,
        level: usize,
        index: u64,
        fine_only: bool,
    ) -> Result<LevelSample> {
        // Checks that every step count of the level fits (so the shifts below cannot overflow).
        self.steps(level)?;
        let mut rng = stream(self.settings.seed, &[level as u64, index]);
        let before = w.cost();
        let m = self.settings.horizon;
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        let (fine_at, c1_at, c2_at) =
            (at(level, index, "fine"), at(level, index, "coarse"), at(level, index, "coarse (antithetic)"));
        w.fine.restart(model, &self.theta0).map_err(&fine_at)?;
        if level == 0 {
            let total = m;
            let mut avg = Avg::new(total, self.window_steps(1.0));
            let mid = total.div_ceil(2);
            let mut half = g(w.fine.position());
            for step in 1..=total {
                w.fine.draw_indices(&mut rng, &mut w.idx1);
                crate::numeric::rng::fill_standard_normal(&mut rng, &mut w.z.z1);
                w.fine.step_on(model, step as u64, 1.0, &w.z.z1, &w.idx1).map_err(&fine_at)?;
                avg.add(step, g, w.fine.position());
                if step == mid {
                    half = g(w.fine.position());
                }
            }
            let v = avg.value();
            let points = if keep { vec![w.fine.position().to_vec()] } else { Vec::new() };
            return Ok(LevelSample { delta: v, fine: v, cost: w.cost() - before, points, half });
        }
        let ff = 1.0 / (1u64 << level) as f64;
        let fc = 2.0 * ff;
        let alone = m << level;
        let coupled = (m * level) << (level - 1);
        let total_fine = alone + 2 * coupled;
        let mut avg_f = Avg::new(total_fine, self.window_steps(ff));
        let mut avg_c1 = Avg::new(coupled, self.window_steps(fc));
        let mut avg_c2 = Avg::new(coupled, self.window_steps(fc));
        for step in 1..=alone {
            w.fine.draw_indices(&mut rng, &mut w.idx1);
            crate::numeric::rng::fill_standard_normal(&mut rng, &mut w.z.z1);
            w.fine.step_on(model, step as u64, ff, &w.z.z1, &w.idx1).map_err(&fine_at)?;
            avg_f.add(step, g, w.fine.position());
        }
        let antithetic = self.settings.coupling == MlCoupling::Antithetic;
        // A base level's sample (`fine_only`) runs the fine path alone, drawing the same random
        // numbers as a coupled sample, so that its fine value is the coupled sample's.
        if !fine_only {
            w.c1.restart(model, &self.theta0).map_err(&c1_at)?;
            if antithetic {
                w.c2.restart(model, &self.theta0).map_err(&c2_at)?;
            }
        }
        let n = w.idx1.len();
        for k in 1..=coupled {
            w.fine.draw_indices(&mut rng, &mut w.idx1);
            w.fine.draw_indices(&mut rng, &mut w.idx2);
            w.z.draw(&mut rng);
            let (kf, kc) = ((alone + 2 * k - 1) as u64, k as u64);
            w.fine.step_on(model, kf, ff, &w.z.z1, &w.idx1).map_err(&fine_at)?;
            avg_f.add(alone + 2 * k - 1, g, w.fine.position());
            w.fine.step_on(model, kf + 1, ff, &w.z.z2, &w.idx2).map_err(&fine_at)?;
            avg_f.add(alone + 2 * k, g, w.fine.position());
            if fine_only {
                if !antithetic {
                    for j in 0..n {
                        uniform_below(&mut rng, (2 * n - j) as u64);
                    }
                }
                continue;
            }
            if antithetic {
                w.c1.step_on(model, kc, fc, &w.z.coarse, &w.idx1).map_err(&c1_at)?;
                w.c2.step_on(model, kc, fc, &w.z.coarse, &w.idx2).map_err(&c2_at)?;
                avg_c2.add(k, g, w.c2.position());
            } else {
                // n indices without replacement from the 2n-element multiset τ¹ ∪ τ².
                w.pool[..n].copy_from_slice(&w.idx1);
                w.pool[n..].copy_from_slice(&w.idx2);
                for j in 0..n {
                    let r = j + uniform_below(&mut rng, (2 * n - j) as u64) as usize;
                    w.pool.swap(j, r);
                }
                w.c1.step_on(model, kc, fc, &w.z.coarse, &w.pool[..n]).map_err(&c1_at)?;
            }
            avg_c1.add(k, g, w.c1.position());
        }
        let fine = avg_f.value();
        if fine_only {
            let points = if keep { vec![w.fine.position().to_vec()] } else { Vec::new() };
            return Ok(LevelSample { delta: fine, fine, cost: w.cost() - before, points, half: fine });
        }
        let coarse = if antithetic { 0.5 * (avg_c1.value() + avg_c2.value()) } else { avg_c1.value() };
        let points = match (keep, antithetic) {
            (false, _) => Vec::new(),
            (true, true) => vec![w.fine.position().to_vec(), w.c1.position().to_vec(), w.c2.position().to_vec()],
            (true, false) => vec![w.fine.position().to_vec(), w.c1.position().to_vec()],
        };
        Ok(LevelSample { delta: fine - coarse, fine, cost: w.cost() - before, points, half: fine })
    }

    /// Adds samples `acc.n .. acc.n + count` of `level` to `acc`, in chunks (parallel within a
    /// chunk if set), folded in index order so the sums do not depend on the thread count.
    /// Checks the budget before each chunk.
    fn extend_level<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        acc: &mut LevelAcc,
        count: usize,
        budget: &mut Budget,
    ) -> Result<()> {
        self.extend_level_on(&Local, model, g, acc, count, budget)
    }

    /// As `extend_level`, the samples computed by `exec` (here, or spread over MPI ranks): the
    /// samples come back in index order and are folded in that order, so the statistics do not
    /// depend on where they were computed.
    fn extend_level_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        acc: &mut LevelAcc,
        count: usize,
        budget: &mut Budget,
    ) -> Result<()> {
        const CHUNK: usize = 4096;
        let d = model.dim();
        let mut left = count;
        while left > 0 {
            let c = left.min(CHUNK);
            budget.check(acc.cost_per_sample() * c as f64)?;
            let first = acc.n as u64;
            let (level, fine_only) = (acc.level, acc.base);
            let compute = |indices: Vec<u64>| {
                crate::run::fan_out(
                    indices,
                    self.settings.parallel,
                    || Work::new(&self.base, d),
                    |w, i| self.sample_with(w, model, g, level, i, fine_only),
                )
            };
            for r in exec.samples(first..first + c as u64, &compute) {
                let x = r?;
                budget.spent += (x.cost.datum_gradients + x.cost.datum_hvps) as f64;
                acc.push(x);
            }
            left -= c;
        }
        Ok(())
    }

    fn check<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        check_shape(model)?;
        check_len("theta0", model.dim(), self.theta0.len())
    }

    /// Statistics of `n_samples` samples (indices `0..n_samples`) of one level alone, e.g. to study
    /// how `Var[Δ_l]` decays with l.
    ///
    /// Errors: [`Error::NoSamples`] for fewer than 2 samples; model, estimator and non-finite
    /// errors.
    pub fn level<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        level: usize,
        n_samples: usize,
    ) -> Result<LevelStats> {
        self.check(model)?;
        if n_samples < 2 {
            return Err(Error::NoSamples { reason: "a level needs at least 2 samples" });
        }
        let mut acc = LevelAcc::new(level, false);
        self.extend_level(model, g, &mut acc, n_samples, &mut Budget::unlimited())?;
        let mut r = self.summarise(model, &[acc], None, &Dropped::default());
        Ok(r.levels.remove(0))
    }

    /// Fixed levels 0..samples.len() with `samples[l]` samples at level l.
    ///
    /// Errors: [`Error::NoSamples`] for an empty list or a level with fewer than 2 samples; model,
    /// estimator and non-finite errors.
    pub fn run_fixed<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        samples: &[usize],
    ) -> Result<MlmcResult> {
        self.run_fixed_on(&Local, model, g, samples)
    }

    pub(crate) fn run_fixed_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        samples: &[usize],
    ) -> Result<MlmcResult> {
        let mut ck = self.start_fixed(samples)?;
        self.advance_fixed_on(exec, model, g, &mut ck, usize::MAX)?;
        self.result(model, &ck)
    }

    /// A resumable fixed-levels run (levels 0..samples.len(), `samples[l]` at level l) with no
    /// sample taken yet: advance it with [`advance_fixed`](Self::advance_fixed), save it with
    /// [`MlmcCheckpoint::save`], and finish it with [`result`](Self::result). A run made in several
    /// pieces, saved and loaded in between, gives bit-identical results to
    /// [`run_fixed`](Self::run_fixed): every sample depends only on (seed, level, index), and the
    /// level statistics are folded in index order.
    ///
    /// Errors: [`Error::NoSamples`] for an empty list or a level with fewer than 2 samples.
    pub fn start_fixed(&self, samples: &[usize]) -> Result<MlmcCheckpoint> {
        if samples.is_empty() || samples.iter().any(|&n| n < 2) {
            return Err(Error::NoSamples { reason: "every level needs at least 2 samples" });
        }
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        Ok(MlmcCheckpoint {
            targets: samples.to_vec(),
            levels: (0..samples.len()).map(|l| LevelAcc::new(l, keep)).collect(),
            settings: self.settings,
            h0: self.h0,
            theta0: self.theta0.clone(),
            model: None,
        })
    }

    /// Takes up to `max_samples` more samples of a fixed-levels run (level by level, in index
    /// order); returns whether the run is complete.
    ///
    /// Errors: [`Error::CheckpointMismatch`] if `ck` was made with other settings, step or
    /// starting point, or advanced before with another model (dimension, data size or data); model, estimator and non-finite errors.
    pub fn advance_fixed<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        ck: &mut MlmcCheckpoint,
        max_samples: usize,
    ) -> Result<bool> {
        self.advance_fixed_on(&Local, model, g, ck, max_samples)
    }

    fn advance_fixed_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        ck: &mut MlmcCheckpoint,
        max_samples: usize,
    ) -> Result<bool> {
        self.check(model)?;
        self.check_checkpoint(ck)?;
        match &ck.model {
            Some(fp) => fp.check(model)?,
            None => ck.model = Some(crate::run::checkpoint::ModelFingerprint::of(model)),
        }
        let mut left = max_samples;
        let mut budget = Budget::unlimited();
        for (acc, &target) in ck.levels.iter_mut().zip(&ck.targets) {
            let want = target.saturating_sub(acc.n).min(left);
            if want > 0 {
                self.extend_level_on(exec, model, g, acc, want, &mut budget)?;
                left -= want;
            }
        }
        Ok(ck.is_complete())
    }

    /// The result of a fixed-levels run so far (complete or not).
    ///
    /// Errors: [`Error::CheckpointMismatch`] as [`advance_fixed`](Self::advance_fixed);
    /// [`Error::NoSamples`] if a level has fewer than 2 samples.
    pub fn result<M: Model + ?Sized>(&self, model: &M, ck: &MlmcCheckpoint) -> Result<MlmcResult> {
        self.check_checkpoint(ck)?;
        if let Some(fp) = &ck.model {
            fp.check(model)?;
        }
        if ck.levels.iter().any(|a| a.n < 2) {
            return Err(Error::NoSamples { reason: "every level needs at least 2 samples" });
        }
        Ok(self.summarise(model, &ck.levels, None, &Dropped::default()))
    }

    fn check_checkpoint(&self, ck: &MlmcCheckpoint) -> Result<()> {
        let mismatch =
            |what: &'static str, e: String, f: String| Err(Error::CheckpointMismatch { what, expected: e, found: f });
        if ck.settings != self.settings {
            return mismatch("multilevel settings", format!("{:?}", self.settings), format!("{:?}", ck.settings));
        }
        if ck.h0.to_bits() != self.h0.to_bits() {
            return mismatch("level-0 step h0", self.h0.to_string(), ck.h0.to_string());
        }
        if ck.theta0.len() != self.theta0.len()
            || ck.theta0.iter().zip(&self.theta0).any(|(a, b)| a.to_bits() != b.to_bits())
        {
            return mismatch("starting point", format!("{:?}", self.theta0), format!("{:?}", ck.theta0));
        }
        if ck.levels.len() != ck.targets.len() || ck.levels.iter().enumerate().any(|(l, a)| a.level != l) {
            return Err(Error::CorruptCheckpoint { reason: "level records do not match the planned levels".into() });
        }
        Ok(())
    }

    /// Giles' adaptive MLMC for a target RMSE ε: start with levels 0..=2 and `n_initial` samples
    /// each; repeatedly set `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉` (so `Σ V_l/N_l ≤ ε²/2`) and
    /// take the missing samples; stop when the estimated remaining bias
    /// `|mean Δ_L| / (2^α − 1)` (α fitted to the decay of `|mean Δ_l|`, at least 0.5) is below
    /// `ε/√2`, else add a level.
    ///
    /// Under [`RmseTarget::Moments`] the estimator may start above level 0: a level-l sample's
    /// fine path alone is a draw of `g_l`, the law level l + 1's corrections start from, so
    /// `E[g_L] = E[g_k] + Σ_{l>k} E[Δ_l]` for any k. Before each allocation the run compares, by
    /// Giles' cost model over every output, the samples still to take with the current coarsest
    /// level and with it dropped (the next level's fine paths as the base, run alone at their
    /// share of a coupled sample's cost), and drops it if that is more than 10 % cheaper (M. B.
    /// Giles, *Multilevel Monte Carlo methods*, Acta Numerica 24, 2015: a coarse level is worth
    /// its place only if it lowers `Σ √(V_l C_l)`). The dropped levels' cost stays in the
    /// result's; [`MlmcResult::levels`] then starts at the base level.
    ///
    /// [`RmseTarget::Absolute`] and [`RmseTarget::PosteriorSd`] control g only.
    /// [`RmseTarget::Moments`] (with `keep_points`) controls every coordinate's mean and sd as
    /// well: each level takes the most samples any output needs, and a level is added until every
    /// output's bias test passes (see its docs). With `keep_points`, [`MlmcResult::moments`] gives
    /// every coordinate's mean and sd read off the signed measure with their own standard errors,
    /// remaining biases and an error bound: under a target on g alone, read it before trusting
    /// the measure for anything but g (on the crate's validation posteriors, single sds off by up
    /// to 39 % at a loose target on g came with bounds of 0.26–7.9 saying so).
    ///
    /// The cost of one run varies between seeds, in jumps: the bias tests decide how many levels
    /// it takes, and each level about doubles it (on the `validation` example's Poisson regression
    /// at its tuned h₀ and ε = 0.1, 41 seeds cost 5.2e6–1.55e7 datum gradients, 40 of them near
    /// 1.45e7). Set `max_cost` with that in mind.
    ///
    /// ```
    /// use sgmcmc::{AdaptiveSettings, LinearGaussian, Minibatch, MlSgld, MlSgldSettings, RmseTarget};
    /// let model = LinearGaussian::synthetic(100, 2, 4.0, 10.0, 23)?;
    /// let settings = MlSgldSettings { keep_points: true, seed: 1, ..Default::default() };
    /// let ml = MlSgld::sgld(settings, 0.01, Minibatch::new(10), &[0.0, 0.0])?;
    /// // Every mean to 0.1 posterior sd and every sd to 10 % (RMSE).
    /// let target = AdaptiveSettings { target: RmseTarget::Moments(0.1), ..Default::default() };
    /// let r = ml.run_adaptive(&model, &|t: &[f64]| t[0], &target)?;
    /// let m = r.moments.expect("kept points");
    /// println!("means {:?}, sds {:?}, 95 % bound {:.3} sd", m.mean, m.sd, m.error_bound);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    ///
    /// Level 0's relaxation is tested at the end (see [`Error::NotRelaxed`]); where its paths
    /// still depend on their start, the run starts again with the horizon doubled, at most
    /// [`ADAPTIVE_HORIZON_DOUBLINGS`] times and within [`ADAPTIVE_RETRY_COST`] times the first
    /// attempt's cost; [`MlmcResult::horizon`] and [`MlmcResult::horizon_doublings`] say what it
    /// did, and [`MlmcResult::cost`] includes every attempt.
    ///
    /// Errors: [`Error::BudgetExhausted`] (with what was achieved) when the next batch of samples
    /// would exceed `max_cost`, or `max_level` is reached before the bias test passes;
    /// [`Error::NotRelaxed`] when the doublings did not make level 0 relax; invalid settings;
    /// model errors.
    pub fn run_adaptive<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<MlmcResult> {
        self.run_adaptive_on(&Local, model, g, target)
    }

    /// [`run_adaptive`](Self::run_adaptive) on an executor: the adaptive run, and where level 0
    /// has not relaxed ([`Error::NotRelaxed`]) the same run again with the horizon doubled, at
    /// most [`ADAPTIVE_HORIZON_DOUBLINGS`] times and within [`ADAPTIVE_RETRY_COST`] times the
    /// first attempt's cost, every attempt's cost counted against `max_cost` and in the result
    /// ([`MlmcResult::horizon_doublings`] says what it did).
    pub(crate) fn run_adaptive_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<MlmcResult> {
        let mut spent = Cost::default();
        let mut current: Option<Self> = None;
        let mut doubling = 0;
        // The retries' own budget: ADAPTIVE_RETRY_COST times the first attempt's cost (within the
        // user's max_cost); past it the last NotRelaxed is returned.
        let mut retry_budget: Option<u64> = None;
        let mut last_not_relaxed: Option<Error> = None;
        loop {
            let ml = current.as_ref().unwrap_or(self);
            let used = spent.datum_gradients + spent.datum_hvps;
            let user_left = target.max_cost.map(|m| m.saturating_sub(used));
            let retry_left = retry_budget.map(|b| b.saturating_sub(used));
            let max_cost = match (user_left, retry_left) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let left = AdaptiveSettings { max_cost, ..*target };
            match ml.run_adaptive_once(exec, model, g, &left) {
                Ok(Attempt::Done(r)) => {
                    let mut r = *r;
                    r.cost += spent;
                    r.epochs = r.cost.datum_gradients as f64 / model.n_data() as f64;
                    r.horizon = ml.settings.horizon;
                    r.horizon_doublings = doubling;
                    return Ok(r);
                }
                Ok(Attempt::NotRelaxed(e, _)) if doubling == ADAPTIVE_HORIZON_DOUBLINGS => return Err(e),
                Ok(Attempt::NotRelaxed(e, cost)) => {
                    spent += cost;
                    retry_budget
                        .get_or_insert(ADAPTIVE_RETRY_COST.saturating_mul(cost.datum_gradients + cost.datum_hvps));
                    last_not_relaxed = Some(e);
                    let horizon = ml.settings.horizon.checked_mul(2).ok_or_else(|| {
                        Error::invalid("horizon", ml.settings.horizon, "doubling it for relaxation overflows")
                    })?;
                    let settings = MlSgldSettings { horizon, ..ml.settings };
                    current = Some(Self::new(settings, ml.base.clone(), &ml.theta0)?);
                    doubling += 1;
                }
                // A retry that runs out of its budget or levels: the horizon is still too short
                // (what the last NotRelaxed says).
                Err(Error::BudgetExhausted { .. }) if last_not_relaxed.is_some() => {
                    return Err(last_not_relaxed.unwrap_or(Error::NoSamples { reason: "no attempt" }));
                }
                Err(Error::BudgetExhausted { reason, estimate, estimated_rmse, datum_evaluations }) => {
                    return Err(Error::BudgetExhausted {
                        reason,
                        estimate,
                        estimated_rmse,
                        datum_evaluations: datum_evaluations + used,
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One adaptive run at this horizon: done, or level 0 not relaxed (the error and the cost
    /// spent).
    fn run_adaptive_once<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<Attempt> {
        self.check(model)?;
        let (RmseTarget::PosteriorSd(t) | RmseTarget::Absolute(t) | RmseTarget::Moments(t)) = target.target;
        check_positive("target (RMSE)", t)?;
        if target.n_initial < 2 {
            return Err(Error::invalid("n_initial", target.n_initial, "must be >= 2"));
        }
        if target.max_level < 2 {
            return Err(Error::invalid("max_level", target.max_level, "must be >= 2"));
        }
        let setup = self.base.setup_cost();
        let mut budget = Budget { spent: (setup.datum_gradients + setup.datum_hvps) as f64, max: target.max_cost };
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        let moments_eps = match target.target {
            RmseTarget::Moments(f) if !keep => {
                return Err(Error::invalid(
                    "target",
                    format!("RmseTarget::Moments({f})"),
                    "it reads the kept end points: set keep_points (without averaging_window)",
                ));
            }
            RmseTarget::Moments(f) => Some(f),
            _ => None,
        };
        let mut data: Vec<LevelAcc> = Vec::new();
        // Levels dropped below the coarsest one kept (their cost), and level 0 for the
        // relaxation test.
        let mut dropped = Dropped::default();
        let exhausted = |me: &Self, data: &[LevelAcc], dropped: &Dropped, reason: &'static str, bias: f64| {
            let r = me.summarise(model, data, None, dropped);
            Error::BudgetExhausted {
                reason,
                estimate: r.estimate,
                estimated_rmse: (r.variance + bias * bias).sqrt(),
                datum_evaluations: r.cost.datum_gradients + r.cost.datum_hvps,
            }
        };
        let over = "max_cost would be exceeded before the target RMSE is reached";
        for l in 0..=2 {
            let mut acc = LevelAcc::new(l, keep);
            if let Err(e) = self.extend_level_on(exec, model, g, &mut acc, target.n_initial, &mut budget) {
                data.push(acc);
                return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                    exhausted(self, &data, &dropped, over, 0.0)
                } else {
                    e
                });
            }
            data.push(acc);
        }
        let eps = match target.target {
            RmseTarget::Absolute(e) => e,
            RmseTarget::PosteriorSd(f) | RmseTarget::Moments(f) => {
                let fine = &data[2];
                let sd = (fine.m2_f / (fine.n as f64 - 1.0)).sqrt();
                if sd == 0.0 && moments_eps.is_some() {
                    // A constant g: nothing to target but the moments.
                    f64::INFINITY
                } else if !(sd > 0.0 && sd.is_finite()) {
                    return Err(Error::invalid(
                        "target",
                        format!("{:?} (level 2's samples of g have sd {sd})", target.target),
                        "a target relative to the posterior sd needs g to vary: give RmseTarget::Absolute",
                    ));
                } else {
                    f * sd
                }
            }
        };
        loop {
            // Under a Moments target, the coarsest level is dropped when Giles' cost model says
            // the next one's fine paths alone make a cheaper base (see `coarser_costs`).
            if let Some(f) = moments_eps
                && data.len() >= 3
            {
                let (keep_cost, drop_cost) = coarser_costs(&data, eps, f, self.settings.coupling);
                if drop_cost < COARSEST_MARGIN * keep_cost {
                    let old = data.remove(0);
                    dropped.cost += old.cost;
                    if old.level == 0 {
                        dropped.level0 = Some(old);
                    }
                    // The new base's own correction, from its coupled samples, stays in the
                    // bias tests' decay fits (μ: its fine points' mean, as the tests will use).
                    dropped.g.push(data[0].mean.abs());
                    if keep {
                        let mu = fine_mean(&data[0]);
                        dropped.moments.push(level_outputs(&data[..1], &mu).0.swap_remove(0));
                    }
                    let l = data[0].level;
                    data[0].make_base(fine_fraction(l, self.settings.coupling));
                    continue;
                }
            }
            let stats: Vec<(f64, f64)> =
                data.iter().map(|a| (a.var().max(f64::MIN_POSITIVE), a.cost_per_sample())).collect();
            let sum: f64 = stats.iter().map(|(v, c)| (v * c).sqrt()).sum();
            let moment_wants = moments_eps.map(|f| {
                let costs: Vec<f64> = stats.iter().map(|(_, c)| *c).collect();
                moment_targets(&data, &costs, f, &dropped).0
            });
            // Whether a level took more than 1 % more samples (Giles' test of a settled allocation).
            let mut grew = false;
            for (l, (v, c)) in stats.iter().enumerate() {
                let mut want = (2.0 / (eps * eps) * (v / c).sqrt() * sum).ceil();
                if let Some(w) = &moment_wants {
                    want = want.max(w[l]);
                }
                let have = data[l].n as f64;
                if want > have {
                    let extra = want - have;
                    grew |= extra > 0.01 * have;
                    if budget.max.is_some_and(|m| budget.spent + extra * c > m as f64) {
                        return Err(exhausted(self, &data, &dropped, over, 0.0));
                    }
                    if let Err(e) = self.extend_level_on(exec, model, g, &mut data[l], extra as usize, &mut budget) {
                        return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                            exhausted(self, &data, &dropped, over, 0.0)
                        } else {
                            e
                        });
                    }
                }
            }
            // Under a Moments target the allocation is read again from the new samples until it
            // settles: its scales (the moments' variances, taken at their upper 2-se values) are
            // estimated from the samples and may have been loose.
            if grew && moments_eps.is_some() {
                continue;
            }
            let big_l = data.len() - 1;
            let mut means: Vec<f64> = dropped.g.clone();
            means.extend(data[1..].iter().map(|a| a.mean.abs()));
            let alpha = decay_rate(&means).max(0.5);
            let bias = means[means.len() - 1] / (2f64.powf(alpha) - 1.0);
            let moments_unbiased = moments_eps.is_none_or(|f| {
                let costs: Vec<f64> = data.iter().map(|a| a.cost_per_sample()).collect();
                moment_targets(&data, &costs, f, &dropped).1 <= f / std::f64::consts::SQRT_2
            });
            if bias <= eps / std::f64::consts::SQRT_2 && moments_unbiased {
                let finest = data[big_l].level;
                let r = self.summarise(model, &data, Some(bias), &dropped);
                if let Some(e) = self.relaxation_error(g, dropped.level0.as_ref().unwrap_or(&data[0]), finest, eps) {
                    return Ok(Attempt::NotRelaxed(e, r.cost));
                }
                let mut r = r;
                r.target_rmse = Some(eps);
                return Ok(Attempt::Done(Box::new(r)));
            }
            if data[big_l].level >= target.max_level {
                return Err(exhausted(self, &data, &dropped, "max_level reached before the bias test passed", bias));
            }
            let mut acc = LevelAcc::new(data[big_l].level + 1, keep);
            let r = self.extend_level_on(exec, model, g, &mut acc, target.n_initial, &mut budget);
            data.push(acc);
            if let Err(e) = r {
                return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                    exhausted(self, &data, &dropped, over, bias)
                } else {
                    e
                });
            }
        }
    }

    /// The relaxation test, from level 0's paths (see [`Error::NotRelaxed`]): with
    /// `g₀ = g(θ₀)`, `D = mean g(T₀/2) − g₀` and `C = mean g(T₀) − mean g(T₀/2)`, an exponential
    /// relaxation has `r = C/D = e^{−λT₀/2}` and leaves a bias `C r/(1 − r)` at T₀, and
    /// `C r^{2L+1}/(1 − r)` at the finest level's horizon `T_L = (L + 1) T₀`, whose law the
    /// estimate targets. The paths have not relaxed when C is more than three standard errors
    /// from 0 and that bias, computed with a conservative `r⁺ = (|C| + 2 se_C)/(|D| − 2 se_D)`,
    /// exceeds ε/2 (or `r⁺ ≥ 1`: no decay shows).
    fn relaxation_error<G: Fn(&[f64]) -> f64>(&self, g: &G, a: &LevelAcc, finest: usize, eps: f64) -> Option<Error> {
        if a.n < 2 {
            return None;
        }
        let n = a.n as f64;
        let se_c = (a.m2_r / (n - 1.0) / n).sqrt();
        let c = a.mean_r;
        if c.abs() <= 3.0 * se_c {
            return None;
        }
        // se of mean g(T/2) = mean(g(T)) − mean(C): at most the sum of the two.
        let se_d = (a.m2_f / (n - 1.0) / n).sqrt() + se_c;
        let d = (a.mean_f - c) - g(&self.theta0);
        let r_hi = (c.abs() + 2.0 * se_c) / (d.abs() - 2.0 * se_d);
        let same_sign = c * d > 0.0;
        let remaining = if same_sign && r_hi > 0.0 && r_hi < 1.0 {
            (c.abs() + 2.0 * se_c) * r_hi.powi(2 * finest as i32 + 1) / (1.0 - r_hi)
        } else {
            f64::INFINITY
        };
        (remaining > eps / 2.0).then_some(Error::NotRelaxed {
            horizon_time: self.settings.horizon as f64 * self.h0,
            change: c,
            standard_error: se_c,
            remaining_bias: remaining,
        })
    }

    /// The result from the levels the estimator uses (`data`, its coarsest first) and the cost
    /// of the levels it dropped (`sunk`).
    fn summarise<M: Model + ?Sized>(
        &self,
        model: &M,
        data: &[LevelAcc],
        bias: Option<f64>,
        dropped: &Dropped,
    ) -> MlmcResult {
        let mut levels = Vec::new();
        let mut cost = self.base.setup_cost() + dropped.cost;
        let (mut estimate, mut variance) = (0.0, 0.0);
        for a in data {
            estimate += a.mean;
            variance += a.var() / a.n.max(1) as f64;
            cost += a.cost;
            levels.push(LevelStats {
                level: a.level,
                n_samples: a.n,
                mean: a.mean,
                variance: a.var(),
                mean_fine: a.mean_f,
                variance_fine: if a.n > 1 { a.m2_f / (a.n - 1) as f64 } else { 0.0 },
                cost: a.cost,
                cost_per_sample: a.cost_per_sample(),
            });
        }
        let measure = self.measure(data);
        let moments =
            measure.as_ref().and_then(|m| m.mean().ok()).and_then(|mu| MomentErrors::of(data, mu.as_slice()?, dropped));
        let epochs = cost.datum_gradients as f64 / model.n_data() as f64;
        MlmcResult {
            estimate,
            variance,
            levels,
            cost,
            epochs,
            bias_estimate: bias,
            measure,
            target_rmse: None,
            moments,
            horizon: self.settings.horizon,
            horizon_doublings: 0,
        }
    }

    fn measure(&self, data: &[LevelAcc]) -> Option<Estimate> {
        if !data.iter().all(|a| a.keep) {
            return None;
        }
        let d = self.theta0.len();
        let mut rows = Vec::new();
        let mut weights = Vec::new();
        for a in data {
            let inv = 1.0 / a.n as f64;
            for (p, class) in &a.points {
                rows.extend_from_slice(p);
                weights.push(inv * class);
            }
        }
        let draws = Array2::from_shape_vec((weights.len(), d), rows).ok()?;
        Estimate::from_weighted(draws, Array1::from_vec(weights)).ok()
    }
}

/// The state of a resumable fixed-levels multilevel run: the planned samples per level and the
/// statistics of the samples taken so far (see [`MlSgld::start_fixed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlmcCheckpoint {
    targets: Vec<usize>,
    levels: Vec<LevelAcc>,
    settings: MlSgldSettings,
    h0: f64,
    theta0: Vec<f64>,
    /// The model of the first advance (checked on every later one).
    model: Option<crate::run::checkpoint::ModelFingerprint>,
}

impl MlmcCheckpoint {
    /// Samples planned per level.
    pub fn targets(&self) -> &[usize] {
        &self.targets
    }

    /// Samples taken per level so far.
    pub fn samples_done(&self) -> Vec<usize> {
        self.levels.iter().map(|a| a.n).collect()
    }

    /// Whether every level has its planned samples.
    pub fn is_complete(&self) -> bool {
        self.levels.iter().zip(&self.targets).all(|(a, &t)| a.n >= t)
    }

    /// Saves it to `path` in the [checkpoint format](crate::run::checkpoint).
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::run::checkpoint::save(path.as_ref(), "multilevel", "MlmcCheckpoint", self)
    }

    /// Loads a checkpoint saved by [`save`](Self::save).
    ///
    /// Errors: as [`RunOutput::load`](crate::RunOutput::load).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        crate::run::checkpoint::load(path.as_ref(), "multilevel", "MlmcCheckpoint")
    }
}

/// Work spent and the limit, in datum evaluations (gradients + Hessian-vector products).
struct Budget {
    spent: f64,
    max: Option<u64>,
}

impl Budget {
    fn unlimited() -> Self {
        Budget { spent: 0.0, max: None }
    }

    fn check(&self, next: f64) -> Result<()> {
        match self.max {
            Some(m) if self.spent + next > m as f64 => Err(Error::BudgetExhausted {
                reason: "max_cost",
                estimate: f64::NAN,
                estimated_rmse: f64::NAN,
                datum_evaluations: self.spent as u64,
            }),
            _ => Ok(()),
        }
    }
}

/// Running statistics of one level (Welford, folded in sample order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LevelAcc {
    level: usize,
    n: usize,
    mean: f64,
    m2: f64,
    mean_f: f64,
    m2_f: f64,
    /// Running mean and sum of squares of `g(end) − g(half horizon)` (level 0's relaxation).
    mean_r: f64,
    m2_r: f64,
    cost: Cost,
    keep: bool,
    /// End points with their weight class (+1 fine / level 0, −1 or −½ coarse).
    points: Vec<(Vec<f64>, f64)>,
    /// Whether this level is the estimator's coarsest (its fine paths alone, `g_l` instead of
    /// `Δ_l`; see [`LevelAcc::make_base`]).
    #[serde(default)]
    base: bool,
    /// For a base level: the datum evaluations of one fine path alone, estimated when it became
    /// the base and then measured on the fine-only samples it takes.
    #[serde(default)]
    fine_cost: f64,
    /// Fine-only samples taken as a base level, and their cost.
    #[serde(default)]
    fine_n: usize,
    #[serde(default)]
    fine_spent: Cost,
}

impl LevelAcc {
    fn new(level: usize, keep: bool) -> Self {
        LevelAcc {
            level,
            n: 0,
            mean: 0.0,
            m2: 0.0,
            mean_f: 0.0,
            m2_f: 0.0,
            mean_r: 0.0,
            m2_r: 0.0,
            cost: Cost::default(),
            keep,
            points: Vec::new(),
            base: false,
            fine_cost: 0.0,
            fine_n: 0,
            fine_spent: Cost::default(),
        }
    }

    /// Makes this level the estimator's coarsest: its statistics become those of its fine
    /// values `g_l` (the coarse paths of its samples are dropped from the measure), and the
    /// samples it takes from now on run the fine path alone. `fine_fraction` is the share of a
    /// coupled sample's steps that are the fine path's.
    fn make_base(&mut self, fine_fraction: f64) {
        self.fine_cost = self.cost_per_sample() * fine_fraction;
        self.mean = self.mean_f;
        self.m2 = self.m2_f;
        self.points.retain(|(_, class)| *class > 0.0);
        self.base = true;
    }

    fn push(&mut self, x: LevelSample) {
        self.n += 1;
        let k = self.n as f64;
        let d1 = x.delta - self.mean;
        self.mean += d1 / k;
        self.m2 += d1 * (x.delta - self.mean);
        let d2 = x.fine - self.mean_f;
        self.mean_f += d2 / k;
        self.m2_f += d2 * (x.fine - self.mean_f);
        let r = x.fine - x.half;
        let d3 = r - self.mean_r;
        self.mean_r += d3 / k;
        self.m2_r += d3 * (r - self.mean_r);
        self.cost += x.cost;
        if self.base {
            self.fine_n += 1;
            self.fine_spent += x.cost;
        }
        if self.keep {
            let n_pts = x.points.len();
            for (j, p) in x.points.into_iter().enumerate() {
                let class = if j == 0 {
                    1.0
                } else if n_pts == 3 {
                    -0.5
                } else {
                    -1.0
                };
                self.points.push((p, class));
            }
        }
    }

    fn var(&self) -> f64 {
        if self.n > 1 { self.m2 / (self.n - 1) as f64 } else { 0.0 }
    }

    /// Datum evaluations per sample (1 before any sample, so budgets stay finite); for a base
    /// level, per fine-only sample.
    fn cost_per_sample(&self) -> f64 {
        if self.base {
            if self.fine_n > 0 {
                ((self.fine_spent.datum_gradients + self.fine_spent.datum_hvps) as f64 / self.fine_n as f64).max(1.0)
            } else {
                self.fine_cost.max(1.0)
            }
        } else if self.n == 0 {
            1.0
        } else {
            ((self.cost.datum_gradients + self.cost.datum_hvps) as f64 / self.n as f64).max(1.0)
        }
    }
}

/// The least-squares slope α of `−log₂ y_l` against l (the decay rate of `y_l ∝ 2^(−αl)`).
fn decay_rate(y: &[f64]) -> f64 {
    let pts: Vec<(f64, f64)> =
        y.iter().enumerate().filter(|(_, v)| **v > 0.0).map(|(l, v)| (l as f64, -v.log2())).collect();
    if pts.len() < 2 {
        return 0.5;
    }
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx > 0.0 { sxy / sxx } else { 0.5 }
}

/// Where the samples of a level are computed: `samples(range, compute)` returns the samples of
/// the indices in `range` in index order (at least up to the first failing one, whose error is
/// then in its place); `compute` takes a list of indices and returns their samples (or errors)
/// in that order. Implemented once, for every [`Placement`]: sample i of the range (counted from
/// its start) where `runs_here(i)` says, every sample then exchanged so that every process folds
/// all of them in index order.
pub(crate) trait SampleExec {
    fn samples(
        &self,
        range: std::ops::Range<u64>,
        compute: &dyn Fn(Vec<u64>) -> Vec<Result<LevelSample>>,
    ) -> Vec<Result<LevelSample>>;
}

/// One process's share of a batch of multilevel samples.
#[derive(Serialize, Deserialize)]
struct SampleReport {
    samples: Vec<(u64, LevelSample)>,
    failure: Option<(u64, Failure)>,
}

impl<P: Placement> SampleExec for P {
    fn samples(
        &self,
        range: std::ops::Range<u64>,
        compute: &dyn Fn(Vec<u64>) -> Vec<Result<LevelSample>>,
    ) -> Vec<Result<LevelSample>> {
        let mine: Vec<u64> = range.clone().filter(|i| self.runs_here(i - range.start)).collect();
        if !self.over_ranks() {
            return compute(mine);
        }
        let mut report = SampleReport { samples: Vec::with_capacity(mine.len()), failure: None };
        let mut my_error = None;
        for (&i, r) in mine.iter().zip(compute(mine.clone())) {
            match r {
                Ok(x) => report.samples.push((i, x)),
                Err(e) => {
                    report.failure = Some((i, Failure::of(&e)));
                    my_error = Some(e);
                    break;
                }
            }
        }
        let all: Vec<SampleReport> = match self.exchange(report, "multilevel samples") {
            Ok(all) => all,
            Err(e) => return vec![Err(e)],
        };
        let mut samples = Vec::with_capacity((range.end - range.start) as usize);
        let mut first_failure: Option<(u64, usize, Failure)> = None;
        for (rank, r) in all.into_iter().enumerate() {
            samples.extend(r.samples);
            if let Some((i, f)) = r.failure
                && first_failure.as_ref().is_none_or(|(j, _, _)| i < *j)
            {
                first_failure = Some((i, rank, f));
            }
        }
        samples.sort_by_key(|(i, _)| *i);
        let stop = first_failure.as_ref().map_or(u64::MAX, |(i, _, _)| *i);
        let mut out: Vec<Result<_>> = samples.into_iter().take_while(|(i, _)| *i < stop).map(|(_, x)| Ok(x)).collect();
        if let Some((_, rank, f)) = first_failure {
            // The first failing sample's rank, whatever the rank order.
            let mine = my_error.filter(|_| rank == self.rank());
            out.extend(rank_error(self, mine, &[(rank, f)]).map(Err));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gradient::Minibatch;
    use crate::models::LinearGaussian;

    /// Giles' allocation `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉` by hand; its variance
    /// `Σ V_l/N_l` is within the half of ε² it is given, and among allocations with that variance
    /// it costs least (perturbing it along the constraint costs more); it only raises `want`.
    #[test]
    fn giles_allocation_meets_its_variance_at_least_cost() {
        let (v, c, eps) = ([4.0, 1.0, 0.25], [1.0, 4.0, 16.0], 0.05);
        let mut want = [0.0; 3];
        allocate(&v, &c, eps, &mut want);
        let sum: f64 = v.iter().zip(&c).map(|(v, c)| (v * c).sqrt()).sum();
        assert_eq!(sum, 6.0);
        for l in 0..3 {
            assert_eq!(want[l], (2.0 / (eps * eps) * (v[l] / c[l]).sqrt() * sum).ceil());
        }
        assert_eq!(want, [9_600.0, 2_400.0, 600.0]);
        let variance = |n: &[f64]| v.iter().zip(n).map(|(v, n)| v / n).sum::<f64>();
        let cost = |n: &[f64]| c.iter().zip(n).map(|(c, n)| c * n).sum::<f64>();
        assert!(variance(&want) <= eps * eps / 2.0 + 1e-15);
        // Move samples between levels 0 and 1 keeping the variance: the cost rises.
        for t in [-0.2, 0.2] {
            let n0 = want[0] * (1.0 + t);
            let n1 = v[1] / (variance(&want) - v[0] / n0 - v[2] / want[2]);
            assert!(cost(&[n0, n1, want[2]]) > cost(&want), "t = {t}");
        }
        let mut higher = [20_000.0, 0.0, 0.0];
        allocate(&v, &c, eps, &mut higher);
        assert_eq!(higher, [20_000.0, 2_400.0, 600.0]);
    }

    /// The decay rate of an exact geometric sequence, the defaults with too few points, and the
    /// bias divisor's clamp of α to [0.5, 1] (SGLD's weak order).
    #[test]
    fn decay_rates_and_bias_divisors_by_hand() {
        let y: Vec<f64> = (0..5).map(|l| 3.0 * 2f64.powf(-0.8 * l as f64)).collect();
        assert!((decay_rate(&y) - 0.8).abs() < 1e-12);
        assert_eq!(decay_rate(&[1.0]), 0.5);
        assert_eq!(decay_rate(&[1.0, 0.0]), 0.5);
        // Level 0 is left out of the fit.
        let fast: Vec<f64> = (0..5).map(|l| 2f64.powf(-3.0 * l as f64)).collect();
        assert!((moment_bias_divisor(&fast) - 1.0).abs() < 1e-12, "alpha capped at 1: 2 - 1");
        let slow: Vec<f64> = (0..5).map(|l| 2f64.powf(-0.1 * l as f64)).collect();
        assert!((moment_bias_divisor(&slow) - (2f64.sqrt() - 1.0)).abs() < 1e-12, "alpha held at 0.5");
        let mid: Vec<f64> = [100.0, 1.0, 0.5f64.powf(0.75), 0.5f64.powf(1.5)].to_vec();
        assert!((moment_bias_divisor(&mid) - (2f64.powf(0.75) - 1.0)).abs() < 1e-12);
    }

    /// The fine path's share of a level's steps: all of them at level 0; `(1 + l)/(1 + 2l)`
    /// with two coarse paths, `(1 + l)/(1 + 3l/2)` with one subsampled.
    #[test]
    fn fine_fractions_by_hand() {
        for coupling in [MlCoupling::Antithetic, MlCoupling::Subsampling] {
            assert_eq!(fine_fraction(0, coupling), 1.0);
        }
        assert!((fine_fraction(1, MlCoupling::Antithetic) - 2.0 / 3.0).abs() < 1e-15);
        assert!((fine_fraction(3, MlCoupling::Antithetic) - 4.0 / 7.0).abs() < 1e-15);
        assert!((fine_fraction(2, MlCoupling::Subsampling) - 0.75).abs() < 1e-15);
    }

    /// A base level's fine-only sample draws the same random numbers as the coupled sample of
    /// the same index, so its fine path (value and end point) is bit-identical, at the fine
    /// path's share of the cost.
    #[test]
    fn a_fine_only_sample_is_the_coupled_samples_fine_path() {
        let m = LinearGaussian::synthetic(100, 2, 4.0, 10.0, 23).unwrap();
        let g = |t: &[f64]| t[0] + t[1] * t[1];
        for coupling in [MlCoupling::Antithetic, MlCoupling::Subsampling] {
            let settings = MlSgldSettings { coupling, keep_points: true, ..Default::default() };
            let ml = MlSgld::sgld(settings, 0.01, Minibatch::new(10), &[0.0, 0.0]).unwrap();
            for level in 1..4 {
                for i in 0..3 {
                    let full = ml.sample_with(&mut Work::new(&ml.base, 2), &m, &g, level, i, false).unwrap();
                    let fine = ml.sample_with(&mut Work::new(&ml.base, 2), &m, &g, level, i, true).unwrap();
                    assert_eq!(full.fine.to_bits(), fine.fine.to_bits());
                    assert_eq!(fine.delta.to_bits(), fine.fine.to_bits());
                    assert_eq!(fine.points.len(), 1);
                    assert_eq!(full.points[0], fine.points[0]);
                    let ratio = fine.cost.datum_gradients as f64 / full.cost.datum_gradients as f64;
                    assert!((ratio - fine_fraction(level, coupling)).abs() < 1e-12, "{coupling:?} {level}: {ratio}");
                }
            }
        }
    }
}
