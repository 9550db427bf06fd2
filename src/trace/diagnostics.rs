//! Convergence diagnostics: rank-normalised split-R̂, bulk and tail effective sample sizes, Monte
//! Carlo standard errors (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, as implemented in
//! ArviZ), and the kernel Stein discrepancy with the IMQ kernel (Gorham & Mackey 2017).
//!
//! Functions on one scalar quantity take its draws as a (chains × draws) array.
//!
//! - **ESS** (`_ess` in ArviZ): with `n` draws per chain and m chains, autocovariances `γ̂_t` per
//!   chain (all lags at once by FFT, O(n log n) per chain, as ArviZ; equal to the direct sums to
//!   ~1e-14 relative), `W = mean_c γ̂_0 · n/(n−1)`, `var⁺ = W (n−1)/n + Var_c(chain means)`, autocorrelations
//!   `ρ̂_t = 1 − (W − mean_c γ̂_t)/var⁺`, summed with Geyer's initial positive and initial monotone
//!   sequences into `τ̂ = −1 + 2 Σ ρ̂_t`, `τ̂ ≥ 1/log₁₀(mn)`; `ESS = mn/τ̂`.
//! - **split chains**: each chain's first and last ⌊n/2⌋ draws become two chains.
//! - **rank normalisation**: `z = Φ⁻¹((r − 3/8)/(S + 1/4))`, r the average rank among all S draws.
//! - **bulk ESS** = ESS of the rank-normalised split chains; **tail ESS** = the smaller ESS of the
//!   indicators `θ ≤ q₀.₀₅` and `θ ≤ q₀.₉₅` (split; quantiles of type 7).
//! - **R̂** (rank-normalised split): `max(R̂(z(split)), R̂(z(|split − median|)))` with the classic
//!   `R̂ = √((B/W + n − 1)/n)`, `B = n Var(chain means)`, `W = mean chain variance`.
//! - **MCSE of the mean**: `sd / √ESS_mean`, `ESS_mean` the ESS of the split chains; **of the
//!   sd** ([`mcse_sd`]): as ArviZ 0.23 and the R package posterior.
//! - **Summary table** ([`summary_table`], [`SummaryTable`]): ArviZ's `az.summary` columns (mean,
//!   sd, 94 % HDI, MCSE of mean and sd, ESS bulk and tail, R̂) plus the 5/50/95 % quantiles,
//!   equal to ArviZ 0.23.4 to ~1e-15 on the test fixture, printed like it.
//! - **Weighted draws** (decreasing step schedules, signed estimators): the functions on arrays
//!   take unweighted draws; [`summary`] of an [`Estimate`] and [`summary_of_weighted_draws`] use the
//!   weights (weighted mean and sd, delta-method ESS/MCSE, weighted R̂), so the summary's mean is
//!   [`Estimate::mean`]'s.
//!
#![doc = include_str!("../../docs/guide/diagnostics.md")]

use crate::error::{Error, Result, check_len};
use crate::trace::estimate::Estimate;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

fn check_draws(x: &ArrayView2<'_, f64>) -> Result<()> {
    let (m, n) = x.dim();
    if m == 0 {
        return Err(Error::EmptyData { what: "no chains" });
    }
    if n < 4 {
        return Err(Error::TooFewSamples { needed: 4, got: n });
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::invalid("draws", "non-finite entry", "draws must be finite"));
    }
    Ok(())
}

/// Each chain's first and last ⌊n/2⌋ draws as separate chains (2m × ⌊n/2⌋).
fn split(x: &ArrayView2<'_, f64>) -> Array2<f64> {
    let (m, n) = x.dim();
    let half = n / 2;
    Array2::from_shape_fn((2 * m, half), |(c, t)| if c < m { x[[c, t]] } else { x[[c - m, n - half + t]] })
}

/// Average ranks (1-based, ties averaged) of all entries, in the array's order. Sorts
/// (value, position) pairs in place (contiguous, unstable: ties are averaged anyway).
fn ranks(x: &Array2<f64>) -> Array2<f64> {
    let mut pairs: Vec<(f64, usize)> = x.iter().copied().zip(0..).collect();
    pairs.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut r = vec![0.0; pairs.len()];
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i;
        while j + 1 < pairs.len() && pairs[j + 1].0 == pairs[i].0 {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for p in &pairs[i..=j] {
            r[p.1] = avg;
        }
        i = j + 1;
    }
    Array2::from_shape_vec(x.dim(), r).expect("same shape")
}

/// Rank-normalised values (element-wise, in parallel: the result does not depend on threads).
fn z_scale(x: &Array2<f64>) -> Array2<f64> {
    let s = x.len() as f64;
    let mut r = ranks(x);
    r.as_slice_mut()
        .expect("standard layout")
        .par_iter_mut()
        .for_each(|v| *v = normal_quantile((*v - 0.375) / (s + 0.25)));
    r
}

fn median(x: &Array2<f64>) -> f64 {
    let mut v: Vec<f64> = x.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// Quantile of type 7 (linear interpolation, numpy's default) of all entries.
fn quantile7(x: &ArrayView2<'_, f64>, p: f64) -> f64 {
    let mut v: Vec<f64> = x.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, p)
}

