//! Automatic step sizes: a curvature rule from the mode, refined by kernel Stein discrepancy on
//! short pilot runs.
//!
//! [`tune`] takes a model and a sampler (whatever step it was built with) and returns the sampler
//! with a chosen constant step, plus a record of everything tried:
//!
//! 1. **Mode**: the posterior mode θ̂ by [`find_mode`] from the starting point
//!    (or the starting point itself, if [`TuneSettings::find_mode`] is off).
//! 2. **Curvature** ([`curvature`]): `λ_max(∇²U(θ̂))` and `λ_min` from Hessian-vector products
//!    — the model's own ([`Model::hvp_prior`], [`Model::hvp_data_sum`]) or central differences
//!    of full gradients: the exact eigenvalues of the dense Hessian up to
//!    [`DENSE_CURVATURE_MAX_DIM`], Lanczos with full reorthogonalisation above. Then the
//!    whitening of [`TuneSettings::precondition`] and the curvature the whitened sampler sees.
//!    With a whitening, SGLD, SGHMC, SGNHT and pSGLD (any estimator with
//!    [independent draws](GradientEstimator::independent_draws): minibatch, control variates,
//!    Taylor) also get their injected noise corrected by their estimator's noise
//!    ([`TuneSettings::correct_gradient_noise`], on by default; see [`GradientNoise`]): its
//!    covariance V̂ is measured in the whitened coordinates at `clamp(200 d, 10 000, 20 000)`
//!    Laplace draws, and each step injects `√(2h)·S z`, `S Sᵀ = I − (h/2) V̂` (SGHMC:
//!    `I − η V̂/(2α)`; SGNHT: `I − h V̂/(2A)`), so that with the minibatch noise the step carries
//!    the noise of its exact-gradient scheme. Up to the limit `h = 2/λ_max(V̂)` (SGHMC:
//!    `η = 2α/λ_max(V̂)`; SGNHT: `h = 2A/λ_max(V̂)`) this
//!    removes plain SGLD's dominant error, the variance inflation `≈ h V/2` of the minibatch noise
//!    (about `h N/(2n)` in whitened units), and leaves ULA's discretisation bias, at the limit
//!    about `n/(2N)` of a variance; where the limit is below half the curvature step the candidates of step 4 stop at it.
//!    pSGLD's step `θ ← θ − h G ∇Ũ + √(2hG) z` under its RMSprop metric G gets the minibatch
//!    noise as `h² G V G`: its increment is shaped by `S Sᵀ ≈ I − (h/2) G^{1/2} V̂ G^{1/2}`, a
//!    cubic series evaluated every step with the current G (see [`Psgld`](crate::Psgld)), up to
//!    the limit where `(h/2) λ_max(Ĝ^{1/2} V̂ Ĝ^{1/2}) = `[`PSGLD_CORRECTION_TARGET`] (Ĝ the
//!    metric RMSprop settles at), where the series leaves at most 0.5 % of a variance.
//! 3. **Centre**: a sampler-specific step from the curvature ([`Tunable::centre_step`]): for
//!    SGLD (any estimator, so SGLD-CV too) and SGHMC `1/λ_max` (half the Euler stability limit
//!    `2/λ_max`; for SGHMC's `η = h²` the leapfrog limit is `4/λ_max`); for pSGLD
//!    `1/λ_max(G^{1/2}∇²U G^{1/2})` with its RMSprop preconditioner G as it settles at the mode;
//!    for HAMCMC `1/λ_max(H ∇²U)` with the L-BFGS matrix H its warm-up builds at the mode.
//! 4. **Selection**: pilot runs (4 chains each) from the mode at `centre × factor` for each factor of
//!    [`TuneSettings::factors`] (default `2⁻⁶ … 2¹`), scored by the kernel Stein discrepancy
//!    of their draws with **exact** full-data scores, as Gorham & Mackey (NeurIPS 2015, ICML
//!    2017) chose SGLD step sizes; the kernel is their IMQ plus linear Stein moment terms
//!    ([`TuneSettings::moment_weight`]) so that errors in the posterior variances count. A pilot
//!    that diverges or runs away is recorded as a failure. The grid is extended by factors of 2
//!    until two scored candidates lie on each side of the smallest KSD (at most
//!    [`TuneSettings::max_extensions`] times, never above a step that failed).
//! 5. **The step for the planned run**: the minimiser of a prediction of the planned run's
//!    ([`TuneSettings::planned_run`]) *worst* error in posterior sds — the largest error of a
//!    posterior mean or sd over the coordinates, what the validation example reports — built per
//!    coordinate from what each pilot measured: its Monte Carlo error, from the pilot chains'
//!    effective sample sizes (iterations per effective draw `τ_j(h) = κ_j h^{−γ}`, γ = 1 for the
//!    overdamped Langevin schemes — SGLD, pSGLD, SGHMC at fixed friction — whose
//!    `τ·h` tends to a constant as h → 0 ([`Tunable::mixing_exponent`]), else fitted),
//!    scaled to the planned run's length; and its bias, from the Stein moment errors of the mean
//!    and the sd (exact Stein identities, in sds of the Laplace approximation) at the steps
//!    above the smallest KSD, as the first-order slope in `h` of a weighted fit with a free
//!    second-order term, counted where it stands out of the pilots' own Monte Carlo error
//!    (Bonferroni over the 2d slopes); then checked against the pilots directly: where the
//!    errors of an unbroken run of at least two pilots up to the largest scored step all stand
//!    out of their noise with one sign, β is at least the smallest of their slopes `|e|/h` and,
//!    where their slopes confirm a growth at least linear (then `β ≤ e/h` at every step), at most
//!    the smallest of their upper bounds `(|e| + z·se)/h` (without the floor a bias that swamps the pilots from
//!    the smallest steps on — uncorrected pSGLD at N/n = 200 — was fitted away and the chosen step's
//!    variances were 5.7× the posterior's). The prediction is `max_j β_j² h² + K h^{−γ}/N`, N the planned kept
//!    draws × chains and `K = E[max of 2d squared normals] · max_j κ_j` (the worst of 2d reported
//!    errors). When the gradient-noise correction's limit capped the candidates (where it is below
//!    half the curvature step: the minibatch noise dominates), the same minimiser up to the limit
//!    with `β² ≥` [`Tunable::exact_gradient_bias_slope`]`²` ([`ULA_SD_BIAS_SLOPE`] for SGLD and
//!    SGHMC, `Ĝ_max/4` for pSGLD): below the limit the bias left is the exact-gradient
//!    scheme's, at least whitened ULA's on a Gaussian (sd factor `≈ 1 + h/4`), which pilots at
//!    such small steps rarely resolve. No chosen step exceeds the limit.
//!    When no pilot showed bias otherwise (every larger step failed, as for SGNHT under strong uncorrected
//!    minibatch noise), the KSD curve decides as before: the minimiser of `D²(h) ≈ r·a/h + b·h² +
//!    c` fitted to every candidate's discrepancy (least squares weighted by each candidate's KSD
//!    standard error, floored at 10 %), with the Monte Carlo term scaled by `r` = the pilots' kept
//!    draws over the planned run's, clamped to the grid; with no convex fit, the smallest-KSD
//!    candidate scaled by `r^(1/3)` when the planned run is longer than the pilots. Every
//!    gradient spent — mode, curvature, centre, pilots and scoring — is counted in
//!    [`Tuned::cost`].
//!
//! [`precondition`] stops before the selection: it returns the mode, the curvature before and
//! after whitening and the sampler in whitened coordinates, for methods that choose their step
//! from the curvature alone (multilevel SGLD: [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned)).
//!
//! Why not the KSD alone: the KSD of a pilot is an average over coordinates at the pilot's
//! length, while a user reads the worst coordinate of a run of another length. On the validation
//! example's calendar-year regression the KSD fit chose a third of the best step for SGLD and
//! pSGLD at 5 000 × 4 draws (errors 1.64× and 1.66× the best): the slowest coordinate (log σ)
//! needed more draws than the average said. The per-coordinate prediction follows the worst one.
//!
#![doc = include_str!("../../docs/guide/tuning.md")]

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::GradientEstimator;
use crate::gradient::optim::{ModeSettings, find_mode};
use crate::models::hessian::{Hessian, dense_hessian, hessian_columns};
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::{fill_standard_normal, stream};
use crate::numeric::schedule::StepSize;
use crate::run::runner::Runner;
use crate::run::{RunSettings, Storage};
use crate::samplers::{
    GradientNoise, Hamcmc, HamcmcSettings, Langevin, PsgldKernel, PsgldSettings, Sampler, SghmcKernel, SghmcSettings,
    SgldKernel, SgldSettings, SgnhtKernel, SgnhtSettings, Whitening,
};
use crate::trace::diagnostics::{KsdSettings, ksd_imq};
use ndarray::Array2;
use rayon::prelude::*;
use std::sync::Arc;

mod curvature;
pub use curvature::{Curvature, CurvatureSettings, DENSE_CURVATURE_MAX_DIM, curvature};
use curvature::{check_lambda_max, curvature_of_dense, lanczos, power_iteration};

/// A sampler whose constant step size [`tune`] can choose.
pub trait Tunable: Sampler {
    /// The same sampler (settings, estimator) with the constant step size `step`.
    ///
    /// Errors: [`Error::InvalidParameter`] for a non-positive step.
    fn with_step_size(&self, step: f64) -> Result<Self>;

    /// The sampler's curvature-derived step at the mode (see the [module docs](self)), adding
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

    /// The exponent γ of the iterations per effective draw, `τ ∝ h^(−γ)` as the step h goes to
    /// 0, when theory fixes it; `None` (the default): [`tune`] fits γ to its pilots.
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
    /// direction (see [`GradientNoise`]), if it has one; [`tune`] searches no step above it.
    /// Default: `None`.
    fn step_limit(&self) -> Option<f64> {
        None
    }

    /// The least first-order slope in the step h of the posterior sds' relative bias that
    /// [`tune`] assumes for a noise-corrected sampler whose candidates stop at its correction's
    /// limit (where the pilots' steps are too small to resolve it): that of the sampler's
    /// exact-gradient scheme on a whitened Gaussian. Default [`ULA_SD_BIAS_SLOPE`] (SGLD's ULA,
    /// and SGHMC, whose tuned step is on the same scale).
    fn exact_gradient_bias_slope(&self) -> f64 {
        ULA_SD_BIAS_SLOPE
    }

    /// The same sampler with the settings that depend on the model's scale fitted to `model`
    /// once the whitening is chosen, and what changed in words; `None` (the default) if nothing
    /// does. [`precondition`] (and so [`tune`] and [`tune_rr`](crate::tune_rr)) calls it after
    /// choosing the whitening, and the change is stated in the preconditioning text. pSGLD raises its damping λ to `1/N` on whitened coordinates (see
    /// [`PSGLD_WHITENED_DAMPING`]).
    ///
    /// Errors: those of the sampler's constructor.
    fn fitted_to_scale<M: Model + ?Sized>(&self, model: &M) -> Result<Option<(Self, String)>> {
        let _ = model;
        Ok(None)
    }

    /// Writes into `out[i]` the relative sd bias that the sampler's gradient-noise correction
    /// itself leaves at the step `steps[i]` where it is approximate, which [`tune`] adds to the
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

/// Where [`langevin_noise_corrected`] measures the gradient noise: at this many Laplace draws,
/// or at the rows of the states (θ) from this many pairs of estimates.
#[derive(Clone, Copy)]
enum NoiseAt<'a> {
    Laplace(usize),
    States(ndarray::ArrayView2<'a, f64>, usize),
}

/// The [`Tunable::noise_corrected`] of a [`Langevin`] sampler whose kernel takes the correction.
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
    K: crate::samplers::LangevinKernel,
    E: GradientEstimator,
{
    if !s.estimator().independent_draws() {
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
    Ok(Some((s.clone().with_gradient_noise(Some(noise.clone())), noise)))
}

/// The [`Tunable`] whitening methods of a [`Langevin`] sampler.
macro_rules! langevin_whitening {
    () => {
        fn whitened(&self, whitening: Option<Arc<Whitening>>) -> Option<Self> {
            Some(self.clone().with_whitening(whitening))
        }

        fn current_whitening(&self) -> Option<&Arc<Whitening>> {
            self.whitening()
        }
    };
}

/// [`Tunable::noise_corrected`] by [`langevin_noise_corrected`] as is (SGLD, SGNHT).
macro_rules! measured_noise_correction {
    () => {
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
    };
}

impl<E: GradientEstimator> Tunable for Langevin<SgldKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Ok(Self::new(SgldSettings { step_size: StepSize::Constant(step) }, self.estimator().clone())?
            .with_whitening(self.whitening().cloned())
            .with_gradient_noise(self.gradient_noise().cloned()))
    }

    langevin_whitening!();

    measured_noise_correction!();

    /// `2/λ_max(V)`: the weight `h/2` times the noise's largest eigenvalue reaches 1.
    fn step_limit(&self) -> Option<f64> {
        self.gradient_noise().map(|g| 2.0 * g.full_correction_limit())
    }

    /// `1/λ_max`: half the Euler scheme's stability limit.
    fn centre_step<M: Model + ?Sized>(&self, _: &M, _: &[f64], curv: &Curvature, _: &mut Cost) -> Result<f64> {
        Ok(1.0 / curv.lambda_max)
    }

    /// 1: the Euler scheme of overdamped Langevin dynamics, time h per iteration.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }
}

impl<E: GradientEstimator> Tunable for Langevin<SghmcKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Ok(Self::new(
            SghmcSettings { step_size: StepSize::Constant(step), ..*self.settings() },
            self.estimator().clone(),
        )?
        .with_whitening(self.whitening().cloned())
        .with_gradient_noise(self.gradient_noise().cloned()))
    }

    langevin_whitening!();

    /// Only with β̂ = 0 (a given noise estimate and a measured one would both be subtracted).
    fn noise_corrected<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        points: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        if self.settings().noise_estimate != 0.0 {
            return Ok(None);
        }
        langevin_noise_corrected(self, model, whitening, NoiseAt::Laplace(points), seed, cost)
    }

    /// As [`noise_corrected`](Self::noise_corrected), at the given states.
    fn noise_corrected_at<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        states: ndarray::ArrayView2<'_, f64>,
        pairs: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        if self.settings().noise_estimate != 0.0 {
            return Ok(None);
        }
        langevin_noise_corrected(self, model, whitening, NoiseAt::States(states, pairs), seed, cost)
    }

    /// `2(α − β̂)/λ_max(V)`: the weight `η/(2(α − β̂))` times the noise's largest eigenvalue
    /// reaches 1.
    fn step_limit(&self) -> Option<f64> {
        let s = self.settings();
        self.gradient_noise().map(|g| 2.0 * (s.friction - s.noise_estimate) * g.full_correction_limit())
    }

    /// `η = 1/λ_max` (the leapfrog limit is `η λ_max < 4`).
    fn centre_step<M: Model + ?Sized>(&self, _: &M, _: &[f64], curv: &Curvature, _: &mut Cost) -> Result<f64> {
        Ok(1.0 / curv.lambda_max)
    }

    /// 1: at fixed friction α the friction per unit time `α/√η` grows as η → 0, and the dynamics
    /// is overdamped with time η/α per iteration.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }
}

/// The first-order slope in h of whitened ULA's sd bias on a Gaussian (`1/√(1 − h/2) − 1 ≈
/// h/4`): the least bias [`tune`] assumes for a noise-corrected SGLD or SGHMC whose grid stops at
/// the correction's limit (where the pilots' steps are too small to resolve it).
pub const ULA_SD_BIAS_SLOPE: f64 = 0.25;

/// Fewest Laplace draws [`tune`] measures the gradient noise at (see
/// [`TuneSettings::correct_gradient_noise`]).
pub const GRADIENT_NOISE_POINTS_MIN: usize = 10_000;
/// Most Laplace draws [`tune`] measures the gradient noise at.
pub const GRADIENT_NOISE_POINTS_MAX: usize = 20_000;

/// Iterations of the nearly-still pilots that let pSGLD's and HAMCMC's preconditioners settle.
const SETTLE_STEPS: u64 = 300;

/// Runs `s` for [`SETTLE_STEPS`] steps from the mode (seeded by `seed`), adding its cost.
fn settle<M: Model + ?Sized, S: Sampler>(s: &mut S, model: &M, mode: &[f64], seed: u64, cost: &mut Cost) -> Result<()> {
    let mut rng = stream(seed, &[0]);
    s.init(model, mode, &mut rng)?;
    for _ in 0..SETTLE_STEPS {
        s.step(model, &mut rng)?;
    }
    *cost += s.cost();
    Ok(())
}

/// `λ_max(A ∇²U B)` for the preconditioned operator `v ↦ post(∇²U pre(v))`, to 1e-8, adding the
/// HVP cost.
fn preconditioned_lambda_max<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    stream_index: u64,
    cost: &mut Cost,
    mut pre: impl FnMut(&[f64], &mut [f64]),
    mut post: impl FnMut(&[f64], &mut [f64]) -> Result<()>,
) -> Result<f64> {
    let d = mode.len();
    let mut hess = Hessian::new(model, mode);
    let (mut a, mut b) = (vec![0.0; d], vec![0.0; d]);
    let settings = CurvatureSettings { tol: 1e-8, ..Default::default() };
    let (l, _) = power_iteration(d, &settings, stream_index, |v, out| {
        pre(v, &mut a);
        hess.apply(&a, &mut b)?;
        post(&b, out)
    })?;
    *cost += hess.cost;
    Ok(l)
}

