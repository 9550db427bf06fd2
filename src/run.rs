//! Running samplers: burn-in, thinning, storage, several chains in parallel, cost and time.

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::estimate::{Estimate, Moments, Samples};
use crate::model::Model;
use crate::rng::{DEFAULT_SEED, stream};
use crate::samplers::Sampler;
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// What a run keeps of each chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Copy, PartialEq)]
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
        Ok(())
    }

    /// The number of draws each chain records: `⌊(n_iter − burn_in) / thin⌋`.
    pub fn n_recorded(&self) -> u64 {
        (self.n_iter.saturating_sub(self.burn_in)) / self.thin.max(1)
    }
}

/// What one chain of a run did.
#[derive(Debug, Clone)]
pub struct ChainReport<S> {
    /// The sampler in its final state (its position, and sampler-specific statistics such as
    /// [`Mala::acceptance_rate`](crate::Mala::acceptance_rate)).
    pub sampler: S,
    /// The chain's cost, initial gradient included (the one-off setup cost is not: it is in
    /// [`RunOutput::setup_cost`]).
    pub cost: Cost,
    /// The chain's wall time, `init` included.
    pub wall_time: Duration,
}

/// The result of [`run`]: the pooled estimate and a report per chain.
#[derive(Debug, Clone)]
pub struct RunOutput<S> {
    /// The estimate pooled over chains; `estimate.part(c)` is chain c alone.
    pub estimate: Estimate,
    /// One report per chain, in chain order.
    pub chains: Vec<ChainReport<S>>,
    /// Total cost: every chain's, plus the sampler's one-off setup cost once.
    pub cost: Cost,
    /// The one-off setup cost included in `cost` (e.g. a control variate's centring).
    pub setup_cost: Cost,
    /// Wall time of the whole run.
    pub wall_time: Duration,
    /// Iterations per chain.
    pub n_iter: u64,
}

impl<S> RunOutput<S> {
    /// Iterations (all chains) per second of wall time.
    pub fn iterations_per_second(&self) -> f64 {
        (self.n_iter as f64 * self.chains.len() as f64) / self.wall_time.as_secs_f64()
    }

    /// Datum-gradient evaluations per second of wall time.
    pub fn datum_gradients_per_second(&self) -> f64 {
        self.cost.datum_gradients as f64 / self.wall_time.as_secs_f64()
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
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7).unwrap();
/// let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, Minibatch::new(100)).unwrap();
/// let settings = RunSettings { n_iter: 5_000, burn_in: 500, ..Default::default() };
/// let out = run(&model, &sgld, &[0.0, 0.0], &settings).unwrap();
/// let mean = out.estimate.mean().unwrap();
/// assert_eq!(mean.len(), 2);
/// ```
pub fn run<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<RunOutput<S>> {
    let inits = vec![theta0; settings.n_chains];
    run_chains(model, sampler, &inits, settings)
}

/// As [`run`], with one starting point per chain (`inits.len()` must equal `n_chains`).
pub fn run_chains<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    inits: &[&[f64]],
    settings: &RunSettings,
) -> Result<RunOutput<S>> {
    run_inner(model, sampler, inits, settings, None)
}

/// The progress of one chain, as passed to an observer.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The chain's index.
    pub chain: usize,
    /// Iterations done (1-based).
    pub iteration: u64,
    /// Iterations planned.
    pub n_iter: u64,
    /// Wall time since the chain started.
    pub elapsed: Duration,
    /// The chain's cost so far.
    pub cost: Cost,
    /// The current position.
    pub position: &'a [f64],
}

/// As [`run`], calling `observer` every `every` iterations of every chain (and after the last),
/// from the thread running that chain. Nothing is printed unless the observer prints; see
/// [`progress::terminal`](crate::progress::terminal) (feature `progress`) for a ready-made one.
/// The observer cannot change the run: results are those of [`run`].
///
/// Errors: as [`run`]; [`Error::InvalidParameter`] for `every = 0`.
pub fn run_observed<M: Model + ?Sized, S: Sampler, O: Fn(&Progress<'_>) + Sync>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
    every: u64,
    observer: &O,
) -> Result<RunOutput<S>> {
    if every == 0 {
        return Err(Error::invalid("every", every, "must be >= 1"));
    }
    let inits = vec![theta0; settings.n_chains];
    run_inner(model, sampler, &inits, settings, Some((every, observer)))
}

/// As [`run_observed`], with one starting point per chain (`inits.len()` must equal `n_chains`).
pub fn run_chains_observed<M: Model + ?Sized, S: Sampler, O: Fn(&Progress<'_>) + Sync>(
    model: &M,
    sampler: &S,
    inits: &[&[f64]],
    settings: &RunSettings,
    every: u64,
    observer: &O,
) -> Result<RunOutput<S>> {
    if every == 0 {
        return Err(Error::invalid("every", every, "must be >= 1"));
    }
    run_inner(model, sampler, inits, settings, Some((every, observer)))
}

