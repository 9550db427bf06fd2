//! Preconditioned SGLD with an RMSprop diagonal preconditioner.

use super::{CentreRule, GradientNoise, Langevin, LangevinKernel, TunableKernel, ULA_SD_BIAS_SLOPE};
use crate::error::{Error, Result, check_positive};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::numeric::schedule::StepSize;
use ndarray::Array2;
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

impl TunableKernel for PsgldKernel {
    fn at_constant_step(&self, step: f64) -> Result<Self> {
        let settings = PsgldSettings { step_size: StepSize::Constant(step), ..self.settings };
        settings.validate()?;
        Ok(PsgldKernel { settings, v: Vec::new(), n_data: self.n_data })
    }

    /// `1/λ_max(G^{1/2} ∇²U G^{1/2})`, G the RMSprop preconditioner after 300 steps at the mode
    /// with a step `1e-12/λ_max` (so the chain stays put while V averages the squared gradient
    /// estimates there). At the mode the exact gradient vanishes, so V there holds the minibatch
    /// noise alone; in the whitened coordinates the chain's squared gradients also carry the
    /// posterior's score, about 1 per coordinate (`E ḡ² ≈ (V + 1)/N²`, see `psgld_metric`): G is
    /// capped at `1/(λ + 1/N)`. (With exact gradients V is 0 at the mode and G was `1/λ`: a centre
    /// step 550 times too small on a 62-datum regression, and a tuned run that did not mix.)
    fn centre_rule(&self) -> CentreRule {
        CentreRule::SettledMetric { damping: self.settings.damping }
    }

    /// 1: the Euler scheme of overdamped Langevin dynamics in the (slowly adapting) RMSprop
    /// metric, time η per iteration.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }

    /// As SGLD's, under the RMSprop metric G, scaled by the data size N the tuner tells.
    fn tell_data_size(&mut self, n_data: usize) {
        self.n_data = n_data as f64;
    }

    /// `2x/λ_max(Ĝ^{1/2} V Ĝ^{1/2})`, `x = `[`PSGLD_CORRECTION_TARGET`], with
    /// `Ĝ_i = 1/(λ + √(V_ii + 1)/N)`: G as RMSprop settles on whitened coordinates, where the
    /// squared gradient estimate averages the noise's variance `V_ii` plus about 1 (the
    /// posterior's).
    /// There the cubic series leaves at most 0.5 % of a variance uncorrected, with room for G's
    /// fluctuations below the clamp at [`METRIC_CORRECTION_MAX`](crate::METRIC_CORRECTION_MAX).
    ///
    /// `None` while N is unknown: `tune` tells it; a pSGLD given a noise by hand
    /// ([`Langevin::with_gradient_noise`](crate::Langevin::with_gradient_noise)) has no step
    /// limit (its correction is still clamped at `METRIC_CORRECTION_MAX` at every step). Until
    /// 2026-11-27 it took N = 1 there, a limit about N times too large.
    fn step_limit(&self, noise: &GradientNoise) -> Option<f64> {
        let top = psgld_noise_top(noise, self.n_data, self.settings.damping)?;
        Some(2.0 * PSGLD_CORRECTION_TARGET / top)
    }

    /// `r(x)/2`, `x = (h/2) λ_max(Ĝ^{1/2} V Ĝ^{1/2})`, with `r(x) = p(x)² − (1 − x)` the variance
    /// the cubic series `p` leaves along the top direction (0.5 % at x = 0.5, 9.8 % at x = 1).
    fn correction_residuals(&self, noise: Option<&GradientNoise>, steps: &[f64], out: &mut [f64]) {
        let damping = self.settings.damping;
        let Some(top) = noise.and_then(|g| psgld_noise_top(g, self.n_data, damping)) else {
            out.fill(0.0);
            return;
        };
        for (o, h) in out.iter_mut().zip(steps) {
            let x = 0.5 * h * top;
            let p = 1.0 - x / 2.0 - x * x / 8.0 - x * x * x / 16.0;
            *o = 0.5 * (p * p - (1.0 - x)).max(0.0);
        }
    }

    /// `Ĝ_max/4` (see [`step_limit`](Self::step_limit)): ULA's `h/4` under the metric, whose
    /// time step along coordinate i is `h G_i`; [`ULA_SD_BIAS_SLOPE`] without a gradient noise.
    fn exact_gradient_bias_slope(&self, noise: Option<&GradientNoise>) -> f64 {
        match noise {
            Some(g) => psgld_metric(g, self.n_data, self.settings.damping)
                .map_or(ULA_SD_BIAS_SLOPE, |m| ULA_SD_BIAS_SLOPE * m.into_iter().fold(0.0, f64::max)),
            None => ULA_SD_BIAS_SLOPE,
        }
    }

