//! Models: the [`Model`](crate::Model) trait (`model.rs`), its checks (`check.rs`), Hessians
//! from its Hessian-vector products (`hessian.rs`), the automatic-differentiation adapters
//! (`ad/`), and built-in models with analytic gradients and seeded synthetic data generators:
//!
//! - [`LinearGaussian`]: Bayesian linear regression with a Gaussian prior; its posterior is
//!   Gaussian and known in closed form, which makes exact statistical tests possible.
//! - [`LogisticRegression`]: Bayesian logistic regression with dense features and a Gaussian
//!   prior; analytic gradients, potentials and Hessian-vector products, and a Newton mode finder.
//! - [`Pmf`]: Bayesian probabilistic matrix factorisation on sparse [`Ratings`] (synthetic
//!   generator, MovieLens-format loader, held-out RMSE).
//! - [`Constrained`] with a [`Layout`]: a model written on the constrained scale (positive,
//!   interval, simplex, ordered blocks) as a model on ℝᵈ, with the log-Jacobian.
//! - [`Glm`]: generalised linear models (Gaussian, logistic, probit, Poisson, negative
//!   binomial) with intercepts, offsets and weights, analytic gradients and HVPs.
//! - [`Tempered`]: any model at a [`Temperature`] (cold posteriors, likelihood tempering).

pub mod ad;
pub(crate) mod check;
pub(crate) mod constrained;
mod glm;
pub(crate) mod hessian;
mod linear_gaussian;
mod logistic;
pub(crate) mod model;
mod pmf;
mod prior;
mod tempered;

