//! Control variates: the CV gradient estimator (unbiased, small variance near the centre),
//! SGLD-CV / SGHMC-CV against exact laws, the optimisers, and ZV post-processing.
//!
//! Tolerances as in `stationary.rs`: 4.5 standard errors, the standard errors estimated from
//! independent replicates (40 chains) or from the draws themselves.

use crate::common;

use common::*;
use ndarray::{Array1, Array2};
use rand::SeedableRng;
use sgmcmc::*;

const Z: f64 = 4.5;

fn model() -> LinearGaussian {
    correlated_model(1000, 0.9, 1.0, 10.0, 11)
}

/// Mean and variance (per coordinate) of M estimates at θ, with the full gradient there.
fn moments<E: GradientEstimator>(
    est: &mut E,
    model: &LogisticRegression,
    theta: &[f64],
    m: usize,
) -> (Vec<(f64, f64, f64)>, Vec<f64>) {
    let d = model.dim();
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(77);
    est.prepare(model).unwrap();
    let mut full = FullGradient::new();
    full.prepare(model).unwrap();
    let mut g_full = vec![0.0; d];
    full.estimate(model, theta, &mut rng, &mut g_full).unwrap();
    let mut cols: Vec<Vec<f64>> = (0..d).map(|_| Vec::with_capacity(m)).collect();
    let mut g = vec![0.0; d];
    for _ in 0..m {
        est.estimate(model, theta, &mut rng, &mut g).unwrap();
        for (c, &v) in cols.iter_mut().zip(&g) {
            c.push(v);
        }
    }
    let stats = cols
        .iter()
        .map(|x| {
            let mean = x.iter().sum::<f64>() / m as f64;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (m as f64 - 1.0);
            (mean, var, (var / m as f64).sqrt())
        })
        .collect();
    (stats, g_full)
}

#[test]
fn cv_estimator_is_unbiased_and_far_less_variable_near_the_centre() {
    let model = LogisticRegression::synthetic(2_000, 3, 5.0, 31).unwrap();
    let map = model.map().unwrap();
    let settings = CvSettings { batch_size: 20, ..Default::default() };
    let mut cv = ControlVariate::at(&model, map.as_slice().unwrap(), settings).unwrap();
    assert_eq!(cv.setup_cost().datum_gradients, 2_000);
    // A point at about one posterior standard deviation from the centre.
    let theta: Vec<f64> = map.iter().map(|t| t + 0.03).collect();
    let (cv_stats, g_full) = moments(&mut cv, &model, &theta, 40_000);
    let (plain_stats, _) = moments(&mut Minibatch::new(20), &model, &theta, 40_000);
    for j in 0..3 {
        let (mean, var, se) = cv_stats[j];
        let z = (mean - g_full[j]) / se;
        eprintln!(
            "coord {j}: CV mean {mean:.5} full {:.5} z {z:+.2}; var CV {var:.3e} plain {:.3e}",
            g_full[j], plain_stats[j].1
        );
        assert!(z.abs() < Z, "CV estimator biased: z = {z}");
        let zp = (plain_stats[j].0 - g_full[j]) / plain_stats[j].2;
        assert!(zp.abs() < Z);
        // Near the centre the CV variance is orders of magnitude below the plain one.
        assert!(var * 100.0 < plain_stats[j].1, "variance not reduced: {var:e} vs {:e}", plain_stats[j].1);
    }
    // 2n datum gradients per estimate without a cache, n with one.
    assert_eq!(cv.n_datum_gradients(), 40_000 * 40);
    let mut cached =
        ControlVariate::at(&model, map.as_slice().unwrap(), CvSettings { cache_centre_gradients: true, ..settings })
            .unwrap();
    let (cached_stats, _) = moments(&mut cached, &model, &theta, 10_000);
    assert_eq!(cached.n_datum_gradients(), 10_000 * 20);
    for j in 0..3 {
        let (mean, _, se) = cached_stats[j];
        assert!(((mean - g_full[j]) / se).abs() < Z);
    }
    assert!((cached.full_gradient_at_centre()[0] - cv.full_gradient_at_centre()[0]).abs() < 1e-9);
}

