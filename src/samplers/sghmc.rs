//! Stochastic gradient Hamiltonian Monte Carlo, in its practical (learning-rate, friction) form.

use super::{Discretisation, LangevinState, Sampler, fraction_ok};
use crate::cost::Cost;
use crate::error::{Error, Result, check_len, check_non_negative};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::model::Model;
use crate::rng::fill_standard_normal;
use crate::schedule::StepSize;
use rand::Rng;

/// Settings of [`Sghmc`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SghmcSettings {
    /// The learning-rate schedule `η_k` (`η = h²` for a step h with unit mass).
    /// Default `Constant(1e-6)`.
    pub learning_rate: StepSize,
    /// The friction `α ∈ (0, 1]` (`α = hC` for friction C). Default 0.1.
    pub friction: f64,
    /// The estimate `β̂ ∈ [0, α)` of the gradient-noise term subtracted from the injected noise.
    /// Default 0 (the usual choice).
    pub noise_estimate: f64,
}

impl Default for SghmcSettings {
    fn default() -> Self {
        SghmcSettings { learning_rate: StepSize::Constant(1e-6), friction: 0.1, noise_estimate: 0.0 }
    }
}

impl SghmcSettings {
    /// Settings with a constant learning rate η, friction α and no noise estimate (β̂ = 0).
    pub fn constant(eta: f64, friction: f64) -> Self {
        SghmcSettings { learning_rate: StepSize::Constant(eta), friction, noise_estimate: 0.0 }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.learning_rate.validate("learning_rate")?;
        if !(self.friction.is_finite() && self.friction > 0.0 && self.friction <= 1.0) {
            return Err(Error::invalid("friction", self.friction, "must be in (0, 1]"));
        }
        check_non_negative("noise_estimate", self.noise_estimate)?;
        if self.noise_estimate >= self.friction {
            return Err(Error::invalid(
                "noise_estimate",
                self.noise_estimate,
                "must be below the friction (the injected noise variance 2(α − β̂)η must be > 0)",
            ));
        }
        Ok(())
    }
}

/// Stochastic gradient Hamiltonian Monte Carlo (SGHMC), practical form.
///
/// Update, with learning rate `η_{k+1}`, friction `α`, noise estimate `β̂`, `Z ~ N(0, I_d)`:
///
/// `v_{k+1} = (1 − α) v_k − η_{k+1} ∇Ũ(θ_k) + √(2(α − β̂)η_{k+1}) Z_{k+1}`,
/// `θ_{k+1} = θ_k + v_{k+1}`.
///
/// Equivalently step `h = √η`, friction `C = α/h`, identity mass. The momentum starts at 0
/// and is **kept** between iterations (never resampled), as in the paper's practical algorithm.
/// Samples are weighted by the time step `√η_{k+1}` (equal weights for a constant rate). The
/// stationary law approximates π for small η.
///
/// Needs from the model: the gradients only. Any gradient estimator plugs in (SGHMC-CV with a
/// control-variate estimator).
///
/// Reference: T. Chen, E. B. Fox and C. Guestrin, *Stochastic gradient Hamiltonian Monte
/// Carlo*, ICML 2014 (eq. 15).
#[derive(Debug, Clone)]
pub struct Sghmc<E = Minibatch> {
    settings: SghmcSettings,
    estimator: E,
    state: LangevinState,
    v: Vec<f64>,
}

impl<E: GradientEstimator> Sghmc<E> {
    /// SGHMC with the given settings and gradient estimator; errors on invalid settings.
    pub fn new(settings: SghmcSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Sghmc { settings, estimator, state: LangevinState::default(), v: Vec::new() })
    }

    /// The settings.
    pub fn settings(&self) -> &SghmcSettings {
        &self.settings
    }

    /// The gradient estimator (with its cost counter).
    pub fn estimator(&self) -> &E {
        &self.estimator
    }

    /// The current momentum `v_k`.
    pub fn momentum(&self) -> &[f64] {
        &self.v
    }

    /// One step with explicit learning rate `eta`, friction `alpha` and standard-normal
    /// increment `z` (length d), bypassing the schedule and the sampler's own noise; the noise
    /// estimate β̂ of the settings is used. For coupled-chain methods.
    pub fn step_with_noise<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        eta: f64,
        alpha: f64,
        z: &[f64],
        rng: &mut R,
    ) -> Result<()> {
        self.state.check_ready(model)?;
        check_len("noise increment z", self.state.theta.len(), z.len())?;
        crate::error::check_positive("eta", eta)?;
        if !(alpha > self.settings.noise_estimate && alpha <= 1.0) {
            return Err(Error::invalid("alpha", alpha, "must be in (noise_estimate, 1]"));
        }
        Self::advance(
            &mut self.state.theta,
            &mut self.v,
            &self.state.grad,
            eta,
            alpha,
            self.settings.noise_estimate,
            z,
        );
        self.finish_step(model, rng)
    }

    #[inline]
    fn advance(theta: &mut [f64], v: &mut [f64], grad: &[f64], eta: f64, alpha: f64, beta: f64, z: &[f64]) {
        let s = (2.0 * (alpha - beta) * eta).sqrt();
        let keep = 1.0 - alpha;
        for (((t, v), g), z) in theta.iter_mut().zip(v.iter_mut()).zip(grad).zip(z) {
            *v = keep * *v - eta * g + s * z;
            *t += *v;
        }
    }

    #[inline]
    fn finish_step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.state.k += 1;
        self.state.check_state()?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)
    }
}

impl<E: GradientEstimator> Sampler for Sghmc<E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        self.state.reset(model, theta0, model.dim())?;
        self.v.clear();
        self.v.resize(model.dim(), 0.0);
        self.estimator.prepare(model)?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)?;
        self.state.ready = true;
        Ok(())
    }

    #[inline]
    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.state.check_ready(model)?;
        let eta = self.settings.learning_rate.at(self.state.k + 1);
        fill_standard_normal(rng, &mut self.state.noise);
        let (alpha, beta) = (self.settings.friction, self.settings.noise_estimate);
        Self::advance(&mut self.state.theta, &mut self.v, &self.state.grad, eta, alpha, beta, &self.state.noise);
        self.finish_step(model, rng)
    }

    langevin_accessors!(|s| s.settings.learning_rate.at(s.state.k + 1).sqrt());
}

impl<E: GradientEstimator> Discretisation for Sghmc<E> {
    /// `h_k = √η_k`.
    fn time_step(&self, k: u64) -> f64 {
        self.settings.learning_rate.at(k).sqrt()
    }

    /// A step of time step `f·h_k`: learning rate `f²η_k`, friction `fα`, noise estimate `fβ̂`
    /// (friction C = α/h and the noise level stay those of the settings).
    fn step_fraction<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        k: u64,
        fraction: f64,
        z: &[f64],
        rng: &mut R,
    ) -> Result<()> {
        fraction_ok(fraction)?;
        self.state.check_ready(model)?;
        check_len("noise increment z", self.state.theta.len(), z.len())?;
        let eta = fraction * fraction * self.settings.learning_rate.at(k);
        let (alpha, beta) = (fraction * self.settings.friction, fraction * self.settings.noise_estimate);
        Self::advance(&mut self.state.theta, &mut self.v, &self.state.grad, eta, alpha, beta, z);
        self.finish_step(model, rng)
    }
}
