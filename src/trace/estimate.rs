//! Weighted (possibly signed) estimates of posterior expectations.
//!
//! An [`Estimate`] is the weighted empirical measure `Σ_k w_k δ_{θ_k} / Σ_k w_k` of one or
//! several chains ("parts"), each kept either as stored samples ([`Samples`]) or as running
//! moments ([`Moments`], the streaming mode for long runs). Weights may be negative:
//! Richardson–Romberg and multilevel estimators are signed measures, and the same type carries
//! them, so `mean`, `covariance` and `expectation` work for every sampler.

use crate::error::{Error, Result, all_finite, check_len};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};

/// Stored samples of one chain: draws `θ_k` (one per row), their weights, and optionally the
/// gradient estimates computed at them (for ZV post-processing).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Samples {
    draws: Array2<f64>,
    weights: Array1<f64>,
    gradients: Option<Array2<f64>>,
    costs: Option<Array1<u64>>,
    step_sizes: Option<Array1<f64>>,
}

impl Samples {
    /// Samples from draws (n × d), weights (n) and optional gradients (n × d).
    ///
    /// Errors: [`Error::DimensionMismatch`] if the shapes disagree, [`Error::InvalidParameter`]
    /// if a weight is not finite.
    pub fn new(draws: Array2<f64>, weights: Array1<f64>, gradients: Option<Array2<f64>>) -> Result<Self> {
        check_len("number of weights", draws.nrows(), weights.len())?;
        if let Some(g) = &gradients {
            check_len("gradient rows", draws.nrows(), g.nrows())?;
            check_len("gradient columns", draws.ncols(), g.ncols())?;
        }
        if let Some(w) = weights.iter().find(|w| !w.is_finite()) {
            return Err(Error::invalid("weights", w, "every weight must be finite"));
        }
        Ok(Samples { draws, weights, gradients, costs: None, step_sizes: None })
    }

