//! Numerics below every model and sampler: dense linear algebra, the L-BFGS recursion, seeded
//! random streams, step-size schedules.

pub(crate) mod lbfgs;
pub(crate) mod linalg;
pub mod prefetch;
pub mod rng;
pub(crate) mod schedule;
