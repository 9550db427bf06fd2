//! The [`Sampler`] trait and the samplers.
//!
//! | sampler | update | gradient | reference |
//! |---|---|---|---|
//! | [`Sgld`] | `θ ← θ − γ∇Ũ(θ) + √(2γ) Z` | any [`GradientEstimator`](crate::GradientEstimator) | Welling & Teh (2011) |
//! | [`Lmc`] (ULA) | SGLD with the exact gradient | [`FullGradient`](crate::FullGradient) | Roberts & Tweedie (1996) |
//! | [`Sghmc`] | `v ← (1−α)v − η∇Ũ(θ) + √(2(α−β̂)η) Z`, `θ ← θ + v` | any | Chen, Fox & Guestrin (2014) |
//! | [`Mala`] | Langevin proposal + Metropolis–Hastings test | exact | Roberts & Tweedie (1996) |
//! | [`Hamcmc`] | `θ_t = θ_{t−M} − ε H_t ∇Ũ(θ_{t−M}) + √(2ε) S_t Z` (L-BFGS `H_t`) | any | Şimşekli et al. (2016) |
//! | [`Psgld`] | RMSprop-diagonal preconditioned SGLD | any | Li et al. (2016) |
//! | [`PreconditionedSgld`] | `θ ← θ − γ G∇Ũ(θ) + √(2γ) L Z`, `G = LLᵀ` constant | any | Patterson & Teh (2013) |

/// The [`Sampler`] accessors shared by the samplers built on [`LangevinState`] and a gradient
/// estimator: position and gradient from the state, cost from the estimator, and the weight
/// given as an expression of the sampler `s`.
macro_rules! langevin_accessors {
    (|$s:ident| $weight:expr) => {
        fn position(&self) -> &[f64] {
            &self.state.theta
        }

        fn gradient(&self) -> Option<&[f64]> {
            Some(&self.state.grad)
        }

        fn weight(&self) -> f64 {
            let $s = self;
            $weight
        }

        fn iteration(&self) -> u64 {
            self.state.k
        }

        fn cost(&self) -> Cost {
            self.estimator.cost()
        }

        fn setup_cost(&self) -> Cost {
            self.estimator.setup_cost()
        }
    };
}

mod hamcmc;
mod mala;
mod precond;
mod psgld;
mod sghmc;
mod sgld;

pub use hamcmc::{Hamcmc, HamcmcSettings};
pub use mala::{Mala, MalaSettings};
pub use precond::PreconditionedSgld;
pub use psgld::{Psgld, PsgldSettings};
pub use sghmc::{Sghmc, SghmcSettings};
pub use sgld::{Lmc, Sgld, SgldSettings};

pub(crate) use check_fraction as fraction_ok;

use crate::cost::Cost;
use crate::error::Result;
use crate::model::Model;
use rand::Rng;

/// A Markov chain that moves a state θ ∈ ℝᵈ one iteration at a time.
///
/// A sampler value is built from validated settings (so an invalid sampler cannot exist), then
/// bound to a model and a starting point by [`init`](Self::init), which allocates every buffer;
/// [`step`](Self::step) then allocates nothing. Running, burn-in, thinning, storage and parallel
/// chains are written once on top of this trait in [`run`](crate::run()).
///
/// Convention: after `init` and after every `step`, the sampler holds the current position
/// `θ_k`, the gradient estimate it computed **at** `θ_k` (which the next step uses; ZV
/// post-processing needs the pair), and the weight `θ_k` gets in estimators: the size of the
/// step that leaves it, `γ_{k+1}` (Durmus et al. 2016, eq. 6; equal weights for a constant step).
pub trait Sampler: Clone + Send + Sync {
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

    /// The weight of the current sample in the estimator `Σ w_k f(θ_k) / Σ w_k`.
    fn weight(&self) -> f64 {
        1.0
    }

    /// Iterations done since `init`.
    fn iteration(&self) -> u64;

