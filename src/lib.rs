#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod cost;
mod coupled;
pub mod datasets;
#[cfg(feature = "mpi")]
pub mod distributed;
mod error;
mod gradient;
/// Where to read what: the guide is the API documentation itself, each topic on the page of the
/// code it describes.
///
/// | topic | where |
/// | --- | --- |
/// | the trustworthy path in one call: tuning, dispersed starts, the run, the verdict with the step's bias | [`sample`] |
/// | runs by hand: starts, settings, observers, stopping, checkpoints, estimates, cost | [`runner`], [`observe`], [`checkpoint`] |
/// | the model: potentials and gradients, model checks, writing your own, the built-in models | [`Model`] |
/// | automatic differentiation: forward mode, candle | [`ad`] |
/// | constrained parameters (positive, simplex, correlation, …) | [`Constrained`], [`Layout`] |
/// | tempered posteriors | [`Tempered`] |
/// | gradient estimators: minibatch, control variates, SVRG, SAGA, Taylor | [`GradientEstimator`] |
/// | every sampler, its update rule and reference; writing a kernel | [`Sampler`], [`Langevin`] |
/// | the tuning method, preconditioning, what the tuner predicts | [`tune`] |
/// | did the chains mix, the stated accuracy, the step's bias, validation, summaries | [`diagnostics`] |
/// | Richardson–Romberg and multilevel SGLD | [`RichardsonRomberg`], [`MlSgld`] |
/// | MPI: chains, replicates and data shards over ranks | `distributed` (feature `mpi`) |
/// | distributed matrix factorisation | [`mf`] |
/// | `.npy`, CSV and Zarr traces for ArviZ | [`export`] |
/// | examples and benches | `examples/README.md` |
/// | the layers, how to add a sampler, a model or an estimator | `ARCHITECTURE.md` |
/// | how the tests prove the crate right | `CONTRIBUTING.md` |
/// | what changed, with migration notes | `CHANGELOG.md` |
pub mod guide {}
pub mod mf;
mod models;
mod numeric;
mod run;
pub mod sample;
mod samplers;
mod trace;
pub mod tune;

pub use models::ad;
pub use numeric::{prefetch, rng};
pub use run::{checkpoint, observe, progress, runner};
pub use trace::{diagnostics, export};

pub use cost::Cost;
pub use coupled::mlsgld::{
    ADAPTIVE_HORIZON_DOUBLINGS, ADAPTIVE_RETRY_COST, AdaptiveSettings, LevelSample, LevelStats, MlCoupling, MlSgld,
    MlSgldSettings, MlmcCheckpoint, MlmcResult, MomentErrors, RmseTarget,
};
pub use coupled::richardson::{
    BiasReport, NoiseCoupling, RichardsonRomberg, RrOutput, Sgrrhmc, Sgrrld, discretisation_bias,
};
pub use coupled::step_bias::{
    STEP_BIAS_COST, STEP_BIAS_MAX_COST, STEP_BIAS_MIN_ITERATIONS, StepBias, convergence_with_bias, step_bias,
};
pub use coupled::tune_rr::{RrTrial, TunedRr, tune_rr};
pub use error::{DEFAULT_MEMORY_LIMIT, Error, KeptOutput, Result};
pub use gradient::auto::{Auto, Chosen};
pub use gradient::control_variate::{ControlVariate, CvSettings};
pub use gradient::optim::{ModeSettings, Optimum, SgdSettings, find_mode, sgd};
pub use gradient::taylor::Taylor;
pub use gradient::variance_reduced::{Saga, Svrg};
pub use gradient::{Batches, FullGradient, GradientEstimator, Minibatch, Subsample, SubsampledEstimator};
pub use models::check::{CheckSettings, ModelCheck, check_model};
pub use models::model::Model;
pub use models::{
    Block, Constrained, Constraint, DataScalar, Family, Glm, GlmSettings, Layout, LinearGaussian, LogisticRegression,
    Pmf, Prior, Ratings, Temperature, Tempered,
};
pub use numeric::schedule::StepSize;
pub use run::runner::{Method, Resumable, Resume, Runner};
pub use run::{ChainReport, Divergence, OnDivergence, RunOutput, RunSettings, STATE_VECTORS, Storage};
pub use sample::{Derived, Multilevel, Sample, SamplePath, Sampled, SampledMl, SampledRr};
pub use samplers::{
    AUTO_DENSE_MAX_DIM, Baoab, BaoabKernel, CentreRule, ContourKernel, Csgld, CsgldSettings, CyclicalKernel,
    CyclicalSettings, CyclicalSgld, Discretisation, GRADIENT_NOISE_BATCH, GradientNoise, Hamcmc, HamcmcSettings,
    KineticSettings, Langevin, LangevinKernel, Lmc, METRIC_CORRECTION_MAX, Mala, MalaSettings, Metric,
    PreconditionedKernel, PreconditionedSgld, Psgld, PsgldKernel, PsgldSettings, ReSgld, ReSgldSettings, ReplicaKernel,
    Sampler, Sghmc, SghmcKernel, SghmcSettings, Sgld, SgldKernel, SgldSettings, Sgnht, SgnhtKernel, SgnhtSettings,
    SubsampledDiscretisation, TunableKernel, Ubu, UbuKernel, Whitening,
};
pub use trace::estimate::{Estimate, Moments, Samples};
pub use trace::zv::{ZvEstimate, ZvOrder, zv, zv_matrix, zv_samples};

/// What a first program needs: `use sgmcmc::prelude::*;` — the model trait and the built-in
/// models, the trustworthy path ([`Sample`]) and the runner ([`Runner`]), the two workhorse
/// samplers with their gradient estimators, the Richardson–Romberg wrapper `Sample` also drives,
/// and the output types. Everything else is named at the crate root (`use sgmcmc::{Psgld, Mala,
/// Resume, …}`) or in its module (`sgmcmc::tune::tune`, `sgmcmc::observe::Budget`).
pub mod prelude {
    pub use crate::cost::Cost;
    pub use crate::coupled::richardson::RichardsonRomberg;
    pub use crate::error::Error;
    pub use crate::gradient::control_variate::{ControlVariate, CvSettings};
    pub use crate::gradient::optim::ModeSettings;
    pub use crate::gradient::{FullGradient, Minibatch};
    pub use crate::models::model::Model;
    pub use crate::models::{Glm, LinearGaussian, LogisticRegression};
    pub use crate::run::runner::Runner;
    pub use crate::run::{RunOutput, RunSettings};
    pub use crate::sample::{Sample, Sampled};
    pub use crate::samplers::{Sghmc, SghmcSettings, Sgld, SgldSettings};
    pub use crate::trace::estimate::Estimate;
}

/// The exact `ndarray` this crate's API uses (arrays in and out): name it as `sgmcmc::ndarray`
/// so that a different `ndarray` version in your own `Cargo.toml` cannot clash.
pub use ndarray;
/// The exact `rand` this crate's API uses (the `Rng` bounds of samplers, [`rng::ChainRng`]).
pub use rand;
