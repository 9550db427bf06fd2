//! The prior of an AD-adapted density ([`Prior`]): Gaussian, Laplace, flat, or the user's own
//! with its gradient ([`PriorFn`]).

use crate::error::{Result, check_positive};
use std::sync::Arc;

/// A user prior: writes `∇U₀(θ)` into its second argument (overwriting it) and returns `U₀(θ)`.
pub type PriorFn = dyn Fn(&[f64], &mut [f64]) -> f64 + Send + Sync;

/// A prior on the flat parameter vector θ, in closed form, in `f64`.
#[non_exhaustive]
#[derive(Clone)]
pub enum Prior {
    /// Independent `N(0, sd²)` coordinates: `U₀ = ‖θ‖² / (2 sd²)`.
    Gaussian {
        /// The prior standard deviation (> 0).
        sd: f64,
    },
    /// Independent Laplace(0, scale) coordinates: `U₀ = Σ|θⱼ| / scale`; the gradient at θⱼ = 0 is
    /// taken as 0 (the subgradient of smallest norm).
    Laplace {
        /// The scale b (> 0).
        scale: f64,
    },
    /// A flat (improper) prior: `U₀ = 0`. The posterior must be proper through the likelihood.
    Flat,
    /// A user prior.
    Custom(Arc<PriorFn>),
}

impl std::fmt::Debug for Prior {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prior::Gaussian { sd } => write!(f, "Gaussian {{ sd: {sd} }}"),
            Prior::Laplace { scale } => write!(f, "Laplace {{ scale: {scale} }}"),
            Prior::Flat => write!(f, "Flat"),
            Prior::Custom(_) => write!(f, "Custom(..)"),
        }
    }
}

impl Prior {
    /// Checks the prior's settings.
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) for a non-positive or
    /// non-finite `sd` or `scale`.
    pub fn validate(&self) -> Result<()> {
        match self {
            Prior::Gaussian { sd } => check_positive("prior sd", *sd),
            Prior::Laplace { scale } => check_positive("prior scale", *scale),
            Prior::Flat | Prior::Custom(_) => Ok(()),
        }
    }

    /// Writes `∇U₀(θ)` into `out` and returns `U₀(θ)`.
    pub fn eval(&self, theta: &[f64], out: &mut [f64]) -> f64 {
        match self {
            Prior::Gaussian { sd } => {
                let p = 1.0 / (sd * sd);
                let mut u = 0.0;
                for (o, t) in out.iter_mut().zip(theta) {
                    *o = p * t;
                    u += t * t;
                }
                0.5 * p * u
            }
            Prior::Laplace { scale } => {
                let mut u = 0.0;
                for (o, t) in out.iter_mut().zip(theta) {
                    *o = if *t > 0.0 {
                        1.0 / scale
                    } else if *t < 0.0 {
                        -1.0 / scale
                    } else {
                        0.0
                    };
                    u += t.abs();
                }
                u / scale
            }
            Prior::Flat => {
                out.fill(0.0);
                0.0
            }
            Prior::Custom(f) => f(theta, out),
        }
    }

    /// `∇²U₀(θ) v` where it is known in closed form (Gaussian: `v / sd²`; Laplace and flat: 0
    /// away from θⱼ = 0); `None` for a custom prior.
    pub fn hvp(&self, v: &[f64], out: &mut [f64]) -> Option<()> {
        match self {
            Prior::Gaussian { sd } => {
                let p = 1.0 / (sd * sd);
                for (o, x) in out.iter_mut().zip(v) {
                    *o = p * x;
                }
                Some(())
            }
            Prior::Laplace { .. } | Prior::Flat => {
                out.fill(0.0);
                Some(())
            }
            Prior::Custom(_) => None,
        }
    }
}
