//! What a run returns: [`RunOutput`] (also its checkpoint), [`ChainReport`], [`Divergence`].

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::numeric::rng::ChainRng;
use crate::run::checkpoint;
use crate::run::settings::RunSettings;
use crate::samplers::Sampler;
use crate::trace::estimate::Estimate;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A chain that diverged, under [`OnDivergence::Report`](crate::OnDivergence::Report) — or, in the output an [`Error::Kept`]
/// holds, a chain that failed (any error, a caught panic: its `message` says which), with its
/// draws up to the failure.
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
    /// The error the chain raised, as [`OnDivergence::Error`](crate::OnDivergence::Error) would have returned it.
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
    pub(super) rng: ChainRng,
}

/// The result of a [`Runner`](crate::run::runner::Runner) of chains: the pooled estimate and a
/// report per chain. It is also the run's checkpoint: [`save`](Self::save) it,
/// [`load`](Self::load) it, and [`Resume`](crate::run::runner::Resume) it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOutput<S> {
    /// The estimate pooled over chains; `estimate.part(i)` is the i-th chain that did not
    /// diverge (all chains, unless [`OnDivergence::Report`](crate::OnDivergence::Report) left some out).
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
    /// Chains that diverged, under [`OnDivergence::Report`](crate::OnDivergence::Report).
    pub divergences: Vec<Divergence>,
    /// The model's dimension, data size and data fingerprint (checked on resume).
    pub(super) model: crate::run::checkpoint::ModelFingerprint,
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
