//! The runner: burn-in, thinning, storage, chains in parallel, observers that can stop a run,
//! divergences as data, cost and time, checkpoint and resume. Written once: chains of any
//! [`Sampler`] and Richardson–Romberg pairs are "units" driven by the same loop, and every
//! fan-out (chains, pairs, multilevel samples) goes through [`fan_out`]. Beside it: observers
//! (`observe.rs`), the terminal progress display (`progress.rs`) and checkpoint files
//! (`checkpoint.rs`).

pub mod checkpoint;
pub(crate) mod method;
pub mod observe;
pub(crate) mod placement;
pub mod progress;
pub mod runner;

mod chains;
mod drive;
mod output;
mod settings;

pub use output::{ChainReport, Divergence, RunOutput};
pub use settings::{OnDivergence, RunSettings, STATE_VECTORS, Storage};

pub(crate) use chains::check_starts;
pub(crate) use drive::{Finished, Recorder, Unit, contained, drive, fan_out};
#[cfg(feature = "mpi")]
pub(crate) use drive::{panic_is_contained, uncontained};

#[cfg(test)]
mod tests;
