//! [`Runner`] and [`Resume`]: the one entry point of the engine, as a builder in the style of
//! argmin's `Executor`. Name the model and the method (a [`Sampler`] or a
//! [`RichardsonRomberg`](crate::RichardsonRomberg) pair of one), then what differs from the defaults — where the chains
//! start, the [`RunSettings`], observers (progress, budgets, early stops) — and call
//! [`run`](Runner::run). A stopped or saved run goes on with [`Resume`]; over the ranks of an MPI
//! job the same builder takes `.on(&cluster)` (module `distributed`, feature `mpi`).
//!
//! The runner names no method: it runs any [`Method`] — chains of a [`Sampler`] and
//! [`RichardsonRomberg`](crate::RichardsonRomberg) pairs implement it in their own files — on a
//! placement ([`Distribute`]: [`Local`], or a `&Cluster`), and resumes any [`Resumable`] output.
//!
//! | you want | call |
//! | --- | --- |
//! | chains of a sampler from one start | `Runner::new(&m, &s).start(&θ₀).settings(st).run()` |
//! | one start per chain | `.starts(&starts)` instead of `.start(..)` |
//! | observers: progress, a budget, a stop rule | `.observer(&o)` (as many as you like) |
//! | Richardson–Romberg pairs | `Runner::new(&m, &RichardsonRomberg::new(s))…run()` → [`RrOutput`](crate::RrOutput) |
//! | go on after a stop, or from a checkpoint | `Resume::new(&m, out).run()` |
//! | chains spread over MPI ranks | `….on(&cluster).run()` (feature `mpi`) |
//!
//! It replaced the functions `run`, `run_chains`, `run_observed`, `run_chains_observed`,
//! `resume`, `run_rr`, `run_rr_observed`, `run_rr_chains`, `resume_rr`, `run_chains_mpi` and
//! `run_rr_mpi` (removed in 0.3.0; CHANGELOG.md gives the migration). The draws are theirs, bit
//! for bit.
//!
//! For the tuned path — mode, tuning for exactly this run, preconditioning, dispersed starts,
//! the run and its verdict in one call — use [`Sample`](crate::sample::Sample), which ends in
//! this runner.
//!
#![doc = include_str!("../../docs/guide/running.md")]

pub use crate::run::method::{Method, Resumable};
pub use crate::run::placement::{Distribute, Local};

use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::observe::Observer;
use crate::run::settings::RunSettings;
#[cfg(doc)]
use crate::samplers::Sampler;

/// Where the chains of a [`Runner`] start.
#[derive(Debug, Clone)]
enum Starts<'a> {
    /// Not said yet: [`Runner::run`] refuses to guess.
    Unset,
    /// Every chain at one point.
    One(&'a [f64]),
    /// One point per chain.
    PerChain(Vec<&'a [f64]>),
}

/// A run of `model` with `method` — any [`Method`]: chains of a [`Sampler`], or replicate pairs
/// of a [`RichardsonRomberg`](crate::RichardsonRomberg) — on placement `P` (default [`Local`],
/// this process), configured step by step and started with [`run`](Self::run) (see the
/// [module docs](crate::runner)).
///
/// Chain c (or replicate c) draws from the stream `(seed, [c, …])`, so the draws do not depend
/// on the number of threads or ranks. Nothing of the model, the method or the starts is changed.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Resume};
/// use sgmcmc::observe::Budget;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?;
/// let settings = RunSettings { n_iter: 5_000, burn_in: 500, n_chains: 2, ..Default::default() };
/// // 200 000 datum gradients for the whole run: each chain stops after 999 steps.
/// let budget = Budget::datum_gradients(200_000);
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).observer(&budget).run()?;
/// assert!(!out.is_complete());
/// assert_eq!(out.chains[0].iterations, 999);
/// // Later: carry on to 5 000 iterations, as if it had never stopped.
/// let done = Resume::new(&model, out).run()?;
/// assert!(done.is_complete());
///
/// // Richardson–Romberg pairs, one start per replicate: the same builder.
/// let rr = RichardsonRomberg::new(sgld);
/// let starts = [[0.5, 0.0], [0.0, 0.5]];
/// let out = Runner::new(&model, &rr).starts(&starts).settings(settings).run()?;
/// assert_eq!(out.iterations, vec![5_000, 5_000]);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[derive(Clone)]
#[must_use = "a Runner does nothing until `run` is called"]
pub struct Runner<'a, M: ?Sized, S, P = Local> {
    model: &'a M,
    method: &'a S,
    starts: Starts<'a>,
    settings: RunSettings,
    observers: Vec<&'a dyn Observer>,
    placement: P,
}