/// Type-7 quantile of sorted values.
fn quantile_sorted(v: &[f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

fn sample_var(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = v.clone().count() as f64;
    let m = v.clone().sum::<f64>() / n;
    v.map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
}

/// Autocovariance at lag t of one chain (divided by n), by the direct sum: O(n) per lag. Kept to
/// check the FFT version.
fn autocov(c: &[f64], mean: f64, t: usize) -> f64 {
    let n = c.len();
    c[..n - t].iter().zip(&c[t..]).map(|(a, b)| (a - mean) * (b - mean)).sum::<f64>() / n as f64
}

/// The mean over chains of the autocovariances `γ̂_t`, t = 0 … n−1 (each divided by n), by FFT:
/// each centred chain is zero-padded to 2n, transformed, multiplied by its conjugate and
/// transformed back (ArviZ's `_autocov`). O(m n log n).
fn mean_autocov_fft(chains: &[Vec<f64>], means: &[f64]) -> Vec<f64> {
    use realfft::RealFftPlanner;
    let n = chains.first().map_or(0, Vec::len);
    let len = 2 * n;
    let mut planner = RealFftPlanner::<f64>::new();
    let forward = planner.plan_fft_forward(len);
    let inverse = planner.plan_fft_inverse(len);
    let mut buf = forward.make_input_vec();
    let mut spec = forward.make_output_vec();
    let mut scratch = forward.make_scratch_vec();
    let mut scratch_inv = inverse.make_scratch_vec();
    let mut acc = vec![0.0; n];
    for (c, &mu) in chains.iter().zip(means) {
        buf.fill(0.0);
        for (b, x) in buf.iter_mut().zip(c) {
            *b = x - mu;
        }
        // The lengths come from the planner's own buffers: the transforms cannot fail.
        let _ = forward.process_with_scratch(&mut buf, &mut spec, &mut scratch);
        for z in spec.iter_mut() {
            *z = realfft::num_complex::Complex::new(z.norm_sqr(), 0.0);
        }
        let _ = inverse.process_with_scratch(&mut spec, &mut buf, &mut scratch_inv);
        for (a, b) in acc.iter_mut().zip(&buf[..n]) {
            *a += b;
        }
    }
    // realfft's inverse is unnormalised (a factor len); then divide by n and average over chains.
    let scale = 1.0 / (len as f64 * n as f64 * chains.len() as f64);
    acc.iter_mut().for_each(|a| *a *= scale);
    acc
}

/// ESS of a (chains × draws) array, ArviZ's `_ess` (no splitting, no normalisation).
fn ess_raw(x: &Array2<f64>) -> f64 {
    let (m, n) = x.dim();
    let (lo, hi) = x.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    if hi - lo < 1e-15 {
        return x.len() as f64;
    }
    let chains: Vec<Vec<f64>> = x.outer_iter().map(|r| r.to_vec()).collect();
    let means: Vec<f64> = chains.iter().map(|c| c.iter().sum::<f64>() / n as f64).collect();
    let acov = mean_autocov_fft(&chains, &means);
    ess_from_autocov(m, n, &means, |t| acov[t]).0
}

/// Geyer's initial positive and monotone sequence estimator from the mean autocovariance
/// `mean_acov(t)` of m chains of n draws with the given means: (ESS, `var⁺`).
fn ess_from_autocov(m: usize, n: usize, means: &[f64], mean_acov: impl Fn(usize) -> f64) -> (f64, f64) {
    let nf = n as f64;
    let mean_var = mean_acov(0) * nf / (nf - 1.0);
    let mut var_plus = mean_var * (nf - 1.0) / nf;
    if m > 1 {
        var_plus += sample_var(means.iter().copied());
    }
    let mut rho = vec![0.0; n];
    let mut rho_even = 1.0;
    rho[0] = rho_even;
    let mut rho_odd = 1.0 - (mean_var - mean_acov(1)) / var_plus;
    rho[1] = rho_odd;
    let mut t = 1;
    while t < n.saturating_sub(3) && rho_even + rho_odd > 0.0 {
        rho_even = 1.0 - (mean_var - mean_acov(t + 1)) / var_plus;
        rho_odd = 1.0 - (mean_var - mean_acov(t + 2)) / var_plus;
        if rho_even + rho_odd >= 0.0 {
            rho[t + 1] = rho_even;
            rho[t + 2] = rho_odd;
        }
        t += 2;
    }
    let max_t = t as isize - 2;
    if rho_even > 0.0 && max_t + 1 >= 0 {
        rho[(max_t + 1) as usize] = rho_even;
    }
    let mut t = 1isize;
    while t <= max_t - 2 {
        let (tu, a, b) = (t as usize, (t + 1) as usize, (t + 2) as usize);
        if rho[a] + rho[b] > rho[tu - 1] + rho[tu] {
            rho[a] = (rho[tu - 1] + rho[tu]) / 2.0;
            rho[b] = rho[a];
        }
        t += 2;
    }
    let total = (m * n) as f64;
    let upto = (max_t + 1).max(0) as usize;
    let mut tau = -1.0 + 2.0 * rho[..upto.min(n)].iter().sum::<f64>();
    if upto < n {
        tau += rho[upto];
    }
    let tau = tau.max(1.0 / total.log10());
    (total / tau, var_plus)
}

fn rhat_raw(x: &Array2<f64>) -> f64 {
    let n = x.ncols() as f64;
    let means: Vec<f64> = x.outer_iter().map(|r| r.sum() / n).collect();
    let vars: Vec<f64> = x.outer_iter().map(|r| sample_var(r.iter().copied())).collect();
    let b = n * sample_var(means.iter().copied());
    let w = vars.iter().sum::<f64>() / vars.len() as f64;
    ((b / w + n - 1.0) / n).sqrt()
}

/// Bulk effective sample size (rank-normalised split chains).
///
/// Errors: [`Error::TooFewSamples`] for fewer than 4 draws per chain, [`Error::EmptyData`] for no
/// chain, [`Error::InvalidParameter`] for non-finite draws.
pub fn ess_bulk(draws: ArrayView2<'_, f64>) -> Result<f64> {
    check_draws(&draws)?;
    Ok(ess_raw(&z_scale(&split(&draws))))
}

/// Tail effective sample size: the smaller ESS of the indicators of the 5% and 95% quantiles.
/// Errors as [`ess_bulk`].
pub fn ess_tail(draws: ArrayView2<'_, f64>) -> Result<f64> {
    check_draws(&draws)?;
    Ok(ess_tail_at(&draws, Convention::ArviZ023.tail_quantiles()))
}

/// The smaller ESS of the indicators of the two quantiles `p`.
fn ess_tail_at(draws: &ArrayView2<'_, f64>, p: (f64, f64)) -> f64 {
    let e = |p: f64| {
        let q = quantile7(draws, p);
        ess_raw(&split(&draws.mapv(|v| if v <= q { 1.0 } else { 0.0 }).view()))
    };
    e(p.0).min(e(p.1))
}

/// R̂ of the convention: the tail part folded about the median of the unsplit draws (0.23's
/// `az.summary`) or of the split ones ([`rhat`]).
fn rhat_of(draws: &ArrayView2<'_, f64>, convention: Convention) -> f64 {
    let s = split(draws);
    let bulk = rhat_raw(&z_scale(&s));
    let med = match convention {
        Convention::ArviZ023 => median(&draws.to_owned()),
        Convention::ArviZ1 => median(&s),
    };
    let tail = rhat_raw(&z_scale(&s.mapv(|v| (v - med).abs())));
    bulk.max(tail)
}

/// Effective sample size for the mean (split chains, no normalisation). Errors as [`ess_bulk`].
pub fn ess_mean(draws: ArrayView2<'_, f64>) -> Result<f64> {
    check_draws(&draws)?;
    Ok(ess_raw(&split(&draws)))
}

/// Rank-normalised split-R̂ (the maximum of the bulk and folded-tail values). Needs ≥ 2 chains
/// for a meaningful value (one chain is split in two, so it works with one too).
/// Errors as [`ess_bulk`].
pub fn rhat(draws: ArrayView2<'_, f64>) -> Result<f64> {
    check_draws(&draws)?;
    let s = split(&draws);
    let bulk = rhat_raw(&z_scale(&s));
    let med = median(&s);
    let tail = rhat_raw(&z_scale(&s.mapv(|v| (v - med).abs())));
    Ok(bulk.max(tail))
}

/// Monte Carlo standard error of the mean: `sd / √ESS_mean` (sd over all draws, ddof 1).
/// Errors as [`ess_bulk`].
pub fn mcse_mean(draws: ArrayView2<'_, f64>) -> Result<f64> {
    check_draws(&draws)?;
    let sd = sample_var(draws.iter().copied()).sqrt();
    Ok(sd / ess_mean(draws)?.sqrt())
}

/// Whose `summary` the summary functions reproduce, column for column (to 1e-12 on
/// `tests/fixtures`): the conventions differ in the credible interval, the quantiles of the tail
/// ESS and the median R̂'s tail part is folded about.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Convention {
    /// ArviZ 0.23 (`az.summary`): the 94 % HDI, tail ESS at the 5 %/95 % quantiles, R̂ folded
    /// about the median of the unsplit draws. The default.
    #[default]
    ArviZ023,
    /// ArviZ 1.x (`arviz_stats.summary`, checked against 1.3): the 89 % equal-tailed interval,
    /// tail ESS at the 11 %/89 % quantiles, R̂ folded about the median of the split draws.
    ArviZ1,
}

impl Convention {
    /// The quantiles whose indicators give the tail ESS.
    pub fn tail_quantiles(self) -> (f64, f64) {
        match self {
            Convention::ArviZ023 => (0.05, 0.95),
            Convention::ArviZ1 => (0.11, 0.89),
        }
    }

    /// The column names of the credible interval's bounds, as the convention's `summary` prints
    /// them.
    pub fn interval_columns(self) -> (&'static str, &'static str) {
        match self {
            Convention::ArviZ023 => ("hdi_3%", "hdi_97%"),
            Convention::ArviZ1 => ("eti89_lb", "eti89_ub"),
        }
    }
}

/// The 89 % equal-tailed interval's quantiles of [`Convention::ArviZ1`].
const ETI89: (f64, f64) = (0.055, 0.945);

/// Summary of one scalar quantity over several chains: the columns of ArviZ's `az.summary`
/// (mean, sd, 94 % HDI, MCSE of mean and sd, bulk and tail ESS, R̂) plus the 5 %, 50 % and 95 %
/// quantiles. [`SummaryTable`] prints a set of them as a table.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Mean over all draws.
    pub mean: f64,
    /// Standard deviation over all draws (ddof 1).
    pub sd: f64,
    /// The 5 % quantile (type 7, numpy's default).
    pub q05: f64,
    /// The median (50 % quantile, type 7).
    pub median: f64,
    /// The 95 % quantile (type 7).
    pub q95: f64,
    /// The [`HDI_PROB`] (94 %) highest-density interval, as ArviZ's `hdi` (the shortest interval
    /// between two sorted draws that contains ⌊0.94 n⌋ + 1 of them).
    pub hdi: (f64, f64),
    /// Monte Carlo standard error of the mean.
    pub mcse_mean: f64,
    /// Monte Carlo standard error of the sd ([`mcse_sd`]).
    pub mcse_sd: f64,
    /// Bulk ESS.
    pub ess_bulk: f64,
    /// Tail ESS.
    pub ess_tail: f64,
    /// Rank-normalised split-R̂, folded for its tail part about the median of the unsplit draws
    /// ([`Convention::ArviZ023`], as ArviZ 0.23's `az.summary`) or of the split draws
    /// ([`Convention::ArviZ1`], as ArviZ 1.x's `summary` and every version's `rhat`, which
    /// [`rhat`](fn@rhat) computes): they differ in the fourth decimal for an odd number of
    /// draws per chain.
    pub rhat: f64,
    /// The credible interval of the [`convention`](Self::convention): the 94 % HDI
    /// ([`Convention::ArviZ023`], equal to [`hdi`](Self::hdi)) or the 89 % equal-tailed interval
    /// (type-7 quantiles at 5.5 % and 94.5 %, [`Convention::ArviZ1`]).
    pub interval: (f64, f64),
    /// Whose `summary` this row reproduces.
    pub convention: Convention,
    /// Whether the draws carried unequal weights and every field above was computed with them
    /// (see [`summary_of_weighted_draws`]).
    pub weighted: bool,
    /// The estimated bias of the mean at the run's step, where a step-bias check ran
    /// ([`step_bias`](crate::step_bias)); printed as the table's `bias_mean` column.
    pub bias_mean: Option<f64>,
    /// The estimated bias of the sd at the run's step, where a step-bias check ran.
    pub bias_sd: Option<f64>,
}

