//! [`tune`] itself: its steps in order (see the [module docs](crate::tune)), the gradient-noise
//! correction it sets up, the step it chooses for the planned run and the visited-noise re-measure.

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::runner::Runner;
use crate::samplers::{GradientNoise, Whitening};
use crate::tune::geometry::{DENSE_WHITENING_MAX_DIM, Setup, setup};
use crate::tune::grid::{best_scored, pilot, pilot_grid};
use crate::tune::predict::{ErrorModel, error_model_step, ksd_fit_step, predicted_max_rhat};
use crate::tune::predict::{convergence_ess, grid_centre};
use crate::tune::reason;
use crate::tune::score::Scorer;
use crate::tune::settings::CORRECTION_MARGIN;
use crate::tune::settings::{CONVERGENCE_ERROR_RATIO, Objective, PlannedRun, Trial, TuneSettings, Tuned};
use crate::tune::tunable::{GRADIENT_NOISE_POINTS_MAX, GRADIENT_NOISE_POINTS_MIN, Tunable};
use ndarray::Array2;
use std::sync::Arc;

/// Chooses `sampler`'s constant step size for `model` from `theta0` without the user's help (see
/// the [module docs](crate::tune)).
///
/// Errors: invalid settings; those of [`find_mode`](crate::find_mode), [`curvature`](crate::tune::curvature) and the centre rule; a
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
    settings.validate()?;
    // The pilots' chains (a grid of them at a time, each with its draws) and the mode search's
    // vectors, before anything is allocated.
    let pilots = settings.pilot_chains.saturating_mul(settings.factors.len().max(1)).saturating_add(4);
    crate::run::RunSettings { n_chains: pilots, ..Default::default() }.check_states::<S>(
        model.dim(),
        1,
        "the tuner's pilots and mode search (TuneSettings::pilot_chains × factors × the sampler's state in the model's dimension)",
    )?;
    let full_pilots = (settings.pilot_iterations, settings.pilot_burn_in);
    let settings = &settings.scaled_to_run();
    // 1. Mode, curvature, whitening and the centre step (shared with tune_rr).
    let Setup { mode, curv, centre, scale, laplace, base, whitening, mut preconditioning, mut cost, hessian } =
        setup(model, sampler, theta0, settings)?;
    // 2. The gradient-noise correction, measured at Laplace draws.
    let base = correct_gradient_noise(model, base, &whitening, mode.len(), settings, &mut preconditioning, &mut cost)?;
    // 3. The pilot grid, capped where the correction stops being complete.
    let limit = positive_step_limit(&base);
    let grid_centre = grid_centre(centre, limit, &settings.factors);
    let scorer = Scorer::new(model, &mode, (&laplace, &scale), settings.scoring, settings.seed, &mut cost)?;
    let pilot_at = |h: f64, index: u64| pilot(model, &base, &mode, (&scale, &laplace, &scorer), h, index, settings);
    let trials: Vec<Trial> = pilot_grid(grid_centre, settings, limit, pilot_at)?;
    for t in &trials {
        cost += t.cost;
    }
    // 4. The gradient noise measured again where the chains go.
    let visited = match (&whitening, limit) {
        (Some(w), Some(l)) => visited_noise(model, &base, w, &mode, &trials, l, settings, full_pilots, &mut cost)?,
        _ => None,
    };
    let visited_sampler;
    let (sampler, limit, misfit) = match visited {
        Some(v) => {
            preconditioning.push_str(&v.note);
            visited_sampler = v.sampler;
            (&visited_sampler, positive_step_limit(&visited_sampler), v.misfit)
        }
        None => (&base, limit, 0.0),
    };
    // 5. The step: the error model's minimiser for the planned run (or the KSD fit), never above
    // the margin below the correction's limit, then the objective.
    let cap = limit.map(|l| l * CORRECTION_MARGIN);
    let residuals = Residuals { sampler, limit, misfit };
    let argmin = best_scored(&trials).ok_or(Error::NotConverged {
        what: "tune",
        iterations: trials.len() as u64,
        residual: f64::NAN,
    })?;
    let pilot_draws = ((settings.pilot_iterations - settings.pilot_burn_in) * settings.pilot_chains as u64) as f64;
    let h_ksd = trials[argmin.0].step_size;
    let thin = settings.pilot_thin() as f64;
    let capped_grid = grid_centre < centre;
    let d = mode.len();
    // The step for a planned run, how it was chosen, its error model and predicted worst error.
    let plan = |planned: PlannedRun| {
        let model = error_model_step(&trials, h_ksd, pilot_draws, thin, planned.draws(), 2, sampler.mixing_exponent());
        let (step, how, predictor) =
            choose_step(&model, &trials, h_ksd, pilot_draws, &planned, capped_grid, cap, &residuals);
        let (step, how) = match cap {
            Some(c) if step > c => (c, reason::lowered_to_margin(&how, step, c)),
            _ => (step, how),
        };
        let (step, how) = match (&model, settings.objective) {
            (Some(m), Objective::Convergence) => objective_convergence(m, step, how, &trials, &planned, d),
            _ => (step, how),
        };
        let predicted_error = predictor.map(|(m, with_residual)| {
            let residual = if with_residual { residuals.at(step) } else { 0.0 };
            m.predicted_error2_with(step, planned.draws(), residual).sqrt()
        });
        (step, how, model, predicted_error)
    };
    // 6. The run: the planned one, or with a target accuracy the shortest whose predicted worst
    // error meets it; what it will show at its step: its smallest ESS, largest split-R̂ and
    // worst error.
    let planned = match settings.target_accuracy {
        Some(target) => target_run(target, settings.planned_run.chains, |p| plan(p).3),
        None => None,
    };
    let (planned, reached) = match planned {
        Some(p) => (p, true),
        None => (settings.planned_run, false),
    };
    let (step, how, model, predicted_error) = plan(planned);
    let how = match settings.target_accuracy {
        Some(t) => reason::target(how, t, &planned, reached),
        None => how,
    };
    let predicted_ess = model.as_ref().map(|m| m.min_ess(step, planned.draws()));
    let predicted_rhat = predicted_ess.map(|ess| predicted_max_rhat(ess, &planned, d));
    let how = reason::with_predictions(how, predicted_error, predicted_ess, predicted_rhat, &model, &planned, d);
    let reason = reason::summary(&reason::Summary {
        step,
        how: &how,
        trials: &trials,
        argmin,
        centre,
        grid_centre,
        limit,
        lambda_max: curv.lambda_max,
        extensions: trials.len() - settings.factors.len(),
        preconditioning: &preconditioning,
    });
    let trials = trials.into_iter().map(|t| Trial { draws: None, ..t }).collect();
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
        planned_run: planned,
        hessian,
    })
}

