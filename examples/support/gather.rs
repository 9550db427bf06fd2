//! The large-data measurements shared by `examples/gather.rs` and `benches/gather.rs`: the
//! settings, the random-gather probe (the limit a minibatch step cannot beat) and a plain-Rust
//! SGLD step written as a user would write it (the reference the crate's step is compared with).
#![allow(dead_code)]

use rand_distr::{Distribution, StandardNormal};
use sgmcmc::prefetch::{PREFETCH_DISTANCE, prefetch_row};
use sgmcmc::{DataScalar, Subsample};

/// An instruction set a probe is compiled for: the baseline (SSE2 on x86-64) or AVX2 (the two
/// compilations of the crate's row kernels, one picked at run time: `Rows::add_gradient_blocks`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Isa {
    /// The target's baseline.
    Baseline,
    /// AVX2 (x86-64).
    Avx2,
}

impl Isa {
    /// The instruction sets this processor runs.
    pub fn available() -> Vec<Isa> {
        let mut v = vec![Isa::Baseline];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
        }
        v
    }
}

/// Evaluates the expression inside a function compiled for `$isa` (which must be available).
macro_rules! compiled_for {
    ($isa:expr, $e:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            fn avx2<T>(f: impl FnOnce() -> T) -> T {
                f()
            }
            match $isa {
                Isa::Baseline => $e,
                // SAFETY: `Isa::available` lists AVX2 only if the processor has it.
                Isa::Avx2 => unsafe {
                    avx2(
                        #[inline(always)]
                        || $e,
                    )
                },
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = $isa;
            $e
        }
    }};
}

/// One setting: N data, dimension d, minibatch n.
pub struct Setting {
    /// Data set size N.
    pub n_data: usize,
    /// Dimension d.
    pub dim: usize,
    /// Minibatch size n.
    pub batch: usize,
}

/// The settings: two with data in the L3 cache (N = 10⁵; 8 and 80 MB in f64), the large-data
/// setting of issue 51 (160 MB) and one ten times larger (1.6 GB).
pub const SETTINGS: [Setting; 4] = [
    Setting { n_data: 100_000, dim: 10, batch: 100 },
    Setting { n_data: 100_000, dim: 100, batch: 100 },
    Setting { n_data: 1_000_000, dim: 20, batch: 1_000 },
    Setting { n_data: 10_000_000, dim: 20, batch: 1_000 },
];

/// Seed of the synthetic data sets.
pub const DATA_SEED: u64 = 20_160_601;
/// Prior variance σ² of the logistic model.
pub const PRIOR_VAR: f64 = 10.0;

/// The random-gather limit: draws a minibatch of indices exactly as [`sgmcmc::Minibatch`] does
/// (same generator, same law) and sums the drawn rows into `acc`, prefetching each row
/// [`PREFETCH_DISTANCE`] rows ahead. Nothing a minibatch step must do is left out but the
/// gradient's arithmetic, so a step cannot take less time than this. Compiled for `isa` (one of
/// [`Isa::available`]): the limit is the fastest of its compilations, as the crate's row kernels
/// are compiled for AVX2 too.
pub fn gather_probe<X: DataScalar, R: rand::Rng>(
    isa: Isa,
    data: &[X],
    d: usize,
    sub: &mut Subsample,
    rng: &mut R,
    acc: &mut [f64],
) -> f64 {
    compiled_for!(isa, probe_body(data, d, sub, rng, acc))
}

#[inline(always)]
fn probe_body<X: DataScalar, R: rand::Rng>(
    data: &[X],
    d: usize,
    sub: &mut Subsample,
    rng: &mut R,
    acc: &mut [f64],
) -> f64 {
    sub.draw(rng);
    let idx = sub.indices();
    for &i in &idx[..idx.len().min(PREFETCH_DISTANCE)] {
        prefetch_row(&data[i * d..(i + 1) * d]);
    }
    for (k, &i) in idx.iter().enumerate() {
        if let Some(&ahead) = idx.get(k + PREFETCH_DISTANCE) {
            prefetch_row(&data[ahead * d..(ahead + 1) * d]);
        }
        for (a, &x) in acc.iter_mut().zip(&data[i * d..(i + 1) * d]) {
            *a += x.into();
        }
    }
    acc[0]
}

/// The gather probe in the form issue 51 measured it (its "gather limit"): the same minibatch
/// draw and prefetching, but each row summed into four scalar accumulators (element j into
/// accumulator j mod 4), a sequential loop that costs more arithmetic than [`gather_probe`]'s
/// vector sum (about 17 µs against 6 µs for 1 000 rows of d = 20 in cache). Kept so that the
/// issue's ratios can be read on the same definition; [`gather_probe`] is the stricter limit.
pub fn gather_probe_scalar<X: DataScalar, R: rand::Rng>(
    isa: Isa,
    data: &[X],
    d: usize,
    sub: &mut Subsample,
    rng: &mut R,
) -> f64 {
    compiled_for!(isa, scalar_probe_body(data, d, sub, rng))
}

#[inline(always)]
fn scalar_probe_body<X: DataScalar, R: rand::Rng>(data: &[X], d: usize, sub: &mut Subsample, rng: &mut R) -> f64 {
    sub.draw(rng);
    let idx = sub.indices();
    for &i in &idx[..idx.len().min(PREFETCH_DISTANCE)] {
        prefetch_row(&data[i * d..(i + 1) * d]);
    }
    let mut acc = [0.0f64; 4];
    for (k, &i) in idx.iter().enumerate() {
        if let Some(&ahead) = idx.get(k + PREFETCH_DISTANCE) {
            prefetch_row(&data[ahead * d..(ahead + 1) * d]);
        }
        for (j, &x) in data[i * d..(i + 1) * d].iter().enumerate() {
            acc[j & 3] += x.into();
        }
    }
    acc.iter().sum()
}

/// A plain-Rust SGLD step on logistic regression, as a user would write it: draw the minibatch,
/// one pass per row (dot product, `1/(1 + exp(−z)) − y`, add the row), then
/// `θ ← θ − γ (N/n · g + θ/σ²) + √(2γ) ξ`. No blocking, no prefetching.
#[allow(clippy::too_many_arguments)]
pub fn plain_sgld_step<R: rand::Rng>(
    data: &[f64],
    labels: &[f64],
    d: usize,
    sub: &mut Subsample,
    rng: &mut R,
    theta: &mut [f64],
    grad: &mut [f64],
    step: f64,
) {
    sub.draw(rng);
    grad.fill(0.0);
    for &i in sub.indices() {
        let row = &data[i * d..(i + 1) * d];
        let z: f64 = row.iter().zip(theta.iter()).map(|(x, t)| x * t).sum();
        let r = 1.0 / (1.0 + (-z).exp()) - labels[i];
        for (g, x) in grad.iter_mut().zip(row) {
            *g += r * x;
        }
    }
    let scale = sub.scale();
    let sd = (2.0 * step).sqrt();
    for (t, g) in theta.iter_mut().zip(grad.iter()) {
        let xi: f64 = StandardNormal.sample(rng);
        *t -= step * (scale * g + *t / PRIOR_VAR) - sd * xi;
    }
}
