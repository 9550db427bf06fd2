//! How the coarse path of a multilevel sample meets the fine one ([`MlCoupling`]).

use serde::{Deserialize, Serialize};

/// How the coarse path of a level is coupled to the fine one.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MlCoupling {
    /// Algorithm 1: one coarse path; its minibatch is n indices drawn **without replacement**
    /// from the union τ¹ ∪ τ² of the two fine minibatches; `Δ_l = g(θᶠ) − g(θᶜ)`. With an
    /// estimator drawing with replacement (the paper's setting) the coarse minibatch has the law
    /// of a fine one and the telescoping sum is exact; with one drawing **without** replacement
    /// the union can repeat an index, so the coarse minibatch is not exactly a draw without
    /// replacement and the sum is only approximately telescoping: use
    /// [`Antithetic`](Self::Antithetic) there.
    Subsampling,
    /// Algorithm 2 (the default): two coarse paths, c⁺ on τ¹ and c⁻ on τ², both with the summed
    /// Gaussian increment; `Δ_l = g(θᶠ) − ½(g(θᶜ⁺) + g(θᶜ⁻))`.
    #[default]
    Antithetic,
}
