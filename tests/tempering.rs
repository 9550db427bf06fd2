//! Tempering (`Tempered`, `Temperature`): at T = 1 the draws are bit-identical to the model's
//! own; at other temperatures every sampler targets `exp(−U₀/T₀ − Σ Uᵢ/T_L)`, checked against
//! exact laws on the linear-Gaussian model.
//!
//! A tempered linear-Gaussian model is again one: `p(y | θ)^{1/T_L}` is the Gaussian likelihood
//! with noise variance `σ²T_L` (up to a constant) and `p(θ)^{1/T₀}` the prior of variance
//! `τ²T₀`. So its posterior and the exact stationary laws of ULA and minibatch SGLD are those of
//! that "equivalent" model. Same statistical protocol as `stationary.rs`: R = 40 independent
//! chains, replicate averages against exact values in units of their standard error, |z| ≤ 4.5
//! (probability ≈ 6·10⁻⁵ per statistic under a correct sampler), and a check that the
//! untempered law is rejected (the test has power).

use crate::common;

use common::*;
use ndarray::{Array1, Array2};
use sgmcmc::*;

const R: usize = 40;
const Z_LIMIT: f64 = 4.5;

fn model() -> LinearGaussian {
    correlated_model(1000, 0.9, 1.0, 10.0, 11)
}

/// The untempered linear-Gaussian model whose posterior is `m`'s at temperature `t`.
fn equivalent(m: &LinearGaussian, t: Temperature) -> LinearGaussian {
    let targets = Array1::from(m.targets().to_vec());
    LinearGaussian::new(&m.design().to_owned(), &targets, m.noise_var() * t.likelihood, m.prior_var() * t.prior)
        .unwrap()
}

fn settings(n_iter: u64, burn_in: u64, thin: u64, seed: u64) -> RunSettings {
    replicates(R, n_iter, burn_in, thin, seed)
}

fn max_cov_z(est: &Estimate, mu: &Array1<f64>, cov: &Array2<f64>) -> f64 {
    z_scores(est, mu, cov).iter().skip(mu.len()).map(|r| r.4.abs()).fold(0.0, f64::max)
}

fn bits(e: &Estimate) -> Vec<u64> {
    (0..e.n_parts())
        .flat_map(|c| e.samples(c).unwrap().draws().iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        .collect()
}

/// At T = 1 (whole posterior or likelihood only) the wrapper changes nothing: SGLD, SGLD-CV,
/// SGHMC and MALA give the same draws, weights and costs, bit for bit.
#[test]
fn at_temperature_one_draws_are_bit_identical() {
    let m = LogisticRegression::synthetic(2_000, 4, 1.0, 8).unwrap();
    let s = RunSettings { n_iter: 1_500, burn_in: 1_000, n_chains: 2, seed: 5, ..Default::default() };
    let x0 = [0.0; 4];
    for t in [Temperature::default(), Temperature::posterior(1.0), Temperature::likelihood(1.0)] {
        let tm = Tempered::new(&m, t).unwrap();
        let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).unwrap();
        let (a, b) = (
            Runner::new(&m, &sgld).start(&x0).settings(s).run().unwrap(),
            Runner::new(&tm, &sgld).start(&x0).settings(s).run().unwrap(),
        );
        assert_eq!(bits(&a.estimate), bits(&b.estimate), "SGLD at {t:?}");
        assert_eq!(a.cost, b.cost);
        let cvs = CvSettings { batch_size: 50, ..Default::default() };
        let cv = ControlVariate::at_mode(&m, &x0, &ModeSettings::default(), cvs).unwrap();
        let cvt = ControlVariate::at_mode(&tm, &x0, &ModeSettings::default(), cvs).unwrap();
        let (a, b) = (
            Runner::new(&m, &Sgld::new(SgldSettings::constant(1e-4), cv).unwrap())
                .start(&x0)
                .settings(s)
                .run()
                .unwrap(),
            Runner::new(&tm, &Sgld::new(SgldSettings::constant(1e-4), cvt).unwrap())
                .start(&x0)
                .settings(s)
                .run()
                .unwrap(),
        );
        assert_eq!(bits(&a.estimate), bits(&b.estimate), "SGLD-CV at {t:?}");
        assert_eq!(a.cost, b.cost);
        let sghmc = Sghmc::new(SghmcSettings::constant(1e-5, 0.1), Minibatch::new(50)).unwrap();
        let (a, b) = (
            Runner::new(&m, &sghmc).start(&x0).settings(s).run().unwrap(),
            Runner::new(&tm, &sghmc).start(&x0).settings(s).run().unwrap(),
        );
        assert_eq!(bits(&a.estimate), bits(&b.estimate), "SGHMC at {t:?}");
        let mala = Mala::new(MalaSettings::default()).unwrap();
        let (a, b) = (
            Runner::new(&m, &mala).start(&x0).settings(s).run().unwrap(),
            Runner::new(&tm, &mala).start(&x0).settings(s).run().unwrap(),
        );
        assert_eq!(bits(&a.estimate), bits(&b.estimate), "MALA at {t:?}");
        let w = |e: &Estimate| e.samples(0).unwrap().weights().to_vec();
        assert_eq!(w(&a.estimate), w(&b.estimate));
    }
}

