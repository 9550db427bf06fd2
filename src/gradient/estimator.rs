//! The [`GradientEstimator`] and [`SubsampledEstimator`] traits and the two basic estimators: the exact gradient ([`FullGradient`]) and the plain minibatch ([`Minibatch`], drawing a [`Subsample`]).

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::gradient::auto;
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::uniform_below;
use rand::Rng;

/// An estimator of the gradient of the potential, `∇U(θ)`.
///
/// The estimate is split into drawing randomness ([`resample`](Self::resample)) and evaluating
/// on that draw ([`eval`](Self::eval)), so that a sampler can evaluate one minibatch at two points
/// (HAMCMC needs this). [`estimate`](Self::estimate) does both.
///
#[doc = include_str!("../../docs/guide/estimators.md")]
pub trait GradientEstimator: Clone + Send + Sync + 'static {
    /// Binds the estimator to `model`: validates its settings against the model (batch size
    /// against N, dimensions) and allocates its buffers. Called by a sampler's `init`; calling it
    /// again re-binds (and keeps the cost counter).
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()>;

    /// Draws fresh randomness (a new minibatch). No-op for deterministic estimators.
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R);

    /// Writes the estimate at `theta` on the current draw into `out` (overwriting it).
    /// Allocates nothing.
    ///
    /// Errors: only those of the model's fallible gradient path
    /// ([`Error::ModelFailure`](crate::Error::ModelFailure)); built-in estimators check nothing
    /// else here (the sampler checks finiteness).
    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()>;

    /// [`resample`](Self::resample) then [`eval`](Self::eval).
    #[inline]
    fn estimate<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        theta: &[f64],
        rng: &mut R,
        out: &mut [f64],
    ) -> Result<()> {
        self.resample(rng);
        self.eval(model, theta, out)
    }

    /// Whether two [`estimate`](Self::estimate)s at one θ are independent draws of one law,
    /// whatever came before (minibatch-type estimators: [`Minibatch`], [`ControlVariate`](crate::ControlVariate),
    /// [`Taylor`](crate::Taylor)); what measuring the noise's covariance by repeated estimates
    /// needs ([`GradientNoise::estimate`](crate::GradientNoise::estimate)). Default `false`
    /// (variance-reduced estimators keep state; an unknown estimator is not assumed to qualify).
    fn independent_draws(&self) -> bool {
        false
    }

    /// The same estimator (same centre, same formula) on minibatches of `batch_size` drawn with
    /// replacement, and the factor `f` by which this estimator's noise covariance is the resized
    /// one's (for minibatch-type estimators exactly `b/n` with replacement and
    /// `(b/n)(N − n)/(N − 1)` without: the noise is a scaled sum of independent draws), on a data
    /// set of `n_data` items. It lets [`GradientNoise::estimate`](crate::GradientNoise::estimate)
    /// measure the noise on small minibatches at a fraction of the cost. `None` (the default)
    /// when the estimator has no such minibatch or `batch_size` is not below its own.
    fn resized(&self, batch_size: usize, n_data: usize) -> Option<(Self, f64)> {
        let _ = (batch_size, n_data);
        None
    }

    /// Datum-gradient evaluations made by this estimator's estimates so far (one-off setup
    /// excluded: see [`setup_cost`](Self::setup_cost)).
    fn n_datum_gradients(&self) -> u64;

    /// The work of this estimator's estimates so far (setup excluded). Default: its
    /// [`n_datum_gradients`](Self::n_datum_gradients) and nothing else; estimators that also
    /// evaluate Hessian-vector products (the Taylor estimator) count those too.
    fn cost(&self) -> Cost {
        Cost::gradients(self.n_datum_gradients())
    }

    /// The one-off cost of building the estimator (e.g. a control variate's optimisation and
    /// full-gradient pass), shared by all its clones; the [`Runner`](crate::run::runner::Runner) adds it to a run's
    /// cost once. Default: nothing.
    fn setup_cost(&self) -> Cost {
        Cost::default()
    }

    /// Whether the estimate is exact (no randomness), as for [`FullGradient`].
    fn is_exact(&self) -> bool {
        false
    }

    /// The point a control-variate-type estimator is centred at, if any (chains and the
    /// tuner's mode search may start there). Default `None`.
    fn centre(&self) -> Option<&[f64]> {
        None
    }

    /// Whether the estimator is still to be chosen by the tuner ([`Auto`](crate::Auto) before
    /// [`tune`](crate::tune::tune)). Default `false`.
    fn is_unchosen(&self) -> bool {
        false
    }

    /// This estimator as the tuner's `choice`, where it is one that the tuner chooses
    /// ([`Auto`](crate::Auto)); `None` (the default) otherwise.
    fn with_choice(&self, choice: auto::Chosen) -> Option<Self> {
        let _ = choice;
        None
    }
}

