//! Richardson–Romberg extrapolation over two coupled chains: SGRRLD and SGRRHMC.

mod bias;
mod output;
mod pairs;

pub use bias::{BiasReport, discretisation_bias};
pub use output::RrOutput;
pub(crate) use output::extrapolated_rows;

mod sampler;
pub use sampler::{NoiseCoupling, RichardsonRomberg, Sgrrhmc, Sgrrld};
