//! Building an SGLD multilevel estimator: from a step ([`MlSgld::sgld`]), from the curvature at
//! the mode, or tuned and whitened ([`MlSgld::sgld_tuned`]).

use crate::coupled::mlsgld::allocate::{LevelAcc, Spend};
use crate::coupled::mlsgld::sampler::MlSgld;
use crate::coupled::mlsgld::settings::MlSgldSettings;
use crate::error::{Error, Result, check_positive};
use crate::gradient::SubsampledEstimator;
use crate::models::model::Model;
use crate::numeric::rng::stream;
use crate::run::placement::Local;
use crate::samplers::{Sgld, SgldSettings};

impl<E: SubsampledEstimator> MlSgld<Sgld<E>> {
    /// Multilevel SGLD (the paper's method) with level-0 step `h0` and the given estimator,
    /// from θ₀ (usually the MAP): [`MlSgld::new`] with `Sgld::new(SgldSettings::constant(h0),
    /// estimator)`.
    ///
    /// Errors: as [`MlSgld::new`]; `h0` not finite and positive.
    pub fn sgld(settings: MlSgldSettings, h0: f64, estimator: E, theta0: &[f64]) -> Result<Self> {
        check_positive("step_size", h0)?;
        Self::new(settings, Sgld::new(SgldSettings::constant(h0), estimator)?, theta0)
    }

