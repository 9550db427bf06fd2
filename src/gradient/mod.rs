//! Gradient estimators: how a sampler gets `∇Ũ(θ)` without knowing how it is estimated.
//!
//! A sampler owns one [`GradientEstimator`] and calls it once (or, for some samplers, several
//! times on one draw) per iteration. Built in:
//! - [`FullGradient`]: the exact `∇U(θ)` (cost N datum gradients);
//! - [`Minibatch`]: `∇U₀(θ) + (N/n) Σ_{i∈S} ∇Uᵢ(θ)` with `S` of size n drawn with replacement
//!   (the default) or without; unbiased either way (cost n).
//!
//! Control-variate and Taylor estimators are further implementations of the same trait, so every
//! sampler works with them unchanged. Every estimator counts the datum-gradient evaluations it
//! makes, including one-off setup passes. This folder holds them (`control_variate.rs`,
//! `taylor.rs`, `variance_reduced.rs`) and what runs on them without sampling: the mode search
//! and SGD (`optim.rs`).

pub(crate) mod auto;
pub(crate) mod control_variate;
pub(crate) mod optim;
pub(crate) mod taylor;
pub(crate) mod variance_reduced;

pub(crate) use crate::numeric::rng::uniform_below;

mod estimator;
pub use estimator::{Batches, FullGradient, GradientEstimator, Minibatch, Subsample, SubsampledEstimator};
