//! Bayesian logistic regression with dense features and a Gaussian prior.

use super::{Rows, axpy, dot, prior_precision, standard_normal};
use crate::error::{Error, Result, check_len};
use crate::model::Model;
use crate::rng::stream;
use ndarray::{Array1, Array2, ArrayView2};
use rand::RngExt;

/// Bayesian logistic regression: `yᵢ ∈ {0, 1}`, `P(yᵢ = 1 | θ) = σ(xᵢᵀθ)`, prior
/// `θ ~ N(0, σ² I)`.
///
/// Potentials: `U₀(θ) = ‖θ‖² / (2σ²)`, `Uᵢ(θ) = log(1 + exp(xᵢᵀθ)) − yᵢ xᵢᵀθ`.
/// Gradients: `∇Uᵢ = (σ(xᵢᵀθ) − yᵢ) xᵢ`; Hessians `∇²Uᵢ = σ(1 − σ) xᵢxᵢᵀ`, applied to vectors
/// without forming them. Features are stored row-major and contiguous, so a minibatch gradient
/// is one pass over each drawn row.
#[derive(Debug, Clone)]
pub struct LogisticRegression {
    rows: Rows,
    labels: Vec<f64>,
    prior_var: f64,
    inv_prior: f64,
    true_theta: Option<Array1<f64>>,
}

#[inline(always)]
fn sigmoid(z: f64) -> f64 {
    // exp(−z) overflows to +∞ for z < −709, giving exactly 0: no NaN either way.
    1.0 / (1.0 + (-z).exp())
}

#[inline(always)]
fn softplus(z: f64) -> f64 {
    if z > 0.0 { z + (-z).exp().ln_1p() } else { z.exp().ln_1p() }
}

impl LogisticRegression {
    /// The model for features X (N × d, one datum per row; include a column of ones for an
    /// intercept), labels y (N, each 0 or 1) and prior variance σ².
    ///
    /// Errors: [`Error::EmptyData`] for N = 0 or d = 0, [`Error::DimensionMismatch`] if
    /// `labels.len() != N`, [`Error::InvalidParameter`] for a label other than 0 or 1, a
    /// non-positive prior variance or non-finite features.
    pub fn new(features: &Array2<f64>, labels: &Array1<f64>, prior_var: f64) -> Result<Self> {
        let rows = Rows::from_array(features, "features")?;
        check_len("labels", rows.n, labels.len())?;
        if let Some(y) = labels.iter().find(|&&y| y != 0.0 && y != 1.0) {
            return Err(Error::invalid("labels", y, "every label must be 0 or 1"));
        }
        let inv_prior = prior_precision(prior_var)?;
        Ok(LogisticRegression { rows, labels: labels.to_vec(), prior_var, inv_prior, true_theta: None })
    }

    /// A synthetic data set from a seeded generator: features `xᵢ ~ N(0, I_d)`, a true
    /// parameter `θ_true ~ N(0, (4/d) I)` (so the logits `xᵢᵀθ_true` have standard deviation
    /// about 2, neither separable nor flat), labels `yᵢ ~ Bernoulli(σ(xᵢᵀθ_true))`.
    pub fn synthetic(n_data: usize, dim: usize, prior_var: f64, seed: u64) -> Result<Self> {
        if dim == 0 {
            return Err(Error::EmptyData { what: "no columns (d = 0)" });
        }
        let mut rng = stream(seed, &[0x1091_5710]);
        let scale = (4.0 / dim as f64).sqrt();
        let theta = Array1::from_shape_fn(dim, |_| scale * standard_normal(&mut rng));
        let features = Array2::from_shape_fn((n_data, dim), |_| standard_normal(&mut rng));
        let labels = Array1::from_shape_fn(n_data, |i| {
            let p = sigmoid(features.row(i).dot(&theta));
            if rng.random::<f64>() < p { 1.0 } else { 0.0 }
        });
        let mut m = Self::new(&features, &labels, prior_var)?;
        m.true_theta = Some(theta);
        Ok(m)
    }

