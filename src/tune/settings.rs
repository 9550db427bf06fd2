//! What [`tune`](crate::tune::tune) is told ([`TuneSettings`], [`PlannedRun`], [`Precondition`], [`Objective`]) and what
//! it returns ([`Tuned`], [`Trial`]).

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::gradient::optim::ModeSettings;
use crate::models::hessian::HESSIAN_ROWS;
use crate::run::{RunSettings, Storage};
use crate::samplers::Whitening;
use crate::trace::diagnostics::KsdSettings;
use crate::tune::curvature::{Curvature, CurvatureSettings};
use crate::tune::score::Scoring;
use ndarray::Array2;
use std::sync::Arc;

/// Settings of [`tune`](crate::tune::tune).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSettings {
    /// Multiples of the curvature-derived centre step tried by pilot runs. Default
    /// `2⁻⁶, 2⁻⁵, …, 2¹` (eight candidates).
    pub factors: Vec<f64>,
    /// The most iterations of each pilot chain, burn-in included: the pilots run this long for a
    /// planned run long enough to afford it (see [`pilot_share`](Self::pilot_share)). Default
    /// 2000.
    pub pilot_iterations: u64,
    /// Burn-in of a pilot chain of [`pilot_iterations`](Self::pilot_iterations) (shorter pilots
    /// keep the same fraction). Default 200.
    pub pilot_burn_in: u64,
    /// The pilots' share of the planned run: every pilot chain runs
    /// `pilot_share × planned kept draws / (factors × pilot_chains)` iterations, between
    /// [`pilot_min_iterations`](Self::pilot_min_iterations) and
    /// [`pilot_iterations`](Self::pilot_iterations), so that the tuning of a short run costs a
    /// fraction of it and a long run gets the longest pilots (see [`Trial::iterations`] for what
    /// ran). Default [`PILOT_SHARE`]; `f64::INFINITY` always runs `pilot_iterations`.
    pub pilot_share: f64,
    /// The fewest iterations of a pilot chain, burn-in included, whatever the planned run.
    /// Default [`PILOT_MIN_ITERATIONS`].
    pub pilot_min_iterations: u64,
    /// At most this many (thinned, evenly spaced) draws of each pilot chain are scored (each
    /// costs one full gradient, or a minibatch under stochastic [`scoring`](Self::scoring)).
    /// Default 200.
    pub scored_draws: usize,
    /// Independent chains per pilot, their draws pooled for the KSD (so that one lucky or unlucky
    /// chain does not decide; their spread gives the KSD's standard error). Default 4.
    pub pilot_chains: usize,
    /// The IMQ kernel. Default `c = 1, β = −1/2`.
    pub ksd: KsdSettings,
    /// Weight `w` of the Stein moment terms added to the squared IMQ KSD. A bounded kernel such
    /// as the IMQ does not control moments (Kanagawa, Barp, Gretton & Mackey, *Controlling
    /// moments with kernel Stein discrepancies*, 2022): with a few hundred pilot draws in d = 20 it
    /// barely sees a posterior variance 40 % too large. The moment terms are the Stein identities
    /// `E[A g] = 0` of the linear test functions `g = Σ̂ eⱼ` and `g = Σ̂ eⱼ (xⱼ − θ̂ⱼ)`, with Σ̂ the
    /// Laplace covariance `∇²U(θ̂)⁻¹` (exact identities under the posterior whatever its shape;
    /// Σ̂ only scales them): for a near-Gaussian posterior they are the errors of each
    /// coordinate's mean and sd in posterior sds (the sd's from half the relative error of the
    /// second moment), squared and averaged over the d coordinates. The total is the squared discrepancy of the IMQ kernel plus a linear
    /// matrix-valued kernel, itself a kernel Stein discrepancy. `0` gives the plain IMQ KSD of
    /// Gorham & Mackey. Default 1.
    pub moment_weight: f64,
    /// Seed of the pilots. Default 0.
    pub seed: u64,
    /// Start from the mode found by [`find_mode`](crate::find_mode) from the given θ₀ (default true); otherwise
    /// θ₀ must already be near a mode.
    pub find_mode: bool,
    /// The mode search. Default: [`ModeSettings::default()`] with `decrement_tol` =
    /// [`TUNE_DECREMENT_TOL`] (the mode to a thousandth of a posterior sd: the pilots, the
    /// control variate and the Laplace approximation need no more).
    pub mode: ModeSettings,
    /// Every Hessian of the tuning — the whitening, the curvature, the Laplace approximation, the
    /// dispersed starts and the Newton steps of the mode search — is estimated from
    /// `max(hessian_rows, 100 d)` data drawn at random (scaled by N/m), or all of them when that
    /// is more than half the data: `d m` datum Hessian-vector products instead of `d N`, whose
    /// relative error (a few per cent) the whitened sampler and the pilots absorb. Default
    /// [`HESSIAN_ROWS`]; `usize::MAX` uses all the data.
    pub hessian_rows: usize,
    /// The curvature estimate.
    pub curvature: CurvatureSettings,
    /// While fewer than two scored candidates lie below (above) the smallest KSD, the grid is
    /// extended by halving its smallest (doubling its largest) step, at most this many times.
    /// Default 6.
    pub max_extensions: usize,
    /// How the returned sampler is preconditioned (samplers that support a [`Whitening`]: SGLD,
    /// SGHMC, SGNHT, pSGLD, with any gradient estimator). Default [`Precondition::Auto`].
    pub precondition: Precondition,
    /// The run the step is chosen for. Default: the kept draws of [`RunSettings::default()`]
    /// (9 000 iterations after burn-in, one chain). Set it to your run: a longer run can afford
    /// a smaller, less biased step (see the [module docs](crate::tune)).
    pub planned_run: PlannedRun,
    /// A target accuracy in posterior sds: when set, [`tune`](crate::tune::tune) also chooses the run's length, the
    /// fewest kept iterations per chain ([`planned_run`](Self::planned_run)`.chains` chains) at
    /// which the predicted worst error of a mean or sd ([`Tuned::predicted_error`]) is at most it,
    /// and the step for that run; [`Tuned::planned_run`] is the run it chose. Where nothing is
    /// predicted (no pilot showed a bias) or no run reaches it, the planned run is kept and the
    /// reason says so. [`Sample`](crate::Sample) sets it from its
    /// [`accuracy`](crate::Sample::accuracy). Default `None`.
    pub target_accuracy: Option<f64>,
    /// What [`tune`](crate::tune::tune) chooses the step for. Default [`Objective::Accuracy`].
    /// ([`tune_rr`](crate::tune_rr) has its own rule and ignores it.)
    pub objective: Objective,
    /// Whether [`tune`](crate::tune::tune) corrects the injected noise of SGLD, SGHMC, SGNHT and pSGLD by their gradient
    /// estimator's measured noise covariance (see [`GradientNoise`](crate::GradientNoise); needs a whitening and an
    /// estimator with [independent draws](crate::GradientEstimator::independent_draws), e.g. a
    /// minibatch or control variates). Default `true`. The measurement costs
    /// `2 · points · n` datum gradients and `2 · points · d²` multiply-adds,
    /// `points = clamp(200 d, 10 000, 20 000)`, and each step `2d²` multiply-adds (`4d²` for
    /// pSGLD): it is applied up to d = [`DENSE_WHITENING_MAX_DIM`](crate::tune::DENSE_WHITENING_MAX_DIM), where the whitening is
    /// dense (`d²` per step) too; above, [`Tuned::preconditioning`] says it was not.
    /// ([`tune_rr`](crate::tune_rr) and [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned) ignore it.)
    pub correct_gradient_noise: bool,
    /// How the pilots' draws are scored: exact full-data scores, or control-variate scores at
    /// the mode whose noise the error model counts (see [`Scoring`]). Default
    /// [`Scoring::Auto`]: exact up to N = 4 · [`SCORE_BATCH`](crate::tune::SCORE_BATCH), stochastic above.
    pub scoring: Scoring,
}

