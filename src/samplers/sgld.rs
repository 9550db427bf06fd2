//! Stochastic gradient Langevin dynamics, and full-gradient Langevin (ULA) as its special case.

use super::{Discretisation, LangevinState, Sampler, fraction_ok};
use crate::cost::Cost;
use crate::error::{Result, check_len};
use crate::gradient::{FullGradient, GradientEstimator, Minibatch};
use crate::model::Model;
use crate::rng::fill_standard_normal;
use crate::schedule::StepSize;
use rand::Rng;

/// Settings of [`Sgld`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SgldSettings {
    /// The step-size schedule `γ_k` (default `Constant(1e-4)`).
    pub step_size: StepSize,
}

impl SgldSettings {
    /// Settings with a constant step size γ.
    pub fn constant(gamma: f64) -> Self {
        SgldSettings { step_size: StepSize::Constant(gamma) }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.step_size.validate("step_size")
    }
}

/// Stochastic gradient Langevin dynamics (SGLD).
///
/// Update (with `Z ~ N(0, I_d)` i.i.d. and `∇Ũ` from the gradient estimator `E`):
///
/// `θ_{k+1} = θ_k − γ_{k+1} ∇Ũ(θ_k) + √(2γ_{k+1}) Z_{k+1}`.
///
/// This is the γ convention; Baker et al. (2019) write `θ − (h/2)∇Ũ + N(0, h)`, the same with
/// `h = 2γ`. Samples are weighted by `γ_{k+1}` (equal weights for a constant step). With the
/// exact gradient ([`FullGradient`]) it is the unadjusted Langevin algorithm, [`Lmc`]; with a
/// control-variate estimator it is SGLD-CV.
///
/// Needs from the model: the gradients only.
///
/// Reference: M. Welling and Y. W. Teh, *Bayesian learning via stochastic gradient Langevin
/// dynamics*, ICML 2011.
#[derive(Debug, Clone)]
pub struct Sgld<E = Minibatch> {
    settings: SgldSettings,
    estimator: E,
    state: LangevinState,
}

/// Full-gradient Langevin Monte Carlo, the unadjusted Langevin algorithm (ULA):
/// `θ_{k+1} = θ_k − γ ∇U(θ_k) + √(2γ) Z`. Build it with [`Sgld::lmc`].
pub type Lmc = Sgld<FullGradient>;

impl<E: GradientEstimator> Sgld<E> {
    /// SGLD with the given settings and gradient estimator; errors on invalid settings.
    pub fn new(settings: SgldSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Sgld { settings, estimator, state: LangevinState::default() })
    }

    /// The settings.
    pub fn settings(&self) -> &SgldSettings {
        &self.settings
    }

    /// The gradient estimator (with its cost counter).
    pub fn estimator(&self) -> &E {
        &self.estimator
    }

    /// One step with an explicit step size `h` and standard-normal increment `z` (length d),
    /// bypassing the schedule and the sampler's own noise:
    /// `θ ← θ − h ∇Ũ(θ) + √(2h) z`, then a fresh gradient estimate at the new θ.
    ///
    /// This is the building block of coupled-chain methods (Richardson–Romberg, multilevel),
    /// which share Gaussian increments between chains.
    pub fn step_with_noise<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        h: f64,
        z: &[f64],
        rng: &mut R,
    ) -> Result<()> {
        self.state.check_ready(model)?;
        check_len("noise increment z", self.state.theta.len(), z.len())?;
        crate::error::check_positive("h", h)?;
        Self::advance(&mut self.state.theta, &self.state.grad, h, z);
        self.finish_step(model, rng)
    }

    #[inline]
    fn advance(theta: &mut [f64], grad: &[f64], h: f64, z: &[f64]) {
        let s = (2.0 * h).sqrt();
        for ((t, g), z) in theta.iter_mut().zip(grad).zip(z) {
            *t += s * z - h * g;
        }
    }

    #[inline]
    fn finish_step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.state.k += 1;
        self.state.check_state()?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)
    }
}

impl Sgld<FullGradient> {
    /// Full-gradient Langevin (ULA) with the given settings.
    pub fn lmc(settings: SgldSettings) -> Result<Self> {
        Self::new(settings, FullGradient::new())
    }
}

impl<E: GradientEstimator> Sampler for Sgld<E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        self.state.reset(model, theta0, model.dim())?;
        self.estimator.prepare(model)?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)?;
        self.state.ready = true;
        Ok(())
    }

    #[inline]
    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.state.check_ready(model)?;
        let h = self.settings.step_size.at(self.state.k + 1);
        fill_standard_normal(rng, &mut self.state.noise);
        Self::advance(&mut self.state.theta, &self.state.grad, h, &self.state.noise);
        self.finish_step(model, rng)
    }

    langevin_accessors!(|s| s.settings.step_size.at(s.state.k + 1));
}

impl<E: GradientEstimator> Discretisation for Sgld<E> {
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k)
    }

    /// `θ ← θ − fγ_k ∇Ũ(θ) + √(2fγ_k) z`.
    fn step_fraction<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        k: u64,
        fraction: f64,
        z: &[f64],
        rng: &mut R,
    ) -> Result<()> {
        fraction_ok(fraction)?;
        self.step_with_noise(model, fraction * self.settings.step_size.at(k), z, rng)
    }
}
