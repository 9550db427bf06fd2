//! Stochastic gradient Langevin dynamics, and full-gradient Langevin (ULA) as its special case.

use super::{CentreRule, GradientNoise, Langevin, LangevinKernel, TunableKernel};
use crate::error::Result;
use crate::gradient::auto::Auto;
use crate::gradient::{FullGradient, GradientEstimator, Minibatch};
use crate::numeric::schedule::StepSize;
use serde::{Deserialize, Serialize};

/// Settings of [`Sgld`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
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

/// The SGLD update `θ ← θ − h ∇Ũ(θ) + √(2h) z` with `h = fraction × γ_k`: the kernel of
/// [`Sgld`] and [`Lmc`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SgldKernel {
    settings: SgldSettings,
}

impl LangevinKernel for SgldKernel {
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k)
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        sgld_update(theta, grad, z, fraction * self.settings.step_size.at(k));
    }

    /// `f h_k / 2`: the step's noise `√(2h) z` has covariance 2h, the gradient noise `h² V`.
    #[inline]
    fn gradient_noise_weight(&self, k: u64, fraction: f64) -> Option<f64> {
        Some(0.5 * fraction * self.settings.step_size.at(k))
    }
}

impl TunableKernel for SgldKernel {
    fn at_constant_step(&self, step: f64) -> Result<Self> {
        let settings = SgldSettings { step_size: StepSize::Constant(step) };
        settings.validate()?;
        Ok(SgldKernel { settings })
    }

    /// `1/λ_max`: half the Euler scheme's stability limit.
    fn centre_rule(&self) -> CentreRule {
        CentreRule::InverseLambdaMax
    }

    /// 1: the Euler scheme of overdamped Langevin dynamics, time h per iteration.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }

    /// `2/λ_max(V)`: the weight `h/2` times the noise's largest eigenvalue reaches 1.
    fn step_limit(&self, noise: &GradientNoise) -> Option<f64> {
        Some(2.0 * noise.full_correction_limit())
    }
}

/// The SGLD update `θ ← θ − h ∇Ũ + √(2h) z` on a slice (the kernel's, and each worker's slice in
/// distributed matrix factorisation).
#[inline]
pub(crate) fn sgld_update(theta: &mut [f64], grad: &[f64], z: &[f64], h: f64) {
    let s = (2.0 * h).sqrt();
    for ((t, g), z) in theta.iter_mut().zip(grad).zip(z) {
        *t += s * z - h * g;
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
/// It is the [`Langevin`] driver with the [`SgldKernel`]: a [`Discretisation`](crate::Discretisation)
/// (Richardson–Romberg gives SGRRLD) and, with a subsampling estimator, usable by multilevel SGLD.
///
/// With a measured gradient noise V ([`with_gradient_noise`](Langevin::with_gradient_noise),
/// what [`tune`](crate::tune::tune) sets up by default) the noise is `√(2γ) S Z` with
/// `S Sᵀ = I − (γ/2) V` (clipped at 0 per eigen-direction): the step's total noise, minibatch
/// included, is that of ULA (see [`GradientNoise`](crate::GradientNoise)).
///
/// Needs from the model: the gradients only.
///
/// Reference: M. Welling and Y. W. Teh, *Bayesian learning via stochastic gradient Langevin
/// dynamics*, ICML 2011; the noise correction: S. J. Vollmer, K. C. Zygalakis and Y. W. Teh,
/// *Exploration of the (non-)asymptotic bias and variance of stochastic gradient Langevin
/// dynamics*, JMLR 17 (2016).
pub type Sgld<E = Minibatch> = Langevin<SgldKernel, E>;

/// Full-gradient Langevin Monte Carlo, the unadjusted Langevin algorithm (ULA):
/// `θ_{k+1} = θ_k − γ ∇U(θ_k) + √(2γ) Z`. Build it with [`Sgld::lmc`].
pub type Lmc = Sgld<FullGradient>;

impl<E: GradientEstimator> Langevin<SgldKernel, E> {
    /// SGLD with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LogisticRegression::synthetic(10_000, 5, 10.0, 1)?;
    /// let sgld = Sgld::new(SgldSettings::constant(1e-5), Minibatch::new(100))?;
    /// let settings = RunSettings { n_iter: 3_000, burn_in: 1_000, n_chains: 2, ..Default::default() };
    /// let out = Runner::new(&model, &sgld).start(&[0.0; 5]).settings(settings).run()?;
    /// assert_eq!(out.estimate.mean()?.len(), 5);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: SgldSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Langevin::with_kernel(SgldKernel { settings }, estimator))
    }

    /// The settings.
    pub fn settings(&self) -> &SgldSettings {
        &self.kernel().settings
    }
}

impl Langevin<SgldKernel, FullGradient> {
    /// Full-gradient Langevin (ULA) with the given settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 1)?;
    /// let lmc = Sgld::lmc(SgldSettings::constant(1e-4))?; // every step a full pass
    /// let out = Runner::new(&model, &lmc).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 2_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert_eq!(out.cost.datum_gradients, 500 * 2_001);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn lmc(settings: SgldSettings) -> Result<Self> {
        Self::new(settings, FullGradient::new())
    }
}

impl Langevin<SgldKernel, Auto> {
    /// SGLD whose gradient estimator — a plain minibatch or control variates at the mode, and the
    /// minibatch size — the tuner chooses from what it measures at the mode (see
    /// [`Auto`]): the default path with nothing set by hand.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LogisticRegression::synthetic(20_000, 4, 10.0, 1)?;
    /// let fit = Sample::new(&model, Sgld::auto()).seed(1).run()?;
    /// println!("{fit}"); // the choice is in fit.tuned.preconditioning
    /// assert!(fit.tuned.preconditioning.contains("gradient estimator chosen"));
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn auto() -> Self {
        Langevin::with_kernel(SgldKernel { settings: SgldSettings::default() }, Auto::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One SGLD step against the update written out by hand, at a full and at a half time step.
    #[test]
    fn the_kernel_makes_the_update_of_its_docs() {
        let mut k = SgldKernel { settings: SgldSettings::constant(0.01) };
        let (grad, z) = ([3.0, 0.5], [0.4, -1.0]);
        let mut theta = [1.0, -2.0];
        k.advance(&mut theta, &grad, 0, 1.0, &z);
        let s = 0.02_f64.sqrt();
        assert!((theta[0] - (1.0 - 0.01 * 3.0 + s * 0.4)).abs() < 1e-15);
        assert!((theta[1] - (-2.0 - 0.01 * 0.5 - s)).abs() < 1e-15);
        let mut half = [1.0, -2.0];
        k.advance(&mut half, &grad, 0, 0.5, &z);
        assert!((half[0] - (1.0 - 0.005 * 3.0 + 0.01_f64.sqrt() * 0.4)).abs() < 1e-15);
        assert_eq!(k.time_step(7), 0.01);
        assert_eq!(k.gradient_noise_weight(0, 0.5), Some(0.0025));
    }
}
