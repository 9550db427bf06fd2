//! The integration tests, one module per file, built as one test binary: one build of the
//! crate's generic samplers and runners instead of one per file (`autotests = false` in
//! Cargo.toml; `alloc`, with its counting global allocator, and the feature-gated `autodiff`,
//! `zarr` and `mpi` stay separate binaries). Run one file's tests with
//! `cargo test --release --test suite foundations::`.

mod common;
#[path = "../examples/support/multimodal.rs"]
mod multimodal;
#[path = "common/posteriors.rs"]
mod posteriors;
#[path = "../examples/support/mod.rs"]
mod support;

#[path = "checkpoint.rs"]
mod checkpoint;
#[path = "constrained.rs"]
mod constrained;
#[path = "control_variates.rs"]
mod control_variates;
#[path = "diagnostics.rs"]
mod diagnostics;
#[path = "engine.rs"]
mod engine;
#[path = "errors.rs"]
mod errors;
#[path = "estimators.rs"]
mod estimators;
mod f32_data;
#[path = "foundations.rs"]
mod foundations;
#[path = "glm.rs"]
mod glm;
#[path = "guards.rs"]
mod guards;
#[path = "hamcmc.rs"]
mod hamcmc;
#[path = "hardening.rs"]
mod hardening;
#[path = "mf.rs"]
mod mf;
#[path = "mlsgld.rs"]
mod mlsgld;
#[path = "model_checks.rs"]
mod model_checks;
#[path = "multimodal.rs"]
mod multimodal_weights;
#[path = "real_data.rs"]
mod real_data;
#[path = "reexports.rs"]
mod reexports;
#[path = "reproducibility.rs"]
mod reproducibility;
#[path = "richardson.rs"]
mod richardson;
#[path = "settings.rs"]
mod settings;
#[path = "stationary.rs"]
mod stationary;
#[path = "tempering.rs"]
mod tempering;
#[path = "tune.rs"]
mod tune;
#[path = "value_stability.rs"]
mod value_stability;
#[path = "variance_reduced.rs"]
mod variance_reduced;