impl<E: GradientEstimator> Tunable for Langevin<SgnhtKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Ok(Self::new(
            SgnhtSettings { step_size: StepSize::Constant(step), ..*self.settings() },
            self.estimator().clone(),
        )?
        .with_whitening(self.whitening().cloned())
        .with_gradient_noise(self.gradient_noise().cloned()))
    }

    langevin_whitening!();

    measured_noise_correction!();

    /// `2A/λ_max(V)`: the weight `h/(2A)` times the noise's largest eigenvalue reaches 1.
    fn step_limit(&self) -> Option<f64> {
        self.gradient_noise().map(|g| 2.0 * self.settings().diffusion * g.full_correction_limit())
    }

    /// `h = 1/√λ_max`: the position moves by `h p` with `p` updated by `−h ∇Ũ`, so the
    /// gradient's effective step is `h²`, as SGHMC's `η` (leapfrog limit `h √λ_max < 2`).
    fn centre_step<M: Model + ?Sized>(&self, _: &M, _: &[f64], curv: &Curvature, _: &mut Cost) -> Result<f64> {
        Ok(1.0 / curv.lambda_max.sqrt())
    }

    // `mixing_exponent`: the default, fitted. The thermostat keeps the dynamics underdamped
    // (friction ξ ≈ A per unit time) and the tuned steps lie near its stability limit, where the
    // pilots' τ·h grew 2–7× across the scored steps (Poisson regression); re-predicted for 26
    // validation runs, the fitted γ gave a median of 1.00× the measured ESS, γ = 1 0.85× (0.98×
    // and 0.62× at 500 000 × 4).
}

impl<E: GradientEstimator> Tunable for Langevin<PsgldKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Ok(Self::new(
            PsgldSettings { step_size: StepSize::Constant(step), ..*self.settings() },
            self.estimator().clone(),
        )?
        .with_whitening(self.whitening().cloned())
        .with_gradient_noise(self.gradient_noise().cloned())
        .with_n_data(self.n_data()))
    }

    langevin_whitening!();

    /// As SGLD's, under the RMSprop metric G (see [`Psgld`](crate::Psgld)).
    fn noise_corrected<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        points: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        let s = self.clone().with_n_data(model.n_data() as f64);
        langevin_noise_corrected(&s, model, whitening, NoiseAt::Laplace(points), seed, cost)
    }

    /// As [`noise_corrected`](Self::noise_corrected), at the given states.
    fn noise_corrected_at<M: Model + ?Sized>(
        &self,
        model: &M,
        whitening: &Whitening,
        states: ndarray::ArrayView2<'_, f64>,
        pairs: usize,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<NoiseCorrected<Self>> {
        let s = self.clone().with_n_data(model.n_data() as f64);
        langevin_noise_corrected(&s, model, whitening, NoiseAt::States(states, pairs), seed, cost)
    }

    /// On whitened coordinates, the damping λ raised to [`PSGLD_WHITENED_DAMPING`]` / N` if it
    /// is below: the RMS of the exact `ḡ = ∇U/N` there (the whitened posterior's score has
    /// variance about 1 per coordinate), so that G never exceeds the exact-gradient scheme's
    /// typical metric by more than a factor 2.
    fn fitted_to_scale<M: Model + ?Sized>(&self, model: &M) -> Result<Option<(Self, String)>> {
        let n = model.n_data().max(1) as f64;
        let floor = PSGLD_WHITENED_DAMPING / n;
        if self.whitening().is_none() || self.settings().damping >= floor {
            return Ok(None);
        }
        let s = Self::new(PsgldSettings { damping: floor, ..*self.settings() }, self.estimator().clone())?
            .with_whitening(self.whitening().cloned())
            .with_gradient_noise(self.gradient_noise().cloned())
            .with_n_data(n);
        let why = format!("pSGLD damping raised from {:.1e} to 1/N = {floor:.3e} (whitened)", self.settings().damping);
        Ok(Some((s, why)))
    }

    /// `2x/λ_max(Ĝ^{1/2} V Ĝ^{1/2})`, `x = `[`PSGLD_CORRECTION_TARGET`], with
    /// `Ĝ_i = 1/(λ + √(V_ii + 1)/N)`: G as RMSprop settles on whitened coordinates, where the
    /// squared gradient estimate averages the noise's variance `V_ii` plus about 1 (the
    /// posterior's).
    /// There the cubic series leaves at most 0.5 % of a variance uncorrected, with room for G's
    /// fluctuations below the clamp at [`METRIC_CORRECTION_MAX`](crate::METRIC_CORRECTION_MAX).
    ///
    /// `None` while N is unknown: `tune` tells it; a pSGLD given a noise by hand
    /// ([`Langevin::with_gradient_noise`](crate::Langevin::with_gradient_noise)) has no step
    /// limit (its correction is still clamped at `METRIC_CORRECTION_MAX` at every step). Until
    /// 2026-11-27 it took N = 1 there, a limit about N times too large.
    fn step_limit(&self) -> Option<f64> {
        let top = psgld_noise_top(self.gradient_noise()?, self.n_data(), self.settings().damping)?;
        Some(2.0 * PSGLD_CORRECTION_TARGET / top)
    }

    /// `r(x)/2`, `x = (h/2) λ_max(Ĝ^{1/2} V Ĝ^{1/2})`, with `r(x) = p(x)² − (1 − x)` the variance
    /// the cubic series `p` leaves along the top direction (0.5 % at x = 0.5, 9.8 % at x = 1).
    fn correction_residuals(&self, steps: &[f64], out: &mut [f64]) {
        let damping = self.settings().damping;
        let Some(top) = self.gradient_noise().and_then(|g| psgld_noise_top(g, self.n_data(), damping)) else {
            out.fill(0.0);
            return;
        };
        for (o, h) in out.iter_mut().zip(steps) {
            let x = 0.5 * h * top;
            let p = 1.0 - x / 2.0 - x * x / 8.0 - x * x * x / 16.0;
            *o = 0.5 * (p * p - (1.0 - x)).max(0.0);
        }
    }

    /// `Ĝ_max/4` (see [`step_limit`](Self::step_limit)): ULA's `h/4` under the metric, whose
    /// time step along coordinate i is `h G_i`; [`ULA_SD_BIAS_SLOPE`] without a gradient noise.
    fn exact_gradient_bias_slope(&self) -> f64 {
        match self.gradient_noise() {
            Some(g) => psgld_metric(g, self.n_data(), self.settings().damping)
                .map_or(ULA_SD_BIAS_SLOPE, |m| ULA_SD_BIAS_SLOPE * m.into_iter().fold(0.0, f64::max)),
            None => ULA_SD_BIAS_SLOPE,
        }
    }

    /// `1/λ_max(G^{1/2} ∇²U G^{1/2})`, G the RMSprop preconditioner after 300 steps at the mode
    /// with a step `1e-12/λ_max` (so the chain stays put while V averages the squared gradient
    /// estimates there).
    fn centre_step<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        curv: &Curvature,
        cost: &mut Cost,
    ) -> Result<f64> {
        let mut s = self.with_step_size(1e-12 / curv.lambda_max)?;
        settle(&mut s, model, mode, 0x0070_7367_6c64, cost)?;
        // At the mode the exact gradient vanishes, so V there holds the minibatch noise alone;
        // in the whitened coordinates the chain's squared gradients also carry the posterior's
        // score, about 1 per coordinate (`E ḡ² ≈ (V + 1)/N²`, see `psgld_metric`): G is capped
        // at `1/(λ + 1/N)`. (With exact gradients V is 0 at the mode and G was `1/λ`: a centre
        // step 550 times too small on a 62-datum regression, and a tuned run that did not mix.)
        let cap = match self.whitening() {
            Some(_) => 1.0 / (self.settings().damping + 1.0 / model.n_data().max(1) as f64),
            None => f64::INFINITY,
        };
        let g: Vec<f64> = s.preconditioner().map(|g| g.min(cap).sqrt()).collect();
        let scale = |x: &[f64], out: &mut [f64]| out.iter_mut().zip(x).zip(&g).for_each(|((o, x), g)| *o = g * x);
        // Whitened: the operator G^{1/2} Tᵀ ∇²U T G^{1/2} (pSGLD's G lives on φ).
        let w = self.whitening().cloned();
        let d = mode.len();
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

    /// 1: the Euler scheme of overdamped Langevin dynamics in the (slowly adapting) RMSprop
    /// metric, time η per iteration.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }
}

/// The largest `x = (h/2) λ_max(Ĝ^{1/2} V Ĝ^{1/2})` [`tune`] lets a noise-corrected pSGLD run
/// at (see its [`Tunable::step_limit`]): 1, where the cubic series leaves 9.8 % of a variance
/// along the top direction (0.5 % at x = 0.5), two thirds of the clamp
/// [`METRIC_CORRECTION_MAX`](crate::METRIC_CORRECTION_MAX). Below it `tune` adds that residual
/// to the bias it predicts ([`Tunable::correction_residuals`]), so a long run takes a smaller x.
pub const PSGLD_CORRECTION_TARGET: f64 = 1.0;

/// The damping, times 1/N, that [`tune`] gives a whitened pSGLD at least
/// ([`Tunable::fitted_to_scale`]): 1, the RMS of the exact `ḡ = ∇U/N` on whitened coordinates.
///
/// Why: with exact or nearly exact gradients (n close to N, tiny N) RMSprop's V averages only the
/// posterior's score, which vanishes at the mode; when a chain crosses it V collapses and
/// `G = 1/(λ + √V)` jumps towards `1/λ` (the paper's λ = 1e-5: up to 10⁵ times its typical
/// value), and the kicks that follow make the pilots' errors erratic in the step. On a 62-datum
/// regression (exact gradients, N = 62) `tune` then chose a step of 3e-5 and the planned run of
/// 5 000 × 4 did not mix (R̂ 1.85, ESS 6); with λ = 1/N it chose 5e-3 and the run converged (R̂
/// 1.007, ESS 1 073). With minibatch noise `√V ≈ √(V_ii + 1)/N` is larger, and λ = 1/N only
/// bounds G at N, which the tuned step absorbs.
pub const PSGLD_WHITENED_DAMPING: f64 = 1.0;

/// `λ_max(Ĝ^{1/2} V Ĝ^{1/2})` with [`psgld_metric`]'s Ĝ (None if N is unknown or the
/// eigen-solver fails).
fn psgld_noise_top(noise: &GradientNoise, n_data: f64, damping: f64) -> Option<f64> {
    let v = noise.covariance();
    let d = noise.dim();
    let s: Vec<f64> = psgld_metric(noise, n_data, damping)?.into_iter().map(f64::sqrt).collect();
    let a = Array2::from_shape_fn((d, d), |(i, j)| s[i] * v[[i, j]] * s[j]);
    let ev = crate::numeric::linalg::symmetric_eigenvalues("pSGLD's metric gradient noise", &a).ok()?;
    Some(ev.iter().fold(0.0_f64, |m, l| m.max(*l)))
}

/// `Ĝ_i = 1/(λ + √(V_ii + 1)/N)`: pSGLD's RMSprop metric G on whitened coordinates
/// (`ḡ = ∇Ũ/N` with `E ḡ_i² ≈ (V_ii + 1)/N²`, the 1 from the whitened posterior's score).
/// `None` while N is unknown (0: a pSGLD not yet run nor tuned).
fn psgld_metric(noise: &GradientNoise, n_data: f64, damping: f64) -> Option<Vec<f64>> {
    if n_data.is_nan() || n_data <= 0.0 {
        return None;
    }
    let v = noise.covariance();
    Some((0..noise.dim()).map(|i| 1.0 / (damping + (v[[i, i]] + 1.0).sqrt() / n_data)).collect())
}

impl<E: GradientEstimator> Tunable for Hamcmc<E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Hamcmc::new(
            HamcmcSettings { step_size: StepSize::Constant(step), ..*self.settings() },
            self.estimator().clone(),
        )
    }

    /// `1/λ_max(H ∇²U)`, H the L-BFGS inverse-Hessian approximation after the warm-up and 300
    /// steps at the mode with step `1e-2/λ_max` (warm-up step likewise).
    fn centre_step<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        curv: &Curvature,
        cost: &mut Cost,
    ) -> Result<f64> {
        let small = 1e-2 / curv.lambda_max;
        let mut s = Hamcmc::new(
            HamcmcSettings { step_size: StepSize::Constant(small), warmup_step_size: small, ..*self.settings() },
            self.estimator().clone(),
        )?;
        settle(&mut s, model, mode, 0x6861_6d63_6d63, cost)?;
        let Some(lbfgs) = s.lbfgs() else {
            return Ok(1.0 / curv.lambda_max);
        };
        let mut lbfgs = lbfgs.clone();
        let l = preconditioned_lambda_max(
            model,
            mode,
            3,
            cost,
            |x, out| out.copy_from_slice(x),
            |x, out| lbfgs.apply_h(x, out),
        )?;
        if l > 0.0 { Ok(1.0 / l) } else { Ok(1.0 / curv.lambda_max) }
    }

    // `mixing_exponent`: the default, fitted. The L-BFGS metric is rebuilt from the differences
    // of recent samples and gradients, which shrink with the step, so the metric — and the
    // dynamics it defines — changes with h: there is no fixed diffusion limit to appeal to. (With
    // γ = 1, `tune_logistic`'s HAMCMC steps moved up 1.09–1.31× and its errors rose, 0.221 → 0.239
    // and 0.435 → 0.522 sd.)
}

/// Settings of [`tune`].
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSettings {
    /// Multiples of the curvature-derived centre step tried by pilot runs. Default
    /// `2⁻⁶, 2⁻⁵, …, 2¹` (eight candidates).
    pub factors: Vec<f64>,
    /// Iterations of each pilot run, burn-in included. Default 2000.
    pub pilot_iterations: u64,
    /// Burn-in of each pilot run. Default 200.
    pub pilot_burn_in: u64,
    /// At most this many (thinned, evenly spaced) draws of each pilot chain are scored: each
    /// costs one full gradient. Default 200.
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
    /// Start from the mode found by [`find_mode`] from the given θ₀ (default true); otherwise
    /// θ₀ must already be near a mode.
    pub find_mode: bool,
    /// The mode search.
    pub mode: ModeSettings,
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
    /// a smaller, less biased step (see the [module docs](self)).
    pub planned_run: PlannedRun,
    /// What [`tune`] chooses the step for. Default [`Objective::Accuracy`].
    /// ([`tune_rr`](crate::tune_rr) has its own rule and ignores it.)
    pub objective: Objective,
    /// Whether [`tune`] corrects the injected noise of SGLD, SGHMC, SGNHT and pSGLD by their gradient
    /// estimator's measured noise covariance (see [`GradientNoise`]; needs a whitening and an
    /// estimator with [independent draws](GradientEstimator::independent_draws), e.g. a
    /// minibatch or control variates). Default `true`. The measurement costs
    /// `2 · points · n` datum gradients and `2 · points · d²` multiply-adds,
    /// `points = clamp(200 d, 10 000, 20 000)`, and each step `2d²` multiply-adds (`4d²` for
    /// pSGLD): it is applied up to d = [`DENSE_WHITENING_MAX_DIM`], where the whitening is
    /// dense (`d²` per step) too; above, [`Tuned::preconditioning`] says it was not.
    /// ([`tune_rr`](crate::tune_rr) and [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned) ignore it.)
    pub correct_gradient_noise: bool,
}

/// What [`tune`] chooses the step for (see [`TuneSettings::objective`]).
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
    /// [`RHAT_MAX`](crate::diagnostics::RHAT_MAX) ([`predicted_max_rhat`]), with a margin of
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

/// The predicted smallest ESS [`Objective::Convergence`] asks of a planned run:
/// [`CONVERGENCE_MARGIN`] × the larger of [`ESS_MIN`](crate::diagnostics::ESS_MIN) and the ESS at
/// which [`predicted_max_rhat`] is [`RHAT_MAX`](crate::diagnostics::RHAT_MAX).
fn convergence_ess(planned: &PlannedRun, d: usize) -> f64 {
    CONVERGENCE_MARGIN
        * crate::trace::diagnostics::ESS_MIN.max(ess_for_rhat(crate::trace::diagnostics::RHAT_MAX, planned, d))
}

/// ", e.g. to about N × chains kept iterations", the planned length at which the error model's
/// own accuracy step predicts the ESS [`Objective::Convergence`] asks (empty without a model
/// that saw bias).
fn longer(model: &Option<ErrorModel>, planned: &PlannedRun, d: usize) -> String {
    let Some(m) = model.as_ref().filter(|m| m.bias_seen && m.beta2 > 0.0) else { return String::new() };
    let ok = |iterations: u64| {
        let p = PlannedRun { iterations, ..*planned };
        m.min_ess(m.accuracy_step(p.draws()), p.draws()) >= convergence_ess(&p, d)
    };
    let mut n = planned.iterations.max(1).saturating_mul(2);
    for _ in 0..40 {
        if ok(n) {
            // Bisect between the last length that failed and n, then round up to two
            // significant digits.
            let (mut lo, mut hi) = ((n / 2).max(planned.iterations), n);
            while hi - lo > (hi / 64).max(1) {
                let mid = lo + (hi - lo) / 2;
                if ok(mid) { hi = mid } else { lo = mid }
            }
            let unit = 10u64.pow((hi as f64).log10().floor().max(1.0) as u32 - 1);
            let n = hi.div_ceil(unit).saturating_mul(unit);
            return format!(
                ", e.g. to about {n} x {} kept iterations, where its own step predicts ESS ≥ {:.0}",
                planned.chains,
                convergence_ess(&PlannedRun { iterations: n, ..*planned }, d)
            );
        }
        n = n.saturating_mul(2);
    }
    String::new()
}

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

