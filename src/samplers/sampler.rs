//! The [`Sampler`] trait and its coupled forms [`Discretisation`] and [`SubsampledDiscretisation`].

use crate::cost::Cost;
use crate::error::Result;
use crate::models::model::Model;
use rand::Rng;

/// A Markov chain that moves a state θ ∈ ℝᵈ one iteration at a time.
///
/// A sampler value is built from validated settings (so an invalid sampler cannot exist), then
/// bound to a model and a starting point by [`init`](Self::init), which allocates every buffer;
/// [`step`](Self::step) then allocates nothing. Running, burn-in, thinning, storage and parallel
/// chains are written once on top of this trait in the [`Runner`](crate::run::runner::Runner).
///
/// Convention: after `init` and after every `step`, the sampler holds the current position
/// `θ_k`, the gradient estimate it computed **at** `θ_k` (which the next step uses; ZV
/// post-processing needs the pair), and the weight `θ_k` gets in estimators: the size of the
/// step that leaves it, `γ_{k+1}` (Durmus et al. 2016, eq. 6; equal weights for a constant step).
///
#[doc = include_str!("../../docs/guide/samplers.md")]
pub trait Sampler: Clone + Send + Sync + 'static {
    /// Binds the sampler to `model` and sets `θ₀ = theta0` (copied; the caller's slice is not
    /// changed). Validates the model against the settings (dimension, batch size against N),
    /// allocates, and computes what the first step needs (the gradient at θ₀).
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()>;

    /// One iteration `θ_k → θ_{k+1}`. Errors on a non-finite gradient or state, naming the
    /// iteration.
    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()>;

    /// The current position `θ_k`.
    fn position(&self) -> &[f64];

    /// The gradient estimate at the current position, if the sampler keeps one.
    fn gradient(&self) -> Option<&[f64]> {
        None
    }

    /// The weight of the current sample in the estimator `Σ w_k f(θ_k) / Σ w_k`. A weight of
    /// exactly 0 means the draw is not kept: the [`Runner`](crate::run::runner::Runner) does not record it.
    fn weight(&self) -> f64 {
        1.0
    }

    /// The step size in use at the current draw, recorded with it (see
    /// [`Samples::step_sizes`](crate::Samples::step_sizes)) and written as ArviZ's
    /// `sample_stats.step_size`: for Langevin samplers the time step `h_{k+1}` of the step that
    /// leaves the draw (√η for SGHMC), for MALA the (adapted) step, for HAMCMC `ε_t` of the
    /// block. Default `None` (a sampler without a step size).
    fn draw_step_size(&self) -> Option<f64> {
        None
    }

    /// Iterations done since `init`.
    fn iteration(&self) -> u64;

    /// Work done by this sampler's steps (and `init`), in datum evaluations; one-off setup
    /// excluded.
    fn cost(&self) -> Cost;

    /// One-off setup cost shared by every clone (e.g. a control variate's centring), which
    /// the [`Runner`](crate::run::runner::Runner) counts once per run. Default: nothing.
    fn setup_cost(&self) -> Cost {
        Cost::default()
    }

    /// Iterations at the start during which the sampler adapts itself (its draws are not exact
    /// then): the [`Runner`](crate::run::runner::Runner) refuses a burn-in shorter than this. Default 0.
    fn adaptation_steps(&self) -> u64 {
        0
    }
}

/// A sampler that discretises a diffusion with a time step, and whose Gaussian increments can be
/// supplied from outside: what coupled-chain methods need (Richardson–Romberg extrapolation
/// shares increments between a chain and one with half its step; multilevel methods likewise).
pub trait Discretisation: Sampler {
    /// The nominal time step `h_k` of the 1-based iteration k: `γ_k` for SGLD, `√η_k` for SGHMC.
    fn time_step(&self, k: u64) -> f64;

    /// Whether the time step is the same at every iteration. Default: `h_k` compared at
    /// k = 1, 2, 3, 10⁶ and 2⁶².
    fn is_constant_time_step(&self) -> bool {
        let h1 = self.time_step(1);
        [2, 3, 1_000_000, 1 << 62].iter().all(|&k| self.time_step(k) == h1)
    }

