//! Contour stochastic gradient Langevin dynamics (CSGLD), with its importance weights.

use super::{Langevin, LangevinKernel, Sampler};
use crate::cost::Cost;
use crate::error::{Error, Result, check_positive};
use crate::gradient::{GradientEstimator, Minibatch, Subsample};
use crate::models::model::{Model, check_potentials};
use crate::numeric::schedule::StepSize;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Settings of [`Csgld`]: the dynamics' step, the energy partition, ζ and the stochastic
/// approximation's steps.
///
/// Build with [`CsgldSettings::new`], then change fields (the struct may grow).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CsgldSettings {
    /// The constant SGLD step ε.
    pub step_size: f64,
    /// The temperature τ of the dynamics (the target is `exp(−U/τ)`). Default 1.
    pub temperature: f64,
    /// ζ > 0, how strongly the energy PDF flattens the target (ζ → 0 is SGLD). Default 1.
    pub zeta: f64,
    /// The number m ≥ 2 of energy partitions.
    pub partitions: usize,
    /// The lower edge `u₀` of the first partition (energies below it fall in the first).
    pub energy_min: f64,
    /// The partitions' width Δu > 0: partition j holds energies in `[u₀ + jΔu, u₀ + (j+1)Δu)`
    /// (the last one everything above).
    pub energy_gap: f64,
    /// The stochastic approximation's steps `ω_k`. Default `Shifted { a: 10, b: 1 000, c: 0.75 }`
    /// (`ω_k = 10 (1 000 + k)^(−0.75)`: Σω = ∞, Σω² < ∞).
    pub sa_step: StepSize,
    /// The minibatch size `n_e` of the energy estimates (drawn with replacement); `n_e ≥ N`
    /// uses the exact energy. Default 100.
    pub energy_batch: usize,
}

impl CsgldSettings {
    /// Step ε and the partition of `[energy_min, energy_min + partitions × energy_gap)` into
    /// `partitions` pieces; τ = 1, ζ = 1, the default stochastic approximation and energy batch.
    pub fn new(step: f64, energy_min: f64, energy_gap: f64, partitions: usize) -> Self {
        CsgldSettings {
            step_size: step,
            temperature: 1.0,
            zeta: 1.0,
            partitions,
            energy_min,
            energy_gap,
            sa_step: StepSize::Shifted { a: 10.0, b: 1_000.0, c: 0.75 },
            energy_batch: 100,
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        check_positive("step_size", self.step_size)?;
        check_positive("temperature", self.temperature)?;
        check_positive("zeta", self.zeta)?;
        check_positive("energy_gap", self.energy_gap)?;
        if !self.energy_min.is_finite() {
            return Err(Error::invalid("energy_min", self.energy_min, "must be finite"));
        }
        if self.partitions < 2 {
            return Err(Error::invalid("partitions", self.partitions, "must be at least 2"));
        }
        self.sa_step.validate("sa_step")?;
        if self.sa_step.at(1) >= 1.0 {
            return Err(Error::invalid(
                "sa_step",
                self.sa_step.at(1),
                "its first step must be below 1 (the PDF stays positive)",
            ));
        }
        if self.energy_batch == 0 {
            return Err(Error::invalid("energy_batch", 0, "must be at least 1"));
        }
        Ok(())
    }
}

/// SGLD with a gradient multiplier: `θ ← θ − ε m ∇Ũ(θ) + √(2ετ) z` (the kernel of [`Csgld`],
/// which sets m before each step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContourKernel {
    step: f64,
    temperature: f64,
    multiplier: f64,
}

impl LangevinKernel for ContourKernel {
    #[inline]
    fn time_step(&self, _k: u64) -> f64 {
        self.step
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], _k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.step;
        let (s, a) = ((2.0 * h * self.temperature).sqrt(), h * self.multiplier);
        for ((t, g), z) in theta.iter_mut().zip(grad).zip(z) {
            *t += s * z - a * g;
        }
    }
}

