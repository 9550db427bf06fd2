//! The comparison with NUTS, shared by `examples/vs_nuts.rs` and `benches/vs_nuts.rs`:
//! - NUTS from the `nuts-rs` crate (the engine of nutpie; diagonal mass matrix, its default
//!   adaptation) on **the crate's own model code**: its log density and gradient are
//!   [`Model::potential_and_grad_data_sum`] (one fused pass over the data, as a hand-written
//!   NUTS model would make) and the prior's, so that the ratio compares the samplers and not the
//!   kernels; run until every mean's Monte Carlo standard error is at most a target in posterior
//!   sds ([`nuts_until`]);
//! - `Sample`'s default path on the same model, aiming at an accuracy ([`sgmcmc_run`]);
//! - a reference posterior mean and sd by self-normalised importance sampling from the Laplace
//!   approximation widened by 10 %, antithetic pairs, with its own standard errors
//!   ([`reference`]): a potential evaluation per draw, no chain to converge.
#![allow(dead_code)]

use nuts_rs::{Chain, CpuLogpFunc, CpuMath, CpuMathError, DiagNutsSettings, HasDims, LogpError, Settings};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use sgmcmc::Model;
use sgmcmc::ndarray::Array2;
use std::collections::HashMap;
use std::time::Instant;

/// A model evaluation that failed (a non-finite density is a divergence to NUTS).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(String);

impl LogpError for ModelError {
    fn is_recoverable(&self) -> bool {
        true
    }
}

/// `log π(θ) = −U(θ)` and its gradient from a crate model, one fused pass over the data.
pub struct Logp<'a, M: ?Sized> {
    model: &'a M,
    all: Vec<usize>,
    prior: Vec<f64>,
    /// Gradient evaluations made (each a full pass over the N data).
    pub evaluations: u64,
}

impl<'a, M: Model + ?Sized> Logp<'a, M> {
    /// The log density of `model`.
    pub fn new(model: &'a M) -> Self {
        Logp { model, all: (0..model.n_data()).collect(), prior: vec![0.0; model.dim()], evaluations: 0 }
    }
}

impl<M: Model + ?Sized> HasDims for Logp<'_, M> {
    fn dim_sizes(&self) -> HashMap<String, u64> {
        let d = self.model.dim() as u64;
        HashMap::from([("unconstrained_parameter".to_string(), d), ("dim".to_string(), d)])
    }
}

impl<M: Model + ?Sized> CpuLogpFunc for Logp<'_, M> {
    type LogpError = ModelError;
    type FlowParameters = ();
    type ExpandedVector = Vec<f64>;

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn logp(&mut self, x: &[f64], grad: &mut [f64]) -> Result<f64, ModelError> {
        self.evaluations += 1;
        let err = |e: sgmcmc::Error| ModelError(e.to_string());
        let u = self.model.potential_and_grad_data_sum(x, &self.all, grad).map_err(err)?
            + self.model.potential_prior(x).map_err(err)?;
        self.model.grad_prior(x, &mut self.prior).map_err(err)?;
        grad.iter_mut().zip(&self.prior).for_each(|(g, p)| *g = -(*g + p));
        if u.is_finite() { Ok(-u) } else { Err(ModelError("non-finite potential".into())) }
    }

    fn expand_vector<R: rand::Rng + ?Sized>(&mut self, _rng: &mut R, array: &[f64]) -> Result<Vec<f64>, CpuMathError> {
        Ok(array.to_vec())
    }
}

/// What [`nuts_until`] did.
#[derive(Debug, Clone)]
pub struct NutsRun {
    /// Wall time, tuning and draws, on the calling thread.
    pub seconds: f64,
    /// Tuning draws per chain (nuts-rs's default schedule).
    pub tune: u64,
    /// Kept draws per chain.
    pub draws: u64,
    /// Gradient (and density) evaluations, each a full pass over the data, all chains.
    pub gradients: u64,
    /// Divergent transitions after tuning.
    pub divergences: u64,
    /// Posterior means and sds from the kept draws.
    pub mean: Vec<f64>,
    /// As `mean`.
    pub sd: Vec<f64>,
    /// The largest Monte Carlo standard error of a mean, in its posterior sds.
    pub max_mcse: f64,
    /// Whether it reached the target before `max_draws`.
    pub reached: bool,
}

