//! One SGLD-CV step (control-variate gradient, 2n datum gradients) on Bayesian logistic
//! regression, for the three settings of the SGLD bench: (N, d, n) = (1e5, 10, 100),
//! (1e5, 100, 100), (1e6, 20, 1000); f64, single thread; centre at the MAP, chain at stationarity.
//! Also the same with the centre gradients cached (n datum gradients per step).
//!
//! Run with `cargo bench --bench control_variates`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sgmcmc::rng::stream;
use sgmcmc::{ControlVariate, CvSettings, LogisticRegression, Sampler, Sgld, SgldSettings};
use std::hint::black_box;
use std::time::Duration;

const SETTINGS: [(usize, usize, usize); 3] = [(100_000, 10, 100), (100_000, 100, 100), (1_000_000, 20, 1_000)];

fn sgld_cv_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("sgld_cv_step_logistic");
    group.throughput(Throughput::Elements(1));
    group.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    for &(n_data, dim, batch) in &SETTINGS {
        let model = LogisticRegression::synthetic(n_data, dim, 10.0, 20_160_601).expect("valid model");
        let map = model.map().expect("MAP converges");
        let centre = map.as_slice().expect("contiguous");
        for cache in [false, true] {
            if cache && n_data * dim > 20_000_000 {
                continue; // the dense cache would take > 160 MB
            }
            let settings = CvSettings { batch_size: batch, cache_centre_gradients: cache, ..Default::default() };
            let cv = ControlVariate::at(&model, centre, settings).expect("valid centre");
            let mut sampler = Sgld::new(SgldSettings::constant(0.1 / n_data as f64), cv).expect("valid settings");
            let mut rng = stream(7, &[0]);
            sampler.init(&model, centre, &mut rng).expect("init succeeds");
            let id = BenchmarkId::from_parameter(format!(
                "N={n_data},d={dim},n={batch}{}",
                if cache { ",cached" } else { "" }
            ));
            group.bench_function(id, |b| b.iter(|| sampler.step(black_box(&model), &mut rng).expect("finite chain")));
        }
    }
    group.finish();
}

criterion_group!(benches, sgld_cv_step);
criterion_main!(benches);
