//! One minibatch gradient (N = 10⁵, p = 10, n = 100, setting S1 of the `samplers` bench) of the
//! GLM family against the hand-tuned `LogisticRegression`, side by side in one run.
//!
//! Run with `cargo bench --bench glm`.

use criterion::{Criterion, criterion_group, criterion_main};
use sgmcmc::ndarray::Array1;
use sgmcmc::{Family, Glm, GlmSettings, LogisticRegression, Model, Prior};
use std::hint::black_box;
use std::time::Duration;

fn glm(c: &mut Criterion) {
    let mut group = c.benchmark_group("glm_gradient_per_minibatch");
    group.sample_size(50).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    let idx: Vec<usize> = (0..100).map(|i| i * 997 % 100_000).collect();
    let lr = LogisticRegression::synthetic(100_000, 10, 10.0, 20_160_601).expect("model");
    let x = lr.features().to_owned();
    let theta: Vec<f64> = (0..10).map(|j| 0.1 * j as f64 - 0.4).collect();
    let mut g = [0.0; 12];
    group.bench_function("LogisticRegression", |b| b.iter(|| lr.grad_data_sum(black_box(&theta), &idx, &mut g[..10])));
    let plain = GlmSettings {
        intercept: false,
        prior: Prior::normal(0.0, 10f64.sqrt()),
        autoscale: false,
        ..Default::default()
    };
    let same = Glm::new(Family::Logistic, &x, &Array1::from(lr.labels().to_vec()), &plain).expect("glm");
    group.bench_function("Glm logistic, no intercept", |b| {
        b.iter(|| same.grad_data_sum(black_box(&theta), &idx, &mut g[..10]))
    });
    for family in [Family::Logistic, Family::Probit, Family::Poisson, Family::Gaussian, Family::NegativeBinomial] {
        let m = Glm::synthetic(family, 100_000, 10, 3).expect("glm");
        let mut t = vec![0.05; m.dim()];
        if family.has_aux() {
            t[m.dim() - 1] = 1.5;
        }
        group.bench_function(format!("Glm {family:?}, intercept"), |b| {
            b.iter(|| m.grad_data_sum(black_box(&t), &idx, &mut g[..m.dim()]))
        });
    }
    group.finish();
}

criterion_group!(benches, glm);
criterion_main!(benches);
