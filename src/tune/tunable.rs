//! The [`Tunable`] trait — what [`tune`] needs of a sampler — and its impls for SGLD, SGHMC,
//! SGNHT, pSGLD and HAMCMC, with their gradient-noise corrections.

use super::*;

/// A sampler whose constant step size [`tune`] can choose.
pub trait Tunable: Sampler {
    /// The same sampler (settings, estimator) with the constant step size `step`.
    ///
    /// Errors: [`Error::InvalidParameter`] for a non-positive step.
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
pub(super) enum NoiseAt<'a> {
    Laplace(usize),
    States(ndarray::ArrayView2<'a, f64>, usize),
}

/// The [`Tunable::noise_corrected`] of a [`Langevin`] sampler whose kernel takes the correction.
pub(super) fn langevin_noise_corrected<M, K, E>(
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
    Ok(Some((s.clone().with_gradient_noise(Some(noise.clone())), noise)))
}

/// The [`Tunable`] whitening methods of a [`Langevin`] sampler, and the choice of an
/// [`Auto`](crate::Auto) estimator.
macro_rules! langevin_whitening {
    () => {
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
            let (choice, why) = super::auto::choose_estimator(model, mode, whitening, seed, cost)?;
            Ok(self.estimator().with_choice(choice).map(|e| (self.clone().with_estimator(e), why)))
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
pub(super) const SETTLE_STEPS: u64 = 300;

/// Runs `s` for [`SETTLE_STEPS`] steps from the mode (seeded by `seed`), adding its cost.
pub(super) fn settle<M: Model + ?Sized, S: Sampler>(
    s: &mut S,
    model: &M,
    mode: &[f64],
    seed: u64,
    cost: &mut Cost,
) -> Result<()> {
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
pub(super) fn preconditioned_lambda_max<M: Model + ?Sized>(
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
pub(super) fn psgld_noise_top(noise: &GradientNoise, n_data: f64, damping: f64) -> Option<f64> {
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
pub(super) fn psgld_metric(noise: &GradientNoise, n_data: f64, damping: f64) -> Option<Vec<f64>> {
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
