//! The covariance of a gradient estimator's noise, and the correction of the injected noise by
//! it: what lets a [`Langevin`](super::Langevin) sampler on a minibatch gradient keep the total
//! noise of its exact-gradient scheme.
// Index loops over the row-major eigenvector matrix read more plainly than iterator chains here.
#![allow(clippy::needless_range_loop)]

use super::Whitening;
use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::GradientEstimator;
use crate::models::model::Model;
use crate::numeric::rng::fill_standard_normal;
use ndarray::Array2;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The covariance `V` of a gradient estimator's noise `∇Ũ(θ) − ∇U(θ)`, in the coordinates a
/// [`Langevin`](super::Langevin) kernel runs in, eigen-decomposed (`V = Q diag(λ) Qᵀ`).
///
/// Given one ([`Langevin::with_gradient_noise`](super::Langevin::with_gradient_noise)), the
/// driver draws the kernel's increment as `S z` with `S = Q diag(√max(0, 1 − c λ_i)) Qᵀ`, where
/// `c` is the kernel's weight of the gradient noise in its noise
/// ([`LangevinKernel::gradient_noise_weight`](super::LangevinKernel::gradient_noise_weight)):
/// `c = h/2` for SGLD with step h, whose update `θ ← θ − h ∇Ũ + √(2h) S z` then carries the
/// noise covariance `2h I − h² V + h² V = 2h I` of the exact-gradient scheme (ULA) wherever
/// `h λ_i ≤ 2`. The leading term of the minibatch noise's bias, a variance inflation of about
/// `h V/2` (the dominant error of plain SGLD at the steps it is run at), is removed; above that
/// limit the direction gets no injected noise and keeps a smaller excess.
///
/// This is the correction of SGHMC's noise estimate B̂ = ηV/2 (Chen, Fox and Guestrin, ICML 2014,
/// section 3.2) and of the modified SGLD of Vollmer, Zygalakis and Teh (JMLR 17, 2016), with
/// `V` a matrix averaged over the posterior's bulk: [`estimate`](Self::estimate) measures it at
/// draws of a Laplace approximation, from pairs of independent estimates at each point.
///
/// Under a kernel's diagonal metric M
/// ([`LangevinKernel::gradient_noise_metric`](super::LangevinKernel::gradient_noise_metric):
/// pSGLD's RMSprop G, which changes every step) the noise enters as `h² M V M` and the increment
/// is shaped by `S = p(c A)`, `A = M^{1/2} V M^{1/2}`, with the cubic series
/// `p(x) = 1 − x/2 − x²/8 − x³/16` of `√(1 − x)`, evaluated with the current M (no
/// eigen-decomposition per step); see [`METRIC_CORRECTION_MAX`] for its range.
///
/// Cost per step beyond the kernel: `2d²` multiply-adds and `d` square roots (`4d²` under a
/// metric); memory `2d²` numbers, shared by the clones of a sampler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "GradientNoiseFields")]
pub struct GradientNoise {
    /// The eigenvalues λ of V, increasing.
    lambda: Vec<f64>,
    /// Q row-major (its columns the eigenvectors).
    q: Vec<f64>,
    /// How V was obtained (points, shrinkage), for reports.
    summary: String,
    /// V row-major, `Q diag(λ) Qᵀ` (derived: not stored, rebuilt on loading).
    #[serde(skip_serializing)]
    v: Vec<f64>,
}

/// The stored fields, checked on loading (a checkpoint) before they become a [`GradientNoise`].
#[derive(Deserialize)]
struct GradientNoiseFields {
    lambda: Vec<f64>,
    q: Vec<f64>,
    summary: String,
}

impl TryFrom<GradientNoiseFields> for GradientNoise {
    type Error = String;

    fn try_from(f: GradientNoiseFields) -> std::result::Result<Self, String> {
        let d = f.lambda.len();
        if f.q.len() != d * d {
            return Err(format!("gradient noise: {} eigenvector entries for dimension {d}", f.q.len()));
        }
        if !f.lambda.iter().all(|l| l.is_finite() && *l >= 0.0) || !all_finite(&f.q) {
            return Err("gradient noise: negative or non-finite entries".into());
        }
        Ok(GradientNoise::from_parts(f.lambda, f.q, f.summary))
    }
}

