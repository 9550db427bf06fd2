//! The runner: burn-in, thinning, storage, chains in parallel, observers that can stop a run,
//! divergences as data, cost and time, checkpoint and resume. Written once: chains of any
//! [`Sampler`] and Richardson–Romberg pairs are "units" driven by the same loop, and every
//! fan-out (chains, pairs, multilevel samples) goes through [`fan_out`]. Beside it: observers
//! (`observe.rs`), the terminal progress display (`progress.rs`) and checkpoint files
//! (`checkpoint.rs`).

pub mod checkpoint;
pub mod observe;
pub(crate) mod placement;
pub mod progress;
pub mod runner;

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::numeric::rng::{ChainRng, DEFAULT_SEED, stream};
use crate::run::observe::{Control, Observer, Progress};
use crate::run::placement::{Distribute, Local};
use crate::run::runner::Runner;
use crate::samplers::Sampler;
use crate::trace::estimate::{Estimate, Moments, Part, Samples};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What a run keeps of each chain.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Storage {
    /// Every recorded draw and its weight (memory: n_samples × d per chain). The default.
    #[default]
    Samples,
    /// Every recorded draw, its weight and the gradient estimate at it (for ZV
    /// post-processing; twice the memory).
    SamplesAndGradients,
    /// Only running weighted first and second moments (memory d² per chain, O(d²) work per
    /// recorded draw): mean and covariance, but no expectation of arbitrary functions.
    Moments,
}

/// Settings of a run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSettings {
    /// Total iterations per chain, burn-in included (≥ 1). Default 10 000.
    pub n_iter: u64,
    /// Iterations discarded at the start of each chain (< `n_iter`). Default 1 000.
    pub burn_in: u64,
    /// Keep every `thin`-th iteration after burn-in (≥ 1). Default 1.
    pub thin: u64,
    /// Number of independent chains (≥ 1). Default 1.
    pub n_chains: usize,
    /// Master seed; chain c uses the stream derived from `(seed, c)`, so results do not depend
    /// on the number of threads. Default [`DEFAULT_SEED`].
    pub seed: u64,
    /// What to keep. Default [`Storage::Samples`].
    pub storage: Storage,
    /// Run chains in parallel on the rayon thread pool (same results as serial). Default true.
    pub parallel: bool,
    /// What a non-finite state or gradient in one chain does to the run. Default
    /// [`OnDivergence::Error`].
    pub on_divergence: OnDivergence,
    /// The most memory, in bytes, that the draws kept by the run may take (all chains together;
    /// `None`: no limit). Checked before anything runs, so a run that cannot fit fails at once
    /// with [`Error::MemoryLimit`] instead of aborting the process. Default 8 GiB.
    pub memory_limit: Option<u64>,
    /// Run [`check_model`](crate::check_model) at each chain's starting point before anything
    /// else, so that a gradient of the wrong sign is refused at once. Its cost (at most 9
    /// gradient and 8 potential evaluations on 16 data items per distinct start) is not counted
    /// in the run's [`Cost`], so that budgets stay exact. Default true; turn it off for a model whose gradient is
    /// right but curves downwards everywhere around the start and has no potentials.
    pub check_model: bool,
    /// The runaway detector: a chain whose ‖θ‖ exceeds this factor times the largest ‖θ‖ of
    /// the first half of the chain so far (checked from iteration 64 on) stops with
    /// [`Error::Runaway`] — a correct sampler moves at most linearly away from its start, a
    /// wrong-sign gradient or an unstable step grows geometrically. When the model has
    /// potentials, a trigger is confirmed first: if the full-data potential there is below the
    /// one at the chain's start, the chain is travelling downhill from a start far below the
    /// posterior's scale (with an adapting step, that growth is geometric too) and the detector
    /// takes the new norm as its scale instead of stopping it (two full-data potentials, not
    /// counted in the cost). `None` turns it off. Default `Some(1e3)`.
    pub runaway_factor: Option<f64>,
}

/// What a chain that diverges (non-finite state or gradient) does to its run.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnDivergence {
    /// The run returns the error ([`Error::Chain`] around
    /// [`Error::NonFiniteState`]/[`Error::NonFiniteGradient`] with the iteration). The default.
    #[default]
    Error,
    /// The chain stops and is reported in [`RunOutput::divergences`] (chain, iteration, its draws
    /// up to the divergence); the other chains' results are returned as usual. The pooled
    /// estimate leaves the diverged chains out. If every chain diverges, the run returns the
    /// first one's error.
    Report,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            n_iter: 10_000,
            burn_in: 1_000,
            thin: 1,
            n_chains: 1,
            seed: DEFAULT_SEED,
            storage: Storage::Samples,
            parallel: true,
            on_divergence: OnDivergence::Error,
            memory_limit: Some(8 << 30),
            check_model: true,
            runaway_factor: Some(1e3),
        }
    }
}

