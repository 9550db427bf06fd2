//! Observers of a run: look at every chain as it goes, and stop it.
//!
//! In the style of argmin's `Observe`: an [`Observer`] is called once per chain when the chain
//! starts ([`init`](Observer::init)), every [`interval`](Observer::interval) iterations
//! ([`observe`](Observer::observe)) and when it ends ([`finish`](Observer::finish)). Unlike
//! argmin's, `init` and `observe` answer with a [`Control`]: [`Control::Stop`] ends that chain
//! there, and the run returns everything drawn so far — a stopped run can be resumed later
//! (see [`Resume`](crate::run::runner::Resume)).
//!
//! Ready-made: [`Budget`] (datum-gradient budget), [`WallTime`], [`StopFlag`] (stop when the
//! user asks, from any thread), [`StopWhen`] (a user condition), [`Every`] (a user function
//! called every k iterations); with the `progress` feature, a terminal display
//! (`progress::Terminal`).
//!
//! Observers see only what [`Progress`] shows and cannot change the draws: a run that is not
//! stopped gives the same draws with or without observers.

use crate::cost::Cost;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What an observer tells the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Control {
    /// Go on.
    #[default]
    Continue,
    /// Stop this chain now, keeping what it drew.
    Stop,
}

/// The progress of one chain (or Richardson–Romberg pair), as shown to observers.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The chain's index (the replicate's, for Richardson–Romberg).
    pub chain: usize,
    /// The number of chains of the run.
    pub n_chains: usize,
    /// Iterations done (0 at `init`).
    pub iteration: u64,
    /// Iterations planned.
    pub n_iter: u64,
    /// Wall time of this chain so far (across resumptions).
    pub elapsed: Duration,
    /// Wall time since this run (or resumption) started.
    pub run_elapsed: Duration,
    /// The chain's cost so far (its share of the one-off setup cost not included).
    pub cost: Cost,
    /// The current position (the finer chain's, for Richardson–Romberg).
    pub position: &'a [f64],
    /// The current sample's weight in the chain's estimator (the sampler's
    /// [`weight`](crate::Sampler::weight); for Richardson–Romberg, chain B's time step).
    pub weight: f64,
}

/// An observer of a run. Every method has a default, so an observer implements only what it
/// needs. Observers are shared by the chains, which may run on several threads: they take
/// `&self` and must be `Sync` (use atomics or a mutex for state).
pub trait Observer: Sync {
    /// Called once per chain after its `init` (iteration 0). Default: continue.
    fn init(&self, progress: &Progress<'_>) -> Control {
        let _ = progress;
        Control::Continue
    }

    /// Called after every iteration that is a multiple of [`interval`](Self::interval), and after
    /// the last planned one. Default: continue.
    fn observe(&self, progress: &Progress<'_>) -> Control {
        let _ = progress;
        Control::Continue
    }

    /// Called once per chain when it ends: completed, stopped or diverged. Default: nothing.
    fn finish(&self, progress: &Progress<'_>) {
        let _ = progress;
    }

    /// How often [`observe`](Self::observe) is called, in iterations (≥ 1; 0 counts as 1).
    /// Default 1. The runner advances chains in blocks between observation points, so a large
    /// interval costs nothing per iteration.
    fn interval(&self) -> u64 {
        1
    }

    /// Called during the step-bias check that follows a [`Sample`](crate::Sample) run's chains
    /// (its companion at half the step: [`step_bias`](crate::step_bias)), every
    /// [`interval`](Self::interval) of the companion's iterations, with the iterations done and
    /// planned (the plan may grow once, where the companion's noise sets the bound). `Stop` ends
    /// the check: the run is then judged as it stands, as one stopped in its chains is
    /// ([`Sampled::stopped`](crate::Sampled::stopped): the draws kept, no step-bias bound).
    /// Observing never changes the companion's draws. Default: continue.
    fn observe_bias_check(&self, iteration: u64, n_iter: u64) -> Control {
        let _ = (iteration, n_iter);
        Control::Continue
    }
}

