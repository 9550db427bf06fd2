//! The shared Gaussian increments of a coupled pair of paths: two fine steps' `z₁`, `z₂` and the
//! coarse step's `(z₁ + z₂)/√2`.

use crate::numeric::rng::fill_standard_normal;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The Gaussian increments of one coarse step and the two fine steps it spans: `z₁`, `z₂`
/// drive the fine steps (time step h/2 each), `(z₁ + z₂)/√2` the coarse one (time step h), so
/// both paths follow one Brownian path.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SharedIncrements {
    pub z1: Vec<f64>,
    pub z2: Vec<f64>,
    pub coarse: Vec<f64>,
}

impl SharedIncrements {
    pub fn new(dim: usize) -> Self {
        SharedIncrements { z1: vec![0.0; dim], z2: vec![0.0; dim], coarse: vec![0.0; dim] }
    }

    /// Draws `z₁` then `z₂` from `rng` and sets the coarse increment `(z₁ + z₂)/√2`.
    #[inline]
    pub fn draw<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        fill_standard_normal(rng, &mut self.z1);
        fill_standard_normal(rng, &mut self.z2);
        let r2 = std::f64::consts::FRAC_1_SQRT_2;
        for ((c, a), b) in self.coarse.iter_mut().zip(&self.z1).zip(&self.z2) {
            *c = (a + b) * r2;
        }
    }
}