/// Contour stochastic gradient Langevin dynamics (CSGLD): SGLD on a target flattened by a
/// learned energy PDF, whose draws, importance-weighted, estimate the posterior.
///
/// The energy range is cut into m partitions of width Δu from `u₀` (partition
/// `J(u) = ⌊(u − u₀)/Δu⌋`, clamped to `0..m`). The sampler learns `ϑ(j)`, the posterior mass
/// of each partition, while it samples (Deng, Lin & Liang 2020, Algorithm 1):
///
/// 1. `θ_{k+1} = θ_k − ε [1 + ζτ (log ϑ_k(J̃_k) − log ϑ_k(J̃_k − 1))/Δu] ∇Ũ(θ_k) + √(2ετ) Z`
///    (the bracket is 1 in the first partition), `J̃_k` the partition of the minibatch energy
///    `Ũ(θ_k) = U₀(θ_k) + (N/n_e) Σ_{s∈S} U_s(θ_k)` (its own minibatch, with replacement);
/// 2. `ϑ_{k+1}(i) = ϑ_k(i) + ω_{k+1} ϑ_k(J̃_{k+1})^ζ (1{i = J̃_{k+1}} − ϑ_k(i))` for every i.
///
/// The bracket is the derivative of `ζτ log Ψ_ϑ(U)`, Ψ the piecewise exponential interpolation
/// of ϑ between partition edges: the dynamics targets `π(θ)^{1/τ}/Ψ_ϑ(U(θ))^ζ`, flat across
/// energies where ϑ is right, and the multiplier turns negative where the learned PDF falls
/// steeply, pushing the chain up over energy barriers. **Its draws are not the posterior**:
/// each draw carries the importance weight `ϑ(J̃(θ))^ζ` (the [`weight`](Sampler::weight) the
/// runner records), and posterior expectations are the weighted averages
/// `Σ_k ϑ_k(J̃_k)^ζ f(θ_k) / Σ_k ϑ_k(J̃_k)^ζ` that the run's [`Estimate`](crate::Estimate)
/// computes. Diagnostics that ignore weights (ESS, R̂) describe the flattened chain.
///
/// Cost: the estimator's datum gradients plus `n_e` datum potentials per iteration (N for exact
/// energies). Needs the model's potentials ([`Error::Unsupported`] at `init` otherwise). ϑ
/// starts uniform; [`energy_pdf`](Self::energy_pdf) is the learned one.
///
/// Reference: W. Deng, G. Lin and F. Liang, *A contour stochastic gradient Langevin dynamics
/// algorithm for simulations of multi-modal distributions*, NeurIPS 2020 (arXiv 2010.09800).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Csgld<E = Minibatch> {
    settings: CsgldSettings,
    chain: Langevin<ContourKernel, E>,
    /// `log ϑ(i) − shift`: the log PDF, stored with a common offset so that the stochastic
    /// approximation's shrinking of every entry is one addition to `shift` (O(1) per step
    /// whatever m), and in logs so that masses far below 10⁻³⁰⁸ stay represented.
    log_pdf: Vec<f64>,
    shift: f64,
    /// The partition of the current position's energy estimate.
    j: usize,
    weight: f64,
    energy: Subsample,
    exact: bool,
    all: Vec<usize>,
    potentials: u64,
    ready: bool,
}