    /// Work done by this sampler's steps (and `init`), in datum evaluations; one-off setup
    /// excluded.
    fn cost(&self) -> Cost;

    /// One-off setup cost shared by every clone (e.g. a control variate's centring), which
    /// [`run`](crate::run()) counts once per run. Default: nothing.
    fn setup_cost(&self) -> Cost {
        Cost::default()
    }
}

/// A sampler that discretises a diffusion with a time step, and whose Gaussian increments can be
/// supplied from outside: what coupled-chain methods need (Richardson–Romberg extrapolation
/// shares increments between a chain and one with half its step; multilevel methods likewise).
pub trait Discretisation: Sampler {
    /// The nominal time step `h_k` of the 1-based iteration k: `γ_k` for SGLD, `√η_k` for SGHMC.
    fn time_step(&self, k: u64) -> f64;

    /// One step of `fraction × h_k` (fraction in (0, 1]) driven by the standard-normal increment
    /// `z` (length d, not drawn by the sampler), then a fresh gradient estimate at the new
    /// position (drawing its minibatch from `rng`).
    ///
    /// The increment is scaled so that a step of size h driven by `(z₁ + z₂)/√2` has the law of
    /// two steps of size h/2 driven by `z₁`, `z₂`: they share one Brownian path.
    fn step_fraction<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        k: u64,
        fraction: f64,
        z: &[f64],
        rng: &mut R,
    ) -> Result<()>;
}

/// Checks a step fraction.
pub(crate) fn check_fraction(fraction: f64) -> Result<()> {
    if fraction > 0.0 && fraction <= 1.0 {
        Ok(())
    } else {
        Err(crate::Error::invalid("fraction", fraction, "must be in (0, 1]"))
    }
}

/// Shared state of the Langevin-type samplers: position, gradient at it, a noise buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct LangevinState {
    pub theta: Vec<f64>,
    pub grad: Vec<f64>,
    pub noise: Vec<f64>,
    pub k: u64,
    pub ready: bool,
}

impl LangevinState {
    /// Allocates for the model, copies θ₀ and checks it.
    pub fn reset<M: Model + ?Sized>(&mut self, model: &M, theta0: &[f64], noise_dim: usize) -> Result<()> {
        crate::model::check_model(model)?;
        let d = model.dim();
        crate::error::check_len("initial state theta0", d, theta0.len())?;
        if !crate::error::all_finite(theta0) {
            return Err(crate::Error::NonFiniteState { iteration: 0 });
        }
        self.theta.clear();
        self.theta.extend_from_slice(theta0);
        self.grad.resize(d, 0.0);
        self.noise.resize(noise_dim, 0.0);
        self.k = 0;
        self.ready = false;
        Ok(())
    }

    /// Errors unless `init` succeeded and `model` has the dimension it was bound with.
    #[inline]
    pub fn check_ready<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        if !self.ready {
            return Err(crate::Error::NotInitialised);
        }
        crate::error::check_len("model dimension", self.theta.len(), model.dim())
    }

    /// Evaluates a fresh gradient estimate at θ into `grad`, and checks it.
    #[inline]
    pub fn refresh_gradient<E, M, R>(&mut self, est: &mut E, model: &M, rng: &mut R) -> Result<()>
    where
        E: crate::GradientEstimator,
        M: Model + ?Sized,
        R: Rng + ?Sized,
    {
        est.estimate(model, &self.theta, rng, &mut self.grad);
        if crate::error::all_finite(&self.grad) {
            Ok(())
        } else {
            Err(crate::Error::NonFiniteGradient { iteration: self.k })
        }
    }

    /// Errors if θ is not finite.
    #[inline]
    pub fn check_state(&self) -> Result<()> {
        if crate::error::all_finite(&self.theta) {
            Ok(())
        } else {
            Err(crate::Error::NonFiniteState { iteration: self.k })
        }
    }
}
