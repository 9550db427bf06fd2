//! Replica-exchange SGLD (reSGLD) with the bias-corrected minibatch swap.

use super::{Discretisation, Langevin, LangevinKernel, Sampler};
use crate::cost::Cost;
use crate::error::{Error, Result, check_positive};
use crate::gradient::{GradientEstimator, Minibatch, Subsample};
use crate::models::model::{Model, check_potentials};
use crate::numeric::rng::fill_standard_normal;
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

/// Settings of [`ReSgld`]: the temperature ladder, each replica's step, and the swaps.
///
/// Build with [`ReSgldSettings::new`], then change fields (the struct may grow).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReSgldSettings {
    /// The temperatures `τ₁ = 1 < τ₂ < … < τ_K` (K ≥ 2). Replica 1 targets the posterior; its
    /// draws are the sampler's.
    pub temperatures: Vec<f64>,
    /// Each replica's constant SGLD step `γ_k` (one per temperature). The drift is `−γ_k ∇Ũ`
    /// whatever the temperature, so stability asks the same of every `γ_k`; [`new`](Self::new)
    /// gives them all one step.
    pub step_sizes: Vec<f64>,
    /// Swaps are attempted every `swap_every` iterations (≥ 1). Default 1.
    pub swap_every: u64,
    /// The minibatch size `n_e` of the energy estimates (drawn with replacement, one minibatch
    /// shared by the two replicas of a pair). `n_e ≥ N` uses the exact energies (all data, no
    /// correction needed). Default 100.
    pub energy_batch: usize,
    /// The correction factor `F ≥ 1` of the swap rule: `F = 1` is the full correction (unbiased
    /// swaps under normal energy noise), larger values correct less and swap more often, and
    /// `f64::INFINITY` is the naive rule (no correction: biased). Default 1.
    pub correction: f64,
    /// Variance-reduced energies (Deng et al. 2021): every `anchor_every` iterations each
    /// replica's anchor moves to its current position and its exact energy is computed (N
    /// datum potentials per replica); the energies of a swap are then control-variate
    /// estimates around the anchors. 0 (the default): plain minibatch energies.
    pub anchor_every: u64,
    /// Iterations at the start during which the ladder adapts (0, the default: never): after
    /// each swap round the gaps between adjacent `log τ` move towards equal swap rates (a gap
    /// whose pair swaps more often than the ladder's average widens), with τ₁ = 1 and the
    /// hottest τ fixed; the temperatures then stay. The runner refuses a burn-in shorter than
    /// this (the draws of an adapting ladder are not the posterior's).
    pub adapt_ladder: u64,
}

impl ReSgldSettings {
    /// The ladder `temperatures` (τ₁ = 1 first, increasing), every replica at the SGLD step
    /// `step`, swaps attempted at every iteration with the fully corrected rule on energies
    /// from minibatches of 100.
    pub fn new(step: f64, temperatures: &[f64]) -> Self {
        ReSgldSettings {
            temperatures: temperatures.to_vec(),
            step_sizes: vec![step; temperatures.len()],
            swap_every: 1,
            energy_batch: 100,
            correction: 1.0,
            anchor_every: 0,
            adapt_ladder: 0,
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        let t = &self.temperatures;
        if t.len() < 2 {
            return Err(Error::invalid("temperatures", t.len(), "a ladder needs at least two temperatures"));
        }
        if t[0] != 1.0 {
            return Err(Error::invalid("temperatures[0]", t[0], "must be 1 (the replica whose draws are kept)"));
        }
        for w in t.windows(2) {
            if !(w[1].is_finite() && w[1] > w[0]) {
                return Err(Error::invalid("temperatures", w[1], "must be finite and strictly increasing"));
            }
        }
        if self.step_sizes.len() != t.len() {
            return Err(Error::DimensionMismatch {
                what: "step_sizes (one per temperature)",
                expected: t.len(),
                got: self.step_sizes.len(),
            });
        }
        for &h in &self.step_sizes {
            check_positive("step_sizes", h)?;
        }
        if self.swap_every == 0 {
            return Err(Error::invalid("swap_every", 0, "must be at least 1"));
        }
        if self.energy_batch == 0 {
            return Err(Error::invalid("energy_batch", 0, "must be at least 1"));
        }
        if self.correction.is_nan() || self.correction < 1.0 {
            return Err(Error::invalid("correction", self.correction, "must be >= 1 (infinity: the naive swap)"));
        }
        Ok(())
    }
}

/// SGLD at temperature τ: `θ ← θ − γ ∇Ũ(θ) + √(2γτ) z` (a replica of [`ReSgld`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaKernel {
    step: f64,
    temperature: f64,
}

