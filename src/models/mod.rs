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

mod shared;
pub(crate) use shared::{check_synthetic_size, normal_array, prior_precision, standard_normal};
