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
mod rows;
pub(crate) mod subset;
mod tempered;

pub use constrained::{Block, Constrained, Constraint, Layout};
pub use glm::{Family, Glm, GlmSettings};
pub use linear_gaussian::LinearGaussian;
pub use logistic::LogisticRegression;
pub(crate) use pmf::PmfTerms;
pub use pmf::{Pmf, Ratings};
pub use prior::Prior;
pub use rows::DataScalar;
pub(crate) use rows::{BLOCK, Bits, Rows, axpy, row_dot};
pub use tempered::{Temperature, Tempered};

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