/// What [`tune`](crate::tune::tune) chooses the step for (see [`TuneSettings::objective`]).
///
/// Under minibatch gradient noise the two can conflict: the noise inflates the stationary
/// variance by about `1 + h σ²/2` (σ² the noise variance in whitened units, about N/n) while
/// the chain needs about `2/h` iterations per effective draw, so a step small enough to be
/// accurate can be too small to show mixing (split-R̂ ≤ [`RHAT_MAX`](crate::diagnostics::RHAT_MAX))
/// in the planned run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Objective {
    /// The step that minimises the planned run's predicted worst error of a mean or sd (bias and
    /// Monte Carlo error together). When that step's predicted ESS or split-R̂ misses the
    /// convergence thresholds, [`Tuned::reason`] says so before the run is made.
    #[default]
    Accuracy,
    /// The accuracy step, raised if needed to the smallest step at which the planned run's
    /// predicted smallest ESS reaches the convergence verdict's needs: ESS ≥
    /// [`ESS_MIN`](crate::diagnostics::ESS_MIN) and a predicted largest split-R̂ ≤
    /// [`RHAT_MAX`](crate::diagnostics::RHAT_MAX) ([`predicted_max_rhat`](crate::tune::predicted_max_rhat)), with a margin of
    /// [`CONVERGENCE_MARGIN`] on that ESS for the prediction's own error — but only if that step
    /// is at most the largest step a pilot ran without failing and its predicted worst error at
    /// most [`CONVERGENCE_ERROR_RATIO`] times the accuracy step's (which needs a pilot that showed
    /// bias: without one nothing bounds a larger step's error); otherwise the accuracy step is
    /// kept and the reason says why (and, like the default, about how long a run would converge
    /// at its own accuracy step). It trades some bias for a verdict the run can reach; the reason
    /// states the predicted errors of both steps. (Without the cap, on the `validation`
    /// example's posteriors at 5 000 × 4, SGLD "converged" with sds 1.5–3.7× too wide.)
    Convergence,
}