impl LangevinKernel for ReplicaKernel {
    #[inline]
    fn time_step(&self, _k: u64) -> f64 {
        self.step
    }

    /// `c = f h/(2τ)`: the injected `2fhτ(I − cV)` and the gradient noise `(fh)²V` make the
    /// exact-gradient scheme's `2fhτ I`.
    fn gradient_noise_weight(&self, _k: u64, fraction: f64) -> Option<f64> {
        Some(fraction * self.step / (2.0 * self.temperature))
    }

    #[inline]
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], _k: u64, fraction: f64, z: &[f64]) {
        let h = fraction * self.step;
        let s = (2.0 * h * self.temperature).sqrt();
        for ((t, g), z) in theta.iter_mut().zip(grad).zip(z) {
            *t += s * z - h * g;
        }
    }
}

/// Replica-exchange stochastic gradient Langevin dynamics (reSGLD), with the bias-corrected
/// minibatch swap.
///
/// K replicas run SGLD at temperatures `τ₁ = 1 < … < τ_K` (replica k:
/// `θ ← θ − γ_k ∇Ũ(θ) + √(2γ_k τ_k) Z`, each with the estimator E: minibatch, control variates,
/// reshuffling, …). Every `swap_every` iterations, adjacent replicas (k, k+1) — the even pairs
/// and the odd pairs in turn (DEO; both of a two-replica ladder every time) — exchange positions
/// with probability
///
/// `min(1, exp{Δβ (Ũ(θ_k) − Ũ(θ_{k+1}) − Δβ σ̂²/F)})`, `Δβ = 1/τ_k − 1/τ_{k+1}`,
///
/// the exact replica-exchange rule with the energies `U = U₀ + Σᵢ Uᵢ` replaced by unbiased
/// minibatch estimates and a penalty for their noise. Here the two energies are estimated on one
/// minibatch of `n_e` data (drawn with replacement), so their difference
/// `D̃ = U₀(θ_k) − U₀(θ_{k+1}) + (N/n_e) Σ_{s∈S} [U_s(θ_k) − U_s(θ_{k+1})]` has the variance
/// `v = (N²/n_e) Var_s[U_s(θ_k) − U_s(θ_{k+1})]`, estimated per attempt from the same minibatch
/// (a shared minibatch removes the noise the two energies have in common), and `σ̂² = v̂/2` (the
/// variance of one energy when two independent ones make `v`, as in the paper). With
/// `s² = Δβ² v̂` the penalty is `(s²/2 + s⁴/(4(n_e + 1)))/F`: at F = 1 this is the penalty
/// method of Ceperley & Dewing, under which the swap satisfies detailed balance on average when
/// `D̃` is normal (the second term corrects for `v` being estimated). `F = ∞` is the naive rule,
/// which swaps too often and biases the T = 1 replica. With `anchor_every > 0` the energies are
/// control-variate estimates around per-replica anchors whose exact energies are known
/// (anchors travel with the positions they were taken from).
///
/// The sampler's position, gradient, weight and draws are replica 1's (τ = 1): the run's
/// estimates are of the posterior. [`swap_rates`](Self::swap_rates) gives each pair's
/// acceptance. Cost: every replica's datum gradients, plus `2n_e` datum potentials per
/// attempted swap (`4n_e` with anchors, and N per replica per anchor refresh). Needs the
/// model's potentials ([`Error::Unsupported`] at `init` otherwise). Replicas start at the
/// chain's start. All of a chain's replicas run on its thread, from its generator: the draws
/// of a seed do not depend on threads or ranks (chains, each a whole ladder, are the units
/// placed on ranks).
///
/// References: W. Deng, Q. Feng, L. Gao, F. Liang and G. Lin, *Non-convex learning via replica
/// exchange stochastic gradient MCMC*, ICML 2020 (arXiv 2008.05367); W. Deng, Q. Feng,
/// G. Karagiannis, G. Lin and F. Liang, *Accelerating convergence of replica exchange
/// stochastic gradient MCMC via variance reduction*, ICLR 2021; D. M. Ceperley and M. Dewing,
/// *The penalty method for random walks with uncertain energies*, J. Chem. Phys. 110, 1999.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReSgld<E = Minibatch> {
    settings: ReSgldSettings,
    replicas: Vec<Langevin<ReplicaKernel, E>>,
    k: u64,
    /// The energy minibatches (with replacement), or all data once for exact energies.
    energy: Subsample,
    exact: bool,
    all: Vec<usize>,
    diffs: Vec<f64>,
    /// Per replica: the anchor and its exact data energy `Σᵢ Uᵢ(anchor)` (variance reduction).
    anchors: Vec<Vec<f64>>,
    anchor_energy: Vec<f64>,
    attempts: Vec<u64>,
    accepts: Vec<u64>,
    /// Ladder adaptation: each pair's smoothed swap rate and log-gap weight `s_p` (the gaps of
    /// `log τ` are `log τ_K · e^{s_p} / Σ e^{s}`).
    rates: Vec<f64>,
    log_gaps: Vec<f64>,
    /// A hotter replica's normals in a coupled step (scratch).
    #[serde(skip)]
    hot_noise: Vec<f64>,
    potentials: u64,
    ready: bool,
}

