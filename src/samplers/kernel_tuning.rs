//! What the tuner needs to know of a Langevin kernel, stated by the kernel itself: the
//! [`TunableKernel`] trait beside [`LangevinKernel`], and the [`CentreRule`] a kernel names.
//!
//! [`tune`](crate::tune::tune) has one `Tunable` impl for every `Langevin<K, E>` with
//! `K: TunableKernel`; a kernel's facts (how to rebuild at a step, its centre rule, mixing
//! exponent, step limit and noise-correction policy) live in the kernel's own file.

use super::{GradientNoise, LangevinKernel};
use crate::error::Result;

/// The first-order slope in h of whitened ULA's sd bias on a Gaussian (`1/√(1 − h/2) − 1 ≈
/// h/4`): the least bias [`tune`](crate::tune::tune) assumes for a noise-corrected SGLD or SGHMC
/// whose grid stops at the correction's limit (where the pilots' steps are too small to resolve
/// it).
pub const ULA_SD_BIAS_SLOPE: f64 = 0.25;

/// How the tuner's centre step (the middle of its pilot grid) follows from the curvature at the
/// mode, as a kernel states it ([`TunableKernel::centre_rule`]).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum CentreRule {
    /// `1/λ_max`: SGLD (half the Euler scheme's stability limit), SGHMC (`η = 1/λ_max`, the
    /// leapfrog limit being `η λ_max < 4`).
    InverseLambdaMax,
    /// `1/√λ_max`: a kernel whose position moves by `h p` with `p` updated by `−h ∇Ũ`, so that the
    /// gradient's effective step is `h²` (SGNHT; leapfrog limit `h √λ_max < 2`).
    InverseSqrtLambdaMax,
    /// `1/λ_max(G^{1/2} ∇²U G^{1/2})`, G the kernel's diagonal metric
    /// ([`LangevinKernel::gradient_noise_metric`]; 1 for a kernel without one) after 300 steps at
    /// the mode with a step `1e-12/λ_max` (so the chain stays put while the metric adapts to the
    /// gradient estimates there), capped on whitened coordinates at `1/(damping + 1/N)`: pSGLD,
    /// with its damping λ. The tuner measures it (it runs the sampler and a power iteration on
    /// the preconditioned Hessian).
    SettledMetric {
        /// The metric's damping λ (`G = 1/(λ + √V)`).
        damping: f64,
    },
}

impl CentreRule {
    /// The centre step of a closed-form rule from the curvature's largest eigenvalue; `None` for
    /// a rule the tuner measures ([`CentreRule::SettledMetric`]).
    pub fn step(&self, lambda_max: f64) -> Option<f64> {
        match self {
            CentreRule::InverseLambdaMax => Some(1.0 / lambda_max),
            CentreRule::InverseSqrtLambdaMax => Some(1.0 / lambda_max.sqrt()),
            CentreRule::SettledMetric { .. } => None,
        }
    }
}