/// The factor on the ESS [`Objective::Convergence`] asks of the prediction: on the `validation`
/// example's tuned runs the predicted smallest ESS was 0.67–2.45× the measured one.
pub const CONVERGENCE_MARGIN: f64 = 1.5;

/// The most [`Objective::Convergence`] lets the predicted worst error grow over the accuracy
/// step's (the `validation` example's target for a tuned step against the best of a grid).
pub const CONVERGENCE_ERROR_RATIO: f64 = 1.5;

/// The run a step is tuned for: kept iterations (after burn-in) per chain, and chains. Only
/// their product, the number of kept draws, matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRun {
    /// Kept iterations per chain (burn-in excluded).
    pub iterations: u64,
    /// Chains.
    pub chains: usize,
}

impl PlannedRun {
    /// `iterations` kept per chain, `chains` chains.
    pub fn new(iterations: u64, chains: usize) -> Self {
        PlannedRun { iterations, chains }
    }

    /// The kept draws, `iterations × chains`.
    pub fn draws(&self) -> f64 {
        self.iterations as f64 * self.chains as f64
    }
}

impl Default for PlannedRun {
    fn default() -> Self {
        let r = RunSettings::default();
        PlannedRun { iterations: r.n_iter - r.burn_in, chains: r.n_chains }
    }
}

/// How [`tune`](crate::tune::tune) and [`tune_rr`](crate::tune_rr) precondition the sampler: the whitening (see [`Whitening`]) is
/// built from the Hessian at the mode, `∇²U(θ̂)`, computed from d Hessian-vector products (the
/// model's, or central differences of full gradients), whose cost is in [`Tuned::cost`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Precondition {
    /// Dense (`T Tᵀ = ∇²U(θ̂)⁻¹`) when `d ≤` [`DENSE_WHITENING_MAX_DIM`](crate::tune::DENSE_WHITENING_MAX_DIM) and the Hessian is
    /// positive definite; else diagonal (`Tⱼⱼ = 1/√∇²U(θ̂)ⱼⱼ`) when every diagonal entry is
    /// positive; else none. The dense whitening costs `d²` multiply-adds per step, the gradient
    /// on a minibatch of n costs about `n d` for a GLM: at d ≤ 1000 and n ≥ 100 it is at most a
    /// few times the gradient's work, and it removes any correlation between parameters; a
    /// diagonal one removes only differences of scale.
    #[default]
    Auto,
    /// Dense; an error if the Hessian at the mode is not positive definite.
    Dense,
    /// Diagonal; an error if a diagonal entry of the Hessian is not positive.
    Diagonal,
    /// No preconditioning: the sampler as given.
    None,
}

impl Default for TuneSettings {
    fn default() -> Self {
        TuneSettings {
            factors: (-6..=1).map(|e| 2f64.powi(e)).collect(),
            pilot_iterations: 2000,
            pilot_burn_in: 200,
            pilot_share: PILOT_SHARE,
            pilot_min_iterations: PILOT_MIN_ITERATIONS,
            scored_draws: 200,
            pilot_chains: 4,
            ksd: KsdSettings::default(),
            moment_weight: 1.0,
            seed: 0,
            find_mode: true,
            mode: ModeSettings { decrement_tol: TUNE_DECREMENT_TOL, ..ModeSettings::default() },
            hessian_rows: HESSIAN_ROWS,
            curvature: CurvatureSettings::default(),
            max_extensions: 6,
            precondition: Precondition::Auto,
            planned_run: PlannedRun::default(),
            objective: Objective::Accuracy,
            correct_gradient_noise: true,
            scoring: Scoring::Auto,
            target_accuracy: None,
        }
    }
}

