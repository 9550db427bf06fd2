//! Effective sample sizes, split-R̂ and Monte Carlo standard errors (Vehtari et al. 2021), the
//! rank normalisation with its normal quantile function, HDIs and quantiles.

use crate::error::{Error, Result};
use crate::numeric::special::normal_quantile;
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

pub(super) fn check_draws(x: &ArrayView2<'_, f64>) -> Result<()> {
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
pub(super) fn split(x: &ArrayView2<'_, f64>) -> Array2<f64> {
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
pub(super) fn z_scale(x: &Array2<f64>) -> Array2<f64> {
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
pub(super) fn quantile7(x: &ArrayView2<'_, f64>, p: f64) -> f64 {
    let mut v: Vec<f64> = x.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, p)
}

/// Type-7 quantile of sorted values.
pub(super) fn quantile_sorted(v: &[f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

pub(super) fn sample_var(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = v.clone().count() as f64;
    let m = v.clone().sum::<f64>() / n;
    v.map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
}

/// Autocovariance at lag t of one chain (divided by n), by the direct sum: O(n) per lag. Kept to
/// check the FFT version.
pub(super) fn autocov(c: &[f64], mean: f64, t: usize) -> f64 {
    let n = c.len();
    c[..n - t].iter().zip(&c[t..]).map(|(a, b)| (a - mean) * (b - mean)).sum::<f64>() / n as f64
}

/// The mean over chains of the autocovariances `γ̂_t`, t = 0 … n−1 (each divided by n), by FFT:
/// each centred chain is zero-padded to 2n, transformed, multiplied by its conjugate and
/// transformed back (ArviZ's `_autocov`). O(m n log n).
pub(super) fn mean_autocov_fft(chains: &[Vec<f64>], means: &[f64]) -> Vec<f64> {
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
pub(super) fn ess_raw(x: &Array2<f64>) -> f64 {
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
pub(super) fn ess_from_autocov(m: usize, n: usize, means: &[f64], mean_acov: impl Fn(usize) -> f64) -> (f64, f64) {
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
pub(super) fn ess_tail_at(draws: &ArrayView2<'_, f64>, p: (f64, f64)) -> f64 {
    let e = |p: f64| {
        let q = quantile7(draws, p);
        ess_raw(&split(&draws.mapv(|v| if v <= q { 1.0 } else { 0.0 }).view()))
    };
    e(p.0).min(e(p.1))
}

/// R̂ of the convention: the tail part folded about the median of the unsplit draws (0.23's
/// `az.summary`) or of the split ones ([`rhat`]).
pub(super) fn rhat_of(draws: &ArrayView2<'_, f64>, convention: Convention) -> f64 {
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

pub(super) fn hdi_sorted(v: &[f64], prob: f64) -> Result<(f64, f64)> {
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
pub(super) fn weighted_hdi(x: &ArrayView2<'_, f64>, w: &ArrayView2<'_, f64>, prob: f64) -> (f64, f64) {
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
