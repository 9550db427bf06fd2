//! SGLD with a constant dense preconditioner (SGRLD on a constant metric).

use super::{LangevinState, Sampler, SgldSettings};
use crate::cost::Cost;
use crate::error::{Result, check_len};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::model::Model;
use crate::rng::fill_standard_normal;
use ndarray::Array2;
use rand::Rng;

/// SGLD preconditioned by a constant symmetric positive definite matrix G (d × d):
///
/// `θ_{k+1} = θ_k − γ_{k+1} G ∇Ũ(θ_k) + √(2γ_{k+1}) L Z`,  `G = L Lᵀ` (Cholesky, by faer).
///
/// With G the inverse expected Fisher information (plus prior precision) this is SGRLD
/// (Patterson & Teh 2013) for models whose metric does not depend on θ, such as the linear
/// Gaussian model, where G is the exact posterior covariance: the expensive reference of the
/// HAMCMC paper. A constant metric has no correction term. Cost O(d²) per step beyond the
/// gradient; memory O(d²).
///
/// Reference: S. Patterson and Y. W. Teh, *Stochastic gradient Riemannian Langevin dynamics on
/// the probability simplex*, NeurIPS 2013.
#[derive(Debug, Clone)]
pub struct PreconditionedSgld<E = Minibatch> {
    settings: SgldSettings,
    estimator: E,
    g: Vec<f64>,
    l: Vec<f64>,
    dim: usize,
    state: LangevinState,
    buf: Vec<f64>,
}

impl<E: GradientEstimator> PreconditionedSgld<E> {
    /// The sampler with preconditioner G; errors on invalid settings or a G that is not square,
    /// finite and positive definite ([`Error::LinearAlgebra`](crate::Error::LinearAlgebra)).
    pub fn new(settings: SgldSettings, preconditioner: &Array2<f64>, estimator: E) -> Result<Self> {
        settings.validate()?;
        let l = crate::linalg::cholesky_lower("preconditioner", preconditioner)?;
        let dim = preconditioner.nrows();
        Ok(PreconditionedSgld {
            settings,
            estimator,
            g: preconditioner.iter().copied().collect(),
            l: l.iter().copied().collect(),
            dim,
            state: LangevinState::default(),
            buf: vec![0.0; dim],
        })
    }
}

impl<E: GradientEstimator> Sampler for PreconditionedSgld<E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        check_len("preconditioner dimension", model.dim(), self.dim)?;
        self.state.reset(model, theta0, model.dim())?;
        self.estimator.prepare(model)?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)?;
        self.state.ready = true;
        Ok(())
    }

    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.state.check_ready(model)?;
        let h = self.settings.step_size.at(self.state.k + 1);
        let s = (2.0 * h).sqrt();
        let d = self.dim;
        fill_standard_normal(rng, &mut self.state.noise);
        for i in 0..d {
            let grow = &self.g[i * d..(i + 1) * d];
            let lrow = &self.l[i * d..=i * d + i];
            let gg: f64 = grow.iter().zip(&self.state.grad).map(|(a, b)| a * b).sum();
            let lz: f64 = lrow.iter().zip(&self.state.noise).map(|(a, b)| a * b).sum();
            self.buf[i] = s * lz - h * gg;
        }
        for (t, b) in self.state.theta.iter_mut().zip(&self.buf) {
            *t += b;
        }
        self.state.k += 1;
        self.state.check_state()?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)
    }

    langevin_accessors!(|s| s.settings.step_size.at(s.state.k + 1));
}