    /// Multilevel SGLD with h₀ and the horizon derived from the posterior's curvature at θ₀
    /// (give the mode, e.g. from [`find_mode`](crate::find_mode)), so that the defaults cannot
    /// silently fail to relax:
    ///
    /// - `h₀ = 1/λ_max` (half the Euler stability limit `2/λ_max` of the coarsest level);
    /// - horizon `m = ⌈3.5 λ_max / λ_min⌉`, i.e. level-0 time `T₀ = m h₀ ≥ 3.5/λ_min`: the
    ///   slowest direction's variance relaxes as `e^{−2 λ_min T}`, which is then ≤ 1e−3.
    ///
    /// `settings.horizon` is replaced by that m; the curvature (computed as
    /// [`tune::curvature`](crate::tune::curvature) with default settings, its cost included) is
    /// returned with the sampler. [`run_adaptive`](Self::run_adaptive) still checks that level 0
    /// relaxed.
    ///
    /// Errors: as [`tune::curvature`](crate::tune::curvature) and [`MlSgld::new`];
    /// [`Error::InvalidParameter`] (`horizon`) if the condition number makes m overflow.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{RmseTarget};
    /// use sgmcmc::{AdaptiveSettings, MlSgld, MlSgldSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let mode = model.posterior_mean().to_vec();
    /// let (ml, _curvature) = MlSgld::sgld_from_curvature(&model, MlSgldSettings::default(), Minibatch::new(50), &mode)?;
    /// let g = |t: &[f64]| t[0];
    /// let r = ml.run_adaptive(&model, &g, &AdaptiveSettings { target: RmseTarget::Absolute(0.01), ..Default::default() })?;
    /// assert!((r.estimate - mode[0]).abs() < 0.05);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn sgld_from_curvature<M: Model + ?Sized>(
        model: &M,
        settings: MlSgldSettings,
        estimator: E,
        theta0: &[f64],
    ) -> Result<(Self, crate::tune::Curvature)> {
        let curv = crate::tune::curvature(model, theta0, &crate::tune::CurvatureSettings::default())?;
        let (h0, settings) = from_curvature(&curv, settings)?;
        Ok((Self::sgld(settings, h0, estimator, theta0)?, curv))
    }

    /// Multilevel SGLD on the default path, with no hand-set value: the posterior's geometry by
    /// [`tune::precondition`](crate::tune::precondition) from θ₀ (the mode, the Hessian there and
    /// the whitening [`TuneSettings::precondition`](crate::tune::TuneSettings::precondition)
    /// chooses: dense by default up to d = 1 000), then h₀ and the horizon from the curvature
    /// the **whitened** paths see, and the paths start at the mode:
    ///
    /// - `h₀ = 1/(2 λ_max)`, half the step of [`sgld_from_curvature`](Self::sgld_from_curvature),
    ///   so that the coarsest level is already in Euler's asymptotic regime: along the stiffest
    ///   whitened direction its stationary variance is `1/(1 − h₀λ/2)` = 1.33× the target's,
    ///   where h₀ = 1/λ_max gives 2× — a bias the level corrections, estimated from as few as
    ///   `n_initial` paths, must then remove. On the six posteriors of the `validation` example,
    ///   at a loose target (its `short` runs) h₀ = 1/λ_max had 1.65–3.55× the error of the best
    ///   h₀ of a grid on five of six (the grid's best: 0.25–0.5/λ_max), h₀ = 1/(2λ_max) above
    ///   1.5× on one (1.92×); at tighter targets the grid's error curves are flat within noise;
    /// - the same level-0 time `T₀ = m h₀ ≥ 3.5/λ_min` as that rule, so twice its horizon:
    ///   `m = 2⌈3.5 λ_max/λ_min⌉`;
    /// - for an estimator with independent draws (a minibatch), h₀ at most the gradient noise's
    ///   limit `2/λ_max(V)` (V measured at 10 000 Laplace draws in the whitened coordinates, its
    ///   cost in the record): beyond it the minibatch injects more noise per step than the
    ///   Langevin noise, and level 0 can diverge (it did on the RAND HIE Poisson regression, N/n
    ///   = 202). Where the cap binds, the horizon rises by the same factor (rounded up) to keep
    ///   T₀. The finer levels correct the bias the noise leaves; the cap is for stability.
    ///
    /// Whitening is what makes the multilevel method usable on ill-conditioned posteriors:
    /// unwhitened, the horizon grows with the condition number (`m = 3.5 × 10¹⁰` on a
    /// calendar-year regression); whitened densely, m = 8 (before the noise cap above). The record (mode, curvature before and
    /// after, cost) is returned with the sampler; its cost is not in the multilevel results' costs.
    ///
    /// For the posterior's means and sds rather than one expectation, set
    /// [`MlSgldSettings::keep_points`] and run [`run_adaptive`](Self::run_adaptive) with
    /// [`RmseTarget::Moments`](crate::RmseTarget::Moments): on the `validation` example's six posteriors at ε = 0.1/√10 its
    /// means came within 0.046 sd and its sds within 4.9 % (a target on one expectation left
    /// single sds off by up to 15 % there, 39 % at ε = 0.1).
    ///
    /// Errors: as [`tune::precondition`](crate::tune::precondition) and [`MlSgld::new`];
    /// [`Error::InvalidParameter`] (`horizon`) if the whitened condition number makes m overflow.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{RmseTarget, tune::TuneSettings};
    /// use sgmcmc::{AdaptiveSettings, MlSgld, MlSgldSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let (ml, setup) =
    ///     MlSgld::sgld_tuned(&model, MlSgldSettings::default(), Minibatch::new(50), &[0.0; 2], &TuneSettings::default())?;
    /// // Condition number 1 once whitened: m = 8, times 6 for the minibatch's noise at N/n = 20.
    /// assert_eq!(ml.settings().horizon, 48);
    /// let g = |t: &[f64]| t[0];
    /// let r = ml.run_adaptive(&model, &g, &AdaptiveSettings { target: RmseTarget::Absolute(0.01), ..Default::default() })?;
    /// assert!((r.estimate - model.posterior_mean()[0]).abs() < 0.05);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn sgld_tuned<M: Model + ?Sized>(
        model: &M,
        settings: MlSgldSettings,
        estimator: E,
        theta0: &[f64],
        tune: &crate::tune::TuneSettings,
    ) -> Result<(Self, crate::tune::Preconditioned<Sgld<E>>)> {
        let sgld = Sgld::new(SgldSettings::default(), estimator)?;
        let mut p = crate::tune::precondition(model, &sgld, theta0, tune)?;
        let (h0, mut settings) = from_curvature(&p.whitened_curvature, settings)?;
        // Half the step, the same level-0 time (see above).
        let h0 = 0.5 * h0;
        settings.horizon = settings
            .horizon
            .checked_mul(2)
            .ok_or_else(|| Error::invalid("horizon", settings.horizon, "doubling it for h₀/2 overflows"))?;
        // The gradient noise: a plain minibatch at N/n ≫ 1 can inject far more noise per step
        // than the Langevin noise (h² λ_max(V) against 2h), and level 0 then diverges (the RAND
        // HIE Poisson regression, N/n = 202: a non-finite gradient within 4 iterations). Measured
        // at Laplace draws in the sampler's coordinates, h₀ is capped at the noise's limit
        // 2/λ_max(V) — the minibatch noise at most the injected; the finer levels correct the
        // bias it leaves, so the cap is for stability, not accuracy — and the horizon raised by
        // the same factor, so that level 0 still spans the same time.
        let mut h0 = h0;
        if p.sampler.estimator().independent_draws() {
            let identity;
            let w = match &p.whitening {
                Some(w) => w.as_ref(),
                None => {
                    identity = crate::samplers::Whitening::diagonal(&p.mode, &vec![1.0; p.mode.len()])?;
                    &identity
                }
            };
            let seed = tune.seed;
            let (noise, c) = crate::samplers::GradientNoise::estimate(
                model,
                p.sampler.estimator(),
                w,
                crate::tune::GRADIENT_NOISE_POINTS_MIN,
                &mut stream(seed, &[0x6d6c_6e6f]),
            )?;
            p.cost += c;
            let cap = 2.0 * noise.full_correction_limit();
            if h0 > cap {
                let factor = (h0 / cap).ceil();
                h0 = cap;
                settings.horizon = settings.horizon.checked_mul(factor as usize).ok_or_else(|| {
                    Error::invalid("horizon", settings.horizon, "raising it for the noise cap overflows")
                })?;
            }
        }
        let base = crate::tune::Tunable::with_step_size(&p.sampler, h0)?;
        // The horizon comes from the curvature at the mode; a posterior far from Gaussian (flat
        // directions wider than the Laplace approximation says) relaxes more slowly. Probe level
        // 0 on the whitened second moment and double the horizon until it relaxes.
        let (w, mode) = (p.whitening.clone(), p.mode.clone());
        let probe = move |t: &[f64]| -> f64 {
            let mut phi: Vec<f64> = t.iter().zip(&mode).map(|(a, b)| a - b).collect();
            if let Some(w) = &w {
                w.to_phi(t, &mut phi);
            }
            phi.iter().map(|x| x * x).sum::<f64>() / t.len() as f64
        };
        let mut doubling = 0;
        loop {
            let ml = Self::new(settings, base.clone(), &p.mode)?;
            ml.check(model)?;
            let mut acc = LevelAcc::new(0, false);
            ml.extend_level_on(&Local, model, &probe, &mut acc, RELAXATION_PROBES, &mut Spend::unlimited())?;
            p.cost += acc.cost;
            match ml.relaxation_error(&probe, &acc, 0, RELAXATION_TOL) {
                None => return Ok((ml, p)),
                Some(e) if doubling == HORIZON_DOUBLINGS => return Err(e),
                Some(_) => {
                    settings.horizon = settings.horizon.checked_mul(2).ok_or_else(|| {
                        Error::invalid("horizon", settings.horizon, "doubling it for relaxation overflows")
                    })?;
                    doubling += 1;
                }
            }
        }
    }
}