/// MALA at T = 0.5 and T = 2 on the whole posterior: the covariance is T·Σ (and the mean μ),
/// within Monte Carlo error; T·Σ ≠ Σ is detected. The step is the same relative step at each T
/// (γT: the tempered curvature is 1/T the posterior's).
#[test]
fn mala_variance_scales_with_the_temperature() {
    let m = model();
    let mu = m.posterior_mean().clone();
    for (t, seed) in [(0.5, 301), (2.0, 302)] {
        let tm = Tempered::new(&m, Temperature::posterior(t)).unwrap();
        let mala = Mala::new(MalaSettings::fixed(4e-4 * t)).unwrap();
        let out = Runner::new(&tm, &mala)
            .start(mu.as_slice().unwrap())
            .settings(settings(12_000, 2_000, 1, seed))
            .run()
            .unwrap();
        let target = m.posterior_covariance() * t;
        assert_z(&format!("MALA at T = {t} vs T·Σ"), &z_scores(&out.estimate, &mu, &target), Z_LIMIT);
        let z_untempered = max_cov_z(&out.estimate, &mu, m.posterior_covariance());
        assert!(z_untempered > Z_LIMIT, "T = {t}: indistinguishable from the untempered posterior (z {z_untempered})");
        // And the variance ratio itself, to the printed precision.
        let v = out.estimate.variance().unwrap();
        for j in 0..2 {
            let ratio = v[j] / m.posterior_covariance()[[j, j]];
            eprintln!("T = {t}: variance ratio θ{j} {ratio:.4}");
        }
    }
}

/// Likelihood tempering (prior untouched) changes the mean too: MALA matches the equivalent
/// model's posterior (noise variance σ²·T_L), not the untempered one.
#[test]
fn likelihood_tempering_matches_its_exact_posterior() {
    let m = model();
    // A likelihood temperature large enough for the prior (variance 10) to matter: the data's
    // precision (eigenvalues ≈ 1 900 and 100) over 5 000 is comparable to the prior's 0.1.
    let t = Temperature::likelihood(5_000.0);
    let eq = equivalent(&m, t);
    let tm = Tempered::new(&m, t).unwrap();
    // The default MALA (adapted step and dense metric): exact after its warm-up.
    let mala = Mala::new(MalaSettings::default()).unwrap();
    let mu = eq.posterior_mean().clone();
    let out =
        Runner::new(&tm, &mala).start(mu.as_slice().unwrap()).settings(settings(12_000, 2_000, 1, 303)).run().unwrap();
    assert_z("MALA, likelihood at T = 5 000", &z_scores(&out.estimate, &mu, eq.posterior_covariance()), Z_LIMIT);
    // Power: the whole posterior at T = 5 000 has the untempered mean and 5 000·Σ; rejected.
    let whole = m.posterior_covariance() * 5_000.0;
    let rows = z_scores(&out.estimate, m.posterior_mean(), &whole);
    let worst = rows.iter().map(|r| r.4.abs()).fold(0.0, f64::max);
    assert!(worst > Z_LIMIT, "likelihood tempering indistinguishable from whole-posterior tempering (z {worst})");
}

/// Minibatch SGLD on a tempered model (T_L = 2, T₀ = 0.5) matches its exact stationary law,
/// minibatch noise included: that of the equivalent model at the same step.
#[test]
fn tempered_sgld_matches_its_exact_stationary_law() {
    let m = model();
    let t = Temperature::new(2.0, 0.5);
    let eq = equivalent(&m, t);
    let tm = Tempered::new(&m, t).unwrap();
    let (n, gamma) = (10, 4e-4);
    let exact = sgld_stationary_cov(&NoiseModel::new(&eq, Some((n, true))), gamma);
    let sgld = Sgld::new(SgldSettings::constant(gamma), Minibatch::with_replacement(n)).unwrap();
    let mu = eq.posterior_mean().clone();
    let out =
        Runner::new(&tm, &sgld).start(mu.as_slice().unwrap()).settings(settings(40_000, 4_000, 2, 304)).run().unwrap();
    assert_z("SGLD n=10, T = (2, 0.5) vs exact", &z_scores(&out.estimate, &mu, &exact), Z_LIMIT);
    let untempered = sgld_stationary_cov(&NoiseModel::new(&m, Some((n, true))), gamma);
    assert!(max_cov_z(&out.estimate, &mu, &untempered) > Z_LIMIT);
}

/// Invalid temperatures are typed errors naming the field.
#[test]
fn invalid_temperatures_are_refused() {
    let m = model();
    for (t, name) in [
        (Temperature::posterior(0.0), "temperature.likelihood"),
        (Temperature::new(1.0, -1.0), "temperature.prior"),
        (Temperature::likelihood(f64::NAN), "temperature.likelihood"),
        (Temperature::new(1.0, f64::INFINITY), "temperature.prior"),
    ] {
        match Tempered::new(&m, t) {
            Err(Error::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{t:?}: expected InvalidParameter, got {other:?}"),
        }
    }
}
