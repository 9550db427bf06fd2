//! Kinetic Langevin splittings for stochastic gradients: BAOAB and UBU.
//!
//! Both integrate underdamped Langevin dynamics with unit mass and friction γ per unit time,
//! `dθ = v dt`, `dv = −∇U(θ) dt − γ v dt + √(2γ) dW`, with one gradient estimate per step; their
//! stationary laws are `O(h²)` from π with exact gradients (SGHMC's Euler-type update is
//! `O(h)`), and BAOAB's position marginal is exact on a Gaussian target at any stable step.

use super::{CentreRule, Langevin, LangevinKernel, TunableKernel};
use crate::error::{Error, Result};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::numeric::schedule::StepSize;
use serde::{Deserialize, Serialize};

/// Settings of [`Baoab`] and [`Ubu`]: the time step `h_k` and the friction γ per unit time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KineticSettings {
    /// The time step schedule `h_k` (unit mass). Default `Constant(1e-3)`.
    pub step_size: StepSize,
    /// The friction γ > 0 per unit time. Default 1 (suits whitened coordinates, where the
    /// posterior's frequencies are about 1; critical damping of a frequency ω is γ = 2ω).
    pub friction: f64,
}

impl Default for KineticSettings {
    fn default() -> Self {
        KineticSettings { step_size: StepSize::Constant(1e-3), friction: 1.0 }
    }
}

impl KineticSettings {
    /// A constant time step `h` and friction γ.
    pub fn constant(h: f64, friction: f64) -> Self {
        KineticSettings { step_size: StepSize::Constant(h), friction }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.step_size.validate("step_size")?;
        if !(self.friction.is_finite() && self.friction > 0.0) {
            return Err(Error::invalid("friction", self.friction, "must be finite and > 0"));
        }
        Ok(())
    }
}

/// The BAOAB update (the kernel of [`Baoab`]), written with one gradient per step: the final
/// half kick of a step and the first of the next are one kick at the same position, so a step
/// from `θ_k` (gradient `g_k` there) is
/// `v ← v − (h_{k−1}/2 + h_k/2) g_k` (only `h_k/2` at the first step), `θ ← θ + (h/2) v`,
/// `v ← e^{−γh} v + √(1 − e^{−2γh}) z`, `θ ← θ + (h/2) v`. The positions are exactly BAOAB's;
/// the kept velocity is the one before its last half kick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaoabKernel {
    settings: KineticSettings,
    v: Vec<f64>,
    /// The half kick the previous step still owes (0 after `bind`).
    half: f64,
}

impl LangevinKernel for BaoabKernel {
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k)
    }

    /// The velocity starts at 0, with no half kick owed.
    fn bind(&mut self, dim: usize, _n_data: usize) -> Result<()> {
        self.v.clear();
        self.v.resize(dim, 0.0);
        self.half = 0.0;
        Ok(())
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.settings.step_size.at(k);
        let kick = self.half + 0.5 * h;
        self.half = 0.5 * h;
        let gh = self.settings.friction * h;
        let (keep, s) = ((-gh).exp(), (-(-2.0 * gh).exp_m1()).sqrt());
        let drift = 0.5 * h;
        for (((t, v), g), z) in theta.iter_mut().zip(self.v.iter_mut()).zip(grad).zip(z) {
            let mut w = *v - kick * g;
            let mut x = *t + drift * w;
            w = keep * w + s * z;
            x += drift * w;
            *v = w;
            *t = x;
        }
    }
}

impl TunableKernel for BaoabKernel {
    fn at_constant_step(&self, step: f64) -> Result<Self> {
        let settings = KineticSettings { step_size: StepSize::Constant(step), ..self.settings };
        settings.validate()?;
        Ok(BaoabKernel { settings, v: Vec::new(), half: 0.0 })
    }

    /// `h = 1/√λ_max` (the leapfrog limit is `h √λ_max < 2`).
    fn centre_rule(&self) -> CentreRule {
        CentreRule::InverseSqrtLambdaMax
    }

    /// 1: at a fixed friction per unit time, each iteration advances the dynamics by h.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }
}

