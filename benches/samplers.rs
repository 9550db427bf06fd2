//! Throughput of one SGLD iteration on Bayesian logistic regression.
//!
//! Each benchmark times a single [`Sampler::step`] of `Sgld<Minibatch>` (f64, single thread) on a
//! synthetic [`LogisticRegression`] data set: a minibatch draw of n indices (with replacement),
//! the minibatch gradient (one pass over n gathered rows), d Gaussian draws and the update. The
//! model is built and the chain started at the MAP outside the timed loop; the chain then keeps
//! running across all timed iterations, so the figures are for a chain at stationarity.
//!
//! Settings (N data, dimension d, batch size n): (1e5, 10, 100), (1e5, 100, 100) and
//! (1e6, 20, 1000). Throughput is one element per iteration, so criterion reports iterations per
//! second directly.
//!
//! The group `whitened_sgld_step_logistic` times the same steps with the dense whitening that
//! `tune` chooses by default (two triangular products, d² multiply-adds, per step).
//!
//! Run with `cargo bench --bench samplers`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sgmcmc::rng::stream;
use sgmcmc::{LogisticRegression, Minibatch, Sampler, Sgld, SgldSettings, StepSize, Whitening};
use std::hint::black_box;
use std::time::Duration;

/// Seed of the synthetic data sets.
const DATA_SEED: u64 = 20_160_601;
/// Seed of the chain's random stream.
const CHAIN_SEED: u64 = 7;
/// Prior variance σ² of the logistic model.
const PRIOR_VAR: f64 = 10.0;

/// One benchmark setting.
struct Setting {
    n_data: usize,
    dim: usize,
    batch: usize,
}

const SETTINGS: [Setting; 3] = [
    Setting { n_data: 100_000, dim: 10, batch: 100 },
    Setting { n_data: 100_000, dim: 100, batch: 100 },
    Setting { n_data: 1_000_000, dim: 20, batch: 1_000 },
];

/// Times one SGLD step on each setting, plain or (`whiten`) with the dense whitening that
/// `tune` chooses by default (the Laplace factor at the MAP: two triangular products of d²/2
/// multiply-adds beside the gradient's n·d).
fn bench_steps(c: &mut Criterion, group_name: &str, whiten: bool) {
    let mut group = c.benchmark_group(group_name);
    group.throughput(Throughput::Elements(1));
    group.sample_size(50).warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(6));
    for s in &SETTINGS {
        let model = LogisticRegression::synthetic(s.n_data, s.dim, PRIOR_VAR, DATA_SEED).expect("valid model");
        let map = model.map().expect("MAP converges");
        let map = map.as_slice().expect("contiguous");
        let mut sampler = if whiten {
            let hessian = model.hessian(map).expect("Hessian");
            let w = Whitening::from_hessian(map, &hessian).expect("positive definite");
            // In whitened units the curvature is 1: a step of 1e-2 is stable.
            Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-2) }, Minibatch::new(s.batch))
                .expect("valid settings")
                .with_whitening(Some(w.into()))
        } else {
            // γ = 0.1/N: the potential's Hessian has largest eigenvalue at most about N/4, so
            // γL ≤ 1/40 and the chain is stable for any number of iterations.
            let step_size = StepSize::Constant(0.1 / s.n_data as f64);
            Sgld::new(SgldSettings { step_size }, Minibatch::new(s.batch)).expect("valid settings")
        };
        let mut rng = stream(CHAIN_SEED, &[0]);
        sampler.init(&model, map, &mut rng).expect("init succeeds");
        let id = BenchmarkId::from_parameter(format!("N={},d={},n={}", s.n_data, s.dim, s.batch));
        group.bench_function(id, |b| b.iter(|| sampler.step(black_box(&model), &mut rng).expect("finite chain")));
        assert!(sampler.position().iter().all(|x| x.is_finite()), "chain stays finite");
    }
    group.finish();
}

fn sgld_step_logistic(c: &mut Criterion) {
    bench_steps(c, "sgld_step_logistic", false);
}

fn whitened_sgld_step_logistic(c: &mut Criterion) {
    bench_steps(c, "whitened_sgld_step_logistic", true);
}

criterion_group!(benches, sgld_step_logistic, whitened_sgld_step_logistic);
criterion_main!(benches);