/// Stops each chain once it has spent its share of a datum-gradient budget: chain c stops after
/// the first iteration at which its cost reaches `total / n_chains` (so the run's total, setup
/// excluded, stays within one iteration per chain of `total`). Deterministic: the same run stops
/// at the same iterations whatever the number of threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The run's datum-gradient budget, shared equally by the chains.
    pub total_datum_gradients: u64,
}

impl Budget {
    /// A budget of `total` datum-gradient evaluations for the whole run.
    pub fn datum_gradients(total: u64) -> Self {
        Budget { total_datum_gradients: total }
    }

    fn exhausted(&self, p: &Progress<'_>) -> bool {
        let share = self.total_datum_gradients / p.n_chains.max(1) as u64;
        p.cost.datum_gradients >= share
    }
}

impl Observer for Budget {
    fn init(&self, p: &Progress<'_>) -> Control {
        self.observe(p)
    }

    fn observe(&self, p: &Progress<'_>) -> Control {
        if self.exhausted(p) { Control::Stop } else { Control::Continue }
    }
}

/// Stops every chain at the first observation point after the run has lasted `limit` (checked
/// every `interval` iterations; default 1). Not reproducible by nature: where a chain stops
/// depends on the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallTime {
    /// The wall-time limit of the run (or of this resumption).
    pub limit: Duration,
    /// Iterations between checks.
    pub interval: u64,
}

impl WallTime {
    /// A wall-time limit, checked every iteration.
    pub fn new(limit: Duration) -> Self {
        WallTime { limit, interval: 1 }
    }
}

impl Observer for WallTime {
    fn observe(&self, p: &Progress<'_>) -> Control {
        if p.run_elapsed >= self.limit { Control::Stop } else { Control::Continue }
    }

    fn interval(&self) -> u64 {
        self.interval
    }
}

/// Stops every chain when the flag is raised (by another thread, a signal handler, a UI): the
/// run then returns what was drawn so far. Raised during a [`Sample`](crate::Sample) run's
/// step-bias check, it ends the check (see [`Observer::observe_bias_check`]). Clones share the
/// flag.
#[derive(Debug, Clone, Default)]
pub struct StopFlag {
    flag: Arc<AtomicBool>,
    interval: u64,
}

impl StopFlag {
    /// A lowered flag, checked every `interval` iterations (0 counts as 1).
    pub fn new(interval: u64) -> Self {
        StopFlag { flag: Arc::new(AtomicBool::new(false)), interval }
    }

    /// Asks every chain to stop at its next check.
    pub fn raise(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether the flag is raised.
    pub fn is_raised(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

impl Observer for StopFlag {
    fn init(&self, p: &Progress<'_>) -> Control {
        self.observe(p)
    }

    fn observe(&self, _p: &Progress<'_>) -> Control {
        if self.is_raised() { Control::Stop } else { Control::Continue }
    }

    fn observe_bias_check(&self, _iteration: u64, _n_iter: u64) -> Control {
        if self.is_raised() { Control::Stop } else { Control::Continue }
    }

    fn interval(&self) -> u64 {
        self.interval
    }
}

/// Stops a chain when a user condition on its [`Progress`] holds, checked every `interval`
/// iterations.
#[derive(Debug, Clone, Copy)]
pub struct StopWhen<F> {
    /// The condition.
    pub condition: F,
    /// Iterations between checks.
    pub interval: u64,
}

impl<F: Fn(&Progress<'_>) -> bool + Sync> Observer for StopWhen<F> {
    fn observe(&self, p: &Progress<'_>) -> Control {
        if (self.condition)(p) { Control::Stop } else { Control::Continue }
    }

    fn interval(&self) -> u64 {
        self.interval
    }
}

/// Calls a user function every `every` iterations of every chain (and after the last), from the
/// thread running that chain; it never stops the run.
#[derive(Debug, Clone, Copy)]
pub struct Every<F> {
    /// Iterations between calls.
    pub every: u64,
    /// The function.
    pub f: F,
}

impl<F: Fn(&Progress<'_>) + Sync> Observer for Every<F> {
    fn observe(&self, p: &Progress<'_>) -> Control {
        (self.f)(p);
        Control::Continue
    }

    fn interval(&self) -> u64 {
        self.every
    }
}