impl TuneSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        if self.factors.is_empty() {
            return Err(Error::invalid("factors", "[]", "must name at least one candidate"));
        }
        if let Some(f) = self.factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return Err(Error::invalid("factors", f, "every factor must be positive and finite"));
        }
        if self.scored_draws < 2 {
            return Err(Error::invalid("scored_draws", self.scored_draws, "must be >= 2"));
        }
        if self.pilot_chains == 0 {
            return Err(Error::invalid("pilot_chains", self.pilot_chains, "must be >= 1"));
        }
        if !(self.moment_weight.is_finite() && self.moment_weight >= 0.0) {
            return Err(Error::invalid("moment_weight", self.moment_weight, "must be finite and >= 0"));
        }
        if self.planned_run.iterations == 0 || self.planned_run.chains == 0 {
            return Err(Error::invalid(
                "planned_run",
                format!("{} iterations x {} chains", self.planned_run.iterations, self.planned_run.chains),
                "must plan at least one kept iteration and one chain",
            ));
        }
        self.scoring.validate()?;
        if let Some(t) = self.target_accuracy {
            crate::error::check_positive("target_accuracy", t)?;
        }
        if self.pilot_share.is_nan() || self.pilot_share <= 0.0 {
            return Err(Error::invalid(
                "pilot_share",
                self.pilot_share,
                "must be positive (f64::INFINITY: full-length pilots)",
            ));
        }
        if self.pilot_min_iterations < 2 {
            return Err(Error::invalid("pilot_min_iterations", self.pilot_min_iterations, "must be >= 2"));
        }
        RunSettings { n_iter: self.pilot_iterations, burn_in: self.pilot_burn_in, ..Default::default() }.validate()
    }

    /// These settings with the pilots' length scaled to the planned run (see
    /// [`pilot_share`](Self::pilot_share)): `pilot_iterations` and `pilot_burn_in` as the pilots
    /// run them.
    pub(crate) fn scaled_to_run(&self) -> TuneSettings {
        let units = (self.factors.len() * self.pilot_chains).max(1) as f64;
        let want = (self.pilot_share * self.planned_run.draws() / units).ceil();
        if !want.is_finite() || want >= self.pilot_iterations as f64 {
            return self.clone();
        }
        let iterations =
            (want as u64).clamp(self.pilot_min_iterations.min(self.pilot_iterations), self.pilot_iterations);
        let burn_in = (self.pilot_burn_in as f64 * iterations as f64 / self.pilot_iterations as f64).round() as u64;
        TuneSettings { pilot_iterations: iterations, pilot_burn_in: burn_in.min(iterations - 1), ..self.clone() }
    }

    /// The pilots' storage interval: every `thin`-th of the kept iterations, so that each pilot
    /// chain stores about `scored_draws` draws.
    pub(crate) fn pilot_thin(&self) -> u64 {
        ((self.pilot_iterations - self.pilot_burn_in) / self.scored_draws as u64).max(1)
    }

    /// The one pilot plan of [`tune`](crate::tune::tune) and [`tune_rr`](crate::tune_rr): `pilot_iterations` with
    /// `pilot_burn_in`, every `thin`-th draw stored, `chains` chains run serially (the pilots
    /// themselves run in parallel), no model check (done once before), seeded from `seed`, the
    /// candidate's index and (for `tune_rr`'s replicate pairs) the replicate's.
    pub(crate) fn pilot_run(&self, chains: usize, thin: u64, candidate: u64, replicate: u64) -> RunSettings {
        RunSettings {
            n_iter: self.pilot_iterations,
            burn_in: self.pilot_burn_in,
            thin,
            n_chains: chains,
            seed: self
                .seed
                .wrapping_add(candidate.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .wrapping_add(replicate.wrapping_mul(0xD1B5_4A32_D192_ED03)),
            storage: Storage::Samples,
            parallel: false,
            check_model: false,
            ..Default::default()
        }
    }
}

