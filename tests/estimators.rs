//! Gradient estimators: unbiasedness and the exact variance of minibatch estimates.
//!
//! At a fixed θ (away from the mode, on the non-linear logistic model) we draw M = 40 000
//! minibatch estimates and compare, per coordinate, their average with the full gradient and
//! their variance with the exact value `(N²/n) Var_i(∇Uᵢ)` (with replacement) or the same times
//! `(N − n)/(N − 1)` (without). Tolerances: 4.5 standard errors, the standard errors computed
//! from the same draws (for the variance: from the fourth central moment).

use rand::SeedableRng;
use sgmcmc::*;

const M: usize = 40_000;
const Z: f64 = 4.5;

fn per_datum_gradients(model: &LogisticRegression, theta: &[f64]) -> Vec<Vec<f64>> {
    (0..model.n_data())
        .map(|i| {
            let mut g = vec![0.0; model.dim()];
            model.grad_data_sum(theta, &[i], &mut g).unwrap();
            g
        })
        .collect()
}

fn check(estimator: Minibatch, fpc: bool) {
    let model = LogisticRegression::synthetic(400, 3, 5.0, 21).unwrap();
    let n_data = model.n_data() as f64;
    let theta = [0.4, -0.8, 1.1];
    let d = model.dim();
    let mut full = FullGradient::new();
    full.prepare(&model).unwrap();
    let mut g_full = vec![0.0; d];
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(5);
    full.estimate(&model, &theta, &mut rng, &mut g_full).unwrap();
    // Exact variance of the estimate, from the per-datum gradients.
    let per = per_datum_gradients(&model, &theta);
    let n = estimator.subsample().batch_size() as f64;
    let exact_var: Vec<f64> = (0..d)
        .map(|j| {
            let mean = per.iter().map(|g| g[j]).sum::<f64>() / n_data;
            let pop_var = per.iter().map(|g| (g[j] - mean).powi(2)).sum::<f64>() / n_data;
            let f = if fpc { (n_data - n) / (n_data - 1.0) } else { 1.0 };
            n_data * n_data / n * pop_var * f
        })
        .collect();
    let mut est = estimator;
    est.prepare(&model).unwrap();
    let mut draws: Vec<Vec<f64>> = (0..d).map(|_| Vec::with_capacity(M)).collect();
    let mut g = vec![0.0; d];
    for _ in 0..M {
        est.estimate(&model, &theta, &mut rng, &mut g).unwrap();
        for (col, &v) in draws.iter_mut().zip(&g) {
            col.push(v);
        }
    }
    assert_eq!(est.n_datum_gradients(), (M as u64) * n as u64, "cost counter");
    for j in 0..d {
        let x = &draws[j];
        let mean = x.iter().sum::<f64>() / M as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (M as f64 - 1.0);
        let m4 = x.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / M as f64;
        let se_mean = (var / M as f64).sqrt();
        let se_var = ((m4 - var * var) / M as f64).sqrt();
        let z_mean = (mean - g_full[j]) / se_mean;
        let z_var = (var - exact_var[j]) / se_var;
        eprintln!(
            "coord {j}: mean {mean:.4} full {:.4} (z {z_mean:+.2}); var {var:.4e} exact {:.4e} (z {z_var:+.2})",
            g_full[j], exact_var[j]
        );
        assert!(z_mean.abs() < Z, "biased: coordinate {j}, z = {z_mean}");
        assert!(z_var.abs() < Z, "wrong variance: coordinate {j}, z = {z_var}");
    }
}

#[test]
fn minibatch_with_replacement_is_unbiased_with_exact_variance() {
    check(Minibatch::with_replacement(20), false);
}

#[test]
fn minibatch_without_replacement_is_unbiased_with_exact_variance() {
    // n = N/2: the finite-population correction halves the variance, so it is tested.
    check(Minibatch::without_replacement(200), true);
}

#[test]
fn full_gradient_counts_n_per_call() {
    let model = LogisticRegression::synthetic(123, 2, 1.0, 1).unwrap();
    let mut full = FullGradient::new();
    full.prepare(&model).unwrap();
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(0);
    let mut g = [0.0; 2];
    for _ in 0..3 {
        full.estimate(&model, &[0.1, 0.2], &mut rng, &mut g).unwrap();
    }
    assert_eq!(full.n_datum_gradients(), 369);
    assert!(full.is_exact());
}

/// A run's reported cost is the datum-gradient count: one estimate at θ₀ plus one per step.
#[test]
fn run_reports_cost() {
    let model = LogisticRegression::synthetic(1_000, 2, 1.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, Minibatch::new(10)).unwrap();
    let s = RunSettings { n_iter: 500, burn_in: 100, n_chains: 3, ..Default::default() };
    let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(s).run().unwrap();
    assert_eq!(out.cost.datum_gradients, 3 * 501 * 10);
    let mala = Mala::new(MalaSettings::fixed(1e-3)).unwrap();
    let out = Runner::new(&model, &mala)
        .start(&[0.0, 0.0])
        .settings(RunSettings { n_iter: 50, burn_in: 10, ..Default::default() })
        .run()
        .unwrap();
    assert_eq!(out.cost.datum_gradients, 51 * 1_000);
    assert_eq!(out.cost.datum_potentials, 51 * 1_000);
    assert_eq!(out.estimate.n_samples(), 40);
}