/// The minibatch on which [`GradientNoise::estimate`] measures a minibatch-type estimator's
/// noise (an estimator that can be [`resized`](GradientEstimator::resized)): its covariance is
/// the estimator's own times the known factor `n/b` (with replacement), and a pair of estimates
/// costs `2b` datum gradients (`4b` with control variates) instead of `2n`. Small enough that a
/// measurement is a fraction of an epoch at N = 10⁵, large enough that the pairs' differences
/// are close to Gaussian (a mean of b data divides the per-datum excess kurtosis by b).
pub const GRADIENT_NOISE_BATCH: usize = 4;

/// `"; on minibatches of b, scaled by f"` where the measurement was resized (the summary
/// [`accumulate`](GradientNoise::accumulate) leaves), else nothing.
fn resized_note(noise: &GradientNoise) -> String {
    if noise.summary.starts_with("on minibatches") { format!(" ({})", noise.summary) } else { String::new() }
}

/// The largest bound on `c λ_max(M^{1/2} V M^{1/2})` at which [`GradientNoise`] shapes a step's
/// increment under a diagonal metric M by the cubic series `p(x) = 1 − x/2 − x²/8 − x³/16` of
/// `√(1 − x)`; above, `c` is lowered to it (a partial correction). The bound is the smaller of
/// `max M · λ_max(V)` and Gershgorin's `max_i √M_i Σ_j |V_ij| √M_j`, computed every step. Over
/// `x ≤ 1.5` the series' variance `p(x)²` stays within `[0, 1 − x + 0.1]` for x ≤ 1 (`0.5 %` of a
/// variance left at x = 0.5, `9.8 %` at x = 1) and below `0.1` above (where the exact correction,
/// clipped, would inject none); past `x = 2` it would inject more than no correction at all.
pub const METRIC_CORRECTION_MAX: f64 = 1.5;

impl GradientNoise {
    /// From a covariance matrix `V` (symmetric, positive semi-definite, finite) in the kernel's
    /// coordinates.
    ///
    /// Errors: [`Error::DimensionMismatch`] if V is not square; [`Error::LinearAlgebra`] if it is
    /// not finite or not symmetric; [`Error::InvalidParameter`] if it has an eigenvalue below
    /// `−1e-10 · λ_max` (not a covariance).
    pub fn from_covariance(v: &Array2<f64>) -> Result<Self> {
        check_len("gradient-noise covariance columns", v.nrows(), v.ncols())?;
        let d = v.nrows();
        let scale = v.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        for i in 0..d {
            for j in 0..i {
                if (v[[i, j]] - v[[j, i]]).abs() > 1e-12 * scale.max(f64::MIN_POSITIVE) {
                    return Err(Error::LinearAlgebra {
                        what: "gradient-noise covariance",
                        reason: "matrix is not symmetric",
                    });
                }
            }
        }
        let (mut lambda, q) = crate::numeric::linalg::symmetric_eigen("gradient-noise covariance", v)?;
        let top = lambda.last().copied().unwrap_or(0.0);
        if let Some(&low) = lambda.first()
            && low < -1e-10 * top.abs().max(f64::MIN_POSITIVE)
        {
            return Err(Error::invalid(
                "gradient-noise covariance",
                low,
                "has a negative eigenvalue: not a covariance",
            ));
        }
        lambda.iter_mut().for_each(|l| *l = l.max(0.0));
        Ok(GradientNoise::from_parts(lambda, q, "from a given covariance".into()))
    }

    /// From checked eigenvalues and eigenvectors, with the dense V.
    fn from_parts(lambda: Vec<f64>, q: Vec<f64>, summary: String) -> Self {
        let d = lambda.len();
        let mut v = vec![0.0; d * d];
        for i in 0..d {
            for j in 0..d {
                v[i * d + j] = (0..d).map(|k| q[i * d + k] * lambda[k] * q[j * d + k]).sum();
            }
        }
        GradientNoise { lambda, q, summary, v }
    }

