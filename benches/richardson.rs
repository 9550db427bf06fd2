//! Cost of one SGRRLD iteration (three minibatch gradient evaluations: one for chain A, two for
//! chain B), with the two chains run serially or on two threads.
//!
//! The `Runner` runs whole chains, so each benchmark times one run with one replicate
//! (`n_chains = 1`) of `N_ITER` iterations (burn-in `BURN_IN`, running moments only), started at
//! the MAP; the throughput is `N_ITER` elements, so criterion's "elements/s" are SGRRLD
//! iterations per second and the time divided by `N_ITER` is the time per iteration (the setup,
//! one gradient per chain at θ₀, is included and negligible). For comparison, `sgld` times the
//! same number of plain SGLD iterations through the `Runner` (one gradient each).
//!
//! - `serial`: `parallel: false`, A then B on one thread: about 3× an SGLD iteration.
//! - `parallel`: `parallel: true`, A ‖ B with `rayon::join`: the critical path is chain B (two
//!   gradients per iteration), so at best 2/3 of `serial`, if a second core is free.
//!
//! Settings: Bayesian logistic regression, N = 1e5, d = 10, n = 100 (γ = 0.1/N, as in the
//! `samplers` bench), and the linear Gaussian model of the `sgrrld_gaussian` example (N = 1000,
//! d = 1, n = 100, γ = 2e-4), where an iteration is so cheap that thread overheads show.
//!
//! Run with `cargo bench --bench richardson`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sgmcmc::{
    LinearGaussian, LogisticRegression, Minibatch, Model, RunSettings, Runner, Sgld, SgldSettings, Sgrrld, Storage,
};
use std::hint::black_box;
use std::time::Duration;

/// Seed of the synthetic data sets.
const DATA_SEED: u64 = 20_160_601;
/// Seed of the chains' random streams.
const CHAIN_SEED: u64 = 7;
/// Iterations per timed run (of chain A for SGRRLD), burn-in included.
const N_ITER: u64 = 2_000;
/// Burn-in iterations of a timed run.
const BURN_IN: u64 = 100;
/// Minibatch size n.
const BATCH: usize = 100;

fn settings(parallel: bool) -> RunSettings {
    RunSettings {
        n_iter: N_ITER,
        burn_in: BURN_IN,
        thin: 1,
        n_chains: 1,
        seed: CHAIN_SEED,
        storage: Storage::Moments,
        parallel,
        ..Default::default()
    }
}

/// Benchmarks `sgld`, `serial` and `parallel` for one model, step size and starting point.
fn bench_model<M: Model>(c: &mut Criterion, group_name: &str, model: &M, gamma: f64, theta0: &[f64]) {
    let sgld = Sgld::new(SgldSettings::constant(gamma), Minibatch::new(BATCH)).expect("valid settings");
    let rr = Sgrrld::new(sgld.clone());
    let mut group = c.benchmark_group(group_name);
    group.throughput(Throughput::Elements(N_ITER));
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    let id = format!("N={},d={},n={BATCH},iters={N_ITER}", model.n_data(), model.dim());
    group.bench_function(BenchmarkId::new("sgld", &id), |b| {
        b.iter(|| {
            Runner::new(black_box(model), &sgld).start(theta0).settings(settings(false)).run().expect("finite chain")
        })
    });
    for (name, parallel) in [("serial", false), ("parallel", true)] {
        group.bench_function(BenchmarkId::new(name, &id), |b| {
            b.iter(|| {
                Runner::new(black_box(model), &rr)
                    .start(theta0)
                    .settings(settings(parallel))
                    .run()
                    .expect("finite chains")
            })
        });
    }
    group.finish();
}

fn sgrrld_iteration(c: &mut Criterion) {
    let logistic = LogisticRegression::synthetic(100_000, 10, 10.0, DATA_SEED).expect("valid model");
    let map = logistic.map().expect("MAP converges");
    bench_model(
        c,
        "sgrrld_iteration_logistic",
        &logistic,
        0.1 / logistic.n_data() as f64,
        map.as_slice().expect("contiguous"),
    );

    let gaussian =
        LinearGaussian::synthetic_scaled(1_000, 1, 0.5f64.sqrt(), 1.0, 10.0, DATA_SEED).expect("valid model");
    let mean = gaussian.posterior_mean().to_vec();
    bench_model(c, "sgrrld_iteration_linear_gaussian", &gaussian, 2e-4, &mean);
}

criterion_group!(benches, sgrrld_iteration);
criterion_main!(benches);