/// How [`tune`] and [`tune_rr`](crate::tune_rr) precondition the sampler: the whitening (see [`Whitening`]) is
/// built from the Hessian at the mode, `∇²U(θ̂)`, computed from d Hessian-vector products (the
/// model's, or central differences of full gradients), whose cost is in [`Tuned::cost`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Precondition {
    /// Dense (`T Tᵀ = ∇²U(θ̂)⁻¹`) when `d ≤` [`DENSE_WHITENING_MAX_DIM`] and the Hessian is
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
            scored_draws: 200,
            pilot_chains: 4,
            ksd: KsdSettings::default(),
            moment_weight: 1.0,
            seed: 0,
            find_mode: true,
            mode: ModeSettings::default(),
            curvature: CurvatureSettings::default(),
            max_extensions: 6,
            precondition: Precondition::Auto,
            planned_run: PlannedRun::default(),
            objective: Objective::Accuracy,
            correct_gradient_noise: true,
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
        RunSettings { n_iter: self.pilot_iterations, burn_in: self.pilot_burn_in, ..Default::default() }.validate()
    }

    /// The pilots' storage interval: every `thin`-th of the kept iterations, so that each pilot
    /// chain stores about `scored_draws` draws.
    pub(crate) fn pilot_thin(&self) -> u64 {
        ((self.pilot_iterations - self.pilot_burn_in) / self.scored_draws as u64).max(1)
    }

    /// The one pilot plan of [`tune`] and [`tune_rr`](crate::tune_rr): `pilot_iterations` with
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

/// One pilot run of [`tune`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// The step size tried.
    pub step_size: f64,
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
}

/// What [`tune`] chose, and why.
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
    /// the chosen step, from [`predicted_ess`](Self::predicted_ess) by [`predicted_max_rhat`]:
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
}

/// Chooses `sampler`'s constant step size for `model` from `theta0` without the user's help (see
/// the [module docs](self)).
///
/// Errors: invalid settings; those of [`find_mode`], [`curvature`] and the centre rule; a
/// candidate that fails (diverges, runs away) is recorded, not an error, but
/// [`Error::NotConverged`] (`"tune"`) is returned when every candidate failed.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{tune::TuneSettings, tune::tune};
///
/// let model = LogisticRegression::synthetic(5_000, 3, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50))?;
/// let settings = TuneSettings { pilot_iterations: 1_000, pilot_burn_in: 200, ..Default::default() };
/// let tuned = tune(&model, &sgld, &[0.0; 3], &settings)?;
/// println!("{}", tuned.reason);
/// let out = Runner::new(&model, &tuned.sampler).start(&tuned.mode).settings(RunSettings::default()).run()?;
/// assert!(out.estimate.is_finite());
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn tune<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<Tuned<S>> {
    let started = std::time::Instant::now();
    let Setup { mode, curv, centre, scale, laplace, base, whitening, mut preconditioning, mut cost } =
        setup(model, sampler, theta0, settings)?;
    let base = match (&whitening, settings.correct_gradient_noise) {
        (Some(_), true) if mode.len() > DENSE_WHITENING_MAX_DIM => {
            preconditioning.push_str(&format!(
                "; gradient noise not corrected: d = {} > {DENSE_WHITENING_MAX_DIM} (its dense covariance would cost \
                 {} multiply-adds per step, against the whitening's {})",
                mode.len(),
                2 * mode.len() * mode.len(),
                2 * mode.len()
            ));
            base
        }
        (Some(w), true) => {
            let points = (200 * mode.len()).clamp(GRADIENT_NOISE_POINTS_MIN, GRADIENT_NOISE_POINTS_MAX);
            let mut spent = Cost::default();
            match base.noise_corrected(model, w, points, settings.seed, &mut spent)? {
                Some((corrected, noise)) => {
                    let l = noise.eigenvalues();
                    preconditioning.push_str(&format!(
                        "; gradient noise corrected: whitened noise covariance eigenvalues [{:.3e}, {:.3e}] \
                         ({}; {} datum gradients), {} multiply-adds per step ({} under pSGLD's metric)",
                        l.first().copied().unwrap_or(0.0),
                        l.last().copied().unwrap_or(0.0),
                        noise.summary(),
                        spent.datum_gradients,
                        noise.flops_per_step(),
                        noise.flops_per_step() * 2,
                    ));
                    cost += spent;
                    corrected
                }
                None => base,
            }
        }
        _ => base,
    };
    let sampler = &base;
    // A noise-corrected sampler's steps stay where its correction is complete (above the limit
    // the injected noise cannot shrink further and the bias grows faster than the pilots' linear
    // model of it). Where the minibatch noise dominates — the limit below half the curvature
    // step, a whitened noise variance above 4 — the candidates stop at the limit.
    let limit = sampler.step_limit().filter(|l| l.is_finite() && *l > 0.0);
    let top_factor = settings.factors.iter().copied().fold(0.0, f64::max);
    let grid_centre = match limit {
        Some(l) if l < centre / 2.0 => centre.min(l / top_factor),
        _ => centre,
    };
    let pilot_at = |h: f64, index: u64| pilot(model, sampler, &mode, (&scale, &laplace), h, index, settings);
    let trials: Vec<Trial> = pilot_grid(grid_centre, settings, limit, pilot_at)?;
    let extensions = trials.len() - settings.factors.len();
    for t in &trials {
        cost += t.cost;
    }
    // The gradient noise where the chains go (its Laplace-draw measurement can be far from it on
    // a skewed posterior): at the draws of the pilot closest to the posterior; and the margin
    // below its limit.
    let visited = match (&whitening, limit) {
        (Some(w), Some(l)) => visited_noise(model, sampler, w, &mode, &trials, l, settings, &mut cost)?,
        _ => None,
    };
    let visited_sampler;
    let (sampler, limit, misfit) = match visited {
        Some(v) => {
            preconditioning.push_str(&v.note);
            visited_sampler = v.sampler;
            let limit = visited_sampler.step_limit().filter(|l| l.is_finite() && *l > 0.0);
            (&visited_sampler, limit, v.misfit)
        }
        None => (sampler, limit, 0.0),
    };
    // No step at the limit itself: a margin leaves injected noise in every direction, so that a
    // state where the minibatch noise is smaller than its average still gets noise.
    let cap = limit.map(|l| l * CORRECTION_MARGIN);
    // The sd bias the correction leaves: its own approximation (pSGLD's series), and its misfit
    // to the noise where the chains go, `c(h) ΔV/2` with the weight `c(h) = h/(limit λ_max)` and
    // ΔV = misfit × λ_max.
    let residuals = |steps: &[f64], out: &mut [f64]| {
        sampler.correction_residuals(steps, out);
        if let Some(l) = limit.filter(|_| misfit > 0.0) {
            out.iter_mut().zip(steps).for_each(|(o, h)| *o += misfit * h / (2.0 * l));
        }
    };
    let argmin = best_scored(&trials).ok_or(Error::NotConverged {
        what: "tune",
        iterations: trials.len() as u64,
        residual: f64::NAN,
    })?;
    let edge = argmin.0 == 0 || argmin.0 == trials.len() - 1;
    let failed = trials.iter().filter(|t| t.failure.is_some()).count();
    // The scored candidates `(h, D)` and their KSD standard errors, index for index.
    let (scored, ses): (Vec<(f64, f64)>, Vec<f64>) =
        trials.iter().filter_map(|t| t.ksd.map(|k| ((t.step_size, k), t.ksd_se.unwrap_or(f64::NAN)))).unzip();
    // The pilots' Monte Carlo term scaled to the planned run: D²(h) ≈ r·a/h + b·h² + c with r the
    // ratio of the pilots' kept draws to the run's.
    let pilot_draws = ((settings.pilot_iterations - settings.pilot_burn_in) * settings.pilot_chains as u64) as f64;
    let ratio = pilot_draws / settings.planned_run.draws();
    // The predicted error of the planned run, from the pilots' per-coordinate Monte Carlo and
    // bias measurements; when no pilot showed bias, the KSD fit.
    let thin = settings.pilot_thin() as f64;
    let h_ksd = trials[argmin.0].step_size;
    let planned = settings.planned_run;
    let model = error_model_step(&trials, h_ksd, pilot_draws, thin, planned.draws(), 2, sampler.mixing_exponent());
    // The model that predicts the chosen step's error, and whether the approximate correction's
    // residual joins its bias (None: no pilot showed bias, so no error is predicted).
    let mut predictor: Option<(ErrorModel, bool)> = None;
    let (step, how) = match &model {
        Some(m) if m.bias_seen => (
            m.step,
            format!(
                "the minimiser of the planned run's predicted worst error in posterior sds, max_j β_j² h² + K h^(−γ)/N \
                 (N = {} x {} kept draws; from the pilots' per-coordinate Stein moment errors and autocorrelation \
                 times: max β² = {:.3e}, γ = {:.2} ({}), K = {:.3e}){}",
                planned.iterations,
                planned.chains,
                m.beta2,
                m.gamma,
                if sampler.mixing_exponent().is_some() { "the sampler's diffusion limit" } else { "fitted" },
                m.k_mc,
                if m.clamped { " (at an end of the searched range)" } else { "" }
            ),
        ),
        // The grid capped at a noise-corrected sampler's limit (the noise-dominated case): below
        // it the correction leaves the exact-gradient scheme's discretisation bias, at least
        // whitened ULA's on a Gaussian (sd factor 1/√(1 − h/2) ≈ 1 + h/4), which pilots at these
        // small steps rarely resolve: the error model with β² at least that floor, up to the limit.
        Some(m) if grid_centre < centre => {
            let slope = sampler.exact_gradient_bias_slope();
            let floor = slope * slope;
            let beta2 = if m.bias_seen { m.beta2.max(floor) } else { floor };
            let top = scored.iter().map(|&(h, _)| h).fold(0.0, f64::max);
            let top = cap.map_or(top, |c| top.min(c));
            let floor_model = ErrorModel { beta2, ..*m };
            predictor = Some((floor_model, true));
            // An approximate correction: its residual bias joins the floor's, minimised on a log
            // grid of 2 001 steps over four decades below the limit (0.46 % apart).
            let grid: Vec<f64> = (0..=2000).map(|i| top * 10f64.powf(-4.0 * (1.0 - i as f64 / 2000.0))).collect();
            let mut residual = vec![0.0; grid.len()];
            residuals(&grid, &mut residual);
            let (h, at_h, at_top) = if residual[grid.len() - 1] > 0.0 {
                let (i, _) = grid
                    .iter()
                    .zip(&residual)
                    .map(|(&h, &r)| floor_model.predicted_error2_with(h, planned.draws(), r))
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or((grid.len() - 1, 0.0));
                (grid[i], residual[i], residual[grid.len() - 1])
            } else {
                (floor_model.accuracy_step(planned.draws()).min(top), 0.0, 0.0)
            };
            (
                h,
                format!(
                    "the minimiser of the planned run's predicted worst error in posterior sds, max_j β_j² h² + K \
                     h^(−γ)/N, up to the gradient-noise correction's limit {top:.3e} (N = {} x {} kept draws; β² = \
                     {beta2:.3e}: {}, K = {:.3e}, γ = {:.2}{})",
                    planned.iterations,
                    planned.chains,
                    if m.bias_seen && m.beta2 > floor {
                        "from the pilots' per-coordinate Stein moment errors".to_string()
                    } else {
                        format!(
                            "the floor ({slope:.4e})² of the exact-gradient scheme's sd bias on a whitened Gaussian{}",
                            if m.bias_seen { ", above the pilots' estimate" } else { "; no pilot showed a bias" }
                        )
                    },
                    m.k_mc,
                    m.gamma,
                    if at_top > 0.0 {
                        format!(
                            "; plus the approximate correction's own sd bias, {at_h:.2e} at this step, {at_top:.2e} at \
                             the limit"
                        )
                    } else {
                        String::new()
                    },
                ),
            )
        }
        // No pilot showed bias: the KSD fit (as before the error model).
        _ => ksd_fit_step(&scored, &ses, h_ksd, ratio, &planned),
    };
    if let Some(m) = model.as_ref().filter(|m| m.bias_seen && predictor.is_none()) {
        predictor = Some((*m, true));
    }
    // Never above the margin below the limit of a gradient-noise correction.
    let (step, how) = match cap {
        Some(c) if step > c => (
            c,
            format!(
                "{how}; lowered from {step:.4e} to {CORRECTION_MARGIN} x the gradient-noise correction's limit \
                 ({c:.4e})"
            ),
        ),
        _ => (step, how),
    };
    let d = mode.len();
    // Under Objective::Convergence, the smallest step at which the planned run's predicted ESS
    // meets the verdict's needs (with the margin), if its predicted error stays within
    // CONVERGENCE_ERROR_RATIO of the accuracy step's and within the pilots' stable range.
    let (step, how) = match (&model, settings.objective) {
        (Some(m), Objective::Convergence) => {
            let need = convergence_ess(&planned, d);
            let h_need = m.step_for_ess(need, planned.draws());
            let hi = trials.iter().filter(|t| t.ksd.is_some()).map(|t| t.step_size).fold(0.0, f64::max);
            let (e0, e1) = (m.predicted_error(step, planned.draws()), m.predicted_error(h_need, planned.draws()));
            if h_need <= step {
                (step, format!("{how}; the objective Convergence (predicted ESS ≥ {need:.0}) keeps it"))
            } else if !m.bias_seen {
                (
                    step,
                    format!(
                        "{how}; the objective Convergence did not raise it: a predicted smallest ESS of {need:.0} needs \
                         {h_need:.4e}, but no pilot showed a bias to predict that step's error from"
                    ),
                )
            } else if h_need <= hi && e1 <= CONVERGENCE_ERROR_RATIO * e0 {
                (
                    h_need,
                    format!(
                        "objective Convergence: raised {:.2}x from {step:.4e} to the smallest step whose predicted \
                         smallest ESS is {need:.0} ({CONVERGENCE_MARGIN} x what the verdict needs), at a predicted worst \
                         error {e1:.3} sd against {e0:.3} ({how})",
                        h_need / step,
                    ),
                )
            } else {
                (
                    step,
                    format!(
                        "{how}; the objective Convergence did not raise it: a predicted smallest ESS of {need:.0} needs \
                         {h_need:.4e}, {}",
                        if h_need > hi {
                            format!("above the largest stable pilot step {hi:.4e}")
                        } else {
                            format!(
                                "whose predicted worst error {e1:.3} sd is {:.2}x this step's {e0:.3} (the objective \
                                 allows {CONVERGENCE_ERROR_RATIO}x)",
                                e1 / e0
                            )
                        }
                    ),
                )
            }
        }
        _ => (step, how),
    };
    // The planned run's smallest ESS at the chosen step, from the pilots' autocorrelation times,
    // and the largest split-R̂ that ESS leaves.
    let predicted_ess = model.as_ref().map(|m| m.min_ess(step, planned.draws()));
    let predicted_rhat = predicted_ess.map(|ess| predicted_max_rhat(ess, &planned, d));
    let predicted_error = predictor.map(|(m, with_residual)| {
        let mut residual = [0.0];
        if with_residual {
            residuals(&[step], &mut residual);
        }
        m.predicted_error2_with(step, planned.draws(), residual[0]).sqrt()
    });
    let how = match predicted_error {
        Some(e) => format!("{how}; predicted worst error of the planned run {e:.3} sd"),
        None => how,
    };
    let how = match (predicted_ess, predicted_rhat) {
        (Some(ess), _) if ess < crate::trace::diagnostics::ESS_MIN => format!(
            "{how}; predicted smallest ESS of the planned run {ess:.0} — below the {:.0} the convergence verdict asks: \
             expect NOT CONVERGED at this length (run longer{}, or lower the gradient noise: a larger \
             minibatch, or control variates if the estimator has none)",
            crate::trace::diagnostics::ESS_MIN,
            longer(&model, &planned, d)
        ),
        (Some(ess), Some(r)) if r > crate::trace::diagnostics::RHAT_MAX => format!(
            "{how}; predicted smallest ESS of the planned run {ess:.0} and largest split-R̂ {r:.3} — above the {} the \
             convergence verdict asks (that needs an ESS of about {:.0}): expect NOT CONVERGED at this length (run \
             longer{}, or lower the gradient noise: a larger minibatch, or control variates if the estimator has none)",
            crate::trace::diagnostics::RHAT_MAX,
            ess_for_rhat(crate::trace::diagnostics::RHAT_MAX, &planned, d),
            longer(&model, &planned, d)
        ),
        (Some(ess), Some(r)) => {
            format!("{how}; predicted smallest ESS of the planned run {ess:.0}, largest split-R̂ {r:.3}")
        }
        _ => how,
    };
    let capped = match limit {
        Some(l) if grid_centre < centre => format!(
            " (capped at {l:.3e}, where the gradient-noise correction stops being complete: the grid centred on {grid_centre:.3e})"
        ),
        _ => String::new(),
    };
    let reason = format!(
        "step {step:.4e}: {how}; smallest KSD {:.4e} at {:.3e}, of {} candidate steps {:.3e} … {:.3e} around the curvature step {centre:.3e}{capped} \
         (λ_max = {:.4e}); {failed} failed; grid extended {extensions} time(s){}; preconditioning: {preconditioning}",
        argmin.1,
        trials[argmin.0].step_size,
        trials.len(),
        trials.first().map_or(f64::NAN, |t| t.step_size),
        trials.last().map_or(f64::NAN, |t| t.step_size),
        curv.lambda_max,
        if edge { "; the smallest KSD is still at an end of the grid" } else { "" },
    );
    Ok(Tuned {
        sampler: sampler.with_step_size(step)?,
        step_size: step,
        centre,
        curvature: curv,
        mode,
        trials,
        cost,
        reason,
        whitening,
        preconditioning,
        wall_time: started.elapsed(),
        predicted_ess,
        predicted_rhat,
        predicted_error,
    })
}