    /// Measures the covariance of `estimator`'s noise, averaged over `points` draws `θ = c + T ξ`,
    /// `ξ ~ N(0, I)`, of the Laplace approximation that `whitening` describes, in its whitened
    /// coordinates (the kernel sees the gradient `Tᵀ ∇Ũ(θ)`): at each point two independent
    /// estimates `g₁, g₂`, whose difference has covariance `2 V(θ)`: an unbiased estimate of the
    /// posterior average of V, whose quadratic form along any direction has a relative standard
    /// error of about `√(2/points)` (the correction's error along it is that times `c λ`). Its
    /// extreme eigenvalues spread by about `±√(d/points)` relative (Marchenko–Pastur), which only
    /// makes [`full_correction_limit`](Self::full_correction_limit) conservative. (A shrinkage
    /// towards `(tr/d) I` was tried and dropped: it biases an anisotropic V — by 4 % of the
    /// variance along one direction of a 3-parameter regression.) Returns the noise and the datum
    /// gradients spent.
    ///
    /// The estimator must give independent estimates on fresh draws
    /// ([`GradientEstimator::independent_draws`]); it is prepared on a clone, so `estimator` and
    /// its cost counter are unchanged.
    ///
    /// Errors: [`Error::InvalidParameter`] for fewer than 2 points or an estimator without
    /// independent draws; [`Error::DimensionMismatch`] if the whitening's dimension is not the
    /// model's; [`Error::NonFiniteGradient`] for a non-finite estimate (iteration = the point's
    /// index); those of `prepare`.
    pub fn estimate<M: Model + ?Sized, E: GradientEstimator, R: Rng + ?Sized>(
        model: &M,
        estimator: &E,
        whitening: &Whitening,
        points: usize,
        rng: &mut R,
    ) -> Result<(Self, Cost)> {
        let d = model.dim();
        check_len("whitening dimension", d, whitening.dim())?;
        let mut xi = vec![0.0; d];
        let (mut noise, cost) = Self::accumulate(model, estimator, whitening, points, rng, |_, rng, theta| {
            fill_standard_normal(rng, &mut xi);
            whitening.to_theta(&xi, theta);
        })?;
        noise.summary = format!("from {points} pairs of estimates at Laplace draws{}", resized_note(&noise));
        Ok((noise, cost))
    }

    /// As [`estimate`](Self::estimate), at given states instead of Laplace draws: `pairs` pairs
    /// of independent estimates, taken at the rows of `states` (θ, one state per row) in turn,
    /// so that V is averaged over where the chains go (for example a pilot run's draws) rather
    /// than over a Gaussian that a skewed posterior does not resemble.
    ///
    /// Errors: as [`estimate`](Self::estimate); [`Error::DimensionMismatch`] if the rows are not
    /// the model's dimension; [`Error::NoSamples`] if `states` has no row.
    pub fn estimate_at<M: Model + ?Sized, E: GradientEstimator, R: Rng + ?Sized>(
        model: &M,
        estimator: &E,
        whitening: &Whitening,
        states: ndarray::ArrayView2<'_, f64>,
        pairs: usize,
        rng: &mut R,
    ) -> Result<(Self, Cost)> {
        let d = model.dim();
        check_len("whitening dimension", d, whitening.dim())?;
        check_len("gradient-noise state dimension", d, states.ncols())?;
        if states.nrows() == 0 {
            return Err(Error::NoSamples { reason: "no state to measure the gradient noise at" });
        }
        let n = states.nrows();
        let (mut noise, cost) = Self::accumulate(model, estimator, whitening, pairs, rng, |k, _, theta| {
            theta.iter_mut().zip(states.row(k % n)).for_each(|(t, s)| *t = *s);
        })?;
        noise.summary =
            format!("from {pairs} pairs of estimates at {} visited states{}", n.min(pairs), resized_note(&noise));
        Ok((noise, cost))
    }

    /// The mean of `x xᵀ`, `x = Tᵀ(g₁ − g₂)/√2`, over `points` pairs of independent estimates,
    /// the k-th at the state `at(k, rng, θ)` writes: the measured V (its summary still to be set).
    fn accumulate<M: Model + ?Sized, E: GradientEstimator, R: Rng + ?Sized>(
        model: &M,
        estimator: &E,
        whitening: &Whitening,
        points: usize,
        rng: &mut R,
        mut at: impl FnMut(usize, &mut R, &mut [f64]),
    ) -> Result<(Self, Cost)> {
        if points < 2 {
            return Err(Error::invalid("gradient-noise points", points as f64, "must be at least 2"));
        }
        if !estimator.independent_draws() {
            return Err(Error::invalid(
                "gradient-noise estimator",
                0.0,
                "its estimates are not independent draws at a point (variance-reduced estimators keep state): \
                 its noise covariance cannot be measured by repeated estimates",
            ));
        }
        let d = model.dim();
        // On small minibatches where the estimator allows it: the same covariance up to the
        // known factor, at a fraction of the cost.
        let (mut est, factor) = match estimator.resized(GRADIENT_NOISE_BATCH, model.n_data()) {
            Some((small, f)) => (small, f),
            None => (estimator.clone(), 1.0),
        };
        est.prepare(model)?;
        let before = est.cost();
        let mut theta = vec![0.0; d];
        let (mut g1, mut g2, mut diff) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
        let mut s = Array2::<f64>::zeros((d, d));
        for k in 0..points {
            at(k, rng, &mut theta);
            est.estimate(model, &theta, rng, &mut g1)?;
            est.estimate(model, &theta, rng, &mut g2)?;
            if !all_finite(&g1) || !all_finite(&g2) {
                return Err(Error::NonFiniteGradient { iteration: k as u64 });
            }
            g1.iter_mut().zip(&g2).for_each(|(a, b)| *a = (*a - *b) * std::f64::consts::FRAC_1_SQRT_2);
            whitening.gradient_to_phi(&g1, &mut diff);
            // x = Tᵀ(g₁ − g₂)/√2, of covariance V(θ_k).
            let x = &diff;
            for i in 0..d {
                for j in 0..=i {
                    s[[i, j]] += x[i] * x[j];
                }
            }
        }
        let m = points as f64 / factor;
        for i in 0..d {
            for j in 0..=i {
                s[[i, j]] /= m;
                s[[j, i]] = s[[i, j]];
            }
        }
        let cost = est.cost() - before;
        let mut noise = Self::from_covariance(&s)?;
        if factor != 1.0 {
            noise.summary = format!("on minibatches of {GRADIENT_NOISE_BATCH}, scaled by {factor:.4e}");
        }
        Ok((noise, cost))
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.lambda.len()
    }

