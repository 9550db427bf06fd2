//! Bayesian logistic regression with dense features and a Gaussian prior.

use super::{BLOCK, Bits, DataScalar, Rows, axpy, prior_precision, row_dot, standard_normal};
use crate::error::{Error, Result, check_len};
use crate::models::model::Model;
use crate::numeric::rng::stream;
use crate::numeric::special::{sigmoid, sigmoid_pair, softplus};
use ndarray::{Array1, Array2, ArrayView2, AsArray, Ix2};
use rand::RngExt;

/// Bayesian logistic regression: `yᵢ ∈ {0, 1}`, `P(yᵢ = 1 | θ) = σ(xᵢᵀθ)`, prior
/// `θ ~ N(0, σ² I)`.
///
/// Potentials: `U₀(θ) = ‖θ‖² / (2σ²)`, `Uᵢ(θ) = log(1 + exp(xᵢᵀθ)) − yᵢ xᵢᵀθ`.
/// Gradients: `∇Uᵢ = (σ(xᵢᵀθ) − yᵢ) xᵢ`; Hessians `∇²Uᵢ = σ(1 − σ) xᵢxᵢᵀ`, applied to vectors
/// without forming them. Features are stored row-major and contiguous, so a minibatch gradient
/// is one pass over each drawn row.
///
/// The features are stored as `X`: f64 ([`new`](Self::new)), or f32
/// ([`new_f32`](LogisticRegression::<f32>::new_f32), [`to_f32`](Self::to_f32)), which halves
/// the memory a minibatch gathers; parameters and arithmetic are f64 either way (see
/// [`DataScalar`]).
#[derive(Debug, Clone)]
pub struct LogisticRegression<X: DataScalar = f64> {
    rows: Rows<X>,
    labels: Vec<f64>,
    /// The labels again, one bit each, for the gradient's random reads.
    label_bits: Bits,
    prior_var: f64,
    inv_prior: f64,
    true_theta: Option<Array1<f64>>,
}

/// The residual `σ(z) − y` for a label y ∈ {0, 1}, computed as `σ(z)` for y = 0 and as
/// `−σ(−z)` for y = 1, which keeps its relative accuracy when it is small.
#[inline(always)]
pub(super) fn residual(z: f64, y: f64) -> f64 {
    let (s, s_neg) = sigmoid_pair(z);
    if y == 0.0 { s } else { -s_neg }
}

impl LogisticRegression<f64> {
    /// The model for features X (N × d, one datum per row; include a column of ones for an
    /// intercept), labels y (N, each 0 or 1) and prior variance σ².
    ///
    /// Errors: [`Error::EmptyData`] for N = 0 or d = 0, [`Error::DimensionMismatch`] if
    /// `labels.len() != N`, [`Error::InvalidParameter`] for a label other than 0 or 1, a
    /// non-positive prior variance or non-finite features.
    pub fn new<'a>(features: impl AsArray<'a, f64, Ix2>, labels: &Array1<f64>, prior_var: f64) -> Result<Self> {
        let rows = Rows::from_array(features, "features")?;
        Self::from_rows(rows, labels, prior_var)
    }

    /// A synthetic data set from a seeded generator: features `xᵢ ~ N(0, I_d)`, a true
    /// parameter `θ_true ~ N(0, (4/d) I)` (so the logits `xᵢᵀθ_true` have standard deviation
    /// about 2, neither separable nor flat), labels `yᵢ ~ Bernoulli(σ(xᵢᵀθ_true))`.
    pub fn synthetic(n_data: usize, dim: usize, prior_var: f64, seed: u64) -> Result<Self> {
        if dim == 0 {
            return Err(Error::EmptyData { what: "no columns (d = 0)" });
        }
        super::check_synthetic_size(n_data, dim)?;
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

    /// The same model with its features stored in f32 (each rounded to the nearest f32, relative
    /// error ≤ 2⁻²⁴): half the memory, and half the bytes a minibatch gathers. The gradients are
    /// those of the model on the rounded features, computed in f64 (see [`DataScalar`]).
    ///
    /// Errors: [`Error::InvalidParameter`] (`"features"`) if a feature is beyond f32's range
    /// (|x| > 3.4e38).
    pub fn to_f32(&self) -> Result<LogisticRegression<f32>> {
        Ok(LogisticRegression {
            rows: self.rows.convert("features")?,
            labels: self.labels.clone(),
            label_bits: self.label_bits.clone(),
            prior_var: self.prior_var,
            inv_prior: self.inv_prior,
            true_theta: self.true_theta.clone(),
        })
    }
}