/// A pilot as the candidate grid sees it: the step it ran at and its score (smaller is better;
/// `None` for a pilot that failed). [`Trial`] for [`tune`], the Richardson–Romberg pilots of
/// [`tune_rr`](crate::tune_rr).
pub(crate) trait GridPilot {
    /// The step the pilot ran at.
    fn step_size(&self) -> f64;
    /// Its score, `None` if it failed.
    fn score(&self) -> Option<f64>;
}

impl GridPilot for Trial {
    fn step_size(&self) -> f64 {
        self.step_size
    }

    fn score(&self) -> Option<f64> {
        self.ksd
    }
}

/// The index and score of the best-scored pilot.
pub(crate) fn best_scored<P: GridPilot>(pilots: &[P]) -> Option<(usize, f64)> {
    pilots.iter().enumerate().filter_map(|(i, p)| p.score().map(|k| (i, k))).min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The candidate grid of [`tune`] and [`tune_rr`](crate::tune_rr), run once for both: the
/// pilots at `centre × factor` for each of [`TuneSettings::factors`] in parallel (pilot i gets
/// index i for its random streams), sorted by step, failures kept as pilots without a score.
/// Then, so that a fit has its minimum bracketed, the grid is extended by factors of 2 until two
/// scored candidates lie on each side of the best score: below the smallest step while fewer than
/// two scored candidates are below the best, else above the largest while fewer than two are
/// above it — never above a step that failed, nor above `limit` — at most
/// [`TuneSettings::max_extensions`] times (extension e gets index `factors.len() + e`).
///
/// `pilot(h, index)` runs one pilot; its errors (not a failed pilot: a failure is a pilot with
/// no score) stop the grid.
pub(crate) fn pilot_grid<P, F>(centre: f64, settings: &TuneSettings, limit: Option<f64>, pilot: F) -> Result<Vec<P>>
where
    P: GridPilot + Send,
    F: Fn(f64, u64) -> Result<P> + Sync,
{
    let mut pilots: Vec<P> =
        settings.factors.par_iter().enumerate().map(|(i, f)| pilot(centre * f, i as u64)).collect::<Result<_>>()?;
    pilots.sort_by(|a, b| a.step_size().total_cmp(&b.step_size()));
    let mut extensions = 0;
    while extensions < settings.max_extensions {
        let Some((i, _)) = best_scored(&pilots) else { break };
        let below = pilots[..i].iter().filter(|p| p.score().is_some()).count();
        let above = pilots[i + 1..].iter().filter(|p| p.score().is_some()).count();
        let top = pilots[pilots.len() - 1].step_size();
        let top_failed = pilots.last().is_some_and(|p| p.score().is_none());
        let down = below < 2;
        let step = if down {
            pilots[0].step_size() / 2.0
        } else if above < 2 && !top_failed && limit.is_none_or(|l| top * 2.0 <= l) {
            top * 2.0
        } else {
            break;
        };
        let p = pilot(step, (settings.factors.len() + extensions) as u64)?;
        if down {
            pilots.insert(0, p);
        } else {
            pilots.push(p);
        }
        extensions += 1;
    }
    Ok(pilots)
}

/// A noise-corrected sampler whose gradient noise was measured again where its chains go (see
/// [`visited_noise`]).
struct Visited<S> {
    /// The sampler corrected by the noise measured at the last round's states.
    sampler: S,
    /// The largest |eigenvalue| of the difference between the last two rounds' measured
    /// covariances, over the last one's largest eigenvalue: how far the correction may still
    /// be from the noise where the run goes.
    misfit: f64,
    /// What was measured, for the preconditioning line.
    note: String,
}

/// The largest fraction of a gradient-noise correction's limit ([`Tunable::step_limit`]) that
/// [`tune`] chooses: at the limit no noise is injected along the measured noise's top direction,
/// and wherever the chains meet less minibatch noise than its average the step then carries too
/// little (on the Wisconsin breast-cancer regression at N/n = 11, SGLD's sds came out 11 % small
/// at the limit with the noise measured at Laplace draws). At half the limit every direction
/// keeps at least half its injected noise.
pub const CORRECTION_MARGIN: f64 = 0.5;

/// Rounds of [`visited_noise`]: the first measures where chains corrected by the Laplace-draw
/// measurement go, the second where chains corrected by the first go.
const VISITED_NOISE_ROUNDS: u64 = 2;

/// The gradient noise measured at the states that pilot chains visit: `sampler` (corrected by a
/// Laplace-draw measurement) is run as a pilot at the step of `trials` up to `limit` with the
/// smallest KSD, the noise measured at its draws ([`Tunable::noise_corrected_at`]), and again with
/// that correction ([`VISITED_NOISE_ROUNDS`]); the difference of the last two measurements is the
/// correction's misfit. `None` (the Laplace measurement kept) without a scored step or when a
/// round's pilot diverges.
#[allow(clippy::too_many_arguments)]
fn visited_noise<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    whitening: &Whitening,
    mode: &[f64],
    trials: &[Trial],
    limit: f64,
    settings: &TuneSettings,
    cost: &mut Cost,
) -> Result<Option<Visited<S>>> {
    // The pilot whose draws are closest to the posterior (the smallest KSD): its states are where
    // a run near the chosen step goes. (The largest scored step, used first, visits states that
    // its own bias widens: on the validation example's logistic regression SGLD-CV's sds then came
    // out 24 % small at 50 000 x 4, the noise measured there being larger than the run met.)
    let Some(step) = trials
        .iter()
        .filter(|t| t.step_size <= limit)
        .filter_map(|t| t.ksd.map(|k| (t.step_size, k)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(h, _)| h)
    else {
        return Ok(None);
    };
    let d = mode.len();
    let pairs = (200 * d).clamp(GRADIENT_NOISE_POINTS_MIN, GRADIENT_NOISE_POINTS_MAX);
    let mut current = sampler.clone();
    let mut noises: Vec<Arc<GradientNoise>> = Vec::new();
    let mut all_states: Vec<Array2<f64>> = Vec::new();
    let mut spent = Cost::default();
    for round in 0..VISITED_NOISE_ROUNDS {
        let h = current.step_limit().map_or(step, |l| step.min(l));
        let rs = settings.pilot_run(settings.pilot_chains, settings.pilot_thin(), 0x7669_7369 + round, 0);
        let out = match Runner::new(model, &current.with_step_size(h)?).start(mode).settings(rs).run() {
            Ok(out) => out,
            Err(e) if e.is_divergence() => return Ok(None),
            Err(e) => return Err(e),
        };
        spent += out.cost - out.setup_cost;
        let states = out.estimate.stacked_draws()?;
        let seed = settings.seed.wrapping_add(round + 1);
        let Some((c, noise)) = sampler.noise_corrected_at(model, whitening, states.view(), pairs, seed, &mut spent)?
        else {
            return Ok(None);
        };
        current = c;
        noises.push(noise);
        all_states.push(states);
    }
    let (Some(last), Some(before)) = (noises.last(), noises.len().checked_sub(2).map(|i| &noises[i])) else {
        return Ok(None);
    };
    let diff = last.covariance() - before.covariance();
    let gap = crate::numeric::linalg::symmetric_eigenvalues("gradient-noise misfit", &diff)?
        .into_iter()
        .fold(0.0_f64, |m, l| m.max(l.abs()));
    // The correction: the noise measured at every round's states at once (each state once per
    // round, in turn), whose error the two rounds' difference bounds: two independent
    // measurements of one V differ by about √2 times either's error, and the pooled one's is
    // about half that difference.
    let views: Vec<_> = all_states.iter().map(|a| a.view()).collect();
    let pooled = ndarray::concatenate(ndarray::Axis(0), &views)
        .map_err(|_| Error::NoSamples { reason: "the pilots' draws could not be pooled" })?;
    let seed = settings.seed.wrapping_add(VISITED_NOISE_ROUNDS + 1);
    let Some((current, pooled_noise)) =
        sampler.noise_corrected_at(model, whitening, pooled.view(), 2 * pairs, seed, &mut spent)?
    else {
        return Ok(None);
    };
    let top = pooled_noise.eigenvalues().last().copied().unwrap_or(0.0);
    let misfit = if top > 0.0 { 0.5 * gap / top } else { 0.0 };
    *cost += spent;
    let l = pooled_noise.eigenvalues();
    let note = format!(
        "; measured again where pilot chains at {step:.3e} go ({VISITED_NOISE_ROUNDS} rounds, {} datum gradients): \
         eigenvalues [{:.3e}, {:.3e}] ({}); its misfit, half the largest |eigenvalue| of the two rounds' \
         difference, {:.1} % of the largest eigenvalue",
        spent.datum_gradients,
        l.first().copied().unwrap_or(0.0),
        l.last().copied().unwrap_or(0.0),
        pooled_noise.summary(),
        100.0 * misfit
    );
    Ok(Some(Visited { sampler: current, misfit, note }))
}

/// The step of the KSD fit ([`discrepancy_fit_minimiser_scaled`]), or without a convex fit the
/// smallest-KSD step `h_ksd` scaled by `r^(1/3)` for runs longer than the pilots; with the reason.
fn ksd_fit_step(scored: &[(f64, f64)], ses: &[f64], h_ksd: f64, ratio: f64, planned: &PlannedRun) -> (f64, String) {
    match discrepancy_fit_minimiser_scaled(scored, Some(ses), h_ksd, 2, ratio) {
        Some((h, clamped)) => (
            h,
            format!(
                "the minimiser of D²(h) ≈ r·a/h + b·h² + c fitted to all candidates (weighted by their KSD standard errors), \
                 with the pilots' Monte Carlo term scaled by \
                 r = {ratio:.3e} to the planned run of {} x {} kept draws{}",
                planned.iterations,
                planned.chains,
                if clamped { " (clamped to the grid's range)" } else { "" }
            ),
        ),
        // No convex fit (typically: every step above the smallest KSD failed, so the bias was
        // never seen). The smallest-KSD candidate balances the pilots' Monte Carlo error and
        // bias at best; a longer run needs the step that balances its smaller Monte Carlo error,
        // r^(1/3) times it under the same model. Never scaled up: above it steps failed or
        // scored worse.
        None if ratio < 1.0 => (
            h_ksd * ratio.cbrt(),
            format!(
                "the candidate with the smallest KSD scaled by r^(1/3) = {:.3} (r = {ratio:.3e}: the pilots' over the planned run's \
                 {} x {} kept draws), as the fit would; no convex fit D²(h) ≈ r·a/h + b·h² + c",
                ratio.cbrt(),
                planned.iterations,
                planned.chains,
            ),
        ),
        None => (
            h_ksd,
            "the candidate with the smallest KSD (no convex fit; the planned run is not longer than the pilots, and a \
             larger step is not tried beyond the grid)"
                .to_string(),
        ),
    }
}

/// The relative floor of the standard deviation of a KSD² in the weighted fit: a standard error
/// from four pilot chains is itself uncertain, so no candidate is trusted to better than 10 %.
const SE_FLOOR: f64 = 0.1;

/// The minimiser of the model `D²(h) ≈ a/h + b·h² + c` fitted to the candidates' discrepancies
/// `(h, D)` by least squares on relative errors (weights `1/D²`, so the divergent end does not
/// dominate), clamped to the candidates' range; `None` with fewer than four candidates or when
/// the fit is not convex (`a ≤ 0` or `b ≤ 0`). Steps are measured in units of `h_ref`.
///
/// The model: a pilot of fixed length has a Monte Carlo error whose square falls like `1/h` (its
/// autocorrelation time grows like `1/h`), a squared first-order discretisation and
/// minibatch bias that grows like `h²`, and a floor `c` from the finite number of scored draws.
/// Using every candidate smooths the pilots' noise, which on flat stretches of the curve
/// otherwise decides the winner.
#[cfg(test)]
fn discrepancy_fit_minimiser(points: &[(f64, f64)], h_ref: f64) -> Option<f64> {
    discrepancy_fit_minimiser_scaled(points, None, h_ref, 2, 1.0).map(|(h, _)| h)
}

/// The fit of [`discrepancy_fit_minimiser`] with the bias term `b·h^p` (`p = 4` for an
/// extrapolation that removes the first-order bias) and the Monte Carlo term scaled by `ratio`
/// (the pilots' draws over a planned run's): minimiser `(ratio·a/(p b))^{1/(p+1)}`, clamped to
/// `[smallest/8, largest]` of the candidates (with whether it was clamped). A run `1/ratio`
/// times as long as the pilots has `1/ratio` times their squared Monte Carlo error at the same
/// step, and the same bias.
///
/// With `ses` (each candidate's KSD standard error, from its pilot chains' spread), the least
/// squares are weighted by the standard deviation of D², `2·D·se`, floored at [`SE_FLOOR`]·D²:
/// a pilot whose chains disagree counts less. Small steps' pilots, short for their mixing time,
/// are the noisy ones (relative standard errors up to 0.8 against 0.03–0.1 for the steps near
/// the bias end), and a lucky low KSD there pulled the fitted minimum down.
pub(crate) fn discrepancy_fit_minimiser_scaled(
    points: &[(f64, f64)],
    ses: Option<&[f64]>,
    h_ref: f64,
    p: i32,
    ratio: f64,
) -> Option<(f64, bool)> {
    if points.len() < 4 {
        return None;
    }
    let mut ata = Array2::<f64>::zeros((3, 3));
    let mut atb = ndarray::Array1::<f64>::zeros(3);
    for (k, &(h, d)) in points.iter().enumerate() {
        let x = h / h_ref;
        let y = d * d;
        if !(y > 0.0 && y.is_finite()) {
            continue;
        }
        // The standard deviation of D²: 2·D·se from the pilot chains' spread, floored at 10 % of
        // D² (a spread over four chains is itself uncertain); without standard errors, D² (a fit
        // on relative errors).
        let sigma = match ses.and_then(|s| s.get(k)) {
            Some(&se) if se.is_finite() => (2.0 * d * se).max(SE_FLOOR * y),
            _ => y,
        };
        let row = [1.0 / x / sigma, x.powi(p) / sigma, 1.0 / sigma];
        for i in 0..3 {
            atb[i] += row[i] * y / sigma;
            for j in 0..3 {
                ata[[i, j]] += row[i] * row[j];
            }
        }
    }
    let coef = crate::numeric::linalg::solve("discrepancy fit", &ata, &atb).ok()?;
    let (a, b) = (coef[0], coef[1]);
    if !(a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite()) {
        return None;
    }
    let lo = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.0).fold(0.0, f64::max);
    let lo = if ratio < 1.0 { lo / 8.0 } else { lo };
    let h = h_ref * (ratio * a / (p as f64 * b)).powf(1.0 / (p as f64 + 1.0));
    let c = h.clamp(lo, hi);
    Some((c, c != h))
}

/// `E[max of k squared standard normals]` by quadrature of `∫ (1 − F(x)^k) dx`.
fn expected_max_chi2(k: usize) -> f64 {
    // erfc by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
    let erfc = |x: f64| {
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let y =
            t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        y * (-x * x).exp()
    };
    let (n, top) = (20_000, 80.0);
    let dx = top / n as f64;
    (0..n)
        .map(|i| {
            let x = (i as f64 + 0.5) * dx;
            1.0 - (1.0 - erfc((x / 2.0).sqrt())).powi(k as i32)
        })
        .sum::<f64>()
        * dx
}

/// The slope `b` of the weighted least-squares fit `e(h) = b·h^q + c·h^(q+1)` to points
/// `(h, e, variance of e)`, and its variance: the first-order bias coefficient of a pilot error
/// series, with the next order free so that the growth near the stability limit does not inflate
/// it. One point: `b = e/h^q`. `None` without points or with a singular fit.
fn first_order_slope(points: &[(f64, f64, f64)], q: f64) -> Option<(f64, f64)> {
    match points {
        [] => None,
        [(h, e, v)] => Some((e / h.powf(q), v / h.powf(2.0 * q))),
        _ => {
            let (mut a, mut b, mut c, mut r1, mut r2) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for (h, e, v) in points {
                let (x1, x2, w) = (h.powf(q), h.powf(q + 1.0), 1.0 / v);
                a += w * x1 * x1;
                b += w * x1 * x2;
                c += w * x2 * x2;
                r1 += w * x1 * e;
                r2 += w * x2 * e;
            }
            let det = a * c - b * b;
            (det > 1e-12 * a * c).then(|| ((c * r1 - b * r2) / det, c / det))
        }
    }
}

