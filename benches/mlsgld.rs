//! One level-l sample of antithetic ML-SGLD for l ∈ {2, 4, 6} (logistic regression, N = 1e4,
//! d = 3, n = 10, h₀ = 1/N, m = 5), and 32 samples of a level serial against parallel (rayon,
//! the machine's threads).
//!
//! Run with `cargo bench --bench mlsgld`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sgmcmc::{LogisticRegression, Minibatch, MlSgld, MlSgldSettings};
use std::hint::black_box;
use std::time::Duration;

fn mlsgld_level_sample(c: &mut Criterion) {
    let model = LogisticRegression::synthetic(10_000, 3, 1.0, 5).expect("valid model");
    let map = model.map().expect("MAP converges");
    let m0 = map.clone();
    let g = move |t: &[f64]| t.iter().zip(m0.iter()).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
    let mut group = c.benchmark_group("mlsgld");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for parallel in [false, true] {
        let settings = MlSgldSettings { parallel, ..Default::default() };
        let ml = MlSgld::sgld(settings, 1e-4, Minibatch::new(10), map.as_slice().expect("contiguous")).expect("valid");
        for level in [2usize, 4, 6] {
            if !parallel {
                group.bench_function(BenchmarkId::new("one_sample", level), |b| {
                    let mut i = 0u64;
                    b.iter(|| {
                        i += 1;
                        black_box(ml.sample(&model, &g, level, i).expect("finite"))
                    })
                });
            }
            let name = if parallel { "32_samples_parallel" } else { "32_samples_serial" };
            group.bench_function(BenchmarkId::new(name, level), |b| {
                b.iter(|| black_box(ml.level(&model, &g, level, 32).expect("finite")))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, mlsgld_level_sample);
criterion_main!(benches);
