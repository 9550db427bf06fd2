//! The [`Sampler`] trait and the samplers.
//!
//! | sampler | update | gradient | reference |
//! |---|---|---|---|
//! | [`Sgld`] | `θ ← θ − γ∇Ũ(θ) + √(2γ) Z` | any [`GradientEstimator`](crate::GradientEstimator) | Welling & Teh (2011) |
//! | [`Lmc`] (ULA) | SGLD with the exact gradient | [`FullGradient`](crate::FullGradient) | Roberts & Tweedie (1996) |
//! | [`Sghmc`] | `v ← (1−α)v − η∇Ũ(θ) + √(2(α−β̂)η) Z`, `θ ← θ + v` | any | Chen, Fox & Guestrin (2014) |
//! | [`Mala`] | Langevin proposal + Metropolis–Hastings test | exact | Roberts & Tweedie (1996) |
//! | [`Hamcmc`] | `θ_t = θ_{t−M} − ε H_t ∇Ũ(θ_{t−M}) + √(2ε) S_t Z` (L-BFGS `H_t`) | any | Şimşekli et al. (2016) |
//! | [`Psgld`] | RMSprop-diagonal preconditioned SGLD | any | Li et al. (2016) |
//! | [`PreconditionedSgld`] | `θ ← θ − γ G∇Ũ(θ) + √(2γ) L Z`, `G = LLᵀ` constant | any | Patterson & Teh (2013) |
//!
//! SGLD, LMC, SGHMC, pSGLD and preconditioned SGLD are one generic sampler, the [`Langevin`]
//! driver, with different update kernels ([`LangevinKernel`]): the driver owns the state, the
//! estimator, the noise, the checks and the weights; a kernel is the update formula alone.
//! Every driver-based sampler is a [`Discretisation`], so Richardson–Romberg extrapolation and
//! multilevel SGLD can drive any of them.
//!
//! Any driver-based sampler can also run in constant whitened coordinates `θ = c + T φ`
//! ([`Whitening`], [`Langevin::with_whitening`]): the kernel sees `Tᵀ ∇Ũ(θ)` and the draws stay on
//! θ. With `T Tᵀ` the inverse Hessian at the mode (what [`tune`](crate::tune::tune) chooses by
//! default), a posterior of condition number 10¹⁰ looks like `N(0, I)` to the kernel.

/// The [`Sampler`] accessors of a sampler that keeps its position, its gradient estimate and its
/// iteration count in the named fields.
macro_rules! chain_accessors {
    ($theta:ident, $grad:ident, $k:ident) => {
        fn position(&self) -> &[f64] {
            &self.$theta
        }

        fn gradient(&self) -> Option<&[f64]> {
            Some(&self.$grad)
        }

        fn iteration(&self) -> u64 {
            self.$k
        }
    };
}

/// The [`Sampler`] cost accessors of a sampler whose work is that of its gradient estimator.
macro_rules! estimator_costs {
    ($estimator:ident) => {
        fn cost(&self) -> crate::cost::Cost {
            self.$estimator.cost()
        }

        fn setup_cost(&self) -> crate::cost::Cost {
            self.$estimator.setup_cost()
        }
    };
}

mod contour;
mod cyclical;
pub(crate) mod hamcmc;
mod kernel_tuning;
mod langevin;
mod mala;
mod noise;
mod precond;
mod psgld;
mod replica;
mod sghmc;
mod sgld;
mod sgnht;
mod splitting;
mod whitening;

pub use contour::{ContourKernel, Csgld, CsgldSettings};
pub use cyclical::{CyclicalKernel, CyclicalSettings, CyclicalSgld};
pub(crate) use hamcmc::hamcmc_update;
pub use hamcmc::{Hamcmc, HamcmcSettings};
pub use kernel_tuning::{CentreRule, TunableKernel, ULA_SD_BIAS_SLOPE};
pub use langevin::{Langevin, LangevinKernel};
pub use mala::{AUTO_DENSE_MAX_DIM, Mala, MalaSettings, Metric};
pub use noise::{GRADIENT_NOISE_BATCH, GradientNoise, METRIC_CORRECTION_MAX};
pub use precond::{PreconditionedKernel, PreconditionedSgld};
pub use psgld::{PSGLD_CORRECTION_TARGET, PSGLD_WHITENED_DAMPING, Psgld, PsgldKernel, PsgldSettings};
pub(crate) use psgld::{psgld_update, rmsprop_update};
pub use replica::{ReSgld, ReSgldSettings, ReplicaKernel};
pub use sghmc::{Sghmc, SghmcKernel, SghmcSettings};
pub(crate) use sgld::sgld_update;
pub use sgld::{Lmc, Sgld, SgldKernel, SgldSettings};
pub use sgnht::{Sgnht, SgnhtKernel, SgnhtSettings};
pub use splitting::{Baoab, BaoabKernel, KineticSettings, Ubu, UbuKernel};
pub use whitening::Whitening;

mod sampler;
pub(crate) use sampler::check_fraction;
pub use sampler::{Discretisation, Sampler, SubsampledDiscretisation};
