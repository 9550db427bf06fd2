#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod cost;
mod coupled;
pub mod datasets;
#[cfg(feature = "mpi")]
pub mod distributed;
mod error;
mod gradient;
/// The long-form guide (`docs/GUIDE.md`): concepts, the tuning method, every sampler and
/// estimator, models, constraints, tempering, diagnostics, checkpoints, MPI and Zarr.
#[doc = include_str!("../docs/GUIDE.md")]
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
pub use numeric::rng;
pub use run::{checkpoint, observe, progress};
pub use trace::{diagnostics, export};

pub use cost::Cost;
pub use coupled::mlsgld::{
    ADAPTIVE_HORIZON_DOUBLINGS, ADAPTIVE_RETRY_COST, AdaptiveSettings, LevelSample, LevelStats, MlCoupling, MlSgld,
    MlSgldSettings, MlmcCheckpoint, MlmcResult, MomentErrors, RmseTarget,
};
pub use coupled::richardson::{
    BiasReport, NoiseCoupling, RichardsonRomberg, RrOutput, Sgrrhmc, Sgrrld, discretisation_bias, resume_rr, run_rr,
    run_rr_chains, run_rr_observed,
};
pub use coupled::step_bias::{STEP_BIAS_COST, STEP_BIAS_MIN_ITERATIONS, StepBias, convergence_with_bias, step_bias};
pub use coupled::tune_rr::{RrTrial, TunedRr, tune_rr};
pub use error::{Error, Result};
pub use gradient::control_variate::{ControlVariate, CvSettings};
pub use gradient::optim::{ModeSettings, Optimum, SgdSettings, find_mode, sgd};
pub use gradient::taylor::Taylor;
pub use gradient::variance_reduced::{Saga, Svrg};
pub use gradient::{FullGradient, GradientEstimator, Minibatch, Subsample, SubsampledEstimator};
pub use models::check::{CheckSettings, ModelCheck, check_model};
pub use models::model::Model;
pub use models::{
    Block, Constrained, Constraint, Family, Glm, GlmSettings, Layout, LinearGaussian, LogisticRegression, Pmf, Prior,
    Ratings, Temperature, Tempered,
};
pub use numeric::schedule::StepSize;
pub use run::{
    ChainReport, Divergence, OnDivergence, RunOutput, RunSettings, Storage, resume, run, run_chains,
    run_chains_observed, run_observed,
};
pub use sample::{Derived, Multilevel, Sample, Sampled, SampledMl, SampledRr};
pub use samplers::{
    AUTO_DENSE_MAX_DIM, CyclicalKernel, CyclicalSettings, CyclicalSgld, Discretisation, GradientNoise, Hamcmc,
    HamcmcSettings, Langevin, LangevinKernel, Lmc, METRIC_CORRECTION_MAX, Mala, MalaSettings, Metric,
    PreconditionedKernel, PreconditionedSgld, Psgld, PsgldKernel, PsgldSettings, Sampler, Sghmc, SghmcKernel,
    SghmcSettings, Sgld, SgldKernel, SgldSettings, Sgnht, SgnhtKernel, SgnhtSettings, SubsampledDiscretisation,
    Whitening,
};
pub use trace::estimate::{Estimate, Moments, Samples};
pub use trace::zv::{ZvEstimate, ZvOrder, zv, zv_matrix, zv_samples};

/// The common imports: `use sgmcmc::prelude::*;`. Every sampler and its settings, the coupled
/// methods (Richardson–Romberg, multilevel) with their runners, the tuners, the estimators, the
/// runners and the output types.
pub mod prelude {
    pub use crate::observe::{Control, Observer, Progress};
    pub use crate::sample::{Sample, Sampled};
    pub use crate::tune::{PlannedRun, Precondition, TuneSettings, dispersed_starts, tune};
    pub use crate::tune_rr;
    pub use crate::{
        AdaptiveSettings, Constrained, Constraint, ControlVariate, Cost, CvSettings, CyclicalSettings, CyclicalSgld,
        Error, Estimate, FullGradient, Glm, GlmSettings, GradientEstimator, Hamcmc, HamcmcSettings, Layout,
        LinearGaussian, Lmc, LogisticRegression, Mala, MalaSettings, Metric, Minibatch, MlSgld, MlSgldSettings,
        ModeSettings, Model, PreconditionedSgld, Psgld, PsgldSettings, RichardsonRomberg, RmseTarget, RunOutput,
        RunSettings, Sampler, Sghmc, SghmcSettings, Sgld, SgldSettings, Sgnht, SgnhtSettings, Sgrrhmc, Sgrrld,
        StepSize, Storage, Temperature, Tempered, Whitening, ZvOrder, check_model, diagnostics, export, find_mode,
        resume, resume_rr, run, run_chains, run_chains_observed, run_observed, run_rr, run_rr_chains,
    };
}

/// The exact `ndarray` this crate's API uses (arrays in and out): name it as `sgmcmc::ndarray`
/// so that a different `ndarray` version in your own `Cargo.toml` cannot clash.
pub use ndarray;
/// The exact `rand` this crate's API uses (the `Rng` bounds of samplers, [`rng::ChainRng`]).
pub use rand;