/// `E[max of k independent χ²_m/m]`, by quadrature of `∫ (1 − F(x)^k) dx` with the χ²
/// distribution function from the regularised lower incomplete gamma function.
fn expected_max_scaled_chi2(k: usize, m: usize) -> f64 {
    let a = m as f64 / 2.0;
    // ln Γ(a) for a half-integer or integer a ≥ 1/2: down to Γ(1/2) = √π or Γ(1) = 1.
    let ln_gamma_a = {
        let (mut x, mut acc) = (a, 0.0);
        while x > 1.0 {
            x -= 1.0;
            acc += x.ln();
        }
        if (x - 0.5).abs() < 1e-12 { acc + 0.5 * std::f64::consts::PI.ln() } else { acc }
    };
    // P(a, y): the series below a + 1, the continued fraction (modified Lentz) above.
    let p = |y: f64| -> f64 {
        if y <= 0.0 {
            return 0.0;
        }
        let front = (a * y.ln() - y - ln_gamma_a).exp();
        if y < a + 1.0 {
            let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
            for _ in 0..1_000 {
                ap += 1.0;
                term *= y / ap;
                sum += term;
                if term < sum * 1e-15 {
                    break;
                }
            }
            sum * front
        } else {
            let tiny = 1e-300;
            let mut b = y + 1.0 - a;
            let mut c = 1.0 / tiny;
            let mut dd = 1.0 / b;
            let mut h = dd;
            for i in 1..1_000 {
                let an = -(i as f64) * (i as f64 - a);
                b += 2.0;
                dd = an * dd + b;
                dd = if dd.abs() < tiny { tiny } else { dd };
                c = b + an / c;
                c = if c.abs() < tiny { tiny } else { c };
                dd = 1.0 / dd;
                let del = dd * c;
                h *= del;
                if (del - 1.0).abs() < 1e-15 {
                    break;
                }
            }
            1.0 - front * h
        }
    };
    let (n, top) = (20_000, 1.0 + 80.0 * (2.0 / m as f64).sqrt());
    let dx = top / n as f64;
    (0..n)
        .map(|i| {
            let x = (i as f64 + 0.5) * dx;
            1.0 - p(a * x).clamp(0.0, 1.0).powi(k as i32)
        })
        .sum::<f64>()
        * dx
}

/// The largest split-R̂ expected over `d` coordinates of a run of `planned` chains that has
/// mixed, with smallest bulk ESS `ess`: `√(1 + M X/ESS − 1/n)`, with `M = 2 × chains` half-chains
/// of `n` draws and `X = E[max of 2d χ²_{M−1}/(M−1)]` (a bulk and a folded R̂ per coordinate).
///
/// Why: R̂² = `(n − 1)/n + B/(nW)` and for stationary half-chains `B/(nW)` ≈ `(τ/n)·χ²_{M−1}/(M−1)`
/// (the spread of M independent half-chain means, each of variance `τσ²/n`), while `τ/n = M/ESS`.
/// Conservative: every coordinate is counted at the smallest ESS, and a coordinate's bulk and
/// folded values as independent. Test `the_predicted_rhat_matches_mixed_chains`.
pub fn predicted_max_rhat(ess: f64, planned: &PlannedRun, d: usize) -> f64 {
    let (mx, n) = rhat_terms(planned, d);
    (1.0 + mx / ess - 1.0 / n).max(1.0).sqrt()
}

/// The smallest bulk ESS at which [`predicted_max_rhat`] is `rhat`.
fn ess_for_rhat(rhat: f64, planned: &PlannedRun, d: usize) -> f64 {
    let (mx, n) = rhat_terms(planned, d);
    mx / (rhat * rhat - 1.0 + 1.0 / n)
}

/// `(M X, n)` of [`predicted_max_rhat`].
fn rhat_terms(planned: &PlannedRun, d: usize) -> (f64, f64) {
    let m = 2 * planned.chains.max(1);
    let x = expected_max_scaled_chi2(2 * d.max(1), m - 1);
    (m as f64 * x, (planned.iterations as f64 / 2.0).max(1.0))
}

/// What [`error_model_step`] fitted.
#[derive(Clone, Copy)]
struct ErrorModel {
    /// The minimiser of the predicted error; NaN when no bias was seen.
    step: f64,
    /// Whether any pilot showed bias (else the KSD fit chooses the step).
    bias_seen: bool,
    /// Whether the minimiser is at an end of the searched range.
    clamped: bool,
    gamma: f64,
    /// `max_j β_j²`.
    beta2: f64,
    /// `K`.
    k_mc: f64,
    /// `max_j κ_j` of `τ_j(h) = κ_j h^{−γ}`.
    kappa_max: f64,
}

impl ErrorModel {
    /// The planned run's predicted smallest effective sample size over the coordinates at step
    /// h: `min_j N / τ_j(h)`.
    fn min_ess(&self, h: f64, run_draws: f64) -> f64 {
        run_draws / (self.kappa_max * h.powf(-self.gamma)).max(1.0)
    }

    /// The smallest step at which [`min_ess`](Self::min_ess) reaches `ess`.
    fn step_for_ess(&self, ess: f64, run_draws: f64) -> f64 {
        (self.kappa_max * ess / run_draws).powf(1.0 / self.gamma)
    }

    /// The unconstrained minimiser of the predicted error for `run_draws` draws,
    /// `(γ K/(2 β² N))^{1/(2+γ)}` (with bias seen).
    fn accuracy_step(&self, run_draws: f64) -> f64 {
        (self.gamma * self.k_mc / (2.0 * self.beta2 * run_draws)).powf(1.0 / (2.0 + self.gamma))
    }

    /// The predicted worst error (posterior sds) of the planned run at step h:
    /// `√(max_j β_j² h^p + K h^{−γ}/N)` with p = 2 (0 bias when no pilot showed any).
    fn predicted_error(&self, h: f64, run_draws: f64) -> f64 {
        predicted_error2(self.beta2, self.k_mc, self.gamma, 2, h, run_draws).sqrt()
    }

    /// The squared predicted worst error at step h with a further sd bias `residual` (a
    /// gradient-noise correction's approximate residual) added to the bias `√β² h`:
    /// `(√β² h + residual)² + K h^{−γ}/N`.
    fn predicted_error2_with(&self, h: f64, run_draws: f64, residual: f64) -> f64 {
        let b = self.beta2.sqrt() * h + residual;
        b * b + self.k_mc * h.powf(-self.gamma) / run_draws
    }
}

/// The error model's predicted squared worst error `β² h^p + K h^{−γ}/N` (what
/// [`error_model_step`] minimises).
fn predicted_error2(beta2: f64, k_mc: f64, gamma: f64, p: i32, h: f64, run_draws: f64) -> f64 {
    beta2 * h.powi(p) + k_mc * h.powf(-gamma) / run_draws
}

/// The step that minimises a prediction, in posterior sds, of the planned run's worst error
/// (the largest error of a mean or sd over the coordinates), built from what the pilots measured
/// per coordinate j ([`PilotErrors`]):
///
/// - **Monte Carlo**: iterations per effective draw `τ_j(h) = κ_j h^{−γ}`, γ pooled over the
///   coordinates by least squares on log τ against log h (or fixed by the sampler's
///   [`Tunable::mixing_exponent`], 1 for the overdamped Langevin schemes), κ_j their mean
///   intercept, from the
///   pilots whose τ is resolved (at least 20 effective draws and two kept draws per τ) and below
///   the step of smallest τ (above it, near the stability limit, τ grows again); a coordinate
///   with no resolved τ takes the bound `τ < 2·thin` of the smallest step whose pilot explored
///   but mixed faster than its thinning resolves (before, the largest `τ h^γ` seen: on the
///   quickstart's SGHMC-CV one coordinate's κ came out 100× the others' from the largest step's
///   τ, and the predicted ESS was 364 for a run that measured 14 850). The run's
///   squared error of a mean is `τ_j/N` (N = kept draws × chains); the worst of the 2d reported
///   errors is counted as `K h^{−γ}/N`, `K = E[max of 2d squared normals] · max_j κ_j`.
/// - **Bias**: per coordinate and for each of the mean's and the sd's Stein moment error, the
///   slope `b` of the fit `e(h) = b h^{p/2} + c h^{p/2+1}` ([`first_order_slope`]; first-order
///   bias: p = 2) to the pilots at and above the smallest-KSD step (below it a pilot's error is
///   mostly that it has not explored yet) whose error is below 1 (beyond, the expansion in h has
///   broken down), weighted by each pilot's own Monte Carlo variance (`τ/N_pilot` for a mean,
///   half that for an sd). A slope counts when it stands out of its standard error at the
///   Bonferroni z over the 2d slopes (`Φ⁻¹(1 − 0.05/(4d))`, 3.35 for d = 31: pure Monte Carlo
///   noise creates a bias with probability at most 5 % across all of them), as
///   `β_j² = b̂² − Var(b̂)`. Then the check against the pilots directly (the unbroken run of
///   pilots up to the largest scored step whose errors all stand out of their noise with one
///   sign, at least two of them): β_j at least the run's smallest slope `|e|/h^{p/2}`; where no
///   slope of the run falls below the one before by more than their noise, at most its smallest
///   upper bound `(|e| + z·se)/h^{p/2}`.
///   The free second-order term keeps the growth near the stability limit from inflating β; the
///   rule it replaced (the mean of `(error² − variance)/h²` at the two smallest steps whose error
///   exceeded 2σ) took noise and that growth for first-order bias, and chose steps 1.4–2× below
///   the best of the validation grid at 5 000 × 4 draws.
///
/// Minimises `max_j β_j² h^p + K h^{−γ}/N` over `[smallest/8, largest]` of the scored steps.
/// `None` with fewer than three scored pilots; when no pilot showed bias (then the KSD fit
/// decides) the model has no step (`bias_seen` false) but predicts the Monte Carlo error.
fn error_model_step(
    trials: &[Trial],
    h_ksd: f64,
    pilot_draws: f64,
    thin: f64,
    run_draws: f64,
    p: i32,
    fixed_gamma: Option<f64>,
) -> Option<ErrorModel> {
    let ok: Vec<(f64, &PilotErrors)> = trials
        .iter()
        .filter_map(|t| t.errors.as_ref().map(|e| (t.step_size, e)))
        .filter(|(_, e)| e.tau.iter().all(|v| v.is_finite() && *v > 0.0))
        .collect();
    if ok.len() < 3 {
        return None;
    }
    let d = ok[0].1.tau.len();
    // A pilot explored a coordinate when it holds at least 20 effective draws of it; its
    // autocorrelation time is resolved when it also spans at least two kept (thinned) draws.
    let explored = |tau: f64| pilot_draws / tau >= 20.0;
    let reliable = |tau: f64| explored(tau) && tau >= 2.0 * thin;
    let mut kappa = vec![0.0; d];
    let mut counts = vec![0usize; d];
    // Per coordinate, the steps up to the one with the smallest τ (above it, near the stability
    // limit, τ grows again).
    let tau_top: Vec<f64> = (0..d)
        .map(|j| ok.iter().min_by(|a, b| a.1.tau[j].total_cmp(&b.1.tau[j])).map_or(f64::INFINITY, |o| o.0))
        .collect();
    let reliable_at = |j: usize, h: f64, tau: f64| reliable(tau) && h <= tau_top[j];
    // γ: the sampler's, else pooled over the coordinates by least squares on log τ against log h.
    let gamma = fixed_gamma.unwrap_or_else(|| {
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for j in 0..d {
            let pts: Vec<(f64, f64)> =
                ok.iter().filter(|(h, e)| reliable_at(j, *h, e.tau[j])).map(|(h, e)| (h.ln(), e.tau[j].ln())).collect();
            if pts.len() < 2 {
                continue;
            }
            let mx = pts.iter().map(|p| p.0).sum::<f64>() / pts.len() as f64;
            let my = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
            for (x, y) in &pts {
                sxy += (x - mx) * (y - my);
                sxx += (x - mx) * (x - mx);
            }
        }
        if sxx > 0.0 { (-sxy / sxx).clamp(0.25, 1.5) } else { 1.0 }
    });
    for j in 0..d {
        for (h, e) in &ok {
            if reliable_at(j, *h, e.tau[j]) {
                kappa[j] += e.tau[j].ln() + gamma * h.ln();
                counts[j] += 1;
            }
        }
        kappa[j] = if counts[j] > 0 {
            (kappa[j] / counts[j] as f64).exp()
        } else {
            // No resolved time. A pilot that explored (at least 20 effective draws) but mixed
            // faster than its thinning resolves (τ < 2·thin) bounds it: τ_j(h) < 2·thin, so
            // κ_j ≤ 2·thin·h^γ, tightest at the smallest such step. Else (and never above it)
            // the largest τ·h^γ seen.
            let seen = ok.iter().map(|(h, e)| e.tau[j] * h.powf(gamma)).fold(0.0, f64::max);
            ok.iter()
                .filter(|(_, e)| explored(e.tau[j]) && e.tau[j] < 2.0 * thin)
                .map(|(h, _)| 2.0 * thin * h.powf(gamma))
                .fold(seen, f64::min)
        };
    }
    // Bias: for each coordinate and each of the mean and sd errors, the slope b of the fit
    // e(h) = b·h^(p/2) + c·h^(p/2+1) to the errors at the steps at or above the smallest-KSD step
    // (below it a pilot's error is mostly that it has not explored yet) whose error is below 1
    // (beyond, the expansion in h has broken down), weighted by each pilot's own Monte Carlo
    // variance; counted when b̂ stands out of its standard error at the Bonferroni z over the 2d
    // slopes, as β² = b̂² − Var(b̂). No detected bias: 0.
    // The Bonferroni z of the runs' 95 % error bounds, over the same 2d means and sds.
    let z2 = crate::trace::diagnostics::bound_z(d).powi(2);
    let q = f64::from(p) / 2.0;
    // The pilots the fit and its check see: those at or above the smallest-KSD step.
    let above: Vec<&(f64, &PilotErrors)> = ok.iter().filter(|(h, _)| *h >= h_ksd).collect();
    // The Bonferroni z over all these pilots' 2d errors, for the check below.
    let z_all = crate::trace::diagnostics::normal_quantile(
        1.0 - (1.0 - crate::trace::diagnostics::BOUND_PROB) / (4.0 * (d * above.len().max(1)) as f64),
    );
    let mut beta2 = vec![0.0f64; d];
    for (j, b2) in beta2.iter_mut().enumerate() {
        for series in 0..2 {
            // (h, error, its Monte Carlo variance) per pilot, by increasing step.
            let points: Vec<(f64, f64, f64)> = above
                .iter()
                .map(|(h, e)| {
                    let noise = e.tau[j] / pilot_draws;
                    if series == 0 { (*h, e.mean[j], noise) } else { (*h, e.sd[j], 0.5 * noise) }
                })
                .filter(|(_, e, v)| e.is_finite() && v.is_finite() && *v > 0.0)
                .collect();
            let small: Vec<(f64, f64, f64)> = points.iter().copied().filter(|(_, e, _)| e.abs() < 1.0).collect();
            let mut fit = match first_order_slope(&small, q) {
                Some((b, var)) if b * b > z2 * var => b * b - var,
                _ => 0.0,
            };
            // The check against what the pilots measured directly: the unbroken run of pilots,
            // ending at the largest scored step, whose errors all stand out of their noise (at
            // z_all) with one sign. A bias that grows at least linearly (e(h)/h^q non-decreasing,
            // as for the Langevin schemes up to their stability limit) has β ≤ e/h^q at every
            // step, tightest at the run's lowest steps; when the run spans at least two pilots
            // (one alone at the top may be a breakdown near the stability limit), its smallest
            // slope |e|/h^q floors the fit (near the limit the slopes grow, so the smallest is
            // the lowest pilot's, within the convexity of one grid factor of β; where the bias
            // grows linearly, within the noise; where it grows more slowly, the largest pilot's,
            // below β), and where its slopes confirm that growth its smallest upper bound
            // (|e| + z·se)/h^q caps the fit.
            let significant = |&(_, e, v): &(f64, f64, f64)| e.abs() > z_all * v.sqrt();
            let sign = points.last().filter(|pt| significant(pt)).map(|pt| pt.1.signum());
            let run: Vec<(f64, f64, f64)> = match sign {
                Some(sign) => {
                    let n = points.iter().rev().take_while(|pt| significant(pt) && pt.1.signum() == sign).count();
                    points[points.len() - n..].to_vec()
                }
                None => Vec::new(),
            };
            if run.len() >= 2 {
                let slopes = |pad: f64| {
                    run.iter().map(|(h, e, v)| (e.abs() + pad * v.sqrt()) / h.powf(q)).fold(f64::INFINITY, f64::min)
                };
                // The cap only where the run itself shows the growth at least linear: no slope
                // falls below the one before it by more than their noise (HAMCMC's, whose
                // metric adapts to the step, can grow more slowly, and there a cap from the
                // larger steps would lower β and raise the step: on `tune_logistic`'s
                // condition-382 model 1.4x, its error 0.435 → 0.553 sd).
                let at_least_linear = run.windows(2).all(|w| {
                    let (s0, s1) = (w[0].1.abs() / w[0].0.powf(q), w[1].1.abs() / w[1].0.powf(q));
                    let se = (w[0].2 / w[0].0.powf(2.0 * q) + w[1].2 / w[1].0.powf(2.0 * q)).sqrt();
                    s1 >= s0 - z_all * se
                });
                if at_least_linear {
                    fit = fit.min(slopes(z_all).powi(2));
                }
                fit = fit.max(slopes(0.0).powi(2));
            }
            *b2 = b2.max(fit);
        }
    }
    // The worst coordinate's Monte Carlo variance, counted as if every one of the 2d reported
    // errors (means and sds) had it: K = E[max of 2d squared normals] · max_j κ_j.
    let kappa_max = kappa.iter().fold(0.0f64, |a, k| a.max(*k));
    let k_mc = expected_max_chi2(2 * d) * kappa_max;
    if beta2.iter().all(|b| *b == 0.0) {
        // No bias seen: no step from the model, but its Monte Carlo part still predicts the ESS.
        return Some(ErrorModel {
            step: f64::NAN,
            bias_seen: false,
            clamped: false,
            gamma,
            beta2: 0.0,
            k_mc,
            kappa_max,
        });
    }
    let b_max = beta2.iter().fold(0.0f64, |a, b| a.max(*b));
    let lo = ok.iter().map(|o| o.0).fold(f64::INFINITY, f64::min) / 8.0;
    let hi = ok.iter().map(|o| o.0).fold(0.0, f64::max);
    let objective = |h: f64| predicted_error2(b_max, k_mc, gamma, p, h, run_draws);
    let n = 400;
    let (i, step) = (0..=n)
        .map(|i| (i, lo * (hi / lo).powf(i as f64 / n as f64)))
        .min_by(|a, b| objective(a.1).total_cmp(&objective(b.1)))?;
    Some(ErrorModel { step, bias_seen: true, clamped: i == 0 || i == n, gamma, beta2: b_max, k_mc, kappa_max })
}