type Observer<'o> = Option<(u64, &'o (dyn Fn(&Progress<'_>) + Sync))>;

fn run_inner<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    inits: &[&[f64]],
    settings: &RunSettings,
    observer: Observer<'_>,
) -> Result<RunOutput<S>> {
    settings.validate()?;
    crate::error::check_len("number of starting points (n_chains)", settings.n_chains, inits.len())?;
    let start = Instant::now();
    let one = |c: usize| run_one(model, sampler, inits[c], settings, c, observer);
    let results: Vec<Result<(Estimate, ChainReport<S>)>> = if settings.parallel && settings.n_chains > 1 {
        (0..settings.n_chains).into_par_iter().map(one).collect()
    } else {
        (0..settings.n_chains).map(one).collect()
    };
    let wall_time = start.elapsed();
    let mut estimates = Vec::with_capacity(results.len());
    let mut chains = Vec::with_capacity(results.len());
    for r in results {
        let (e, c) = r?;
        estimates.push(e);
        chains.push(c);
    }
    let setup_cost = sampler.setup_cost();
    let cost = chains.iter().map(|c| c.cost).sum::<Cost>() + setup_cost;
    Ok(RunOutput {
        estimate: Estimate::combine(estimates)?,
        chains,
        cost,
        setup_cost,
        wall_time,
        n_iter: settings.n_iter,
    })
}

/// Runs `f(worker, i)` for every index of `range`, in parallel on rayon (each worker thread with
/// its own state from `init`) or serially, and returns the results in index order. The one
/// fan-out of the crate: chains, Richardson–Romberg replicates and multilevel samples all go
/// through it, so their results never depend on the number of threads as long as `f` derives
/// its randomness from `i`.
pub(crate) fn fan_out<W, T, I, F>(range: std::ops::Range<u64>, parallel: bool, init: I, f: F) -> Vec<T>
where
    T: Send,
    I: Fn() -> W + Sync + Send,
    F: Fn(&mut W, u64) -> T + Sync + Send,
{
    if parallel && range.end - range.start > 1 {
        range.into_par_iter().map_init(&init, |w, i| f(w, i)).collect()
    } else {
        let mut w = init();
        range.map(|i| f(&mut w, i)).collect()
    }
}

fn run_one<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
    chain: usize,
    observer: Observer<'_>,
) -> Result<(Estimate, ChainReport<S>)> {
    let wrap = |e: Error| Error::Chain { chain, source: Box::new(e) };
    let start = Instant::now();
    let mut rng = stream(settings.seed, &[chain as u64]);
    let mut s = sampler.clone();
    s.init(model, theta0, &mut rng).map_err(wrap)?;
    let mut rec = Recorder::new(settings, model.dim(), 1, s.gradient().is_some()).map_err(wrap)?;
    for k in 1..=settings.n_iter {
        s.step(model, &mut rng).map_err(wrap)?;
        if settings.keeps(k) {
            rec.record(s.position(), s.weight(), s.gradient(), s.cost().datum_gradients);
        }
        if let Some((every, obs)) = observer
            && (k % every == 0 || k == settings.n_iter)
        {
            obs(&Progress {
                chain,
                iteration: k,
                n_iter: settings.n_iter,
                elapsed: start.elapsed(),
                cost: s.cost(),
                position: s.position(),
            });
        }
    }
    let cost = s.cost();
    Ok((rec.finish(), ChainReport { sampler: s, cost, wall_time: start.elapsed() }))
}

impl RunSettings {
    /// Whether iteration k (1-based) is recorded: after burn-in, every `thin`-th.
    pub(crate) fn keeps(&self, k: u64) -> bool {
        k > self.burn_in && (k - self.burn_in) % self.thin == 0
    }
}

/// Records draws of one chain according to the storage mode; allocates everything up front.
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
        let capacity = settings.n_recorded() as usize * per_iteration;
        let (samples, moments) = match settings.storage {
            Storage::Moments => (None, Some(Moments::new(d))),
            _ => (Some(Samples::with_capacity(capacity, d, with_gradients)), None),
        };
        Ok(Recorder { samples, moments, with_gradients, i: 0, capacity })
    }

    #[inline]
    pub(crate) fn record(&mut self, theta: &[f64], w: f64, grad: Option<&[f64]>, cost: u64) {
        if self.i >= self.capacity {
            return;
        }
        if let Some(st) = self.samples.as_mut() {
            st.set(self.i, theta, w, if self.with_gradients { grad } else { None }, cost);
        }
        if let Some(m) = self.moments.as_mut() {
            // The length always matches: θ comes from a sampler bound to a model of dimension d.
            let _ = m.push(theta, w);
        }
        self.i += 1;
    }

    pub(crate) fn finish(self) -> Estimate {
        match (self.samples, self.moments) {
            (Some(st), _) => Estimate::from_samples(st),
            (_, Some(m)) => Estimate::from_moments(m),
            (None, None) => Estimate::from_moments(Moments::new(0)),
        }
    }
}