    /// The parameter the synthetic data were generated from (None for user data).
    pub fn true_theta(&self) -> Option<&Array1<f64>> {
        self.true_theta.as_ref()
    }

    /// The features X (N × d).
    pub fn features(&self) -> ArrayView2<'_, f64> {
        ArrayView2::from_shape((self.rows.n, self.rows.d), &self.rows.data).expect("shape matches storage")
    }

    /// The labels y (N).
    pub fn labels(&self) -> &[f64] {
        &self.labels
    }

    /// The prior variance σ².
    pub fn prior_var(&self) -> f64 {
        self.prior_var
    }

    /// The Hessian of the full potential, `I/σ² + Σᵢ σᵢ(1 − σᵢ) xᵢxᵢᵀ` (d × d), at θ.
    pub fn hessian(&self, theta: &[f64]) -> Result<Array2<f64>> {
        check_len("theta", self.rows.d, theta.len())?;
        let mut h = self.rows.weighted_gram(|i| {
            let p = sigmoid(dot(self.rows.row(i), theta));
            p * (1.0 - p)
        });
        for j in 0..self.rows.d {
            h[[j, j]] += self.inv_prior;
        }
        Ok(h)
    }

    /// The posterior mode (MAP) by Newton's method with step halving on the full potential,
    /// from θ = 0, to a gradient norm below `1e-10 · (1 + N)`.
    ///
    /// Errors: [`Error::LinearAlgebra`] if a Newton system fails (cannot happen with a proper
    /// Gaussian prior), [`Error::NonFiniteState`] if it does not converge in 100 iterations.
    pub fn map(&self) -> Result<Array1<f64>> {
        let d = self.rows.d;
        let all: Vec<usize> = (0..self.rows.n).collect();
        let potential =
            |t: &[f64]| self.potential_prior(t).unwrap_or(0.0) + self.potential_data_sum(t, &all).unwrap_or(0.0);
        let mut theta = vec![0.0; d];
        let mut g = vec![0.0; d];
        let mut gp = vec![0.0; d];
        let tol = 1e-10 * (1.0 + self.rows.n as f64);
        for it in 0..100u64 {
            self.grad_data_sum(&theta, &all, &mut g);
            self.grad_prior(&theta, &mut gp);
            for (a, b) in g.iter_mut().zip(&gp) {
                *a += b;
            }
            if dot(&g, &g).sqrt() < tol {
                return Ok(Array1::from_vec(theta));
            }
            let h = self.hessian(&theta)?;
            let step = crate::linalg::spd_solve("Newton system", &h, &Array1::from_vec(g.clone()))?;
            let u0 = potential(&theta);
            let mut t = 1.0;
            loop {
                let cand: Vec<f64> = theta.iter().zip(&step).map(|(a, s)| a - t * s).collect();
                if potential(&cand) <= u0 || t < 1e-8 {
                    theta = cand;
                    break;
                }
                t *= 0.5;
            }
            if !crate::error::all_finite(&theta) {
                return Err(Error::NonFiniteState { iteration: it + 1 });
            }
        }
        Err(Error::NonFiniteState { iteration: 100 })
    }
}

impl Model for LogisticRegression {
    fn dim(&self) -> usize {
        self.rows.d
    }

    fn n_data(&self) -> usize {
        self.rows.n
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) {
        for (o, t) in out.iter_mut().zip(theta) {
            *o = t * self.inv_prior;
        }
    }

