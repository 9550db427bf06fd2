//! Random number streams: one reproducible generator per chain (or per independent sample).
//!
//! Every stream is derived from a master seed and a small tuple of indices *before* any thread
//! starts, so a run's draws do not depend on how many threads execute it.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// The generator every chain uses: xoshiro256++ (value-stable across versions of this crate's
/// dependencies, 256-bit state, fast).
pub type ChainRng = rand_xoshiro::Xoshiro256PlusPlus;

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 0x5EED_2016;

/// SplitMix64's output function: a bijective 64-bit mixer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator for stream `indices` of master seed `seed`.
///
/// Distinct index tuples give (with overwhelming probability) unrelated streams; the same
/// `(seed, indices)` always gives the same stream. Used with `[chain]` for chains and with
/// `[level, sample]`-style tuples by estimators made of independent samples.
pub fn stream(seed: u64, indices: &[u64]) -> ChainRng {
    let mut h = mix64(seed ^ 0x9E37_79B9_7F4A_7C15);
    for &i in indices {
        h = mix64(h ^ mix64(i.wrapping_add(0x632B_E59B_D9B4_E019)));
    }
    ChainRng::seed_from_u64(h)
}

/// Fills `out` with independent standard normal draws.
#[inline]
pub(crate) fn fill_standard_normal<R: rand::Rng + ?Sized>(rng: &mut R, out: &mut [f64]) {
    for o in out.iter_mut() {
        *o = StandardNormal.sample(rng);
    }
}

/// A uniform integer in `0..range` (`range ≥ 1`), exactly unbiased.
///
/// Lemire's multiply-shift method with rejection (D. Lemire, *Fast random integer generation in
/// an interval*, ACM TOMACS 2019): the high word of `u · range` for a uniform 64-bit `u`,
/// redrawn when the low word falls below `2⁶⁴ mod range`. A redraw has probability below
/// `range / 2⁶⁴`, and the division computing that threshold is only done when one may be needed,
/// so the cost is one 64-bit draw and one multiplication. The generator's state stays in
/// registers when this is inlined into a loop (`rand`'s `random_range` is an out-of-line call
/// per index).
#[inline(always)]
pub(crate) fn uniform_below<R: Rng + ?Sized>(rng: &mut R, range: u64) -> u64 {
    debug_assert!(range > 0, "empty range");
    let mut m = u128::from(rng.next_u64()) * u128::from(range);
    if (m as u64) < range {
        let threshold = range.wrapping_neg() % range;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(range);
        }
    }
    (m >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a1 = stream(1, &[0]).next_u64();
        let a2 = stream(1, &[0]).next_u64();
        let b = stream(1, &[1]).next_u64();
        let c = stream(2, &[0]).next_u64();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        assert_ne!(a1, c);
        assert_ne!(stream(1, &[0, 1]).next_u64(), stream(1, &[1, 0]).next_u64());
    }

    /// Value stability: the first draw of the default stream is pinned, so a change of generator
    /// or of derivation (which would silently change every user's results) fails here.
    #[test]
    fn value_stability() {
        let mut r = stream(DEFAULT_SEED, &[0]);
        let first = r.next_u64();
        assert_eq!(first, PINNED_FIRST_DRAW, "stream derivation changed");
    }

    const PINNED_FIRST_DRAW: u64 = 9_932_701_773_435_248_547;
}