/// NUTS (nuts-rs `DiagNutsSettings::default()`: 400 tuning draws, diagonal mass matrix adapted
/// in the tuning, maximum tree depth 10) with `chains` chains run one after the other on this
/// thread, each started uniformly in `[−2, 2]^d` (nutpie's default initialisation), drawing in
/// rounds (100 draws per chain, then a quarter more each round) until every coordinate's mean has
/// a Monte Carlo standard error (ArviZ's, from the chains' ESS) of at most `target` posterior sds,
/// or `max_draws` per chain.
pub fn nuts_until<M: Model + ?Sized>(
    model: &M,
    chains: usize,
    target: f64,
    seed: u64,
    max_draws: u64,
) -> Result<NutsRun, String> {
    let d = model.dim();
    let started = Instant::now();
    let settings = DiagNutsSettings { seed, num_chains: chains, ..Default::default() };
    let tune = settings.num_tune;
    let mut rngs: Vec<Xoshiro256PlusPlus> = (0..chains)
        .map(|c| Xoshiro256PlusPlus::seed_from_u64(seed.wrapping_mul(0x9E37_79B9).wrapping_add(c as u64)))
        .collect();
    let mut runs = Vec::with_capacity(chains);
    for (c, rng) in rngs.iter_mut().enumerate() {
        let mut chain = settings.new_chain(c as u64, CpuMath::new(Logp::new(model)), rng).map_err(|e| e.to_string())?;
        let start: Vec<f64> = (0..d).map(|_| rng.random_range(-2.0..2.0)).collect();
        chain.set_position(&start).map_err(|e| e.to_string())?;
        runs.push(chain);
    }
    let mut draws: Vec<Vec<Vec<f64>>> = vec![Vec::new(); chains];
    let (mut gradients, mut divergences) = (0u64, 0u64);
    // Tuning.
    for chain in runs.iter_mut() {
        for _ in 0..tune {
            let (_, p) = chain.draw().map_err(|e| e.to_string())?;
            gradients += p.num_gradients;
        }
    }
    let mut batch = 100u64;
    loop {
        for (c, chain) in runs.iter_mut().enumerate() {
            for _ in 0..batch {
                let (x, p) = chain.draw().map_err(|e| e.to_string())?;
                gradients += p.num_gradients;
                divergences += u64::from(p.diverging);
                draws[c].push(x.to_vec());
            }
        }
        let n = draws[0].len();
        let (mean, sd, max_mcse) = chain_summary(&draws, d);
        if max_mcse <= target || n as u64 >= max_draws {
            return Ok(NutsRun {
                seconds: started.elapsed().as_secs_f64(),
                tune,
                draws: n as u64,
                gradients,
                divergences,
                mean,
                sd,
                max_mcse,
                reached: max_mcse <= target,
            });
        }
        batch = ((n as f64 * 0.25).ceil() as u64).max(100);
    }
}

/// Means, sds and the largest MCSE of a mean in sds, of per-chain draws.
fn chain_summary(draws: &[Vec<Vec<f64>>], d: usize) -> (Vec<f64>, Vec<f64>, f64) {
    let (mean, sd, worst, _) = chain_summary_sd(draws, d);
    (mean, sd, worst)
}