impl RunSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        if self.n_iter == 0 {
            return Err(Error::invalid("n_iter", self.n_iter, "must be >= 1"));
        }
        if self.burn_in >= self.n_iter {
            return Err(Error::invalid("burn_in", self.burn_in, "must be below n_iter (no sample would be kept)"));
        }
        if self.thin == 0 {
            return Err(Error::invalid("thin", self.thin, "must be >= 1"));
        }
        if self.n_chains == 0 {
            return Err(Error::invalid("n_chains", self.n_chains, "must be >= 1"));
        }
        if let Some(f) = self.runaway_factor
            && (f.is_nan() || f <= 1.0)
        {
            return Err(Error::invalid("runaway_factor", f, "must be > 1 (or None to turn the detector off)"));
        }
        if self.thin > self.n_iter - self.burn_in {
            return Err(Error::invalid("thin", self.thin, "is larger than n_iter − burn_in (no draw would be kept)"));
        }
        Ok(())
    }

    /// The bytes the kept draws of a run take in dimension `d`, with `draws_per_iteration` draws
    /// kept per recorded iteration of each chain (saturating).
    pub fn storage_bytes(&self, d: usize, draws_per_iteration: usize) -> u64 {
        let d = d as u128;
        let per_chain: u128 = match self.storage {
            // d² + 3d numbers of running moments.
            Storage::Moments => (d * d + 3 * d) * 8,
            // Per draw: θ (d), weight, cost and step size (3), and ∇Ũ (d) if kept.
            Storage::Samples | Storage::SamplesAndGradients => {
                let per_draw = if self.storage == Storage::Samples { d + 3 } else { 2 * d + 3 };
                u128::from(self.n_recorded()) * draws_per_iteration as u128 * per_draw * 8
            }
        };
        u64::try_from(per_chain.saturating_mul(self.n_chains as u128)).unwrap_or(u64::MAX)
    }

    /// Errors with [`Error::MemoryLimit`] if [`storage_bytes`](Self::storage_bytes) exceeds the
    /// limit.
    pub(crate) fn check_memory(&self, d: usize, draws_per_iteration: usize) -> Result<()> {
        let needed = self.storage_bytes(d, draws_per_iteration);
        match self.memory_limit {
            Some(limit) if needed > limit => Err(Error::MemoryLimit { needed, limit }),
            _ => Ok(()),
        }
    }

    /// The number of draws each chain records: `⌊(n_iter − burn_in) / thin⌋`.
    pub fn n_recorded(&self) -> u64 {
        (self.n_iter.saturating_sub(self.burn_in)) / self.thin.max(1)
    }
}

/// A chain that diverged, under [`OnDivergence::Report`].
#[non_exhaustive]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Divergence {
    /// The chain (or replicate) index.
    pub chain: usize,
    /// The iteration at which the state or gradient was found non-finite.
    pub iteration: u64,
    /// `true` for a non-finite state, `false` for a non-finite gradient.
    pub non_finite_state: bool,
    /// The error's message.
    pub message: String,
    /// What the chain drew before it diverged (left out of the pooled estimate).
    pub draws: Vec<Estimate>,
}

impl Divergence {
    /// The error the chain raised, as [`OnDivergence::Error`] would have returned it.
    pub fn to_error(&self) -> Error {
        let source = if self.non_finite_state {
            Error::NonFiniteState { iteration: self.iteration }
        } else {
            Error::NonFiniteGradient { iteration: self.iteration }
        };
        Error::Chain { chain: self.chain, source: Box::new(source) }
    }
}

/// What one chain of a run did.
#[non_exhaustive]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChainReport<S> {
    /// The sampler in its final state (its position, and sampler-specific statistics such as
    /// [`Mala::acceptance_rate`](crate::Mala::acceptance_rate)).
    pub sampler: S,
    /// The chain's cost, initial gradient included (the one-off setup cost is not: it is in
    /// [`RunOutput::setup_cost`]).
    pub cost: Cost,
    /// The chain's wall time, `init` included (summed over resumptions).
    pub wall_time: Duration,
    /// Iterations done (fewer than planned if the chain was stopped or diverged).
    pub iterations: u64,
    /// Whether an observer stopped the chain before its last planned iteration.
    pub stopped: bool,
    /// Whether the chain diverged (then it is in [`RunOutput::divergences`]).
    pub diverged: bool,
    /// The chain's generator, where it stopped (to resume).
    rng: ChainRng,
}

/// The result of a [`Runner`](crate::run::runner::Runner) of chains: the pooled estimate and a
/// report per chain. It is also the run's checkpoint: [`save`](Self::save) it,
/// [`load`](Self::load) it, and [`Resume`](crate::run::runner::Resume) it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOutput<S> {
    /// The estimate pooled over chains; `estimate.part(i)` is the i-th chain that did not
    /// diverge (all chains, unless [`OnDivergence::Report`] left some out).
    pub estimate: Estimate,
    /// One report per chain, in chain order.
    pub chains: Vec<ChainReport<S>>,
    /// Total cost: every chain's, plus the sampler's one-off setup cost once.
    pub cost: Cost,
    /// The one-off setup cost included in `cost` (e.g. a control variate's centring).
    pub setup_cost: Cost,
    /// Wall time of the whole run (summed over resumptions).
    pub wall_time: Duration,
    /// The settings the run was made with.
    pub settings: RunSettings,
    /// Chains that diverged, under [`OnDivergence::Report`].
    pub divergences: Vec<Divergence>,
    /// The model's dimension, data size and data fingerprint (checked on resume).
    model: crate::run::checkpoint::ModelFingerprint,
}

impl<S: Sampler + serde::Serialize + serde::de::DeserializeOwned> RunOutput<S> {
    /// Saves the run (every chain's sampler, estimator and generator state, the draws so far, the
    /// cost) to `path`, in the [checkpoint format](crate::run::checkpoint).
    /// [`Resume`](crate::run::runner::Resume) a [`load`](Self::load)ed run to continue it
    /// bit-identically.
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        checkpoint::save(path.as_ref(), "run", std::any::type_name::<S>(), self)
    }

    /// Loads a run saved by [`save`](Self::save) with the same sampler type.
    ///
    /// Errors: [`Error::Io`]; [`Error::CorruptCheckpoint`] (truncated, altered, not a
    /// checkpoint); [`Error::CheckpointMismatch`] (another format version, kind of run or sampler).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        checkpoint::load(path.as_ref(), "run", std::any::type_name::<S>())
    }
}

impl<S> RunOutput<S> {
    /// Iterations done (all chains) per second of wall time.
    pub fn iterations_per_second(&self) -> f64 {
        self.chains.iter().map(|c| c.iterations as f64).sum::<f64>() / self.wall_time.as_secs_f64()
    }

    /// Datum-gradient evaluations per second of wall time.
    pub fn datum_gradients_per_second(&self) -> f64 {
        self.cost.datum_gradients as f64 / self.wall_time.as_secs_f64()
    }

