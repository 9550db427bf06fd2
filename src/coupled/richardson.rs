//! Richardson–Romberg extrapolation over two coupled chains: SGRRLD and SGRRHMC.

use super::SharedIncrements;
use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::estimate::Estimate;
use crate::gradient::Minibatch;
use crate::model::Model;
use crate::rng::{ChainRng, stream};
use crate::run::{Recorder, RunSettings};
use crate::samplers::{Discretisation, Sghmc, Sgld};
use ndarray::Array1;
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// How the Gaussian increments of the two chains are related.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
    base: S,
    coupling: NoiseCoupling,
}

/// SGRRLD: Richardson–Romberg extrapolated SGLD.
pub type Sgrrld<E = Minibatch> = RichardsonRomberg<Sgld<E>>;
/// SGRRHMC: Richardson–Romberg extrapolated SGHMC (the momentum noise shared the same way).
pub type Sgrrhmc<E = Minibatch> = RichardsonRomberg<Sghmc<E>>;

impl<S: Discretisation> RichardsonRomberg<S> {
    /// Extrapolation of `base` (whose schedule gives chain A's steps) with shared increments.
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

/// The result of [`run_rr`].
#[derive(Debug, Clone)]
pub struct RrOutput<S> {
    /// The extrapolated (signed) estimate `2·π̂_{γ/2} − π̂_γ`, pooled over replicates.
    pub estimate: Estimate,
    /// Chain A alone (step γ): plain SGLD / SGHMC at step γ.
    pub coarse: Estimate,
    /// Chain B alone (step γ/2).
    pub fine: Estimate,
    /// Final states `(A, B)` of each replicate.
    pub chains: Vec<(S, S)>,
    /// Total cost (three minibatch gradients per iteration per replicate, plus setup once).
    pub cost: Cost,
    /// The one-off setup cost included in `cost`.
    pub setup_cost: Cost,
    /// Wall time of the whole run.
    pub wall_time: Duration,
}

impl<S> RrOutput<S> {
    /// The extrapolated estimate of replicate `c` alone.
    ///
    /// Errors: [`Error::NoSamples`] if `c` is out of range.
    pub fn replicate(&self, c: usize) -> Result<Estimate> {
        let none = || Error::NoSamples { reason: "no such replicate" };
        let fine = self.fine.part(c).ok_or_else(none)?;
        let coarse = self.coarse.part(c).ok_or_else(none)?;
        Estimate::combine([fine, coarse.scaled(-1.0)])
    }

    /// The discretisation-bias estimate of the mean, `mean(B) − mean(A)` ≈ `(π_{γ/2} − π_γ)(θ)`,
    /// which is about minus half of plain SGLD's bias at step γ.
    pub fn bias_estimate_mean(&self) -> Result<Array1<f64>> {
        Ok(self.fine.mean()? - self.coarse.mean()?)
    }
}

/// Runs `settings.n_chains` independent replicates of the coupled pair, all started at `theta0`.
///
/// `n_iter`, `burn_in` and `thin` count iterations of chain A (chain B does twice as many steps;
/// both of its draws in a kept iteration are kept). Replicate c uses the streams
/// `(seed, [c, 0])` for the shared increments and `(seed, [c, 1])`, `(seed, [c, 2])` for the
/// minibatches of A and B (and `(seed, [c, 3])` for A's increments under independent coupling).
/// With `parallel`, replicates and the two chains of each run on the rayon pool; the results are
/// the same either way.
///
/// Errors: as [`run`](crate::run()), each wrapped in [`Error::Chain`] with the replicate index.
pub fn run_rr<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    rr: &RichardsonRomberg<S>,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<RrOutput<S>> {
    settings.validate()?;
    let start = Instant::now();
    let one = |c: usize| -> Result<(Estimate, Estimate, S, S)> {
        let wrap = |e: Error| Error::Chain { chain: c, source: Box::new(e) };
        let c64 = c as u64;
        let noise_a = match rr.coupling {
            NoiseCoupling::Shared => stream(settings.seed, &[c64, 0]),
            NoiseCoupling::Independent => stream(settings.seed, &[c64, 3]),
        };
        let a =
            || run_chain(model, &rr.base, theta0, settings, noise_a.clone(), stream(settings.seed, &[c64, 1]), false);
        let b = || {
            run_chain(
                model,
                &rr.base,
                theta0,
                settings,
                stream(settings.seed, &[c64, 0]),
                stream(settings.seed, &[c64, 2]),
                true,
            )
        };
        let (ra, rb) = if settings.parallel { rayon::join(a, b) } else { (a(), b()) };
        let (ea, sa) = ra.map_err(wrap)?;
        let (eb, sb) = rb.map_err(wrap)?;
        Ok((ea, eb, sa, sb))
    };
    let results: Vec<Result<(Estimate, Estimate, S, S)>> = if settings.parallel && settings.n_chains > 1 {
        (0..settings.n_chains).into_par_iter().map(one).collect()
    } else {
        (0..settings.n_chains).map(one).collect()
    };
    let (mut coarse, mut fine, mut chains) = (Vec::new(), Vec::new(), Vec::new());
    for r in results {
        let (ea, eb, sa, sb) = r?;
        coarse.push(ea);
        fine.push(eb);
        chains.push((sa, sb));
    }
    let setup_cost = rr.base.setup_cost();
    let cost = chains.iter().map(|(a, b)| a.cost() + b.cost()).sum::<Cost>() + setup_cost;
    let coarse = Estimate::combine(coarse)?;
    let fine = Estimate::combine(fine)?;
    // B carries weight +γ on each of its two draws per iteration, A carries −γ: total Σγ.
    let estimate = Estimate::combine([fine.clone(), coarse.clone().scaled(-1.0)])?;
    Ok(RrOutput { estimate, coarse, fine, chains, cost, setup_cost, wall_time: start.elapsed() })
}

/// One chain of the pair: A (`fine = false`) takes full steps driven by `(z₁ + z₂)/√2`, B takes
/// two half steps driven by `z₁`, `z₂`; both draw `z₁, z₂` from their copy of the noise stream.
fn run_chain<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    base: &S,
    theta0: &[f64],
    settings: &RunSettings,
    mut noise: ChainRng,
    mut rng: ChainRng,
    fine: bool,
) -> Result<(Estimate, S)> {
    let mut s = base.clone();
    s.init(model, theta0, &mut rng)?;
    let d = model.dim();
    let mut rec = Recorder::new(settings, d, if fine { 2 } else { 1 }, s.gradient().is_some())?;
    let mut z = SharedIncrements::new(d);
    for k in 1..=settings.n_iter {
        z.draw(&mut noise);
        let keep = settings.keeps(k);
        let w = s.time_step(k + 1);
        if fine {
            s.step_fraction(model, k, 0.5, &z.z1, &mut rng)?;
            if keep {
                rec.record(s.position(), w, s.gradient(), s.cost().datum_gradients);
            }
            s.step_fraction(model, k, 0.5, &z.z2, &mut rng)?;
        } else {
            s.step_fraction(model, k, 1.0, &z.coarse, &mut rng)?;
        }
        if keep {
            rec.record(s.position(), w, s.gradient(), s.cost().datum_gradients);
        }
    }
    Ok((rec.finish(), s))
}
