//! The synthetic generator's Poisson draw (the families' special functions are in
//! `numeric/special.rs`).

use crate::models::standard_normal;
use rand::RngExt;

/// A Poisson(λ) draw: inversion by sequential search for λ < 30, the normal approximation
/// rounded (only for synthetic data) above.
pub(super) fn poisson<R: rand::Rng + ?Sized>(lam: f64, rng: &mut R) -> f64 {
    if lam < 30.0 {
        let (mut k, mut p, u) = (0.0, (-lam).exp(), rng.random::<f64>());
        let mut cdf = p;
        while u > cdf && k < 1_000.0 {
            k += 1.0;
            p *= lam / k;
            cdf += p;
        }
        k
    } else {
        (lam + lam.sqrt() * standard_normal(rng)).round().max(0.0)
    }
}