    /// The eigenvalues of V, increasing.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.lambda
    }

    /// The covariance V.
    pub fn covariance(&self) -> Array2<f64> {
        let d = self.dim();
        Array2::from_shape_fn((d, d), |(i, j)| self.v[i * d + j])
    }

    /// How V was obtained.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The largest weight `c` at which the correction is complete in every direction, `1/λ_max`
    /// (infinite for V = 0): for SGLD the steps `h ≤ 2/λ_max`.
    pub fn full_correction_limit(&self) -> f64 {
        1.0 / self.lambda.last().copied().unwrap_or(0.0)
    }

    /// Multiply-adds per step beyond the kernel's: `2d²` (`4d²` under a kernel's diagonal
    /// metric, pSGLD's: see [`LangevinKernel::gradient_noise_metric`](super::LangevinKernel::gradient_noise_metric)).
    pub fn flops_per_step(&self) -> u64 {
        2 * (self.dim() as u64).pow(2)
    }

    /// `out = Q diag(√max(0, 1 − c λ)) Qᵀ z`, with `tmp` of length d as scratch. Allocates nothing.
    #[inline]
    pub(crate) fn shape(&self, c: f64, z: &[f64], tmp: &mut [f64], out: &mut [f64]) {
        let d = self.dim();
        for k in 0..d {
            let mut a = 0.0;
            for i in 0..d {
                a += self.q[i * d + k] * z[i];
            }
            tmp[k] = a * (1.0 - c * self.lambda[k]).max(0.0).sqrt();
        }
        for i in 0..d {
            let row = &self.q[i * d..(i + 1) * d];
            out[i] = row.iter().zip(tmp.iter()).map(|(q, t)| q * t).sum();
        }
    }
}