    /// Whether the chains mixed: [`diagnostics::convergence`](crate::trace::diagnostics::convergence)
    /// of the pooled estimate (split-R̂ ≤ 1.01 and bulk and tail ESS ≥ 400 for every
    /// coordinate). Print it: a run does not fail for not converging, it says so. The draws
    /// are judged as stored, on the sampler's coordinates: for a constrained model judge them
    /// on the scale you read with [`Constrained::convergence`](crate::Constrained::convergence)
    /// ([`Sample`](crate::Sample) does, with the step bias).
    ///
    /// Errors: as [`diagnostics::summary`](crate::trace::diagnostics::summary) (e.g. streaming
    /// storage keeps no draws).
    pub fn convergence(&self) -> Result<crate::trace::diagnostics::Convergence> {
        crate::trace::diagnostics::convergence(&self.estimate)
    }

    /// Whether some chain ended before `settings.n_iter` iterations (stopped or diverged): the
    /// run can then be resumed ([`Resume`](crate::run::runner::Resume)).
    pub fn is_complete(&self) -> bool {
        self.chains.iter().all(|c| c.diverged || c.iterations >= self.settings.n_iter)
    }
}

/// Runs `settings.n_chains` chains of `sampler` on `model`, all started at `theta0`.
///
/// Each chain is a clone of `sampler`, bound by [`Sampler::init`] and driven by the generator
/// [`stream`]`(seed, [c])`. After `burn_in` iterations every `thin`-th position is recorded with
/// the sampler's [`weight`](Sampler::weight) (and its gradient for
/// [`Storage::SamplesAndGradients`]). Nothing of `theta0` or `sampler` is changed.
///
/// Errors: invalid settings; anything `init` or `step` returns, wrapped in [`Error::Chain`]
/// with the chain's index (the lowest failing index when several fail); [`Error::NotStored`] if
/// gradients are to be stored but the sampler keeps none.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{StepSize};
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7).unwrap();
/// let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, Minibatch::new(100)).unwrap();
/// let settings = RunSettings { n_iter: 5_000, burn_in: 500, ..Default::default() };
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run().unwrap();
/// let mean = out.estimate.mean().unwrap();
/// assert_eq!(mean.len(), 2);
/// ```
#[deprecated(since = "0.2.0", note = "use `Runner::new(model, sampler).start(theta0).settings(*settings).run()`")]
pub fn run<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<RunOutput<S>> {
    Runner::new(model, sampler).start(theta0).settings(*settings).run()
}

/// As [`run`], with one starting point per chain (`inits.len()` must equal `n_chains`): a slice
/// of anything that views as `&[f64]` — `&[&[f64]]`, `&Vec<Vec<f64>>`, `&[[f64; D]; C]`, … (see
/// [`dispersed_starts`](crate::tune::dispersed_starts) for starting points spread around the mode, which R̂ needs).
///
/// A panic inside a chain (the model's code panicking, say) is not an error value: it
/// propagates to the caller with its own payload once the chains running at that moment have
/// finished (they are not interrupted; chains not yet started may not start), and the run's
/// output is lost. Under MPI a panic aborts the whole job
/// instead (module `distributed`, feature `mpi`). Models should return errors through
/// [`Model::grad_data_sum`] rather than panic.
///
/// ```
/// use sgmcmc::prelude::*;
///
/// let model = LinearGaussian::synthetic(500, 3, 1.0, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, n_chains: 4, ..Default::default() };
/// let starts = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, -1.0, -1.0]];
/// let out = Runner::new(&model, &sgld).starts(&starts).settings(settings).run()?;
/// assert_eq!(out.chains.len(), 4);
/// let starts: Vec<Vec<f64>> = starts.iter().map(|s| s.to_vec()).collect();
/// assert!(Runner::new(&model, &sgld).starts(&starts).settings(settings).run().is_ok());
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[deprecated(since = "0.2.0", note = "use `Runner::new(model, sampler).starts(inits).settings(*settings).run()`")]
pub fn run_chains<M: Model + ?Sized, S: Sampler, I: AsRef<[f64]>>(
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
) -> Result<RunOutput<S>> {
    Runner::new(model, sampler).starts(inits).settings(*settings).run()
}

/// As [`run`], with observers (see [`observe`](crate::run::observe)): each is called at every chain's
/// start, every [`interval`](Observer::interval) iterations and at its end, from the thread
/// running that chain, and may stop it. A stopped chain keeps exactly the draws recorded up to
/// the iteration where it stopped; the run can be [`resume`]d.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Resume};
/// use sgmcmc::observe::Budget;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?;
/// let settings = RunSettings { n_iter: 5_000, burn_in: 500, n_chains: 2, ..Default::default() };
/// // 200 000 datum gradients for the run, 100 000 per chain: each chain stops once its initial
/// // gradient and 999 steps have cost 100 × 1 000.
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).observers(&[&Budget::datum_gradients(200_000)]).run()?;
/// assert!(!out.is_complete());
/// assert_eq!(out.chains[0].iterations, 999);
/// assert_eq!(out.cost.datum_gradients, 200_000);
/// // Later: carry on to 5 000 iterations, as if it had never stopped.
/// let done = Resume::new(&model, out).run()?;
/// assert!(done.is_complete());
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, sampler).start(theta0).settings(*settings).observers(observers).run()`"
)]
pub fn run_observed<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    let inits = vec![theta0; settings.n_chains];
    Runner::new(model, sampler).starts(&inits).settings(*settings).observers(observers).run()
}

/// As [`run_observed`], with one starting point per chain (`inits.len()` must equal `n_chains`;
/// anything that views as `&[f64]`, as [`run_chains`]).
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, sampler).starts(inits).settings(*settings).observers(observers).run()`"
)]
pub fn run_chains_observed<M: Model + ?Sized, S: Sampler, I: AsRef<[f64]>>(
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    run_chains_on(&Local, model, sampler, inits, settings, observers)
}

