//! Cost of one HAMCMC iteration against one SGLD iteration, as the dimension D and the memory M
//! grow.
//!
//! Each benchmark times a single [`Sampler::step`] (f64, single thread) on a synthetic
//! [`LinearGaussian`] model with N = 1000 data items in dimension D ∈ {10, 100, 1000}, with
//! minibatches of n = 10 (with replacement), so that the minibatch gradient (O(nD)) is cheap and the
//! sampler's own work shows:
//! - `hamcmc/M=m/D=d`: HAMCMC with memory M ∈ {2, 5, 10}: two minibatch gradients (at θ_{t−M}
//!   and θ_t, same minibatch), `H∇Ũ` by the two-loop recursion over M − 1 pairs (O(MD)), `S z`
//!   by the product form (O(MD), plus the O(M²D) refresh of the `B s` vectors after every new pair),
//!   and the new pair;
//! - `hamcmc/SGLD/D=d`: one SGLD iteration on the same model and minibatch size (one minibatch
//!   gradient, D Gaussian draws, the update), the baseline.
//!
//! The ratio of the two is HAMCMC's cost per iteration relative to SGLD's; the paper
//! (Şimşekli et al. 2016) describes it as "similar to SGLD". A ratio of about 2 is the floor
//! (two gradients per iteration); the L-BFGS work adds to it as M grows.
//!
//! Setup (model, exact posterior, `init` with its 2M warm-up steps) is outside the timed loop;
//! each chain then keeps running across all timed iterations. Step sizes are small enough for every
//! chain to stay finite: with L = 100·D + N, a bound on the curvature of a 10-item minibatch
//! potential, SGLD uses γ = 10⁻²/L and HAMCMC ε = 10⁻² with `H⁰ = I/L` and trust region λ = L. Every
//! pair then has `sᵀy > 0` (same-minibatch secant pairs of a convex quadratic), so the L-BFGS always
//! holds its M − 1 pairs and the cost is that of the steady state.
//!
//! Run with `cargo bench --bench hamcmc` (about a minute).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sgmcmc::rng::stream;
use sgmcmc::{Hamcmc, HamcmcSettings, LinearGaussian, Minibatch, Model, Sampler, Sgld, SgldSettings, StepSize};
use std::hint::black_box;
use std::time::Duration;

/// Number of data items N.
const N_DATA: usize = 1_000;
/// Minibatch size n.
const BATCH: usize = 10;
/// Dimensions D.
const DIMS: [usize; 3] = [10, 100, 1_000];
/// HAMCMC memories M.
const MEMORIES: [usize; 3] = [2, 5, 10];
/// Noise and prior variances of the synthetic model.
const NOISE_VAR: f64 = 1.0;
const PRIOR_VAR: f64 = 1.0;
/// Seeds of the synthetic data sets and of the chains.
const DATA_SEED: u64 = 20_160_619;
const CHAIN_SEED: u64 = 11;

/// A bound on the largest eigenvalue of a minibatch potential's Hessian, (N/n)·Σ‖aᵢ‖²/σx² + 1/σθ²
/// with ‖aᵢ‖² ≈ D, rounded up.
fn curvature(d: usize) -> f64 {
    (100 * d + N_DATA) as f64
}

fn hamcmc_vs_sgld(c: &mut Criterion) {
    let mut group = c.benchmark_group("hamcmc");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for &d in &DIMS {
        let model = LinearGaussian::synthetic(N_DATA, d, NOISE_VAR, PRIOR_VAR, DATA_SEED).expect("valid model");
        let start = model.posterior_mean().to_vec();
        let l = curvature(d);

        let sgld_settings = SgldSettings { step_size: StepSize::Constant(1e-2 / l) };
        let mut sgld = Sgld::new(sgld_settings, Minibatch::new(BATCH)).expect("valid settings");
        let mut rng = stream(CHAIN_SEED, &[d as u64]);
        sgld.init(&model, &start, &mut rng).expect("init succeeds");
        group.bench_function(BenchmarkId::new("SGLD", format!("D={d}")), |b| {
            b.iter(|| sgld.step(black_box(&model), &mut rng).expect("finite chain"))
        });
        assert!(sgld.position().iter().all(|x| x.is_finite()), "SGLD chain stays finite");

        for &m in &MEMORIES {
            let settings = HamcmcSettings {
                step_size: StepSize::Constant(1e-2),
                memory: m,
                trust_region: l,
                initial_scale: 1.0 / l,
                warmup_step_size: 1e-2 / l,
            };
            let mut h = Hamcmc::new(settings, Minibatch::new(BATCH)).expect("valid settings");
            let mut rng = stream(CHAIN_SEED, &[d as u64, m as u64]);
            h.init(&model, &start, &mut rng).expect("init succeeds");
            group.bench_function(BenchmarkId::new(format!("M={m}"), format!("D={d}")), |b| {
                b.iter(|| h.step(black_box(&model), &mut rng).expect("finite chain"))
            });
            assert!(h.position().iter().all(|x| x.is_finite()), "HAMCMC chain stays finite");
            assert_eq!(h.n_skipped_pairs(), 0, "every pair is used");
            assert_eq!(h.n_pairs(), Some(m - 1), "the L-BFGS holds M − 1 pairs");
        }
        assert_eq!(model.dim(), d);
    }
    group.finish();
}

criterion_group!(benches, hamcmc_vs_sgld);
criterion_main!(benches);