/// The default [`TuneSettings::pilot_share`]: all pilots together run half the planned run's kept
/// draws (grid extensions beyond [`TuneSettings::factors`] add to it). At the default eight
/// candidates and four chains, pilots reach the full [`TuneSettings::pilot_iterations`] = 2 000
/// for planned runs of 128 000 kept draws and more (the validation example's 50 000 × 4), and
/// stay at [`PILOT_MIN_ITERATIONS`] for runs of 32 000 and fewer (its 5 000 × 4).
pub const PILOT_SHARE: f64 = 0.5;

/// The default [`TuneSettings::pilot_min_iterations`]: 450 kept iterations per pilot chain after a
/// burn-in of 50 hold, at the steps the tuner chooses (τ of 10–40 iterations in whitened
/// coordinates), 10–45 effective draws per chain.
pub const PILOT_MIN_ITERATIONS: u64 = 500;

/// The Newton decrement (distance to the mode in posterior sds) at which [`tune`](crate::tune::tune)'s mode search
/// stops by default ([`TuneSettings::mode`]): the pilots start there and burn in, the control
/// variates are centred there (their noise grows with the distance from the centre to the
/// chains, a few sds), and the Stein identities hold about any centre.
pub const TUNE_DECREMENT_TOL: f64 = 1e-3;

/// One pilot run of [`tune`](crate::tune::tune).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// The step size tried.
    pub step_size: f64,
    /// Iterations of each of its chains, burn-in included ([`TuneSettings::pilot_share`] scales
    /// them to the planned run).
    pub iterations: u64,
    /// Its chains' burn-in.
    pub burn_in: u64,
    /// Its KSD (`None` if it failed).
    pub ksd: Option<f64>,
    /// The KSD's standard error, from the spread of the pilot chains' separate KSDs (`None` with
    /// one pilot chain or on failure).
    pub ksd_se: Option<f64>,
    /// Why it failed (divergence, runaway), if it did.
    pub failure: Option<String>,
    /// Its pilot run and scoring cost.
    pub cost: Cost,
    /// Per coordinate: iterations per effective draw, and the Stein moment errors of the mean and
    /// the sd in Laplace sds (`None` on failure).
    pub(crate) errors: Option<PilotErrors>,
    /// The pilot's scored draws (rows), kept while [`tune`](crate::tune::tune) runs so that the gradient noise can be
    /// measured where its chains went (`None` on failure and in the returned [`Tuned`]).
    pub(crate) draws: Option<Arc<Array2<f64>>>,
}

/// What a pilot measured per coordinate, in the units of the run's reported error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PilotErrors {
    /// Iterations (of one chain) per effective draw, from the pilot chains' ESS of the mean.
    pub(crate) tau: Vec<f64>,
    /// Stein moment estimate of the mean's error, in Laplace sds.
    pub(crate) mean: Vec<f64>,
    /// Stein moment estimate of the sd's relative error (`M_jj / 2`).
    pub(crate) sd: Vec<f64>,
    /// The variance that stochastic scores add to `mean` (0 with exact scores).
    pub(crate) mean_noise: Vec<f64>,
    /// The variance that stochastic scores add to `sd` (0 with exact scores).
    pub(crate) sd_noise: Vec<f64>,
}

impl PilotErrors {
    /// Errors measured with exact scores (no score noise).
    #[cfg(test)]
    pub(crate) fn exact(tau: Vec<f64>, mean: Vec<f64>, sd: Vec<f64>) -> Self {
        let d = tau.len();
        PilotErrors { tau, mean, sd, mean_noise: vec![0.0; d], sd_noise: vec![0.0; d] }
    }
}