/// What [`tune`] and [`tune_rr`](crate::tune_rr) derive before their pilots.
pub(crate) struct Setup<S> {
    pub(crate) mode: Vec<f64>,
    pub(crate) curv: Curvature,
    pub(crate) centre: f64,
    pub(crate) scale: Vec<f64>,
    pub(crate) laplace: Laplace,
    /// The sampler the pilots run: the user's, whitened when chosen.
    pub(crate) base: S,
    pub(crate) whitening: Option<Arc<Whitening>>,
    pub(crate) preconditioning: String,
    pub(crate) cost: Cost,
}

/// Above this dimension [`Precondition::Auto`] whitens with a diagonal instead of a dense `T`.
pub const DENSE_WHITENING_MAX_DIM: usize = 1_000;

/// A sampler set up for the posterior's geometry, before any step is chosen: what [`tune`] does
/// before its pilots (mode, Hessian, curvature, whitening), for methods that choose their step
/// another way (e.g. [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Preconditioned<S> {
    /// The sampler, running in [`whitening`](Self::whitening)'s coordinates when there is one
    /// (its step unchanged).
    pub sampler: S,
    /// The mode (or the starting point, if [`TuneSettings::find_mode`] is off).
    pub mode: Vec<f64>,
    /// The curvature of `∇²U` at the mode.
    pub curvature: Curvature,
    /// The curvature the sampler sees: that of `Tᵀ ∇²U T` with a whitening, else
    /// [`curvature`](Self::curvature).
    pub whitened_curvature: Curvature,
    /// The whitening chosen by [`TuneSettings::precondition`], if any.
    pub whitening: Option<Arc<Whitening>>,
    /// Which preconditioning was chosen and why, its cost per step, and the condition number
    /// before and after, in words.
    pub preconditioning: String,
    /// Everything spent: mode, Hessian, curvature.
    pub cost: Cost,
}

/// The first stages of [`tune`] without its step selection: the mode, the Hessian there, its
/// curvature and the whitening [`TuneSettings::precondition`] chooses (see the
/// [module docs](self)), with `sampler` returned running in the whitened coordinates. Only
/// `find_mode`, `mode`, `curvature` and `precondition` of `settings` matter.
///
/// Errors: invalid settings or `theta0`; those of [`find_mode`] and [`curvature`].
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{tune::TuneSettings};
/// use sgmcmc::tune::precondition;
///
/// let model = LogisticRegression::synthetic(2_000, 3, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50))?;
/// let p = precondition(&model, &sgld, &[0.0; 3], &TuneSettings::default())?;
/// // Dense whitening by the Hessian at the mode: the sampler sees condition number 1.
/// let c = &p.whitened_curvature;
/// assert!((c.lambda_max / c.lambda_min.unwrap() - 1.0).abs() < 1e-8);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn precondition<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<Preconditioned<S>> {
    Ok(geometry(model, sampler, theta0, settings)?.0)
}

/// [`precondition`], plus the Hessian at the mode (dense up to [`DENSE_LAPLACE_MAX_DIM`]) and its
/// diagonal.
#[allow(clippy::type_complexity)]
fn geometry<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<(Preconditioned<S>, Option<Array2<f64>>, Vec<f64>)> {
    settings.validate()?;
    check_shape(model)?;
    check_len("theta0", model.dim(), theta0.len())?;
    if !all_finite(theta0) {
        return Err(Error::NonFiniteStart { what: "theta0" });
    }
    let mut cost = Cost::default();
    let mode = if settings.find_mode {
        let opt = find_mode(model, theta0, &settings.mode)?;
        cost += opt.cost;
        opt.theta.to_vec()
    } else {
        theta0.to_vec()
    };
    let d = mode.len();
    let exact_hvp = Hessian::new(model, &mode).exact;
    let mut hess_cost = Cost::default();
    let (dense, diag) = hessian_at_mode(model, &mode, &mut hess_cost)?;
    cost += hess_cost;
    let curv = match &dense {
        Some(h) => spectrum_of(h, settings, exact_hvp, hess_cost)?,
        None => {
            let c = curvature(model, &mode, &settings.curvature)?;
            cost += c.cost;
            c
        }
    };
    let (mut base, whitening, mut preconditioning) = choose_whitening(sampler, &mode, dense.as_ref(), &diag, settings)?;
    if let Some((fitted, why)) = base.fitted_to_scale(model)? {
        base = fitted;
        preconditioning.push_str("; ");
        preconditioning.push_str(&why);
    }
    // The curvature the (whitened) sampler sees: that of Tᵀ ∇²U T.
    let seen = match (&whitening, &dense) {
        (None, _) => curv.clone(),
        (Some(w), Some(h)) => spectrum_of(&w.congruence(h), settings, exact_hvp, Cost::default())?,
        (Some(w), None) => {
            let mut hess = Hessian::new(model, &mode);
            let (mut a, mut b) = (vec![0.0; d], vec![0.0; d]);
            let (lmin, lmax, it) = lanczos(d, &settings.curvature, 4, |v, out| {
                w.to_theta(v, &mut a);
                a.iter_mut().zip(w.centre()).for_each(|(a, c)| *a -= c);
                hess.apply(&a, &mut b)?;
                w.gradient_to_phi(&b, out);
                Ok(())
            })?;
            check_lambda_max(lmax)?;
            cost += hess.cost;
            Curvature { lambda_max: lmax, lambda_min: Some(lmin), iterations: it, exact_hvp, cost: hess.cost }
        }
    };
    if whitening.is_some() {
        preconditioning.push_str(&format!(
            "; whitened curvature [{:.3e}, {:.3e}] (condition {:.2e}, from {:.2e})",
            seen.lambda_min.unwrap_or(f64::NAN),
            seen.lambda_max,
            seen.lambda_max / seen.lambda_min.unwrap_or(f64::NAN),
            curv.lambda_max / curv.lambda_min.unwrap_or(f64::NAN),
        ));
    }
    let p = Preconditioned {
        sampler: base,
        mode,
        curvature: curv,
        whitened_curvature: seen,
        whitening,
        preconditioning,
        cost,
    };
    Ok((p, dense, diag))
}

/// [`geometry`], then the sampler's centre step (in the whitened coordinates) and the KSD's
/// scaling, with their cost.
pub(crate) fn setup<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<Setup<S>> {
    let (p, dense, diag) = geometry(model, sampler, theta0, settings)?;
    let Preconditioned {
        sampler: base,
        mode,
        curvature: curv,
        whitened_curvature: seen,
        whitening,
        preconditioning,
        mut cost,
    } = p;
    let centre = base.centre_step(model, &mode, &seen, &mut cost)?;
    let (scale, laplace) = ksd_scaling(dense.as_ref(), &diag);
    Ok(Setup { mode, curv, centre, scale, laplace, base, whitening, preconditioning, cost })
}

/// The [`Curvature`] of a dense symmetric matrix: exact eigenvalues up to
/// [`DENSE_WHITENING_MAX_DIM`], Lanczos on the matrix above it.
fn spectrum_of(h: &Array2<f64>, settings: &TuneSettings, exact_hvp: bool, cost: Cost) -> Result<Curvature> {
    if h.nrows() <= DENSE_WHITENING_MAX_DIM {
        return curvature_of_dense(h, true, exact_hvp, cost);
    }
    let (lmin, lmax, it) = lanczos(h.nrows(), &settings.curvature, 5, |v, out| {
        out.iter_mut().zip(h.outer_iter()).for_each(|(o, row)| *o = row.iter().zip(v).map(|(a, b)| a * b).sum());
        Ok(())
    })?;
    check_lambda_max(lmax)?;
    Ok(Curvature { lambda_max: lmax, lambda_min: Some(lmin), iterations: it, exact_hvp, cost })
}

/// The whitening [`TuneSettings::precondition`] asks for, the sampler running in it, and the
/// rule applied in words.
fn choose_whitening<S: Tunable>(
    sampler: &S,
    mode: &[f64],
    dense: Option<&Array2<f64>>,
    diag: &[f64],
    settings: &TuneSettings,
) -> Result<(S, Option<Arc<Whitening>>, String)> {
    let d = mode.len();
    if let Some(w) = sampler.current_whitening() {
        return Ok((sampler.clone(), Some(w.clone()), "the sampler's own whitening (kept)".into()));
    }
    if settings.precondition == Precondition::None {
        return Ok((sampler.clone(), None, "none (TuneSettings::precondition = None)".into()));
    }
    if sampler.whitened(None).is_none() {
        return Ok((sampler.clone(), None, "none (this sampler has its own preconditioner)".into()));
    }
    let diagonal = || -> Option<Whitening> {
        let scales: Vec<f64> = diag.iter().map(|h| 1.0 / h.sqrt()).collect();
        Whitening::diagonal(mode, &scales).ok()
    };
    let dense_w = || dense.and_then(|h| Whitening::from_hessian(mode, h).ok());
    let (w, note) = match settings.precondition {
        Precondition::Dense => match dense_w() {
            Some(w) => (Some(w), format!("dense (asked for): T Tᵀ = ∇²U(θ̂)⁻¹, {} multiply-adds per step", d * d)),
            None => {
                return Err(Error::invalid(
                    "precondition",
                    "Dense",
                    "the Hessian at the mode is not positive definite (or d is above DENSE_LAPLACE_MAX_DIM): use Auto or Diagonal",
                ));
            }
        },
        Precondition::Diagonal => match diagonal() {
            Some(w) => (Some(w), format!("diagonal (asked for): 1/√∇²U(θ̂)ⱼⱼ, {} multiply-adds per step", 2 * d)),
            None => {
                return Err(Error::invalid(
                    "precondition",
                    "Diagonal",
                    "a diagonal entry of the Hessian at the mode is not positive: use Auto or None",
                ));
            }
        },
        _ => {
            if let Some(w) = (d <= DENSE_WHITENING_MAX_DIM).then(dense_w).flatten() {
                (
                    Some(w),
                    format!(
                        "dense (auto: d = {d} ≤ {DENSE_WHITENING_MAX_DIM} and ∇²U(θ̂) positive definite): T Tᵀ = ∇²U(θ̂)⁻¹, \
                         {} multiply-adds per step",
                        d * d
                    ),
                )
            } else if let Some(w) = diagonal() {
                (
                    Some(w),
                    format!(
                        "diagonal (auto: {}): 1/√∇²U(θ̂)ⱼⱼ, {} multiply-adds per step",
                        if d > DENSE_WHITENING_MAX_DIM {
                            format!("d = {d} > {DENSE_WHITENING_MAX_DIM}")
                        } else {
                            "∇²U(θ̂) not positive definite".to_string()
                        },
                        2 * d
                    ),
                )
            } else {
                (None, "none (auto: a diagonal entry of ∇²U(θ̂) is not positive)".to_string())
            }
        }
    };
    let w = w.map(Arc::new);
    let base = sampler.whitened(w.clone()).expect("checked above");
    Ok((base, w, note))
}

/// The Hessian at the mode: dense (d Hessian-vector products) up to
/// [`DENSE_LAPLACE_MAX_DIM`], and its diagonal (columns one at a time above it).
fn hessian_at_mode<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    cost: &mut Cost,
) -> Result<(Option<Array2<f64>>, Vec<f64>)> {
    let d = mode.len();
    if d <= DENSE_LAPLACE_MAX_DIM {
        let h = dense_hessian(model, mode, cost)?;
        let diag = (0..d).map(|j| h[[j, j]]).collect();
        return Ok((Some(h), diag));
    }
    let mut diag = vec![0.0; d];
    hessian_columns(model, mode, cost, |j, col| diag[j] = col[j])?;
    Ok((None, diag))
}

/// One pilot: a run from the mode at `step`, its draws thinned and scored by KSD with exact
/// scores.
fn pilot<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    mode: &[f64],
    (scale, laplace): (&[f64], &Laplace),
    step: f64,
    index: u64,
    settings: &TuneSettings,
) -> Result<Trial> {
    let s = sampler.with_step_size(step)?;
    let kept = settings.pilot_iterations - settings.pilot_burn_in;
    let rs = settings.pilot_run(settings.pilot_chains, settings.pilot_thin(), index, 0);
    let out = match Runner::new(model, &s).start(mode).settings(rs).run() {
        Ok(out) => out,
        Err(e) => {
            if e.is_divergence() {
                return Ok(Trial {
                    step_size: step,
                    ksd: None,
                    ksd_se: None,
                    failure: Some(e.to_string()),
                    cost: Cost::default(),
                    errors: None,
                });
            }
            return Err(e);
        }
    };
    let mut cost = out.cost - out.setup_cost;
    let mut draws = out.estimate.stacked_draws()?;
    let n = draws.nrows();
    cost.datum_gradients += (n * model.n_data()) as u64;
    let Some(mut scores) = exact_scores(model, draws.view()) else {
        return Ok(Trial {
            step_size: step,
            ksd: None,
            ksd_se: None,
            failure: Some("non-finite score at a draw".into()),
            cost,
            errors: None,
        });
    };
    // The Stein moment terms on the raw draws, then the IMQ KSD on whitened coordinates
    // x'ⱼ = (xⱼ − θ̂ⱼ)·√Hⱼⱼ, whose scores are sⱼ/√Hⱼⱼ.
    let chains = settings.pilot_chains;
    let per = n / chains;
    let rows = |c: usize| ndarray::Slice::from(c * per..(c + 1) * per);
    // The pooled draws' moment vectors serve the moment term and the error model.
    let (mean, second) = laplace.moment_vectors(draws.view(), scores.view(), mode);
    let moments: Vec<f64> = if settings.moment_weight > 0.0 {
        let stacked = std::iter::once(moments_norm2(&(mean.clone(), second.clone())));
        let each = (0..chains).map(|c| {
            laplace.moment_discrepancy2(
                draws.slice_axis(ndarray::Axis(0), rows(c)),
                scores.slice_axis(ndarray::Axis(0), rows(c)),
                mode,
            )
        });
        stacked.chain(each).map(|m| settings.moment_weight * m).collect()
    } else {
        vec![0.0; chains + 1]
    };
    let errors = {
        let d = draws.ncols();
        let iterations = (kept * chains as u64) as f64;
        let tau = (0..d)
            .map(|j| {
                let x = Array2::from_shape_fn((chains, per), |(c, i)| draws[[c * per + i, j]]);
                let ess = crate::trace::diagnostics::ess_mean(x.view()).unwrap_or(f64::NAN);
                iterations / ess
            })
            .collect();
        PilotErrors { tau, mean, sd: second.iter().map(|m| m / 2.0).collect() }
    };
    for mut row in draws.outer_iter_mut() {
        row.iter_mut().zip(scale).zip(mode).for_each(|((x, s), m)| *x = (*x - m) * s);
    }
    for mut row in scores.outer_iter_mut() {
        row.iter_mut().zip(scale).for_each(|(v, s)| *v /= s);
    }
    let discrepancy = |x: ndarray::ArrayView2<'_, f64>, s: ndarray::ArrayView2<'_, f64>, m: f64| -> Result<f64> {
        let imq = ksd_imq(x, s, None, settings.ksd)?;
        Ok((imq * imq + m).sqrt())
    };
    let ksd = discrepancy(draws.view(), scores.view(), moments[0])?;
    let ksd_se = if chains > 1 {
        let each: Vec<f64> = (0..chains)
            .map(|c| {
                discrepancy(
                    draws.slice_axis(ndarray::Axis(0), rows(c)),
                    scores.slice_axis(ndarray::Axis(0), rows(c)),
                    moments[c + 1],
                )
            })
            .collect::<Result<_>>()?;
        let m = each.iter().sum::<f64>() / chains as f64;
        let var = each.iter().map(|k| (k - m).powi(2)).sum::<f64>() / (chains - 1) as f64;
        Some((var / chains as f64).sqrt())
    } else {
        None
    };
    Ok(Trial { step_size: step, ksd: Some(ksd), ksd_se, failure: None, cost, errors: Some(errors) })
}

/// Above this dimension the Laplace covariance of the moment terms is taken diagonal
/// (`1/Hⱼⱼ`) instead of the dense `∇²U(θ̂)⁻¹` (d² numbers).
const DENSE_LAPLACE_MAX_DIM: usize = 2_000;

/// The Laplace approximation at the mode, `Σ̂ = ∇²U(θ̂)⁻¹`, that the Stein moment terms use.
pub(crate) struct Laplace {
    /// `Σ̂`, or `None` when it is taken diagonal (`1/Hⱼⱼ`: too large, or H not positive
    /// definite).
    cov: Option<Array2<f64>>,
    /// `√Σ̂ⱼⱼ`.
    pub(crate) sd: Vec<f64>,
}

