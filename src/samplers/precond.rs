//! SGLD with a constant dense preconditioner (SGRLD on a constant metric).

use super::{Langevin, LangevinKernel, SgldSettings};
use crate::error::{Result, check_len};
use crate::gradient::{GradientEstimator, Minibatch};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

/// The update `θ ← θ − h G ∇Ũ(θ) + √(2h) L z` (`G = L Lᵀ`, `h = fraction × γ_k`): the kernel of
/// [`PreconditionedSgld`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreconditionedKernel {
    settings: SgldSettings,
    /// G, row-major d × d.
    g: Vec<f64>,
    /// Its lower Cholesky factor L, row-major.
    l: Vec<f64>,
    dim: usize,
    buf: Vec<f64>,
}

impl LangevinKernel for PreconditionedKernel {
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k)
    }

    fn bind(&mut self, dim: usize, _n_data: usize) -> Result<()> {
        check_len("preconditioner dimension", dim, self.dim)
    }

    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.settings.step_size.at(k);
        let s = (2.0 * h).sqrt();
        let d = self.dim;
        for i in 0..d {
            let grow = &self.g[i * d..(i + 1) * d];
            let lrow = &self.l[i * d..=i * d + i];
            let gg: f64 = grow.iter().zip(grad).map(|(a, b)| a * b).sum();
            let lz: f64 = lrow.iter().zip(z).map(|(a, b)| a * b).sum();
            self.buf[i] = s * lz - h * gg;
        }
        for (t, b) in theta.iter_mut().zip(&self.buf) {
            *t += b;
        }
    }
}

/// SGLD preconditioned by a constant symmetric positive definite matrix G (d × d):
///
/// `θ_{k+1} = θ_k − γ_{k+1} G ∇Ũ(θ_k) + √(2γ_{k+1}) L Z`,  `G = L Lᵀ` (Cholesky, by faer).
///
/// With G the inverse expected Fisher information (plus prior precision) this is SGRLD
/// (Patterson & Teh 2013) for models whose metric does not depend on θ, such as the linear
/// Gaussian model, where G is the exact posterior covariance: the expensive reference of the
/// HAMCMC paper. A constant metric has no correction term. Cost O(d²) per step beyond the
/// gradient; memory O(d²). The [`Langevin`] driver with the [`PreconditionedKernel`].
///
/// Reference: S. Patterson and Y. W. Teh, *Stochastic gradient Riemannian Langevin dynamics on
/// the probability simplex*, NeurIPS 2013.
pub type PreconditionedSgld<E = Minibatch> = Langevin<PreconditionedKernel, E>;

impl<E: GradientEstimator> Langevin<PreconditionedKernel, E> {
    /// The sampler with preconditioner G; errors on invalid settings or a G that is not square,
    /// finite and positive definite ([`Error::LinearAlgebra`](crate::Error::LinearAlgebra)).
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::PreconditionedSgld;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// // G = the posterior covariance: every direction moves at the same speed.
    /// let g = model.posterior_covariance().clone();
    /// let sampler = PreconditionedSgld::new(SgldSettings::constant(0.1), &g, Minibatch::new(100))?;
    /// let out = Runner::new(&model, &sampler).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: SgldSettings, preconditioner: &Array2<f64>, estimator: E) -> Result<Self> {
        settings.validate()?;
        let l = crate::numeric::linalg::cholesky_lower("preconditioner", preconditioner)?;
        let dim = preconditioner.nrows();
        let kernel = PreconditionedKernel {
            settings,
            g: preconditioner.iter().copied().collect(),
            l: l.iter().copied().collect(),
            dim,
            buf: vec![0.0; dim],
        };
        Ok(Langevin::with_kernel(kernel, estimator))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step under `G = [[4, 2], [2, 5]]` (`L = [[2, 0], [1, 2]]`) against
    /// `θ − h G ∇Ũ + √(2h) L z` by hand.
    #[test]
    fn the_kernel_makes_the_update_of_its_docs() {
        let mut k = PreconditionedKernel {
            settings: SgldSettings::constant(0.01),
            g: vec![4.0, 2.0, 2.0, 5.0],
            l: vec![2.0, 0.0, 1.0, 2.0],
            dim: 2,
            buf: vec![0.0; 2],
        };
        k.bind(2, 1).unwrap();
        assert!(k.bind(3, 1).is_err());
        let mut theta = [1.0, -1.0];
        k.advance(&mut theta, &[1.0, -1.0], 0, 1.0, &[0.5, 1.0]);
        let s = 0.02_f64.sqrt();
        let want = [1.0 - 0.01 * (4.0 - 2.0) + s * (2.0 * 0.5), -1.0 - 0.01 * (2.0 - 5.0) + s * (0.5 + 2.0)];
        assert!((theta[0] - want[0]).abs() < 1e-15 && (theta[1] - want[1]).abs() < 1e-15);
    }
}