/// The shortest run of `chains` chains whose predicted worst error (`predicted(run)`) is at most
/// `target`: kept iterations per chain from 100 up in steps of 10 % (to 10⁹), the first that
/// meets it; `None` if none does or nothing is predicted.
fn target_run(target: f64, chains: usize, predicted: impl Fn(PlannedRun) -> Option<f64>) -> Option<PlannedRun> {
    let mut iterations = 100.0_f64;
    while iterations <= 1e9 {
        let run = PlannedRun::new(iterations.ceil() as u64, chains);
        match predicted(run) {
            Some(e) if e <= target => return Some(run),
            Some(_) => {}
            None => return None,
        }
        iterations *= 1.1;
    }
    None
}

/// A sampler's gradient-noise correction limit ([`Tunable::step_limit`]) when it has a finite,
/// positive one.
fn positive_step_limit<S: Tunable>(sampler: &S) -> Option<f64> {
    sampler.step_limit().filter(|l| l.is_finite() && *l > 0.0)
}

/// Step 2 of [`tune`]: a whitened sampler that takes a gradient-noise correction gets it,
/// measured at Laplace draws (up to d = [`DENSE_WHITENING_MAX_DIM`]); the preconditioning line
/// says what was measured or why not.
fn correct_gradient_noise<M: Model + ?Sized, S: Tunable>(
    model: &M,
    base: S,
    whitening: &Option<Arc<Whitening>>,
    d: usize,
    settings: &TuneSettings,
    preconditioning: &mut String,
    cost: &mut Cost,
) -> Result<S> {
    match (whitening, settings.correct_gradient_noise) {
        (Some(_), true) if d > DENSE_WHITENING_MAX_DIM => {
            preconditioning.push_str(&reason::noise_not_corrected(d));
            Ok(base)
        }
        (Some(w), true) => {
            let points = (200 * d).clamp(GRADIENT_NOISE_POINTS_MIN, GRADIENT_NOISE_POINTS_MAX);
            let mut spent = Cost::default();
            match base.noise_corrected(model, w, points, settings.seed, &mut spent)? {
                Some((corrected, noise)) => {
                    preconditioning.push_str(&reason::noise_corrected(&noise, &spent));
                    *cost += spent;
                    Ok(corrected)
                }
                None => Ok(base),
            }
        }
        _ => Ok(base),
    }
}