/// The probability mass of [`Summary::hdi`]: ArviZ's default 0.94.
pub const HDI_PROB: f64 = 0.94;

/// The largest split-R̂ of a converged quantity (Vehtari, Gelman, Simpson, Carpenter & Bürkner,
/// *Rank-normalization, folding, and localization: an improved R̂ for assessing convergence of
/// MCMC*, Bayesian Analysis 2021: "R̂ < 1.01").
pub const RHAT_MAX: f64 = 1.01;

/// The smallest bulk and tail ESS of a converged quantity: 400, the same paper's "ESS > 400"
/// (100 per chain with 4 chains), below which R̂ and the MCSEs themselves are unreliable.
pub const ESS_MIN: f64 = 400.0;

impl Summary {
    /// Whether this quantity passes the convergence thresholds: split-R̂ ≤ [`RHAT_MAX`] and
    /// bulk and tail ESS ≥ [`ESS_MIN`] (a NaN fails).
    pub fn converged(&self) -> bool {
        self.rhat <= RHAT_MAX && self.ess_bulk >= ESS_MIN && self.ess_tail >= ESS_MIN
    }
}

/// Whether a run's chains mixed, by the thresholds [`RHAT_MAX`] and [`ESS_MIN`] on every
/// coordinate: what [`convergence`] returns.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Convergence {
    /// Every coordinate passed.
    pub converged: bool,
    /// The largest split-R̂ over the coordinates.
    pub max_rhat: f64,
    /// The smallest bulk ESS.
    pub min_ess_bulk: f64,
    /// The smallest tail ESS.
    pub min_ess_tail: f64,
    /// The coordinates that failed, in order.
    pub failed: Vec<usize>,
    /// Their names, where the verdict knows them (a [`Sample`](crate::Sample) run, a
    /// constrained model's [`convergence`](crate::Constrained::convergence)); else empty.
    pub failed_names: Vec<String>,
    /// The number of chains (split-R̂ compares halves of chains too, but only chains started
    /// apart can show that they did not find the same distribution).
    pub chains: usize,
    /// The largest Monte Carlo standard error of a coordinate's mean, in that coordinate's
    /// posterior sds (`mcse_mean / sd`; NaN if any is).
    pub max_mcse_mean: f64,
    /// The largest Monte Carlo standard error of a coordinate's sd, relative to that sd
    /// (`mcse_sd / sd`; NaN if any is).
    pub max_mcse_sd: f64,
    /// The run's own accuracy claim from its Monte Carlo error: with probability
    /// [`BOUND_PROB`] (Bonferroni over the `2d` means and sds) every mean lies within
    /// `error_bound` sds, and every sd within `error_bound × 100 %`, of what the chains would
    /// give run forever: `z · max(m, s) / (1 − z s)` with `m = max_mcse_mean`,
    /// `s = max_mcse_sd`, `z = Φ⁻¹(1 − (1 − BOUND_PROB) / (4d))` (the division expresses it in
    /// units of the limit's sd at its lower bound rather than of the run's own sd; ∞ if
    /// `z s ≥ 1`). It does **not** include the step's bias (the
    /// chains' limit is the sampler's law at its step, not the posterior): estimate that with
    /// [`discretisation_bias`](crate::discretisation_bias). Meaningful only when the run
    /// [`converged`](Self::converged) (below [`ESS_MIN`] the MCSEs themselves are unreliable).
    pub error_bound: f64,
    /// The accuracy the run states with its step's estimated bias included, where a step-bias
    /// check ran ([`convergence_with_bias`](crate::convergence_with_bias)): with the probability
    /// of [`error_bound`](Self::error_bound), every mean within `bias_bound` sds and every sd
    /// within `bias_bound × 100 %` of the posterior's, to the first order in the step that the
    /// check sees. `None` without a check.
    pub bias_bound: Option<f64>,
    /// The largest estimated |bias| of a mean or sd at the run's step that stands out of the
    /// check's noise (Bonferroni z), in posterior sds, where a step-bias check ran; 0 if none
    /// does. (A short check cannot resolve a small bias: its noise still widens
    /// [`bias_bound`](Self::bias_bound).)
    pub step_bias: Option<f64>,
    /// The step-bias check's cost relative to the run's (datum gradients), where it ran.
    pub bias_cost: Option<f64>,
}

impl Convergence {
    /// The accuracy the run states: [`bias_bound`](Self::bias_bound) where a step-bias check
    /// ran, else the Monte Carlo [`error_bound`](Self::error_bound) alone.
    pub fn stated_bound(&self) -> f64 {
        self.bias_bound.unwrap_or(self.error_bound)
    }

    /// Whether the estimated step bias is larger than the run's Monte Carlo bound: the run's
    /// accuracy is then set by its step, not by its length (a smaller step, tuned for a longer
    /// planned run, lowers it). False without a check.
    pub fn bias_dominates(&self) -> bool {
        self.step_bias.is_some_and(|b| b > self.error_bound)
    }

    /// Whether the run states a finite accuracy: false when its
    /// [`stated_bound`](Self::stated_bound) is infinite or NaN (the Monte Carlo error of an sd
    /// too large to bound, `z s ≥ 1`, or a step-bias check too noisy to bound the bias). A
    /// converged run without one says so in its verdict ("BUT ITS ACCURACY IS UNKNOWN"): its
    /// chains mixed, but nothing bounds how far its estimates are from the posterior's.
    pub fn accuracy_known(&self) -> bool {
        self.stated_bound().is_finite()
    }
}

/// The probability of [`Convergence::error_bound`]: 0.95.
pub const BOUND_PROB: f64 = 0.95;

impl std::fmt::Display for Convergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.converged && !self.accuracy_known() {
            write!(
                f,
                "converged (chains mixed), BUT ITS ACCURACY IS UNKNOWN (nothing bounds the estimates' error: run \
                 longer, or give the step-bias check more of the run): "
            )?;
        } else if self.converged && self.bias_dominates() {
            write!(f, "converged (chains mixed), BUT THE STEP IS BIASED beyond the Monte Carlo error: ")?;
        } else if self.converged {
            write!(f, "converged: ")?;
        } else {
            write!(f, "NOT CONVERGED ({} of the coordinates fail", self.failed.len())?;
            if !self.failed_names.is_empty() {
                let shown: Vec<&str> = self.failed_names.iter().take(8).map(String::as_str).collect();
                write!(f, ": {}{}", shown.join(", "), if self.failed_names.len() > 8 { ", …" } else { "" })?;
            }
            write!(f, "): ")?;
        }
        write!(
            f,
            "max split-R̂ {:.3} (≤ {RHAT_MAX}), min ESS bulk {:.0} / tail {:.0} (≥ {ESS_MIN:.0}) over {} chain(s)",
            self.max_rhat, self.min_ess_bulk, self.min_ess_tail, self.chains
        )?;
        match (self.bias_bound, self.step_bias) {
            (Some(bound), Some(bias)) => write!(
                f,
                "; Monte Carlo error ±{:.3} sd; step bias {} (a companion at half the step, {:.0} % of the run's \
                 cost); together: means within ±{bound:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates)",
                self.error_bound,
                if bias > 0.0 { format!("up to {bias:.3} sd") } else { "not detected".to_string() },
                100.0 * self.bias_cost.unwrap_or(f64::NAN),
                100.0 * bound,
                100.0 * BOUND_PROB
            )?,
            _ => write!(
                f,
                "; Monte Carlo error: means within ±{:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates; step bias \
                 not included)",
                self.error_bound,
                100.0 * self.error_bound,
                100.0 * BOUND_PROB
            )?,
        }
        if self.chains < 2 {
            write!(f, "; one chain: run several from dispersed starts for R̂ to mean much")?;
        }
        Ok(())
    }
}

/// Whether the chains of `est` mixed: split-R̂ and bulk and tail ESS of every coordinate against
/// [`RHAT_MAX`] and [`ESS_MIN`]. Start the chains dispersed around the mode
/// ([`dispersed_starts`](crate::tune::dispersed_starts)): chains started at one point can agree
/// with each other and all be wrong.
///
/// Errors: as [`summary`].
pub fn convergence(est: &Estimate) -> Result<Convergence> {
    let rows = summary(est)?;
    Ok(convergence_of(&rows, est.n_parts()))
}

impl Convergence {
    /// `self` with the names of its failed coordinates from `names` (one per coordinate).
    pub(crate) fn named(mut self, names: &[String]) -> Self {
        self.failed_names = self.failed.iter().filter_map(|&j| names.get(j).cloned()).collect();
        self
    }
}

/// The larger of two numbers, NaN if either is.
pub(crate) fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

