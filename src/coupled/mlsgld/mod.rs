//! Multilevel and antithetic multilevel SGLD (Giles, Nagapetyan, Szpruch, Vollmer & Zygalakis).

mod coupling;
pub use coupling::MlCoupling;
mod level_sample;
pub use level_sample::LevelSample;
mod settings;
pub use settings::{
    ADAPTIVE_HORIZON_DOUBLINGS, ADAPTIVE_RETRY_COST, AdaptiveSettings, LevelStats, MlSgldSettings, MlmcResult,
    MomentErrors, RmseTarget,
};
mod allocate;
mod construct;
mod fixed;
mod level;
pub use fixed::MlmcCheckpoint;
mod adaptive;

mod sampler;
pub use sampler::MlSgld;

#[cfg(test)]
mod tests;