    /// On whitened coordinates, the damping λ raised to [`PSGLD_WHITENED_DAMPING`]` / N` if it
    /// is below: the RMS of the exact `ḡ = ∇U/N` there (the whitened posterior's score has
    /// variance about 1 per coordinate), so that G never exceeds the exact-gradient scheme's
    /// typical metric by more than a factor 2.
    fn fitted_to_scale(&self, n_data: usize, whitened: bool) -> Result<Option<(Self, String)>> {
        let n = n_data.max(1) as f64;
        let floor = PSGLD_WHITENED_DAMPING / n;
        if !whitened || self.settings.damping >= floor {
            return Ok(None);
        }
        let settings = PsgldSettings { damping: floor, ..self.settings };
        settings.validate()?;
        let why = format!("pSGLD damping raised from {:.1e} to 1/N = {floor:.3e} (whitened)", self.settings.damping);
        Ok(Some((PsgldKernel { settings, v: Vec::new(), n_data: n }, why)))
    }
}

/// The largest `x = (h/2) λ_max(Ĝ^{1/2} V Ĝ^{1/2})` [`tune`](crate::tune::tune) lets a
/// noise-corrected pSGLD run at (see its [`TunableKernel::step_limit`]): 1, where the cubic
/// series leaves 9.8 % of a variance along the top direction (0.5 % at x = 0.5), two thirds of
/// the clamp [`METRIC_CORRECTION_MAX`](crate::METRIC_CORRECTION_MAX). Below it `tune` adds that
/// residual to the bias it predicts ([`TunableKernel::correction_residuals`]), so a long run
/// takes a smaller x.
pub const PSGLD_CORRECTION_TARGET: f64 = 1.0;

/// The damping, times 1/N, that [`tune`](crate::tune::tune) gives a whitened pSGLD at least
/// ([`TunableKernel::fitted_to_scale`]): 1, the RMS of the exact `ḡ = ∇U/N` on whitened
/// coordinates.
///
/// Why: with exact or nearly exact gradients (n close to N, tiny N) RMSprop's V averages only the
/// posterior's score, which vanishes at the mode; when a chain crosses it V collapses and
/// `G = 1/(λ + √V)` jumps towards `1/λ` (the paper's λ = 1e-5: up to 10⁵ times its typical
/// value), and the kicks that follow make the pilots' errors erratic in the step. On a 62-datum
/// regression (exact gradients, N = 62) `tune` then chose a step of 3e-5 and the planned run of
/// 5 000 × 4 did not mix (R̂ 1.85, ESS 6); with λ = 1/N it chose 5e-3 and the run converged (R̂
/// 1.007, ESS 1 073). With minibatch noise `√V ≈ √(V_ii + 1)/N` is larger, and λ = 1/N only
/// bounds G at N, which the tuned step absorbs.
pub const PSGLD_WHITENED_DAMPING: f64 = 1.0;

/// `λ_max(Ĝ^{1/2} V Ĝ^{1/2})` with [`psgld_metric`]'s Ĝ (None if N is unknown or the
/// eigen-solver fails).
fn psgld_noise_top(noise: &GradientNoise, n_data: f64, damping: f64) -> Option<f64> {
    let v = noise.covariance();
    let d = noise.dim();
    let s: Vec<f64> = psgld_metric(noise, n_data, damping)?.into_iter().map(f64::sqrt).collect();
    let a = Array2::from_shape_fn((d, d), |(i, j)| s[i] * v[[i, j]] * s[j]);
    let ev = crate::numeric::linalg::symmetric_eigenvalues("pSGLD's metric gradient noise", &a).ok()?;
    Some(ev.iter().fold(0.0_f64, |m, l| m.max(*l)))
}

/// `Ĝ_i = 1/(λ + √(V_ii + 1)/N)`: pSGLD's RMSprop metric G on whitened coordinates
/// (`ḡ = ∇Ũ/N` with `E ḡ_i² ≈ (V_ii + 1)/N²`, the 1 from the whitened posterior's score).
/// `None` while N is unknown (0: a pSGLD not yet run nor tuned).
fn psgld_metric(noise: &GradientNoise, n_data: f64, damping: f64) -> Option<Vec<f64>> {
    if n_data.is_nan() || n_data <= 0.0 {
        return None;
    }
    let v = noise.covariance();
    Some((0..noise.dim()).map(|i| 1.0 / (damping + (v[[i, i]] + 1.0).sqrt() / n_data)).collect())
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
