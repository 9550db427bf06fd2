//! Cost of the diagnostics: the kernel Stein discrepancy and the rank-normalised ESS and R̂.
//!
//! - `ksd_imq/n=10000,d=10`: [`diagnostics::ksd_imq`] (IMQ kernel, c = 1, β = −1/2, equal weights)
//!   on n = 10 000 draws `xᵢ ~ N(0, I₁₀)` with their exact scores `−xᵢ`. The computation is the
//!   exact double sum over all n² pairs, O(n²d) ≈ 10⁹ flops plus one `powf` per pair, rows in
//!   parallel on the rayon pool: several seconds per evaluation on two cores, so only 10 samples
//!   are taken (criterion's minimum). Halving n divides the time by four. Below
//!   `KSD_GRAM_MIN_DIM` = 16 dimensions the kernel's inner products are taken one pair at a time.
//! - `ksd_imq/n=2000,d=15`, `…d=16`, `…d=1001`: the same on n = 2 000 draws either side of
//!   `KSD_GRAM_MIN_DIM` (from 16 the inner products come from Gram tiles, matrix products) and at
//!   d = 1 001 (a pilot of `tune` on a large model scores 800 such draws per step size).
//!   2026-11-27, two cores: 31.0 ms at d = 15, 14.7 ms at d = 16 (2.1× less for slightly more
//!   arithmetic), 255 ms at d = 1 001. With the pair path forced at every d (ad hoc, not a bench):
//!   93 → 40 ms at d = 64, 1.21 s → 0.29 s at d = 1 001.
//! - `ess_bulk/…` and `rhat/…`: [`diagnostics::ess_bulk`] and [`diagnostics::rhat`] on a
//!   (4 chains × 10 000 draws) array, single thread. Both rank-normalise all 40 000 draws (a
//!   sort); the ESS then sums autocovariances (computed directly, one O(n) pass per lag) until
//!   Geyer's initial positive sequence ends, so its cost grows with the autocorrelation: `iid`
//!   draws are N(0, 1), `ar1=0.9` draws are a stationary AR(1) process with coefficient 0.9
//!   (integrated autocorrelation time 19, typical of an MCMC trace). R̂ needs no autocovariances
//!   and is timed on the i.i.d. draws.
//!
//! Inputs are generated from fixed seeds outside the timed loop.
//!
//! Run with `cargo bench --bench diagnostics` (about 90 s).

#[path = "../examples/support/mod.rs"]
mod support;
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use ndarray::Array2;
use sgmcmc::diagnostics::{self, KsdSettings};
use sgmcmc::rng::stream;
use std::hint::black_box;
use std::time::Duration;
use support::normals;

/// Draws for the KSD.
const KSD_N: usize = 10_000;
/// Dimension for the KSD.
const KSD_D: usize = 10;
/// Chains for ESS and R̂.
const CHAINS: usize = 4;
/// Draws per chain for ESS and R̂.
const DRAWS: usize = 10_000;
/// AR(1) coefficient of the autocorrelated traces.
const PHI: f64 = 0.9;
/// Seed of the inputs.
const SEED: u64 = 2017;

/// An (rows × cols) array of independent standard normal draws from stream `index`.
fn normal_array(rows: usize, cols: usize, index: u64) -> Array2<f64> {
    let mut v = vec![0.0; rows * cols];
    normals(&mut stream(SEED, &[index]), &mut v);
    Array2::from_shape_vec((rows, cols), v).expect("length rows * cols")
}

/// Each row turned into a stationary AR(1) path `x_t = φ x_{t−1} + √(1 − φ²) ε_t` (unit
/// marginal variance), started in stationarity.
fn ar1(eps: &Array2<f64>, phi: f64) -> Array2<f64> {
    let mut x = eps.clone();
    let s = (1.0 - phi * phi).sqrt();
    for mut row in x.outer_iter_mut() {
        for t in 1..row.len() {
            row[t] = phi * row[t - 1] + s * row[t];
        }
    }
    x
}

fn ksd(c: &mut Criterion) {
    let x = normal_array(KSD_N, KSD_D, 0);
    let scores = -&x;
    let mut group = c.benchmark_group("ksd_imq");
    // One evaluation per sample (10 in all, 30–40 s).
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(40));
    group.bench_function(BenchmarkId::from_parameter(format!("n={KSD_N},d={KSD_D}")), |b| {
        b.iter(|| {
            diagnostics::ksd_imq(black_box(x.view()), black_box(scores.view()), None, KsdSettings::default())
                .expect("valid input")
        })
    });
    // 25 ms to 0.3 s per evaluation: 5 s each.
    group.measurement_time(Duration::from_secs(5));
    for d in [15, 16, 1_001] {
        let x = normal_array(2_000, d, 3);
        let scores = -&x;
        group.bench_function(BenchmarkId::from_parameter(format!("n=2000,d={d}")), |b| {
            b.iter(|| {
                diagnostics::ksd_imq(black_box(x.view()), black_box(scores.view()), None, KsdSettings::default())
                    .expect("valid input")
            })
        });
    }
    group.finish();
}

fn ess_rhat(c: &mut Criterion) {
    let iid = normal_array(CHAINS, DRAWS, 1);
    let correlated = ar1(&iid, PHI);
    let id = |kind: &str| BenchmarkId::from_parameter(format!("{kind},{CHAINS}x{DRAWS}"));
    let mut group = c.benchmark_group("ess_bulk");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for (kind, draws) in [("iid", &iid), ("ar1=0.9", &correlated)] {
        group.bench_function(id(kind), |b| {
            b.iter(|| diagnostics::ess_bulk(black_box(draws.view())).expect("valid draws"))
        });
    }
    // ESS and MCSE of 4 × 100 000 slowly mixing draws (AR(1), φ = 0.999): the autocovariances come
    // from FFTs, so the cost no longer grows with the lag at which Geyer's sum stops.
    let long = ar1(&normal_array(CHAINS, 100_000, 2), 0.999);
    group.bench_function(BenchmarkId::from_parameter(format!("ess_bulk+mcse_mean,ar1=0.999,{CHAINS}x100000")), |b| {
        b.iter(|| {
            let v = black_box(long.view());
            diagnostics::ess_bulk(v).expect("valid draws") + diagnostics::mcse_mean(v).expect("valid draws")
        })
    });
    // Before: the same with the former direct autocovariance sums (O(n × lag)), in the same run.
    group.sample_size(10);
    group.bench_function(
        BenchmarkId::from_parameter(format!("direct:ess_bulk+mcse_mean,ar1=0.999,{CHAINS}x100000")),
        |b| {
            b.iter(|| {
                let v = black_box(long.view());
                diagnostics::direct::ess_bulk(v).expect("valid draws")
                    + diagnostics::direct::mcse_mean(v).expect("valid draws")
            })
        },
    );
    group.finish();
    let mut group = c.benchmark_group("rhat");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    group.bench_function(id("iid"), |b| b.iter(|| diagnostics::rhat(black_box(iid.view())).expect("valid draws")));
    group.finish();
}

criterion_group!(benches, ksd, ess_rhat);
criterion_main!(benches);
