//! A constant change of coordinates in which a posterior looks like `N(0, I)`: what the
//! [`Langevin`](super::Langevin) driver preconditions with.
// Index loops over triangular rows read more plainly than iterator chains here.
#![allow(clippy::needless_range_loop)]

use crate::error::{Error, Result, all_finite, check_len};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

/// An affine change of coordinates `θ = c + T φ`, with `T` lower triangular (dense) or diagonal,
/// chosen so that the posterior is close to `N(0, I)` in φ: `T Tᵀ ≈ Σ`, the posterior
/// covariance (for a Laplace approximation, `Σ = ∇²U(θ̂)⁻¹` and `c = θ̂`).
///
/// A [`Langevin`](super::Langevin) sampler given a whitening
/// ([`with_whitening`](super::Langevin::with_whitening)) runs its kernel on φ with the gradient
/// `Tᵀ ∇Ũ(θ)` and maps every state back, `θ = c + T φ`: SGLD becomes
/// `θ ← θ − h T Tᵀ ∇Ũ(θ) + √(2h) T Z`, preconditioned SGLD with the constant metric `T Tᵀ` (a
/// constant metric needs no correction term), and SGHMC, SGNHT, cyclical SGLD and pSGLD become
/// their versions on the whitened posterior. The gradient estimator still works on θ, so control
/// variates, Taylor and variance-reduced estimators are unchanged, and the draws, weights and
/// stored gradients a run returns are on θ.
///
/// On an ill-conditioned posterior (condition number κ of `∇²U`), plain SGLD needs a step below
/// `2/λ_max` and then relaxes in about `1/(h λ_min) ≈ κ` iterations; whitened, the condition
/// number is that of `Tᵀ ∇²U T`, 1 for an exact Gaussian and close to 1 near it.
///
/// Cost per step beyond the gradient: `d²` multiply-adds for a dense `T` (two triangular
/// products), `2d` for a diagonal one; memory `d²/2` numbers, shared by the clones of a sampler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Whitening {
    centre: Vec<f64>,
    /// Dense: `T` row-major (d × d, lower triangular); diagonal: its d diagonal entries.
    t: Vec<f64>,
    dense: bool,
}

impl Whitening {
    /// The dense whitening of a covariance: `T` its lower Cholesky factor (`T Tᵀ = Σ`).
    ///
    /// Errors: [`Error::DimensionMismatch`] if `centre` and `Σ` differ in size or `Σ` is not
    /// square; [`Error::NonFiniteStart`] for a non-finite centre; [`Error::LinearAlgebra`] if `Σ`
    /// is not finite and positive definite.
    pub fn from_covariance(centre: &[f64], covariance: &Array2<f64>) -> Result<Self> {
        let d = centre.len();
        check_len("whitening covariance rows", d, covariance.nrows())?;
        check_len("whitening covariance columns", d, covariance.ncols())?;
        Self::check_centre(centre)?;
        let l = crate::numeric::linalg::cholesky_lower("whitening covariance", covariance)?;
        let t: Vec<f64> = (0..d).flat_map(|i| (0..d).map(move |j| (i, j))).map(|(i, j)| l[[i, j]]).collect();
        Ok(Whitening { centre: centre.to_vec(), t, dense: true })
    }

    /// The dense whitening of a Laplace approximation at `centre`: `Σ = H⁻¹`, H the Hessian of the
    /// potential there (so that `Tᵀ H T = I`).
    ///
    /// Errors: as [`from_covariance`](Self::from_covariance); [`Error::LinearAlgebra`] if H is not
    /// positive definite (not a mode).
    pub fn from_hessian(centre: &[f64], hessian: &Array2<f64>) -> Result<Self> {
        check_len("whitening Hessian rows", centre.len(), hessian.nrows())?;
        let cov = crate::numeric::linalg::spd_inverse("Hessian at the whitening centre", hessian)?;
        Self::from_covariance(centre, &cov)
    }

