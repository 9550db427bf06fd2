//! Stochastic gradient Hamiltonian Monte Carlo, in its practical (learning-rate, friction) form.

use super::{CentreRule, GradientNoise, Langevin, LangevinKernel, TunableKernel};
use crate::error::{Error, Result, check_non_negative};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::numeric::schedule::StepSize;
use serde::{Deserialize, Serialize};

/// Settings of [`Sghmc`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SghmcSettings {
    /// The learning-rate schedule `η_k` (`η = h²` for a time step h with unit mass), called
    /// `step_size` like every sampler's step parameter. Default `Constant(1e-6)`.
    pub step_size: StepSize,
    /// The friction `α ∈ (0, 1]` (`α = hC` for friction C). Default 0.1.
    pub friction: f64,
    /// The estimate `β̂ ∈ [0, α)` of the gradient-noise term subtracted from the injected noise.
    /// Default 0 (the usual choice).
    pub noise_estimate: f64,
}

impl Default for SghmcSettings {
    fn default() -> Self {
        SghmcSettings { step_size: StepSize::Constant(1e-6), friction: 0.1, noise_estimate: 0.0 }
    }
}

impl SghmcSettings {
    /// Settings with a constant learning rate η, friction α and no noise estimate (β̂ = 0).
    pub fn constant(eta: f64, friction: f64) -> Self {
        SghmcSettings { step_size: StepSize::Constant(eta), friction, noise_estimate: 0.0 }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.step_size.validate("step_size")?;
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

/// The SGHMC update with momentum `v`: a step of time step `f·h_k` (`h_k = √η_k`) uses learning
/// rate `f²η_k`, friction `fα` and noise estimate `fβ̂` (friction C = α/h and the noise level
/// stay those of the settings):
/// `v ← (1 − fα) v − f²η ∇Ũ(θ) + √(2(fα − fβ̂) f²η) z`, `θ ← θ + v`. The kernel of [`Sghmc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SghmcKernel {
    settings: SghmcSettings,
    v: Vec<f64>,
}

impl LangevinKernel for SghmcKernel {
    /// `h_k = √η_k`.
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k).sqrt()
    }

    /// The momentum starts at 0.
    fn bind(&mut self, dim: usize, _n_data: usize) -> Result<()> {
        self.v.clear();
        self.v.resize(dim, 0.0);
        Ok(())
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        let eta = fraction * fraction * self.settings.step_size.at(k);
        let (alpha, beta) = (fraction * self.settings.friction, fraction * self.settings.noise_estimate);
        let s = (2.0 * (alpha - beta) * eta).sqrt();
        let keep = 1.0 - alpha;
        for (((t, v), g), z) in theta.iter_mut().zip(self.v.iter_mut()).zip(grad).zip(z) {
            *v = keep * *v - eta * g + s * z;
            *t += *v;
        }
    }

    /// `f η_k / (2(α − β̂))`: the momentum's noise has covariance `2(fα − fβ̂) f²η`, the gradient
    /// noise `f⁴η² V`. Keep β̂ = 0 with a measured V (it would be subtracted twice).
    #[inline]
    fn gradient_noise_weight(&self, k: u64, fraction: f64) -> Option<f64> {
        let s = &self.settings;
        Some(fraction * s.step_size.at(k) / (2.0 * (s.friction - s.noise_estimate)))
    }
}

impl TunableKernel for SghmcKernel {
    fn at_constant_step(&self, step: f64) -> Result<Self> {
        let settings = SghmcSettings { step_size: StepSize::Constant(step), ..self.settings };
        settings.validate()?;
        Ok(SghmcKernel { settings, v: Vec::new() })
    }

    /// `η = 1/λ_max` (the leapfrog limit is `η λ_max < 4`).
    fn centre_rule(&self) -> CentreRule {
        CentreRule::InverseLambdaMax
    }

    /// 1: at fixed friction α the friction per unit time `α/√η` grows as η → 0, and the dynamics
    /// is overdamped with time η/α per iteration.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }

    /// Only with β̂ = 0 (a given noise estimate and a measured one would both be subtracted).
    fn takes_noise_correction(&self) -> bool {
        self.settings.noise_estimate == 0.0
    }