impl<M: ?Sized, S, P> std::fmt::Debug for Runner<'_, M, S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("method", &std::any::type_name::<S>())
            .field("placement", &std::any::type_name::<P>())
            .field("starts", &self.starts)
            .field("settings", &self.settings)
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl<'a, M: ?Sized, S> Runner<'a, M, S> {
    /// A run of `model` with `method` (a [`Sampler`] or a [`RichardsonRomberg`](crate::RichardsonRomberg)),
    /// with [`RunSettings::default`], no observer, in this process. Say where the chains start
    /// before [`run`](Self::run).
    pub fn new(model: &'a M, method: &'a S) -> Self {
        Runner {
            model,
            method,
            starts: Starts::Unset,
            settings: RunSettings::default(),
            observers: Vec::new(),
            placement: Local,
        }
    }
}

impl<'a, M: ?Sized, S, P> Runner<'a, M, S, P> {
    /// Runs the units on `placement` instead of this process: `.on(&cluster)` (feature `mpi`)
    /// puts chain (or replicate) c on rank `c mod R` (a rank's chains in parallel as
    /// `settings.parallel` says) and exchanges the outputs, so that **every rank** returns the
    /// whole run, in chain order. Draws, pooled estimate, costs and chain reports are
    /// bit-identical to the single-process run's (the wall time is the longest rank's). Every
    /// rank must build the same run; the method's output must be serialisable (every built-in
    /// sampler's is).
    pub fn on<Q>(self, placement: Q) -> Runner<'a, M, S, Q> {
        let Runner { model, method, starts, settings, observers, .. } = self;
        Runner { model, method, starts, settings, observers, placement }
    }

    /// Every chain (or replicate) starts at `theta0`.
    pub fn start(mut self, theta0: &'a [f64]) -> Self {
        self.starts = Starts::One(theta0);
        self
    }

    /// Chain (or replicate) c starts at `starts[c]`: one start per chain (`settings.n_chains`), a
    /// slice of anything that views as `&[f64]` (`&[[f64; D]; C]`, `&Vec<Vec<f64>>`, …). Start
    /// them dispersed around the mode ([`dispersed_starts`](crate::tune::dispersed_starts)) so that
    /// split-R̂ can see chains that have not forgotten where they began.
    pub fn starts<I: AsRef<[f64]>>(mut self, starts: &'a [I]) -> Self {
        self.starts = Starts::PerChain(starts.iter().map(AsRef::as_ref).collect());
        self
    }

    /// The run's settings (iterations, burn-in, thinning, chains, seed, storage, …). Default
    /// [`RunSettings::default`].
    pub fn settings(mut self, settings: RunSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Adds an observer (see [`observe`](crate::run::observe)): it is called at every chain's
    /// start, every [`interval`](Observer::interval) iterations and at its end, from the thread
    /// running that chain, and may stop it. A stopped chain keeps exactly the draws recorded up
    /// to the iteration where it stopped; [`Resume`] goes on. A Richardson–Romberg replicate is
    /// seen as a chain (its cost both chains', its position the fine chain's); both of its chains
    /// stop at the same iteration.
    pub fn observer(mut self, observer: &'a dyn Observer) -> Self {
        self.observers.push(observer);
        self
    }

    /// Adds several observers, in order (as [`observer`](Self::observer) each).
    pub fn observers(mut self, observers: &[&'a dyn Observer]) -> Self {
        self.observers.extend_from_slice(observers);
        self
    }

    /// The starts as one slice per chain (a single start repeated `n_chains` times).
    pub(crate) fn chain_starts(&self) -> Result<Vec<&'a [f64]>> {
        match &self.starts {
            Starts::Unset => Err(Error::invalid(
                "start",
                "none",
                "say where the chains start: .start(&theta0) or .starts(&one_per_chain) (Sample finds the mode and disperses starts for you)",
            )),
            Starts::One(theta0) => Ok(vec![*theta0; self.settings.n_chains]),
            Starts::PerChain(starts) => Ok(starts.clone()),
        }
    }
}