/// As [`chain_summary`], with the largest relative MCSE of an sd too.
fn chain_summary_sd(draws: &[Vec<Vec<f64>>], d: usize) -> (Vec<f64>, Vec<f64>, f64, f64) {
    let (c, n) = (draws.len(), draws[0].len());
    let (mut mean, mut sd, mut worst, mut worst_sd) = (vec![0.0; d], vec![0.0; d], 0.0_f64, 0.0_f64);
    for j in 0..d {
        let x = Array2::from_shape_fn((c, n), |(k, i)| draws[k][i][j]);
        mean[j] = x.mean().unwrap_or(f64::NAN);
        sd[j] = x.std(1.0);
        let mcse = sgmcmc::diagnostics::mcse_mean(x.view()).unwrap_or(f64::INFINITY);
        worst = worst.max(mcse / sd[j]);
        let mcse_sd = sgmcmc::diagnostics::mcse_sd(x.view()).unwrap_or(f64::INFINITY);
        worst_sd = worst_sd.max(mcse_sd / sd[j]);
    }
    (mean, sd, worst, worst_sd)
}

/// A reference from a long NUTS run (where importance sampling from the Laplace approximation
/// fails: a posterior far from Gaussian): `chains` chains of `draws` draws after nuts-rs's
/// tuning, seeded by `seed`, on the current thread.
pub fn nuts_reference<M: Model + ?Sized>(model: &M, chains: usize, draws: u64, seed: u64) -> Result<Reference, String> {
    let started = Instant::now();
    let out = nuts_draws(model, chains, draws, seed)?;
    Ok(reference_of(&out, started.elapsed().as_secs_f64()))
}

/// A reference from per-chain draws (chains × draws × width): means, sds and the largest
/// standard error of a mean (in sds) or of an sd (relative).
pub fn reference_of(draws: &[Vec<Vec<f64>>], seconds: f64) -> Reference {
    let width = draws[0][0].len();
    let (mean, sd, worst, worst_sd) = chain_summary_sd(draws, width);
    let total = draws.iter().map(Vec::len).sum();
    Reference { mean, sd, max_se: worst.max(worst_sd), ess: f64::NAN, draws: total, seconds }
}

/// NUTS's draws (chains × draws × d) after nuts-rs's tuning, chains one after the other on this
/// thread, each started uniformly in `[−2, 2]^d`.
pub fn nuts_draws<M: Model + ?Sized>(
    model: &M,
    chains: usize,
    draws: u64,
    seed: u64,
) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let d = model.dim();
    let settings = DiagNutsSettings { seed, num_chains: chains, ..Default::default() };
    let mut out: Vec<Vec<Vec<f64>>> = Vec::with_capacity(chains);
    for c in 0..chains {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed.wrapping_mul(0xA24B_AED4).wrapping_add(c as u64));
        let mut chain =
            settings.new_chain(c as u64, CpuMath::new(Logp::new(model)), &mut rng).map_err(|e| e.to_string())?;
        let start: Vec<f64> = (0..d).map(|_| rng.random_range(-2.0..2.0)).collect();
        chain.set_position(&start).map_err(|e| e.to_string())?;
        for _ in 0..settings.num_tune {
            chain.draw().map_err(|e| e.to_string())?;
        }
        let mut kept = Vec::with_capacity(draws as usize);
        for _ in 0..draws {
            let (x, _) = chain.draw().map_err(|e| e.to_string())?;
            kept.push(x.to_vec());
        }
        out.push(kept);
    }
    Ok(out)
}

/// A reference posterior: means and sds with their standard errors.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Posterior means.
    pub mean: Vec<f64>,
    /// Posterior sds.
    pub sd: Vec<f64>,
    /// The largest standard error of a mean (in sds) or of an sd (relative).
    pub max_se: f64,
    /// Effective sample size of the importance weights.
    pub ess: f64,
    /// Draws.
    pub draws: usize,
    /// Wall time.
    pub seconds: f64,
}

