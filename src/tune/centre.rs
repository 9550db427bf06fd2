//! Centre steps the tuner measures by running the sampler at the mode: the settled metric of a
//! kernel's [`CentreRule::SettledMetric`](crate::CentreRule::SettledMetric) (pSGLD) and HAMCMC's L-BFGS metric, each by a power
//! iteration on the preconditioned Hessian.

use super::curvature::{CurvatureSettings, power_iteration};
use crate::cost::Cost;
use crate::error::Result;
use crate::models::hessian::Hessian;
use crate::models::model::Model;
use crate::numeric::rng::stream;
use crate::samplers::Sampler;

/// Iterations of the nearly-still pilots that let pSGLD's and HAMCMC's preconditioners settle.
const SETTLE_STEPS: u64 = 300;

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
