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

mod ess;
pub use crate::numeric::special::normal_quantile;
pub use ess::*;
mod summary;
pub use summary::*;
mod convergence;
pub use convergence::*;
mod ksd;
pub use ksd::*;

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
mod tests;