/// The z of every [`BOUND_PROB`] error bound over `d` coordinates: two-sided, Bonferroni over
/// the 2d means and sds, `Φ⁻¹(1 − (1 − BOUND_PROB) / (4d))`.
pub(crate) fn bound_z(d: usize) -> f64 {
    normal_quantile(1.0 - (1.0 - BOUND_PROB) / (4.0 * d.max(1) as f64))
}

/// Absolute error bounds on a mean (`a_mean`) and an sd (`a_sd`) of a coordinate whose estimated
/// sd is `sd`, as one relative bound in units of the true sd at its lower bound:
/// `max(a_mean, a_sd) / (sd − a_sd)`; NaN if a bound is NaN, ∞ if `a_sd ≥ sd`.
pub(crate) fn relative_bound(a_mean: f64, a_sd: f64, sd: f64) -> f64 {
    let sd_lo = sd - a_sd;
    if sd_lo > 0.0 {
        nan_max(a_mean, a_sd) / sd_lo
    } else if a_sd.is_nan() {
        f64::NAN
    } else {
        f64::INFINITY
    }
}

pub(crate) fn convergence_of(rows: &[Summary], chains: usize) -> Convergence {
    let failed: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| !r.converged()).map(|(j, _)| j).collect();
    let nan_min = |a: f64, b: f64| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) };
    let max_mcse_mean = rows.iter().map(|r| r.mcse_mean / r.sd).fold(0.0, nan_max);
    let max_mcse_sd = rows.iter().map(|r| r.mcse_sd / r.sd).fold(0.0, nan_max);
    let z = bound_z(rows.len());
    Convergence {
        converged: failed.is_empty(),
        max_rhat: rows.iter().map(|r| r.rhat).fold(0.0, nan_max),
        min_ess_bulk: rows.iter().map(|r| r.ess_bulk).fold(f64::INFINITY, nan_min),
        min_ess_tail: rows.iter().map(|r| r.ess_tail).fold(f64::INFINITY, nan_min),
        failed,
        failed_names: Vec::new(),
        chains,
        max_mcse_mean,
        max_mcse_sd,
        // Relative MCSEs: the bound in units of the sd at its lower bound, `1 − z s`.
        error_bound: relative_bound(z * max_mcse_mean, z * max_mcse_sd, 1.0),
        bias_bound: None,
        step_bias: None,
        bias_cost: None,
    }
}

/// The Monte Carlo standard error of the sd of a (chains × draws) array, as ArviZ (0.23) and the
/// R package posterior compute it: with `z = (x − x̄)²`, `E = mean(z)`,
/// `MCSE(sd) = √((mean(z²) − E²) / ESS_mean(z) / E / 4)` (the variance of the variance estimate
/// by Kenney & Keeping, then the delta method for its square root). Errors as [`ess_bulk`].
pub fn mcse_sd(draws: ArrayView2<'_, f64>) -> Result<f64> {
    check_draws(&draws)?;
    let mean = draws.sum() / draws.len() as f64;
    let z = draws.mapv(|v| (v - mean) * (v - mean));
    let e = z.sum() / z.len() as f64;
    if e == 0.0 {
        return Ok(0.0);
    }
    let e2 = z.iter().map(|v| v * v).sum::<f64>() / z.len() as f64;
    Ok(((e2 - e * e) / ess_mean(z.view())? / e / 4.0).sqrt())
}

/// The `prob` highest-density interval of all draws of a (chains × draws) array, as ArviZ's `hdi`
/// (unimodal): of the intervals `[x₍ᵢ₎, x₍ᵢ₊ₖ₎]` between sorted draws, `k = ⌊prob · n⌋`, the
/// shortest (the first on ties).
///
/// Errors: [`Error::InvalidParameter`] unless `0 < prob < 1`; as [`ess_bulk`] for the draws;
/// [`Error::TooFewSamples`] when `⌊prob · n⌋ = n`.
pub fn hdi(draws: ArrayView2<'_, f64>, prob: f64) -> Result<(f64, f64)> {
    if !(prob > 0.0 && prob < 1.0) {
        return Err(Error::invalid("prob", prob, "must be in (0, 1)"));
    }
    check_draws(&draws)?;
    let mut v: Vec<f64> = draws.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    hdi_sorted(&v, prob)
}

fn hdi_sorted(v: &[f64], prob: f64) -> Result<(f64, f64)> {
    let n = v.len();
    let k = (prob * n as f64).floor() as usize;
    if k >= n {
        return Err(Error::TooFewSamples { needed: n + 1, got: n });
    }
    let mut best = (f64::INFINITY, 0);
    for i in 0..n - k {
        let w = v[i + k] - v[i];
        if w < best.0 {
            best = (w, i);
        }
    }
    Ok((v[best.1], v[best.1 + k]))
}

/// The weighted HDI: the shortest interval between two sorted draws whose draws carry at least
/// `prob` of the total weight.
fn weighted_hdi(x: &ArrayView2<'_, f64>, w: &ArrayView2<'_, f64>, prob: f64) -> (f64, f64) {
    let mut v: Vec<(f64, f64)> = x.iter().copied().zip(w.iter().copied()).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|p| p.1).sum();
    let target = prob * total;
    let (mut best, mut j, mut mass) = ((f64::INFINITY, f64::NAN, f64::NAN), 0, 0.0);
    for i in 0..v.len() {
        while j < v.len() && mass < target {
            mass += v[j].1;
            j += 1;
        }
        if mass < target {
            break;
        }
        let width = v[j - 1].0 - v[i].0;
        if width < best.0 {
            best = (width, v[i].0, v[j - 1].0);
        }
        mass -= v[i].1;
    }
    (best.1, best.2)
}

/// The p-quantile (type 7, linear interpolation, numpy's default) of all draws. Errors:
/// [`Error::InvalidParameter`] unless `0 ≤ p ≤ 1`; as [`ess_bulk`] for the draws.
pub fn quantile(draws: ArrayView2<'_, f64>, p: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid("p", p, "must be in [0, 1]"));
    }
    check_draws(&draws)?;
    Ok(quantile7(&draws, p))
}

/// The [`Summary`] of one quantity's (chains × draws) array, in ArviZ 0.23's convention.
/// Errors as [`ess_bulk`].
pub fn summary_of_draws(draws: ArrayView2<'_, f64>) -> Result<Summary> {
    summary_of_draws_with(draws, Convention::default())
}

/// [`summary_of_draws`] in the given [`Convention`].
pub fn summary_of_draws_with(draws: ArrayView2<'_, f64>, convention: Convention) -> Result<Summary> {
    check_draws(&draws)?;
    let n = draws.len() as f64;
    let mut sorted: Vec<f64> = draws.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    let q = |p: f64| quantile_sorted(&sorted, p);
    Ok(Summary {
        mean: draws.sum() / n,
        sd: sample_var(draws.iter().copied()).sqrt(),
        q05: q(0.05),
        median: q(0.5),
        q95: q(0.95),
        hdi: hdi_sorted(&sorted, HDI_PROB)?,
        mcse_mean: mcse_mean(draws)?,
        mcse_sd: mcse_sd(draws)?,
        ess_bulk: ess_bulk(draws)?,
        ess_tail: ess_tail_at(&draws, convention.tail_quantiles()),
        rhat: rhat_of(&draws, convention),
        interval: match convention {
            Convention::ArviZ023 => hdi_sorted(&sorted, HDI_PROB)?,
            Convention::ArviZ1 => (q(ETI89.0), q(ETI89.1)),
        },
        convention,
        weighted: false,
        bias_mean: None,
        bias_sd: None,
    })
}

/// The [`Summary`] of one quantity's weighted (chains × draws) array, `weights` of the same shape
/// (the draws' weights, e.g. step sizes of a decreasing schedule). Equal weights give exactly
/// [`summary_of_draws`]. With unequal weights every field uses them:
///
/// - `mean = Σ w x / Σ w` (what [`Estimate::mean`] returns);
/// - `sd² = Σ w (x − mean)² / (Σ w − Σ w² / Σ w)` (reliability weights; ddof 1 when equal);
/// - ESS and MCSE by the delta method for the ratio estimator: the split series
///   `yₜ = wₜ (xₜ − mean) / w̄` (w̄ the mean weight) has the error of the weighted mean as its
///   mean, so `MCSE² = var⁺(y) / ESS(y)` with the same autocovariance machinery, and
///   `ESS = sd² / MCSE²`; bulk ESS applies this to the rank-normalised split draws, tail ESS to
///   the indicators of the weighted 5 % and 95 % quantiles;
/// - quantiles: the smallest draw whose cumulative normalised weight reaches p; HDI: the
///   shortest interval between sorted draws holding at least [`HDI_PROB`] of the weight; MCSE of
///   the sd: the delta-method MCSE of the weighted mean of `(x − mean)²`, divided by `2 sd`;
/// - R̂: the classic formula on the rank-normalised split chains with weighted chain means and
///   variances and `n` replaced by the chains' mean Kish size `(Σ w)² / Σ w²` (folded about the
///   weighted median for the tail, maximum of the two).
///
/// Errors: as [`ess_bulk`], plus [`Error::DimensionMismatch`] for weights of another shape,
/// [`Error::InvalidParameter`] for a non-finite weight and [`Error::ZeroTotalWeight`] when the
/// weights (or one split chain's) sum to zero.
pub fn summary_of_weighted_draws(draws: ArrayView2<'_, f64>, weights: ArrayView2<'_, f64>) -> Result<Summary> {
    summary_of_weighted_draws_with(draws, weights, Convention::default())
}

