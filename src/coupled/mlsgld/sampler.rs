//! The [`MlSgld`] type: its settings, base sampler, time step and start (its methods are in the
//! sibling files: construct, level, fixed, adaptive).

use crate::coupled::mlsgld::settings::MlSgldSettings;

/// Multilevel SGLD for `π(g)`: `E[g_L] = E[g_0] + Σ_{l=1}^{L} E[g_l − g_{l−1}]`, each term estimated
/// from independent samples, level l with time step `h_l = h₀ 2^(−l)` and horizon
/// `T_l = m(l + 1)h₀` (`s_l = T_l/h_l` steps) from θ₀.
///
/// One sample of level l ≥ 1: the fine path runs alone for `(T_l − T_{l−1})/h_l` steps, then fine
/// and coarse (the coarse from θ₀) run jointly for `T_{l−1}/h_{l−1}` coarse steps; each coarse step
/// uses the Gaussian `(ξ₁ + ξ₂)/√2` of the two fine steps it spans, and its minibatch as set by
/// [`MlCoupling`](crate::MlCoupling). Level 0 is a single path.
///
/// The paths are steps of a base sampler `S`, any [`SubsampledDiscretisation`](crate::SubsampledDiscretisation): SGLD (the
/// method of the paper; [`MlSgld::sgld`]), SGHMC, pSGLD or preconditioned SGLD on the
/// [`Langevin`](crate::Langevin) driver, with any subsampling estimator
/// ([`Minibatch`](crate::Minibatch) with or without replacement,
/// [`ControlVariate`](crate::ControlVariate), [`Taylor`](crate::Taylor)). Its constant time step
/// is h₀ (`γ` for SGLD, `√η` for SGHMC); level l steps a fraction `2^(−l)` of it. Fine minibatches
/// are drawn by the estimator's own law; every gradient and every state is checked, an error
/// naming the level, the sample, the path and the iteration ([`Error::Sample`](crate::Error::Sample)).
///
/// Samples are independent: they run on rayon with per-sample streams `(seed, [l, i])`, so results
/// do not depend on the number of threads.
///
/// Reference: M. B. Giles, T. Nagapetyan, L. Szpruch, S. J. Vollmer, K. C. Zygalakis, *Multilevel
/// Monte Carlo for scalable Bayesian computations*, arXiv:1609.06144 (2016/2017); M. B. Giles,
/// *Multilevel Monte Carlo path simulation*, Operations Research 56(3), 2008.
#[derive(Debug, Clone)]
pub struct MlSgld<S> {
    pub(super) settings: MlSgldSettings,
    pub(super) base: S,
    pub(super) h0: f64,
    pub(super) theta0: Vec<f64>,
}
