//! Built-in models with analytic gradients and seeded synthetic data generators.
//!
//! - [`LinearGaussian`]: Bayesian linear regression with a Gaussian prior; its posterior is
//!   Gaussian and known in closed form, which makes exact statistical tests possible.
//! - [`LogisticRegression`]: Bayesian logistic regression with dense features and a Gaussian
//!   prior; analytic gradients, potentials and Hessian-vector products, and a Newton mode finder.

mod linear_gaussian;
mod logistic;

pub use linear_gaussian::LinearGaussian;
pub use logistic::LogisticRegression;

use crate::error::{Error, Result};
use ndarray::{Array1, Array2};

/// Row-major N × d data, stored contiguously for fast row gathers.
#[derive(Debug, Clone)]
pub(crate) struct Rows {
    pub data: Vec<f64>,
    pub n: usize,
    pub d: usize,
}

impl Rows {
    /// Copies a design matrix (any layout) into contiguous rows; checks it is non-empty and
    /// finite.
    pub fn from_array(a: &Array2<f64>, what: &'static str) -> Result<Self> {
        let (n, d) = a.dim();
        if n == 0 {
            return Err(Error::EmptyData { what: "no data rows (N = 0)" });
        }
        if d == 0 {
            return Err(Error::EmptyData { what: "no columns (d = 0)" });
        }
        if a.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid(what, "non-finite entry", "every entry must be finite"));
        }
        Ok(Rows { data: a.iter().copied().collect(), n, d })
    }

    #[inline(always)]
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.d..(i + 1) * self.d]
    }

    /// `Aᵀ diag(w) A` (d × d), by row accumulation.
    pub fn weighted_gram(&self, w: impl Fn(usize) -> f64) -> Array2<f64> {
        let d = self.d;
        let mut g = vec![0.0; d * d];
        for i in 0..self.n {
            let r = self.row(i);
            let wi = w(i);
            for a in 0..d {
                let ra = wi * r[a];
                let out = &mut g[a * d..(a + 1) * d];
                for b in a..d {
                    out[b] += ra * r[b];
                }
            }
        }
        Array2::from_shape_fn((d, d), |(a, b)| if b >= a { g[a * d + b] } else { g[b * d + a] })
    }
}

/// Dot product with four accumulators (lets the compiler use SIMD; the order is fixed, so the
/// result is deterministic).
#[inline(always)]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        acc[0] += x[0] * y[0];
        acc[1] += x[1] * y[1];
        acc[2] += x[2] * y[2];
        acc[3] += x[3] * y[3];
    }
    let mut tail = 0.0;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// `out += c · x`.
#[inline(always)]
pub(crate) fn axpy(c: f64, x: &[f64], out: &mut [f64]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += c * v;
    }
}

/// Checks a prior variance and turns it into a precision.
pub(crate) fn prior_precision(prior_var: f64) -> Result<f64> {
    crate::error::check_positive("prior_var", prior_var)?;
    Ok(1.0 / prior_var)
}

/// Standard normal draws as an array.
pub(crate) fn normal_array<R: rand::Rng + ?Sized>(rng: &mut R, n: usize) -> Array1<f64> {
    let mut v = vec![0.0; n];
    crate::rng::fill_standard_normal(rng, &mut v);
    Array1::from_vec(v)
}

/// One standard normal draw.
pub(crate) fn standard_normal<R: rand::Rng + ?Sized>(rng: &mut R) -> f64 {
    use rand_distr::Distribution;
    rand_distr::StandardNormal.sample(rng)
}