/// [`run_chains_observed`] on a placement: the chains placed here run, and over ranks every
/// process gets the whole run (`distributed::run_chains_mpi`). The one runner of chains.
pub(crate) fn run_chains_on<P, M, S, I>(
    p: &P,
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>>
where
    P: Distribute<RunOutput<S>>,
    M: Model + ?Sized,
    S: Sampler,
    I: AsRef<[f64]>,
{
    p.distribute(
        settings.n_chains,
        |units| run_chain_subset(model, sampler, inits, settings, observers, units),
        merge_chain_subsets,
    )
}

/// The chains `selected` (increasing indices below `n_chains`) of the run
/// [`run_chains_observed`] would make, with the same streams `(seed, [c])`: the output holds
/// only those chains, in that order. The MPI runner gives each rank a subset and merges the
/// outputs with [`merge_chain_subsets`].
pub(crate) fn run_chain_subset<M: Model + ?Sized, S: Sampler, I: AsRef<[f64]>>(
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
    selected: &[usize],
) -> Result<RunOutput<S>> {
    settings.validate()?;
    crate::error::check_len("number of starting points (n_chains)", settings.n_chains, inits.len())?;
    let d = model.dim();
    settings.check_memory(d, 1)?;
    check_burn_in(sampler, settings)?;
    let units: Vec<ChainUnit<S>> = selected
        .iter()
        .map(|&c| ChainUnit {
            chain: c,
            sampler: sampler.clone(),
            rng: stream(settings.seed, &[c as u64]),
            recorder: None,
            theta0: inits[c].as_ref().to_vec(),
            iteration: 0,
            started: false,
            wall: Duration::ZERO,
            runaway: RunawayDetector::default(),
        })
        .collect();
    if settings.check_model {
        check_starts(model, inits, selected)?;
    }
    let setup_cost = sampler.setup_cost();
    let start = Instant::now();
    let done = drive(model, units, settings, observers, start)?.into_iter().map(Finished::into_done).collect();
    let wall = start.elapsed();
    assemble(done, settings, setup_cost, wall, Duration::ZERO, crate::run::checkpoint::ModelFingerprint::of(model))
}

/// Merges the outputs of [`run_chain_subset`] over disjoint subsets that together cover every
/// chain (`parts[i]` ran chains `subsets[i]`) into the output of the whole run: chains, estimate
/// parts and divergences in chain order, costs summed (the setup cost once), the wall time the
/// longest part's. The pooled estimate is built exactly as a single process builds it.
pub(crate) fn merge_chain_subsets<S>(parts: Vec<(Vec<usize>, RunOutput<S>)>) -> Result<RunOutput<S>> {
    let mut chains: Vec<(usize, ChainReport<S>, Option<Estimate>)> = Vec::new();
    let mut divergences = Vec::new();
    let (mut settings, mut setup_cost, mut wall, mut fingerprint) = (None, Cost::default(), Duration::ZERO, None);
    for (subset, out) in parts {
        if subset.len() != out.chains.len() {
            return Err(Error::CorruptCheckpoint { reason: "a part's chains do not match its subset".into() });
        }
        settings.get_or_insert(out.settings);
        setup_cost = out.setup_cost;
        wall = wall.max(out.wall_time);
        fingerprint.get_or_insert(out.model);
        let mut healthy = out.estimate.into_parts().into_iter();
        for (c, report) in subset.into_iter().zip(out.chains) {
            let est = if report.diverged { None } else { healthy.next() };
            chains.push((c, report, est));
        }
        divergences.extend(out.divergences);
    }
    let settings = settings.ok_or(Error::NoSamples { reason: "no chain" })?;
    chains.sort_by_key(|c| c.0);
    if chains.iter().enumerate().any(|(i, c)| c.0 != i) || chains.len() != settings.n_chains {
        return Err(Error::CorruptCheckpoint { reason: "the parts do not cover every chain once".into() });
    }
    divergences.sort_by_key(|d: &Divergence| d.chain);
    let estimates: Vec<Estimate> = chains.iter_mut().filter_map(|c| c.2.take()).collect();
    if estimates.is_empty() {
        return Err(divergences.first().map(Divergence::to_error).unwrap_or(Error::NoSamples { reason: "no chain" }));
    }
    let chains: Vec<ChainReport<S>> = chains.into_iter().map(|c| c.1).collect();
    let cost = chains.iter().map(|c| c.cost).sum::<Cost>() + setup_cost;
    Ok(RunOutput {
        estimate: Estimate::combine(estimates)?,
        chains,
        cost,
        setup_cost,
        wall_time: wall,
        settings,
        divergences,
        model: fingerprint.ok_or(Error::NoSamples { reason: "no chain" })?,
    })
}

/// Refuses a burn-in shorter than the sampler's adaptation (its draws then are not exact).
pub(crate) fn check_burn_in<S: Sampler>(sampler: &S, settings: &RunSettings) -> Result<()> {
    let adapt = sampler.adaptation_steps();
    if settings.burn_in < adapt {
        return Err(Error::invalid(
            "burn_in",
            format!("{} (the sampler adapts during its first {adapt} iterations)", settings.burn_in),
            "is shorter than the sampler's adaptation, whose draws are not exact: raise burn_in or lower the sampler's adapt_steps (0 for a fixed step)",
        ));
    }
    Ok(())
}

/// Runs [`check_model`](crate::check_model) at each distinct starting point (errors wrapped
/// with the chain), returning the cost spent (which runs do not count).
pub(crate) fn check_starts<M: Model + ?Sized, I: AsRef<[f64]>>(
    model: &M,
    inits: &[I],
    selected: &[usize],
) -> Result<Cost> {
    let mut cost = Cost::default();
    for &c in selected {
        let theta = inits[c].as_ref();
        if selected.iter().take_while(|&&o| o < c).any(|&o| inits[o].as_ref() == theta) {
            continue;
        }
        if theta.len() != model.dim() || !crate::error::all_finite(theta) {
            // The sampler's own checks name these.
            continue;
        }
        let check = crate::models::check::check_model(model, theta, &crate::models::check::CheckSettings::default())
            .map_err(|e| Error::Chain { chain: c, source: Box::new(e) })?;
        cost += check.cost;
    }
    Ok(cost)
}

/// Continues a run that was stopped (or resumes one loaded from a checkpoint) up to
/// `run.settings.n_iter` iterations per chain — raise that field first to extend a finished
/// run. The draws are **bit-identical** to those of an uninterrupted run with the same settings:
/// each chain carries its sampler state, its generator and its recorder.
///
/// Errors: [`Error::DimensionMismatch`] if `model` does not have the run's dimension; invalid
/// settings (`n_iter` below the iterations already done); then as [`run`].
#[deprecated(since = "0.2.0", note = "use `Resume::new(model, run).observers(observers).run()`")]
pub fn resume<M: Model + ?Sized, S: Sampler>(
    model: &M,
    run: RunOutput<S>,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    resume_inner(model, run, observers)
}

/// The body of [`Resume::run`](crate::run::runner::Resume::run) for chains.
pub(crate) fn resume_inner<M: Model + ?Sized, S: Sampler>(
    model: &M,
    run: RunOutput<S>,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    let settings = run.settings;
    settings.validate()?;
    crate::error::check_len("model dimension (resumed run)", run.model.dim, model.dim())?;
    run.model.check(model)?;
    settings.check_memory(run.model.dim, 1)?;
    if run.chains.iter().any(|c| c.iterations > settings.n_iter) {
        return Err(Error::invalid("n_iter", settings.n_iter, "is below the iterations a chain has already done"));
    }
    let mut healthy = run.estimate.into_parts().into_iter();
    let mut diverged = run.divergences.into_iter();
    let mut units = Vec::with_capacity(run.chains.len());
    let mut done_diverged = Vec::new();
    for (c, report) in run.chains.into_iter().enumerate() {
        if report.diverged {
            let div = diverged.next().ok_or_else(|| Error::CorruptCheckpoint {
                reason: "a diverged chain has no divergence record".into(),
            })?;
            done_diverged.push((c, report, div));
            continue;
        }
        let part = healthy.next();
        let recorder = Recorder::from_part(&settings, model.dim(), 1, report.sampler.gradient().is_some(), part)?;
        let runaway = RunawayDetector::new(report.sampler.position());
        units.push(ChainUnit {
            chain: c,
            sampler: report.sampler,
            rng: report.rng,
            recorder: Some(recorder),
            theta0: Vec::new(),
            iteration: report.iterations,
            started: true,
            wall: report.wall_time,
            runaway,
        });
    }
    let setup_cost = run.setup_cost;
    let start = Instant::now();
    let mut done: Vec<Finished<ChainUnitDone<S>>> =
        drive(model, units, &settings, observers, start)?.into_iter().map(Finished::into_done).collect();
    for (chain, report, div) in done_diverged {
        done.push(Finished::Diverged(ChainUnitDone { chain, report, estimate: None }, div));
    }
    done.sort_by_key(Finished::chain);
    assemble(done, &settings, setup_cost, start.elapsed(), run.wall_time, run.model)
}

/// A chain as the runner drives it: the sampler, its generator and recorder, where it is.
struct ChainUnit<S> {
    chain: usize,
    sampler: S,
    rng: ChainRng,
    recorder: Option<Recorder>,
    theta0: Vec<f64>,
    iteration: u64,
    started: bool,
    wall: Duration,
    runaway: RunawayDetector,
}

/// ‖x‖, without overflow for entries beyond 1e154.
fn norm2(x: &[f64]) -> f64 {
    let ss = x.iter().map(|v| v * v).sum::<f64>();
    if ss.is_finite() {
        return ss.sqrt();
    }
    let m = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if !m.is_finite() || m == 0.0 {
        return m;
    }
    m * x.iter().map(|v| (v / m) * (v / m)).sum::<f64>().sqrt()
}

/// Watches ‖θ‖ for geometric growth: the largest norm up to each power of two is remembered, and
/// from iteration 64 on, ‖θ_k‖ is compared with the largest norm up to the power of two below
/// k/2 (so at least a quarter and at most half of the chain so far).
///
/// Growth alone is not proof: a chain started far below the scale of its posterior (θ₀ = 0 for a
/// posterior whose intercept is −40, say) with a step that adapts upwards (MALA's warm-up) also
/// grows geometrically for a while, downhill. So when the model has potentials, a trigger is
/// confirmed by the full-data potential: a chain whose `U(θ_k)` is below `U` at its start is
/// moving towards the posterior, not away from it, and the detector accepts the new scale
/// (later growth is measured from it). Those potential evaluations (two full passes over the data
/// per dismissed trigger; at most a handful per chain, as each one raises the scale by the
/// factor) are not counted in the run's cost, like [`check_model`](crate::check_model)'s.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunawayDetector {
    max_so_far: f64,
    at_last_power: f64,
    reference: f64,
    /// The scale accepted at a dismissed trigger (0 if none).
    floor: f64,
    /// Where the chain started (or resumed), and `U` there once computed.
    start: Vec<f64>,
    start_potential: Option<Option<f64>>,
}

