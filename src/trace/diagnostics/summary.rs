//! Per-parameter summaries ([`Summary`]) of plain and weighted draws and the printed table
//! ([`SummaryTable`]), in ArviZ 0.23's or 1.x's convention.

use crate::error::{Error, Result, check_len};
use crate::trace::diagnostics::ess::Convention;
use crate::trace::diagnostics::ess::{
    check_draws, ess_bulk, ess_from_autocov, ess_tail_at, hdi_sorted, mcse_mean, mcse_sd, mean_autocov_fft,
    quantile_sorted, rhat_of, sample_var, split, weighted_hdi, z_scale,
};
use crate::trace::estimate::Estimate;
use ndarray::{Array2, ArrayView1, ArrayView2};

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
    /// [`rhat`](fn@crate::diagnostics::rhat) computes): they differ in the fourth decimal for an odd number of
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