    #[inline]
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) {
        out.fill(0.0);
        for &i in idx {
            let x = self.rows.row(i);
            let r = sigmoid(dot(x, theta)) - self.labels[i];
            axpy(r, x, out);
        }
    }

    fn potential_prior(&self, theta: &[f64]) -> Option<f64> {
        Some(0.5 * self.inv_prior * dot(theta, theta))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Option<f64> {
        Some(
            idx.iter()
                .map(|&i| {
                    let z = dot(self.rows.row(i), theta);
                    softplus(z) - self.labels[i] * z
                })
                .sum(),
        )
    }

    fn hvp_prior(&self, _theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        for (o, x) in out.iter_mut().zip(v) {
            *o = x * self.inv_prior;
        }
        Ok(())
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        for &i in idx {
            let x = self.rows.row(i);
            let p = sigmoid(dot(x, theta));
            axpy(p * (1.0 - p) * dot(x, v), x, out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Analytic gradients and Hessian-vector products against central finite differences.
    #[test]
    fn derivatives_match_finite_differences() {
        let m = LogisticRegression::synthetic(50, 4, 2.0, 3).unwrap();
        let all: Vec<usize> = (0..50).collect();
        let theta = [0.3, -0.2, 0.5, 0.1];
        let mut g = [0.0; 4];
        m.grad_data_sum(&theta, &all, &mut g);
        let h = 1e-6;
        for j in 0..4 {
            let mut tp = theta;
            let mut tm = theta;
            tp[j] += h;
            tm[j] -= h;
            let fd = (m.potential_data_sum(&tp, &all).unwrap() - m.potential_data_sum(&tm, &all).unwrap()) / (2.0 * h);
            assert!((fd - g[j]).abs() < 1e-6 * (1.0 + g[j].abs()), "grad {j}: {fd} vs {}", g[j]);
        }
        let v = [1.0, 0.5, -0.3, 0.2];
        let mut hv = [0.0; 4];
        m.hvp_data_sum(&theta, &v, &all, &mut hv).unwrap();
        let tp: Vec<f64> = theta.iter().zip(&v).map(|(t, v)| t + h * v).collect();
        let tm: Vec<f64> = theta.iter().zip(&v).map(|(t, v)| t - h * v).collect();
        let (mut gp, mut gm) = ([0.0; 4], [0.0; 4]);
        m.grad_data_sum(&tp, &all, &mut gp);
        m.grad_data_sum(&tm, &all, &mut gm);
        for j in 0..4 {
            let fd = (gp[j] - gm[j]) / (2.0 * h);
            assert!((fd - hv[j]).abs() < 1e-6 * (1.0 + hv[j].abs()), "hvp {j}: {fd} vs {}", hv[j]);
        }
    }

    #[test]
    fn map_has_zero_gradient() {
        let m = LogisticRegression::synthetic(2_000, 3, 10.0, 5).unwrap();
        let map = m.map().unwrap();
        let all: Vec<usize> = (0..2_000).collect();
        let (mut g, mut gp) = ([0.0; 3], [0.0; 3]);
        m.grad_data_sum(map.as_slice().unwrap(), &all, &mut g);
        m.grad_prior(map.as_slice().unwrap(), &mut gp);
        for j in 0..3 {
            assert!((g[j] + gp[j]).abs() < 1e-6);
        }
    }

    #[test]
    fn rejects_bad_input() {
        let x = Array2::zeros((3, 2));
        assert!(matches!(
            LogisticRegression::new(&x, &Array1::from_vec(vec![0.0, 1.0, 2.0]), 1.0),
            Err(Error::InvalidParameter { name: "labels", .. })
        ));
        assert!(matches!(
            LogisticRegression::new(&x, &Array1::from_vec(vec![0.0, 1.0]), 1.0),
            Err(Error::DimensionMismatch { .. })
        ));
        assert!(matches!(
            LogisticRegression::new(&x, &Array1::from_vec(vec![0.0, 1.0, 1.0]), 0.0),
            Err(Error::InvalidParameter { name: "prior_var", .. })
        ));
        assert!(matches!(
            LogisticRegression::new(&Array2::zeros((0, 2)), &Array1::zeros(0), 1.0),
            Err(Error::EmptyData { .. })
        ));
    }
}