/// A [`LangevinKernel`] whose constant step [`tune`](crate::tune::tune) can choose: the kernel's
/// own tuning facts. Every `Langevin<K, E>` with `K: TunableKernel` is
/// [`Tunable`](crate::tune::Tunable) (one impl, in `tune/`), so a new Langevin sampler is tunable
/// by implementing this trait in its own file.
///
/// Two methods are required (how to rebuild at a step, the centre rule); the rest have defaults
/// that suit a kernel with no gradient-noise correction and a mixing exponent the tuner fits.
///
/// ```
/// use sgmcmc::{CentreRule, Langevin, LangevinKernel, LinearGaussian, Minibatch, Result, StepSize, TunableKernel};
/// use sgmcmc::tune::{TuneSettings, tune};
///
/// /// SGLD with a fixed diagonal preconditioner D: `θ ← θ − h D ∇Ũ + √(2h D) ⊙ z`.
/// #[derive(Debug, Clone)]
/// struct DiagonalSgld { h: f64, diag: Vec<f64> }
///
/// impl LangevinKernel for DiagonalSgld {
///     fn time_step(&self, _k: u64) -> f64 { self.h }
///     fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
///         let h = fraction * self.time_step(k);
///         for (((t, g), z), d) in theta.iter_mut().zip(grad).zip(z).zip(&self.diag) {
///             *t += (2.0 * h * d).sqrt() * z - h * d * g;
///         }
///     }
/// }
///
/// impl TunableKernel for DiagonalSgld {
///     fn at_constant_step(&self, step: f64) -> Result<Self> {
///         StepSize::Constant(step).validate("step_size")?;
///         Ok(DiagonalSgld { h: step, ..self.clone() })
///     }
///     fn centre_rule(&self) -> CentreRule {
///         CentreRule::InverseLambdaMax
///     }
/// }
///
/// let model = LinearGaussian::synthetic(2_000, 2, 1.0, 10.0, 7)?;
/// let sampler = Langevin::with_kernel(DiagonalSgld { h: 1e-4, diag: vec![1.0, 1.0] }, Minibatch::new(100));
/// let settings = TuneSettings { pilot_iterations: 1_000, pilot_burn_in: 200, ..Default::default() };
/// let tuned = tune(&model, &sampler, &[0.0, 0.0], &settings)?;
/// assert!(tuned.step_size > 0.0);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub trait TunableKernel: LangevinKernel {
    /// The same kernel (its other settings kept, its per-chain state fresh) at the constant step
    /// `step`.
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) for a non-positive
    /// step (the kernel's settings validation).
    fn at_constant_step(&self, step: f64) -> Result<Self>;

    /// How the tuner's centre step follows from the curvature at the mode.
    fn centre_rule(&self) -> CentreRule;

    /// The exponent γ of the iterations per effective draw, `τ ∝ h^(−γ)` as the step h goes to
    /// 0, when theory fixes it; `None` (the default): the tuner fits γ to its pilots. See
    /// [`Tunable::mixing_exponent`](crate::tune::Tunable::mixing_exponent).
    fn mixing_exponent(&self) -> Option<f64> {
        None
    }

    /// Whether the tuner may correct the injected noise by the estimator's measured gradient
    /// noise. Default: whether the kernel has a
    /// [`gradient_noise_weight`](LangevinKernel::gradient_noise_weight).
    fn takes_noise_correction(&self) -> bool {
        self.gradient_noise_weight(1, 1.0).is_some()
    }

    /// Tells the kernel the data size before the gradient noise is measured or a step limit
    /// computed (pSGLD scales its metric by it). Default: nothing.
    fn tell_data_size(&mut self, n_data: usize) {
        let _ = n_data;
    }

    /// The largest step at which the correction by `noise` is complete in every direction, if
    /// the kernel has one; the tuner searches no step above it. Default: `None`.
    fn step_limit(&self, noise: &GradientNoise) -> Option<f64> {
        let _ = noise;
        None
    }

    /// Writes into `out[i]` the relative sd bias that the correction by `noise` itself leaves at
    /// the step `steps[i]` where it is approximate (see
    /// [`Tunable::correction_residuals`](crate::tune::Tunable::correction_residuals)). Default 0.
    fn correction_residuals(&self, noise: Option<&GradientNoise>, steps: &[f64], out: &mut [f64]) {
        let _ = (noise, steps);
        out.fill(0.0);
    }

    /// The least first-order slope in the step of the sds' relative bias that the tuner assumes
    /// for a noise-corrected kernel whose candidates stop at its correction's limit (see
    /// [`Tunable::exact_gradient_bias_slope`](crate::tune::Tunable::exact_gradient_bias_slope)).
    /// Default [`ULA_SD_BIAS_SLOPE`].
    fn exact_gradient_bias_slope(&self, noise: Option<&GradientNoise>) -> f64 {
        let _ = noise;
        ULA_SD_BIAS_SLOPE
    }

    /// The same kernel with the settings that depend on the model's scale fitted to a model of
    /// `n_data` data, run on whitened coordinates if `whitened`, and what changed in words;
    /// `None` (the default) if nothing does.
    ///
    /// Errors: those of the kernel's settings validation.
    fn fitted_to_scale(&self, n_data: usize, whitened: bool) -> Result<Option<(Self, String)>> {
        let _ = (n_data, whitened);
        Ok(None)
    }
}