/// [`summary_of_weighted_draws`] in the given [`Convention`] (weighted quantiles for the tail ESS and
/// the equal-tailed interval, the weighted median of the unsplit or split draws for R̂'s fold).
pub fn summary_of_weighted_draws_with(
    draws: ArrayView2<'_, f64>,
    weights: ArrayView2<'_, f64>,
    convention: Convention,
) -> Result<Summary> {
    check_draws(&draws)?;
    check_len("weight rows (chains)", draws.nrows(), weights.nrows())?;
    check_len("weight columns (draws per chain)", draws.ncols(), weights.ncols())?;
    if let Some(w) = weights.iter().find(|w| !w.is_finite()) {
        return Err(Error::invalid("weights", w, "every weight must be finite"));
    }
    let w0 = weights[[0, 0]];
    if weights.iter().all(|&w| w == w0) {
        if w0 == 0.0 {
            return Err(Error::ZeroTotalWeight);
        }
        return summary_of_draws_with(draws, convention);
    }
    let (xs, ws) = (split(&draws), split(&weights));
    for c in ws.outer_iter() {
        if c.sum() == 0.0 {
            return Err(Error::ZeroTotalWeight);
        }
    }
    let (mean, sd2) = weighted_moments(draws.iter().copied(), weights.iter().copied())?;
    let (_, var_mean) = ess_weighted(&xs, &ws);
    let (q05, q95) = (weighted_quantile(&draws, &weights, 0.05), weighted_quantile(&draws, &weights, 0.95));
    let tail = |p: f64| {
        let q = weighted_quantile(&draws, &weights, p);
        ess_weighted(&xs.mapv(|v| if v <= q { 1.0 } else { 0.0 }), &ws).0
    };
    let (t0, t1) = convention.tail_quantiles();
    let z = z_scale(&xs);
    let med = match convention {
        Convention::ArviZ023 => weighted_quantile(&draws, &weights, 0.5),
        Convention::ArviZ1 => weighted_quantile(&xs.view(), &ws.view(), 0.5),
    };
    let folded = z_scale(&xs.mapv(|v| (v - med).abs()));
    // MCSE of the sd: the delta-method MCSE of the weighted mean of z = (x − mean)², over 2 sd.
    let (_, var_z) = ess_weighted(&xs.mapv(|v| (v - mean) * (v - mean)), &ws);
    Ok(Summary {
        mean,
        sd: sd2.sqrt(),
        q05,
        median: weighted_quantile(&draws, &weights, 0.5),
        q95,
        hdi: weighted_hdi(&draws, &weights, HDI_PROB),
        mcse_mean: var_mean.sqrt(),
        mcse_sd: if sd2 > 0.0 { var_z.sqrt() / (2.0 * sd2.sqrt()) } else { 0.0 },
        ess_bulk: ess_weighted(&z, &ws).0,
        ess_tail: tail(t0).min(tail(t1)),
        rhat: rhat_weighted(&z, &ws).max(rhat_weighted(&folded, &ws)),
        interval: match convention {
            Convention::ArviZ023 => weighted_hdi(&draws, &weights, HDI_PROB),
            Convention::ArviZ1 => {
                (weighted_quantile(&draws, &weights, ETI89.0), weighted_quantile(&draws, &weights, ETI89.1))
            }
        },
        convention,
        weighted: true,
        bias_mean: None,
        bias_sd: None,
    })
}

/// Weighted mean and reliability-weighted variance `Σ w (x − μ)² / (Σ w − Σ w² / Σ w)`.
fn weighted_moments(x: impl Iterator<Item = f64> + Clone, w: impl Iterator<Item = f64> + Clone) -> Result<(f64, f64)> {
    let (sw, sw2) = w.clone().fold((0.0, 0.0), |(a, b), v| (a + v, b + v * v));
    if sw == 0.0 || !sw.is_finite() {
        return Err(Error::ZeroTotalWeight);
    }
    let mu = x.clone().zip(w.clone()).map(|(x, w)| w * x).sum::<f64>() / sw;
    let ss = x.zip(w).map(|(x, w)| w * (x - mu) * (x - mu)).sum::<f64>();
    Ok((mu, ss / (sw - sw2 / sw)))
}

/// Delta-method ESS and variance of the weighted mean of (already split) weighted chains.
fn ess_weighted(x: &Array2<f64>, w: &Array2<f64>) -> (f64, f64) {
    let (m, n) = x.dim();
    let Ok((mu, var)) = weighted_moments(x.iter().copied(), w.iter().copied()) else { return (f64::NAN, f64::NAN) };
    if var.is_nan() || var <= 0.0 {
        return (x.len() as f64, 0.0);
    }
    let wbar = w.sum() / w.len() as f64;
    let chains: Vec<Vec<f64>> = x
        .outer_iter()
        .zip(w.outer_iter())
        .map(|(xc, wc)| xc.iter().zip(wc).map(|(x, w)| w * (x - mu) / wbar).collect())
        .collect();
    let means: Vec<f64> = chains.iter().map(|c| c.iter().sum::<f64>() / n as f64).collect();
    let acov = mean_autocov_fft(&chains, &means);
    let (ess_y, var_plus_y) = ess_from_autocov(m, n, &means, |t| acov[t]);
    let var_mean = var_plus_y / ess_y;
    (var / var_mean, var_mean)
}

/// R̂ with weighted chain means/variances and the mean Kish size of the chains as n.
fn rhat_weighted(x: &Array2<f64>, w: &Array2<f64>) -> f64 {
    let mut means = Vec::with_capacity(x.nrows());
    let mut vars = Vec::with_capacity(x.nrows());
    let mut n_eff = 0.0;
    for (xc, wc) in x.outer_iter().zip(w.outer_iter()) {
        let Ok((mu, v)) = weighted_moments(xc.iter().copied(), wc.iter().copied()) else { return f64::NAN };
        let (sw, sw2) = wc.iter().fold((0.0, 0.0), |(a, b), v| (a + v, b + v * v));
        n_eff += sw * sw / sw2;
        means.push(mu);
        vars.push(v);
    }
    let n = n_eff / x.nrows() as f64;
    let b = n * sample_var(means.iter().copied());
    let wv = vars.iter().sum::<f64>() / vars.len() as f64;
    ((b / wv + n - 1.0) / n).sqrt()
}

/// The weighted p-quantile: the smallest draw whose cumulative normalised weight reaches p.
fn weighted_quantile(x: &ArrayView2<'_, f64>, w: &ArrayView2<'_, f64>, p: f64) -> f64 {
    let mut v: Vec<(f64, f64)> = x.iter().copied().zip(w.iter().copied()).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|p| p.1).sum();
    let mut cum = 0.0;
    for &(x, w) in &v {
        cum += w / total;
        if cum >= p {
            return x;
        }
    }
    v.last().map_or(f64::NAN, |p| p.0)
}

/// The (chains × draws) array of `f(θ)` over an estimate's parts (chains), which must all keep
/// samples of the same length.
///
/// Errors: [`Error::NotStored`] for a part in streaming mode, [`Error::DimensionMismatch`] for
/// chains of different lengths, [`Error::NoSamples`] for none.
pub fn chains_of<F: Fn(ArrayView1<'_, f64>) -> f64>(est: &Estimate, f: F) -> Result<Array2<f64>> {
    per_chain(est, |s| s.draws().outer_iter().map(&f).collect())
}

/// The (chains × draws) array of one number per stored draw, `row(samples)` giving a chain's row.
fn per_chain(est: &Estimate, row: impl Fn(&crate::trace::estimate::Samples) -> Vec<f64>) -> Result<Array2<f64>> {
    let m = est.n_parts();
    if m == 0 {
        return Err(Error::NoSamples { reason: "no chain" });
    }
    let mut rows = Vec::with_capacity(m);
    for c in 0..m {
        let s = est.samples(c).ok_or(Error::NotStored { what: "samples (the run kept only running moments)" })?;
        rows.push(row(s));
    }
    let n = rows[0].len();
    for r in &rows {
        check_len(
            "draws per chain (parts of unequal length: for RrOutput::estimate use RrOutput::summary_table)",
            n,
            r.len(),
        )?;
    }
    Ok(Array2::from_shape_vec((m, n), rows.concat()).expect("lengths checked"))
}