impl<E: GradientEstimator> Csgld<E> {
    /// CSGLD with the given settings and gradient estimator; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{Csgld, CsgldSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// // Energies near the mode are about 1 400 here; 50 partitions of 10 cover them.
    /// let cs = Csgld::new(CsgldSettings::new(1e-4, 1_300.0, 10.0, 50), Minibatch::new(100))?;
    /// let out = Runner::new(&model, &cs).start(model.posterior_mean().as_slice().unwrap()).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: CsgldSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        let kernel = ContourKernel { step: settings.step_size, temperature: settings.temperature, multiplier: 1.0 };
        Ok(Csgld {
            energy: Subsample::new(settings.energy_batch, true),
            chain: Langevin::with_kernel(kernel, estimator),
            log_pdf: Vec::new(),
            shift: 0.0,
            j: 0,
            weight: 1.0,
            exact: false,
            all: Vec::new(),
            potentials: 0,
            ready: false,
            settings,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &CsgldSettings {
        &self.settings
    }

    /// The learned energy PDF ϑ (one mass per partition, summing to 1).
    pub fn energy_pdf(&self) -> Vec<f64> {
        self.log_pdf.iter().map(|l| (l + self.shift).exp()).collect()
    }

    /// `log ϑ(j)`.
    #[inline]
    pub fn log_energy_pdf(&self, j: usize) -> f64 {
        self.log_pdf[j] + self.shift
    }

    /// The partition of the current position's energy estimate.
    pub fn partition(&self) -> usize {
        self.j
    }

    /// The current gradient multiplier `1 + ζτ (log ϑ(J̃) − log ϑ(J̃ − 1))/Δu`.
    pub fn multiplier(&self) -> f64 {
        if self.j == 0 {
            return 1.0;
        }
        let s = &self.settings;
        1.0 + s.zeta * s.temperature * (self.log_pdf[self.j] - self.log_pdf[self.j - 1]) / s.energy_gap
    }

    /// The partition of the energy estimate at the current position.
    fn locate<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<usize> {
        let x = self.chain.position();
        let u = if self.exact {
            self.potentials += self.all.len() as u64;
            model.potential_prior(x)? + model.potential_data_sum(x, &self.all)?
        } else {
            self.energy.draw(rng);
            self.potentials += self.energy.batch_size() as u64;
            model.potential_prior(x)? + self.energy.scale() * model.potential_data_sum(x, self.energy.indices())?
        };
        if u.is_nan() {
            return Err(Error::NonFinitePotential { iteration: self.chain.iteration() });
        }
        let s = &self.settings;
        let r = ((u - s.energy_min) / s.energy_gap).floor();
        // NaN excluded above; ±∞ and far values clamp to the end partitions.
        Ok(if r <= 0.0 {
            0
        } else if r >= (s.partitions - 1) as f64 {
            s.partitions - 1
        } else {
            r as usize
        })
    }
}

impl<E: GradientEstimator> Sampler for Csgld<E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        self.ready = false;
        check_potentials(model, theta0, "contour SGLD's energies")?;
        let needed = |e: Error| e.needed_by("contour SGLD's energies").at_iteration(0);
        let n_data = model.n_data();
        self.exact = self.settings.energy_batch >= n_data;
        if self.exact {
            if self.all.len() != n_data {
                self.all = crate::error::all_indices(n_data)?;
            }
        } else {
            self.all = Vec::new();
            self.energy.prepare(n_data)?;
        }
        self.chain.init(model, theta0, rng)?;
        let m = self.settings.partitions;
        self.log_pdf.clear();
        self.log_pdf.resize(m, 0.0);
        self.shift = -(m as f64).ln();
        self.potentials = 0;
        self.j = self.locate(model, rng).map_err(needed)?;
        self.weight = (self.settings.zeta * self.log_energy_pdf(self.j)).exp();
        self.ready = true;
        Ok(())
    }

    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        if !self.ready {
            return Err(Error::NotInitialised);
        }
        let multiplier = self.multiplier();
        self.chain.kernel_mut().multiplier = multiplier;
        self.chain.step(model, rng)?;
        let k = self.chain.iteration();
        let j = self.locate(model, rng).map_err(|e| e.at_iteration(k))?;
        // ϑ(i) ← ϑ(i)(1 − a) for every i, then ϑ(j) += a, with a = ω ϑ(j)^ζ (< 1).
        let zeta = self.settings.zeta;
        let lj = self.log_energy_pdf(j);
        let omega = self.settings.sa_step.at(k);
        let a = omega * (zeta * lj).exp();
        // log(ϑ(j)(1 − a) + a), as a log-sum of the two terms' logs (either may underflow).
        let (p, q) = (lj + (-a).ln_1p(), omega.ln() + zeta * lj);
        let new_lj = p.max(q) + (-(p - q).abs()).exp().ln_1p();
        self.shift += (-a).ln_1p();
        self.log_pdf[j] = new_lj - self.shift;
        self.j = j;
        self.weight = (zeta * new_lj).exp();
        Ok(())
    }

    fn position(&self) -> &[f64] {
        self.chain.position()
    }

    fn gradient(&self) -> Option<&[f64]> {
        self.chain.gradient()
    }

    /// The importance weight `ϑ(J̃(θ_k))^ζ` of the current draw.
    fn weight(&self) -> f64 {
        self.weight
    }

    fn draw_step_size(&self) -> Option<f64> {
        Some(self.settings.step_size)
    }

    fn iteration(&self) -> u64 {
        self.chain.iteration()
    }

    /// The estimator's gradients and the energies' potentials.
    fn cost(&self) -> Cost {
        let mut c = self.chain.cost();
        c.datum_potentials += self.potentials;
        c
    }

    fn setup_cost(&self) -> Cost {
        self.chain.setup_cost()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gradient::FullGradient;
    use crate::models::LinearGaussian;
    use crate::numeric::rng::stream;

    /// The stochastic approximation kept in logs with a common offset equals the paper's update
    /// done directly on ϑ; the multiplier and the weight follow their formulas.
    #[test]
    fn the_log_space_update_is_the_papers_update() {
        let m = LinearGaussian::synthetic(100, 2, 1.0, 10.0, 3).unwrap();
        let all: Vec<usize> = (0..100).collect();
        let u0 = m.potential_prior(&[0.0, 0.0]).unwrap() + m.potential_data_sum(&[0.0, 0.0], &all).unwrap();
        let mut s = CsgldSettings::new(1e-3, u0 - 30.0, 2.0, 40);
        s.zeta = 0.7;
        s.energy_batch = 20;
        let mut c = Csgld::new(s, FullGradient::new()).unwrap();
        let mut rng = stream(5, &[0]);
        c.init(&m, &[0.0, 0.0], &mut rng).unwrap();
        let mut direct = vec![1.0f64 / 40.0; 40];
        for k in 1..=500u64 {
            let j_before = c.partition();
            let mult = 1.0
                + (if j_before == 0 { 0.0 } else { 0.7 * (direct[j_before].ln() - direct[j_before - 1].ln()) / 2.0 });
            assert!((c.multiplier() - mult).abs() < 1e-9 * mult.abs().max(1.0), "k {k}");
            c.step(&m, &mut rng).unwrap();
            let j = c.partition();
            let push = s.sa_step.at(k) * direct[j].powf(0.7);
            for (i, p) in direct.iter_mut().enumerate() {
                *p += push * (f64::from(u8::from(i == j)) - *p);
            }
            let got = c.energy_pdf();
            for (a, b) in got.iter().zip(&direct) {
                assert!((a - b).abs() <= 1e-10 * b, "k {k}: {a} vs {b}");
            }
            assert!((c.weight() - direct[j].powf(0.7)).abs() <= 1e-10 * c.weight());
        }
        assert!((c.energy_pdf().iter().sum::<f64>() - 1.0).abs() < 1e-10);
    }

    #[test]
    fn settings_are_checked() {
        let ok = CsgldSettings::new(1e-3, 0.0, 1.0, 10);
        assert!(ok.validate().is_ok());
        for f in [
            |s: &mut CsgldSettings| s.step_size = 0.0,
            |s: &mut CsgldSettings| s.partitions = 1,
            |s: &mut CsgldSettings| s.energy_gap = -1.0,
            |s: &mut CsgldSettings| s.zeta = f64::NAN,
            |s: &mut CsgldSettings| s.energy_min = f64::INFINITY,
            |s: &mut CsgldSettings| s.energy_batch = 0,
            |s: &mut CsgldSettings| s.sa_step = StepSize::Constant(1.5),
        ] {
            let mut s = ok;
            f(&mut s);
            assert!(s.validate().is_err(), "{s:?}");
        }
    }
}