/// What [`tune`](crate::tune::tune) chose, and why.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Tuned<S> {
    /// The sampler with the chosen constant step.
    pub sampler: S,
    /// The chosen step.
    pub step_size: f64,
    /// The curvature-derived centre of the candidates.
    pub centre: f64,
    /// The curvature at the mode.
    pub curvature: Curvature,
    /// The mode the pilots started from (start runs there too).
    pub mode: Vec<f64>,
    /// Every candidate tried, in increasing step order (grid extensions included).
    pub trials: Vec<Trial>,
    /// Everything spent: mode, curvature, centre, pilots and scoring.
    pub cost: Cost,
    /// Why the winner won, in words.
    pub reason: String,
    /// The whitening the returned sampler runs in (see [`TuneSettings::precondition`]), if any.
    pub whitening: Option<Arc<Whitening>>,
    /// Which preconditioning was chosen and why, its cost per step, and the condition number
    /// before and after, in words.
    pub preconditioning: String,
    /// Wall time of the whole tuning (mode search, curvature, whitening and pilots).
    pub wall_time: std::time::Duration,
    /// The planned run's predicted smallest effective sample size over the coordinates at the
    /// chosen step, `min_j N/τ_j(h)` with the pilots' fitted autocorrelation times
    /// `τ_j(h) = κ_j h^{−γ}` (the error model's Monte Carlo part, also when the KSD fit chose the
    /// step; `None` with fewer than three scored pilots). Below [`ESS_MIN`](crate::diagnostics::ESS_MIN) the run will most likely report
    /// NOT CONVERGED; [`reason`](Self::reason) then says so before the run is made.
    pub predicted_ess: Option<f64>,
    /// The planned run's predicted largest split-R̂ over the coordinates (bulk and folded) at
    /// the chosen step, from [`predicted_ess`](Self::predicted_ess) by [`predicted_max_rhat`](crate::tune::predicted_max_rhat):
    /// chains that have mixed still show an R̂ above 1 from their finite length, and above
    /// [`RHAT_MAX`](crate::diagnostics::RHAT_MAX) the run will most likely report NOT CONVERGED
    /// even with an ESS above [`ESS_MIN`](crate::diagnostics::ESS_MIN); [`reason`](Self::reason)
    /// then says so, with the ESS it would take.
    pub predicted_rhat: Option<f64>,
    /// The planned run's predicted worst error of a posterior mean or sd, in posterior sds, at
    /// the chosen step: `√(max_j β_j² h² + K h^{−γ}/N)` from the error model (bias and Monte
    /// Carlo error together; see [`TuneSettings::planned_run`]), with a gradient-noise
    /// correction's bias floor and its approximate residual where they apply. It is an
    /// expectation, not a bound, and conservative by construction (every coordinate counted at
    /// the slowest one's autocorrelation, an sd's error at a mean's variance): on the
    /// `validation` example's 60 tuned runs at 5 000 and 50 000 × 4 (2026-11-27) the measured
    /// worst error was 0.33–1.43× it (median 0.73), and it was above 0.1 sd for all 9 runs whose
    /// error was (and for 10 that stayed within); at 500 000 × 4, where the predictions (median 0.016 sd) are of the size
    /// of the references' own error, the measured errors were 0.58–2.38× them. `None` when no
    /// pilot showed a bias (the KSD fit then chose the step and nothing predicts its bias) or
    /// with fewer than three scored pilots. Compare it with the accuracy you need before making
    /// the run: above it, run longer.
    pub predicted_error: Option<f64>,
    /// The run the step was chosen for: [`TuneSettings::planned_run`], or with a
    /// [`TuneSettings::target_accuracy`] the shortest run predicted to meet it.
    pub planned_run: PlannedRun,
    /// The Hessian at the mode the tuning used (dense up to the Laplace approximation's largest
    /// dimension), for the dispersed starts.
    pub(crate) hessian: Option<Arc<Array2<f64>>>,
}

impl<S> Tuned<S> {
    /// The same record for another sampler made from this one (a replica ladder from a tuned
    /// SGLD): every choice and cost kept.
    pub(crate) fn with_sampler<T>(self, sampler: T) -> Tuned<T> {
        Tuned {
            sampler,
            step_size: self.step_size,
            centre: self.centre,
            curvature: self.curvature,
            mode: self.mode,
            trials: self.trials,
            cost: self.cost,
            reason: self.reason,
            whitening: self.whitening,
            preconditioning: self.preconditioning,
            wall_time: self.wall_time,
            predicted_ess: self.predicted_ess,
            predicted_rhat: self.predicted_rhat,
            predicted_error: self.predicted_error,
            planned_run: self.planned_run,
            hessian: self.hessian,
        }
    }
}

/// The largest fraction of a gradient-noise correction's limit
/// ([`Tunable::step_limit`](crate::tune::Tunable::step_limit)) that [`tune`](crate::tune::tune)
/// chooses: at the limit no noise is injected along the measured noise's top direction, and
/// wherever the chains meet less minibatch noise than its average the step then carries too little
/// (on the Wisconsin breast-cancer regression at N/n = 11, SGLD's sds came out 11 % small at the
/// limit with the noise measured at Laplace draws). At half the limit every direction keeps at
/// least half its injected noise.
pub const CORRECTION_MARGIN: f64 = 0.5;