/// The sd bias a gradient-noise correction leaves at a step: its own approximation (pSGLD's
/// series), and its misfit to the noise where the chains go, `c(h) ΔV/2` with the weight
/// `c(h) = h/(limit λ_max)` and ΔV = misfit × λ_max.
struct Residuals<'a, S> {
    sampler: &'a S,
    limit: Option<f64>,
    misfit: f64,
}

impl<S: Tunable> Residuals<'_, S> {
    /// The residuals at `steps`, into `out`.
    fn fill(&self, steps: &[f64], out: &mut [f64]) {
        self.sampler.correction_residuals(steps, out);
        if let Some(l) = self.limit.filter(|_| self.misfit > 0.0) {
            out.iter_mut().zip(steps).for_each(|(o, h)| *o += self.misfit * h / (2.0 * l));
        }
    }

    /// The residual at one step.
    fn at(&self, step: f64) -> f64 {
        let mut r = [0.0];
        self.fill(&[step], &mut r);
        r[0]
    }
}

/// Step 5 of [`tune`]: the step for the planned run and how it was chosen, with the error model
/// that predicts its error (and whether the correction's residual joins that error's bias;
/// `None`: no pilot showed bias, so no error is predicted).
#[allow(clippy::too_many_arguments)]
fn choose_step<S: Tunable>(
    model: &Option<ErrorModel>,
    trials: &[Trial],
    h_ksd: f64,
    pilot_draws: f64,
    planned: &PlannedRun,
    capped_grid: bool,
    cap: Option<f64>,
    residuals: &Residuals<'_, S>,
) -> (f64, String, Option<(ErrorModel, bool)>) {
    let planned = *planned;
    // The scored candidates `(h, D)` and their KSD standard errors, index for index.
    let (scored, ses): (Vec<(f64, f64)>, Vec<f64>) =
        trials.iter().filter_map(|t| t.ksd.map(|k| ((t.step_size, k), t.ksd_se.unwrap_or(f64::NAN)))).unzip();
    match model {
        Some(m) if m.bias_seen => {
            (m.step, reason::error_model(m, &planned, residuals.sampler.mixing_exponent().is_some()), Some((*m, true)))
        }
        Some(m) if capped_grid => {
            let top = scored.iter().map(|&(h, _)| h).fold(0.0, f64::max);
            noise_floor_step(m, top, cap, &planned, residuals)
        }
        // No pilot showed bias: the KSD fit, its Monte Carlo term scaled to the planned run
        // (D²(h) ≈ r·a/h + b·h² + c, r the ratio of the pilots' kept draws to the run's).
        _ => {
            let (h, how) = ksd_fit_step(&scored, &ses, h_ksd, pilot_draws / planned.draws(), &planned);
            (h, how, None)
        }
    }
}

