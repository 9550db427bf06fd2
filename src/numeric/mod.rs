//! Numerics below every model and sampler: dense linear algebra, the L-BFGS recursion, seeded
//! random streams, step-size schedules, special functions.

pub(crate) mod lbfgs;
pub(crate) mod linalg;
pub mod prefetch;
pub mod rng;
pub(crate) mod schedule;
pub(crate) mod special;