/// Exact stationary law of SGLD-CV on the linear-Gaussian model, centred away from the mode.
#[test]
fn sgld_cv_matches_exact_stationary_law() {
    let m = model();
    let (n, gamma) = (10, 2e-4);
    let centre = m.posterior_mean() + &Array1::from_vec(vec![0.05, -0.03]);
    let cv =
        ControlVariate::at(&m, centre.as_slice().unwrap(), CvSettings { batch_size: n, ..Default::default() }).unwrap();
    let exact = sgld_stationary_cov(&NoiseModel::control_variate(&m, (n, true), &centre), gamma);
    let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(gamma) }, cv.clone()).unwrap();
    let s = RunSettings { n_iter: 40_000, burn_in: 4_000, thin: 2, n_chains: 40, seed: 201, ..Default::default() };
    let out = Runner::new(&m, &sgld).start(cv.centre()).settings(s).run().unwrap();
    assert_z("SGLD-CV vs exact", &z_scores(&out.estimate, m.posterior_mean(), &exact), Z);
    // The setup cost (one full pass) is counted once, not once per chain.
    assert_eq!(out.setup_cost.datum_gradients, 1_000);
    assert_eq!(out.cost.datum_gradients, 1_000 + 40 * 40_001 * 2 * n as u64);
    // Power: plain SGLD at this step and batch has a very different law.
    let plain = sgld_stationary_cov(&NoiseModel::new(&m, Some((n, true))), gamma);
    let zp = z_scores(&out.estimate, m.posterior_mean(), &plain).iter().skip(2).map(|r| r.4.abs()).fold(0.0, f64::max);
    assert!(zp > Z);
}

fn recovers(name: &str, sampler: &impl Sampler, start: &[f64], seed: u64) {
    let m = model();
    let s = RunSettings { n_iter: 400_000, burn_in: 40_000, thin: 20, n_chains: 40, seed, ..Default::default() };
    let out = Runner::new(&m, sampler).start(start).settings(s).run().unwrap();
    let post = m.posterior_covariance();
    let rows = z_scores(&out.estimate, m.posterior_mean(), post);
    assert_z(name, &rows, Z);
    assert!(rows[2].3 < 0.03 * post[[0, 0]] && rows[4].3 < 0.03 * post[[1, 1]], "test too weak");
}

/// SGLD-CV and SGHMC-CV at small steps recover the posterior; the exact-law bias at these steps
/// (computed) is below half a standard error of the test (checked in `stationary.rs` terms: the
/// CV noise is smaller than the plain minibatch noise there).
#[test]
fn sgld_cv_and_sghmc_cv_recover_the_posterior() {
    let m = model();
    let n = 10;
    let cv = ControlVariate::from_sgd(
        &m,
        &[0.0, 0.0],
        &SgdSettings { batch_size: 10, n_passes: 2.0, ..Default::default() },
        CvSettings { batch_size: n, ..Default::default() },
    )
    .unwrap();
    let centre = Array1::from_vec(cv.centre().to_vec());
    // The SGD centre is close to the mode (within a few posterior standard deviations).
    let sd = m.posterior_covariance().diag().mapv(f64::sqrt);
    assert!(((&centre - m.posterior_mean()) / &sd).iter().all(|z| z.abs() < 3.0), "SGD centre {centre}");
    let gamma = 4e-6;
    let exact = sgld_stationary_cov(&NoiseModel::control_variate(&m, (n, true), &centre), gamma);
    let bias = (&exact - m.posterior_covariance()).mapv(f64::abs);
    assert!(bias[[0, 0]] < 0.005 * m.posterior_covariance()[[0, 0]], "premise: bias {bias}");
    let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(gamma) }, cv.clone()).unwrap();
    recovers("SGLD-CV (small step) vs posterior", &sgld, cv.centre(), 202);
    let (eta, alpha) = (5e-8, 0.01);
    let exact = sghmc_stationary_cov(&NoiseModel::control_variate(&m, (n, true), &centre), eta, alpha);
    let bias = (&exact - m.posterior_covariance()).mapv(f64::abs);
    assert!(bias[[0, 0]] < 0.005 * m.posterior_covariance()[[0, 0]], "premise: bias {bias}");
    let s = SghmcSettings { step_size: StepSize::Constant(eta), friction: alpha, noise_estimate: 0.0 };
    let sghmc = Sghmc::new(s, cv.clone()).unwrap();
    recovers("SGHMC-CV (small step) vs posterior", &sghmc, cv.centre(), 203);
}

