//! SVRG and SAGA (Dubey et al. 2016): unbiased for the full gradient whatever their state, far
//! less variable than plain minibatches near the mode, costs and memory counted, and runs of
//! SGLD with them that recover the posterior mean.
//!
//! Tolerances: 4.5 standard errors, computed from the same draws.

use rand::SeedableRng;
use sgmcmc::*;

const Z: f64 = 4.5;
const M: usize = 20_000;

fn model() -> LogisticRegression {
    LogisticRegression::synthetic(2_000, 3, 5.0, 31).unwrap()
}

fn full_gradient(model: &LogisticRegression, theta: &[f64]) -> Vec<f64> {
    let mut full = FullGradient::new();
    full.prepare(model).unwrap();
    let mut g = vec![0.0; 3];
    full.estimate(model, theta, &mut sgmcmc::rng::stream(0, &[0]), &mut g).unwrap();
    g
}

/// Per-coordinate (mean, variance, standard error of the mean) of M draws.
fn stats(cols: &[Vec<f64>]) -> Vec<(f64, f64, f64)> {
    cols.iter()
        .map(|x| {
            let m = x.len() as f64;
            let mean = x.iter().sum::<f64>() / m;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (m - 1.0);
            (mean, var, (var / m).sqrt())
        })
        .collect()
}

/// M estimates at `theta`, each from a fresh clone of `base` (its state fixed: table or
/// snapshot at the mode), so that they are independent.
fn draws_from_state<E: GradientEstimator>(base: &E, model: &LogisticRegression, theta: &[f64]) -> Vec<Vec<f64>> {
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(9);
    let mut cols = (0..3).map(|_| Vec::with_capacity(M)).collect::<Vec<Vec<f64>>>();
    let mut g = [0.0; 3];
    for _ in 0..M {
        let mut e = base.clone();
        e.estimate(model, theta, &mut rng, &mut g).unwrap();
        for (c, v) in cols.iter_mut().zip(g) {
            c.push(v);
        }
    }
    cols
}

fn plain_variances(model: &LogisticRegression, theta: &[f64], n: usize) -> Vec<f64> {
    let mut plain = Minibatch::new(n);
    plain.prepare(model).unwrap();
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(10);
    let mut cols = (0..3).map(|_| Vec::with_capacity(M)).collect::<Vec<Vec<f64>>>();
    let mut g = [0.0; 3];
    for _ in 0..M {
        plain.estimate(model, theta, &mut rng, &mut g).unwrap();
        for (c, v) in cols.iter_mut().zip(g) {
            c.push(v);
        }
    }
    stats(&cols).iter().map(|s| s.1).collect()
}

fn check_unbiased_and_reduced(label: &str, cols: &[Vec<f64>], g_full: &[f64], plain: &[f64]) {
    for (j, (mean, var, se)) in stats(cols).into_iter().enumerate() {
        let z = (mean - g_full[j]) / se;
        eprintln!(
            "{label} coord {j}: mean {mean:.5} full {:.5} z {z:+.2}; var {var:.3e} plain {:.3e}",
            g_full[j], plain[j]
        );
        assert!(z.abs() < Z, "{label} biased: coordinate {j}, z = {z}");
        assert!(var * 100.0 < plain[j], "{label}: variance not reduced: {var:e} vs {:e}", plain[j]);
    }
}

/// State at the mode, estimates at about one posterior sd from it.
#[test]
fn svrg_and_saga_are_unbiased_and_far_less_variable_than_minibatches_near_the_mode() {
    let model = model();
    let map = model.map().unwrap().to_vec();
    let theta: Vec<f64> = map.iter().map(|t| t + 0.03).collect();
    let g_full = full_gradient(&model, &theta);
    let plain = plain_variances(&model, &theta, 20);
    let mut rng = sgmcmc::rng::stream(1, &[0]);
    let mut g = [0.0; 3];

    // SVRG: the first estimate takes the snapshot at the mode (epoch long enough not to refresh).
    let mut svrg = Svrg::new(20).with_epoch(1_000_000);
    svrg.prepare(&model).unwrap();
    svrg.estimate(&model, &map, &mut rng, &mut g).unwrap();
    assert_eq!(svrg.snapshot(), &map[..]);
    assert_eq!(svrg.n_datum_gradients(), 2_000 + 40);
    check_unbiased_and_reduced("SVRG", &draws_from_state(&svrg, &model, &theta), &g_full, &plain);

    // SAGA: the first estimate fills the table at the mode.
    let mut saga = Saga::new(20);
    saga.prepare(&model).unwrap();
    saga.estimate(&model, &map, &mut rng, &mut g).unwrap();
    assert_eq!(saga.n_datum_gradients(), 2_000 + 20);
    check_unbiased_and_reduced("SAGA", &draws_from_state(&saga, &model, &theta), &g_full, &plain);
}

