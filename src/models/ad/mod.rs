//! Models without hand-written gradients: automatic-differentiation adapters.
//!
//! | adapter | feature | mode | what the user writes | Hessian-vector products |
//! | --- | --- | --- | --- | --- |
//! | `ForwardAd` | `forward-ad` | forward (num-dual dual numbers) | one datum's negative log-density, generic over the scalar | exact (hyper-dual numbers) |
//! | `CandleModel` | `candle` | reverse (candle's autograd) | the minibatch's summed negative log-likelihood on tensors | no |
//!
//! Forward mode costs d evaluations of the density per gradient (one per coordinate): the right
//! choice for GLM-sized models (d up to a few dozen), where it also gives exact Hessian-vector
//! products, so the Taylor estimator of ML-SGLD and the curvature-based tuning work with no
//! extra code. Reverse mode costs a small multiple of one evaluation whatever d: the choice for
//! neural networks. Both report an engine's failure through the gradient's `Result`
//! ([`Model::grad_data_sum`](crate::Model::grad_data_sum)) as
//! [`Error::ModelFailure`](crate::Error::ModelFailure), never a panic inside a sampler step.
//!
//! [`Prior`] is the closed-form prior the candle adapter adds to its likelihood (forward-mode
//! users write theirs generically, as part of the density).
//!
#![doc = include_str!("../../../docs/guide/ad.md")]

#[cfg(feature = "forward-ad")]
mod forward;
#[cfg(feature = "forward-ad")]
mod grad_dual;
#[cfg(feature = "forward-ad")]
pub use forward::{DualDensity, ForwardAd};
/// The `num-dual` crate this adapter is built on (its `DualNum` trait bounds the scalar of a
/// [`DualDensity`]).
#[cfg(feature = "forward-ad")]
pub use num_dual;

#[cfg(feature = "candle")]
mod candle;
#[cfg(feature = "candle")]
pub use self::candle::CandleModel;
/// The `candle-core` crate this adapter is built on (tensors, devices, dtypes).
#[cfg(feature = "candle")]
pub use candle_core;

mod prior;
pub use prior::{Prior, PriorFn};
