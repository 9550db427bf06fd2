//! Preconditioned SGLD with an RMSprop diagonal preconditioner.

use super::{Langevin, LangevinKernel};
use crate::error::{Error, Result, check_positive};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::numeric::schedule::StepSize;
use serde::{Deserialize, Serialize};

/// Settings of [`Psgld`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PsgldSettings {
    /// The step-size schedule `γ_k`. Default `Constant(1e-4)`.
    pub step_size: StepSize,
    /// RMSprop decay `β ∈ [0, 1)` of the squared-gradient average. Default 0.99.
    pub decay: f64,
    /// Damping `λ > 0` in `G = diag(1/(λ + √V))`. Default 1e-5.
    pub damping: f64,
}

impl Default for PsgldSettings {
    fn default() -> Self {
        PsgldSettings { step_size: StepSize::Constant(1e-4), decay: 0.99, damping: 1e-5 }
    }
}

impl PsgldSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.step_size.validate("step_size")?;
        if !(0.0..1.0).contains(&self.decay) {
            return Err(Error::invalid("decay", self.decay, "must be in [0, 1)"));
        }
        check_positive("damping", self.damping)
    }
}

/// The pSGLD update with the RMSprop average `V`, updated from every fresh gradient: the
/// kernel of [`Psgld`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PsgldKernel {
    settings: PsgldSettings,
    v: Vec<f64>,
    n_data: f64,
}

impl LangevinKernel for PsgldKernel {
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k)
    }

    fn bind(&mut self, dim: usize, n_data: usize) -> Result<()> {
        self.n_data = n_data as f64;
        self.v.clear();
        self.v.resize(dim, 0.0);
        Ok(())
    }

    /// `V ← βV + (1 − β) ḡ²` with `ḡ = ∇Ũ/N`; the first gradient sets `V = (1 − β) ḡ²`.
    #[inline]
    fn observe_gradient(&mut self, grad: &[f64], first: bool) {
        rmsprop_update(&mut self.v, grad, self.n_data, self.settings.decay, first);
    }

    /// `c = f h/2` under the metric G: the minibatch noise adds `h² G V G` to the step's noise
    /// `2h G`.
    #[inline]
    fn gradient_noise_weight(&self, k: u64, fraction: f64) -> Option<f64> {
        Some(0.5 * fraction * self.settings.step_size.at(k))
    }

    /// G, from the current V.
    #[inline]
    fn gradient_noise_metric(&self, out: &mut [f64]) -> bool {
        for (o, v) in out.iter_mut().zip(&self.v) {
            *o = 1.0 / (self.settings.damping + v.sqrt());
        }
        true
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.settings.step_size.at(k);
        psgld_update(theta, grad, z, &self.v, h, self.settings.damping);
    }
}

/// RMSprop's `V ← βV + (1 − β) ḡ²`, `ḡ = ∇Ũ/N` (`V = (1 − β) ḡ²` on the `first` gradient), on
/// a slice (the kernel's, and each worker's in distributed matrix factorisation).
#[inline]
pub(crate) fn rmsprop_update(v: &mut [f64], grad: &[f64], n_data: f64, decay: f64, first: bool) {
    let b = if first { 0.0 } else { decay };
    let c = 1.0 - decay;
    for (v, g) in v.iter_mut().zip(grad) {
        let gb = g / n_data;
        *v = b * *v + c * gb * gb;
    }
}

/// The pSGLD update `θ ← θ − h G ∇Ũ + √(2h G) ⊙ z`, `G = 1/(λ + √V)`, on a slice.
#[inline]
pub(crate) fn psgld_update(theta: &mut [f64], grad: &[f64], z: &[f64], v: &[f64], h: f64, damping: f64) {
    for (((t, g), z), v) in theta.iter_mut().zip(grad).zip(z).zip(v) {
        let gi = 1.0 / (damping + v.sqrt());
        *t += (2.0 * h * gi).sqrt() * z - h * gi * g;
    }
}