/// Unbiased along a sequence, whatever the state the past left: estimates alternate between a
/// far point (which drags SAGA's table and SVRG's snapshot) and θ; those at θ average to ∇U(θ).
/// Given the past each is unbiased, so they are martingale differences and the standard error
/// from their spread is valid. Tests SAGA's table and sum updates (with repeated indices) and
/// SVRG's refreshes.
#[test]
fn svrg_and_saga_stay_unbiased_as_their_state_moves() {
    let model = model();
    let map = model.map().unwrap().to_vec();
    let theta: Vec<f64> = map.iter().map(|t| t + 0.03).collect();
    let far: Vec<f64> = map.iter().map(|t| t - 0.5).collect();
    let g_full = full_gradient(&model, &theta);
    fn sequence<E: GradientEstimator>(mut e: E, model: &LogisticRegression, a: &[f64], b: &[f64]) -> Vec<Vec<f64>> {
        e.prepare(model).unwrap();
        let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(12);
        let mut cols = (0..3).map(|_| Vec::with_capacity(M)).collect::<Vec<Vec<f64>>>();
        let mut g = [0.0; 3];
        for k in 0..2 * M {
            let at = if k % 2 == 0 { a } else { b };
            e.estimate(model, at, &mut rng, &mut g).unwrap();
            if k % 2 == 1 {
                for (c, v) in cols.iter_mut().zip(g) {
                    c.push(v);
                }
            }
        }
        cols
    }
    // n = 200 of N = 2 000 with replacement: many repeated indices.
    for (label, cols) in [
        ("SAGA", sequence(Saga::new(200), &model, &far, &theta)),
        ("SVRG", sequence(Svrg::new(200).with_epoch(7), &model, &far, &theta)),
    ] {
        for (j, (mean, _, se)) in stats(&cols).into_iter().enumerate() {
            let z = (mean - g_full[j]) / se;
            eprintln!("{label} (moving state) coord {j}: mean {mean:.4} full {:.4} z {z:+.2}", g_full[j]);
            assert!(z.abs() < Z, "{label} biased along the sequence: coordinate {j}, z = {z}");
        }
    }
}

#[test]
fn svrg_and_saga_count_their_cost_and_memory() {
    let model = model();
    let mut rng = sgmcmc::rng::stream(2, &[0]);
    let mut g = [0.0; 3];
    // SVRG: N per refresh (every `epoch` estimates) + 2n per estimate; default epoch ⌈N/n⌉.
    let mut svrg = Svrg::new(50);
    svrg.prepare(&model).unwrap();
    for _ in 0..100 {
        svrg.estimate(&model, &[0.1, 0.2, 0.3], &mut rng, &mut g).unwrap();
    }
    // Default epoch 2 000 / 50 = 40: refreshes at estimates 1, 41, 81.
    assert_eq!(svrg.refreshes(), 3);
    assert_eq!(svrg.n_datum_gradients(), 3 * 2_000 + 100 * 100);
    // SAGA: N to fill the table + n per estimate; memory N·d·8 bytes.
    let mut saga = Saga::new(50);
    saga.prepare(&model).unwrap();
    for _ in 0..100 {
        saga.estimate(&model, &[0.1, 0.2, 0.3], &mut rng, &mut g).unwrap();
    }
    assert_eq!(saga.n_datum_gradients(), 2_000 + 100 * 50);
    assert_eq!(Saga::table_bytes(2_000, 3), 48_000);
    // A memory limit below the table: a typed error at init, naming the table.
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Saga::new(50).with_memory_limit(10_000)).unwrap();
    let err = Runner::new(&model, &sgld)
        .start(&[0.0; 3])
        .settings(RunSettings { n_iter: 10, burn_in: 0, ..Default::default() })
        .run()
        .unwrap_err();
    assert!(
        matches!(err.root(), Error::OutOfMemory { what: "SAGA's gradient table", needed: 48_000, limit: Some(10_000) }),
        "{err}"
    );
    // An impossible table (N·d·8 bytes beyond any machine) is an error, not an abort.
    struct Huge;
    impl Model for Huge {
        fn dim(&self) -> usize {
            1 << 20
        }
        fn n_data(&self) -> usize {
            1 << 40
        }
        fn grad_prior(&self, _: &[f64], out: &mut [f64]) -> Result<()> {
            out.fill(0.0);
            Ok(())
        }
        fn grad_data_sum(&self, _: &[f64], _: &[usize], out: &mut [f64]) -> Result<()> {
            out.fill(0.0);
            Ok(())
        }
    }
    let mut saga = Saga::new(10);
    let err = saga.prepare(&Huge).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { limit: None, .. }), "{err}");
    // Invalid SVRG epoch.
    let mut bad = Svrg::new(10).with_epoch(0);
    assert!(matches!(bad.prepare(&model), Err(Error::InvalidParameter { name: "epoch", .. })));
}

