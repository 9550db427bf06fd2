//! The former O(n × lag) computations (direct autocovariance sums, evaluated lazily up to the lag
//! where Geyer's sequence stops), kept as the reference the FFT version is tested and benchmarked
//! against. Not part of the supported API.

use crate::error::Result;
use crate::trace::diagnostics::ess::{autocov, check_draws, ess_from_autocov, sample_var, split, z_scale};
use ndarray::{Array2, ArrayView2};

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