/// The BAOAB splitting of kinetic Langevin dynamics with stochastic gradients.
///
/// Update (unit mass, friction γ, time step h, `Z ~ N(0, I_d)`, `∇Ũ` the estimator's gradient):
///
/// B `v ← v − (h/2)∇Ũ(θ)`, A `θ ← θ + (h/2)v`, O `v ← e^{−γh} v + √(1 − e^{−2γh}) Z`,
/// A `θ ← θ + (h/2)v`, B `v ← v − (h/2)∇Ũ(θ)`,
///
/// with one gradient estimate per step (the last B of a step and the first of the next share
/// the position: see [`BaoabKernel`]). The velocity starts at 0 and is kept between steps. With
/// exact gradients the stationary law is `O(h²)` from π, and on a Gaussian target its position
/// marginal is exact at any stable step (`h √λ_max < 2`); a minibatch gradient adds its noise
/// `h² V` to the velocity's. Samples are weighted by the time step.
///
/// It is the [`Langevin`] driver with the [`BaoabKernel`]: estimators, whitening, checkpoints,
/// coupled methods (Richardson–Romberg), [`tune`](crate::tune::tune) and
/// [`Sample`](crate::Sample) all apply.
///
/// References: B. Leimkuhler and C. Matthews, *Rational construction of stochastic numerical
/// methods for molecular sampling*, AMRX 2013; for stochastic gradients, N. K. Chada,
/// B. Leimkuhler, D. Paulin and P. A. Whalley, *Unbiased kinetic Langevin Monte Carlo with
/// inexact gradients*, arXiv 2311.05025.
pub type Baoab<E = Minibatch> = Langevin<BaoabKernel, E>;

impl<E: GradientEstimator> Langevin<BaoabKernel, E> {
    /// BAOAB with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{Baoab, KineticSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let baoab = Baoab::new(KineticSettings::constant(0.01, 20.0), Minibatch::new(100))?;
    /// let out = Runner::new(&model, &baoab).start(&[0.0; 2]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: KineticSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Langevin::with_kernel(BaoabKernel { settings, v: Vec::new(), half: 0.0 }, estimator))
    }

    /// The settings.
    pub fn settings(&self) -> &KineticSettings {
        &self.kernel().settings
    }

    /// The current velocity (before the half kick the next step makes first).
    pub fn velocity(&self) -> &[f64] {
        &self.kernel().v
    }
}

/// The Gaussian increments of the exact flow `U(h)` of `dθ = v dt`, `dv = −γv dt + √(2γ) dW`:
/// `θ ← θ + φ v + a Z₁ + b Z₂`, `v ← η v + c Z₁`, with `η = e^{−γh}`, `φ = (1 − η)/γ`,
/// `c² = 1 − η²`, `a = Cov(θ, v)/c` (`Cov = (1 − η)²/γ`), `b² = Var θ − a²`
/// (`Var θ = (2γh − 3 + 4η − η²)/γ²`, by its series for small γh).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FlowU {
    pub(crate) eta: f64,
    pub(crate) phi: f64,
    pub(crate) a: f64,
    pub(crate) b: f64,
    pub(crate) c: f64,
}

impl FlowU {
    pub(crate) fn new(h: f64, gamma: f64) -> Self {
        let x = gamma * h;
        let em1 = (-x).exp_m1();
        let eta = 1.0 + em1;
        let phi = -em1 / gamma;
        let c2 = -(-2.0 * x).exp_m1();
        let cov = em1 * em1 / gamma;
        let var_theta = flight_variance(x, x < 0.02) / (gamma * gamma);
        let c = c2.sqrt();
        let a = cov / c;
        let b = (var_theta - a * a).max(0.0).sqrt();
        FlowU { eta, phi, a, b, c }
    }
}

/// `2x − 3 + 4e^{−x} − e^{−2x}` (γ² times θ's variance over a flow of `x = γh`), directly as
/// `2x + 2(e^{−x} − 1) − (e^{−x} − 1)²` or by its series (below x = 0.02 the direct form loses
/// four digits; the series' truncation there is 1e−13).
fn flight_variance(x: f64, series: bool) -> f64 {
    if series {
        let x3 = x * x * x;
        x3 * (2.0 / 3.0 + x * (-0.5 + x * (7.0 / 30.0 + x * (-1.0 / 12.0 + x * (31.0 / 1260.0 - x / 160.0)))))
    } else {
        let em1 = (-x).exp_m1();
        2.0 * x + 2.0 * em1 - em1 * em1
    }
}

/// The UBU update (the kernel of [`Ubu`]) from the position where the gradient is evaluated:
/// `v ← v − h ∇Ũ(θ)`, then the exact flow `U(h)` of the OU part (Gaussian increments of θ and
/// v) with two normals per coordinate (`z[j]`, `z[d + j]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UbuKernel {
    settings: KineticSettings,
    v: Vec<f64>,
}