impl RunawayDetector {
    /// Starts watching at ‖θ‖ (the start, or the resume point).
    pub(crate) fn new(theta: &[f64]) -> Self {
        let n = norm2(theta);
        RunawayDetector {
            max_so_far: n,
            at_last_power: n,
            reference: n,
            floor: 0.0,
            start: theta.to_vec(),
            start_potential: None,
        }
    }

    /// Records ‖θ‖ at iteration `k` and errors if it ran away.
    #[inline]
    pub(crate) fn check<M: Model + ?Sized>(
        &mut self,
        model: &M,
        k: u64,
        theta: &[f64],
        gradient: Option<&[f64]>,
        factor: Option<f64>,
    ) -> Result<()> {
        let Some(factor) = factor else { return Ok(()) };
        let n = norm2(theta);
        if k.is_power_of_two() {
            self.reference = self.at_last_power;
            self.at_last_power = self.max_so_far;
        }
        self.max_so_far = self.max_so_far.max(n);
        let reference = self.reference.max(self.floor);
        if k >= 64 && reference > 0.0 && n > factor * reference {
            if self.downhill(model, theta) {
                self.floor = n;
                return Ok(());
            }
            // Evidence for the cause: far out, a correct ∇U points outwards (θ·∇U > 0) and the
            // chain overshoots (step too large); ∇log p in its place points back inwards.
            let gradient_outward = gradient.and_then(|g| {
                let c = crate::numeric::linalg::dot(theta, g);
                c.is_finite().then_some(c > 0.0)
            });
            return Err(Error::Runaway { iteration: k, norm: n, reference, gradient_outward });
        }
        Ok(())
    }