impl<E: GradientEstimator> ReSgld<E> {
    /// reSGLD with the given settings, every replica's gradient from a clone of `estimator`;
    /// errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{ReSgld, ReSgldSettings};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let re = ReSgld::new(ReSgldSettings::new(1e-4, &[1.0, 4.0]), Minibatch::new(100))?;
    /// let out = Runner::new(&model, &re).start(&[0.0; 2]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// assert!(out.chains[0].sampler.swap_rates()[0] > 0.0);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: ReSgldSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        let replicas = settings
            .temperatures
            .iter()
            .zip(&settings.step_sizes)
            .map(|(&temperature, &step)| Langevin::with_kernel(ReplicaKernel { step, temperature }, estimator.clone()))
            .collect();
        let pairs = settings.temperatures.len() - 1;
        Ok(ReSgld {
            energy: Subsample::new(settings.energy_batch, true),
            settings,
            replicas,
            k: 0,
            exact: false,
            all: Vec::new(),
            diffs: Vec::new(),
            anchors: Vec::new(),
            anchor_energy: Vec::new(),
            attempts: vec![0; pairs],
            accepts: vec![0; pairs],
            rates: Vec::new(),
            log_gaps: Vec::new(),
            hot_noise: Vec::new(),
            potentials: 0,
            ready: false,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &ReSgldSettings {
        &self.settings
    }

    /// Each adjacent pair's fraction of accepted swaps (pair k: replicas k and k+1) since the
    /// ladder's adaptation ended (since `init` without one); 0 for a pair not yet tried.
    pub fn swap_rates(&self) -> Vec<f64> {
        self.attempts.iter().zip(&self.accepts).map(|(&a, &s)| if a == 0 { 0.0 } else { s as f64 / a as f64 }).collect()
    }

    /// Each adjacent pair's attempted and accepted swaps, counted as [`swap_rates`](Self::swap_rates).
    pub fn swap_counts(&self) -> Vec<(u64, u64)> {
        self.attempts.iter().copied().zip(self.accepts.iter().copied()).collect()
    }

    /// The temperatures now (adapted, with [`adapt_ladder`](ReSgldSettings::adapt_ladder)).
    pub fn temperatures(&self) -> &[f64] {
        &self.settings.temperatures
    }

    /// The τ = 1 replica (its draws are the sampler's).
    pub(crate) fn cold(&self) -> &Langevin<ReplicaKernel, E> {
        &self.replicas[0]
    }

    /// This ladder with the τ = 1 replica's step `step`, the others' in their ratio to it, every
    /// replica's estimator, whitening and gradient-noise correction `base`'s: what
    /// [`Sample`](crate::Sample) makes of a tuned SGLD.
    pub(crate) fn tuned_from<K: LangevinKernel>(&self, base: &Langevin<K, E>, step: f64) -> Result<Self> {
        let mut settings = self.settings.clone();
        let first = settings.step_sizes[0];
        settings.step_sizes.iter_mut().for_each(|h| *h *= step / first);
        let mut re = ReSgld::new(settings, base.estimator().clone())?;
        for r in re.replicas.iter_mut() {
            *r =
                r.clone().with_whitening(base.whitening().cloned()).with_gradient_noise(base.gradient_noise().cloned());
        }
        Ok(re)
    }

    /// The current position of every replica (replica 1, τ = 1, first).
    pub fn replica_positions(&self) -> Vec<&[f64]> {
        self.replicas.iter().map(|r| r.position()).collect()
    }

    /// One datum's potential.
    #[inline]
    fn datum<M: Model + ?Sized>(&self, model: &M, x: &[f64], i: usize) -> Result<f64> {
        model.potential_data_sum(x, std::slice::from_ref(&i))
    }

    /// Moves every replica's anchor to its position and computes its exact data energy
    /// `Σᵢ Uᵢ(anchor)`.
    fn refresh_anchors<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        for ((r, a), u) in self.replicas.iter().zip(self.anchors.iter_mut()).zip(self.anchor_energy.iter_mut()) {
            a.copy_from_slice(r.position());
            *u = model.potential_data_sum(a, &self.all)?;
        }
        self.potentials += (self.all.len() * self.replicas.len()) as u64;
        Ok(())
    }

    /// The estimated energy difference `D̃ = Ũ(θ_a) − Ũ(θ_b)` and the estimate of its
    /// variance, for replicas a and b.
    fn energy_difference<M: Model + ?Sized, R: Rng + ?Sized>(
        &mut self,
        model: &M,
        a: usize,
        b: usize,
        rng: &mut R,
    ) -> Result<(f64, f64)> {
        let (xa, xb) = (self.replicas[a].position(), self.replicas[b].position());
        let prior = model.potential_prior(xa)? - model.potential_prior(xb)?;
        if self.exact {
            let d = model.potential_data_sum(xa, &self.all)? - model.potential_data_sum(xb, &self.all)?;
            self.potentials += 2 * self.all.len() as u64;
            return Ok((prior + d, 0.0));
        }
        self.energy.draw(rng);
        let anchored = !self.anchors.is_empty();
        let n = self.energy.batch_size();
        let mut diffs = std::mem::take(&mut self.diffs);
        for (j, &i) in self.energy.indices().iter().enumerate() {
            let mut d = self.datum(model, xa, i)? - self.datum(model, xb, i)?;
            if anchored {
                d -= self.datum(model, &self.anchors[a], i)? - self.datum(model, &self.anchors[b], i)?;
            }
            diffs[j] = d;
        }
        self.potentials += (if anchored { 4 } else { 2 }) * n as u64;
        let mean = diffs.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        self.diffs = diffs;
        let scale = self.energy.scale();
        let base = if anchored { self.anchor_energy[a] - self.anchor_energy[b] } else { 0.0 };
        Ok((prior + base + scale * n as f64 * mean, scale * scale * n as f64 * var))
    }

    /// Attempts the swaps of this round (DEO: the pairs of one parity; a two-replica ladder's
    /// one pair every round).
    fn swaps<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        let pairs = self.replicas.len() - 1;
        let round = self.k / self.settings.swap_every;
        let parity = if pairs == 1 { 0 } else { (round % 2) as usize };
        for p in (parity..pairs).step_by(2) {
            let (d, v) = self.energy_difference(model, p, p + 1, rng)?;
            if d.is_nan() || v.is_nan() {
                return Err(Error::NonFinitePotential { iteration: self.k });
            }
            let t = &self.settings.temperatures;
            let db = 1.0 / t[p] - 1.0 / t[p + 1];
            let s2 = db * db * v;
            let n = self.energy.batch_size() as f64;
            let penalty = if self.settings.correction.is_infinite() {
                0.0
            } else {
                (0.5 * s2 + s2 * s2 / (4.0 * (n + 1.0))) / self.settings.correction
            };
            let log_s = db * d - penalty;
            self.attempts[p] += 1;
            let log_u: f64 = rng.random::<f64>().ln();
            let accepted = log_u < log_s;
            if self.k <= self.settings.adapt_ladder {
                self.rates[p] += LADDER_SMOOTHING * (f64::from(u8::from(accepted)) - self.rates[p]);
            }
            if accepted {
                self.accepts[p] += 1;
                let (lo, hi) = self.replicas.split_at_mut(p + 1);
                lo[p].exchange_positions(&mut hi[0]);
                if !self.anchors.is_empty() {
                    self.anchors.swap(p, p + 1);
                    self.anchor_energy.swap(p, p + 1);
                }
            }
        }
        if self.k <= self.settings.adapt_ladder && pairs > 1 {
            self.adapt(round);
        }
        Ok(())
    }