    /// `2(α − β̂)/λ_max(V)`: the weight `η/(2(α − β̂))` times the noise's largest eigenvalue
    /// reaches 1.
    fn step_limit(&self, noise: &GradientNoise) -> Option<f64> {
        let s = &self.settings;
        Some(2.0 * (s.friction - s.noise_estimate) * noise.full_correction_limit())
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
/// It is the [`Langevin`] driver with the [`SghmcKernel`]: Richardson–Romberg gives SGRRHMC, and
/// multilevel SGLD can couple it.
///
/// Needs from the model: the gradients only. Any gradient estimator plugs in (SGHMC-CV with a
/// control-variate estimator).
///
/// With a measured gradient noise V ([`with_gradient_noise`](Langevin::with_gradient_noise),
/// what [`tune`](crate::tune::tune) sets up by default when β̂ = 0) the momentum's noise is
/// `√(2(α − β̂)η) S Z` with `S Sᵀ = I − η V/(2(α − β̂))`: the matrix form of the paper's
/// `B̂ = ηV/2` (see [`GradientNoise`](crate::GradientNoise)).
///
/// Reference: T. Chen, E. B. Fox and C. Guestrin, *Stochastic gradient Hamiltonian Monte
/// Carlo*, ICML 2014 (eq. 15).
pub type Sghmc<E = Minibatch> = Langevin<SghmcKernel, E>;

impl<E: GradientEstimator> Langevin<SghmcKernel, E> {
    /// SGHMC with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LogisticRegression::synthetic(10_000, 5, 10.0, 1)?;
    /// // Learning rate η = 1e-6 (time step √η), friction α = 0.1.
    /// let sghmc = Sghmc::new(SghmcSettings::constant(1e-6, 0.1), Minibatch::new(100))?;
    /// let out = Runner::new(&model, &sghmc).start(&[0.0; 5]).settings(RunSettings { n_iter: 3_000, burn_in: 1_000, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: SghmcSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Langevin::with_kernel(SghmcKernel { settings, v: Vec::new() }, estimator))
    }

    /// The settings.
    pub fn settings(&self) -> &SghmcSettings {
        &self.kernel().settings
    }

    /// The current momentum `v_k`.
    pub fn momentum(&self) -> &[f64] {
        &self.kernel().v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two SGHMC steps (the momentum carried between them) against the update by hand, and the
    /// scaling of a half time step (learning rate f²η, friction fα).
    #[test]
    fn the_kernel_makes_the_update_of_its_docs() {
        let (eta, alpha) = (0.01, 0.1);
        let mut k = SghmcKernel { settings: SghmcSettings::constant(eta, alpha), v: Vec::new() };
        k.bind(1, 100).unwrap();
        let s = (2.0 * alpha * eta).sqrt();
        let mut theta = [0.5];
        k.advance(&mut theta, &[2.0], 0, 1.0, &[0.3]);
        let v1 = -eta * 2.0 + s * 0.3;
        assert!((k.v[0] - v1).abs() < 1e-15 && (theta[0] - (0.5 + v1)).abs() < 1e-15);
        k.advance(&mut theta, &[-1.0], 1, 1.0, &[-0.7]);
        let v2 = (1.0 - alpha) * v1 + eta - s * 0.7;
        assert!((k.v[0] - v2).abs() < 1e-15 && (theta[0] - (0.5 + v1 + v2)).abs() < 1e-15);
        // Half the time step h = √η: learning rate η/4, friction α/2.
        k.bind(1, 100).unwrap();
        let mut half = [0.5];
        k.advance(&mut half, &[2.0], 0, 0.5, &[0.3]);
        let vh = -0.25 * eta * 2.0 + (2.0 * 0.5 * alpha * 0.25 * eta).sqrt() * 0.3;
        assert!((half[0] - (0.5 + vh)).abs() < 1e-15);
        assert!((k.time_step(0) - 0.1).abs() < 1e-15);
        assert!((k.gradient_noise_weight(0, 1.0).unwrap() - eta / (2.0 * alpha)).abs() < 1e-15);
    }
}
