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

mod tunable;
pub use tunable::*;
mod settings;
pub use settings::*;
mod grid;
pub use grid::*;
mod predict;
pub use predict::*;
mod geometry;
pub use geometry::*;

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

#[cfg(test)]
mod tests;