    /// Preallocated storage for `n` samples in dimension `d` (filled by the runner).
    ///
    /// Errors: [`Error::OutOfMemory`] if `n × d` overflows or the allocator refuses a buffer
    /// (nothing is kept allocated then).
    pub(crate) fn with_capacity(n: usize, d: usize, gradients: bool) -> Result<Self> {
        let bytes = |len: usize| (len as u64).saturating_mul(8);
        let total = n.saturating_mul(d).saturating_mul(1 + gradients as usize).saturating_add(3 * n);
        let oom = || Error::OutOfMemory { what: "the run's stored draws", needed: bytes(total), limit: None };
        fn buffer<T: Clone>(len: Option<usize>, fill: T, oom: &dyn Fn() -> Error) -> Result<Vec<T>> {
            let len = len.ok_or_else(oom)?;
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| oom())?;
            v.resize(len, fill);
            Ok(v)
        }
        let matrix = || -> Result<Array2<f64>> {
            Array2::from_shape_vec((n, d), buffer(n.checked_mul(d), 0.0, &oom)?).map_err(|_| oom())
        };
        Ok(Samples {
            draws: matrix()?,
            weights: Array1::from(buffer(Some(n), 0.0, &oom)?),
            gradients: if gradients { Some(matrix()?) } else { None },
            costs: Some(Array1::from(buffer(Some(n), 0u64, &oom)?)),
            step_sizes: Some(Array1::from(buffer(Some(n), f64::NAN, &oom)?)),
        })
    }

    pub(crate) fn set(&mut self, i: usize, theta: &[f64], w: f64, grad: Option<&[f64]>, cost: u64, step: Option<f64>) {
        self.draws.row_mut(i).as_slice_mut().expect("row-major storage").copy_from_slice(theta);
        self.weights[i] = w;
        if let Some(c) = self.costs.as_mut() {
            c[i] = cost;
        }
        if let Some(h) = self.step_sizes.as_mut() {
            h[i] = step.unwrap_or(f64::NAN);
        }
        if let (Some(g), Some(src)) = (self.gradients.as_mut(), grad) {
            g.row_mut(i).as_slice_mut().expect("row-major storage").copy_from_slice(src);
        }
    }

    /// Keeps the first `n` samples (a chain stopped before filling its storage).
    pub(crate) fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        let cut = |a: &Array2<f64>| a.slice_axis(Axis(0), ndarray::Slice::from(..n)).to_owned();
        self.draws = cut(&self.draws);
        self.weights = self.weights.slice_axis(Axis(0), ndarray::Slice::from(..n)).to_owned();
        if let Some(g) = self.gradients.as_mut() {
            *g = cut(g);
        }
        if let Some(c) = self.costs.as_mut() {
            *c = c.slice_axis(Axis(0), ndarray::Slice::from(..n)).to_owned();
        }
        if let Some(h) = self.step_sizes.as_mut() {
            *h = h.slice_axis(Axis(0), ndarray::Slice::from(..n)).to_owned();
        }
    }

    /// The same samples with every draw mapped by `f` into `width` numbers (weights, costs and
    /// step sizes kept; gradients dropped, as they belong to the old coordinates).
    pub(crate) fn mapped(&self, width: usize, f: impl Fn(&[f64], &mut [f64])) -> Samples {
        let mut draws = Array2::zeros((self.len(), width));
        for (src, mut dst) in self.draws.outer_iter().zip(draws.outer_iter_mut()) {
            let dst = dst.as_slice_mut().expect("a fresh array is row-major");
            // Draws a run stored are row-major (no copy); samples built by hand may not be.
            match src.as_slice() {
                Some(row) => f(row, dst),
                None => f(&src.to_vec(), dst),
            }
        }
        Samples {
            draws,
            weights: self.weights.clone(),
            gradients: None,
            costs: self.costs.clone(),
            step_sizes: self.step_sizes.clone(),
        }
    }

    /// Drops the step-size column if no draw has one (a sampler without a step, e.g. a user's).
    pub(crate) fn drop_unknown_step_sizes(&mut self) {
        if self.step_sizes.as_ref().is_some_and(|h| h.iter().all(|x| x.is_nan())) {
            self.step_sizes = None;
        }
    }

    /// Copies every sample of `other` into the first rows (`other` no longer than `self`, same
    /// width and the same optional columns).
    pub(crate) fn copy_prefix(&mut self, other: &Samples) {
        let n = other.len();
        self.draws.slice_axis_mut(Axis(0), ndarray::Slice::from(..n)).assign(&other.draws);
        self.weights.slice_axis_mut(Axis(0), ndarray::Slice::from(..n)).assign(&other.weights);
        if let (Some(g), Some(o)) = (self.gradients.as_mut(), other.gradients.as_ref()) {
            g.slice_axis_mut(Axis(0), ndarray::Slice::from(..n)).assign(o);
        }
        if let (Some(c), Some(o)) = (self.costs.as_mut(), other.costs.as_ref()) {
            c.slice_axis_mut(Axis(0), ndarray::Slice::from(..n)).assign(o);
        }
        if let (Some(h), Some(o)) = (self.step_sizes.as_mut(), other.step_sizes.as_ref()) {
            h.slice_axis_mut(Axis(0), ndarray::Slice::from(..n)).assign(o);
        }
    }

    /// The draws, one per row (n × d).
    pub fn draws(&self) -> ArrayView2<'_, f64> {
        self.draws.view()
    }

    /// The weights (n).
    pub fn weights(&self) -> ArrayView1<'_, f64> {
        self.weights.view()
    }

    /// The gradient estimates `∇Ũ(θ_k)` at the draws (n × d), if they were stored.
    pub fn gradients(&self) -> Option<ArrayView2<'_, f64>> {
        self.gradients.as_ref().map(|g| g.view())
    }

    /// The chain's cumulative cost (datum-gradient evaluations since its start, initial gradient
    /// included) at each draw, if recorded by a run.
    pub fn costs(&self) -> Option<ArrayView1<'_, u64>> {
        self.costs.as_ref().map(|c| c.view())
    }

    /// The step size of the step that left each draw, as the sampler reported it
    /// ([`Sampler::draw_step_size`](crate::Sampler::draw_step_size)), if recorded by a run of a
    /// sampler that has one (NaN for a draw without). Written as ArviZ's `sample_stats.step_size`.
    pub fn step_sizes(&self) -> Option<ArrayView1<'_, f64>> {
        self.step_sizes.as_ref().map(|h| h.view())
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.draws.nrows()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Running weighted first and second moments (the streaming mode): O(d²) memory whatever the
/// number of samples.
///
/// Sums are kept around a shift `c` (the first sample), `Σ w (θ − c)` and
/// `Σ w (θ − c)(θ − c)ᵀ`, which stays accurate where raw sums of squares would cancel, and
/// works for signed weights (unlike Welford-type updates, which divide by the running weight).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Moments {
    dim: usize,
    n: usize,
    total_weight: f64,
    shift: Vec<f64>,
    s1: Vec<f64>,
    /// Upper triangle (row-major d × d; only `j ≥ i` entries used).
    s2: Vec<f64>,
    centred: Vec<f64>,
}