    /// Whether the full-data potential at θ is finite and below the one at the start (false if
    /// the model has no potentials).
    #[cold]
    fn downhill<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64]) -> bool {
        let start = &self.start;
        let u0 = *self.start_potential.get_or_insert_with(|| full_potential(model, start));
        match (u0, full_potential(model, theta)) {
            (Some(u0), Some(u)) => u0.is_finite() && u.is_finite() && u < u0,
            _ => false,
        }
    }
}

/// `U(θ)` over all the data, in blocks of 4 096 items (`None` without potentials or when one
/// fails: the runaway detector then trusts the norms alone).
fn full_potential<M: Model + ?Sized>(model: &M, theta: &[f64]) -> Option<f64> {
    const BLOCK: usize = 4_096;
    let n = model.n_data();
    let mut u = model.potential_prior(theta).ok()?;
    let mut idx = Vec::with_capacity(n.min(BLOCK));
    for start in (0..n).step_by(BLOCK) {
        idx.clear();
        idx.extend(start..(start + BLOCK).min(n));
        u += model.potential_data_sum(theta, &idx).ok()?;
    }
    Some(u)
}

/// What the runner needs of a chain (or Richardson–Romberg pair) to drive it.
pub(crate) trait Unit: Send + Sized {
    /// The index reported to observers and in errors.
    fn index(&self) -> usize;
    /// Binds it (first call only).
    fn start<M: Model + ?Sized>(&mut self, model: &M, settings: &RunSettings) -> Result<()>;
    /// Advances to iteration `to` (> current), recording as the settings say. On an error the
    /// iteration count stays at the last completed iteration.
    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()>;
    /// Iterations done.
    fn iteration(&self) -> u64;
    /// Cost so far.
    fn cost(&self) -> Cost;
    /// The position shown to observers.
    fn position(&self) -> &[f64];
    /// The current sample's weight shown to observers.
    fn weight(&self) -> f64;
    /// Wall time spent so far, to be added to.
    fn wall_mut(&mut self) -> &mut Duration;
}

impl<S: Sampler> Unit for ChainUnit<S> {
    fn index(&self) -> usize {
        self.chain
    }

    fn start<M: Model + ?Sized>(&mut self, model: &M, settings: &RunSettings) -> Result<()> {
        if !self.started {
            self.sampler.init(model, &self.theta0, &mut self.rng)?;
            self.runaway = RunawayDetector::new(&self.theta0);
            self.recorder = Some(Recorder::new(settings, model.dim(), 1, self.sampler.gradient().is_some())?);
            self.started = true;
        }
        Ok(())
    }

    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()> {
        let rec = self.recorder.as_mut().ok_or(Error::NotInitialised)?;
        let s = &mut self.sampler;
        for k in self.iteration + 1..=to {
            s.step(model, &mut self.rng)?;
            self.runaway.check(model, k, s.position(), s.gradient(), settings.runaway_factor)?;
            self.iteration = k;
            // A weight of exactly 0 marks a draw the sampler does not keep (cSGLD's exploration).
            if settings.keeps(k) && s.weight() != 0.0 {
                rec.record(s.position(), s.weight(), s.gradient(), s.cost().datum_gradients, s.draw_step_size());
            }
        }
        Ok(())
    }

    fn iteration(&self) -> u64 {
        self.iteration
    }

    fn cost(&self) -> Cost {
        self.sampler.cost()
    }

    fn position(&self) -> &[f64] {
        self.sampler.position()
    }

    fn weight(&self) -> f64 {
        self.sampler.weight()
    }

    fn wall_mut(&mut self) -> &mut Duration {
        &mut self.wall
    }
}

/// How a unit's run ended.
pub(crate) enum Finished<U> {
    /// Completed or stopped by an observer (`true`).
    Ran(U, bool),
    /// Diverged (under [`OnDivergence::Report`]).
    Diverged(U, Divergence),
}

impl<S: Sampler> Finished<ChainUnit<S>> {
    fn into_done(self) -> Finished<ChainUnitDone<S>> {
        match self {
            Finished::Ran(u, stopped) => Finished::Ran(u.into_done(), stopped),
            Finished::Diverged(u, div) => Finished::Diverged(u.into_done(), div),
        }
    }
}

impl<S> Finished<ChainUnitDone<S>> {
    fn chain(&self) -> usize {
        match self {
            Finished::Ran(u, _) | Finished::Diverged(u, _) => u.chain,
        }
    }
}

/// A finished chain's parts, for assembling the output.
struct ChainUnitDone<S> {
    chain: usize,
    report: ChainReport<S>,
    estimate: Option<Estimate>,
}

/// Drives every unit to `settings.n_iter` (or until an observer stops it) on the rayon pool,
/// and returns them in index order. A unit's error is returned wrapped in [`Error::Chain`]
/// (the lowest index first), unless it is a divergence under [`OnDivergence::Report`].
pub(crate) fn drive<M: Model + ?Sized, U: Unit>(
    model: &M,
    units: Vec<U>,
    settings: &RunSettings,
    observers: &[&dyn Observer],
    run_start: Instant,
) -> Result<Vec<Finished<U>>> {
    let n_chains = settings.n_chains;
    let results =
        fan_out(units, settings.parallel, || (), |(), u| drive_one(model, u, settings, observers, run_start, n_chains));
    results.into_iter().collect()
}