/// The exact gradient `∇U(θ) = ∇U₀(θ) + Σᵢ₌₁ᴺ ∇Uᵢ(θ)`; costs N datum gradients per call.
///
/// Serialised (in checkpoints) as N, d and its counter: the index list `0..N` is rebuilt.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(from = "FullGradientState", into = "FullGradientState")]
pub struct FullGradient {
    all: Vec<usize>,
    scratch: Vec<f64>,
    count: u64,
}

/// The serialised form of [`FullGradient`].
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct FullGradientState {
    n_data: usize,
    dim: usize,
    count: u64,
}

impl From<FullGradient> for FullGradientState {
    fn from(f: FullGradient) -> Self {
        FullGradientState { n_data: f.all.len(), dim: f.scratch.len(), count: f.count }
    }
}

impl From<FullGradientState> for FullGradient {
    fn from(s: FullGradientState) -> Self {
        FullGradient { all: (0..s.n_data).collect(), scratch: vec![0.0; s.dim], count: s.count }
    }
}

impl FullGradient {
    /// A full-gradient estimator (bound to a model by the sampler's `init`).
    pub fn new() -> Self {
        Self::default()
    }
}

impl GradientEstimator for FullGradient {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        check_shape(model)?;
        let n = model.n_data();
        if self.all.len() != n {
            self.all = crate::error::all_indices(n)?;
        }
        self.scratch.resize(model.dim(), 0.0);
        Ok(())
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, _rng: &mut R) {}

    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        model.grad_data_sum(theta, &self.all, out)?;
        model.grad_prior(theta, &mut self.scratch)?;
        for (o, s) in out.iter_mut().zip(&self.scratch) {
            *o += s;
        }
        self.count += self.all.len() as u64;
        Ok(())
    }

    fn n_datum_gradients(&self) -> u64 {
        self.count
    }

    /// Fresh minibatch (or none) per estimate: independent draws.
    fn independent_draws(&self) -> bool {
        true
    }

    fn is_exact(&self) -> bool {
        true
    }
}

/// How a [`Subsample`] draws its minibatches.
///
/// Serialised (in checkpoints) as the `bool` it replaces was for the first two (`false` without
/// replacement, `true` with), so checkpoints written before it existed read unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Batches {
    /// n indices drawn independently of each other and of earlier minibatches (duplicates
    /// possible). Each minibatch is an independent draw of one law.
    #[default]
    WithReplacement,
    /// n distinct indices, a uniformly random n-subset, drawn afresh for each minibatch
    /// (independently of earlier ones).
    WithoutReplacement,
    /// Epoch-wise random reshuffling: each epoch a fresh uniformly random permutation of `0..N`,
    /// whose consecutive blocks of n are the epoch's ⌊N/n⌋ minibatches; the last `N mod n`
    /// indices of each permutation are not used in that epoch (each minibatch is, on its own,
    /// a uniformly random n-subset, so the estimate stays unbiased). Successive minibatches
    /// of an epoch are disjoint: their noises are dependent and sum to (nearly) zero over an
    /// epoch, which is what makes the scheme's bias smaller (Shaw & Whalley 2025). Not
    /// [`independent_draws`](GradientEstimator::independent_draws).
    Reshuffled {
        /// The position in the current permutation of the next minibatch's first index.
        next: usize,
    },
}

