//! One sample of a level ([`LevelSample`]): its difference, fine value, cost and end points.

use crate::cost::Cost;
use serde::{Deserialize, Serialize};

/// One sample of one level.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSample {
    /// `Δ_l` (for level 0, `g_0`).
    pub delta: f64,
    /// The fine quantity `g_l`.
    pub fine: f64,
    /// Its cost.
    pub cost: Cost,
    /// End points (fine, then coarse ones), if kept.
    pub points: Vec<Vec<f64>>,
    /// Level 0 only: `g` at half the horizon (step ⌈m/2⌉ of the path), for the relaxation test
    /// of [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive); equal to `fine` on other levels.
    pub half: f64,
}