impl LangevinKernel for UbuKernel {
    #[inline]
    fn time_step(&self, k: u64) -> f64 {
        self.settings.step_size.at(k)
    }

    /// The velocity starts at 0.
    fn bind(&mut self, dim: usize, _n_data: usize) -> Result<()> {
        self.v.clear();
        self.v.resize(dim, 0.0);
        Ok(())
    }

    /// Two: `U(h)` moves θ and v by correlated Gaussians.
    fn normals_per_coordinate(&self) -> usize {
        2
    }

    /// The flow's noise over a step of H is the two half-steps' noises carried through the
    /// second flow: `ξ_v = η_{H/2} ξ_v¹ + ξ_v²`, `ξ_θ = ξ_θ¹ + φ_{H/2} ξ_v¹ + ξ_θ²` (exactly: the
    /// OU flow is linear), which in the step's own normals is `z_a = ξ_v/c_H`,
    /// `z_b = (ξ_θ − a_H z_a)/b_H` — standard normal and independent, since `(ξ_θ, ξ_v)` has the
    /// law of the flow's noise over H.
    fn combine_increments(&self, k: u64, fraction: f64, z1: &[f64], z2: &[f64], coarse: &mut [f64]) {
        let h = fraction * self.settings.step_size.at(k);
        let (half, whole) = (FlowU::new(0.5 * h, self.settings.friction), FlowU::new(h, self.settings.friction));
        let d = coarse.len() / 2;
        for j in 0..d {
            let (v1, v2) = (half.c * z1[j], half.c * z2[j]);
            let (t1, t2) = (half.a * z1[j] + half.b * z1[d + j], half.a * z2[j] + half.b * z2[d + j]);
            let (xi_v, xi_t) = (half.eta * v1 + v2, t1 + half.phi * v1 + t2);
            let za = xi_v / whole.c;
            coarse[j] = za;
            coarse[d + j] = if whole.b > 0.0 { (xi_t - whole.a * za) / whole.b } else { 0.0 };
        }
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.settings.step_size.at(k);
        let u = FlowU::new(h, self.settings.friction);
        let d = theta.len();
        let (z1, z2) = z.split_at(d);
        for ((((t, v), g), z1), z2) in theta.iter_mut().zip(self.v.iter_mut()).zip(grad).zip(z1).zip(z2) {
            let w = *v - h * g;
            *t += u.phi * w + u.a * z1 + u.b * z2;
            *v = u.eta * w + u.c * z1;
        }
    }
}

impl TunableKernel for UbuKernel {
    fn at_constant_step(&self, step: f64) -> Result<Self> {
        let settings = KineticSettings { step_size: StepSize::Constant(step), ..self.settings };
        settings.validate()?;
        Ok(UbuKernel { settings, v: Vec::new() })
    }

    /// `h = 1/√λ_max`, as BAOAB.
    fn centre_rule(&self) -> CentreRule {
        CentreRule::InverseSqrtLambdaMax
    }

    /// 1: at a fixed friction per unit time, each iteration advances the dynamics by h.
    fn mixing_exponent(&self) -> Option<f64> {
        Some(1.0)
    }
}

/// The UBU splitting of kinetic Langevin dynamics with stochastic gradients.
///
/// Update (unit mass, friction γ, time step h): `U(h/2) B(h) U(h/2)`, where B is the kick
/// `v ← v − h ∇Ũ(θ)` and U the exact flow of `dθ = v dt`, `dv = −γ v dt + √(2γ) dW` (Gaussian
/// increments of θ and v, correlated: two normals per coordinate). Run as `B(h) U(h)` from the
/// position where the gradient is evaluated (two half flows make one flow): the draws are UBU's
/// midpoints, one gradient per step. With exact gradients its stationary law is `O(h²)` from π
/// (strong order 2); a minibatch gradient adds `h² V` to the velocity's noise. The velocity starts
/// at 0. Samples are weighted by the time step.
///
/// It is the [`Langevin`] driver with the [`UbuKernel`]: estimators, whitening, checkpoints,
/// [`tune`](crate::tune::tune), [`Sample`](crate::Sample) and the coupled methods, whose coarse
/// path's flow noise is the fine path's two half-steps' combined exactly
/// ([`LangevinKernel::combine_increments`]): Richardson–Romberg over UBU, and multilevel UBU.
/// Coupled paths are valid but not coupled at UBU's strong order 2: run as `B(h)U(h)`, a path's
/// states are UBU's midpoints, and a fine path's fall a quarter of a coarse step from the coarse
/// path's, so multilevel UBU's corrections decay at β ≈ 1 (measured in `tests/mlsgld.rs`), not
/// the rate of Chada et al.'s UBUBU, which couples full `U(h/2)BU(h/2)` steps.
///
/// Reference: N. K. Chada, B. Leimkuhler, D. Paulin and P. A. Whalley, *Unbiased kinetic
/// Langevin Monte Carlo with inexact gradients*, arXiv 2311.05025 (UBU, its `O(h²)` bias with
/// stochastic gradients).
pub type Ubu<E = Minibatch> = Langevin<UbuKernel, E>;