pub use constrained::{Block, Constrained, Constraint, Layout};
pub use glm::{Family, Glm, GlmSettings};
pub use linear_gaussian::LinearGaussian;
pub use logistic::LogisticRegression;
pub(crate) use pmf::PmfTerms;
pub use pmf::{Pmf, Ratings};
pub use prior::Prior;
pub use tempered::{Temperature, Tempered};

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

    /// Whether [`touch`](Self::touch)ing rows ahead of use pays: for data sets above 4 MiB,
    /// larger than a core's L2 cache (1–2 MiB on current x86). Below that, rows drawn at random
    /// come from L1/L2, and the extra loads cost more than they save. Measured on one SGLD step
    /// with 100 random rows (d = 10, 20, 100; 32 MiB of L3): −7% with 80 kB of data, +3% with
    /// 8 MB (L3-resident), +13–15% with 80 and 160 MB.
    #[inline(always)]
    pub fn worth_prefetching(&self) -> bool {
        const MIN_BYTES: usize = 4 << 20;
        self.data.len() * size_of::<f64>() > MIN_BYTES
    }

    /// Reads one value from every cache line of the rows `idx` and returns their bits XOR-ed
    /// together, which the caller passes to [`std::hint::black_box`]: a software prefetch in safe
    /// code. The loads are independent of any computation, so the processor issues them at once
    /// and the rows arrive in cache while the caller works on other rows, instead of one memory
    /// latency at a time when the rows are used (random rows of a large data set are not in
    /// cache, and the hardware prefetcher cannot guess them).
    #[inline(always)]
    pub fn touch(&self, idx: &[usize]) -> u64 {
        /// f64s per 64-byte cache line.
        const LINE: usize = 8;
        let mut acc = 0;
        for &i in idx {
            let row = self.row(i);
            let last = row.len() - 1;
            acc ^= row[0].to_bits() ^ row[last].to_bits();
            let mut k = LINE;
            while k < last {
                acc ^= row[k].to_bits();
                k += LINE;
            }
        }
        acc
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

/// A data row's dot product, with four accumulators (lets the compiler use SIMD; the order is
/// fixed, so the result is deterministic): the models' row kernel. Not
/// [`numeric::linalg::dot`](crate::numeric::linalg::dot), the sequential dot product of
/// parameter-space vectors: this summation order is part of every built-in model's gradients,
/// hence of their draws.
#[inline(always)]
pub(crate) fn row_dot(a: &[f64], b: &[f64]) -> f64 {
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

/// The dot products of four vectors `x[r]` with `y`, computed together: one pass loads each
/// element of `y` once for the four rows and keeps eight independent accumulators (two per row,
/// even and odd positions) and four rows' memory loads in flight. Each result is
/// `(Σ even terms + Σ odd terms) + last term if the length is odd`, so it depends on the row
/// and `y` only, not on the other rows.
#[inline(always)]
pub(crate) fn dot4(x: &[&[f64]; 4], y: &[f64]) -> [f64; 4] {
    let n = x.iter().fold(y.len(), |n, r| n.min(r.len()));
    let mut cy = y[..n].chunks_exact(2);
    let mut cx = x.map(|r| r[..n].chunks_exact(2));
    let mut acc = [[0.0f64; 2]; 4];
    let [c0, c1, c2, c3] = &mut cx;
    for ((((yc, a), b), c), e) in (&mut cy).zip(c0).zip(c1).zip(c2).zip(c3) {
        for (acc, xc) in acc.iter_mut().zip([a, b, c, e]) {
            acc[0] += xc[0] * yc[0];
            acc[1] += xc[1] * yc[1];
        }
    }
    std::array::from_fn(|r| {
        let mut tail = 0.0;
        for (x, y) in cx[r].remainder().iter().zip(cy.remainder()) {
            tail += x * y;
        }
        acc[r][0] + acc[r][1] + tail
    })
}

/// `out += c · x`.
#[inline(always)]
pub(crate) fn axpy(c: f64, x: &[f64], out: &mut [f64]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += c * v;
    }
}

/// `out += (c₀x₀ + c₁x₁) + (c₂x₂ + c₃x₃)`, elementwise in that order: four rows added in one
/// pass over `out`, which quarters the loads and stores of `out` and the length of the
/// dependency chain through each of its elements.
#[inline(always)]
pub(crate) fn axpy4(c: [f64; 4], x: [&[f64]; 4], out: &mut [f64]) {
    let n = x.iter().fold(out.len(), |n, r| n.min(r.len()));
    let [x0, x1, x2, x3] = x.map(|r| &r[..n]);
    for (j, o) in out[..n].iter_mut().enumerate() {
        *o += (c[0] * x0[j] + c[1] * x1[j]) + (c[2] * x2[j] + c[3] * x3[j]);
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
    crate::numeric::rng::fill_standard_normal(rng, &mut v);
    Array1::from_vec(v)
}

/// One standard normal draw.
pub(crate) fn standard_normal<R: rand::Rng + ?Sized>(rng: &mut R) -> f64 {
    use rand_distr::Distribution;
    rand_distr::StandardNormal.sample(rng)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dot4` agrees with `dot` up to rounding and does not depend on the other rows; `axpy4`
    /// is four `axpy`s up to rounding.
    #[test]
    fn four_row_kernels_match_single_row_ones() {
        for n in 0..23 {
            let row = |r: usize| -> Vec<f64> { (0..n).map(|j| ((r * 31 + j * 7) % 13) as f64 / 3.0 - 2.0).collect() };
            let rows: Vec<Vec<f64>> = (0..4).map(row).collect();
            let y: Vec<f64> = (0..n).map(|j| 1.0 / (1.0 + j as f64)).collect();
            let x = [&rows[0][..], &rows[1][..], &rows[2][..], &rows[3][..]];
            let four = dot4(&x, &y);
            let swapped = dot4(&[x[3], x[0], x[0], x[2]], &y);
            assert_eq!([four[3], four[0], four[0], four[2]].map(f64::to_bits), swapped.map(f64::to_bits));
            for r in 0..4 {
                let exact: f64 = x[r].iter().zip(&y).map(|(a, b)| a * b).sum();
                assert!((four[r] - exact).abs() <= 1e-13 * (1.0 + exact.abs()), "n = {n}, row {r}");
                assert!((row_dot(x[r], &y) - exact).abs() <= 1e-13 * (1.0 + exact.abs()));
            }
            let c = [0.5, -1.25, 2.0, 0.125];
            let (mut a, mut b) = (y.clone(), y.clone());
            axpy4(c, x, &mut a);
            for r in 0..4 {
                axpy(c[r], x[r], &mut b);
            }
            for (a, b) in a.iter().zip(&b) {
                assert!((a - b).abs() <= 1e-14 * (1.0 + b.abs()));
            }
        }
    }
}
