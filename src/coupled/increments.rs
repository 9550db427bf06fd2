//! The shared Gaussian increments of a coupled pair of paths: two fine steps' `z₁`, `z₂` and the
//! coarse step's, `(z₁ + z₂)/√2` or as the sampler combines them
//! ([`Discretisation::combine_increments`]).

use crate::numeric::rng::fill_standard_normal;
use crate::samplers::Discretisation;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The Gaussian increments of one coarse step and the two fine steps it spans: `z₁`, `z₂`
/// drive the fine steps (time step h/2 each), the coarse increment the coarse one (time step h),
/// so both paths follow one Brownian path.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SharedIncrements {
    pub z1: Vec<f64>,
    pub z2: Vec<f64>,
    pub coarse: Vec<f64>,
}

impl SharedIncrements {
    /// Increments of `len` normals (a sampler's [`increment_len`](Discretisation::increment_len)).
    pub fn new(len: usize) -> Self {
        SharedIncrements { z1: vec![0.0; len], z2: vec![0.0; len], coarse: vec![0.0; len] }
    }

    /// Draws `z₁` then `z₂` from `rng` and sets the coarse increment of `sampler`'s step of
    /// `fraction × h_k`.
    #[inline]
    pub fn draw<S: Discretisation, R: Rng + ?Sized>(&mut self, sampler: &S, k: u64, fraction: f64, rng: &mut R) {
        fill_standard_normal(rng, &mut self.z1);
        fill_standard_normal(rng, &mut self.z2);
        sampler.combine_increments(k, fraction, &self.z1, &self.z2, &mut self.coarse);
    }
}