/// [`Summary`] of every coordinate of a multi-chain estimate, **with the draws' weights**
/// ([`summary_of_weighted_draws`]): with a decreasing step schedule (weights = step sizes) the mean is
/// [`Estimate::mean`]'s, and MCSE, ESS and R̂ account for the weights; with constant weights this
/// is [`summary_of_draws`] of each coordinate. Errors as [`chains_of`] and [`summary_of_weighted_draws`].
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{diagnostics};
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?;
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 4_000, burn_in: 1_000, n_chains: 4, ..Default::default() }).run()?;
/// for (j, s) in diagnostics::summary(&out.estimate)?.iter().enumerate() {
///     println!("θ{j}: mean {:.4} sd {:.4} ESS {:.0} R̂ {:.3}", s.mean, s.sd, s.ess_bulk, s.rhat);
/// }
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn summary(est: &Estimate) -> Result<Vec<Summary>> {
    summary_with(est, Convention::default())
}

/// [`summary`] in the given [`Convention`].
pub fn summary_with(est: &Estimate, convention: Convention) -> Result<Vec<Summary>> {
    let weights = weights_of(est)?;
    (0..est.dim())
        .map(|j| summary_of_weighted_draws_with(chains_of(est, |t| t[j])?.view(), weights.view(), convention))
        .collect()
}

/// [`Summary`] rows with parameter names; `Display` prints them as ArviZ's `az.summary` does
/// (three decimals, ESS as integers, R̂ with two; `{:.6}` asks for six decimals), with the
/// 5/50/95 % quantiles after the HDI:
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{diagnostics};
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?;
/// let settings = RunSettings { n_iter: 4_000, burn_in: 1_000, n_chains: 4, ..Default::default() };
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run()?;
/// let table = diagnostics::summary_table(&out.estimate)?.with_names(&["intercept", "slope"])?;
/// println!("{table}");
/// assert_eq!(table.rows.len(), 2);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryTable {
    /// One name per row.
    pub names: Vec<String>,
    /// The rows.
    pub rows: Vec<Summary>,
}

impl SummaryTable {
    /// A table of `rows` named `names`. Errors: [`Error::DimensionMismatch`] unless there is one
    /// name per row.
    pub fn new(names: Vec<String>, rows: Vec<Summary>) -> Result<Self> {
        check_len("names", rows.len(), names.len())?;
        Ok(SummaryTable { names, rows })
    }

    /// The same rows renamed. Errors: [`Error::DimensionMismatch`] unless there is one name per
    /// row.
    pub fn with_names<S: AsRef<str>>(self, names: &[S]) -> Result<Self> {
        SummaryTable::new(names.iter().map(|n| n.as_ref().to_string()).collect(), self.rows)
    }
}

/// [`summary`] of every coordinate as a [`SummaryTable`] named `θ[0]`, `θ[1]`, …
/// (rename with [`SummaryTable::with_names`]). Errors as [`summary`].
pub fn summary_table(est: &Estimate) -> Result<SummaryTable> {
    summary_table_with(est, Convention::default())
}

/// [`summary_table`] in the given [`Convention`]: ArviZ 1.x's prints the 89 % equal-tailed
/// interval (`eti89_lb`, `eti89_ub`) where 0.23's prints the 94 % HDI.
pub fn summary_table_with(est: &Estimate, convention: Convention) -> Result<SummaryTable> {
    let rows = summary_with(est, convention)?;
    Ok(SummaryTable { names: (0..rows.len()).map(|j| format!("θ[{j}]")).collect(), rows })
}

impl std::fmt::Display for SummaryTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = f.precision().unwrap_or(3);
        let (lo, hi) = self.rows.first().map_or(Convention::default(), |r| r.convention).interval_columns();
        // The step-bias columns (after the Monte Carlo errors), where a step-bias check ran.
        let biased = self.rows.iter().any(|r| r.bias_mean.is_some());
        let mut header =
            vec!["mean", "sd", lo, hi, "q5%", "q50%", "q95%", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"];
        if biased {
            header.splice(9..9, ["bias_mean", "bias_sd"]);
        }
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut v =
                    vec![r.mean, r.sd, r.interval.0, r.interval.1, r.q05, r.median, r.q95, r.mcse_mean, r.mcse_sd];
                if biased {
                    v.push(r.bias_mean.unwrap_or(f64::NAN));
                    v.push(r.bias_sd.unwrap_or(f64::NAN));
                }
                let mut c: Vec<String> = v.iter().map(|x| format!("{x:.p$}")).collect();
                c.push(format!("{:.0}", r.ess_bulk));
                c.push(format!("{:.0}", r.ess_tail));
                c.push(format!("{:.2}", r.rhat));
                c
            })
            .collect();
        // Rows that fail the convergence thresholds are marked with a `*` after R̂.
        let flagged = self.rows.iter().any(|r| !r.converged());
        let name_w = self.names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        let widths: Vec<usize> = (0..header.len())
            .map(|k| cells.iter().map(|c| c[k].chars().count()).max().unwrap_or(0).max(header[k].len()))
            .collect();
        write!(f, "{:name_w$}", "")?;
        for (h, w) in header.iter().zip(&widths) {
            write!(f, "  {h:>w$}")?;
        }
        if flagged {
            write!(f, "  ")?;
        }
        for ((name, row), r) in self.names.iter().zip(&cells).zip(&self.rows) {
            writeln!(f)?;
            write!(f, "{name:<name_w$}")?;
            for (c, w) in row.iter().zip(&widths) {
                write!(f, "  {c:>w$}")?;
            }
            if flagged {
                write!(f, "{}", if r.converged() { "  " } else { " *" })?;
            }
        }
        if flagged {
            write!(
                f,
                "\n* not converged: split-R̂ > {RHAT_MAX} or bulk/tail ESS < {ESS_MIN:.0} (Vehtari et al. 2021); \
                 do not trust these rows"
            )?;
        }
        if self.rows.iter().any(|r| r.weighted) {
            write!(f, "\n(weighted draws: every column uses the draws' weights)")?;
        }
        if biased {
            write!(
                f,
                "\n(bias_mean, bias_sd: the estimated bias of the run's step, from a companion at half the step; compare \
                 them with mcse_mean and mcse_sd)"
            )?;
        }
        Ok(())
    }
}

/// The (chains × draws) array of the draws' weights. Errors as [`chains_of`].
pub fn weights_of(est: &Estimate) -> Result<Array2<f64>> {
    per_chain(est, |s| s.weights().to_vec())
}

/// Settings of the IMQ kernel `k(x, y) = (c² + ‖x − y‖²)^β`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KsdSettings {
    /// `c > 0`. Default 1.
    pub c: f64,
    /// `β ∈ (−1, 0)`. Default −1/2.
    pub beta: f64,
}

impl Default for KsdSettings {
    fn default() -> Self {
        KsdSettings { c: 1.0, beta: -0.5 }
    }
}

/// The Stein kernel of the IMQ base kernel between (x, s_x) and (y, s_y), s the score ∇log π.
#[inline]
fn stein_kernel(
    x: ArrayView1<'_, f64>,
    sx: ArrayView1<'_, f64>,
    y: ArrayView1<'_, f64>,
    sy: ArrayView1<'_, f64>,
    c2: f64,
    beta: f64,
) -> f64 {
    let d = x.len() as f64;
    let (mut r2, mut r_dsy_minus_sx, mut sxsy) = (0.0, 0.0, 0.0);
    for i in 0..x.len() {
        let r = x[i] - y[i];
        r2 += r * r;
        r_dsy_minus_sx += r * (sy[i] - sx[i]);
        sxsy += sx[i] * sy[i];
    }
    stein_imq(d, c2, beta, r2, r_dsy_minus_sx, sxsy)
}

/// The IMQ Stein kernel from its inner products: `r2 = ‖x − y‖²`, `rds = (x − y)·(s_y − s_x)`,
/// `sxsy = s_x·s_y`, in dimension `d`.
#[inline]
fn stein_imq(d: f64, c2: f64, beta: f64, r2: f64, rds: f64, sxsy: f64) -> f64 {
    let q = c2 + r2;
    // q^(β−1); the default β = −1/2 avoids the (dominant) cost of powf.
    let qb1 = if beta == -0.5 { 1.0 / (q * q.sqrt()) } else { q.powf(beta - 1.0) };
    -2.0 * beta * d * qb1 - 4.0 * beta * (beta - 1.0) * qb1 / q * r2 + 2.0 * beta * qb1 * rds + q * qb1 * sxsy
}

