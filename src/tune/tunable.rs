//! The [`Tunable`] trait — what [`tune`](crate::tune::tune) needs of a sampler — and its one
//! impl for the Langevin samplers: every `Langevin<K, E>` whose kernel states its tuning facts
//! ([`TunableKernel`], in the kernel's own file). HAMCMC's impl is in `tune/hamcmc.rs`.

use super::auto::choose_estimator;
use super::centre::{preconditioned_lambda_max, settle};
use super::curvature::Curvature;
use crate::cost::Cost;
use crate::error::Result;
use crate::gradient::GradientEstimator;
use crate::models::model::Model;
use crate::numeric::rng::stream;
use crate::samplers::{CentreRule, GradientNoise, Langevin, Sampler, TunableKernel, ULA_SD_BIAS_SLOPE, Whitening};
use std::sync::Arc;

/// A sampler whose constant step size [`tune`](crate::tune::tune) can choose.
pub trait Tunable: Sampler {
    /// The same sampler (settings, estimator) with the constant step size `step`.
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) for a non-positive step.
    fn with_step_size(&self, step: f64) -> Result<Self>;

    /// The sampler's curvature-derived step at the mode (see the [module docs](crate::tune)), adding
    /// what it spends to `cost`. For a whitened sampler, `curv` is the curvature seen in the
    /// whitened coordinates (of `Tᵀ ∇²U T`).
    fn centre_step<M: Model + ?Sized>(&self, model: &M, mode: &[f64], curv: &Curvature, cost: &mut Cost)
    -> Result<f64>;

    /// The same sampler running in the whitened coordinates of `whitening` (see [`Whitening`]),
    /// or `None` if this sampler cannot be whitened (it has a preconditioner of its own).
    /// Default: `None`.
    fn whitened(&self, whitening: Option<Arc<Whitening>>) -> Option<Self> {
        let _ = whitening;
        None
    }

    /// The whitening the sampler runs in, if any. Default: `None`.
    fn current_whitening(&self) -> Option<&Arc<Whitening>> {
        None
    }

    /// Where the mode search may start when none is given: the centre of a control-variate
    /// estimator (found by a mode search already). Default `None`.
    fn start_hint(&self) -> Option<&[f64]> {
        None
    }

    /// The same sampler with its gradient estimator chosen at the mode (seeded by `seed`), where
    /// the estimator is one for the tuner to choose ([`Auto`](crate::Auto)), and why in words,
    /// adding what the choice spent to `cost`; `None` (the default) otherwise. `whitening` is the
    /// coordinates the noise is measured in.
    fn estimator_chosen<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        whitening: &Whitening,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<Option<(Self, String)>> {
        let _ = (model, mode, whitening, seed, cost);
        Ok(None)
    }

    /// The exponent γ of the iterations per effective draw, `τ ∝ h^(−γ)` as the step h goes to
    /// 0, when theory fixes it; `None` (the default): [`tune`](crate::tune::tune) fits γ to its pilots.
    ///
    /// A discretisation of *overdamped* Langevin dynamics with time step h covers time h per
    /// iteration, so `τ·h` tends to the dynamics' own autocorrelation time: γ = 1 (SGLD with any
    /// estimator, pSGLD; SGHMC at fixed friction α, which is overdamped as η → 0, with time η/α
    /// per iteration). SGNHT and HAMCMC keep the fit (see their implementations). For the
    /// overdamped schemes the fit is flatter than the truth: the pilots' ESS estimates at their
    /// smallest steps (a few effective draws per chain) run low, and the fit carries that to the
    /// small steps of long runs (on the validation posteriors it predicted 1.5–1.9× the ESS that
    /// the 500 000-iteration SGLD and pSGLD runs on the logistic and Poisson regressions
    /// measured; with γ = 1, 0.65–1.08× over the 24 runs of SGLD, SGLD-CV, SGHMC and pSGLD at
    /// that length, median 0.98, the low end on the safe side).
    fn mixing_exponent(&self) -> Option<f64> {
        None
    }

    /// The same sampler with its injected noise corrected by its estimator's gradient noise (see
    /// [`GradientNoise`]), measured with [`GradientNoise::estimate`] at `points` Laplace draws of
    /// `whitening` (seeded by `seed`), adding its cost to `cost`; `None` if the sampler takes no
    /// such correction (the default) or its estimator's noise cannot be measured that way.
    fn noise_corrected<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        points: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        let _ = (model, whitening, points, seed, cost);
        Ok(None)
    }

    /// The same sampler with its injected noise corrected by its estimator's gradient noise
    /// measured at `states` (θ, one per row: where the chains go, e.g. a pilot's draws) from
    /// `pairs` pairs of estimates (see [`GradientNoise::estimate_at`]), seeded by `seed`, adding
    /// its cost to `cost`; `None` where [`noise_corrected`](Self::noise_corrected) is (the
    /// default).
    fn noise_corrected_at<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        states: ndarray::ArrayView2<'_, f64>,
        pairs: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        let _ = (model, whitening, states, pairs, seed, cost);
        Ok(None)
    }

    /// The largest step at which the sampler's gradient-noise correction is complete in every
    /// direction (see [`GradientNoise`]), if it has one; [`tune`](crate::tune::tune) searches no step above it.
    /// Default: `None`.
    fn step_limit(&self) -> Option<f64> {
        None
    }

    /// The least first-order slope in the step h of the posterior sds' relative bias that
    /// [`tune`](crate::tune::tune) assumes for a noise-corrected sampler whose candidates stop at its correction's
    /// limit (where the pilots' steps are too small to resolve it): that of the sampler's
    /// exact-gradient scheme on a whitened Gaussian. Default [`ULA_SD_BIAS_SLOPE`] (SGLD's ULA,
    /// and SGHMC, whose tuned step is on the same scale).
    fn exact_gradient_bias_slope(&self) -> f64 {
        ULA_SD_BIAS_SLOPE
    }

    /// The same sampler with the settings that depend on the model's scale fitted to `model`
    /// once the whitening is chosen, and what changed in words; `None` (the default) if nothing
    /// does. [`precondition`](crate::tune::precondition) (and so [`tune`](crate::tune::tune) and [`tune_rr`](crate::tune_rr)) calls it after
    /// choosing the whitening, and the change is stated in the preconditioning text. pSGLD raises its damping λ to `1/N` on whitened coordinates (see
    /// [`PSGLD_WHITENED_DAMPING`](crate::tune::PSGLD_WHITENED_DAMPING)).
    ///
    /// Errors: those of the sampler's constructor.
    fn fitted_to_scale<M: Model + ?Sized>(&self, model: &M) -> Result<Option<(Self, String)>> {
        let _ = model;
        Ok(None)
    }

    /// Writes into `out[i]` the relative sd bias that the sampler's gradient-noise correction
    /// itself leaves at the step `steps[i]` where it is approximate, which [`tune`](crate::tune::tune) adds to the
    /// bias it assumes below the correction's limit (see
    /// [`exact_gradient_bias_slope`](Self::exact_gradient_bias_slope)); a slice at once, so
    /// that what the residual depends on is computed once. Default 0 (SGLD's, SGHMC's and
    /// SGNHT's corrections are exact up to their limits).
    fn correction_residuals(&self, steps: &[f64], out: &mut [f64]) {
        let _ = steps;
        out.fill(0.0);
    }
}

