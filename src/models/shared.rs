//! What the built-in models share: the synthetic data sets' size check, the prior precision from a
//! variance, and standard normal draws.

use crate::error::Result;
use ndarray::Array1;

/// Refuses a synthetic data set of `n_data` rows × `dim` columns (and its responses) that does
/// not fit [`DEFAULT_MEMORY_LIMIT`](crate::DEFAULT_MEMORY_LIMIT), before it is drawn.
pub(crate) fn check_synthetic_size(n_data: usize, dim: usize) -> Result<()> {
    crate::error::check_bytes(
        "the synthetic data set (n_data × (dim + 1) numbers)",
        n_data as u128 * (dim as u128 + 1) * 8 + dim as u128 * 8,
        Some(crate::error::DEFAULT_MEMORY_LIMIT),
    )
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
