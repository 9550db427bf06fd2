//! The tuner's choice of gradient estimator for an [`Auto`](crate::Auto) sampler: a plain minibatch or
//! control variates at the mode, and the minibatch size (see [`Auto`](crate::Auto)).

use crate::cost::Cost;
use crate::error::Result;
use crate::gradient::auto::Chosen;
use crate::gradient::control_variate::{ControlVariate, CvSettings};
use crate::gradient::{FullGradient, GradientEstimator, Minibatch};
use crate::models::model::Model;
use crate::samplers::{GRADIENT_NOISE_BATCH, GradientNoise, Whitening};
use crate::tune::CORRECTION_MARGIN;

/// The largest step (whitened coordinates, where the curvature is 1) that an [`Auto`](crate::Auto)
/// estimator's minibatch is sized for: a quarter of the Euler scheme's stability limit, above the
/// steps the tuner chooses for runs of a few thousand draws or more (0.03–0.15 on the validation
/// posteriors).
pub const AUTO_STEP: f64 = 0.25;

/// The smallest minibatch an [`Auto`](crate::Auto) estimator gets (and at least the dimension d).
pub const AUTO_MIN_BATCH: usize = 16;

/// Pairs of estimates per candidate estimator the choice measures the noise with.
const AUTO_NOISE_PAIRS: usize = 2_000;

/// Chooses between a plain minibatch and control variates centred at `mode`, and the minibatch
/// size, from their per-datum gradient noise measured at Laplace draws of `whitening` (see
/// [`Auto`](crate::Auto)); returns the choice and why, adding what it spent to `cost`.
///
/// Errors: those of the model's gradients and of the measurement.
pub(crate) fn choose_estimator<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    whitening: &Whitening,
    seed: u64,
    cost: &mut Cost,
) -> Result<(Chosen, String)> {
    let (n_data, d) = (model.n_data(), model.dim());
    let probe = GRADIENT_NOISE_BATCH.min(n_data);
    let mut rng = crate::numeric::rng::stream(seed, &[0x6175_746f]);
    // The per-datum noise's largest eigenvalue: the measured covariance on minibatches of
    // `probe`, times `probe` (with replacement the covariance scales as 1/n exactly).
    let top = |g: &GradientNoise| g.eigenvalues().last().copied().unwrap_or(0.0) * probe as f64;
    let (noise, c) = GradientNoise::estimate(model, &Minibatch::new(probe), whitening, AUTO_NOISE_PAIRS, &mut rng)?;
    *cost += c;
    let l_mb = top(&noise);
    let probe_cv = ControlVariate::at(model, mode, CvSettings { batch_size: probe, ..Default::default() })?;
    *cost += probe_cv.setup_cost();
    let (noise, c) = GradientNoise::estimate(model, &probe_cv, whitening, AUTO_NOISE_PAIRS, &mut rng)?;
    *cost += c;
    let l_cv = top(&noise);
    // The step's own work (whitening d², the noise correction 2d²) in datum gradients of a GLM
    // (about 2d flops each).
    let overhead = 1.5 * d as f64;
    let least = AUTO_MIN_BATCH.max(d).min(n_data);
    let batch = |l: f64| -> usize {
        let need = (AUTO_STEP * l / (2.0 * CORRECTION_MARGIN)).ceil();
        if need.is_finite() { (need as usize).clamp(least, n_data) } else { n_data }
    };
    let (n_mb, n_cv) = (batch(l_mb), batch(l_cv));
    let (cost_mb, cost_cv) = (n_mb as f64 + overhead, 2.0 * n_cv as f64 + overhead);
    let use_cv = cost_cv < cost_mb;
    // A minibatch as large as the data: the exact gradient instead, at the same cost and
    // without noise.
    if !use_cv && n_mb >= n_data {
        let why = format!(
            "gradient estimator chosen: the exact gradient (per-datum gradient noise at the mode, largest eigenvalue \
             in whitened units: {l_mb:.3e} plain, {l_cv:.3e} with control variates; the gradient-noise correction \
             would cover steps up to {AUTO_STEP} only with minibatches of all {n_data} data, or {n_cv} with \
             control variates at about {cost_cv:.0} datum gradients per step against {:.0})",
            n_data as f64 + overhead
        );
        return Ok((Chosen::Full(FullGradient::new()), why));
    }
    let why = format!(
        "gradient estimator chosen: {} on minibatches of {} (per-datum gradient noise at the mode, largest eigenvalue \
         in whitened units: {l_mb:.3e} plain, {l_cv:.3e} with control variates; the gradient-noise correction covers \
         steps up to {AUTO_STEP} with minibatches of {n_mb} plain or {n_cv} with control variates, about {cost_mb:.0} \
         or {cost_cv:.0} datum gradients per step)",
        if use_cv { "control variates at the mode" } else { "a plain minibatch" },
        if use_cv { n_cv } else { n_mb },
    );
    let chosen = if use_cv {
        let cv = ControlVariate::at(model, mode, CvSettings { batch_size: n_cv, ..Default::default() })?;
        *cost += cv.setup_cost();
        Chosen::ControlVariate(cv)
    } else {
        Chosen::Minibatch(Minibatch::new(n_mb))
    };
    Ok((chosen, why))
}