impl GradientNoise {
    /// `out = p(c A) z` with `A = M^{1/2} V M^{1/2}`, `M = diag(metric)` and
    /// `p(x) = 1 − x/2 − x²/8 − x³/16` (the cubic Taylor polynomial of `√(1 − x)`), so that
    /// `out` has covariance `I − c A` up to `O((cA)⁴)`; `c` is first lowered to
    /// [`METRIC_CORRECTION_MAX`]` / b` if above it, b the bound on `λ_max(A)` described there.
    /// `work` has length `3d`. A bound and three products with the dense V: `4d²` multiply-adds.
    /// Allocates nothing.
    #[inline]
    pub(crate) fn shape_metric(&self, c: f64, metric: &[f64], z: &[f64], work: &mut [f64], out: &mut [f64]) {
        let d = self.dim();
        let (w, rest) = work.split_at_mut(d);
        let (s, y) = rest.split_at_mut(d);
        for i in 0..d {
            s[i] = metric[i].max(0.0).sqrt();
            w[i] = z[i];
            out[i] = z[i];
        }
        let loose = self.lambda.last().copied().unwrap_or(0.0) * s.iter().fold(0.0_f64, |m, x| m.max(x * x));
        let gershgorin = (0..d)
            .map(|i| s[i] * self.v[i * d..(i + 1) * d].iter().zip(s.iter()).map(|(v, s)| v.abs() * s).sum::<f64>())
            .fold(0.0_f64, f64::max);
        let top = loose.min(gershgorin);
        let c = if c * top > METRIC_CORRECTION_MAX { METRIC_CORRECTION_MAX / top } else { c };
        for a in [0.5, 0.125, 0.0625] {
            // w ← c A w = c s ⊙ V (s ⊙ w); out −= a w.
            for i in 0..d {
                y[i] = s[i] * w[i];
            }
            for i in 0..d {
                let row = &self.v[i * d..(i + 1) * d];
                w[i] = c * s[i] * row.iter().zip(y.iter()).map(|(v, y)| v * y).sum::<f64>();
                out[i] -= a * w[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `S = p(cA)` column by column, for `A = M^{1/2} V M^{1/2}`.
    fn series_matrix(g: &GradientNoise, c: f64, metric: &[f64]) -> Array2<f64> {
        let d = g.dim();
        let (mut z, mut work, mut out) = (vec![0.0; d], vec![0.0; 3 * d], vec![0.0; d]);
        let mut s = Array2::zeros((d, d));
        for k in 0..d {
            z.iter_mut().enumerate().for_each(|(i, x)| *x = if i == k { 1.0 } else { 0.0 });
            g.shape_metric(c, metric, &z, &mut work, &mut out);
            (0..d).for_each(|i| s[[i, k]] = out[i]);
        }
        s
    }

    /// Under a diagonal metric the shaped increment has covariance `p(cA)²`, which exceeds the
    /// target `I − cA` by `r(x) = p(x)² − (1 − x) ∈ [0, 0.0055]` per eigen-direction for
    /// `x = c λ ≤ 0.5` (never below it: the series never over-corrects there); with a weight far
    /// above the limit the clamp keeps every direction's variance in `[0, 1]` (never more noise
    /// than no correction). Exact matrix identities, checked to rounding.
    #[test]
    fn the_metric_series_matches_its_target_and_is_clamped() {
        let v = ndarray::arr2(&[
            [30.0, 4.0, -2.0, 1.0],
            [4.0, 20.0, 3.0, 0.5],
            [-2.0, 3.0, 10.0, -1.0],
            [1.0, 0.5, -1.0, 5.0],
        ]);
        let g = GradientNoise::from_covariance(&v).unwrap();
        let metric: [f64; 4] = [2.0e3, 0.5e3, 1.2e3, 3.0e3];
        let d = 4;
        let a = Array2::from_shape_fn((d, d), |(i, j)| metric[i].sqrt() * v[[i, j]] * metric[j].sqrt());
        let top = crate::numeric::linalg::symmetric_eigenvalues("A", &a).unwrap().fold(0.0_f64, |m, l| m.max(*l));
        let c = 0.5 / top;
        let s = series_matrix(&g, c, &metric);
        let excess = s.dot(&s.t()) - (Array2::<f64>::eye(d) - &a * c);
        let ev = crate::numeric::linalg::symmetric_eigenvalues("excess", &excess).unwrap();
        assert!(ev.iter().all(|&e| (-1e-12..=0.00544).contains(&e)), "{ev:?}");
        // Far above: clamped, every direction's variance in [0, 1].
        let s = series_matrix(&g, 100.0 / top, &metric);
        let ev = crate::numeric::linalg::symmetric_eigenvalues("S Sᵀ", &s.dot(&s.t())).unwrap();
        assert!(ev.iter().all(|&e| (-1e-12..=1.0).contains(&e)), "{ev:?}");
    }

    /// Stored and loaded unchanged; a stored noise whose eigenvectors do not fit its dimension,
    /// or with a negative eigenvalue, is refused on loading (no index panic in a later step).
    #[test]
    fn a_stored_noise_round_trips_and_a_corrupt_one_is_refused() {
        let v = ndarray::arr2(&[[2.0, 0.5], [0.5, 1.0]]);
        let g = GradientNoise::from_covariance(&v).unwrap();
        let bytes = postcard::to_allocvec(&g).unwrap();
        assert_eq!(postcard::from_bytes::<GradientNoise>(&bytes).unwrap(), g);
        let c = g.covariance();
        assert!((0..2).all(|i| (0..2).all(|j| (c[[i, j]] - v[[i, j]]).abs() < 1e-12)));
        let bad = postcard::to_allocvec(&(vec![1.0, 2.0], vec![1.0, 0.0, 0.0], String::new())).unwrap();
        assert!(postcard::from_bytes::<GradientNoise>(&bad).is_err());
        let bad = postcard::to_allocvec(&(vec![-1.0, 2.0], vec![1.0, 0.0, 0.0, 1.0], String::new())).unwrap();
        assert!(postcard::from_bytes::<GradientNoise>(&bad).is_err());
    }
}
