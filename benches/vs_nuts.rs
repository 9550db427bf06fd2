//! Time to a ±0.1 sd verdict on a Bayesian logistic regression (d = 20), on one thread:
//! `Sample::new(&model, Sgld::auto()).run()` (the default path, aiming at its default accuracy) beside
//! NUTS from nuts-rs (default adaptation, 4 chains, until every mean's MCSE ≤ 0.05 sd) on the
//! crate's own model code, at N = 10³ and 10⁴ (the sizes where each whole run takes a second or
//! so; `cargo run --release --example vs_nuts` runs N = 10³ … 10⁶ and the errors against a
//! reference, and writes `docs/vs-nuts.md`). Compare the two times within one run.
//!
//! Run with `cargo bench --bench vs_nuts`.

#[path = "../examples/support/mod.rs"]
mod support;
#[path = "../examples/support/vs_nuts.rs"]
mod vs_nuts;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sgmcmc::prelude::*;
use std::hint::black_box;
use std::time::Duration;
#[allow(unused_imports)]
use support::{cholesky_lower, normals, spd_inverse};

fn time_to_verdict(c: &mut Criterion) {
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a thread pool");
    let mut group = c.benchmark_group("time_to_verdict");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(20));
    for n in [1_000usize, 10_000] {
        let model = LogisticRegression::synthetic(n, 20, 10.0, 2026).expect("valid model");
        group.bench_function(BenchmarkId::new("sgmcmc_default_path", n), |b| {
            b.iter(|| {
                one.install(|| {
                    let fit = Sample::new(&model, Sgld::auto()).seed(1).run().expect("a verdict");
                    black_box(fit.convergence.stated_bound())
                })
            })
        });
        group.bench_function(BenchmarkId::new("nuts_rs", n), |b| {
            b.iter(|| {
                one.install(|| black_box(vs_nuts::nuts_until(&model, 4, 0.05, 7, 200_000).expect("NUTS").max_mcse))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, time_to_verdict);
criterion_main!(benches);