/// Level-0 paths [`MlSgld::sgld_tuned`] runs to test relaxation at each horizon.
const RELAXATION_PROBES: usize = 256;
/// Most doublings of the horizon [`MlSgld::sgld_tuned`] tries (×256 at most).
const HORIZON_DOUBLINGS: usize = 8;
/// The bias of the probe (mean squared whitened coordinate, ≈ 1 at the target) left at the
/// level-0 horizon that [`MlSgld::sgld_tuned`] accepts.
const RELAXATION_TOL: f64 = 0.02;

/// `h₀ = 1/λ_max` and the horizon `m = ⌈3.5 λ_max / λ_min⌉` (see
/// [`MlSgld::sgld_from_curvature`]).
fn from_curvature(curv: &crate::tune::Curvature, settings: MlSgldSettings) -> Result<(f64, MlSgldSettings)> {
    let lmin = curv.lambda_min.unwrap_or(curv.lambda_max).max(curv.lambda_max * 1e-15);
    let m = (3.5 * curv.lambda_max / lmin).ceil();
    if !(m.is_finite() && m < 1e15) {
        return Err(Error::invalid("horizon", m, "the condition number λ_max/λ_min is too large for a horizon"));
    }
    Ok((1.0 / curv.lambda_max, MlSgldSettings { horizon: (m as usize).max(1), ..settings }))
}