/// Preconditioned SGLD (pSGLD) with the RMSprop preconditioner of Li, Chen, Carlson & Carin
/// (2016):
///
/// `V_k = β V_{k−1} + (1 − β) ḡ_k ⊙ ḡ_k`, `ḡ_k = ∇Ũ(θ_k)/N`, `G_k = diag(1 / (λ + √V_k))`,
/// `θ_{k+1} = θ_k − γ_{k+1} G_k ∇Ũ(θ_k) + √(2γ_{k+1} G_k) ⊙ Z`.
///
/// The correction term `Γ(θ) = ∇·G(θ)` of a position-dependent preconditioner is **dropped**, as
/// in the paper's practical algorithm (its authors report it negligible for β close to 1); that
/// leaves a bias that does not vanish with the step size. V starts at `(1 − β) ḡ₀²` from the
/// gradient at θ₀. Samples are weighted by `γ_{k+1}`.
///
/// With a [`GradientNoise`](crate::GradientNoise) V
/// ([`with_gradient_noise`](Langevin::with_gradient_noise); [`tune`](crate::tune) measures one
/// by default) the increment is shaped as `S Z`, `S Sᵀ ≈ I − (γ/2) G^{1/2} V G^{1/2}` (a cubic
/// series, per step with the current G), so that the step's noise with the minibatch noise
/// `γ² G V G` is the exact-gradient scheme's `2γ G`; the correction is complete up to
/// `(γ/2) max G · λ_max(V) = 1` and partial above (see
/// [`METRIC_CORRECTION_MAX`](crate::METRIC_CORRECTION_MAX)).
///
/// It is the [`Langevin`] driver with the [`PsgldKernel`], so Richardson–Romberg and multilevel
/// SGLD can drive it (each coupled path keeps its own V).
///
/// Reference: C. Li, C. Chen, D. Carlson, L. Carin, *Preconditioned stochastic gradient
/// Langevin dynamics for deep neural networks*, AAAI 2016.
pub type Psgld<E = Minibatch> = Langevin<PsgldKernel, E>;

impl<E: GradientEstimator> Langevin<PsgldKernel, E> {
    /// pSGLD with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{StepSize};
    /// use sgmcmc::{Psgld, PsgldSettings};
    ///
    /// let model = LogisticRegression::synthetic(10_000, 5, 10.0, 1)?;
    /// let settings = PsgldSettings { step_size: StepSize::Constant(1e-7), ..Default::default() };
    /// let psgld = Psgld::new(settings, Minibatch::new(100))?;
    /// let out = Runner::new(&model, &psgld).start(&[0.0; 5]).settings(RunSettings { n_iter: 3_000, burn_in: 1_000, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: PsgldSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Langevin::with_kernel(PsgldKernel { settings, v: Vec::new(), n_data: 0.0 }, estimator))
    }

    /// The settings.
    pub fn settings(&self) -> &PsgldSettings {
        &self.kernel().settings
    }

    /// Sets the data size the kernel's V is scaled by before `init` (which sets it again), for
    /// the tuner's step limit.
    pub(crate) fn with_n_data(mut self, n_data: f64) -> Self {
        self.kernel_mut().n_data = n_data;
        self
    }

    /// The data size of the kernel's scaling `ḡ = ∇Ũ/N` (0, unknown, until bound by a run or
    /// told by `tune`).
    pub(crate) fn n_data(&self) -> f64 {
        self.kernel().n_data
    }

    /// The current diagonal preconditioner entries `G_k`.
    pub fn preconditioner(&self) -> impl Iterator<Item = f64> + '_ {
        let k = self.kernel();
        k.v.iter().map(|v| 1.0 / (k.settings.damping + v.sqrt()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RMSprop's average and the pSGLD step against Li et al.'s update by hand: the first
    /// gradient sets `V = (1 − β) ḡ²`, the next averages, and the step uses `G = 1/(λ + √V)`.
    #[test]
    fn the_kernel_makes_the_update_of_its_docs() {
        let settings = PsgldSettings { step_size: StepSize::Constant(0.01), decay: 0.9, damping: 1e-3 };
        let mut k = PsgldKernel { settings, v: Vec::new(), n_data: 0.0 };
        k.bind(2, 10).unwrap();
        k.observe_gradient(&[20.0, -5.0], true);
        let v1 = [0.1 * 4.0, 0.1 * 0.25];
        assert!((k.v[0] - v1[0]).abs() < 1e-15 && (k.v[1] - v1[1]).abs() < 1e-15);
        k.observe_gradient(&[10.0, 0.0], false);
        let v2 = [0.9 * v1[0] + 0.1 * 1.0, 0.9 * v1[1]];
        assert!((k.v[0] - v2[0]).abs() < 1e-15 && (k.v[1] - v2[1]).abs() < 1e-15);
        let mut g = [0.0; 2];
        assert!(k.gradient_noise_metric(&mut g));
        let gi = [1.0 / (1e-3 + v2[0].sqrt()), 1.0 / (1e-3 + v2[1].sqrt())];
        assert!((g[0] - gi[0]).abs() < 1e-12 && (g[1] - gi[1]).abs() < 1e-12);
        let mut theta = [1.0, 2.0];
        k.advance(&mut theta, &[10.0, 0.0], 0, 1.0, &[0.5, -1.0]);
        let want = [1.0 - 0.01 * gi[0] * 10.0 + (2.0 * 0.01 * gi[0]).sqrt() * 0.5, 2.0 - (2.0 * 0.01 * gi[1]).sqrt()];
        assert!((theta[0] - want[0]).abs() < 1e-12 && (theta[1] - want[1]).abs() < 1e-12);
    }
}