/// What [`Tunable::noise_corrected`] returns: the corrected sampler and the measured noise, or
/// `None` if the sampler takes no correction.
pub type NoiseCorrected<S> = Option<(S, Arc<GradientNoise>)>;

/// Fewest Laplace draws [`tune`](crate::tune::tune) measures the gradient noise at (see
/// [`TuneSettings::correct_gradient_noise`](crate::tune::TuneSettings::correct_gradient_noise)).
pub const GRADIENT_NOISE_POINTS_MIN: usize = 10_000;
/// Most Laplace draws [`tune`](crate::tune::tune) measures the gradient noise at.
pub const GRADIENT_NOISE_POINTS_MAX: usize = 20_000;

/// Where [`langevin_noise_corrected`] measures the gradient noise: at this many Laplace draws,
/// or at the rows of the states (θ) from this many pairs of estimates.
#[derive(Clone, Copy)]
enum NoiseAt<'a> {
    Laplace(usize),
    States(ndarray::ArrayView2<'a, f64>, usize),
}

/// The [`Tunable::noise_corrected`] of a [`Langevin`] sampler: `None` where the kernel takes no
/// correction ([`TunableKernel::takes_noise_correction`]) or the estimator has no noise to
/// correct by; else the sampler, told the data size, with the measured noise.
fn langevin_noise_corrected<M, K, E>(
    s: &Langevin<K, E>,
    model: &M,
    whitening: &Whitening,
    at: NoiseAt<'_>,
    seed: u64,
    cost: &mut Cost,
) -> Result<NoiseCorrected<Langevin<K, E>>>
where
    M: Model + ?Sized,
    K: TunableKernel,
    E: GradientEstimator,
{
    if !s.kernel().takes_noise_correction() {
        return Ok(None);
    }
    let mut s = s.clone();
    s.kernel_mut().tell_data_size(model.n_data());
    // An exact gradient has no noise to correct by.
    if !s.estimator().independent_draws() || s.estimator().is_exact() {
        return Ok(None);
    }
    let (noise, c) = match at {
        NoiseAt::Laplace(points) => {
            GradientNoise::estimate(model, s.estimator(), whitening, points, &mut stream(seed, &[0x6e6f_6973]))?
        }
        NoiseAt::States(states, pairs) => GradientNoise::estimate_at(
            model,
            s.estimator(),
            whitening,
            states,
            pairs,
            &mut stream(seed, &[0x6e6f_6973, 1]),
        )?,
    };
    *cost += c;
    let noise = Arc::new(noise);
    Ok(Some((s.with_gradient_noise(Some(noise.clone())), noise)))
}