/// The posterior mean and sd by self-normalised importance sampling from `N(mode, (1.1)² Σ)`,
/// `Σ = hessian⁻¹` (the Laplace approximation, widened so that its tails cover the posterior's),
/// `pairs` antithetic pairs `mode ± 1.1 L z` seeded by `seed`, in parallel on the current rayon
/// pool; standard errors by the delta method for ratio estimators.
pub fn reference<M: Model + Sync + ?Sized>(
    model: &M,
    mode: &[f64],
    hessian: &Array2<f64>,
    pairs: usize,
    seed: u64,
) -> Result<Reference, String> {
    let started = Instant::now();
    let d = mode.len();
    let cov = super::spd_inverse("Laplace covariance", hessian)?;
    let l = super::cholesky_lower("Laplace covariance", &cov)?;
    let widen = 1.1_f64;
    let all: Vec<usize> = (0..model.n_data()).collect();
    let l = &l;
    // Per draw: θ, log w = −U(θ) − log q(θ) (up to a constant).
    let draws: Vec<(Vec<f64>, f64)> = (0..pairs)
        .into_par_iter()
        .flat_map_iter(|k| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ (k as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
            let mut z = vec![0.0; d];
            super::normals(&mut rng, &mut z);
            let q = 0.5 * z.iter().map(|v| v * v).sum::<f64>();
            [1.0, -1.0].into_iter().map(move |sign| {
                let theta: Vec<f64> =
                    (0..d).map(|i| mode[i] + sign * widen * (0..=i).map(|m| l[[i, m]] * z[m]).sum::<f64>()).collect();
                (theta, q)
            })
        })
        .map(|(theta, q)| {
            let u = model.potential_data_sum(&theta, &all).unwrap_or(f64::INFINITY)
                + model.potential_prior(&theta).unwrap_or(f64::INFINITY);
            let lw = if u.is_finite() { -u + q } else { f64::NEG_INFINITY };
            (theta, lw)
        })
        .collect();
    let top = draws.iter().map(|(_, lw)| *lw).fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = draws.iter().map(|(_, lw)| (lw - top).exp()).collect();
    let total: f64 = w.iter().sum();
    let ess = total * total / w.iter().map(|w| w * w).sum::<f64>();
    let mut mean = vec![0.0; d];
    let mut sd = vec![0.0; d];
    let mut max_se = 0.0_f64;
    for j in 0..d {
        let m = draws.iter().zip(&w).map(|((t, _), w)| w * t[j]).sum::<f64>() / total;
        let v = draws.iter().zip(&w).map(|((t, _), w)| w * (t[j] - m).powi(2)).sum::<f64>() / total;
        mean[j] = m;
        sd[j] = v.sqrt();
        // Delta method for the ratio estimators: Var ≈ Σ w̃² (f − E f)², w̃ = w/Σw.
        let wn = |w: f64| w / total;
        let se_m = draws.iter().zip(&w).map(|((t, _), w)| (wn(*w) * (t[j] - m)).powi(2)).sum::<f64>().sqrt();
        let se_v =
            draws.iter().zip(&w).map(|((t, _), w)| (wn(*w) * ((t[j] - m).powi(2) - v)).powi(2)).sum::<f64>().sqrt();
        max_se = max_se.max(se_m / sd[j]).max(0.5 * se_v / v);
    }
    Ok(Reference { mean, sd, max_se, ess, draws: draws.len(), seconds: started.elapsed().as_secs_f64() })
}

/// The worst error of means (in reference sds) and sds (relative), `(mean, sd)`.
pub fn errors(mean: &[f64], sd: &[f64], r: &Reference) -> (f64, f64) {
    let em = mean.iter().zip(&r.mean).zip(&r.sd).map(|((m, t), s)| (m - t).abs() / s).fold(0.0, f64::max);
    let es = sd.iter().zip(&r.sd).map(|(s, t)| (s / t - 1.0).abs()).fold(0.0, f64::max);
    (em, es)
}

/// Draws of an `Estimate` as (means, sds).
pub fn moments(est: &sgmcmc::Estimate) -> (Vec<f64>, Vec<f64>) {
    let m = est.mean().expect("draws").to_vec();
    let v = est.variance().expect("draws");
    (m, v.iter().map(|v| v.sqrt()).collect())
}