    /// A diagonal whitening `θⱼ = cⱼ + sⱼ φⱼ` with scales `sⱼ` (posterior sds, or `1/√Hⱼⱼ`).
    ///
    /// Errors: [`Error::DimensionMismatch`] if the lengths differ; [`Error::NonFiniteStart`] for
    /// a non-finite centre; [`Error::InvalidParameter`] (`"scales"`) for a scale that is not
    /// finite and positive.
    pub fn diagonal(centre: &[f64], scales: &[f64]) -> Result<Self> {
        check_len("whitening scales", centre.len(), scales.len())?;
        Self::check_centre(centre)?;
        if let Some(s) = scales.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(Error::invalid("scales", s, "every scale must be finite and > 0"));
        }
        Ok(Whitening { centre: centre.to_vec(), t: scales.to_vec(), dense: false })
    }

    fn check_centre(centre: &[f64]) -> Result<()> {
        if centre.is_empty() {
            return Err(Error::EmptyData { what: "whitening of dimension 0" });
        }
        if !all_finite(centre) {
            return Err(Error::NonFiniteStart { what: "whitening centre" });
        }
        Ok(())
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.centre.len()
    }

    /// Whether `T` is dense (else diagonal).
    pub fn is_dense(&self) -> bool {
        self.dense
    }

    /// The centre c.
    pub fn centre(&self) -> &[f64] {
        &self.centre
    }

    /// `T` as a d × d matrix (diagonal or lower triangular).
    pub fn transform(&self) -> Array2<f64> {
        let d = self.dim();
        if self.dense {
            Array2::from_shape_fn((d, d), |(i, j)| self.t[i * d + j])
        } else {
            Array2::from_shape_fn((d, d), |(i, j)| if i == j { self.t[i] } else { 0.0 })
        }
    }

    /// The metric `T Tᵀ` (the covariance the whitening assumes).
    pub fn covariance(&self) -> Array2<f64> {
        let t = self.transform();
        t.dot(&t.t())
    }

    /// Multiply-adds per sampler step beyond the gradient (`d²` dense, `2d` diagonal).
    pub fn flops_per_step(&self) -> u64 {
        let d = self.dim() as u64;
        if self.dense { d * d } else { 2 * d }
    }

    /// `θ = c + T φ`.
    #[inline]
    pub fn to_theta(&self, phi: &[f64], theta: &mut [f64]) {
        let d = self.dim();
        if self.dense {
            for i in 0..d {
                let row = &self.t[i * d..=i * d + i];
                theta[i] = self.centre[i] + row.iter().zip(phi).map(|(a, b)| a * b).sum::<f64>();
            }
        } else {
            for i in 0..d {
                theta[i] = self.centre[i] + self.t[i] * phi[i];
            }
        }
    }

    /// `φ = T⁻¹ (θ − c)` (forward substitution).
    pub fn to_phi(&self, theta: &[f64], phi: &mut [f64]) {
        let d = self.dim();
        if self.dense {
            for i in 0..d {
                let row = &self.t[i * d..i * d + i];
                let s: f64 = row.iter().zip(&phi[..i]).map(|(a, b)| a * b).sum();
                phi[i] = (theta[i] - self.centre[i] - s) / self.t[i * d + i];
            }
        } else {
            for i in 0..d {
                phi[i] = (theta[i] - self.centre[i]) / self.t[i];
            }
        }
    }

    /// The gradient on φ, `Tᵀ g`, of a gradient `g` on θ.
    #[inline]
    pub fn gradient_to_phi(&self, g: &[f64], out: &mut [f64]) {
        let d = self.dim();
        if self.dense {
            out.fill(0.0);
            for i in 0..d {
                let gi = g[i];
                let row = &self.t[i * d..=i * d + i];
                out[..=i].iter_mut().zip(row).for_each(|(o, t)| *o += t * gi);
            }
        } else {
            for i in 0..d {
                out[i] = self.t[i] * g[i];
            }
        }
    }

    /// `Tᵀ A T` for a symmetric d × d matrix A (e.g. the Hessian seen in φ).
    pub fn congruence(&self, a: &Array2<f64>) -> Array2<f64> {
        let t = self.transform();
        let m = t.t().dot(a).dot(&t);
        (&m + &m.t()) * 0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn maps_are_inverse_and_whiten_the_hessian() {
        let h = array![[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]];
        let c = [1.0, -2.0, 0.5];
        let w = Whitening::from_hessian(&c, &h).unwrap();
        let m = w.congruence(&h);
        for i in 0..3 {
            for j in 0..3 {
                assert!((m[[i, j]] - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12, "{m}");
            }
        }
        let theta = [0.3, 0.7, -1.1];
        let mut phi = [0.0; 3];
        let mut back = [0.0; 3];
        w.to_phi(&theta, &mut phi);
        w.to_theta(&phi, &mut back);
        assert!(theta.iter().zip(&back).all(|(a, b)| (a - b).abs() < 1e-14));
        // Tᵀ g against the dense product.
        let g = [0.5, -1.0, 2.0];
        let mut out = [0.0; 3];
        w.gradient_to_phi(&g, &mut out);
        let t = w.transform();
        let want = t.t().dot(&ndarray::arr1(&g));
        assert!(out.iter().zip(want.iter()).all(|(a, b)| (a - b).abs() < 1e-14));
        let dg = Whitening::diagonal(&c, &[2.0, 1.0, 0.5]).unwrap();
        dg.to_phi(&theta, &mut phi);
        dg.to_theta(&phi, &mut back);
        assert!(theta.iter().zip(&back).all(|(a, b)| (a - b).abs() < 1e-14));
        assert!(Whitening::diagonal(&c, &[1.0, 0.0, 1.0]).is_err());
        assert!(Whitening::from_hessian(&c, &array![[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]).is_err());
        assert!(Whitening::from_hessian(&c[..2], &h).is_err());
    }
}