impl Laplace {
    /// `Σⱼ (m_j² + M_jj²/4)/d` on draws x with scores s (rows), where with `v = Σ̂ s` and
    /// `u = x − θ̂`: `m_j = mean(v_j)/σ_j` and `M_jj = mean(v_j u_j)/σ_j² + 1`. `M_jj/2` is, to
    /// first order, the relative error of the sd, so means and sds count equally in sd units.
    ///
    /// These are the Stein identities `E[A g] = 0` (exact under the posterior, whatever its shape)
    /// of the test functions `g = Σ̂ e_j` and `g = Σ̂ e_j u_j`, scaled by the Laplace sds: for a
    /// Gaussian posterior equal to its Laplace approximation, `m_j` is the error of the mean of
    /// coordinate j in posterior sds and `M_jj` the relative error of its second moment about θ̂.
    /// It is the squared Stein discrepancy of a (matrix-valued) linear kernel, so a kernel Stein
    /// discrepancy of the IMQ kernel plus this term is one too.
    fn moment_discrepancy2(
        &self,
        draws: ndarray::ArrayView2<'_, f64>,
        scores: ndarray::ArrayView2<'_, f64>,
        mode: &[f64],
    ) -> f64 {
        moments_norm2(&self.moment_vectors(draws, scores, mode))
    }

    /// The vectors `(m, M_diag)` of [`moment_discrepancy2`](Self::moment_discrepancy2). Both are
    /// linear in the sample's measure (`M_jj − 1` is), so those of a signed combination of samples
    /// are the same combination of theirs.
    pub(crate) fn moment_vectors(
        &self,
        draws: ndarray::ArrayView2<'_, f64>,
        scores: ndarray::ArrayView2<'_, f64>,
        mode: &[f64],
    ) -> (Vec<f64>, Vec<f64>) {
        let (n, d) = draws.dim();
        let mut m = vec![0.0; d];
        let mut mm = vec![0.0; d];
        let mut v = vec![0.0; d];
        // From KSD_GRAM_MIN_DIM, all the rows' Σ̂ s at once: a matrix product (Σ̂ is symmetric).
        let product = match &self.cov {
            Some(c) if d >= crate::trace::diagnostics::KSD_GRAM_MIN_DIM => {
                let mut out = Array2::zeros((n, d));
                ndarray::linalg::general_mat_mul(1.0, &scores, c, 0.0, &mut out);
                Some(out)
            }
            _ => None,
        };
        for (i, (x, s)) in draws.outer_iter().zip(scores.outer_iter()).enumerate() {
            match (&product, &self.cov) {
                (Some(p), _) => v.iter_mut().zip(p.row(i)).for_each(|(v, p)| *v = *p),
                (None, Some(c)) => v.iter_mut().zip(c.outer_iter()).for_each(|(v, row)| *v = row.dot(&s)),
                (None, None) => v.iter_mut().zip(&s).zip(&self.sd).for_each(|((v, s), sd)| *v = s * sd * sd),
            }
            for j in 0..d {
                m[j] += v[j];
                mm[j] += v[j] * (x[j] - mode[j]);
            }
        }
        let n = n as f64;
        let means = (0..d).map(|j| m[j] / (n * self.sd[j])).collect();
        let seconds = (0..d).map(|j| mm[j] / (n * self.sd[j] * self.sd[j]) + 1.0).collect();
        (means, seconds)
    }
}

/// `Σⱼ (m_j² + M_jj²/4)/d` of moment vectors `(m, M_diag)`.
pub(crate) fn moments_norm2((m, mm): &(Vec<f64>, Vec<f64>)) -> f64 {
    m.iter().zip(mm).map(|(a, b)| a * a + 0.25 * b * b).sum::<f64>() / m.len() as f64
}

/// Exact scores `−∇U` (full data, prior included) at each row of `draws`; `None` if one is not
/// finite.
pub(crate) fn exact_scores<M: Model + ?Sized>(model: &M, draws: ndarray::ArrayView2<'_, f64>) -> Option<Array2<f64>> {
    let (n, d) = draws.dim();
    let all: Vec<usize> = (0..model.n_data()).collect();
    let mut scores = Array2::zeros((n, d));
    let (mut g, mut tmp) = (vec![0.0; d], vec![0.0; d]);
    for (i, row) in draws.outer_iter().enumerate() {
        let x = row.to_vec();
        model.grad_data_sum(&x, &all, &mut g).ok()?;
        model.grad_prior(&x, &mut tmp).ok()?;
        for j in 0..d {
            scores[[i, j]] = -(g[j] + tmp[j]);
        }
    }
    scores.iter().all(|v| v.is_finite()).then_some(scores)
}

impl Laplace {
    /// `n` draws `θ̂ + L z` from `N(θ̂, Σ̂)` (`Σ̂ = L Lᵀ`; diagonal: `σ ⊙ z`), `z` from the seeded
    /// stream.
    pub(crate) fn draws(&self, mode: &[f64], n: usize, seed: u64) -> Result<Vec<Vec<f64>>> {
        let d = mode.len();
        let l = match &self.cov {
            Some(c) => Some(crate::numeric::linalg::cholesky_lower("Laplace covariance", c)?),
            None => None,
        };
        let mut rng = stream(seed, &[0x6c61_706c]);
        let mut z = vec![0.0; d];
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            fill_standard_normal(&mut rng, &mut z);
            let x: Vec<f64> = match &l {
                Some(l) => (0..d).map(|i| mode[i] + (0..=i).map(|k| l[[i, k]] * z[k]).sum::<f64>()).collect(),
                None => (0..d).map(|i| mode[i] + self.sd[i] * z[i]).collect(),
            };
            out.push(x);
        }
        Ok(out)
    }
}

/// `√(∇²U(θ̂))ⱼⱼ` for each coordinate: the IMQ KSD is computed on coordinates scaled to unit
/// posterior curvature, so that the kernel's width (c = 1) is on the posterior's own scale in
/// every direction. Also the Laplace covariance for the moment terms (dense when the Hessian is
/// dense and positive definite, else diagonal).
fn ksd_scaling(dense: Option<&Array2<f64>>, diag: &[f64]) -> (Vec<f64>, Laplace) {
    let diag_of = |hjj: f64| if hjj > 0.0 && hjj.is_finite() { hjj } else { 1.0 };
    let scale: Vec<f64> = diag.iter().map(|&h| diag_of(h).sqrt()).collect();
    if let Some(Ok(cov)) = dense.map(|h| crate::numeric::linalg::spd_inverse("Hessian at the mode", h)) {
        let d = diag.len();
        return (scale, Laplace { sd: (0..d).map(|j| cov[[j, j]].sqrt()).collect(), cov: Some(cov) });
    }
    let laplace = Laplace { sd: scale.iter().map(|s| 1.0 / s).collect(), cov: None };
    (scale, laplace)
}

/// `n` starting points spread around the mode, for chains whose R̂ must be able to see that they
/// did not mix: `θ = mode + scale · L⁻ᵀ z`, `z ~ N(0, I)` from the seeded stream, where
/// `∇²U(mode) = L Lᵀ` — draws from the Laplace approximation `N(mode, scale² ∇²U⁻¹)`. The Hessian
/// comes from d Hessian-vector products (the model's, or central differences of full gradients).
/// `scale = 2` gives the over-dispersed starts Gelman & Rubin recommend.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{tune::dispersed_starts, find_mode};
///
/// let model = LogisticRegression::synthetic(1_000, 3, 10.0, 1)?;
/// let mode = find_mode(&model, &[0.0; 3], &ModeSettings::default())?.theta;
/// let starts = dispersed_starts(&model, &mode, 4, 2.0, 7)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, n_chains: 4, ..Default::default() };
/// let out = Runner::new(&model, &sgld).starts(&starts).settings(settings).run()?;
/// assert_eq!(out.chains.len(), 4);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
///
/// Errors: [`Error::DimensionMismatch`] / [`Error::NonFiniteStart`] for a bad mode;
/// [`Error::InvalidParameter`] for `n = 0` or a non-positive `scale`; a linear-algebra error if
/// the Hessian at `mode` is not positive definite (not a mode).
pub fn dispersed_starts<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    n: usize,
    scale: f64,
    seed: u64,
) -> Result<Vec<Vec<f64>>> {
    check_shape(model)?;
    let d = model.dim();
    check_len("mode", d, mode.len())?;
    if !all_finite(mode) {
        return Err(Error::NonFiniteStart { what: "mode" });
    }
    if n == 0 {
        return Err(Error::invalid("n", n, "must be >= 1"));
    }
    crate::error::check_positive("scale", scale)?;
    let h = dense_hessian(model, mode, &mut Cost::default())?;
    let l = crate::numeric::linalg::cholesky_lower("Hessian at the mode (for dispersed starts)", &h)?;
    let mut rng = stream(seed, &[0x6469_7370]);
    let mut z = vec![0.0; d];
    let mut starts = Vec::with_capacity(n);
    for _ in 0..n {
        fill_standard_normal(&mut rng, &mut z);
        // Back-substitution Lᵀ x = z.
        let mut x = vec![0.0; d];
        for i in (0..d).rev() {
            let s: f64 = ((i + 1)..d).map(|k| l[[k, i]] * x[k]).sum();
            x[i] = (z[i] - s) / l[[i, i]];
        }
        starts.push(mode.iter().zip(&x).map(|(m, x)| m + scale * x).collect());
    }
    Ok(starts)
}