/// SGLD with SVRG and with SAGA on the logistic model: the posterior mean agrees with a long
/// MALA run's (which is exact) within the combined Monte Carlo error.
#[test]
fn sgld_with_svrg_and_saga_recovers_the_posterior_mean() {
    let model = LogisticRegression::synthetic(2_000, 3, 5.0, 32).unwrap();
    let map = model.map().unwrap().to_vec();
    let rs = RunSettings { n_iter: 60_000, burn_in: 5_000, n_chains: 4, seed: 3, ..Default::default() };
    let mala = Mala::new(MalaSettings::fixed(2e-3)).unwrap();
    let reference =
        Runner::new(&model, &mala).start(&map).settings(RunSettings { n_iter: 30_000, ..rs }).run().unwrap();
    let ref_summary = diagnostics::summary(&reference.estimate).unwrap();
    for (label, out) in [
        (
            "SVRG",
            Runner::new(&model, &Sgld::new(SgldSettings::constant(2e-4), Svrg::new(20)).unwrap())
                .start(&map)
                .settings(rs)
                .run()
                .unwrap()
                .estimate,
        ),
        (
            "SAGA",
            Runner::new(&model, &Sgld::new(SgldSettings::constant(2e-4), Saga::new(20)).unwrap())
                .start(&map)
                .settings(rs)
                .run()
                .unwrap()
                .estimate,
        ),
    ] {
        let s = diagnostics::summary(&out).unwrap();
        for j in 0..3 {
            let (a, b) = (&s[j], &ref_summary[j]);
            let se = (a.mcse_mean.powi(2) + b.mcse_mean.powi(2)).sqrt();
            let z = (a.mean - b.mean) / se;
            eprintln!("SGLD-{label} coord {j}: mean {:.5} MALA {:.5} (sd {:.4}) z {z:+.2}", a.mean, b.mean, b.sd);
            assert!(z.abs() < Z, "SGLD-{label} mean off: coordinate {j}, z = {z}");
            // Meaningful: the MC error is well below the posterior sd.
            assert!(se < 0.1 * b.sd);
        }
    }
}

/// As subsampled estimators (what multilevel SGLD couples): drawing the indices and evaluating
/// on them gives exactly the estimate of `resample` + `eval`, and leaves the same state.
#[test]
fn svrg_and_saga_evaluate_on_given_indices_like_on_their_own_draws() {
    let model = model();
    fn same<E: SubsampledEstimator>(mut a: E, model: &LogisticRegression) {
        a.prepare(model).unwrap();
        let mut b = a.clone();
        let (mut ra, mut rb) = (sgmcmc::rng::stream(4, &[0]), sgmcmc::rng::stream(4, &[0]));
        let mut idx = vec![0; a.batch_size()];
        let (mut ga, mut gb) = ([0.0; 3], [0.0; 3]);
        for k in 0..30 {
            let theta = [0.01 * k as f64, -0.3, 0.2];
            a.estimate(model, &theta, &mut ra, &mut ga).unwrap();
            b.draw_indices(&mut rb, &mut idx);
            b.eval_on(model, &theta, &idx, &mut gb).unwrap();
            assert_eq!(ga, gb, "step {k}");
        }
        assert_eq!(a.n_datum_gradients(), b.n_datum_gradients());
    }
    same(Svrg::new(20).with_epoch(7), &model);
    same(Saga::new(20), &model);
}