    /// One step of the ladder's adaptation: each log-gap weight moves by its pair's smoothed
    /// swap rate's distance from the ladder's mean rate, at a decreasing gain; the temperatures
    /// follow, τ₁ = 1 and τ_K fixed.
    fn adapt(&mut self, round: u64) {
        let mean = self.rates.iter().sum::<f64>() / self.rates.len() as f64;
        let gain = LADDER_GAIN * LADDER_HALF_LIFE / (LADDER_HALF_LIFE + round as f64);
        for (s, r) in self.log_gaps.iter_mut().zip(&self.rates) {
            *s += gain * (r - mean);
        }
        let top = self.log_gaps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = self.log_gaps.iter().map(|s| (s - top).exp()).sum();
        let span = self.settings.temperatures.last().copied().unwrap_or(1.0).ln();
        let mut log_t = 0.0;
        let k = self.log_gaps.len();
        for p in 0..k {
            log_t += span * (self.log_gaps[p] - top).exp() / total;
            // The hottest stays exactly where it was (rounding).
            if p + 1 < k {
                self.settings.temperatures[p + 1] = log_t.exp();
                self.replicas[p + 1].kernel_mut().temperature = log_t.exp();
            }
        }
    }
}

impl<E: GradientEstimator> ReSgld<E> {
    /// What follows every replica's step: the iteration count, the anchors' refresh, the swaps,
    /// the end of the ladder's adaptation.
    fn after_step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.k += 1;
        let at = self.k;
        if !self.anchors.is_empty() && self.k.is_multiple_of(self.settings.anchor_every) {
            self.refresh_anchors(model).map_err(|e| e.at_iteration(at))?;
        }
        if self.k.is_multiple_of(self.settings.swap_every) {
            self.swaps(model, rng).map_err(|e| e.at_iteration(at))?;
        }
        if self.k == self.settings.adapt_ladder {
            // The fixed ladder's swaps are counted from here.
            self.attempts.iter_mut().chain(self.accepts.iter_mut()).for_each(|c| *c = 0);
        }
        Ok(())
    }
}