/// The one [`Tunable`] impl of the Langevin samplers (SGLD, SGHMC, SGNHT, pSGLD and any kernel
/// of the user's that states its [`TunableKernel`] facts): whitening, the estimator's choice and
/// the gradient-noise correction are the driver's; the step, centre rule, mixing exponent, step
/// limit and noise policy are the kernel's.
impl<K: TunableKernel, E: GradientEstimator> Tunable for Langevin<K, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Ok(Langevin::with_kernel(self.kernel().at_constant_step(step)?, self.estimator().clone())
            .with_whitening(self.whitening().cloned())
            .with_gradient_noise(self.gradient_noise().cloned()))
    }

    /// The kernel's [`CentreRule`]: in closed form from λ_max, or measured
    /// ([`CentreRule::SettledMetric`]).
    fn centre_step<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        curv: &Curvature,
        cost: &mut Cost,
    ) -> Result<f64> {
        let rule = self.kernel().centre_rule();
        match rule.step(curv.lambda_max) {
            Some(h) => Ok(h),
            None => match rule {
                CentreRule::SettledMetric { damping } => settled_metric_centre(self, model, mode, curv, damping, cost),
                _ => Ok(1.0 / curv.lambda_max),
            },
        }
    }

    fn whitened(&self, whitening: Option<Arc<Whitening>>) -> Option<Self> {
        Some(self.clone().with_whitening(whitening))
    }

    fn current_whitening(&self) -> Option<&Arc<Whitening>> {
        self.whitening()
    }

    fn start_hint(&self) -> Option<&[f64]> {
        GradientEstimator::centre(self.estimator())
    }

    fn estimator_chosen<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        whitening: &Whitening,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<Option<(Self, String)>> {
        if !self.estimator().is_unchosen() {
            return Ok(None);
        }
        let (choice, why) = choose_estimator(model, mode, whitening, seed, cost)?;
        Ok(self.estimator().with_choice(choice).map(|e| (self.clone().with_estimator(e), why)))
    }

    fn mixing_exponent(&self) -> Option<f64> {
        self.kernel().mixing_exponent()
    }

    fn noise_corrected<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        points: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        langevin_noise_corrected(self, model, whitening, NoiseAt::Laplace(points), seed, cost)
    }

    fn noise_corrected_at<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        states: ndarray::ArrayView2<'_, f64>,
        pairs: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        langevin_noise_corrected(self, model, whitening, NoiseAt::States(states, pairs), seed, cost)
    }

    fn step_limit(&self) -> Option<f64> {
        self.gradient_noise().and_then(|g| self.kernel().step_limit(g))
    }

    fn exact_gradient_bias_slope(&self) -> f64 {
        self.kernel().exact_gradient_bias_slope(self.gradient_noise().map(|g| &**g))
    }

    fn fitted_to_scale<M: Model + ?Sized>(&self, model: &M) -> Result<Option<(Self, String)>> {
        let fitted = self.kernel().fitted_to_scale(model.n_data(), self.whitening().is_some())?;
        Ok(fitted.map(|(k, why)| {
            let s = Langevin::with_kernel(k, self.estimator().clone())
                .with_whitening(self.whitening().cloned())
                .with_gradient_noise(self.gradient_noise().cloned());
            (s, why)
        }))
    }

    fn correction_residuals(&self, steps: &[f64], out: &mut [f64]) {
        self.kernel().correction_residuals(self.gradient_noise().map(|g| &**g), steps, out);
    }
}

