//! Every sentence of [`tune`]'s reason line and of its preconditioning line, built from the
//! numbers each step of [`tune`] measured: the text lives here, the choices in the steps.

use crate::cost::Cost;
use crate::samplers::GradientNoise;
use crate::tune::geometry::DENSE_WHITENING_MAX_DIM;
use crate::tune::predict::convergence_ess;
use crate::tune::predict::{ErrorModel, ess_for_rhat};
use crate::tune::settings::CORRECTION_MARGIN;
use crate::tune::settings::{CONVERGENCE_ERROR_RATIO, CONVERGENCE_MARGIN, PlannedRun, Trial};

/// The preconditioning line's note when the dimension is too large for a dense noise covariance.
pub(super) fn noise_not_corrected(d: usize) -> String {
    format!(
        "; gradient noise not corrected: d = {} > {DENSE_WHITENING_MAX_DIM} (its dense covariance would cost \
         {} multiply-adds per step, against the whitening's {})",
        d,
        2 * d * d,
        2 * d
    )
}

/// The preconditioning line's note on the measured gradient noise.
pub(super) fn noise_corrected(noise: &GradientNoise, spent: &Cost) -> String {
    let l = noise.eigenvalues();
    format!(
        "; gradient noise corrected: whitened noise covariance eigenvalues [{:.3e}, {:.3e}] \
         ({}; {} datum gradients), {} multiply-adds per step ({} under pSGLD's metric)",
        l.first().copied().unwrap_or(0.0),
        l.last().copied().unwrap_or(0.0),
        noise.summary(),
        spent.datum_gradients,
        noise.flops_per_step(),
        noise.flops_per_step() * 2,
    )
}

/// How the step was chosen when the pilots showed a bias: the error model's minimiser.
pub(super) fn error_model(m: &ErrorModel, planned: &PlannedRun, diffusion_limit: bool) -> String {
    format!(
        "the minimiser of the planned run's predicted worst error in posterior sds, max_j β_j² h² + K h^(−γ)/N \
         (N = {} x {} kept draws; from the pilots' per-coordinate Stein moment errors and autocorrelation \
         times: max β² = {:.3e}, γ = {:.2} ({}), K = {:.3e}){}",
        planned.iterations,
        planned.chains,
        m.beta2,
        m.gamma,
        if diffusion_limit { "the sampler's diffusion limit" } else { "fitted" },
        m.k_mc,
        if m.clamped { " (at an end of the searched range)" } else { "" }
    )
}

/// How the step was chosen on a grid capped at the correction's limit: the error model with the
/// exact-gradient scheme's bias floor (and the approximate correction's residual).
#[allow(clippy::too_many_arguments)]
pub(super) fn noise_floor(
    m: &ErrorModel,
    planned: &PlannedRun,
    top: f64,
    beta2: f64,
    floor: f64,
    slope: f64,
    at_h: f64,
    at_top: f64,
) -> String {
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
                "; plus the approximate correction's own sd bias, {at_h:.2e} at this step, {at_top:.2e} at the limit"
            )
        } else {
            String::new()
        },
    )
}

/// The step lowered to the margin below the correction's limit.
pub(super) fn lowered_to_margin(how: &str, step: f64, cap: f64) -> String {
    format!("{how}; lowered from {step:.4e} to {CORRECTION_MARGIN} x the gradient-noise correction's limit ({cap:.4e})")
}

/// What [`Objective::Convergence`](super::Objective::Convergence) did to the step.
pub(super) enum Objective {
    /// The accuracy step already meets the ESS the verdict needs.
    Kept,
    /// No pilot showed a bias to predict a larger step's error from.
    NoBias,
    /// Raised to the step that meets it.
    Raised,
    /// Not raised: the step that would meet it is above the largest stable pilot step (`hi`),
    /// or its predicted error is too large.
    Refused { above_stable: bool, hi: f64 },
}

/// The reason with what [`Objective::Convergence`](super::Objective::Convergence) did.
pub(super) fn objective(how: &str, outcome: &Objective, step: f64, h_need: f64, need: f64, e0: f64, e1: f64) -> String {
    match outcome {
        Objective::Kept => format!("{how}; the objective Convergence (predicted ESS ≥ {need:.0}) keeps it"),
        Objective::NoBias => format!(
            "{how}; the objective Convergence did not raise it: a predicted smallest ESS of {need:.0} needs \
             {h_need:.4e}, but no pilot showed a bias to predict that step's error from"
        ),
        Objective::Raised => format!(
            "objective Convergence: raised {:.2}x from {step:.4e} to the smallest step whose predicted \
             smallest ESS is {need:.0} ({CONVERGENCE_MARGIN} x what the verdict needs), at a predicted worst \
             error {e1:.3} sd against {e0:.3} ({how})",
            h_need / step,
        ),
        Objective::Refused { above_stable, hi } => format!(
            "{how}; the objective Convergence did not raise it: a predicted smallest ESS of {need:.0} needs \
             {h_need:.4e}, {}",
            if *above_stable {
                format!("above the largest stable pilot step {hi:.4e}")
            } else {
                format!(
                    "whose predicted worst error {e1:.3} sd is {:.2}x this step's {e0:.3} (the objective \
                     allows {CONVERGENCE_ERROR_RATIO}x)",
                    e1 / e0
                )
            }
        ),
    }
}