impl<E: GradientEstimator> Langevin<UbuKernel, E> {
    /// UBU with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{KineticSettings, Ubu};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let ubu = Ubu::new(KineticSettings::constant(0.01, 20.0), Minibatch::new(100))?;
    /// let out = Runner::new(&model, &ubu).start(&[0.0; 2]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: KineticSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Langevin::with_kernel(UbuKernel { settings, v: Vec::new() }, estimator))
    }

    /// The settings.
    pub fn settings(&self) -> &KineticSettings {
        &self.kernel().settings
    }

    /// The current velocity.
    pub fn velocity(&self) -> &[f64] {
        &self.kernel().v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two BAOAB steps against the update by hand: a half kick first, a full kick (the previous
    /// step's last half and this step's first) after.
    #[test]
    fn baoab_makes_the_update_of_its_docs() {
        let (h, gamma) = (0.1, 2.0);
        let mut k = BaoabKernel { settings: KineticSettings::constant(h, gamma), v: Vec::new(), half: 0.0 };
        k.bind(1, 10).unwrap();
        let (c, s) = ((-gamma * h).exp(), (1.0 - (-2.0 * gamma * h).exp()).sqrt());
        let mut theta = [0.5];
        k.advance(&mut theta, &[2.0], 1, 1.0, &[0.3]);
        let v = -0.5 * h * 2.0;
        let x = 0.5 + 0.5 * h * v;
        let v = c * v + s * 0.3;
        let x = x + 0.5 * h * v;
        assert!((theta[0] - x).abs() < 1e-15 && (k.v[0] - v).abs() < 1e-15);
        k.advance(&mut theta, &[-1.0], 2, 1.0, &[-0.7]);
        let v2 = v + h;
        let x2 = x + 0.5 * h * v2;
        let v2 = c * v2 - s * 0.7;
        let x2 = x2 + 0.5 * h * v2;
        assert!((theta[0] - x2).abs() < 1e-15 && (k.v[0] - v2).abs() < 1e-15);
    }

    /// U(h)'s increments have the exact flow's moments (against a fine Euler–Maruyama moment
    /// recursion), the series and the direct form agree where they meet, and U(h/2)U(h/2) is
    /// U(h) in law.
    #[test]
    fn the_flow_has_the_exact_moments() {
        for &(h, gamma) in &[(0.5, 1.0), (0.01, 3.0), (0.3, 0.05)] {
            let u = FlowU::new(h, gamma);
            // Moment ODEs of (θ, v) noise from 0: Pθθ' = 2Pθv, Pθv' = Pvv − γPθv, Pvv' = −2γPvv + 2γ.
            let n = 200_000;
            let dt = h / n as f64;
            let (mut p, mut q, mut r) = (0.0f64, 0.0f64, 0.0f64);
            for _ in 0..n {
                // Midpoint (RK2) steps.
                let f = |_p: f64, q: f64, r: f64| (2.0 * q, r - gamma * q, -2.0 * gamma * r + 2.0 * gamma);
                let (a1, b1, c1) = f(p, q, r);
                let (a2, b2, c2) = f(p + 0.5 * dt * a1, q + 0.5 * dt * b1, r + 0.5 * dt * c1);
                p += dt * a2;
                q += dt * b2;
                r += dt * c2;
            }
            let var_theta = u.a * u.a + u.b * u.b;
            let cov = u.a * u.c;
            let var_v = u.c * u.c;
            for (got, want) in [(var_theta, p), (cov, q), (var_v, r)] {
                assert!((got - want).abs() <= 1e-8 * want.abs(), "h {h} γ {gamma}: {got:e} vs {want:e}");
            }
            assert!((u.eta - (-gamma * h).exp()).abs() < 1e-15);
        }
        for x in [0.005, 0.02, 0.05] {
            let (series, direct) = (flight_variance(x, true), flight_variance(x, false));
            assert!((series - direct).abs() < 1e-9 * direct, "x {x}: {series:e} vs {direct:e}");
        }
    }

    /// Two UBU steps against the update by hand.
    #[test]
    fn ubu_makes_the_update_of_its_docs() {
        let (h, gamma) = (0.1, 2.0);
        let mut k = UbuKernel { settings: KineticSettings::constant(h, gamma), v: Vec::new() };
        k.bind(2, 10).unwrap();
        assert_eq!(k.normals_per_coordinate(), 2);
        let u = FlowU::new(h, gamma);
        let mut theta = [0.5, -1.0];
        let z = [0.3, -0.2, 1.1, 0.4];
        k.advance(&mut theta, &[2.0, 1.0], 1, 1.0, &z);
        for j in 0..2 {
            let w = -h * [2.0, 1.0][j];
            let x = [0.5, -1.0][j] + u.phi * w + u.a * z[j] + u.b * z[2 + j];
            assert!((theta[j] - x).abs() < 1e-15);
            assert!((k.v[j] - (u.eta * w + u.c * z[j])).abs() < 1e-15);
        }
    }

    /// With no force, one UBU step of h driven by the combined increment lands exactly where two
    /// steps of h/2 driven by `z1`, `z2` do (position and velocity: the flow is linear and the
    /// combination exact); and the combined increments are independent standard normals.
    #[test]
    fn ubu_increments_combine_onto_one_brownian_path() {
        use crate::numeric::rng::{fill_standard_normal, stream};
        let (h, gamma, d) = (0.3, 1.7, 3);
        let kernel = |v: &[f64]| UbuKernel { settings: KineticSettings::constant(h, gamma), v: v.to_vec() };
        let mut rng = stream(8, &[0]);
        let (mut z1, mut z2, mut zc) = (vec![0.0; 2 * d], vec![0.0; 2 * d], vec![0.0; 2 * d]);
        for _ in 0..100 {
            fill_standard_normal(&mut rng, &mut z1);
            fill_standard_normal(&mut rng, &mut z2);
            let (theta0, v0) = ([0.4, -1.0, 2.0], [0.3, 0.1, -0.5]);
            let mut fine = kernel(&v0);
            let mut tf = theta0;
            fine.advance(&mut tf, &[0.0; 3], 1, 0.5, &z1);
            fine.advance(&mut tf, &[0.0; 3], 1, 0.5, &z2);
            let mut coarse = kernel(&v0);
            coarse.combine_increments(1, 1.0, &z1, &z2, &mut zc);
            let mut tc = theta0;
            coarse.advance(&mut tc, &[0.0; 3], 1, 1.0, &zc);
            for j in 0..d {
                assert!((tf[j] - tc[j]).abs() < 1e-13 && (fine.v[j] - coarse.v[j]).abs() < 1e-13);
            }
        }
        // The combined pair (z_a, z_b) of a coordinate: mean 0, covariance I (200 000 draws; each
        // moment within 5 standard errors).
        let n = 200_000;
        let k = kernel(&[0.0; 3]);
        let (mut s, mut ss) = ([0.0f64; 2], [0.0f64; 3]);
        for _ in 0..n {
            fill_standard_normal(&mut rng, &mut z1);
            fill_standard_normal(&mut rng, &mut z2);
            k.combine_increments(1, 1.0, &z1, &z2, &mut zc);
            let (a, b) = (zc[0], zc[d]);
            s[0] += a;
            s[1] += b;
            ss[0] += a * a;
            ss[1] += b * b;
            ss[2] += a * b;
        }
        let n = n as f64;
        let se = (1.0 / n).sqrt();
        assert!(s.iter().all(|m| (m / n).abs() < 5.0 * se), "means {s:?}");
        assert!((ss[0] / n - 1.0).abs() < 5.0 * 2f64.sqrt() * se && (ss[1] / n - 1.0).abs() < 5.0 * 2f64.sqrt() * se);
        assert!((ss[2] / n).abs() < 5.0 * se, "covariance {}", ss[2] / n);
    }

    #[test]
    fn settings_are_checked() {
        assert!(KineticSettings::constant(0.1, 0.0).validate().is_err());
        assert!(KineticSettings::constant(-0.1, 1.0).validate().is_err());
        assert!(KineticSettings::constant(0.1, f64::NAN).validate().is_err());
        assert!(Baoab::new(KineticSettings::constant(0.1, -1.0), Minibatch::new(10)).is_err());
        assert!(KineticSettings::default().validate().is_ok());
    }
}