/// The centre step of [`CentreRule::SettledMetric`](crate::CentreRule::SettledMetric):
/// `1/λ_max(G^{1/2} ∇²U G^{1/2})`, G the kernel's diagonal metric after [`SETTLE_STEPS`] steps at
/// the mode with a step `1e-12/λ_max`, capped on whitened coordinates at `1/(damping + 1/N)` (see
/// the rule).
fn settled_metric_centre<M, K, E>(
    sampler: &Langevin<K, E>,
    model: &M,
    mode: &[f64],
    curv: &Curvature,
    damping: f64,
    cost: &mut Cost,
) -> Result<f64>
where
    M: Model + ?Sized,
    K: TunableKernel,
    E: GradientEstimator,
{
    let mut s = sampler.with_step_size(1e-12 / curv.lambda_max)?;
    settle(&mut s, model, mode, 0x0070_7367_6c64, cost)?;
    let cap = match sampler.whitening() {
        Some(_) => 1.0 / (damping + 1.0 / model.n_data().max(1) as f64),
        None => f64::INFINITY,
    };
    let d = mode.len();
    let mut metric = vec![1.0; d];
    if !s.kernel().gradient_noise_metric(&mut metric) {
        metric.fill(1.0);
    }
    let g: Vec<f64> = metric.iter().map(|g| g.min(cap).sqrt()).collect();
    let scale = |x: &[f64], out: &mut [f64]| out.iter_mut().zip(x).zip(&g).for_each(|((o, x), g)| *o = g * x);
    // Whitened: the operator G^{1/2} Tᵀ ∇²U T G^{1/2} (the metric lives on φ).
    let w = sampler.whitening().cloned();
    let mut tmp = vec![0.0; d];
    let l = preconditioned_lambda_max(
        model,
        mode,
        2,
        cost,
        |x, out| match &w {
            None => scale(x, out),
            Some(w) => {
                scale(x, &mut tmp);
                w.to_theta(&tmp, out);
                out.iter_mut().zip(w.centre()).for_each(|(o, c)| *o -= c);
            }
        },
        |x, out| {
            match &w {
                None => scale(x, out),
                Some(w) => {
                    w.gradient_to_phi(x, out);
                    let t = out.to_vec();
                    scale(&t, out);
                }
            }
            Ok(())
        },
    )?;
    Ok(1.0 / l)
}
