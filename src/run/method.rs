//! The seam between the runner and what it runs: a [`Method`] says how to run some of a run's
//! units (chains of a sampler, Richardson–Romberg pairs, …) and how to merge the parts; a
//! [`Resumable`] output says how to go on. [`Runner`](crate::run::runner::Runner) and
//! [`Resume`](crate::run::runner::Resume) are written once over them and name no method, as
//! argmin's `Executor` names no solver.
//!
//! Chains of any [`Sampler`](crate::samplers::Sampler) implement [`Method`] in `run/chains.rs`;
//! [`RichardsonRomberg`](crate::RichardsonRomberg) in `coupled/richardson/pairs.rs`.

use crate::error::Result;
use crate::models::model::Model;
use crate::run::observe::Observer;
use crate::run::settings::RunSettings;

/// What a [`Runner`](crate::run::runner::Runner) runs: `settings.n_chains` *units*, unit c with
/// the random streams `(seed, [c, …])` and the start `starts[c]`, so that a unit's draws do not
/// depend on which process or thread runs it. Implemented for chains of every
/// [`Sampler`](crate::samplers::Sampler) (output [`RunOutput`](crate::RunOutput)) and for
/// [`RichardsonRomberg`](crate::RichardsonRomberg) pairs (output [`RrOutput`](crate::RrOutput)).
///
/// A new method implements the three functions below in its own file; the runner, its
/// placements (one process, MPI ranks) and its observers then work for it unchanged.
pub trait Method {
    /// The output of a run (and of a part of one).
    type Output;

    /// Refuses, before anything is allocated, a run whose units' states would not fit in
    /// `settings.memory_limit` for a model of dimension `dim`
    /// ([`Error::OutOfMemory`](crate::Error::OutOfMemory)).
    fn check_size(&self, settings: &RunSettings, dim: usize) -> Result<()>;

    /// Runs the units `units` (increasing indices below `settings.n_chains`; every one of them
    /// in one process) of the run of `model` from `starts` (one per unit), observed by
    /// `observers`: the output holds those units only, in that order, exactly as they would be
    /// in the whole run.
    ///
    /// Errors: invalid settings, starts not one per unit, and whatever a unit returns (wrapped
    /// with the unit's index).
    fn run_units<M: Model + ?Sized>(
        &self,
        model: &M,
        starts: &[&[f64]],
        settings: &RunSettings,
        observers: &[&dyn Observer],
        units: &[usize],
    ) -> Result<Self::Output>;

    /// Merges the outputs of [`run_units`](Self::run_units) over disjoint subsets that together
    /// cover every unit once (`parts[i]` ran the units `parts[i].0`) into the whole run's
    /// output, exactly as one process would have built it.
    ///
    /// Errors: the parts do not cover every unit once; every unit failed.
    fn merge(parts: Vec<(Vec<usize>, Self::Output)>) -> Result<Self::Output>;
}

/// A run's output that can go on, up to its `settings.n_iter` iterations per unit, with draws
/// bit-identical to an uninterrupted run's ([`Resume`](crate::run::runner::Resume) is written
/// over it). Implemented by [`RunOutput`](crate::RunOutput) and [`RrOutput`](crate::RrOutput).
pub trait Resumable: Sized {
    /// Continues the run on `model` (the run's own), observed by `observers`.
    ///
    /// Errors: `model` is not the run's ([`Error::DimensionMismatch`](crate::Error::DimensionMismatch),
    /// [`Error::CheckpointMismatch`](crate::Error::CheckpointMismatch)), the settings are
    /// invalid or below the iterations done; a refused resume hands the output back in
    /// [`Error::Kept`](crate::Error::Kept). Then as the run itself.
    fn resume<M: Model + ?Sized>(self, model: &M, observers: &[&dyn Observer]) -> Result<Self>;
}