/// What observers see of a unit.
fn progress<U: Unit>(u: &U, n_chains: usize, n_iter: u64, elapsed: Duration, run_start: Instant) -> Progress<'_> {
    Progress {
        chain: u.index(),
        n_chains,
        iteration: u.iteration(),
        n_iter,
        elapsed,
        run_elapsed: run_start.elapsed(),
        cost: u.cost(),
        position: u.position(),
        weight: u.weight(),
    }
}

/// Drives one unit to the end of the run or until an observer stops it.
fn drive_one<M: Model + ?Sized, U: Unit>(
    model: &M,
    mut u: U,
    settings: &RunSettings,
    observers: &[&dyn Observer],
    run_start: Instant,
    n_chains: usize,
) -> Result<Finished<U>> {
    let chain = u.index();
    let t0 = Instant::now();
    let wall0 = *u.wall_mut();
    let wrap = |e: Error| Error::Chain { chain, source: Box::new(e) };
    let first = u.iteration() == 0;
    let outcome = (|| -> Result<bool> {
        u.start(model, settings)?;
        let mut stop = false;
        if first {
            let p = progress(&u, n_chains, settings.n_iter, wall0 + t0.elapsed(), run_start);
            for o in observers {
                stop |= o.init(&p) == Control::Stop;
            }
        }
        while !stop && u.iteration() < settings.n_iter {
            let k = u.iteration();
            let next = observers
                .iter()
                .map(|o| {
                    let iv = o.interval().max(1);
                    (k / iv + 1).saturating_mul(iv)
                })
                .min()
                .unwrap_or(settings.n_iter)
                .min(settings.n_iter);
            u.advance(model, next, settings)?;
            let p = progress(&u, n_chains, settings.n_iter, wall0 + t0.elapsed(), run_start);
            for o in observers {
                if next % o.interval().max(1) == 0 || next == settings.n_iter {
                    stop |= o.observe(&p) == Control::Stop;
                }
            }
        }
        Ok(stop && u.iteration() < settings.n_iter)
    })();
    let finish = |u: &mut U| {
        *u.wall_mut() = wall0 + t0.elapsed();
        let p = progress(u, n_chains, settings.n_iter, wall0 + t0.elapsed(), run_start);
        for o in observers {
            o.finish(&p);
        }
    };
    match outcome {
        Ok(stopped) => {
            finish(&mut u);
            Ok(Finished::Ran(u, stopped))
        }
        Err(e) if e.is_divergence() && settings.on_divergence == OnDivergence::Report => {
            finish(&mut u);
            let (iteration, non_finite_state) = match *e.root() {
                Error::NonFiniteState { iteration } => (iteration, true),
                Error::NonFiniteGradient { iteration } => (iteration, false),
                Error::Runaway { iteration, .. } => (iteration, false),
                _ => (0, false),
            };
            let div = Divergence { chain, iteration, non_finite_state, message: e.to_string(), draws: Vec::new() };
            Ok(Finished::Diverged(u, div))
        }
        Err(e) => Err(wrap(e)),
    }
}

/// Builds the output of a run of chains.
fn assemble<S: Sampler>(
    done: Vec<Finished<ChainUnitDone<S>>>,
    settings: &RunSettings,
    setup_cost: Cost,
    wall: Duration,
    wall_before: Duration,
    model: crate::run::checkpoint::ModelFingerprint,
) -> Result<RunOutput<S>> {
    let mut estimates = Vec::new();
    let mut chains = Vec::new();
    let mut divergences = Vec::new();
    let mut first_error = None;
    for f in done {
        match f {
            Finished::Ran(u, stopped) => {
                let ChainUnitDone { mut report, estimate, .. } = u;
                report.stopped = stopped;
                if let Some(e) = estimate {
                    estimates.push(e);
                }
                chains.push(report);
            }
            Finished::Diverged(u, mut div) => {
                let ChainUnitDone { mut report, estimate, .. } = u;
                report.diverged = true;
                if let Some(e) = estimate {
                    div.draws.push(e);
                }
                first_error.get_or_insert_with(|| div.to_error());
                chains.push(report);
                divergences.push(div);
            }
        }
    }
    if estimates.is_empty() {
        return Err(first_error.unwrap_or(Error::NoSamples { reason: "no chain" }));
    }
    let cost = chains.iter().map(|c| c.cost).sum::<Cost>() + setup_cost;
    Ok(RunOutput {
        estimate: Estimate::combine(estimates)?,
        chains,
        cost,
        setup_cost,
        wall_time: wall_before + wall,
        settings: *settings,
        divergences,
        model,
    })
}

impl<S: Sampler> ChainUnit<S> {
    /// The report and the estimate of a finished chain.
    fn into_done(self) -> ChainUnitDone<S> {
        let cost = self.sampler.cost();
        let estimate = self.recorder.map(Recorder::finish);
        let report = ChainReport {
            sampler: self.sampler,
            cost,
            wall_time: self.wall,
            iterations: self.iteration,
            stopped: false,
            diverged: false,
            rng: self.rng,
        };
        ChainUnitDone { chain: self.chain, report, estimate }
    }
}

/// Runs `f(worker, item)` for every item, in parallel on rayon (each worker thread with its own
/// state from `init`) or serially, and returns the results in item order. The one fan-out of
/// the crate: chains, Richardson–Romberg replicates and multilevel samples all go through it,
/// so results never depend on the number of threads as long as `f` derives its randomness from
/// the item.
pub(crate) fn fan_out<T, W, R, I, F>(items: Vec<T>, parallel: bool, init: I, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    I: Fn() -> W + Sync + Send,
    F: Fn(&mut W, T) -> R + Sync + Send,
{
    if parallel && items.len() > 1 {
        items.into_par_iter().map_init(&init, |w, t| f(w, t)).collect()
    } else {
        let mut w = init();
        items.into_iter().map(|t| f(&mut w, t)).collect()
    }
}

impl RunSettings {
    /// Whether iteration k (1-based) is recorded: after burn-in, every `thin`-th.
    pub(crate) fn keeps(&self, k: u64) -> bool {
        k > self.burn_in && (k - self.burn_in).is_multiple_of(self.thin)
    }
}

/// Records draws of one chain according to the storage mode; allocates everything up front.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Recorder {
    samples: Option<Samples>,
    moments: Option<Moments>,
    with_gradients: bool,
    i: usize,
    capacity: usize,
}