#[test]
fn optimisers_find_the_mode_and_count_their_cost() {
    let m = LogisticRegression::synthetic(5_000, 4, 5.0, 41).unwrap();
    let newton = m.map().unwrap();
    let opt = find_mode(&m, &[0.0; 4], &ModeSettings::default()).unwrap();
    for (a, b) in opt.theta.iter().zip(&newton) {
        assert!((a - b).abs() < 1e-8, "L-BFGS {a} vs Newton {b}");
    }
    assert_eq!(opt.cost.datum_gradients % 5_000, 0);
    assert!(opt.cost.datum_gradients >= 5_000 * (opt.iterations + 1));
    // SGD with a step tuned to the curvature (h_k ≈ 1.5/(m'(b + k)), m' ≈ 0.15 the normalised
    // potential's smallest curvature): two passes land within a few posterior standard deviations
    // of the mode.
    let tuned = SgdSettings {
        batch_size: 10,
        n_passes: 2.0,
        step_size: StepSize::Shifted { a: 10.0, b: 50.0, c: 1.0 },
        ..Default::default()
    };
    let sgd_out = sgd(&m, &[0.0; 4], &tuned).unwrap();
    assert_eq!(sgd_out.cost.datum_gradients, 10_000);
    let cov = crate::support::spd_inverse("t", &m.hessian(newton.as_slice().unwrap()).unwrap()).unwrap();
    for j in 0..4 {
        let z = (sgd_out.theta[j] - newton[j]) / cov[[j, j]].sqrt();
        assert!(z.abs() < 5.0, "SGD coordinate {j} is {z} sd from the mode");
    }
    // SGLDFP: the estimator centred at the mode reports optimiser + full pass as setup.
    let fp = ControlVariate::at_mode(&m, &[0.0; 4], &ModeSettings::default(), CvSettings::default()).unwrap();
    assert_eq!(fp.setup_cost().datum_gradients, opt.cost.datum_gradients + 5_000);
    let g = fp.full_gradient_at_centre();
    assert!(g.iter().all(|x| x.abs() < 1e-4), "gradient at the mode {g:?}");
}

#[test]
fn control_variate_errors() {
    let m = model();
    assert!(matches!(
        ControlVariate::at(&m, &[0.0], CvSettings::default()),
        Err(Error::DimensionMismatch { what: "centre", .. })
    ));
    assert!(matches!(
        ControlVariate::at(&m, &[0.0, 0.0], CvSettings { batch_size: 0, ..Default::default() }),
        Err(Error::InvalidBatchSize { .. })
    ));
    assert!(matches!(
        ControlVariate::at(&m, &[f64::NAN, 0.0], CvSettings::default()),
        Err(Error::NonFiniteStart { what: "centre" })
    ));
    // Bound to one model, used with another of a different size: refused at init.
    let cv = ControlVariate::at(&m, &[0.0, 0.0], CvSettings::default()).unwrap();
    let other = LinearGaussian::synthetic(500, 2, 1.0, 1.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::default(), cv).unwrap();
    let e = Runner::new(&other, &sgld)
        .start(&[0.0, 0.0])
        .settings(RunSettings { n_iter: 10, burn_in: 1, ..Default::default() })
        .run()
        .unwrap_err();
    assert!(matches!(e.root(), Error::DimensionMismatch { expected: 1000, got: 500, .. }));
    assert!(matches!(
        sgd(&m, &[0.0, 0.0], &SgdSettings { n_passes: 0.0, ..Default::default() }),
        Err(Error::InvalidParameter { name: "n_passes", .. })
    ));
    // One L-BFGS iteration and no Newton finish: not converged, and the message names the setting.
    let e = find_mode(&m, &[0.0, 0.0], &ModeSettings { max_iter: 1, newton_max_dim: 0, ..Default::default() });
    assert!(matches!(e, Err(Error::NotConverged { .. })), "{e:?}");
    assert!(e.unwrap_err().to_string().contains("ModeSettings::max_iter"));
    // With the Newton finish (d = 2), one L-BFGS iteration is enough.
    assert!(find_mode(&m, &[0.0, 0.0], &ModeSettings { max_iter: 1, ..Default::default() }).is_ok());
}

/// ZV with exact gradients on a Gaussian target: first order is exact for linear functions
/// (variance reduced by many orders of magnitude), second order for quadratics.
#[test]
fn zv_on_a_gaussian_with_exact_gradients() {
    let m = model();
    let mala = Mala::new(MalaSettings::fixed(4e-4)).unwrap();
    let s = RunSettings {
        n_iter: 6_000,
        burn_in: 1_000,
        storage: Storage::SamplesAndGradients,
        seed: 301,
        ..Default::default()
    };
    let out = Runner::new(&m, &mala).start(m.posterior_mean().as_slice().unwrap()).settings(s).run().unwrap();
    let samples = out.estimate.samples(0).unwrap();
    let mu = m.posterior_mean();
    // Linear test function, first order: exact up to rounding.
    let lin = zv_samples(samples, |t| 2.0 * t[0] - t[1], ZvOrder::First).unwrap();
    eprintln!(
        "linear: plain {:.6} zv {:.6} truth {:.6} VRF {:.3e}",
        lin.plain_estimate,
        lin.estimate,
        2.0 * mu[0] - mu[1],
        lin.variance_reduction
    );
    assert!(lin.variance_reduction > 1e6);
    assert!((lin.estimate - (2.0 * mu[0] - mu[1])).abs() < 1e-8);
    // Quadratic test function: first order helps little, second order is exact.
    let cov = m.posterior_covariance();
    let truth = cov[[0, 0]] + mu[0] * mu[0];
    let q1 = zv_samples(samples, |t| t[0] * t[0], ZvOrder::First).unwrap();
    let q2 = zv_samples(samples, |t| t[0] * t[0], ZvOrder::Second).unwrap();
    eprintln!(
        "quadratic: VRF first {:.3e} second {:.3e}; zv {:.8} truth {:.8}",
        q1.variance_reduction, q2.variance_reduction, q2.estimate, truth
    );
    assert!(q2.variance_reduction > 1e6);
    assert!((q2.estimate - truth).abs() < 1e-8 * truth);
    assert!(q2.variance_reduction > 100.0 * q1.variance_reduction);
    // The matrix form gives the same numbers.
    let draws = samples.draws();
    let vals = Array2::from_shape_fn((draws.nrows(), 1), |(r, _)| 2.0 * draws[[r, 0]] - draws[[r, 1]]);
    let again = zv_matrix(draws, samples.gradients().unwrap(), vals.view(), ZvOrder::First).unwrap();
    assert!((again[0].estimate - lin.estimate).abs() < 1e-12);
}

