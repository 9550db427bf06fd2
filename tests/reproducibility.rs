//! Same seed ⇒ bit-identical output, whatever the number of rayon threads.

use sgmcmc::*;

fn pool(n: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()
}

fn draws_of<S: Sampler>(model: &LogisticRegression, s: &S, seed: u64) -> (ndarray::Array2<f64>, Vec<f64>) {
    let settings = RunSettings {
        n_iter: 3_000,
        burn_in: 500,
        thin: 3,
        n_chains: 5,
        seed,
        storage: Storage::SamplesAndGradients,
        parallel: true,
        ..Default::default()
    };
    let out = Runner::new(model, s).start(&[0.0; 4]).settings(settings).run().unwrap();
    let grads: Vec<f64> = (0..out.estimate.n_parts())
        .flat_map(|c| out.estimate.samples(c).unwrap().gradients().unwrap().iter().copied().collect::<Vec<_>>())
        .collect();
    (out.estimate.stacked_draws().unwrap(), grads)
}

fn check<S: Sampler>(model: &LogisticRegression, s: &S) {
    let one = pool(1).install(|| draws_of(model, s, 42));
    let two = pool(2).install(|| draws_of(model, s, 42));
    let four = pool(4).install(|| draws_of(model, s, 42));
    // Bit-identical: compare the bit patterns, not approximately.
    let bits = |a: &ndarray::Array2<f64>| a.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&one.0), bits(&two.0));
    assert_eq!(bits(&one.0), bits(&four.0));
    assert_eq!(
        one.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        two.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // And serial = parallel.
    let serial = {
        let settings = RunSettings {
            n_iter: 3_000,
            burn_in: 500,
            thin: 3,
            n_chains: 5,
            seed: 42,
            parallel: false,
            ..Default::default()
        };
        Runner::new(model, s).start(&[0.0; 4]).settings(settings).run().unwrap().estimate.stacked_draws().unwrap()
    };
    assert_eq!(bits(&one.0), bits(&serial));
    // A different seed gives different draws; different chains differ from each other.
    let other = draws_of(model, s, 43);
    assert_ne!(bits(&one.0), bits(&other.0));
    let n = one.0.nrows() / 5;
    assert_ne!(one.0.row(0), one.0.row(n));
}

#[test]
fn sgld_is_thread_count_independent() {
    let model = LogisticRegression::synthetic(5_000, 4, 1.0, 3).unwrap();
    let sgld =
        Sgld::new(SgldSettings { step_size: StepSize::Polynomial { gamma1: 1e-4, alpha: 0.55 } }, Minibatch::new(50))
            .unwrap();
    check(&model, &sgld);
    let sgld_wo =
        Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, Minibatch::without_replacement(50)).unwrap();
    check(&model, &sgld_wo);
}

#[test]
fn sghmc_and_mala_are_thread_count_independent() {
    let model = LogisticRegression::synthetic(2_000, 4, 1.0, 3).unwrap();
    let sghmc = Sghmc::new(
        SghmcSettings { step_size: StepSize::Constant(1e-6), friction: 0.1, noise_estimate: 0.0 },
        Minibatch::new(50),
    )
    .unwrap();
    check(&model, &sghmc);
    let mala =
        Mala::new(MalaSettings { step_size: 1e-3, adapt_steps: 300, metric: Metric::Identity, ..Default::default() })
            .unwrap();
    check(&model, &mala);
}

/// The kernel Stein discrepancy on both of its paths (pairs below `KSD_GRAM_MIN_DIM`, Gram
/// tiles from it, several row blocks) is bit-identical on 1, 2 and 3 threads.
#[test]
fn ksd_is_thread_count_independent() {
    use sgmcmc::diagnostics::{KSD_GRAM_MIN_DIM, KsdSettings, ksd_imq};
    for d in [3, KSD_GRAM_MIN_DIM, 40] {
        let n = 700;
        let x =
            ndarray::Array2::from_shape_fn((n, d), |(i, j)| ((i * 7919 + j * 104_729) % 1_009) as f64 / 500.0 - 1.0);
        let s = x.mapv(|v| -v + 0.1);
        let bits = |threads: usize| {
            pool(threads).install(|| ksd_imq(x.view(), s.view(), None, KsdSettings::default()).unwrap().to_bits())
        };
        let one = bits(1);
        assert_eq!(bits(2), one, "d = {d}");
        assert_eq!(bits(3), one, "d = {d}");
    }
}
