//! What a run is told: [`RunSettings`], [`Storage`], [`OnDivergence`].

use crate::error::{DEFAULT_MEMORY_LIMIT, Error, Result};
use crate::numeric::rng::DEFAULT_SEED;
use serde::{Deserialize, Serialize};

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
    /// in the run's [`Cost`](crate::Cost), so that budgets stay exact. Default true; turn it off for a model whose gradient is
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
    /// The chain stops and is reported in [`RunOutput::divergences`](crate::RunOutput::divergences) (chain, iteration, its draws
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
            memory_limit: Some(DEFAULT_MEMORY_LIMIT),
            check_model: true,
            runaway_factor: Some(1e3),
        }
    }
}

/// The vectors of the model's dimension a chain's state is counted as, for the memory check
/// made before a run allocates its chains.
pub const STATE_VECTORS: usize = 10;

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

    /// Errors with [`Error::OutOfMemory`] if the chains' states — `chains_per_unit` samplers per
    /// chain (2 for a Richardson–Romberg pair), each its own value and about
    /// [`STATE_VECTORS`] vectors of dimension `d` (position, gradients, estimator and noise
    /// buffers, start, runaway detector) — exceed the limit: checked before any start or state is
    /// built, so `n_chains = 10⁹` or a model of dimension 2⁴⁰ fails at once.
    pub(crate) fn check_chains<S>(&self, d: usize, chains_per_unit: usize) -> Result<()> {
        self.check_states::<S>(
            d,
            chains_per_unit,
            "the chains' states (RunSettings::n_chains × the sampler's state in the model's dimension)",
        )
    }

    /// [`check_chains`](Self::check_chains) naming `what`.
    pub(crate) fn check_states<S>(&self, d: usize, chains_per_unit: usize, what: &'static str) -> Result<()> {
        let per_sampler = std::mem::size_of::<S>() as u128 + STATE_VECTORS as u128 * d as u128 * 8;
        let needed = (per_sampler + 64) * chains_per_unit as u128 * self.n_chains as u128;
        crate::error::check_bytes(what, needed, self.memory_limit)
    }

    /// The number of draws each chain records: `⌊(n_iter − burn_in) / thin⌋`.
    pub fn n_recorded(&self) -> u64 {
        (self.n_iter.saturating_sub(self.burn_in)) / self.thin.max(1)
    }

    /// Whether iteration k (1-based) is recorded: after burn-in, every `thin`-th.
    pub(crate) fn keeps(&self, k: u64) -> bool {
        k > self.burn_in && (k - self.burn_in).is_multiple_of(self.thin)
    }
}