impl LogisticRegression<f32> {
    /// The model for features X stored in f32 (N × d), labels y (N, each 0 or 1) and prior
    /// variance σ²: [`new`](LogisticRegression::new) for data that are f32 already. The
    /// gradients are exactly those of the f64 model on the same values (see [`DataScalar`]).
    ///
    /// Errors: as [`new`](LogisticRegression::new).
    ///
    /// ```
    /// use ndarray::{Array1, Array2};
    /// use sgmcmc::prelude::*;
    ///
    /// let x: Array2<f32> = Array2::from_shape_fn((1_000, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f32 / 5.0 - 1.0);
    /// let y = Array1::from_shape_fn(1_000, |i| f64::from(u8::from(i % 3 == 0)));
    /// let model = LogisticRegression::new_f32(&x, &y, 10.0)?;
    /// // Exactly the f64 model on the same values (every f32 is an f64).
    /// let same = LogisticRegression::new(&x.mapv(f64::from), &y, 10.0)?;
    /// let (mut g32, mut g64) = ([0.0; 3], [0.0; 3]);
    /// model.grad_data_sum(&[0.1, -0.2, 0.3], &[5, 17, 999], &mut g32)?;
    /// same.grad_data_sum(&[0.1, -0.2, 0.3], &[5, 17, 999], &mut g64)?;
    /// assert_eq!(g32, g64);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new_f32<'a>(features: impl AsArray<'a, f32, Ix2>, labels: &Array1<f64>, prior_var: f64) -> Result<Self> {
        let rows = Rows::from_array(features, "features")?;
        Self::from_rows(rows, labels, prior_var)
    }
}

impl<X: DataScalar> LogisticRegression<X> {
    /// The 0/1 labels of a block of at most [`BLOCK`] data, from their bits (lanes past the
    /// block's end stay 0).
    #[inline]
    fn block_labels(&self, block: &[usize]) -> [f64; BLOCK] {
        let mut y = [0.0; BLOCK];
        for (y, &i) in y.iter_mut().zip(block) {
            *y = self.label_bits.get(i);
        }
        y
    }

    fn from_rows(rows: Rows<X>, labels: &Array1<f64>, prior_var: f64) -> Result<Self> {
        check_len("labels", rows.n, labels.len())?;
        crate::error::check_entries("labels", labels, |y| y == 0.0 || y == 1.0, "every label must be 0 or 1")?;
        let inv_prior = prior_precision(prior_var)?;
        let labels = labels.to_vec();
        let label_bits = Bits::from_labels(&labels);
        Ok(LogisticRegression { rows, labels, label_bits, prior_var, inv_prior, true_theta: None })
    }

    /// The parameter the synthetic data were generated from (None for user data).
    pub fn true_theta(&self) -> Option<&Array1<f64>> {
        self.true_theta.as_ref()
    }

    /// The features X (N × d), as stored.
    pub fn features(&self) -> ArrayView2<'_, X> {
        ArrayView2::from_shape((self.rows.n, self.rows.d), self.rows.values()).expect("shape matches storage")
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
            let p = sigmoid(row_dot(self.rows.row(i), theta));
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
    /// Gaussian prior), [`Error::NonFiniteState`] if an iterate is not finite,
    /// [`Error::NotConverged`] if it does not converge in 100 iterations.
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
            self.grad_data_sum(&theta, &all, &mut g)?;
            self.grad_prior(&theta, &mut gp)?;
            for (a, b) in g.iter_mut().zip(&gp) {
                *a += b;
            }
            if row_dot(&g, &g).sqrt() < tol {
                return Ok(Array1::from_vec(theta));
            }
            let h = self.hessian(&theta)?;
            let step = crate::numeric::linalg::spd_solve("Newton system", &h, &Array1::from_vec(g.clone()))?;
            let u0 = potential(&theta);
            let mut t = 1.0;
            loop {
                let cand: Vec<f64> = theta.iter().zip(&step).map(|(a, s)| a - t * s).collect();
                // Near the mode the decrease falls below the potential's rounding error: accept
                // a step that does not increase it beyond that.
                if potential(&cand) <= u0 + 1e-13 * u0.abs().max(1.0) || t < 1e-8 {
                    theta = cand;
                    break;
                }
                t *= 0.5;
            }
            if !crate::error::all_finite(&theta) {
                return Err(Error::NonFiniteState { iteration: it + 1 });
            }
        }
        Err(Error::NotConverged { what: "Newton's method for the MAP", iterations: 100, residual: f64::NAN })
    }
}