impl Batches {
    /// Epoch-wise random reshuffling, at the start of a fresh epoch.
    pub const RESHUFFLED: Batches = Batches::Reshuffled { next: usize::MAX };
}

/// Draws minibatch index sets from `0..N` without allocating: with replacement, without
/// replacement, or by epoch-wise random reshuffling ([`Batches`]).
///
/// The building block of every subsampling estimator ([`Minibatch`], and the control-variate
/// and Taylor estimators).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Subsample {
    batch_size: usize,
    /// Serialised where a `replacement: bool` was (see [`Batches`]).
    #[serde(with = "batches_as_bool")]
    policy: Batches,
    n_data: usize,
    idx: Vec<usize>,
    /// A permutation of `0..N`, kept between draws (without replacement and reshuffled only).
    perm: Vec<usize>,
}

/// The wire form of [`Batches`] in a [`Subsample`]: the two independent policies as the `bool`
/// they were stored as before (`true` = with replacement), reshuffling as a third value
/// followed by its position. postcard writes a `bool` as the byte 0 or 1 and an enum's variant
/// as a varint, so `WithoutReplacement` = variant 0 and `WithReplacement` = variant 1 are those
/// bytes exactly.
mod batches_as_bool {
    use super::Batches;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    enum Wire {
        WithoutReplacement,
        WithReplacement,
        Reshuffled { next: usize },
    }