impl<M: Model + ?Sized, S: Method, P: Distribute<S::Output>> Runner<'_, M, S, P> {
    /// Runs `settings.n_chains` units of the method — chains of a sampler, or Richardson–Romberg
    /// replicates — on the placement (this process unless [`on`](Self::on) said otherwise; in
    /// parallel on the rayon pool if `settings.parallel`; the same draws either way).
    ///
    /// Chains of a [`Sampler`]: each chain is a clone of the sampler, bound by [`Sampler::init`]
    /// at its start and driven by the generator [`stream`](crate::rng::stream)`(seed, [c])`.
    /// After `burn_in` iterations every `thin`-th position is recorded with the sampler's
    /// [`weight`](Sampler::weight) (and its gradient for
    /// [`Storage::SamplesAndGradients`](crate::Storage::SamplesAndGradients)).
    ///
    /// Richardson–Romberg replicates (coupled pairs at steps γ and γ/2): the extrapolated
    /// estimate with both chains'. `n_iter`, `burn_in` and `thin` count iterations of chain A
    /// (chain B does twice as many steps; both of its draws in a kept iteration are kept).
    /// Replicate c uses the streams `(seed, [c, 0])` for the shared increments and
    /// `(seed, [c, 1])`, `(seed, [c, 2])` for the minibatches of A and B (and `(seed, [c, 3])`
    /// for A's increments under independent coupling).
    ///
    /// A panic inside a chain (the model's code or an observer panicking) is caught at the
    /// chain's boundary and becomes [`Error::Panic`] in that chain; the other chains run to
    /// their end. Once the chains have run, nothing drawn is lost: an error of a chain (once any
    /// chain has made an iteration) comes back as [`Error::Kept`] around it, holding the run's
    /// output — every chain's draws and report, the failed chains as
    /// [`Divergence`](crate::Divergence)s with their draws up to the failure
    /// ([`Error::into_output`] takes it back). So does a run whose every chain diverged under
    /// [`OnDivergence::Report`](crate::OnDivergence::Report).
    ///
    /// Errors: no start given, or not one per chain ([`Error::DimensionMismatch`]); invalid
    /// settings; [`Error::MemoryLimit`] for the kept draws and [`Error::OutOfMemory`] for the
    /// chains' states ([`RunSettings::memory_limit`]), both before anything is allocated; the
    /// model check at the starts; anything `init` or `step` returns, wrapped in [`Error::Chain`]
    /// with the chain's (or replicate's) index (the lowest failing index when several fail)
    /// inside [`Error::Kept`] (match on [`Error::root`]); [`Error::NotStored`] if gradients are
    /// to be stored but the sampler keeps none. Over MPI ranks, on every rank: the failing rank
    /// returns [`Error::Rank`] around its error, the others [`Error::RankFailure`] naming it
    /// (its chain and iteration); no rank hangs; [`Error::InvalidParameter`] if a rank's output
    /// exceeds 2³¹ bytes (one MPI message).
    pub fn run(self) -> Result<S::Output> {
        self.method.check_size(&self.settings, self.model.dim())?;
        let starts = self.chain_starts()?;
        let Runner { model, method, settings, observers, placement, .. } = self;
        placement.distribute(
            settings.n_chains,
            |units| method.run_units(model, &starts, &settings, &observers, units),
            S::merge,
        )
    }
}

/// A stopped run (an observer stopped it, or it was [`load`](crate::RunOutput::load)ed from a
/// checkpoint) that goes on up to its `settings.n_iter` iterations per chain — raise that field
/// first to extend a finished run. The draws are **bit-identical** to those of an uninterrupted
/// run with the same settings: each chain carries its sampler state, its generator and its
/// recorder. Works for any [`Resumable`] output: [`RunOutput`](crate::RunOutput) and
/// [`RrOutput`](crate::RrOutput) alike.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Resume};
/// use sgmcmc::observe::Budget;
///
/// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 7)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, ..Default::default() };
/// let whole = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run()?;
/// let stopped =
///     Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).observer(&Budget::datum_gradients(35_000)).run()?;
/// let resumed = Resume::new(&model, stopped).run()?;
/// assert_eq!(resumed.estimate.mean()?, whole.estimate.mean()?);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[must_use = "a Resume does nothing until `run` is called"]
pub struct Resume<'a, M: ?Sized, O> {
    model: &'a M,
    output: O,
    observers: Vec<&'a dyn Observer>,
}

impl<M: ?Sized, O> std::fmt::Debug for Resume<'_, M, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resume")
            .field("output", &std::any::type_name::<O>())
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl<'a, M: ?Sized, O> Resume<'a, M, O> {
    /// Resumes `output` (a [`RunOutput`](crate::RunOutput) or an [`RrOutput`](crate::RrOutput)) on `model`, which must be the
    /// run's (same dimension, data size and data fingerprint).
    pub fn new(model: &'a M, output: O) -> Self {
        Resume { model, output, observers: Vec::new() }
    }

    /// Adds an observer, as [`Runner::observer`].
    pub fn observer(mut self, observer: &'a dyn Observer) -> Self {
        self.observers.push(observer);
        self
    }

    /// Adds several observers, in order.
    pub fn observers(mut self, observers: &[&'a dyn Observer]) -> Self {
        self.observers.extend_from_slice(observers);
        self
    }
}

impl<M: Model + ?Sized, O: Resumable> Resume<'_, M, O> {
    /// Continues the chains (or replicates).
    ///
    /// Errors: [`Error::DimensionMismatch`] or [`Error::CheckpointMismatch`] if `model` is not
    /// the run's; invalid settings (`n_iter` below the iterations already done); a run with
    /// diverged replicates cannot be resumed; then as [`Runner::run`]. A refused resume hands
    /// the output back unchanged, in [`Error::Kept`] around the error ([`Error::into_output`]).
    pub fn run(self) -> Result<O> {
        self.output.resume(self.model, &self.observers)
    }
}