/// The reason with the planned run's predicted worst error, smallest ESS and largest split-R̂,
/// and the warning when they foretell NOT CONVERGED.
pub(super) fn with_predictions(
    how: String,
    predicted_error: Option<f64>,
    predicted_ess: Option<f64>,
    predicted_rhat: Option<f64>,
    model: &Option<ErrorModel>,
    planned: &PlannedRun,
    d: usize,
) -> String {
    let how = match predicted_error {
        Some(e) => format!("{how}; predicted worst error of the planned run {e:.3} sd"),
        None => how,
    };
    match (predicted_ess, predicted_rhat) {
        (Some(ess), _) if ess < crate::trace::diagnostics::ESS_MIN => format!(
            "{how}; predicted smallest ESS of the planned run {ess:.0} — below the {:.0} the convergence verdict asks: \
             expect NOT CONVERGED at this length (run longer{}, or lower the gradient noise: a larger \
             minibatch, or control variates if the estimator has none)",
            crate::trace::diagnostics::ESS_MIN,
            longer(model, planned, d)
        ),
        (Some(ess), Some(r)) if r > crate::trace::diagnostics::RHAT_MAX => format!(
            "{how}; predicted smallest ESS of the planned run {ess:.0} and largest split-R̂ {r:.3} — above the {} the \
             convergence verdict asks (that needs an ESS of about {:.0}): expect NOT CONVERGED at this length (run \
             longer{}, or lower the gradient noise: a larger minibatch, or control variates if the estimator has none)",
            crate::trace::diagnostics::RHAT_MAX,
            ess_for_rhat(crate::trace::diagnostics::RHAT_MAX, planned, d),
            longer(model, planned, d)
        ),
        (Some(ess), Some(r)) => {
            format!("{how}; predicted smallest ESS of the planned run {ess:.0}, largest split-R̂ {r:.3}")
        }
        _ => how,
    }
}

/// ", e.g. to about N × chains kept iterations", the planned length at which the error model's
/// own accuracy step predicts the ESS [`Objective::Convergence`] asks (empty without a model
/// that saw bias).
pub(super) fn longer(model: &Option<ErrorModel>, planned: &PlannedRun, d: usize) -> String {
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

/// What the reason line's summary states.
pub(super) struct Summary<'a> {
    pub(super) step: f64,
    pub(super) how: &'a str,
    pub(super) trials: &'a [Trial],
    /// The index and KSD of the best-scored pilot.
    pub(super) argmin: (usize, f64),
    pub(super) centre: f64,
    pub(super) grid_centre: f64,
    pub(super) limit: Option<f64>,
    pub(super) lambda_max: f64,
    pub(super) extensions: usize,
    pub(super) preconditioning: &'a str,
}

/// The whole reason line: the step, how it was chosen, and the grid it was chosen from.
pub(super) fn summary(s: &Summary<'_>) -> String {
    let Summary { step, how, trials, argmin, centre, grid_centre, limit, lambda_max, extensions, preconditioning } = *s;
    let capped = match limit {
        Some(l) if grid_centre < centre => format!(
            " (capped at {l:.3e}, where the gradient-noise correction stops being complete: the grid centred on {grid_centre:.3e})"
        ),
        _ => String::new(),
    };
    let edge = argmin.0 == 0 || argmin.0 == trials.len() - 1;
    let failed = trials.iter().filter(|t| t.failure.is_some()).count();
    format!(
        "step {step:.4e}: {how}; smallest KSD {:.4e} at {:.3e}, of {} candidate steps {:.3e} … {:.3e} around the curvature step {centre:.3e}{capped} \
         (λ_max = {lambda_max:.4e}); {failed} failed; grid extended {extensions} time(s){}; preconditioning: {preconditioning}",
        argmin.1,
        trials[argmin.0].step_size,
        trials.len(),
        trials.first().map_or(f64::NAN, |t| t.step_size),
        trials.last().map_or(f64::NAN, |t| t.step_size),
        if edge { "; the smallest KSD is still at an end of the grid" } else { "" },
    )
}

/// `how` with what a target accuracy chose: the run predicted to meet it, or that none is.
pub(super) fn target(how: String, target: f64, planned: &PlannedRun, reached: bool) -> String {
    if reached {
        format!(
            "for the target ±{target:.3} sd, the shortest run predicted to meet it: {} x {} kept draws; {how}",
            planned.iterations, planned.chains
        )
    } else {
        format!(
            "no run is predicted to meet the target ±{target} sd (no pilot showed a bias to predict from, or the \
             step's bias alone exceeds it): the planned {} x {} kept draws kept; {how}",
            planned.iterations, planned.chains
        )
    }
}