    pub(super) fn serialize<S: Serializer>(b: &Batches, s: S) -> Result<S::Ok, S::Error> {
        match *b {
            Batches::WithReplacement => Wire::WithReplacement,
            Batches::WithoutReplacement => Wire::WithoutReplacement,
            Batches::Reshuffled { next } => Wire::Reshuffled { next },
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Batches, D::Error> {
        Ok(match Wire::deserialize(d)? {
            Wire::WithReplacement => Batches::WithReplacement,
            Wire::WithoutReplacement => Batches::WithoutReplacement,
            Wire::Reshuffled { next } => Batches::Reshuffled { next },
        })
    }
}

impl Subsample {
    /// Minibatches of `batch_size` indices, with or without replacement.
    pub fn new(batch_size: usize, replacement: bool) -> Self {
        let policy = if replacement { Batches::WithReplacement } else { Batches::WithoutReplacement };
        Self::with_policy(batch_size, policy)
    }

    /// Minibatches of `batch_size` indices drawn by `policy`.
    pub fn with_policy(batch_size: usize, policy: Batches) -> Self {
        let policy = if let Batches::Reshuffled { .. } = policy { Batches::RESHUFFLED } else { policy };
        Subsample { batch_size, policy, n_data: 0, idx: Vec::new(), perm: Vec::new() }
    }

    /// Minibatches of `batch_size` indices by epoch-wise random reshuffling
    /// ([`Batches::Reshuffled`]).
    pub fn reshuffled(batch_size: usize) -> Self {
        Self::with_policy(batch_size, Batches::RESHUFFLED)
    }

    /// Validates against a data set of `n_data` items and allocates. A reshuffling subsample
    /// starts a fresh epoch.
    ///
    /// Errors: [`Error::EmptyData`] if N = 0, [`Error::InvalidBatchSize`] if the batch size is 0
    /// or above N.
    pub fn prepare(&mut self, n_data: usize) -> Result<()> {
        if n_data == 0 {
            return Err(Error::EmptyData { what: "model has no data (N = 0)" });
        }
        if self.batch_size == 0 || self.batch_size > n_data {
            return Err(Error::InvalidBatchSize { batch_size: self.batch_size, n_data });
        }
        self.n_data = n_data;
        self.idx.resize(self.batch_size, 0);
        if self.policy != Batches::WithReplacement && self.perm.len() != n_data {
            self.perm = crate::error::all_indices(n_data)?;
        }
        if let Batches::Reshuffled { next } = &mut self.policy {
            *next = usize::MAX;
        }
        Ok(())
    }

    /// Draws a new index set.
    ///
    /// With replacement: n independent uniform indices. Without: a partial Fisher–Yates shuffle
    /// of the kept permutation, which gives a uniformly random n-subset whatever the
    /// permutation's current order. Reshuffled: the next block of n of the epoch's permutation,
    /// after a full Fisher–Yates shuffle of it when fewer than n indices are left.
    ///
    /// Uniform integers come from Lemire's method (`uniform_below`, `uniform_below_u32`),
    /// defined here rather than taken from `rand` so that the index sets of a seed do not change
    /// with the version of `rand`. With replacement and N < 2³², each 64-bit draw gives two
    /// indices, one from each half (almost always: a half is redrawn with probability N/2³²).
    #[inline]
    pub fn draw<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        let n_data = self.n_data as u64;
        match &mut self.policy {
            Batches::WithReplacement => {
                if let Ok(range) = u32::try_from(n_data) {
                    let mut pairs = self.idx.chunks_exact_mut(2);
                    for pair in &mut pairs {
                        let u = rng.next_u64();
                        pair[0] = uniform_below_u32(rng, u as u32, range) as usize;
                        pair[1] = uniform_below_u32(rng, (u >> 32) as u32, range) as usize;
                    }
                    for i in pairs.into_remainder() {
                        let first = rng.next_u64() as u32;
                        *i = uniform_below_u32(rng, first, range) as usize;
                    }
                } else {
                    for i in self.idx.iter_mut() {
                        *i = uniform_below(rng, n_data) as usize;
                    }
                }
            }
            Batches::WithoutReplacement => {
                for j in 0..self.batch_size {
                    let k = j + uniform_below(rng, n_data - j as u64) as usize;
                    self.perm.swap(j, k);
                    self.idx[j] = self.perm[j];
                }
            }
            Batches::Reshuffled { next } => {
                let n = self.batch_size;
                if *next > self.n_data || self.n_data - *next < n {
                    // A new epoch: a full Fisher–Yates shuffle.
                    for j in 0..self.n_data.saturating_sub(1) {
                        let k = j + uniform_below(rng, n_data - j as u64) as usize;
                        self.perm.swap(j, k);
                    }
                    *next = 0;
                }
                self.idx.copy_from_slice(&self.perm[*next..*next + n]);
                *next += n;
            }
        }
    }

    /// Draws a new index set and copies it into `out` (length n).
    #[inline]
    pub fn draw_into<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.draw(rng);
        out.copy_from_slice(&self.idx);
    }

    /// The current index set.
    #[inline]
    pub fn indices(&self) -> &[usize] {
        &self.idx
    }

    /// The minibatch size n.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Whether indices are drawn with replacement.
    pub fn with_replacement(&self) -> bool {
        self.policy == Batches::WithReplacement
    }

    /// How minibatches are drawn (for reshuffling, with the position in the current epoch).
    pub fn policy(&self) -> Batches {
        self.policy
    }

    /// Whether successive minibatches are independent draws of one law (not so when
    /// reshuffling, where an epoch's minibatches are disjoint).
    pub fn independent_draws(&self) -> bool {
        !matches!(self.policy, Batches::Reshuffled { .. })
    }