/// The grid capped at a noise-corrected sampler's limit (the noise-dominated case): below it the
/// correction leaves the exact-gradient scheme's discretisation bias, at least whitened ULA's on
/// a Gaussian (sd factor 1/√(1 − h/2) ≈ 1 + h/4), which pilots at these small steps rarely
/// resolve: the error model with β² at least that floor, up to the limit. An approximate
/// correction's residual bias joins the floor's, minimised on a log grid of 2 001 steps over four
/// decades below the limit (0.46 % apart).
fn noise_floor_step<S: Tunable>(
    m: &ErrorModel,
    top: f64,
    cap: Option<f64>,
    planned: &PlannedRun,
    residuals: &Residuals<'_, S>,
) -> (f64, String, Option<(ErrorModel, bool)>) {
    let slope = residuals.sampler.exact_gradient_bias_slope();
    let floor = slope * slope;
    let beta2 = if m.bias_seen { m.beta2.max(floor) } else { floor };
    let top = cap.map_or(top, |c| top.min(c));
    let floor_model = ErrorModel { beta2, ..*m };
    let grid: Vec<f64> = (0..=2000).map(|i| top * 10f64.powf(-4.0 * (1.0 - i as f64 / 2000.0))).collect();
    let mut residual = vec![0.0; grid.len()];
    residuals.fill(&grid, &mut residual);
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
    let how = reason::noise_floor(m, planned, top, beta2, floor, slope, at_h, at_top);
    (h, how, Some((floor_model, true)))
}