impl Moments {
    /// An empty accumulator for dimension `dim`.
    pub fn new(dim: usize) -> Self {
        Moments {
            dim,
            n: 0,
            total_weight: 0.0,
            shift: vec![0.0; dim],
            s1: vec![0.0; dim],
            s2: vec![0.0; dim * dim],
            centred: vec![0.0; dim],
        }
    }

    /// Adds one sample with weight `w` (allocates nothing).
    ///
    /// Errors: [`Error::DimensionMismatch`] if `theta` has the wrong length.
    pub fn push(&mut self, theta: &[f64], w: f64) -> Result<()> {
        check_len("sample", self.dim, theta.len())?;
        if self.n == 0 {
            self.shift.copy_from_slice(theta);
        }
        self.n += 1;
        self.total_weight += w;
        for ((c, t), s) in self.centred.iter_mut().zip(theta).zip(&self.shift) {
            *c = t - s;
        }
        let d = self.dim;
        for i in 0..d {
            let wi = w * self.centred[i];
            self.s1[i] += wi;
            let row = &mut self.s2[i * d + i..(i + 1) * d];
            for (r, c) in row.iter_mut().zip(&self.centred[i..]) {
                *r += wi * c;
            }
        }
        Ok(())
    }

    /// The number of samples pushed.
    pub fn len(&self) -> usize {
        self.n
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether no sample was pushed.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The sum of the weights.
    pub fn total_weight(&self) -> f64 {
        self.total_weight
    }

    /// `Σ w θ` (the weighted sum, not normalised).
    fn weighted_sum(&self) -> Array1<f64> {
        Array1::from_shape_fn(self.dim, |i| self.total_weight * self.shift[i] + self.s1[i])
    }

    /// `Σ w (θ − m)(θ − m)ᵀ` for a given point m.
    fn scatter_about(&self, m: &Array1<f64>) -> Array2<f64> {
        let d = self.dim;
        let delta: Vec<f64> = (0..d).map(|i| self.shift[i] - m[i]).collect();
        Array2::from_shape_fn((d, d), |(i, j)| {
            let s2 = if j >= i { self.s2[i * d + j] } else { self.s2[j * d + i] };
            s2 + delta[i] * self.s1[j] + self.s1[i] * delta[j] + self.total_weight * delta[i] * delta[j]
        })
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Part {
    Samples(Samples),
    Moments(Moments),
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Samples(s) => s.len(),
            Part::Moments(m) => m.len(),
        }
    }
    fn total_weight(&self) -> f64 {
        match self {
            Part::Samples(s) => s.weights.sum(),
            Part::Moments(m) => m.total_weight,
        }
    }
    fn weighted_sum(&self, d: usize) -> Array1<f64> {
        match self {
            Part::Samples(s) => {
                let mut acc = Array1::zeros(d);
                for (row, &w) in s.draws.outer_iter().zip(&s.weights) {
                    acc.scaled_add(w, &row);
                }
                acc
            }
            Part::Moments(m) => m.weighted_sum(),
        }
    }
    fn scatter_about(&self, m: &Array1<f64>) -> Array2<f64> {
        match self {
            Part::Samples(s) => {
                let d = m.len();
                let mut acc = Array2::zeros((d, d));
                let mut c = Array1::zeros(d);
                for (row, &w) in s.draws.outer_iter().zip(&s.weights) {
                    ndarray::Zip::from(&mut c).and(&row).and(m).for_each(|c, &x, &mu| *c = x - mu);
                    for i in 0..d {
                        let wi = w * c[i];
                        for j in i..d {
                            acc[[i, j]] += wi * c[j];
                        }
                    }
                }
                for i in 0..d {
                    for j in 0..i {
                        acc[[i, j]] = acc[[j, i]];
                    }
                }
                acc
            }
            Part::Moments(mo) => mo.scatter_about(m),
        }
    }
}

/// A weighted (possibly signed) estimate of expectations under the posterior, pooled over one
/// or several parts (chains).
///
/// Every statistic is that of the normalised weighted measure `Σ w_k δ_{θ_k} / Σ w_k` over all
/// parts together: the mean `Σ w θ / Σ w`, the covariance `Σ w (θ − mean)(θ − mean)ᵀ / Σ w`
/// (the plug-in value, without a small-sample correction), and `Σ w f(θ) / Σ w`. With signed
/// weights a variance can come out negative; that is the estimator's honest value.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Estimate {
    dim: usize,
    parts: Vec<Part>,
}