/// ZV on SGLD-CV output (stochastic gradients): the estimate stays unbiased for the chain's own
/// law, and the variance reduction is large.
#[test]
fn zv_on_sgld_cv_output() {
    let m = model();
    let cv = ControlVariate::at(
        &m,
        m.posterior_mean().as_slice().unwrap(),
        CvSettings { batch_size: 10, ..Default::default() },
    )
    .unwrap();
    let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, cv.clone()).unwrap();
    let s = RunSettings {
        n_iter: 20_000,
        burn_in: 2_000,
        n_chains: 20,
        storage: Storage::SamplesAndGradients,
        seed: 302,
        ..Default::default()
    };
    let out = Runner::new(&m, &sgld).start(cv.centre()).settings(s).run().unwrap();
    let mu = m.posterior_mean();
    let (mut plain, mut zvs, mut vrf) = (Vec::new(), Vec::new(), Vec::new());
    for c in 0..20 {
        let r = zv_samples(out.estimate.samples(c).unwrap(), |t| t[0], ZvOrder::First).unwrap();
        plain.push(r.plain_estimate);
        zvs.push(r.estimate);
        vrf.push(r.variance_reduction);
    }
    let (pm, pse) = mean_se(&plain);
    let (zm, zse) = mean_se(&zvs);
    eprintln!("plain {pm:.6} ± {pse:.2e}, ZV {zm:.6} ± {zse:.2e}, truth {:.6}, median VRF {:.1}", mu[0], vrf[10]);
    // The chain mean of a linear function is unbiased for SGLD on a Gaussian; ZV keeps it so.
    assert!(((zm - mu[0]) / zse).abs() < Z);
    assert!(((pm - mu[0]) / pse).abs() < Z);
    // Between-chain variance of the estimate is reduced substantially.
    assert!(pse > 3.0 * zse, "ZV did not reduce the variance across chains: {pse:e} vs {zse:e}");
}

#[test]
fn zv_errors() {
    let m = model();
    let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, Minibatch::new(10)).unwrap();
    let out = Runner::new(&m, &sgld)
        .start(&[0.0, 0.0])
        .settings(RunSettings { n_iter: 100, burn_in: 10, ..Default::default() })
        .run()
        .unwrap();
    assert!(matches!(
        zv_samples(out.estimate.samples(0).unwrap(), |t| t[0], ZvOrder::First),
        Err(Error::NotStored { .. })
    ));
    let decreasing =
        Sgld::new(SgldSettings { step_size: StepSize::Polynomial { gamma1: 1e-4, alpha: 0.5 } }, Minibatch::new(10))
            .unwrap();
    let s = RunSettings { n_iter: 100, burn_in: 10, storage: Storage::SamplesAndGradients, ..Default::default() };
    let out = Runner::new(&m, &decreasing).start(&[0.0, 0.0]).settings(s).run().unwrap();
    assert!(matches!(
        zv_samples(out.estimate.samples(0).unwrap(), |t| t[0], ZvOrder::First),
        Err(Error::InvalidParameter { name: "weights", .. })
    ));
    // Collinear control variates: duplicated gradient column.
    let draws = Array2::from_shape_fn((50, 2), |(r, c)| (r * (c + 1)) as f64);
    let grads = Array2::from_shape_fn((50, 2), |(r, _)| (r as f64).sin());
    let vals = Array1::from_shape_fn(50, |r| r as f64);
    assert!(matches!(zv(draws.view(), grads.view(), vals.view(), ZvOrder::First), Err(Error::LinearAlgebra { .. })));
}