/// A ladder as a discretisation of the τ = 1 replica's diffusion, for the step-bias check: a
/// step of `fraction × h` moves the τ = 1 replica with the given increment and every hotter one
/// with its own normals (from `rng`, as its minibatches), then swaps as [`Sampler::step`] does.
/// Coupled copies (a companion at half the step) thus share the cold replica's Brownian path
/// and each keep the ladder's own law; what they measure is the whole method's step bias — the
/// swaps' and the mode weights' included — not only the cold replica's within a mode.
impl<E: GradientEstimator> Discretisation for ReSgld<E> {
    fn time_step(&self, k: u64) -> f64 {
        self.replicas[0].time_step(k)
    }

    fn step_fraction<M, R>(&mut self, model: &M, k: u64, fraction: f64, z: &[f64], rng: &mut R) -> Result<()>
    where
        M: Model + ?Sized,
        R: Rng + ?Sized,
    {
        if !self.ready {
            return Err(Error::NotInitialised);
        }
        let d = z.len();
        if self.hot_noise.len() != d {
            // Only once after loading a stored ladder (init sizes it).
            self.hot_noise.resize(d, 0.0);
        }
        self.replicas[0].step_fraction(model, k, fraction, z, rng)?;
        for r in self.replicas[1..].iter_mut() {
            fill_standard_normal(rng, &mut self.hot_noise);
            r.step_fraction(model, k, fraction, &self.hot_noise, rng)?;
        }
        self.after_step(model, rng)
    }
}