impl Estimate {
    /// An estimate of dimension `dim` with no part (what a failed run keeps when no chain kept
    /// draws of its own: their draws are in the run's divergences).
    pub(crate) fn empty(dim: usize) -> Estimate {
        Estimate { dim, parts: Vec::new() }
    }

    /// Every part's stored draws, for writers that lay chains side by side (export, Zarr).
    ///
    /// Errors: [`Error::NotStored`] for a streaming (moments-only) part, [`Error::NoSamples`]
    /// without parts, [`Error::DimensionMismatch`] for parts of different lengths.
    pub(crate) fn equal_length_parts(&self) -> Result<Vec<&Samples>> {
        let v: Vec<&Samples> = (0..self.n_parts())
            .map(|c| self.samples(c).ok_or(Error::NotStored { what: "samples (the run kept only running moments)" }))
            .collect::<Result<_>>()?;
        if v.is_empty() {
            return Err(Error::NoSamples { reason: "no chain to export" });
        }
        let n = v[0].len();
        for s in &v {
            check_len("draws per chain (export needs equal lengths)", n, s.len())?;
        }
        Ok(v)
    }

    /// An estimate from stored samples (one part).
    pub fn from_samples(samples: Samples) -> Self {
        Estimate { dim: samples.draws.ncols(), parts: vec![Part::Samples(samples)] }
    }

    /// An estimate from running moments (one part).
    pub fn from_moments(moments: Moments) -> Self {
        Estimate { dim: moments.dim, parts: vec![Part::Moments(moments)] }
    }

    /// An estimate from draws (n × d) and weights (n), e.g. a signed Richardson–Romberg measure.
    ///
    /// Errors as [`Samples::new`].
    pub fn from_weighted(draws: Array2<f64>, weights: Array1<f64>) -> Result<Self> {
        Ok(Self::from_samples(Samples::new(draws, weights, None)?))
    }

    /// Pools several estimates into one (their parts side by side, weights unchanged).
    ///
    /// Errors: [`Error::NoSamples`] for an empty list, [`Error::DimensionMismatch`] if the
    /// dimensions differ.
    pub fn combine(estimates: impl IntoIterator<Item = Estimate>) -> Result<Self> {
        let mut iter = estimates.into_iter();
        let mut out = iter.next().ok_or(Error::NoSamples { reason: "no estimate to combine" })?;
        for e in iter {
            check_len("dimension of combined estimate", out.dim, e.dim)?;
            out.parts.extend(e.parts);
        }
        Ok(out)
    }