    /// One step of `fraction × h_k` (fraction in (0, 1]) driven by the standard-normal increment
    /// `z` (length d, not drawn by the sampler), then a fresh gradient estimate at the new
    /// position (drawing its minibatch from `rng`).
    ///
    /// The increment is scaled so that a step of size h driven by `(z₁ + z₂)/√2` has the law of
    /// two steps of size h/2 driven by `z₁`, `z₂`: they share one Brownian path (for a sampler
    /// whose increments are not one normal per coordinate, by
    /// [`combine_increments`](Self::combine_increments)).
    fn step_fraction<M, R>(&mut self, model: &M, k: u64, fraction: f64, z: &[f64], rng: &mut R) -> Result<()>
    where
        M: Model + ?Sized,
        R: Rng + ?Sized;

    /// The number of standard normals in a step's increment `z`, for a model of dimension
    /// `dim`. Default `dim` (one per coordinate); UBU takes two per coordinate.
    fn increment_len(&self, dim: usize) -> usize {
        dim
    }

    /// Writes into `coarse` the increment of one step of time step `fraction × h_k` that follows
    /// the Brownian path of two steps of half that time step driven by `z1` then `z2` (each
    /// [`increment_len`](Self::increment_len) normals): the coarse increment coupled methods
    /// (Richardson–Romberg, multilevel, the step-bias companion) give the coarser path. It must
    /// be standard normal when `z1`, `z2` are. Default `(z₁ + z₂)/√2`, entry by entry.
    fn combine_increments(&self, k: u64, fraction: f64, z1: &[f64], z2: &[f64], coarse: &mut [f64]) {
        let _ = (k, fraction);
        let r2 = std::f64::consts::FRAC_1_SQRT_2;
        for ((c, a), b) in coarse.iter_mut().zip(z1).zip(z2) {
            *c = (a + b) * r2;
        }
    }
}

/// A [`Discretisation`] whose gradient estimate subsamples the data, so that a coupled method
/// can choose the minibatch of each step: multilevel SGLD runs a coarse path on the fine path's
/// minibatches (or a subset of them).
///
/// Implemented by [`Langevin`](crate::Langevin) with any [`SubsampledEstimator`](crate::SubsampledEstimator)
/// ([`Minibatch`](crate::Minibatch), [`ControlVariate`](crate::ControlVariate),
/// [`Taylor`](crate::Taylor)).
pub trait SubsampledDiscretisation: Discretisation {
    /// The minibatch size n.
    fn batch_size(&self) -> usize;

    /// Draws one minibatch (`out.len()` = n indices) by the estimator's own law: with or without
    /// replacement, as it was built.
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]);

    /// Binds to `model` and restarts at `theta0` (iteration 0, kernel state reset) without
    /// computing a gradient: the next [`step_on`](Self::step_on) computes it on its own
    /// minibatch. Allocates only when the dimension grows.
    fn restart<M: Model + ?Sized>(&mut self, model: &M, theta0: &[f64]) -> Result<()>;

    /// One step of `fraction × h_k` driven by `z`, with the gradient estimate at the current
    /// position evaluated on the index multiset `idx` (scale `N/|idx|`).
    ///
    /// Errors: [`Error::NonFiniteGradient`](crate::Error::NonFiniteGradient) /
    /// [`Error::NonFiniteState`](crate::Error::NonFiniteState) with the iteration;
    /// [`Error::InvalidBatchSize`](crate::Error::InvalidBatchSize) for an empty `idx` or an index
    /// `≥ N`; invalid fraction, wrong lengths, not bound.
    fn step_on<M: Model + ?Sized>(&mut self, model: &M, k: u64, fraction: f64, z: &[f64], idx: &[usize]) -> Result<()>;
}

/// Checks a step fraction.
pub(crate) fn check_fraction(fraction: f64) -> Result<()> {
    if fraction > 0.0 && fraction <= 1.0 {
        Ok(())
    } else {
        Err(crate::error::Error::invalid("fraction", fraction, "must be in (0, 1]"))
    }
}