impl<X: DataScalar> Model for LogisticRegression<X> {
    fn dim(&self) -> usize {
        self.rows.d
    }

    fn n_data(&self) -> usize {
        self.rows.n
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        for (o, t) in out.iter_mut().zip(theta) {
            *o = t * self.inv_prior;
        }
        Ok(())
    }

    /// By blocks of 16 indices: the rows' dot products, then their residuals `σ(z) − y` (which
    /// keep their relative accuracy where they are tiny; the sigmoid cannot overflow), then the
    /// rows added in index order, so the summation order depends on `idx` only. On data larger
    /// than the L2 cache, rows are prefetched 16 ahead of use. Allocates nothing.
    #[inline]
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        let bits = &self.label_bits;
        self.rows.add_gradient_blocks(
            theta,
            idx,
            out,
            |i| bits.prefetch(i),
            |block, z| {
                let y = self.block_labels(block);
                for (z, &y) in z.iter_mut().zip(&y) {
                    *z = residual(*z, y);
                }
            },
        );
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        Ok(0.5 * self.inv_prior * row_dot(theta, theta))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        Ok(idx
            .iter()
            .map(|&i| {
                let z = row_dot(self.rows.row(i), theta);
                softplus(z) - self.labels[i] * z
            })
            .sum())
    }

    /// One blocked pass: each datum's dot product gives its potential `softplus(z) − y z` and its
    /// gradient coefficient `σ(z) − y` (the gradient is [`grad_data_sum`](Model::grad_data_sum)'s
    /// bit for bit; the potential's dot products are the blocked kernel's, so it may differ from
    /// [`potential_data_sum`](Model::potential_data_sum)'s in the last bits).
    fn potential_and_grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<f64> {
        out.fill(0.0);
        let bits = &self.label_bits;
        let mut potential = 0.0;
        self.rows.add_gradient_blocks(
            theta,
            idx,
            out,
            |i| bits.prefetch(i),
            |block, z| {
                let y = self.block_labels(block);
                // Only the block's own lanes: a short last block leaves the rest unused.
                for (k, (z, &y)) in z.iter_mut().zip(&y).enumerate() {
                    if k < block.len() {
                        potential += softplus(*z) - y * *z;
                    }
                    *z = residual(*z, y);
                }
            },
        );
        Ok(potential)
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
            let p = sigmoid(row_dot(x, theta));
            axpy(p * (1.0 - p) * row_dot(x, v), x, out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeric::special::exp_nonpositive_ratio;

    /// Analytic gradients and Hessian-vector products against central finite differences.
    #[test]
    fn derivatives_match_finite_differences() {
        let m = LogisticRegression::synthetic(50, 4, 2.0, 3).unwrap();
        let all: Vec<usize> = (0..50).collect();
        let theta = [0.3, -0.2, 0.5, 0.1];
        let mut g = [0.0; 4];
        m.grad_data_sum(&theta, &all, &mut g).unwrap();
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
        m.grad_data_sum(&tp, &all, &mut gp).unwrap();
        m.grad_data_sum(&tm, &all, &mut gm).unwrap();
        for j in 0..4 {
            let fd = (gp[j] - gm[j]) / (2.0 * h);
            assert!((fd - hv[j]).abs() < 1e-6 * (1.0 + hv[j].abs()), "hvp {j}: {fd} vs {}", hv[j]);
        }
    }

    /// The vectorisable exp against libm on a dense grid of [−745, 0], and the sigmoid in its
    /// tails and at the special values.
    #[test]
    fn fast_exp_and_sigmoid_are_accurate() {
        let mut worst = 0.0f64;
        for j in 0..=2_000_000u32 {
            let x = -708.0 * f64::from(j) / 2e6;
            let (n, m) = exp_nonpositive_ratio(x);
            let (got, want) = (n / m, x.exp());
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 8e-16, "exp relative error {worst:e}");
        let exp = |x| {
            let (n, m) = exp_nonpositive_ratio(x);
            n / m
        };
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert!(exp(f64::NEG_INFINITY) > 0.0 && exp(-1e300) < 1e-307);
        assert!(exp(f64::NAN).is_nan());
        let grid = (-200_000..=200_000).map(|j| f64::from(j) * 2e-4);
        for z in grid.chain([-700.0, -100.0, -1e-10, 1e-10, 100.0, 700.0]) {
            let want = 1.0 / (1.0 + f64::exp(-z));
            let got = sigmoid(z);
            assert!((got - want).abs() <= 1e-15 * want, "sigmoid({z}) = {got} vs {want}");
            // σ(z) − 1 = −σ(−z), accurate where σ(z) is close to 1.
            let want1 = -1.0 / (1.0 + f64::exp(z));
            assert!((residual(z, 1.0) - want1).abs() <= 1e-15 * want1.abs(), "residual({z}, 1)");
            assert_eq!(residual(z, 0.0), got);
        }
        // Beyond |z| = 708 the tiny side is clamped to about 3e−308 instead of underflowing.
        assert_eq!(sigmoid(800.0), 1.0);
        assert_eq!(sigmoid(f64::INFINITY), 1.0);
        assert!(sigmoid(-800.0) < 1e-307 && sigmoid(f64::NEG_INFINITY) < 1e-307);
        assert!(residual(800.0, 1.0) > -1e-307 && residual(-800.0, 0.0) < 1e-307);
        assert!(sigmoid(f64::NAN).is_nan() && residual(f64::NAN, 1.0).is_nan());
    }

    /// The fused pass gives the gradient of `grad_data_sum` bit for bit and the potential of
    /// `potential_data_sum` to rounding, for short, exact and long blocks.
    #[test]
    fn fused_potential_and_gradient_match_the_separate_ones() {
        for (n, d) in [(40, 3), (60_000, 10)] {
            let m = LogisticRegression::synthetic(n, d, 1.0, 8).unwrap();
            let theta: Vec<f64> = (0..d).map(|j| 0.3 * (j as f64 - 1.2)).collect();
            for len in [1, BLOCK - 1, BLOCK, 3 * BLOCK + 5] {
                let idx: Vec<usize> = (0..len).map(|k| (k * 7919) % n).collect();
                let (mut g, mut fused) = (vec![0.0; d], vec![f64::NAN; d]);
                m.grad_data_sum(&theta, &idx, &mut g).unwrap();
                let u = m.potential_and_grad_data_sum(&theta, &idx, &mut fused).unwrap();
                assert_eq!(g, fused);
                let want = m.potential_data_sum(&theta, &idx).unwrap();
                assert!((u - want).abs() <= 1e-12 * want.abs().max(1.0), "{u} vs {want}");
            }
        }
    }

    /// The blocked, padded, prefetching minibatch gradient against a plain sum, for every
    /// minibatch length up to three blocks, with repeated indices and logits far in the tails,
    /// on a small data set and on one large enough (> 1 MiB) to take the prefetching path.
    #[test]
    fn grad_data_sum_matches_plain_sum() {
        for (n, d) in [(40, 3), (60_000, 10)] {
            let m = LogisticRegression::synthetic(n, d, 1.0, 8).unwrap();
            assert_eq!(m.rows.worth_prefetching(), n > 40);
            for scale in [0.3, 80.0] {
                let theta: Vec<f64> = (0..d).map(|j| scale * (j as f64 - 1.2)).collect();
                for len in 1..=3 * BLOCK + 1 {
                    let idx: Vec<usize> = (0..len).map(|k| (k * 7919) % n % (len + 3)).collect();
                    let mut got = vec![f64::NAN; d];
                    m.grad_data_sum(&theta, &idx, &mut got).unwrap();
                    let mut want = vec![0.0; d];
                    for &i in &idx {
                        let x = m.rows.row(i);
                        let z: f64 = x.iter().zip(&theta).map(|(a, b)| a * b).sum();
                        let r = 1.0 / (1.0 + (-z).exp()) - m.labels[i];
                        for (w, a) in want.iter_mut().zip(x) {
                            *w += r * a;
                        }
                    }
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "n {n}, len {len}: {g} vs {w}");
                    }
                }
            }
        }
    }

    #[test]
    fn map_has_zero_gradient() {
        let m = LogisticRegression::synthetic(2_000, 3, 10.0, 5).unwrap();
        let map = m.map().unwrap();
        let all: Vec<usize> = (0..2_000).collect();
        let (mut g, mut gp) = ([0.0; 3], [0.0; 3]);
        m.grad_data_sum(map.as_slice().unwrap(), &all, &mut g).unwrap();
        m.grad_prior(map.as_slice().unwrap(), &mut gp).unwrap();
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
