use crate::numeric::special::normal_quantile;
use crate::trace::diagnostics::convergence::Convergence;
use crate::trace::diagnostics::ess::{ess_raw, quantile7, split, z_scale};
use ndarray::Array2;

use super::direct::ess_raw_direct;

/// A converged run without a finite stated bound does not say "converged" unqualified; with
/// one it does, and a bias above the Monte Carlo bound is flagged.
#[test]
fn a_converged_run_without_a_finite_bound_says_its_accuracy_is_unknown() {
    let c = Convergence {
        converged: true,
        max_rhat: 1.001,
        min_ess_bulk: 5_000.0,
        min_ess_tail: 5_000.0,
        failed: Vec::new(),
        failed_names: Vec::new(),
        chains: 4,
        max_mcse_mean: 0.01,
        max_mcse_sd: 0.01,
        error_bound: 0.03,
        bias_bound: None,
        step_bias: None,
        bias_cost: None,
    };
    assert!(c.converged && c.accuracy_known());
    assert!(c.to_string().starts_with("converged: "), "{c}");
    let biased = Convergence { bias_bound: Some(0.2), step_bias: Some(0.15), bias_cost: Some(0.25), ..c.clone() };
    assert!(biased.accuracy_known() && biased.to_string().contains("BUT THE STEP IS BIASED"), "{biased}");
    for bound in [f64::INFINITY, f64::NAN] {
        let unknown = Convergence { bias_bound: Some(bound), step_bias: Some(0.0), bias_cost: Some(0.25), ..c.clone() };
        assert!(!unknown.accuracy_known());
        assert!(unknown.to_string().contains("BUT ITS ACCURACY IS UNKNOWN"), "{unknown}");
    }
    let mc = Convergence { error_bound: f64::INFINITY, ..c.clone() };
    assert!(!mc.accuracy_known() && mc.to_string().contains("ACCURACY IS UNKNOWN"), "{mc}");
    let failed = Convergence { converged: false, bias_bound: Some(f64::INFINITY), ..c };
    assert!(failed.to_string().starts_with("NOT CONVERGED"), "{failed}");
}

/// The FFT autocovariances give the same ESS as the direct sums to 1e-12 relative, on the
/// ArviZ fixture (raw, split, rank-normalised and tail-indicator arrays of each quantity) and
/// on a strongly autocorrelated AR(1) chain.
#[test]
fn fft_ess_equals_the_direct_computation() {
    let text = include_str!("../../../tests/fixtures/arviz_draws.csv");
    let mut cols = vec![Array2::<f64>::zeros((4, 301)); 4];
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (c, t): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        for (j, col) in cols.iter_mut().enumerate() {
            col[[c, t]] = f[2 + j].parse().unwrap();
        }
    }
    let mut ar = Array2::zeros((2, 2_000));
    let mut rng = crate::numeric::rng::stream(3, &[0]);
    for mut row in ar.outer_iter_mut() {
        let mut x = 0.0;
        for v in row.iter_mut() {
            let z: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng);
            x = 0.99 * x + z;
            *v = x;
        }
    }
    cols.push(ar);
    let mut worst = 0.0f64;
    for x in &cols {
        let sp = split(&x.view());
        let q = quantile7(&sp.view(), 0.05);
        let tail = sp.mapv(|v| if v <= q { 1.0 } else { 0.0 });
        for a in [x.clone(), sp.clone(), z_scale(&sp), tail] {
            let (fft, direct) = (ess_raw(&a), ess_raw_direct(&a));
            let rel = (fft - direct).abs() / direct;
            worst = worst.max(rel);
            assert!(rel <= 1e-12, "FFT ESS {fft} vs direct {direct} (rel {rel:e})");
        }
    }
    eprintln!("largest relative difference FFT vs direct ESS: {worst:e}");
}

#[test]
fn normal_quantile_values() {
    // Reference values (R's qnorm, which uses the same algorithm).
    let cases = [
        (0.5, 0.0),
        (0.975, 1.959_963_984_540_054),
        (0.025, -1.959_963_984_540_054),
        (0.9, 1.281_551_565_544_600_5),
        (1e-10, -6.361_340_902_404_056),
        (0.999_999, 4.753_424_308_817_087),
    ];
    for (p, z) in cases {
        assert!((normal_quantile(p) - z).abs() < 1e-14 * (1.0 + z.abs()), "Φ⁻¹({p}) = {}", normal_quantile(p));
    }
    assert!(normal_quantile(-0.1).is_nan());
    assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
}