    /// Minibatches of `batch_size` drawn with replacement in place of these, and the factor by
    /// which these minibatches' scaled-sum variance is theirs (see
    /// [`GradientEstimator::resized`]); `None` unless `batch_size` is below this batch size.
    pub(crate) fn resized(&self, batch_size: usize, n_data: usize) -> Option<(Subsample, f64)> {
        let n = self.batch_size;
        if batch_size == 0 || batch_size >= n || n_data < 2 {
            return None;
        }
        // Reshuffled minibatches are, one at a time, uniformly random n-subsets.
        let finite = if self.with_replacement() { 1.0 } else { (n_data - n) as f64 / (n_data - 1) as f64 };
        Some((Subsample::new(batch_size, true), batch_size as f64 / n as f64 * finite))
    }

    /// The scale `N / n` that makes a minibatch sum unbiased for the full sum.
    #[inline]
    pub fn scale(&self) -> f64 {
        self.n_data as f64 / self.batch_size as f64
    }
}

/// [`uniform_below`] for a 32-bit range, starting from the 32 random bits `first` (so that a
/// caller can split one 64-bit draw in two); redraws, when needed, take 32 bits from `rng`.
#[inline(always)]
fn uniform_below_u32<R: Rng + ?Sized>(rng: &mut R, first: u32, range: u32) -> u32 {
    debug_assert!(range > 0, "empty range");
    let mut m = u64::from(first) * u64::from(range);
    if (m as u32) < range {
        let threshold = range.wrapping_neg() % range;
        while (m as u32) < threshold {
            m = u64::from(rng.next_u32()) * u64::from(range);
        }
    }
    (m >> 32) as u32
}

/// The minibatch estimator `∇Ũ(θ) = ∇U₀(θ) + (N/n) Σ_{i∈S} ∇Uᵢ(θ)`, unbiased for `∇U(θ)`;
/// costs n datum gradients per call.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Minibatch {
    sub: Subsample,
    scratch: Vec<f64>,
    count: u64,
}

impl Minibatch {
    /// Minibatches of size `batch_size` drawn **with** replacement (the default of the crate).
    pub fn new(batch_size: usize) -> Self {
        Self::with_replacement(batch_size)
    }

    /// Minibatches of size `batch_size` drawn with replacement.
    pub fn with_replacement(batch_size: usize) -> Self {
        Minibatch { sub: Subsample::new(batch_size, true), scratch: Vec::new(), count: 0 }
    }

    /// Minibatches of size `batch_size` drawn without replacement (keeps a permutation of
    /// `0..N`, i.e. N machine words of memory).
    pub fn without_replacement(batch_size: usize) -> Self {
        Minibatch { sub: Subsample::new(batch_size, false), scratch: Vec::new(), count: 0 }
    }

    /// Minibatches of size `batch_size` by epoch-wise random reshuffling
    /// ([`Batches::Reshuffled`]: each epoch's ⌊N/n⌋ minibatches are consecutive blocks of a fresh
    /// permutation; keeps it, N machine words of memory).
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::reshuffled(100))?;
    /// let out = Runner::new(&model, &sgld).start(&[0.0; 2]).settings(RunSettings { n_iter: 2_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn reshuffled(batch_size: usize) -> Self {
        Minibatch { sub: Subsample::reshuffled(batch_size), scratch: Vec::new(), count: 0 }
    }

    /// The index sampler.
    pub fn subsample(&self) -> &Subsample {
        &self.sub
    }
}

impl GradientEstimator for Minibatch {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        check_shape(model)?;
        self.sub.prepare(model.n_data())?;
        self.scratch.resize(model.dim(), 0.0);
        Ok(())
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.sub.draw(rng);
    }

    #[inline]
    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        model.grad_data_sum(theta, self.sub.indices(), out)?;
        model.grad_prior(theta, &mut self.scratch)?;
        let scale = self.sub.scale();
        for (o, s) in out.iter_mut().zip(&self.scratch) {
            *o = scale * *o + s;
        }
        self.count += self.sub.batch_size() as u64;
        Ok(())
    }

    fn n_datum_gradients(&self) -> u64 {
        self.count
    }

    /// Fresh minibatch per estimate: independent draws, unless reshuffling.
    fn independent_draws(&self) -> bool {
        self.sub.independent_draws()
    }

    fn resized(&self, batch_size: usize, n_data: usize) -> Option<(Self, f64)> {
        let (sub, f) = self.sub.resized(batch_size, n_data)?;
        Some((Minibatch { sub, scratch: Vec::new(), count: 0 }, f))
    }
}