/// The smoothing of a pair's swap rate while the ladder adapts (about the last 50 attempts).
const LADDER_SMOOTHING: f64 = 0.02;
/// The adaptation's initial gain on a log-gap weight per unit of swap-rate difference.
const LADDER_GAIN: f64 = 0.5;
/// The swap round at which the adaptation's gain has halved.
const LADDER_HALF_LIFE: f64 = 500.0;

impl<E: GradientEstimator> Sampler for ReSgld<E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        self.ready = false;
        check_potentials(model, theta0, "replica exchange's swaps")?;
        let needed = |e: Error| e.needed_by("replica exchange's swaps").at_iteration(0);
        let n_data = model.n_data();
        self.exact = self.settings.energy_batch >= n_data;
        if self.exact || self.settings.anchor_every > 0 {
            if self.all.len() != n_data {
                self.all = crate::error::all_indices(n_data)?;
            }
        } else {
            self.all = Vec::new();
        }
        if !self.exact {
            self.energy.prepare(n_data)?;
            self.diffs.resize(self.settings.energy_batch, 0.0);
        }
        for r in self.replicas.iter_mut() {
            r.init(model, theta0, rng)?;
        }
        let k = self.replicas.len();
        if self.settings.anchor_every > 0 && !self.exact {
            self.anchors = vec![theta0.to_vec(); k];
            self.anchor_energy = vec![0.0; k];
            self.refresh_anchors(model).map_err(needed)?;
        } else {
            self.anchors.clear();
            self.anchor_energy.clear();
        }
        self.attempts.iter_mut().chain(self.accepts.iter_mut()).for_each(|c| *c = 0);
        let t = &self.settings.temperatures;
        self.log_gaps = t.windows(2).map(|w| (w[1].ln() - w[0].ln()).ln()).collect();
        self.rates = vec![0.5; t.len() - 1];
        self.hot_noise.resize(theta0.len(), 0.0);
        self.k = 0;
        self.ready = true;
        Ok(())
    }

    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        if !self.ready {
            return Err(Error::NotInitialised);
        }
        for r in self.replicas.iter_mut() {
            r.step(model, rng)?;
        }
        self.after_step(model, rng)
    }

    fn position(&self) -> &[f64] {
        self.replicas[0].position()
    }

    fn gradient(&self) -> Option<&[f64]> {
        self.replicas[0].gradient()
    }

    fn weight(&self) -> f64 {
        self.replicas[0].weight()
    }

    fn draw_step_size(&self) -> Option<f64> {
        self.replicas[0].draw_step_size()
    }

    fn iteration(&self) -> u64 {
        self.k
    }

    /// Every replica's gradients, and the swaps' (and anchors') potentials.
    fn cost(&self) -> Cost {
        let mut c = self.replicas.iter().fold(Cost::default(), |c, r| c + r.cost());
        c.datum_potentials += self.potentials;
        c
    }

    /// The estimator's setup, once (the replicas share it).
    fn setup_cost(&self) -> Cost {
        self.replicas[0].setup_cost()
    }

    /// The ladder's adaptation, if any.
    fn adaptation_steps(&self) -> u64 {
        self.settings.adapt_ladder
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gradient::FullGradient;
    use crate::models::LinearGaussian;
    use crate::numeric::rng::stream;

    fn bound(energy_batch: usize, anchor_every: u64) -> (LinearGaussian, ReSgld<FullGradient>) {
        let m = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 3).unwrap();
        let mut s = ReSgldSettings::new(1e-3, &[1.0, 5.0]);
        s.energy_batch = energy_batch;
        s.anchor_every = anchor_every;
        let mut r = ReSgld::new(s, FullGradient::new()).unwrap();
        r.init(&m, &[0.1, -0.2], &mut stream(1, &[0])).unwrap();
        r.replicas[0].init(&m, &[0.3, 0.1], &mut stream(1, &[1])).unwrap();
        r.replicas[1].init(&m, &[-0.4, 0.5], &mut stream(1, &[2])).unwrap();
        (m, r)
    }

    fn exact_difference(m: &LinearGaussian, a: &[f64], b: &[f64]) -> f64 {
        let all: Vec<usize> = (0..m.n_data()).collect();
        let u = |x: &[f64]| m.potential_prior(x).unwrap() + m.potential_data_sum(x, &all).unwrap();
        u(a) - u(b)
    }

    /// The minibatch energy difference is unbiased, and its variance estimate is unbiased for
    /// its variance (5 000 draws: each mean within 4 standard errors); anchors keep it unbiased
    /// and make it less noisy; n_e ≥ N is exact.
    #[test]
    fn the_energy_difference_and_its_variance_estimate_are_unbiased() {
        for anchor_every in [0, 1_000_000] {
            let (m, mut r) = bound(20, anchor_every);
            if anchor_every > 0 {
                // Anchors near, not at, the positions.
                r.anchors[0].copy_from_slice(&[0.25, 0.15]);
                r.anchors[1].copy_from_slice(&[-0.35, 0.45]);
                let all: Vec<usize> = (0..m.n_data()).collect();
                for k in 0..2 {
                    r.anchor_energy[k] = m.potential_data_sum(&r.anchors[k], &all).unwrap();
                }
            }
            let exact = exact_difference(&m, r.replicas[0].position(), r.replicas[1].position());
            let mut rng = stream(2, &[0]);
            let n = 5_000;
            let draws: Vec<(f64, f64)> = (0..n).map(|_| r.energy_difference(&m, 0, 1, &mut rng).unwrap()).collect();
            let mean = draws.iter().map(|d| d.0).sum::<f64>() / n as f64;
            let var = draws.iter().map(|d| (d.0 - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let est = draws.iter().map(|d| d.1).sum::<f64>() / n as f64;
            assert!((mean - exact).abs() < 4.0 * (var / n as f64).sqrt(), "anchors {anchor_every}: {mean} vs {exact}");
            // The variance estimate's mean against the variance (its own sd ≈ √(2/n) var).
            assert!(
                (est / var - 1.0).abs() < 4.0 * (2.0 / n as f64).sqrt() + 0.05,
                "anchors {anchor_every}: {est} vs {var}"
            );
            eprintln!("anchors {anchor_every}: variance {var:.3e}");
        }
        let (m, mut r) = bound(200, 0);
        let d = r.energy_difference(&m, 0, 1, &mut stream(3, &[0])).unwrap();
        let exact = exact_difference(&m, r.replicas[0].position(), r.replicas[1].position());
        assert!((d.0 - exact).abs() < 1e-9 * exact.abs() && d.1 == 0.0, "{d:?} vs {exact}");
    }

    /// A swap that the rule must accept (exact energies, the cold replica higher: log S > 0)
    /// exchanges the positions with their gradients, and is counted.
    #[test]
    fn an_accepted_swap_exchanges_positions_and_gradients() {
        let (m, mut r) = bound(200, 0);
        let (a, b) = (r.replicas[0].position().to_vec(), r.replicas[1].position().to_vec());
        let (ga, gb) = (r.replicas[0].gradient().unwrap().to_vec(), r.replicas[1].gradient().unwrap().to_vec());
        // Put the higher energy in the cold replica.
        if exact_difference(&m, &a, &b) < 0.0 {
            let (lo, hi) = r.replicas.split_at_mut(1);
            lo[0].exchange_positions(&mut hi[0]);
        }
        let before: Vec<Vec<f64>> = r.replicas.iter().map(|x| x.position().to_vec()).collect();
        let grads: Vec<Vec<f64>> = r.replicas.iter().map(|x| x.gradient().unwrap().to_vec()).collect();
        assert!(before.contains(&a) && before.contains(&b) && grads.contains(&ga) && grads.contains(&gb));
        r.swaps(&m, &mut stream(4, &[0])).unwrap();
        assert_eq!(r.swap_counts(), vec![(1, 1)]);
        assert_eq!(r.replicas[0].position(), &before[1][..]);
        assert_eq!(r.replicas[1].position(), &before[0][..]);
        assert_eq!(r.replicas[0].gradient().unwrap(), &grads[1][..]);
        assert_eq!(r.swap_rates(), vec![1.0]);
    }

    #[test]
    fn settings_and_models_are_checked() {
        let bad = |f: fn(&mut ReSgldSettings)| {
            let mut s = ReSgldSettings::new(1e-3, &[1.0, 2.0, 4.0]);
            f(&mut s);
            s.validate().is_err()
        };
        assert!(bad(|s| s.temperatures = vec![1.0]));
        assert!(bad(|s| s.temperatures[0] = 2.0));
        assert!(bad(|s| s.temperatures[2] = 1.5));
        assert!(bad(|s| s.step_sizes.pop().map(drop).unwrap_or(())));
        assert!(bad(|s| s.step_sizes[1] = 0.0));
        assert!(bad(|s| s.swap_every = 0));
        assert!(bad(|s| s.energy_batch = 0));
        assert!(bad(|s| s.correction = 0.5));
        assert!(!bad(|s| s.correction = f64::INFINITY));
        // A model without potentials is refused at init, by name.
        struct NoPotentials(LinearGaussian);
        impl Model for NoPotentials {
            fn dim(&self) -> usize {
                2
            }
            fn n_data(&self) -> usize {
                self.0.n_data()
            }
            fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
                self.0.grad_prior(t, o)
            }
            fn grad_data_sum(&self, t: &[f64], i: &[usize], o: &mut [f64]) -> Result<()> {
                self.0.grad_data_sum(t, i, o)
            }
        }
        let m = NoPotentials(LinearGaussian::synthetic(50, 2, 1.0, 10.0, 3).unwrap());
        let mut r = ReSgld::new(ReSgldSettings::new(1e-3, &[1.0, 2.0]), Minibatch::new(10)).unwrap();
        let e = r.init(&m, &[0.0, 0.0], &mut stream(1, &[0])).unwrap_err();
        assert!(e.is_unsupported() && e.to_string().contains("replica exchange"), "{e}");
        assert_eq!(r.step(&m, &mut stream(1, &[0])), Err(Error::NotInitialised));
    }
}
