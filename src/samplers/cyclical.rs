//! Cyclical SG-MCMC (cSGLD): cosine step-size cycles with exploration and sampling stages.

use super::{Langevin, LangevinKernel};
use crate::error::{Error, Result, check_positive};
use crate::gradient::{GradientEstimator, Minibatch};
use serde::{Deserialize, Serialize};

/// Settings of [`CyclicalSgld`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CyclicalSettings {
    /// The largest step size `γ₀` (at the start of each cycle).
    pub step_size0: f64,
    /// The cycle length `L` in iterations (Zhang et al.'s `⌈K/M⌉` for K iterations in M cycles).
    pub cycle_len: u64,
    /// The fraction `β ∈ [0, 1)` of each cycle spent exploring (SGD steps, draws not kept).
    /// Zhang et al. use 0.8 to 0.94 for deep networks.
    pub exploration: f64,
}

impl Default for CyclicalSettings {
    /// γ₀ = 1e-4, four cycles over the default run of 10 000 iterations (`L` = 2 500),
    /// exploration 0.8 (Zhang et al.'s smallest).
    fn default() -> Self {
        CyclicalSettings::new(1e-4, 10_000, 4, 0.8)
    }
}

impl CyclicalSettings {
    /// `K` iterations in `cycles` cycles (`L = ⌈K / cycles⌉`), largest step `γ₀`, exploration
    /// fraction `β`.
    pub fn new(step_size0: f64, n_iter: u64, cycles: u64, exploration: f64) -> Self {
        CyclicalSettings { step_size0, cycle_len: n_iter.div_ceil(cycles.max(1)), exploration }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        check_positive("step_size0", self.step_size0)?;
        if self.cycle_len == 0 {
            return Err(Error::invalid("cycle_len", self.cycle_len, "must be >= 1"));
        }
        if !(self.exploration >= 0.0 && self.exploration < 1.0) {
            return Err(Error::invalid("exploration", self.exploration, "must be in [0, 1) (no draw would be kept)"));
        }
        Ok(())
    }

    /// `r(k) = ((k − 1) mod L) / L`, the position of the 1-based iteration k in its cycle.
    #[inline]
    pub fn phase(&self, k: u64) -> f64 {
        (k.max(1) - 1).rem_euclid(self.cycle_len) as f64 / self.cycle_len as f64
    }

    /// `γ_k = γ₀/2 · (cos(π r(k)) + 1)`.
    #[inline]
    pub fn step_size(&self, k: u64) -> f64 {
        0.5 * self.step_size0 * ((std::f64::consts::PI * self.phase(k)).cos() + 1.0)
    }

    /// Whether step k is a sampling step (`r(k) ≥ β`): SGLD with noise, its draw kept.
    #[inline]
    pub fn is_sampling(&self, k: u64) -> bool {
        self.phase(k) >= self.exploration
    }
}

/// The cSGLD update: exploration steps `θ ← θ − γ_k ∇Ũ(θ)`, sampling steps
/// `θ ← θ − γ_k ∇Ũ(θ) + √(2γ_k) z` (time step `fraction × γ_k`). The kernel of [`CyclicalSgld`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CyclicalKernel {
    settings: CyclicalSettings,
}

impl LangevinKernel for CyclicalKernel {
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size(k)
    }

    /// 1 for a draw left by a sampling step, 0 (not kept) for the start and exploration steps.
    #[inline]
    fn weight(&self, k: u64) -> f64 {
        if k >= 1 && self.settings.is_sampling(k) { 1.0 } else { 0.0 }
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.settings.step_size(k);
        if self.settings.is_sampling(k) {
            let s = (2.0 * h).sqrt();
            for ((t, g), z) in theta.iter_mut().zip(grad).zip(z) {
                *t += s * z - h * g;
            }
        } else {
            for (t, g) in theta.iter_mut().zip(grad) {
                *t -= h * g;
            }
        }
    }
}

