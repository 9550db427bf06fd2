//! HAMCMC's [`Tunable`] impl: the one sampler outside the [`Langevin`](crate::Langevin) driver,
//! whose centre step is measured under its L-BFGS metric.

use super::centre::{preconditioned_lambda_max, settle};
use super::curvature::Curvature;
use super::tunable::Tunable;
use crate::cost::Cost;
use crate::error::Result;
use crate::gradient::GradientEstimator;
use crate::models::model::Model;
use crate::numeric::schedule::StepSize;
use crate::samplers::{Hamcmc, HamcmcSettings};

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
