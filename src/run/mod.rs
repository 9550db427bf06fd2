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

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::numeric::rng::{ChainRng, stream};
use crate::run::method::{Method, Resumable};
use crate::run::observe::{Control, Observer, Progress};
use crate::samplers::Sampler;
use crate::trace::estimate::{Estimate, Moments, Part, Samples};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

mod settings;
pub use settings::*;
mod output;
pub use output::*;
mod chains;
pub(crate) use chains::check_starts;
mod drive;
pub(crate) use drive::*;

#[cfg(test)]
mod tests;
