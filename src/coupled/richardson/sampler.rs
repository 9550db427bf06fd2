//! The [`RichardsonRomberg`] wrapper: its noise coupling, base sampler and constructors (its
//! runs are `pairs.rs`, its output `output.rs`, its bias check `bias.rs`).

use crate::gradient::Minibatch;
use crate::samplers::{Discretisation, Sghmc, Sgld};
use serde::{Deserialize, Serialize};

/// How the Gaussian increments of the two chains are related.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NoiseCoupling {
    /// `Zᴬ_{k+1} = (Zᴮ_{2k+1} + Zᴮ_{2k+2}) / √2` (eq. 7): one Brownian path for both chains. The
    /// variance-optimal choice (Durmus et al. 2016, Theorem 1) and the default.
    #[default]
    Shared,
    /// Independent increments. Same bias, much larger variance: for comparisons only.
    Independent,
}

/// Richardson–Romberg extrapolation of a first-order discretisation `S` (SGLD → SGRRLD,
/// SGHMC → SGRRHMC), Durmus, Şimşekli, Moulines, Badeau & Richard (2016).
///
/// Two chains start from the same θ₀: chain A with time steps `h_k` (the sampler's schedule) and
/// chain B with `h_k/2`, two B steps per A step, so both reach the same time horizon. For SGLD:
///
/// - B: `θᴮ_{2k+1} = θᴮ_{2k} − (γ_{k+1}/2)∇Ũ(θᴮ_{2k}) + √γ_{k+1} Zᴮ_{2k+1}`,
///   `θᴮ_{2k+2} = θᴮ_{2k+1} − (γ_{k+1}/2)∇Ũ(θᴮ_{2k+1}) + √γ_{k+1} Zᴮ_{2k+2}` (the paper's eq. 5
///   evaluates the first gradient at θ_{2k+1}: a typo; it is θ_{2k});
/// - A: `θᴬ_{k+1} = θᴬ_k − γ_{k+1}∇Ũ(θᴬ_k) + √(2γ_{k+1}) Zᴬ_{k+1}`, `Zᴬ_{k+1} = (Zᴮ_{2k+1} + Zᴮ_{2k+2})/√2`;
///
/// every gradient from an independent minibatch of the same size (both chains are clones of one
/// sampler, so they share the estimator's law). The estimator (eq. 6) is the signed measure
///
/// `π̂ᴿ(f) = (Σ_k γ_{k+1})⁻¹ Σ_k γ_{k+1} [f(θᴮ_{2k−1}) + f(θᴮ_{2k}) − f(θᴬ_k)]`,
///
/// i.e. `2·π̂_{γ/2} − π̂_γ`, whose bias is O(γ²) where SGLD's is O(γ). Means and covariances of
/// the signed measure extrapolate the first and second moments, then combine them.
///
/// The two chains are independent given the noise: each replays the shared increments from its
/// own copy of one noise stream, so they run on two threads (rayon) with results bit-identical to
/// a serial run. Any gradient estimator works, so SGRRLD with control variates comes for free.
#[derive(Debug, Clone)]
pub struct RichardsonRomberg<S> {
    pub(super) base: S,
    pub(super) coupling: NoiseCoupling,
}

/// SGRRLD: Richardson–Romberg extrapolated SGLD.
pub type Sgrrld<E = Minibatch> = RichardsonRomberg<Sgld<E>>;
/// SGRRHMC: Richardson–Romberg extrapolated SGHMC (the momentum noise shared the same way).
pub type Sgrrhmc<E = Minibatch> = RichardsonRomberg<Sghmc<E>>;

impl<S: Discretisation> RichardsonRomberg<S> {
    /// Extrapolation of `base` (whose schedule gives chain A's steps) with shared increments.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::RichardsonRomberg;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// // SGRRLD: SGLD at γ and γ/2 with shared noise, extrapolated to 2π̂_{γ/2} − π̂_γ.
    /// let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?);
    /// let out = Runner::new(&model, &rr).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert_eq!(out.estimate.mean()?.len(), 2);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(base: S) -> Self {
        RichardsonRomberg { base, coupling: NoiseCoupling::Shared }
    }

    /// The same with the given coupling (use [`NoiseCoupling::Independent`] only to compare).
    pub fn with_coupling(base: S, coupling: NoiseCoupling) -> Self {
        RichardsonRomberg { base, coupling }
    }

    /// The underlying one-step method.
    pub fn base(&self) -> &S {
        &self.base
    }

    /// The noise coupling.
    pub fn coupling(&self) -> NoiseCoupling {
        self.coupling
    }
}