impl Recorder {
    /// Room for `per_iteration` draws per recorded iteration. Errors with [`Error::NotStored`]
    /// if gradients are to be stored but the sampler keeps none.
    pub(crate) fn new(settings: &RunSettings, d: usize, per_iteration: usize, has_gradients: bool) -> Result<Self> {
        let with_gradients = settings.storage == Storage::SamplesAndGradients;
        if with_gradients && !has_gradients {
            return Err(Error::NotStored { what: "gradient estimates (this sampler keeps none)" });
        }
        let capacity = usize::try_from(settings.n_recorded())
            .ok()
            .and_then(|n| n.checked_mul(per_iteration))
            .ok_or(Error::OutOfMemory { what: "the run's stored draws", needed: u64::MAX, limit: None })?;
        let (samples, moments) = match settings.storage {
            Storage::Moments => (None, Some(Moments::new(d))),
            _ => (Some(Samples::with_capacity(capacity, d, with_gradients)?), None),
        };
        Ok(Recorder { samples, moments, with_gradients, i: 0, capacity })
    }

    /// A recorder for a resumed chain, holding the draws of `part` (its estimate so far).
    pub(crate) fn from_part(
        settings: &RunSettings,
        d: usize,
        per_iteration: usize,
        has_gradients: bool,
        part: Option<Estimate>,
    ) -> Result<Self> {
        let mut rec = Self::new(settings, d, per_iteration, has_gradients)?;
        let Some(part) = part else { return Ok(rec) };
        let corrupt =
            || Error::CorruptCheckpoint { reason: "a chain's stored draws do not match the run's settings".into() };
        match (part.into_single(), rec.moments.is_some()) {
            (Some(Part::Moments(m)), true) => {
                if m.dim() != d {
                    return Err(corrupt());
                }
                rec.i = m.len();
                rec.moments = Some(m);
            }
            (Some(Part::Samples(s)), false) => {
                let st = rec.samples.as_mut().ok_or_else(corrupt)?;
                if s.len() > rec.capacity || s.draws().ncols() != d || s.gradients().is_some() != rec.with_gradients {
                    return Err(corrupt());
                }
                st.copy_prefix(&s);
                rec.i = s.len();
            }
            _ => return Err(corrupt()),
        }
        Ok(rec)
    }

    #[inline]
    pub(crate) fn record(&mut self, theta: &[f64], w: f64, grad: Option<&[f64]>, cost: u64, step: Option<f64>) {
        if self.i >= self.capacity {
            return;
        }
        if let Some(st) = self.samples.as_mut() {
            st.set(self.i, theta, w, if self.with_gradients { grad } else { None }, cost, step);
        }
        if let Some(m) = self.moments.as_mut() {
            // The length always matches: θ comes from a sampler bound to a model of dimension d.
            let _ = m.push(theta, w);
        }
        self.i += 1;
    }

    /// The estimate of what was recorded (only the draws recorded so far, if stopped early).
    pub(crate) fn finish(self) -> Estimate {
        match (self.samples, self.moments) {
            (Some(mut st), _) => {
                st.truncate(self.i);
                st.drop_unknown_step_sizes();
                Estimate::from_samples(st)
            }
            (_, Some(m)) => Estimate::from_moments(m),
            (None, None) => Estimate::from_moments(Moments::new(0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `U(θ) = (θ − m)²/2` in one dimension, one datum.
    struct Far(f64);

    impl Model for Far {
        fn dim(&self) -> usize {
            1
        }
        fn n_data(&self) -> usize {
            1
        }
        fn grad_prior(&self, _: &[f64], out: &mut [f64]) -> Result<()> {
            out[0] = 0.0;
            Ok(())
        }
        fn grad_data_sum(&self, t: &[f64], _: &[usize], out: &mut [f64]) -> Result<()> {
            out[0] = t[0] - self.0;
            Ok(())
        }
        fn potential_prior(&self, _: &[f64]) -> Result<f64> {
            Ok(0.0)
        }
        fn potential_data_sum(&self, t: &[f64], _: &[usize]) -> Result<f64> {
            Ok(0.5 * (t[0] - self.0).powi(2))
        }
    }

    /// Geometric growth from 0 (‖θ_k‖ = 1.1^k, k ≤ 400) is a runaway when it climbs the
    /// potential and not when it descends towards a mode far out.
    #[test]
    fn runaway_is_confirmed_by_the_potential() {
        let path = |model: &dyn Model| -> Result<f64> {
            let mut det = RunawayDetector::new(&[0.0]);
            for k in 1..=400u64 {
                det.check(model, k, &[1.1f64.powi(k as i32)], None, Some(1e3))?;
            }
            Ok(det.floor)
        };
        // Uphill (mode at 0): stopped at the first trigger, with the right iteration.
        let e = path(&Far(0.0)).unwrap_err();
        let Error::Runaway { iteration, norm, reference, .. } = e else { panic!("{e:?}") };
        assert_eq!(iteration, 104, "{norm} {reference}");
        assert!(norm > 1e3 * reference);
        // Downhill towards m = 1e18 (1.1^400 = 3.7e16): the triggers at k = 104, 177, 250, 323
        // and 396 are dismissed, each raising the accepted scale to the norm then.
        let floor = path(&Far(1e18)).unwrap();
        assert!((floor / 1.1f64.powi(396) - 1.0).abs() < 1e-12, "{floor}");
        // Towards m = 1e11 the path passes U(0)'s level at 2e11 (k = 273): the triggers at 104,
        // 177 and 250 are dismissed, the one at 323 (1000 × the scale accepted at 250) is not.
        let e = path(&Far(1e11)).unwrap_err();
        assert!(matches!(e, Error::Runaway { iteration: 323, .. }), "{e:?}");
    }
}