/// The kernel Stein discrepancy of the weighted sample `{(θᵢ, wᵢ)}` against π, given the scores
/// `∇log π(θᵢ) = −∇U(θᵢ)` (n × d), with the IMQ kernel:
///
/// `KSD² = Σᵢⱼ wᵢwⱼ k_π(θᵢ, θⱼ) / (Σᵢ wᵢ)²`,
/// `k_π(x, y) = ∇ₓ·∇ᵧk + ∇ₓk·s(y) + ∇ᵧk·s(x) + k s(x)·s(y)` (Gorham & Mackey 2017).
///
/// Exact O(n²d), rows in parallel on rayon, summed in a fixed order (thread-count independent).
/// From [`KSD_GRAM_MIN_DIM`] dimensions the kernel's inner products come from Gram tiles (matrix
/// products of the centred draws and the scores), 2× faster at d = 16 and 4–5× at d = 1 000
/// (`benches/diagnostics.rs`); the result agrees with the pair-by-pair sum to rounding (tested to
/// 10⁻¹² relative, draws at an offset of 2 000 included).
/// `weights = None` means equal weights; signed weights (Richardson–Romberg) are allowed, and a
/// negative KSD² (possible only with signed weights) is reported as 0. With stochastic gradient
/// estimates as scores, the discrepancy gains a positive term from their noise (the V-statistic's
/// diagonal): use exact gradients where possible. Returns KSD (not squared).
///
/// Errors: [`Error::DimensionMismatch`] for inconsistent shapes, [`Error::NoSamples`] for no draw,
/// [`Error::InvalidParameter`] for bad kernel settings or non-finite inputs,
/// [`Error::ZeroTotalWeight`].
pub fn ksd_imq(
    draws: ArrayView2<'_, f64>,
    scores: ArrayView2<'_, f64>,
    weights: Option<ArrayView1<'_, f64>>,
    settings: KsdSettings,
) -> Result<f64> {
    check_len("score rows", draws.nrows(), scores.nrows())?;
    check_len("score columns", draws.ncols(), scores.ncols())?;
    if draws.nrows() == 0 {
        return Err(Error::NoSamples { reason: "no draw for the kernel Stein discrepancy" });
    }
    crate::error::check_positive("c", settings.c)?;
    if !(settings.beta > -1.0 && settings.beta < 0.0) {
        return Err(Error::invalid("beta", settings.beta, "must be in (-1, 0)"));
    }
    if draws.iter().chain(scores.iter()).any(|v| !v.is_finite()) {
        return Err(Error::invalid("draws/scores", "non-finite entry", "must be finite"));
    }
    let n = draws.nrows();
    let w: Array1<f64> = match weights {
        Some(w) => {
            check_len("weights", n, w.len())?;
            w.to_owned()
        }
        None => Array1::ones(n),
    };
    let total: f64 = w.sum();
    if total == 0.0 || !total.is_finite() {
        return Err(Error::ZeroTotalWeight);
    }
    let c2 = settings.c * settings.c;
    if draws.ncols() >= KSD_GRAM_MIN_DIM {
        let ksd2 = ksd2_gram(draws, scores, w.view(), c2, settings.beta) / (total * total);
        return Ok(ksd2.max(0.0).sqrt());
    }
    // The Stein kernel is symmetric: row i sums the diagonal term and twice the pairs j > i.
    let rows: Vec<f64> = (0..n)
        .into_par_iter()
        .map(|i| {
            let (x, sx) = (draws.row(i), scores.row(i));
            let diag = w[i] * stein_kernel(x, sx, x, sx, c2, settings.beta);
            let off: f64 =
                (i + 1..n).map(|j| w[j] * stein_kernel(x, sx, draws.row(j), scores.row(j), c2, settings.beta)).sum();
            diag + 2.0 * off
        })
        .collect();
    let ksd2 = rows.iter().zip(&w).map(|(r, wi)| r * wi).sum::<f64>() / (total * total);
    Ok(ksd2.max(0.0).sqrt())
}

/// From this dimension [`ksd_imq`] takes the Stein kernel's inner products from Gram matrices
/// (matrix products of tiles of draws and scores) instead of one pair at a time: the same
/// O(n²d) arithmetic, in matrix products, which run 2× faster at d = 16 and 4–5× at d = 1 000
/// (`benches/diagnostics.rs`). Below it, the pair-by-pair sum is faster.
pub const KSD_GRAM_MIN_DIM: usize = 16;

/// Rows and columns of one Gram tile of [`ksd2_gram`].
const KSD_TILE: usize = 256;

/// `Σᵢⱼ wᵢwⱼ k_π(θᵢ, θⱼ)` with the inner products of the Stein kernel from Gram tiles. The
/// kernel is shift invariant in θ, so the draws are centred on their (unweighted) mean first:
/// then `‖x − y‖² = ‖x‖² + ‖y‖² − 2x·y` loses nothing to cancellation at an offset (a covariate
/// on a calendar-year scale) and only ~ε·spread² where two draws nearly coincide, which the
/// kernel's `c²` dominates. `(x − y)·(s_y − s_x) = x·s_y + y·s_x − x·s_x − y·s_y`. Tiles
/// `(I, J ≥ I)`, each row's sum in a fixed order, row blocks in parallel: thread-count
/// independent.
fn ksd2_gram(
    draws: ArrayView2<'_, f64>,
    scores: ArrayView2<'_, f64>,
    w: ArrayView1<'_, f64>,
    c2: f64,
    beta: f64,
) -> f64 {
    use ndarray::Slice;
    use ndarray::linalg::general_mat_mul;
    fn rows_of<'a>(a: ArrayView2<'a, f64>, r0: usize, r1: usize) -> ArrayView2<'a, f64> {
        a.slice_axis_move(Axis(0), Slice::from(r0..r1))
    }
    let (n, d) = draws.dim();
    // (n > 0: ksd_imq checked; the zero fallback is never taken.)
    let mean = draws.mean_axis(Axis(0)).unwrap_or_else(|| Array1::zeros(d));
    let x = &draws - &mean;
    let xx: Vec<f64> = x.outer_iter().map(|r| r.dot(&r)).collect();
    let xs: Vec<f64> = x.outer_iter().zip(scores.outer_iter()).map(|(r, s)| r.dot(&s)).collect();
    let dd = d as f64;
    let blocks = n.div_ceil(KSD_TILE);
    let rows: Vec<Vec<f64>> = (0..blocks)
        .into_par_iter()
        .map(|b| {
            let (i0, i1) = (b * KSD_TILE, ((b + 1) * KSD_TILE).min(n));
            let (xi, si) = (rows_of(x.view(), i0, i1), rows_of(scores, i0, i1));
            let mut sums = vec![0.0; i1 - i0];
            let mut g = [(); 4].map(|_| Array2::<f64>::zeros((i1 - i0, KSD_TILE)));
            for j0 in (i0..n).step_by(KSD_TILE) {
                let j1 = (j0 + KSD_TILE).min(n);
                let (xj, sj) = (rows_of(x.view(), j0, j1), rows_of(scores, j0, j1));
                let m = j1 - j0;
                let [gxx, gxs, gsx, gss] = &mut g;
                let t = |a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>, out: &mut Array2<f64>| {
                    general_mat_mul(1.0, &a, &b.t(), 0.0, &mut out.slice_axis_mut(Axis(1), Slice::from(..m)));
                };
                t(xi, xj, gxx);
                t(xi, sj, gxs);
                t(si, xj, gsx);
                t(si, sj, gss);
                for (r, sum) in sums.iter_mut().enumerate() {
                    let i = i0 + r;
                    let (gxx, gxs, gsx, gss) = (gxx.row(r), gxs.row(r), gsx.row(r), gss.row(r));
                    let mut acc = 0.0;
                    for c in 0..m {
                        let j = j0 + c;
                        if j < i {
                            continue;
                        }
                        let (r2, rds) = if j == i {
                            (0.0, 0.0)
                        } else {
                            ((xx[i] + xx[j] - 2.0 * gxx[c]).max(0.0), gxs[c] + gsx[c] - xs[i] - xs[j])
                        };
                        let k = stein_imq(dd, c2, beta, r2, rds, gss[c]);
                        acc += if j == i { w[j] * k } else { 2.0 * w[j] * k };
                    }
                    *sum += acc;
                }
            }
            sums
        })
        .collect();
    rows.iter().flatten().zip(w.iter()).map(|(r, wi)| r * wi).sum()
}

/// KSD of an estimate's stored samples against π, with scores `−∇Û` from the stored gradients
/// (run with [`Storage::SamplesAndGradients`](crate::Storage::SamplesAndGradients)), all parts
/// pooled with their weights. With exact gradients (full-gradient samplers) this is the exact
/// KSD; with stochastic ones, see [`ksd_imq`].
///
/// Errors: [`Error::NotStored`] without stored samples or gradients; as [`ksd_imq`].
pub fn ksd_of(est: &Estimate, settings: KsdSettings) -> Result<f64> {
    let mut draws = Vec::new();
    let mut grads = Vec::new();
    let mut w = Vec::new();
    for c in 0..est.n_parts() {
        let s = est.samples(c).ok_or(Error::NotStored { what: "samples" })?;
        let g = s.gradients().ok_or(Error::NotStored { what: "gradients (run with Storage::SamplesAndGradients)" })?;
        draws.push(s.draws());
        grads.push(g);
        w.push(s.weights());
    }
    if draws.is_empty() {
        return Err(Error::NoSamples { reason: "no chain" });
    }
    let d = ndarray::concatenate(Axis(0), &draws).map_err(|_| Error::NoSamples { reason: "shapes" })?;
    let g = ndarray::concatenate(Axis(0), &grads).map_err(|_| Error::NoSamples { reason: "shapes" })?;
    let w = ndarray::concatenate(Axis(0), &w).map_err(|_| Error::NoSamples { reason: "shapes" })?;
    ksd_imq(d.view(), (-g).view(), Some(w.view()), settings)
}