/// A subsampling estimator that can evaluate on an index set chosen by the caller, for methods
/// that couple the minibatches of several paths (multilevel SGLD draws the coarse path's indices
/// from the fine path's). `eval_on(θ, S)` is the estimator's formula on the multiset S of
/// indices, with the scale `N/|S|`.
pub trait SubsampledEstimator: GradientEstimator {
    /// The minibatch size n the estimator was built with.
    fn batch_size(&self) -> usize;

    /// Draws one index set by the estimator's own law (with or without replacement, as built)
    /// and copies it into `out` (length n). Allocates nothing.
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]);

    /// Writes the estimate at `theta` on the index multiset `idx` (each `< N`, non-empty) into
    /// `out`. Counts its cost like [`eval`](GradientEstimator::eval). Allocates nothing.
    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()>;
}

impl SubsampledEstimator for Minibatch {
    fn batch_size(&self) -> usize {
        self.sub.batch_size()
    }

    #[inline]
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.sub.draw_into(rng, out);
    }

    #[inline]
    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        model.grad_data_sum(theta, idx, out)?;
        model.grad_prior(theta, &mut self.scratch)?;
        let scale = model.n_data() as f64 / idx.len() as f64;
        for (o, s) in out.iter_mut().zip(&self.scratch) {
            *o = scale * *o + s;
        }
        self.count += idx.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeric::rng::stream;

    /// In range, uniform (chi-square on a small range), and correct on a range where about half
    /// of the draws are rejected.
    #[test]
    fn uniform_below_is_uniform() {
        let mut rng = stream(11, &[0]);
        let mut counts = [0u32; 7];
        let n = 70_000;
        for _ in 0..n {
            counts[uniform_below(&mut rng, 7) as usize] += 1;
        }
        let expected = f64::from(n) / 7.0;
        let chi2: f64 = counts.iter().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        assert!(chi2 < 22.5, "chi-square {chi2} with 6 degrees of freedom"); // p ≈ 0.001
        assert_eq!(uniform_below(&mut rng, 1), 0);
        let big = (1u64 << 63) + 1;
        let mut upper = 0;
        for _ in 0..2_000 {
            let x = uniform_below(&mut rng, big);
            assert!(x < big);
            upper += u32::from(x >= big / 2);
        }
        assert!((900..1_100).contains(&upper), "{upper} of 2000 in the upper half");
        // The 32-bit version, on a range where about half of the first draws are rejected.
        let big32 = (1u32 << 31) + 1;
        let mut upper = 0;
        for _ in 0..2_000 {
            let first = rng.next_u32();
            let x = uniform_below_u32(&mut rng, first, big32);
            assert!(x < big32);
            upper += u32::from(x >= big32 / 2);
        }
        assert!((900..1_100).contains(&upper), "{upper} of 2000 in the upper half");
        let mut counts = [0u32; 7];
        for _ in 0..n {
            let first = rng.next_u32();
            counts[uniform_below_u32(&mut rng, first, 7) as usize] += 1;
        }
        let chi2: f64 = counts.iter().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        assert!(chi2 < 22.5, "chi-square {chi2} with 6 degrees of freedom");
    }

    /// Without replacement, every index set has distinct members; with replacement, all are in
    /// range.
    #[test]
    fn subsample_draws() {
        let mut rng = stream(12, &[0]);
        let mut s = Subsample::new(10, false);
        s.prepare(12).unwrap();
        for _ in 0..100 {
            s.draw(&mut rng);
            let mut v = s.indices().to_vec();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), 10);
            assert!(v.iter().all(|&i| i < 12));
        }
        let mut s = Subsample::new(50, true);
        s.prepare(3).unwrap_err();
        s.prepare(60).unwrap();
        s.draw(&mut rng);
        assert!(s.indices().iter().all(|&i| i < 60));
    }

    /// Reshuffling: each epoch's ⌊N/n⌋ minibatches are disjoint blocks of one permutation (the
    /// `N mod n` left over unused), epochs are fresh permutations, and every index is used
    /// equally often over many epochs (chi-square); a re-prepare starts a fresh epoch.
    #[test]
    fn reshuffled_batches_are_the_blocks_of_a_fresh_permutation_per_epoch() {
        let mut rng = stream(13, &[0]);
        let (n_data, n) = (23, 5);
        let mut s = Subsample::reshuffled(n);
        assert!(!s.independent_draws() && !s.with_replacement());
        s.prepare(n_data).unwrap();
        let mut counts = vec![0u32; n_data];
        let mut first_blocks = Vec::new();
        let epochs = 4_000;
        for _ in 0..epochs {
            let mut seen = vec![false; n_data];
            for b in 0..n_data / n {
                s.draw(&mut rng);
                if b == 0 {
                    first_blocks.push(s.indices().to_vec());
                }
                for &i in s.indices() {
                    assert!(!seen[i], "index {i} twice in one epoch");
                    seen[i] = true;
                    counts[i] += 1;
                }
            }
            assert_eq!(seen.iter().filter(|&&x| x).count(), n * (n_data / n));
        }
        first_blocks.dedup();
        assert!(first_blocks.len() > epochs - 5, "epochs repeat their order");
        let expected = f64::from(epochs as u32 * (n_data / n * n) as u32) / n_data as f64;
        let chi2: f64 = counts.iter().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        // 22 degrees of freedom: P(chi2 > 48.3) = 0.001.
        assert!(chi2 < 48.3, "chi-square {chi2}");
        // A re-prepare in mid-epoch starts a fresh one.
        s.draw(&mut rng);
        s.prepare(n_data).unwrap();
        assert_eq!(s.policy(), Batches::RESHUFFLED);
        let mut t = Subsample::with_policy(n, Batches::Reshuffled { next: 3 });
        assert_eq!(t.policy(), Batches::RESHUFFLED, "a policy given with a position starts an epoch");
        t.prepare(n).unwrap();
        t.draw(&mut rng);
        let mut v = t.indices().to_vec();
        v.sort_unstable();
        assert_eq!(v, (0..n).collect::<Vec<_>>(), "n = N: every minibatch is all the data");
    }

    /// A subsample stored before [`Batches`] existed (its policy a `bool`) reads back as the
    /// same policy, and every policy round-trips.
    #[test]
    fn the_policy_is_stored_as_the_bool_it_replaced() {
        #[derive(serde::Serialize)]
        struct Before {
            batch_size: usize,
            replacement: bool,
            n_data: usize,
            idx: Vec<usize>,
            perm: Vec<usize>,
        }
        for replacement in [true, false] {
            let old = Before { batch_size: 2, replacement, n_data: 3, idx: vec![0, 2], perm: vec![2, 0, 1] };
            let bytes = postcard::to_stdvec(&old).unwrap();
            let s: Subsample = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(s.with_replacement(), replacement);
            assert_eq!((s.indices(), &s.perm[..], s.n_data), (&[0, 2][..], &[2, 0, 1][..], 3));
            assert_eq!(postcard::to_stdvec(&s).unwrap(), bytes, "the same bytes written back");
        }
        let mut rng = stream(14, &[0]);
        let mut s = Subsample::reshuffled(2);
        s.prepare(7).unwrap();
        s.draw(&mut rng);
        let back: Subsample = postcard::from_bytes(&postcard::to_stdvec(&s).unwrap()).unwrap();
        assert_eq!(back.policy(), Batches::Reshuffled { next: 2 });
        assert_eq!(back.perm, s.perm);
    }
}