#[cfg(test)]
mod tests {
    /// The suggested length (see `longer`) is one at which the error model's own accuracy step
    /// predicts the ESS `Objective::Convergence` asks, within the bisection's 1/64 and the
    /// rounding to two digits of the shortest such length; absurd plans do not overflow.
    #[test]
    fn the_suggested_length_converges_by_the_model_and_is_not_much_longer() {
        let m = ErrorModel {
            step: f64::NAN,
            bias_seen: true,
            clamped: false,
            gamma: 1.0,
            beta2: 1.0,
            k_mc: 8.0,
            kappa_max: 2.0,
        };
        let planned = PlannedRun::new(1_000, 4);
        let ok = |iterations: u64| {
            let p = PlannedRun { iterations, ..planned };
            m.min_ess(m.accuracy_step(p.draws()), p.draws()) >= convergence_ess(&p, 3)
        };
        assert!(!ok(1_000));
        let said = longer(&Some(m), &planned, 3);
        let n: u64 = said.split("to about ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
        println!("{said}");
        assert!(ok(n), "{n}");
        assert!(!ok((0.85 * n as f64) as u64), "{n}");
        for iterations in [1, u64::MAX / 4, u64::MAX] {
            let s = longer(&Some(ErrorModel { ..m }), &PlannedRun::new(iterations, 4), 3);
            println!("{iterations}: {s}");
        }
        assert_eq!(longer(&Some(ErrorModel { bias_seen: false, ..m }), &planned, 3), "");
        assert_eq!(longer(&None, &planned, 3), "");
    }

    use super::*;

    #[test]
    fn the_fit_recovers_the_minimiser_of_its_model() {
        // D²(h) = a/h + b h² + c exactly: minimiser (a/2b)^{1/3}.
        let (a, b, c) = (3.0, 5.0, 0.2);
        let points: Vec<(f64, f64)> =
            (-6..=2).map(|k| 2f64.powi(k)).map(|h| (h, (a / h + b * h * h + c).sqrt())).collect();
        let h = discrepancy_fit_minimiser(&points, 0.25).unwrap();
        let exact = (a / (2.0 * b)).cbrt();
        assert!((h / exact - 1.0).abs() < 1e-10, "{h} vs {exact}");
        // D² = 2/h falls all the way: no interior minimiser (none, or the largest step); too few
        // points: none.
        let falling: Vec<(f64, f64)> = (0..6).map(|k| 2f64.powi(k)).map(|h| (h, (2.0 / h).sqrt())).collect();
        assert!(discrepancy_fit_minimiser(&falling, 1.0).is_none_or(|h| h == 32.0));
        assert!(discrepancy_fit_minimiser(&points[..3], 1.0).is_none());
    }

    /// `E[max of k squared standard normals]`: 1 for k = 1, `1 + 2/π` for k = 2, to 1e-4 (the
    /// midpoint rule's error at the integrand's square-root corner at 0 is about 1e-5; the value
    /// only weights a prediction).
    #[test]
    fn expected_max_of_squared_normals() {
        assert!((expected_max_chi2(1) - 1.0).abs() < 1e-4, "{}", expected_max_chi2(1));
        let two = 1.0 + 2.0 / std::f64::consts::PI;
        assert!((expected_max_chi2(2) - two).abs() < 1e-4, "{}", expected_max_chi2(2));
    }

    /// A scored pilot at step h that measured `errors`.
    fn pilot_trial(h: f64, errors: PilotErrors) -> Trial {
        Trial { step_size: h, ksd: Some(1.0), ksd_se: None, failure: None, cost: Cost::default(), errors: Some(errors) }
    }

    /// Pilots whose per-coordinate autocorrelation times are exactly `c_j/h` and whose sd error is
    /// exactly `β h` (no noise) up to a second-order term `−β h²/2` and a breakdown at the
    /// largest step: the error model recovers γ = 1 and β² (the fit's slope, less its variance,
    /// which pilots of 720 000 draws make negligible), and its step is the analytic minimiser of
    /// `β² h² + K/(h N)`, `(K/(2 β² N))^{1/3}`, to the search grid's resolution; a pilot below
    /// the smallest-KSD step that looks biased (one that has not explored) is ignored; with no
    /// bias seen anywhere there is no model step.
    #[test]
    fn the_error_model_recovers_a_known_error_curve() {
        let (c, beta, n_pilot, n_run, thin) = ([2.0, 3.0], 4.0, 720_000.0, 20_000.0, 9.0);
        let steps: Vec<f64> = (0..10).map(|k| 1e-3 * 2f64.powi(k)).collect();
        let trial = |h: f64, sd_err: f64, mean_err: f64| {
            pilot_trial(
                h,
                PilotErrors {
                    tau: c.iter().map(|cj| cj / h).collect(),
                    mean: vec![mean_err; 2],
                    sd: vec![sd_err, 0.5 * sd_err],
                },
            )
        };
        // The smallest step also shows a large "bias": its pilot has not explored. The largest
        // has broken down (an sd error of 300 %), which the fit must leave out.
        let sd_err = |h: f64| if h == steps[9] { -3.0 } else { beta * h * (1.0 - h / 2.0) };
        let trials: Vec<Trial> =
            steps.iter().map(|&h| trial(h, sd_err(h), if h == steps[0] { 0.9 } else { 0.0 })).collect();
        let h_ksd = steps[2];
        let m = error_model_step(&trials, h_ksd, n_pilot, thin, n_run, 2, None).expect("a model");
        assert!((m.gamma - 1.0).abs() < 1e-9, "gamma {}", m.gamma);
        let beta2 = beta * beta;
        assert!((m.beta2 / beta2 - 1.0).abs() < 1e-3, "beta2 {} vs {beta2}", m.beta2);
        let k = expected_max_chi2(4) * c[1];
        assert!((m.k_mc / k - 1.0).abs() < 1e-9, "K {} vs {k}", m.k_mc);
        let exact = (k / (2.0 * beta2 * n_run)).cbrt();
        let grid_ratio = (steps[9] / (steps[0] / 8.0)).powf(1.0 / 400.0);
        assert!((m.step / exact).ln().abs() <= grid_ratio.ln(), "step {} vs {exact}", m.step);
        assert!(!m.clamped);
        // No bias anywhere: no model step.
        let flat: Vec<Trial> = steps.iter().map(|&h| trial(h, 0.0, 0.0)).collect();
        let m = error_model_step(&flat, h_ksd, n_pilot, thin, n_run, 2, None).expect("a model");
        assert!(!m.bias_seen && m.step.is_nan());
    }

    /// Pilots whose errors are pure Monte Carlo noise at the variances the model assumes
    /// (`τ/N_pilot` for a mean, half that for an sd) on a d = 31 posterior: the error model must
    /// not see bias in them (at most 5 % of replicates, by its Bonferroni threshold; 200
    /// replicates, so at most 20 — P(more) < 0.002 at a 5 % rate). The 2σ rule it replaced saw
    /// bias in nearly every replicate. With a real first-order bias β h in one coordinate's sd
    /// under the same noise, the chosen step is the analytic minimiser of `β² h² + K h^{-1}/N`
    /// to within 25 % in the median.
    #[test]
    fn pilot_noise_is_not_taken_for_bias() {
        let (d, n_pilot, n_run, thin, reps) = (31, 7_200.0, 20_000.0, 1.0, 200);
        let steps: Vec<f64> = (0..8).map(|k| 2f64.powi(k) / 64.0).collect();
        let h_ksd = steps[2];
        let c: Vec<f64> = (0..d).map(|j| 1.0 + 2.0 * j as f64 / (d - 1) as f64).collect();
        let mut rng = stream(31, &[7]);
        let mut z = vec![0.0; 2 * d];
        let mut trials_with = |beta: f64, rng: &mut _| -> Vec<Trial> {
            steps
                .iter()
                .map(|&h| {
                    fill_standard_normal(rng, &mut z);
                    let tau: Vec<f64> = c.iter().map(|cj| cj / h).collect();
                    let mean = (0..d).map(|j| (tau[j] / n_pilot).sqrt() * z[j]).collect();
                    let sd = (0..d)
                        .map(|j| (0.5 * tau[j] / n_pilot).sqrt() * z[d + j] + if j == 0 { beta * h } else { 0.0 })
                        .collect();
                    pilot_trial(h, PilotErrors { tau, mean, sd })
                })
                .collect()
        };
        let (mut false_bias, mut two_sigma) = (0, 0);
        for _ in 0..reps {
            let trials = trials_with(0.0, &mut rng);
            false_bias +=
                error_model_step(&trials, h_ksd, n_pilot, thin, n_run, 2, None).is_some_and(|m| m.bias_seen) as usize;
            two_sigma += trials.iter().filter(|t| t.step_size >= h_ksd).any(|t| {
                let e = t.errors.as_ref().expect("errors");
                (0..d).any(|j| {
                    e.mean[j].powi(2) > 4.0 * e.tau[j] / n_pilot || e.sd[j].powi(2) > 4.0 * 0.5 * e.tau[j] / n_pilot
                })
            }) as usize;
        }
        println!("bias seen in pure noise: {false_bias} of {reps} replicates (the 2σ rule: {two_sigma})");
        assert!(false_bias <= 20, "{false_bias} of {reps}");
        assert!(two_sigma >= 190, "the 2σ rule's false detections: {two_sigma}");
        let beta = 0.5;
        let k = expected_max_chi2(2 * d) * c[d - 1];
        let exact = (k / (2.0 * beta * beta * n_run)).cbrt();
        let mut ratios: Vec<f64> = (0..reps)
            .map(|_| {
                let trials = trials_with(beta, &mut rng);
                error_model_step(&trials, h_ksd, n_pilot, thin, n_run, 2, None).map_or(f64::NAN, |m| m.step / exact)
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let median = ratios[reps / 2];
        println!(
            "step / analytic optimum with β = {beta}: median {median:.3}, range {:.3}–{:.3}",
            ratios[0],
            ratios[reps - 1]
        );
        assert!((median.ln()).abs() < 1.25f64.ln(), "median {median}");
    }

    /// Pilots shaped like pSGLD's at N/n = 200 (no gradient-noise correction): every sd error
    /// grows as `−β h` (β = 4e4) from the smallest step on, with the autocorrelation times and
    /// the Monte Carlo noise those pilots measured (τ ≈ 110–310 at 2e-5, 3 600 kept draws), so
    /// the steps whose error is below 1 are the noisy small ones. The fit alone took that growth
    /// for second-order and returned β ≈ 3e2 (a step with variances 5.7x the posterior's); the
    /// floor from the run of significant pilots must keep β within a factor 2 of the truth in
    /// every one of 100 replicates (the cap too: without it the noisy fit put β² at 34x the
    /// truth in one replicate), and the step within 2x of the analytic optimum
    /// `(K/(2 β² N))^{1/3}`.
    #[test]
    fn a_bias_seen_from_the_smallest_steps_on_is_not_fitted_away() {
        let (d, n_pilot, n_run, thin, reps, beta) = (3, 3_600.0, 200_000.0, 1.0, 100, 4e4);
        let c = [6.3e-3, 2.3e-3, 2.2e-3];
        let steps: Vec<f64> = (0..11).map(|k| 2.5e-6 * 2f64.powi(k)).collect();
        let mut rng = stream(43, &[1]);
        let mut z = vec![0.0; 2 * d];
        let k = expected_max_chi2(2 * d) * c[0];
        let exact = (k / (2.0 * beta * beta * n_run)).cbrt();
        let (mut lo, mut hi, mut worst_step) = (f64::INFINITY, 0.0f64, 1.0f64);
        for _ in 0..reps {
            let trials: Vec<Trial> = steps
                .iter()
                .map(|&h| {
                    fill_standard_normal(&mut rng, &mut z);
                    let tau: Vec<f64> = c.iter().map(|cj| cj / h).collect();
                    let mean = (0..d).map(|j| (tau[j] / n_pilot).sqrt() * z[j]).collect();
                    let sd = (0..d).map(|j| (0.5 * tau[j] / n_pilot).sqrt() * z[d + j] - beta * h).collect();
                    pilot_trial(h, PilotErrors { tau, mean, sd })
                })
                .collect();
            let m = error_model_step(&trials, steps[0], n_pilot, thin, n_run, 2, Some(1.0)).expect("a model");
            assert!(m.bias_seen);
            let r = m.beta2 / (beta * beta);
            lo = lo.min(r);
            hi = hi.max(r);
            let s = m.step / exact;
            if (s.ln()).abs() > worst_step.ln().abs() {
                worst_step = s;
            }
        }
        println!("β² / truth over {reps} replicates: {lo:.3}–{hi:.3}; worst step / optimum {worst_step:.3}");
        assert!(lo >= 0.25 && hi <= 4.0, "β² / truth {lo}–{hi}");
        assert!(worst_step.ln().abs() <= 2f64.ln(), "step / optimum {worst_step}");
    }

    /// A coordinate whose pilots all mixed faster than the thinning resolves (τ < 2·thin at
    /// every explored step), with one large τ at the largest step (as SGHMC-CV's pilots showed
    /// near a resonance): its κ is the bound `2·thin·h` of the smallest such step, not the
    /// largest `τ h` seen (100× too large), so the worst coordinate stays the resolved one.
    #[test]
    fn an_unresolved_autocorrelation_time_is_bounded_by_the_thinning() {
        let (n_pilot, n_run, thin) = (7_200.0, 80_000.0, 9.0);
        let steps: Vec<f64> = (0..8).map(|k| 2f64.powi(k) / 64.0).collect();
        let trials: Vec<Trial> = steps
            .iter()
            .map(|&h| {
                pilot_trial(
                    h,
                    PilotErrors {
                        // Coordinate 0: τ = 0.3/h, resolved (≥ 18) only at the smallest step.
                        // Coordinate 1: τ = 8 everywhere but 15 at the largest step.
                        tau: vec![0.3 / h, if h == steps[7] { 15.0 } else { 8.0 }],
                        mean: vec![0.0; 2],
                        sd: vec![0.0; 2],
                    },
                )
            })
            .collect();
        let m = error_model_step(&trials, steps[2], n_pilot, thin, n_run, 2, None).expect("a model");
        assert!(!m.bias_seen);
        assert!((m.gamma - 1.0).abs() < 1e-12, "gamma {}", m.gamma);
        // κ₀ = 0.3 (resolved); κ₁ ≤ 2·9·(1/64) = 0.28125 (the old fallback: 15·2 = 30).
        assert!((m.kappa_max - 0.3).abs() < 1e-12, "kappa_max {}", m.kappa_max);
        let ess = m.min_ess(0.1, n_run);
        assert!((ess - n_run / 3.0).abs() < 1e-6, "predicted ESS {ess}");
    }

    /// Pilots of an overdamped scheme whose true autocorrelation times are `c_j/h`, but whose
    /// estimates at the two smallest resolved steps run 40 % low (as the ESS estimates of short
    /// pilot chains with few effective draws do): the fitted γ comes out below 1 and, carried to
    /// a step 10× below the pilots, predicts an ESS more than 1.3× the true one (3.0×); with the
    /// sampler's exponent fixed at 1 the low estimates enter only κ's geometric mean over the
    /// five resolved steps of the slowest coordinate, and the prediction is `0.6^(−2/5)` = 1.23×.
    #[test]
    fn a_fixed_mixing_exponent_extrapolates_to_small_steps() {
        let (c, n_pilot, n_run, thin) = ([2.0, 3.0], 7_200.0, 2_000_000.0, 9.0);
        let steps: Vec<f64> = (0..8).map(|k| 2f64.powi(k) / 128.0).collect();
        let trials: Vec<Trial> = steps
            .iter()
            .map(|&h| {
                let low = if h < 3.0 / 128.0 { 0.6 } else { 1.0 };
                pilot_trial(
                    h,
                    PilotErrors {
                        tau: c.iter().map(|cj| low * cj / h).collect(),
                        mean: vec![0.0; 2],
                        sd: vec![0.0; 2],
                    },
                )
            })
            .collect();
        let h = steps[0] / 10.0;
        let truth = n_run / (c[1] / h);
        let fitted = error_model_step(&trials, steps[2], n_pilot, thin, n_run, 2, None).expect("a model");
        let fixed = error_model_step(&trials, steps[2], n_pilot, thin, n_run, 2, Some(1.0)).expect("a model");
        let (pf, px) = (fitted.min_ess(h, n_run) / truth, fixed.min_ess(h, n_run) / truth);
        println!("predicted / true ESS 10x below the pilots: fitted γ {:.3} → {pf:.3}; γ = 1 → {px:.3}", fitted.gamma);
        assert!(fitted.gamma < 0.95, "fitted γ {}", fitted.gamma);
        assert!(pf > 1.3, "fitted {pf}");
        assert!((px / 0.6f64.powf(-0.4) - 1.0).abs() < 1e-9, "fixed {px}");
        assert_eq!(fixed.gamma, 1.0);
    }

    /// Chains that have mixed still show a split-R̂ above 1 from their finite length: d = 31
    /// independent stationary AR(1) coordinates (ρ = 0.9, τ = 19), 4 chains of 4 000 draws
    /// (bulk ESS about 842), 100 replicates. The mean over replicates of the largest split-R̂
    /// (bulk and folded, `diagnostics::rhat`) less 1 is within 25 % of `predicted_max_rhat`'s
    /// at the chains' ESS (the band is the approximation's, set before the run: independent
    /// bulk and folded values, a χ² spread of half-chain means); `ess_for_rhat` inverts it.
    #[test]
    fn the_predicted_rhat_matches_mixed_chains() {
        let (d, chains, n, rho, reps) = (31, 4, 4_000usize, 0.9f64, 100);
        let tau = (1.0 + rho) / (1.0 - rho);
        let planned = PlannedRun::new(n as u64, chains);
        let predicted = predicted_max_rhat((chains * n) as f64 / tau, &planned, d);
        let mut rng = stream(41, &[3]);
        let mut z = vec![0.0; n];
        let (mut sum, mut above) = (0.0, 0);
        for _ in 0..reps {
            let mut worst = 1.0f64;
            for _ in 0..d {
                let mut x = Array2::zeros((chains, n));
                for c in 0..chains {
                    fill_standard_normal(&mut rng, &mut z);
                    let mut v = z[0];
                    for (i, zi) in z.iter().enumerate() {
                        if i > 0 {
                            v = rho * v + (1.0 - rho * rho).sqrt() * zi;
                        }
                        x[[c, i]] = v;
                    }
                }
                worst = worst.max(crate::trace::diagnostics::rhat(x.view()).expect("rhat"));
            }
            sum += worst - 1.0;
            above += (worst > crate::trace::diagnostics::RHAT_MAX) as usize;
        }
        let mean = sum / reps as f64;
        println!(
            "largest split-R̂ − 1: mean {mean:.5} over {reps} replicates, predicted {:.5}; above 1.01 in {above}",
            predicted - 1.0
        );
        assert!((mean / (predicted - 1.0) - 1.0).abs() < 0.25, "mean {mean} vs predicted {}", predicted - 1.0);
        // The ESS the verdict needs, by the same formula.
        let need = ess_for_rhat(crate::trace::diagnostics::RHAT_MAX, &planned, d);
        assert!((predicted_max_rhat(need, &planned, d) - crate::trace::diagnostics::RHAT_MAX).abs() < 1e-12);
    }

    #[test]
    fn a_noisy_low_pilot_counts_by_its_standard_error() {
        // The model curve, except that the two smallest steps' pilots scored low by chance (their
        // chains disagree: relative standard errors 0.6), as a short pilot at a small step does.
        let (a, b, c) = (3.0f64, 5.0, 0.2);
        let exact = (a / (2.0 * b)).cbrt();
        let hs: Vec<f64> = (-6..=2).map(|k| 2f64.powi(k)).collect();
        let mut points: Vec<(f64, f64)> = hs.iter().map(|&h| (h, (a / h + b * h * h + c).sqrt())).collect();
        let mut ses: Vec<f64> = points.iter().map(|p| 0.02 * p.1).collect();
        for k in 0..2 {
            points[k].1 *= 0.4;
            ses[k] = 0.6 * points[k].1;
        }
        let plain = discrepancy_fit_minimiser_scaled(&points, None, 0.25, 2, 1.0).unwrap().0;
        let weighted = discrepancy_fit_minimiser_scaled(&points, Some(&ses), 0.25, 2, 1.0).unwrap().0;
        assert!(plain < 0.8 * exact, "the unweighted fit is pulled down: {plain} vs {exact}");
        assert!((weighted / exact - 1.0).abs() < 0.1, "{weighted} vs {exact}");
        // Exact points and equal relative errors: the same minimiser as the unweighted fit.
        let exact_points: Vec<(f64, f64)> = hs.iter().map(|&h| (h, (a / h + b * h * h + c).sqrt())).collect();
        let equal: Vec<f64> = exact_points.iter().map(|p| 0.5 * p.1).collect();
        let h = discrepancy_fit_minimiser_scaled(&exact_points, Some(&equal), 0.25, 2, 1.0).unwrap().0;
        assert!((h / exact - 1.0).abs() < 1e-10, "{h} vs {exact}");
    }

    #[test]
    fn moment_terms_measure_mean_and_sd_errors_in_sd_units() {
        // Gaussian target N(μ, Σ) with Σ̂ = Σ, draws from N(μ + δ σ, (1 + ε)² Σ) (exact scores
        // −Σ⁻¹(x − μ)): m_j → δ_j and M_jj/2 → (1 + ε)² − 1)/2 ≈ ε, so the term ≈ mean(δ²) + ε².
        let d = 3;
        let sd = [0.5, 2.0, 1.0];
        let mu = [1.0, -1.0, 0.0];
        let cov = Array2::from_shape_fn((d, d), |(i, j)| if i == j { sd[i] * sd[i] } else { 0.0 });
        let laplace = Laplace { cov: Some(cov), sd: sd.to_vec() };
        let n = 200_000;
        let mut rng = stream(5, &[1]);
        let mut z = vec![0.0; d];
        let (delta, eps) = (0.3, 0.1);
        let mut x = Array2::zeros((n, d));
        let mut s = Array2::zeros((n, d));
        for i in 0..n {
            fill_standard_normal(&mut rng, &mut z);
            for j in 0..d {
                x[[i, j]] = mu[j] + sd[j] * (delta + (1.0 + eps) * z[j]);
                s[[i, j]] = -(x[[i, j]] - mu[j]) / (sd[j] * sd[j]);
            }
        }
        let got = laplace.moment_discrepancy2(x.view(), s.view(), &mu);
        // Second moment about μ: (1 + ε)² + δ², relative error (1 + ε)² + δ² − 1.
        let m2 = (1.0 + eps) * (1.0 + eps) + delta * delta - 1.0;
        let expected = delta * delta + (m2 / 2.0).powi(2);
        assert!((got - expected).abs() < 0.01 * expected + 5.0 / n as f64, "{got} vs {expected}");
        // Exact draws: only Monte Carlo noise, O(1/n).
        let exact_x = x.mapv(|v| v) - &Array2::from_shape_fn((n, d), |(_, j)| sd[j] * delta);
        let exact_x = Array2::from_shape_fn((n, d), |(i, j)| mu[j] + (exact_x[[i, j]] - mu[j]) / (1.0 + eps));
        let exact_s = Array2::from_shape_fn((n, d), |(i, j)| -(exact_x[[i, j]] - mu[j]) / (sd[j] * sd[j]));
        let floor = laplace.moment_discrepancy2(exact_x.view(), exact_s.view(), &mu);
        assert!(floor < 20.0 / n as f64, "{floor}");
    }

    /// `Laplace::moment_vectors` with a dense covariance from `KSD_GRAM_MIN_DIM` dimensions (one
    /// matrix product `S Σ̂`) equals the row-by-row `Σ̂ s` sums to rounding.
    #[test]
    fn moment_vectors_by_one_matrix_product_match_the_row_sums() {
        let (n, d) = (300, crate::trace::diagnostics::KSD_GRAM_MIN_DIM + 4);
        let a = Array2::from_shape_fn((d, d), |(i, j)| ((i * 31 + j * 17) % 13) as f64 / 13.0 - 0.5);
        let cov = a.t().dot(&a) + Array2::<f64>::eye(d);
        let sd: Vec<f64> = (0..d).map(|j| cov[[j, j]].sqrt()).collect();
        let laplace = Laplace { cov: Some(cov.clone()), sd: sd.clone() };
        let mode: Vec<f64> = (0..d).map(|j| 0.1 * j as f64).collect();
        let x = Array2::from_shape_fn((n, d), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 5.0 - 1.0 + mode[j]);
        let s = Array2::from_shape_fn((n, d), |(i, j)| ((i * 5 + j * 13) % 7) as f64 / 3.0 - 1.0);
        let (m, mm) = laplace.moment_vectors(x.view(), s.view(), &mode);
        for j in 0..d {
            let v: Vec<f64> = (0..n).map(|i| (0..d).map(|k| cov[[j, k]] * s[[i, k]]).sum()).collect();
            let mean = v.iter().sum::<f64>() / (n as f64 * sd[j]);
            let second = (0..n).map(|i| v[i] * (x[[i, j]] - mode[j])).sum::<f64>() / (n as f64 * sd[j] * sd[j]) + 1.0;
            assert!((m[j] - mean).abs() <= 1e-12 * mean.abs().max(1.0), "mean {j}: {} vs {mean}", m[j]);
            assert!((mm[j] - second).abs() <= 1e-12 * second.abs().max(1.0), "second {j}: {} vs {second}", mm[j]);
        }
    }
}