    /// The same estimate with every weight multiplied by `c` (e.g. `−1` for the subtracted
    /// chain of a Richardson–Romberg extrapolation). Normalised statistics are unchanged when all
    /// parts are scaled alike; scaling some parts changes their share in the pooled measure.
    pub fn scaled(mut self, c: f64) -> Estimate {
        for p in &mut self.parts {
            match p {
                Part::Samples(s) => s.weights.mapv_inplace(|w| w * c),
                Part::Moments(m) => {
                    m.total_weight *= c;
                    m.s1.iter_mut().for_each(|x| *x *= c);
                    m.s2.iter_mut().for_each(|x| *x *= c);
                }
            }
        }
        self
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// One estimate per part, in order.
    pub(crate) fn into_parts(self) -> Vec<Estimate> {
        let dim = self.dim;
        self.parts.into_iter().map(|p| Estimate { dim, parts: vec![p] }).collect()
    }

    /// The only part, if there is exactly one.
    pub(crate) fn into_single(mut self) -> Option<Part> {
        if self.parts.len() == 1 { self.parts.pop() } else { None }
    }

    /// Every stored draw mapped by `f` to `width` numbers, part by part (weights, costs and
    /// step sizes kept, gradients dropped).
    ///
    /// Errors: [`Error::NotStored`] for a streaming (moments-only) part.
    pub(crate) fn map_draws(&self, width: usize, f: impl Fn(&[f64], &mut [f64])) -> Result<Estimate> {
        let mut parts = Vec::with_capacity(self.n_parts());
        for c in 0..self.n_parts() {
            let s = self.samples(c).ok_or(Error::NotStored { what: "draws (a streaming run keeps only moments)" })?;
            parts.push(Estimate::from_samples(s.mapped(width, &f)));
        }
        Estimate::combine(parts)
    }

    /// The number of parts (chains).
    pub fn n_parts(&self) -> usize {
        self.parts.len()
    }

    /// Part `i` alone (a copy), e.g. one chain of a multi-chain run.
    pub fn part(&self, i: usize) -> Option<Estimate> {
        self.parts.get(i).map(|p| Estimate { dim: self.dim, parts: vec![p.clone()] })
    }

    /// The stored samples of part `i`, if that part keeps samples.
    pub fn samples(&self, i: usize) -> Option<&Samples> {
        match self.parts.get(i)? {
            Part::Samples(s) => Some(s),
            Part::Moments(_) => None,
        }
    }

    /// The number of samples over all parts.
    pub fn n_samples(&self) -> usize {
        self.parts.iter().map(Part::len).sum()
    }

    /// The sum of the weights over all parts.
    pub fn total_weight(&self) -> f64 {
        self.parts.iter().map(Part::total_weight).sum()
    }

    fn checked_total_weight(&self) -> Result<f64> {
        if self.n_samples() == 0 {
            return Err(Error::NoSamples { reason: "the estimate holds no sample" });
        }
        let w = self.total_weight();
        if w == 0.0 || !w.is_finite() { Err(Error::ZeroTotalWeight) } else { Ok(w) }
    }

    /// The weighted mean `Σ w θ / Σ w`.
    ///
    /// Errors: [`Error::NoSamples`], [`Error::ZeroTotalWeight`].
    pub fn mean(&self) -> Result<Array1<f64>> {
        let w = self.checked_total_weight()?;
        let mut acc = Array1::zeros(self.dim);
        for p in &self.parts {
            acc += &p.weighted_sum(self.dim);
        }
        Ok(acc / w)
    }

    /// The weighted covariance `Σ w (θ − mean)(θ − mean)ᵀ / Σ w` (d × d).
    ///
    /// Errors: [`Error::NoSamples`], [`Error::ZeroTotalWeight`].
    pub fn covariance(&self) -> Result<Array2<f64>> {
        let w = self.checked_total_weight()?;
        let m = self.mean()?;
        let mut acc = Array2::zeros((self.dim, self.dim));
        for p in &self.parts {
            acc += &p.scatter_about(&m);
        }
        Ok(acc / w)
    }

    /// The diagonal of [`covariance`](Self::covariance).
    pub fn variance(&self) -> Result<Array1<f64>> {
        Ok(self.covariance()?.diag().to_owned())
    }

    /// The weighted expectation `Σ w f(θ) / Σ w` of a test function.
    ///
    /// Errors: [`Error::NotStored`] if some part keeps only moments (streaming mode), plus those
    /// of [`mean`](Self::mean).
    pub fn expectation<F: Fn(ArrayView1<'_, f64>) -> f64>(&self, f: F) -> Result<f64> {
        let w = self.checked_total_weight()?;
        let mut acc = 0.0;
        for p in &self.parts {
            match p {
                Part::Samples(s) => {
                    for (row, &wk) in s.draws.outer_iter().zip(&s.weights) {
                        acc += wk * f(row);
                    }
                }
                Part::Moments(_) => {
                    return Err(Error::NotStored { what: "samples (the run kept only running moments)" });
                }
            }
        }
        Ok(acc / w)
    }

    /// All stored draws stacked over parts (n_total × d).
    ///
    /// Errors: [`Error::NotStored`] if some part keeps only moments.
    pub fn stacked_draws(&self) -> Result<Array2<f64>> {
        let views: Vec<ArrayView2<'_, f64>> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Samples(s) => Ok(s.draws.view()),
                Part::Moments(_) => Err(Error::NotStored { what: "samples (the run kept only running moments)" }),
            })
            .collect::<Result<_>>()?;
        if views.is_empty() {
            return Ok(Array2::zeros((0, self.dim)));
        }
        ndarray::concatenate(Axis(0), &views).map_err(|_| Error::DimensionMismatch {
            what: "stacked draws",
            expected: self.dim,
            got: 0,
        })
    }

    /// Whether every stored draw and weight is finite.
    pub fn is_finite(&self) -> bool {
        self.parts.iter().all(|p| match p {
            Part::Samples(s) => {
                s.draws.iter().all(|x| x.is_finite()) && all_finite(s.weights.as_slice().unwrap_or(&[]))
            }
            Part::Moments(m) => m.total_weight.is_finite() && all_finite(&m.s1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn moments_match_samples_with_signed_weights() {
        let draws = array![[1.0, 2.0], [3.0, -1.0], [0.5, 0.5], [2.0, 2.0]];
        let weights = array![1.0, -0.5, 2.0, 0.75];
        let e1 = Estimate::from_weighted(draws.clone(), weights.clone()).unwrap();
        let mut m = Moments::new(2);
        for (r, &w) in draws.outer_iter().zip(&weights) {
            m.push(r.as_slice().unwrap(), w).unwrap();
        }
        let e2 = Estimate::from_moments(m);
        let (m1, m2) = (e1.mean().unwrap(), e2.mean().unwrap());
        let (c1, c2) = (e1.covariance().unwrap(), e2.covariance().unwrap());
        for i in 0..2 {
            assert!((m1[i] - m2[i]).abs() < 1e-12);
            for j in 0..2 {
                assert!((c1[[i, j]] - c2[[i, j]]).abs() < 1e-12);
            }
        }
        // Direct formula.
        let w: f64 = weights.sum();
        let mean0 = (0..4).map(|k| weights[k] * draws[[k, 0]]).sum::<f64>() / w;
        assert!((m1[0] - mean0).abs() < 1e-12);
        let var0 = (0..4).map(|k| weights[k] * (draws[[k, 0]] - mean0).powi(2)).sum::<f64>() / w;
        assert!((c1[[0, 0]] - var0).abs() < 1e-12);
        assert!((e1.expectation(|t| t[0]).unwrap() - mean0).abs() < 1e-12);
        // Pooling two halves gives the whole.
        let a = Estimate::from_weighted(array![[1.0, 2.0], [3.0, -1.0]], array![1.0, -0.5]).unwrap();
        let b = Estimate::from_moments({
            let mut m = Moments::new(2);
            m.push(&[0.5, 0.5], 2.0).unwrap();
            m.push(&[2.0, 2.0], 0.75).unwrap();
            m
        });
        let ab = Estimate::combine([a, b]).unwrap();
        let cab = ab.covariance().unwrap();
        for i in 0..2 {
            for j in 0..2 {
                assert!((cab[[i, j]] - c1[[i, j]]).abs() < 1e-12);
            }
        }
        assert!(matches!(ab.expectation(|t| t[0]), Err(Error::NotStored { .. })));
    }

    #[test]
    fn errors() {
        let e = Estimate::from_weighted(array![[1.0], [2.0]], array![1.0, -1.0]).unwrap();
        assert_eq!(e.mean(), Err(Error::ZeroTotalWeight));
        let empty = Estimate::from_moments(Moments::new(3));
        assert!(matches!(empty.mean(), Err(Error::NoSamples { .. })));
        assert!(matches!(
            Samples::new(Array2::zeros((3, 2)), Array1::zeros(2), None),
            Err(Error::DimensionMismatch { .. })
        ));
        assert!(matches!(
            Estimate::from_weighted(array![[1.0]], array![f64::NAN]),
            Err(Error::InvalidParameter { name: "weights", .. })
        ));
    }
}
