//! One SGRRLD iteration (three minibatch gradients: one for chain A, two for chain B) on
//! Bayesian logistic regression (N = 1e5, d = 10, n = 100), with the two chains run serially and
//! on two threads; timed over runs of 2000 iterations (`run_rr`, one replicate, moments only),
//! so criterion's throughput is iterations per second. Plain SGLD over the same 2000 iterations
//! for reference.
//!
//! Run with `cargo bench --bench richardson`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sgmcmc::{LogisticRegression, Minibatch, RunSettings, Sgld, SgldSettings, Sgrrld, Storage, run, run_rr};
use std::hint::black_box;
use std::time::Duration;

const N_ITER: u64 = 2_000;

fn sgrrld_iteration(c: &mut Criterion) {
    let model = LogisticRegression::synthetic(100_000, 10, 10.0, 20_160_601).expect("valid model");
    let map = model.map().expect("MAP converges");
    let start = map.as_slice().expect("contiguous");
    let base = Sgld::new(SgldSettings::constant(1e-6), Minibatch::new(100)).expect("valid settings");
    let rr = Sgrrld::new(base.clone());
    let mut group = c.benchmark_group("sgrrld_logistic_N=1e5_d=10_n=100");
    group.throughput(Throughput::Elements(N_ITER));
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    for parallel in [false, true] {
        let s = RunSettings { n_iter: N_ITER, burn_in: 1, storage: Storage::Moments, parallel, ..Default::default() };
        let name = if parallel { "sgrrld_two_threads" } else { "sgrrld_serial" };
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| black_box(run_rr(&model, &rr, start, &s).expect("finite")))
        });
    }
    let s = RunSettings { n_iter: N_ITER, burn_in: 1, storage: Storage::Moments, ..Default::default() };
    group.bench_function(BenchmarkId::from_parameter("sgld"), |b| {
        b.iter(|| black_box(run(&model, &base, start, &s).expect("finite")))
    });
    group.finish();
}

criterion_group!(benches, sgrrld_iteration);
criterion_main!(benches);