/// Under [`Objective::Convergence`], the smallest step at which the planned run's predicted ESS
/// meets the verdict's needs (with [`CONVERGENCE_MARGIN`]), if its predicted error stays within
/// [`CONVERGENCE_ERROR_RATIO`] of the accuracy step's and within the pilots' stable range.
fn objective_convergence(
    m: &ErrorModel,
    step: f64,
    how: String,
    trials: &[Trial],
    planned: &PlannedRun,
    d: usize,
) -> (f64, String) {
    let need = convergence_ess(planned, d);
    let h_need = m.step_for_ess(need, planned.draws());
    let hi = trials.iter().filter(|t| t.ksd.is_some()).map(|t| t.step_size).fold(0.0, f64::max);
    let (e0, e1) = (m.predicted_error(step, planned.draws()), m.predicted_error(h_need, planned.draws()));
    let outcome = if h_need <= step {
        reason::Objective::Kept
    } else if !m.bias_seen {
        reason::Objective::NoBias
    } else if h_need <= hi && e1 <= CONVERGENCE_ERROR_RATIO * e0 {
        reason::Objective::Raised
    } else {
        reason::Objective::Refused { above_stable: h_need > hi, hi }
    };
    let raised = matches!(outcome, reason::Objective::Raised);
    let how = reason::objective(&how, &outcome, step, h_need, need, e0, e1);
    (if raised { h_need } else { step }, how)
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

/// The gradient noise is measured where the chains go ([`visited_noise`]) only where the pilots'
/// best step is at least this fraction of the correction's limit: below, the correction removes
/// at most `h λ/2 ≤ 1/8` of a variance in any direction, and a measurement 10 % off there moves a
/// variance by about 1 % (half as much an sd), against the 10 % a run's accuracy is judged at.
/// Control variates on moderate minibatches are below it; plain minibatches under strong noise,
/// whose steps sit near the limit, above.
const VISITED_MIN_RATIO: f64 = 0.25;

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
    (full_iterations, full_burn_in): (u64, u64),
    cost: &mut Cost,
) -> Result<Option<Visited<S>>> {
    // The pilot whose draws are closest to the posterior (the smallest KSD): its states are where
    // a run near the chosen step goes. (The largest scored step, used first, visits states that
    // its own bias widens: on the validation example's logistic regression SGLD-CV's sds then came
    // out 24 % small at 50 000 x 4, the noise measured there being larger than the run met.)
    // Among the steps the tuner may choose (up to the margin below the limit): at the limit itself
    // no noise is injected along the measured noise's top direction, and chains corrected there
    // by a second measurement can wander where the noise is far larger (on the Wisconsin
    // breast-cancer regression the two rounds then differed by 12× the top eigenvalue).
    let Some((step, pilot_states)) = trials
        .iter()
        .filter(|t| t.step_size <= CORRECTION_MARGIN * limit * (1.0 + 1e-9))
        .filter_map(|t| t.ksd.map(|k| (t, k)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(t, _)| (t.step_size, t.draws.clone()))
    else {
        return Ok(None);
    };
    // Far below the limit the correction is small in every direction (see VISITED_MIN_RATIO).
    if step < VISITED_MIN_RATIO * limit {
        return Ok(None);
    }
    let d = mode.len();
    let pairs = (200 * d).clamp(GRADIENT_NOISE_POINTS_MIN, GRADIENT_NOISE_POINTS_MAX);
    let mut current = sampler.clone();
    let mut noises: Vec<Arc<GradientNoise>> = Vec::new();
    let mut all_states: Vec<Array2<f64>> = Vec::new();
    let mut spent = Cost::default();
    for round in 0..VISITED_NOISE_ROUNDS {
        let h = current.step_limit().map_or(step, |l| step.min(l));
        // The first round's chains are the pilot's at that step (the same sampler, corrected by
        // the Laplace-draw measurement): its draws serve if it ran full length. Otherwise, and in
        // later rounds (chains corrected by the last measurement), full-length pilot chains: the
        // measured noise is an average over their states, and short chains at steps near the
        // limit (where this matters) cover the posterior too little for two rounds to agree.
        let full_length = settings.pilot_iterations == full_iterations;
        let states = match (round, &pilot_states) {
            (0, Some(states)) if full_length => states.as_ref().clone(),
            _ => {
                let full =
                    TuneSettings { pilot_iterations: full_iterations, pilot_burn_in: full_burn_in, ..settings.clone() };
                let rs = full.pilot_run(full.pilot_chains, full.pilot_thin(), 0x7669_7369 + round, 0);
                let out = match Runner::new(model, &current.with_step_size(h)?).start(mode).settings(rs).run() {
                    Ok(out) => out,
                    Err(e) if e.is_divergence() => return Ok(None),
                    Err(e) => return Err(e),
                };
                spent += out.cost - out.setup_cost;
                out.estimate.stacked_draws()?
            }
        };
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
    // round, in turn), with as many pairs as one round, whose error the two rounds' difference
    // bounds: two independent measurements of one V differ by about √2 times either's error.
    let views: Vec<_> = all_states.iter().map(|a| a.view()).collect();
    let pooled = ndarray::concatenate(ndarray::Axis(0), &views)
        .map_err(|_| Error::NoSamples { reason: "the pilots' draws could not be pooled" })?;
    let seed = settings.seed.wrapping_add(VISITED_NOISE_ROUNDS + 1);
    let Some((current, pooled_noise)) =
        sampler.noise_corrected_at(model, whitening, pooled.view(), pairs, seed, &mut spent)?
    else {
        return Ok(None);
    };
    let top = pooled_noise.eigenvalues().last().copied().unwrap_or(0.0);
    let misfit = if top > 0.0 { gap / (std::f64::consts::SQRT_2 * top) } else { 0.0 };
    *cost += spent;
    let l = pooled_noise.eigenvalues();
    let note = format!(
        "; measured again where pilot chains at {step:.3e} go ({VISITED_NOISE_ROUNDS} rounds, {} datum gradients): \
         eigenvalues [{:.3e}, {:.3e}] ({}); its misfit, the largest |eigenvalue| of the two rounds' \
         difference, {:.1} % of the largest eigenvalue",
        spent.datum_gradients,
        l.first().copied().unwrap_or(0.0),
        l.last().copied().unwrap_or(0.0),
        pooled_noise.summary(),
        100.0 * misfit
    );
    Ok(Some(Visited { sampler: current, misfit, note }))
}