/// The standard normal quantile function Φ⁻¹(p), Wichura's algorithm AS 241 (PPND16), accurate to
/// about 1e-16 relative. Returns ±∞ at 0 and 1 and NaN outside [0, 1].
pub fn normal_quantile(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * poly(&A, r) / poly(&B, r);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let val = if r <= 5.0 {
        let r = r - 1.6;
        poly(&C, r) / poly(&D, r)
    } else {
        let r = r - 5.0;
        poly(&E, r) / poly(&F, r)
    };
    if q < 0.0 { -val } else { val }
}

#[inline]
fn poly(c: &[f64; 8], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
}

#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const A: [f64; 8] = [
    3.387_132_872_796_366_5,
    133.141_667_891_784_38,
    1_971.590_950_306_551_3,
    13_731.693_765_509_461,
    45_921.953_931_549_87,
    67_265.770_927_008_7,
    33_430.575_583_588_13,
    2_509.080_928_730_122_7,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const B: [f64; 8] = [
    1.0,
    42.313_330_701_600_91,
    687.187_007_492_057_9,
    5_394.196_021_424_751,
    21_213.794_301_586_597,
    39_307.895_800_092_71,
    28_729.085_735_721_943,
    5_226.495_278_852_545,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const C: [f64; 8] = [
    1.423_437_110_749_683_5,
    4.630_337_846_156_546,
    5.769_497_221_460_691,
    3.647_848_324_763_204_5,
    1.270_458_252_452_368_4,
    0.241_780_725_177_450_6,
    0.022_723_844_989_269_184,
    7.745_450_142_783_414e-4,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const D: [f64; 8] = [
    1.0,
    2.053_191_626_637_759,
    1.676_384_830_183_803_8,
    0.689_767_334_985_1,
    0.148_103_976_427_480_08,
    0.015_198_666_563_616_457,
    5.475_938_084_995_345e-4,
    1.050_750_071_644_416_9e-9,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const E: [f64; 8] = [
    6.657_904_643_501_103,
    5.463_784_911_164_114,
    1.784_826_539_917_291_3,
    0.296_560_571_828_504_9,
    0.026_532_189_526_576_124,
    0.001_242_660_947_388_078_4,
    2.711_555_568_743_487_6e-5,
    2.010_334_399_292_288_1e-7,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const F: [f64; 8] = [
    1.0,
    0.599_832_206_555_888,
    0.136_929_880_922_735_8,
    0.014_875_361_290_850_615,
    7.868_691_311_456_133e-4,
    1.846_318_317_510_054_8e-5,
    1.421_511_758_316_446e-7,
    2.044_263_103_389_939_8e-15,
];

/// The former O(n × lag) computations (direct autocovariance sums, evaluated lazily up to the lag
/// where Geyer's sequence stops), kept as the reference the FFT version is tested and benchmarked
/// against. Not part of the supported API.
#[doc(hidden)]
pub mod direct {
    use super::*;

    /// ESS by the direct autocovariance sums.
    pub(crate) fn ess_raw_direct(x: &Array2<f64>) -> f64 {
        let (m, n) = x.dim();
        let chains: Vec<Vec<f64>> = x.outer_iter().map(|r| r.to_vec()).collect();
        let means: Vec<f64> = chains.iter().map(|c| c.iter().sum::<f64>() / n as f64).collect();
        let mean_acov = |t: usize| chains.iter().zip(&means).map(|(c, &mu)| autocov(c, mu, t)).sum::<f64>() / m as f64;
        ess_from_autocov(m, n, &means, mean_acov).0
    }

    /// [`ess_bulk`](super::ess_bulk) with direct sums.
    pub fn ess_bulk(draws: ArrayView2<'_, f64>) -> Result<f64> {
        check_draws(&draws)?;
        Ok(ess_raw_direct(&z_scale(&split(&draws))))
    }

    /// [`mcse_mean`](super::mcse_mean) with direct sums.
    pub fn mcse_mean(draws: ArrayView2<'_, f64>) -> Result<f64> {
        check_draws(&draws)?;
        let sd = sample_var(draws.iter().copied()).sqrt();
        Ok(sd / ess_raw_direct(&split(&draws)).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::direct::ess_raw_direct;

    /// A converged run without a finite stated bound does not say "converged" unqualified; with
    /// one it does, and a bias above the Monte Carlo bound is flagged.
    #[test]
    fn a_converged_run_without_a_finite_bound_says_its_accuracy_is_unknown() {
        let c = Convergence {
            converged: true,
            max_rhat: 1.001,
            min_ess_bulk: 5_000.0,
            min_ess_tail: 5_000.0,
            failed: Vec::new(),
            failed_names: Vec::new(),
            chains: 4,
            max_mcse_mean: 0.01,
            max_mcse_sd: 0.01,
            error_bound: 0.03,
            bias_bound: None,
            step_bias: None,
            bias_cost: None,
        };
        assert!(c.converged && c.accuracy_known());
        assert!(c.to_string().starts_with("converged: "), "{c}");
        let biased = Convergence { bias_bound: Some(0.2), step_bias: Some(0.15), bias_cost: Some(0.25), ..c.clone() };
        assert!(biased.accuracy_known() && biased.to_string().contains("BUT THE STEP IS BIASED"), "{biased}");
        for bound in [f64::INFINITY, f64::NAN] {
            let unknown =
                Convergence { bias_bound: Some(bound), step_bias: Some(0.0), bias_cost: Some(0.25), ..c.clone() };
            assert!(!unknown.accuracy_known());
            assert!(unknown.to_string().contains("BUT ITS ACCURACY IS UNKNOWN"), "{unknown}");
        }
        let mc = Convergence { error_bound: f64::INFINITY, ..c.clone() };
        assert!(!mc.accuracy_known() && mc.to_string().contains("ACCURACY IS UNKNOWN"), "{mc}");
        let failed = Convergence { converged: false, bias_bound: Some(f64::INFINITY), ..c };
        assert!(failed.to_string().starts_with("NOT CONVERGED"), "{failed}");
    }

    /// The FFT autocovariances give the same ESS as the direct sums to 1e-12 relative, on the
    /// ArviZ fixture (raw, split, rank-normalised and tail-indicator arrays of each quantity) and
    /// on a strongly autocorrelated AR(1) chain.
    #[test]
    fn fft_ess_equals_the_direct_computation() {
        let text = include_str!("../../tests/fixtures/arviz_draws.csv");
        let mut cols = vec![Array2::<f64>::zeros((4, 301)); 4];
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let (c, t): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
            for (j, col) in cols.iter_mut().enumerate() {
                col[[c, t]] = f[2 + j].parse().unwrap();
            }
        }
        let mut ar = Array2::zeros((2, 2_000));
        let mut rng = crate::numeric::rng::stream(3, &[0]);
        for mut row in ar.outer_iter_mut() {
            let mut x = 0.0;
            for v in row.iter_mut() {
                let z: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng);
                x = 0.99 * x + z;
                *v = x;
            }
        }
        cols.push(ar);
        let mut worst = 0.0f64;
        for x in &cols {
            let sp = split(&x.view());
            let q = quantile7(&sp.view(), 0.05);
            let tail = sp.mapv(|v| if v <= q { 1.0 } else { 0.0 });
            for a in [x.clone(), sp.clone(), z_scale(&sp), tail] {
                let (fft, direct) = (ess_raw(&a), ess_raw_direct(&a));
                let rel = (fft - direct).abs() / direct;
                worst = worst.max(rel);
                assert!(rel <= 1e-12, "FFT ESS {fft} vs direct {direct} (rel {rel:e})");
            }
        }
        eprintln!("largest relative difference FFT vs direct ESS: {worst:e}");
    }

    #[test]
    fn normal_quantile_values() {
        // Reference values (R's qnorm, which uses the same algorithm).
        let cases = [
            (0.5, 0.0),
            (0.975, 1.959_963_984_540_054),
            (0.025, -1.959_963_984_540_054),
            (0.9, 1.281_551_565_544_600_5),
            (1e-10, -6.361_340_902_404_056),
            (0.999_999, 4.753_424_308_817_087),
        ];
        for (p, z) in cases {
            assert!((normal_quantile(p) - z).abs() < 1e-14 * (1.0 + z.abs()), "Φ⁻¹({p}) = {}", normal_quantile(p));
        }
        assert!(normal_quantile(-0.1).is_nan());
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
    }
}
