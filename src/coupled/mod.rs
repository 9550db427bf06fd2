//! Coupled-path methods: Richardson–Romberg extrapolation (SGRRLD, SGRRHMC, …) and multilevel
//! SGLD. Both drive [`Discretisation`](crate::Discretisation) samplers — any sampler on the
//! [`Langevin`](crate::Langevin) driver — with Gaussian increments shared between a path and one
//! with half its time step, written once here ([`SharedIncrements`]).

pub(crate) mod mlsgld;
pub(crate) mod richardson;
pub(crate) mod step_bias;
pub(crate) mod tune_rr;

mod increments;
pub(crate) use increments::SharedIncrements;
