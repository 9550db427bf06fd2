//! Large data: one SGLD step of the crate on the built-in logistic regression (f64 data and f32
//! data) beside the plain-Rust step of `examples/support/gather.rs` and the random-gather probe
//! (the same minibatch draw and a prefetching sum of the drawn rows: the least a step must do),
//! at the settings of `examples/support/gather.rs` (N = 10⁵ with d = 10 and 100, N = 10⁶ and
//! 10⁷ with d = 20, n = 100 or 1 000). Compare the times within one run: the ratios are what
//! `cargo run --release --example gather` prints and writes to `docs/performance.md`.
//!
//! Run with `cargo bench --bench gather` (the N = 10⁷ setting needs 2.5 GB of memory).

#[path = "../examples/support/gather.rs"]
mod gather;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gather::{DATA_SEED, Isa, PRIOR_VAR, SETTINGS, gather_probe, gather_probe_scalar, plain_sgld_step};
use sgmcmc::rng::stream;
use sgmcmc::{LogisticRegression, Minibatch, Sampler, Sgld, SgldSettings, StepSize, Subsample};
use std::hint::black_box;
use std::time::Duration;

fn gather(c: &mut Criterion) {
    let mut group = c.benchmark_group("large_data_step");
    group.throughput(Throughput::Elements(1));
    group.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for s in &SETTINGS {
        let m64 = LogisticRegression::synthetic(s.n_data, s.dim, PRIOR_VAR, DATA_SEED).expect("valid model");
        let m32 = m64.to_f32().expect("in f32's range");
        let start = m64.true_theta().expect("synthetic").to_vec();
        let step = 0.1 / s.n_data as f64;
        let sampler = Sgld::new(SgldSettings { step_size: StepSize::Constant(step) }, Minibatch::new(s.batch))
            .expect("valid settings");
        let param = format!("N={},d={},n={}", s.n_data, s.dim, s.batch);
        let (mut s64, mut s32) = (sampler.clone(), sampler);
        let mut rng = stream(7, &[0]);
        s64.init(&m64, &start, &mut rng).expect("init");
        s32.init(&m32, &start, &mut rng).expect("init");
        group.bench_function(BenchmarkId::new("crate_f64", &param), |b| {
            b.iter(|| s64.step(black_box(&m64), &mut rng).expect("finite chain"))
        });
        group.bench_function(BenchmarkId::new("crate_f32", &param), |b| {
            b.iter(|| s32.step(black_box(&m32), &mut rng).expect("finite chain"))
        });
        let x64 = m64.features();
        let x64 = x64.as_slice().expect("contiguous");
        let x32 = m32.features();
        let x32 = x32.as_slice().expect("contiguous");
        let mut sub = Subsample::new(s.batch, true);
        sub.prepare(s.n_data).expect("valid batch");
        let (mut theta, mut grad, mut acc) = (start.clone(), vec![0.0; s.dim], vec![0.0; s.dim]);
        group.bench_function(BenchmarkId::new("plain_rust_f64", &param), |b| {
            b.iter(|| plain_sgld_step(x64, m64.labels(), s.dim, &mut sub, &mut rng, &mut theta, &mut grad, step))
        });
        // The probes compiled for each instruction set the processor has (the limit is the
        // fastest of them).
        for isa in Isa::available() {
            let p = format!("{param},{isa:?}");
            group.bench_function(BenchmarkId::new("gather_probe_f64", &p), |b| {
                b.iter(|| black_box(gather_probe(isa, x64, s.dim, &mut sub, &mut rng, &mut acc)))
            });
            group.bench_function(BenchmarkId::new("gather_probe_scalar_f64", &p), |b| {
                b.iter(|| black_box(gather_probe_scalar(isa, x64, s.dim, &mut sub, &mut rng)))
            });
            group.bench_function(BenchmarkId::new("gather_probe_f32", &p), |b| {
                b.iter(|| black_box(gather_probe(isa, x32, s.dim, &mut sub, &mut rng, &mut acc)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, gather);
criterion_main!(benches);