/// Cyclical stochastic gradient Langevin dynamics (cSGLD).
///
/// Step size, for the 1-based iteration k, cycle length `L` and `r(k) = ((k − 1) mod L) / L`:
///
/// `γ_k = γ₀/2 · (cos(π r(k)) + 1)`.
///
/// Each cycle starts with an **exploration** stage (`r(k) < β`): stochastic gradient descent
/// steps `θ_k = θ_{k−1} − γ_k ∇Ũ(θ_{k−1})` with large steps that move between modes; then a
/// **sampling** stage (`r(k) ≥ β`): SGLD steps `θ_k = θ_{k−1} − γ_k ∇Ũ(θ_{k−1}) + √(2γ_k) Z_k`.
/// Only the draws of sampling steps are kept, with equal weights (as in the paper); the run's
/// trace holds no exploration draw. `burn_in` still applies on top.
///
/// It is the [`Langevin`] driver with the [`CyclicalKernel`]: any gradient estimator plugs in.
/// (A cosine-cycled step for other samplers, without the stages: [`StepSize::Cyclical`](crate::StepSize::Cyclical).)
///
/// Reference: R. Zhang, C. Li, J. Zhang, C. Chen, A. G. Wilson, *Cyclical stochastic gradient
/// MCMC for Bayesian deep learning*, ICLR 2020 (Algorithm 1, eq. 1).
pub type CyclicalSgld<E = Minibatch> = Langevin<CyclicalKernel, E>;

impl<E: GradientEstimator> Langevin<CyclicalKernel, E> {
    /// cSGLD with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{CyclicalSettings, CyclicalSgld};
    ///
    /// let model = LogisticRegression::synthetic(10_000, 5, 10.0, 1)?;
    /// // 4 000 iterations in 4 cycles, γ₀ = 2e-5, the first 60 % of each cycle exploring.
    /// let csgld = CyclicalSgld::new(CyclicalSettings::new(2e-5, 4_000, 4, 0.6), Minibatch::new(100))?;
    /// let out = Runner::new(&model, &csgld).start(&[0.0; 5]).settings(RunSettings { n_iter: 4_000, burn_in: 0, ..Default::default() }).run()?;
    /// // Only sampling-stage draws are kept: 40 % of each 1 000-step cycle.
    /// assert_eq!(out.estimate.samples(0).unwrap().len(), 1_600);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: CyclicalSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Langevin::with_kernel(CyclicalKernel { settings }, estimator))
    }

    /// The settings.
    pub fn settings(&self) -> &CyclicalSettings {
        &self.kernel().settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cosine schedule and both kinds of step by hand: L = 10 iterations per cycle, the first
    /// half exploration (gradient only, not kept), the second sampling (SGLD, kept).
    #[test]
    fn the_kernel_makes_the_update_of_its_docs() {
        let settings = CyclicalSettings::new(0.2, 20, 2, 0.5);
        let mut k = CyclicalKernel { settings };
        assert!((settings.step_size(1) - 0.2).abs() < 1e-15);
        let g3 = 0.1 * ((std::f64::consts::PI * 0.2).cos() + 1.0);
        assert!((settings.step_size(3) - g3).abs() < 1e-15 && (settings.step_size(13) - g3).abs() < 1e-15);
        let mut theta = [1.0];
        k.advance(&mut theta, &[2.0], 3, 1.0, &[0.7]);
        assert!((theta[0] - (1.0 - g3 * 2.0)).abs() < 1e-15, "exploration: no noise");
        assert_eq!(k.weight(3), 0.0);
        let g8 = 0.1 * ((std::f64::consts::PI * 0.7).cos() + 1.0);
        let mut theta = [1.0];
        k.advance(&mut theta, &[2.0], 8, 1.0, &[0.7]);
        assert!((theta[0] - (1.0 - g8 * 2.0 + (2.0 * g8).sqrt() * 0.7)).abs() < 1e-15);
        assert_eq!(k.weight(8), 1.0);
    }
}
