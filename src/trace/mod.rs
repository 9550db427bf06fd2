//! What a run leaves: weighted empirical measures ([`Estimate`](crate::Estimate)), their
//! diagnostics and summaries, zero-variance control variates, and traces on disk (`.npy`, CSV,
//! Zarr).

mod constrained;
pub mod diagnostics;
pub(crate) mod estimate;
pub mod export;
#[cfg(feature = "zarr")]
pub(crate) mod zarr;
pub(crate) mod zv;
