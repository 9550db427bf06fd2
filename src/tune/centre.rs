//! Centre steps the tuner measures by running the sampler at the mode: the settled metric of a
//! kernel's [`CentreRule::SettledMetric`](crate::CentreRule::SettledMetric) (pSGLD) and HAMCMC's L-BFGS metric, each by a power
//! iteration on the preconditioned Hessian.

use super::curvature::{Curvature, CurvatureSettings, power_iteration};
use super::tunable::Tunable;
use crate::cost::Cost;
use crate::error::Result;
use crate::gradient::GradientEstimator;
use crate::models::hessian::Hessian;
use crate::models::model::Model;
use crate::numeric::rng::stream;
use crate::samplers::{Langevin, Sampler, TunableKernel};

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

/// The centre step of [`CentreRule::SettledMetric`](crate::CentreRule::SettledMetric): `1/λ_max(G^{1/2} ∇²U G^{1/2})`, G the
/// kernel's diagonal metric after [`SETTLE_STEPS`] steps at the mode with a step
/// `1e-12/λ_max`, capped on whitened coordinates at `1/(damping + 1/N)` (see the rule).
pub(super) fn settled_metric_centre<M, K, E>(
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
