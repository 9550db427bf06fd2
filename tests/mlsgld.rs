//! Multilevel SGLD: telescoping, coupling variance decay, adaptive MLMC, the Taylor estimator,
//! thread-count independence.

use crate::common;

use common::mean_se;
use rand::SeedableRng;
use sgmcmc::*;

const Z: f64 = 4.5;

/// d = 1 linear-Gaussian posterior with precision about N/4, so that h₀ = 1/N is a quarter of the
/// stability-relevant scale.
fn gaussian() -> LinearGaussian {
    LinearGaussian::synthetic(100, 1, 4.0, 10.0, 21).unwrap()
}

/// The multilevel estimate of E[g_L] agrees with a plain (independent) estimate at level L, while
/// E[g_0] is far from it: the telescoping sum corrects the coarse levels' bias.
#[test]
fn telescoping_sum_matches_the_finest_level() {
    let m = gaussian();
    let mu = m.posterior_mean()[0];
    let sd = m.posterior_covariance()[[0, 0]].sqrt();
    let start = [mu + 3.0 * sd];
    let g = |t: &[f64]| t[0] * t[0];
    let settings = MlSgldSettings { seed: 31, ..Default::default() };
    let ml = MlSgld::sgld(settings, 1.0 / 100.0, Minibatch::new(10), &start).unwrap();
    let r = ml.run_fixed(&m, &g, &[4000, 2000, 1000, 500]).unwrap();
    // An independent plain estimate at level 3.
    let plain_ml =
        MlSgld::sgld(MlSgldSettings { seed: 32, ..settings }, 1.0 / 100.0, Minibatch::new(10), &start).unwrap();
    let plain: Vec<f64> = (0..4000).map(|i| plain_ml.sample(&m, &g, 3, i).unwrap().fine).collect();
    let (pm, pse) = mean_se(&plain);
    let z = (r.estimate - pm) / (r.variance + pse * pse).sqrt();
    eprintln!(
        "MLMC {:.6} ± {:.1e}, plain level-3 {pm:.6} ± {pse:.1e} (z {z:+.2}); level-0 mean {:.6}",
        r.estimate,
        r.variance.sqrt(),
        r.levels[0].mean_fine
    );
    for l in &r.levels {
        eprintln!(
            "  level {}: mean Δ {:+.3e}, var Δ {:.3e}, cost/sample {:.0}",
            l.level, l.mean, l.variance, l.cost_per_sample
        );
    }
    assert!(z.abs() < Z, "telescoping sum disagrees with level 3 (z = {z})");
    // Level 0 alone is clearly biased relative to level 3 (so the test has power).
    let z0 = (r.levels[0].mean_fine - pm) / (r.levels[0].variance_fine / 4000.0 + pse * pse).sqrt();
    assert!(z0.abs() > 3.0 * Z, "level 0 is not distinguishable from level 3 (z = {z0})");
    // The fixed run spends what it reports.
    let total: u64 = r.levels.iter().map(|l| l.cost.datum_gradients).sum();
    assert_eq!(r.cost.datum_gradients, total);
}

fn decay(coupling: MlCoupling, seed: u64) -> (f64, Vec<f64>) {
    let m = LogisticRegression::synthetic(1000, 3, 1.0, 41).unwrap();
    let map = m.map().unwrap();
    let map0 = map.clone();
    let g = move |t: &[f64]| t.iter().zip(map0.iter()).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
    let settings = MlSgldSettings { coupling, seed, ..Default::default() };
    let ml = MlSgld::sgld(settings, 1.0 / 1000.0, Minibatch::new(10), map.as_slice().unwrap()).unwrap();
    let r = ml.run_fixed(&m, &g, &[200, 3000, 3000, 3000, 3000, 3000]).unwrap();
    let v: Vec<f64> = r.levels.iter().skip(1).map(|l| l.variance).collect();
    (decay_rate(&v), v)
}

/// β of `V_l ∝ 2^(−βl)`: the least-squares slope of −log₂ V_l over l = 1, 2, ….
fn decay_rate(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let xs: Vec<f64> = (1..=v.len()).map(|l| l as f64).collect();
    let ys: Vec<f64> = v.iter().map(|x| -x.log2()).collect();
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum::<f64>() / xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>()
}

/// Var[Δ_l] decays like 2^(−βl): β ≈ 1 for Algorithm 1's subsampling coupling, β ≈ 2 for the
/// antithetic one (Giles et al., Fig. 2), with the plain minibatch estimator (n = 10).
#[test]
fn coupling_variance_decays_at_the_expected_rates() {
    let (b1, v1) = decay(MlCoupling::Subsampling, 51);
    let (b2, v2) = decay(MlCoupling::Antithetic, 52);
    eprintln!("Algorithm 1: β = {b1:.2}, V_l = {v1:?}");
    eprintln!("antithetic : β = {b2:.2}, V_l = {v2:?}");
    // Each V_l is estimated from 3000 samples (relative error a few %), so β over five levels is
    // known to about ±0.1; the margins below are several times that.
    assert!(b1 > 0.6 && b1 < 1.5, "Algorithm 1 decay rate {b1}");
    assert!(b2 > 1.6, "antithetic decay rate {b2}");
    assert!(v2[4] < v1[4] / 4.0, "antithetic not better at level 5");
}

/// Adaptive MLMC meets its target RMSE against the exact posterior expectation over 40 runs.
#[test]
fn adaptive_mlmc_meets_the_target_rmse() {
    let m = gaussian();
    let mu = m.posterior_mean()[0];
    let sd = m.posterior_covariance()[[0, 0]].sqrt();
    let truth = mu;
    let g = |t: &[f64]| t[0];
    let eps = 0.05 * sd;
    let target = AdaptiveSettings { target: RmseTarget::Absolute(eps), n_initial: 200, max_level: 8, max_cost: None };
    let mut errs = Vec::new();
    let mut levels = Vec::new();
    for run in 0..40u64 {
        let settings = MlSgldSettings { seed: 1000 + run, ..Default::default() };
        let ml = MlSgld::sgld(settings, 1.0 / 100.0, Minibatch::new(10), &[mu + 2.0 * sd]).unwrap();
        let r = ml.run_adaptive(&m, &g, &target).unwrap();
        errs.push(r.estimate - truth);
        levels.push(r.levels.len());
    }
    let rmse = (errs.iter().map(|e| e * e).sum::<f64>() / errs.len() as f64).sqrt();
    eprintln!("empirical RMSE {:.3} ε over 40 runs; levels used {levels:?}", rmse / eps);
    assert!(rmse <= 1.2 * eps, "empirical RMSE {rmse:e} above 1.2 ε = {:e}", 1.2 * eps);
}

#[test]
fn adaptive_mlmc_reports_an_exhausted_budget() {
    let m = gaussian();
    let ml = MlSgld::sgld(MlSgldSettings::default(), 0.01, Minibatch::new(10), &[0.0]).unwrap();
    let target =
        AdaptiveSettings { target: RmseTarget::Absolute(1e-5), n_initial: 10, max_level: 8, max_cost: Some(100_000) };
    match ml.run_adaptive(&m, &|t: &[f64]| t[0], &target) {
        Err(Error::BudgetExhausted { datum_evaluations, estimate, estimated_rmse, .. }) => {
            // It stops before a batch that would overrun the budget, reporting what it has.
            assert!(datum_evaluations > 0 && datum_evaluations <= 100_000, "{datum_evaluations}");
            assert!(estimate.is_finite() && estimated_rmse > 1e-5);
        }
        other => panic!("expected BudgetExhausted, got {other:?}"),
    }
    assert!(matches!(
        MlSgld::sgld(
            MlSgldSettings { averaging_window: Some(6.0), ..Default::default() },
            0.01,
            Minibatch::new(1),
            &[0.0]
        ),
        Err(Error::InvalidParameter { name: "averaging_window", .. })
    ));
    assert!(matches!(ml.run_fixed(&m, &|t: &[f64]| t[0], &[1]), Err(Error::NoSamples { .. })));
    let m2 = LinearGaussian::synthetic(100, 2, 1.0, 1.0, 1).unwrap();
    assert!(matches!(ml.run_fixed(&m2, &|t: &[f64]| t[0], &[5]), Err(Error::DimensionMismatch { .. })));
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let m = LogisticRegression::synthetic(500, 3, 1.0, 7).unwrap();
    let map = m.map().unwrap();
    let g = |t: &[f64]| t[0] + t[1] * t[2];
    let settings = MlSgldSettings { keep_points: true, ..Default::default() };
    let ml = MlSgld::sgld(settings, 1.0 / 500.0, Minibatch::new(10), map.as_slice().unwrap()).unwrap();
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| ml.run_fixed(&m, &g, &[50, 40, 30]).unwrap())
    };
    let (a, b) = (run(1), run(2));
    assert_eq!(a.estimate.to_bits(), b.estimate.to_bits());
    assert_eq!(a.cost, b.cost);
    let serial = MlSgld::sgld(
        MlSgldSettings { parallel: false, ..settings },
        1.0 / 500.0,
        Minibatch::new(10),
        map.as_slice().unwrap(),
    )
    .unwrap()
    .run_fixed(&m, &g, &[50, 40, 30])
    .unwrap();
    assert_eq!(a.estimate.to_bits(), serial.estimate.to_bits());
    // The signed measure of the end points reproduces the estimate.
    let measure = a.measure.as_ref().unwrap();
    let via_measure = measure.expectation(|t| t[0] + t[1] * t[2]).unwrap();
    assert!((via_measure - a.estimate).abs() < 1e-12, "{via_measure} vs {}", a.estimate);
    assert!((measure.total_weight() - 1.0).abs() < 1e-12);
}

/// The Taylor estimator is unbiased, and near the expansion point its variance is far below the
/// first-order control variate's (second- vs first-order remainder).
#[test]
fn taylor_estimator_is_unbiased_and_second_order() {
    let m = LogisticRegression::synthetic(2_000, 3, 5.0, 61).unwrap();
    let map = m.map().unwrap();
    let theta: Vec<f64> = map.iter().map(|t| t + 0.03).collect();
    let settings = CvSettings { batch_size: 20, ..Default::default() };
    let mut taylor = Taylor::at(&m, map.as_slice().unwrap(), settings).unwrap();
    assert_eq!(taylor.setup_cost().datum_gradients, 2_000);
    assert_eq!(taylor.setup_cost().datum_hvps, 3 * 2_000);
    let mut cv = ControlVariate::at(&m, map.as_slice().unwrap(), settings).unwrap();
    taylor.prepare(&m).unwrap();
    cv.prepare(&m).unwrap();
    let mut full = FullGradient::new();
    full.prepare(&m).unwrap();
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(3);
    let mut gf = vec![0.0; 3];
    full.estimate(&m, &theta, &mut rng, &mut gf).unwrap();
    let draws = 40_000;
    let mut t_cols: Vec<Vec<f64>> = (0..3).map(|_| Vec::with_capacity(draws)).collect();
    let mut c_cols: Vec<Vec<f64>> = (0..3).map(|_| Vec::with_capacity(draws)).collect();
    let mut g = vec![0.0; 3];
    for _ in 0..draws {
        taylor.estimate(&m, &theta, &mut rng, &mut g).unwrap();
        for (c, v) in t_cols.iter_mut().zip(&g) {
            c.push(*v);
        }
        cv.estimate(&m, &theta, &mut rng, &mut g).unwrap();
        for (c, v) in c_cols.iter_mut().zip(&g) {
            c.push(*v);
        }
    }
    for j in 0..3 {
        let (tm, tse) = mean_se(&t_cols[j]);
        let (_, cse) = mean_se(&c_cols[j]);
        let z = (tm - gf[j]) / tse;
        eprintln!(
            "coord {j}: Taylor {tm:.5} vs full {:.5} (z {z:+.2}); sd Taylor {:.2e} CV {:.2e}",
            gf[j],
            tse * (draws as f64).sqrt(),
            cse * (draws as f64).sqrt()
        );
        assert!(z.abs() < Z);
        assert!(tse * 5.0 < cse, "Taylor not better than first-order CV near θ₀");
    }
    assert_eq!(taylor.cost().datum_hvps, draws as u64 * 20);
    // Without Hessian-vector products the estimator cannot be built.
    struct NoHvp(LogisticRegression);
    impl Model for NoHvp {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn n_data(&self) -> usize {
            self.0.n_data()
        }
        fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
            self.0.grad_prior(t, o)
        }
        fn grad_data_sum(&self, t: &[f64], i: &[usize], o: &mut [f64]) -> Result<()> {
            self.0.grad_data_sum(t, i, o)
        }
    }
    assert!(matches!(
        Taylor::at(&NoHvp(m.clone()), map.as_slice().unwrap(), settings),
        Err(Error::Unsupported { method: "hvp_data_sum", .. })
    ));
}

/// With h₀ and the horizon derived from the curvature, adaptive ML-SGLD recovers the posterior
/// mean and variance of a linear-Gaussian model within its reported error; with a horizon forced
/// far too short (the old default's failure), the run is refused with `NotRelaxed`.
#[test]
fn curvature_defaults_relax_and_short_horizons_are_reported() {
    // Condition number ≈ 6: relaxation takes several 1/λ_max.
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let n = 2_000;
    let design = ndarray::Array2::from_shape_fn((n, 2), |(_, j)| {
        let z: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng);
        if j == 0 { z } else { 0.4 * z }
    });
    let targets = design.dot(&ndarray::arr1(&[1.0, -0.5]));
    let m = LinearGaussian::new(&design, &targets, 1.0, 10.0).unwrap();
    let mu = m.posterior_mean().to_vec();
    let var = m.posterior_covariance()[[1, 1]];
    let settings = MlSgldSettings { seed: 77, ..Default::default() };
    let (ml, curv) = MlSgld::sgld_from_curvature(&m, settings, Minibatch::new(50), &mu).unwrap();
    eprintln!(
        "λ_max {:.4e}, λ_min {:.4e}: h0 {:.3e}, horizon {}",
        curv.lambda_max,
        curv.lambda_min.unwrap(),
        ml.h0(),
        ml.settings().horizon
    );
    assert!(ml.settings().horizon as f64 >= 3.5 * curv.lambda_max / curv.lambda_min.unwrap() - 1.0);
    // The variance of the slow coordinate: g = (θ₁ − μ₁)², which starts at 0 from the mode.
    let g = |t: &[f64]| (t[1] - mu[1]).powi(2);
    let target = AdaptiveSettings { target: RmseTarget::Absolute(0.03 * var), ..Default::default() };
    let r = ml.run_adaptive(&m, &g, &target).unwrap();
    let err = (r.estimate - var) / (r.variance + r.bias_estimate.unwrap().powi(2)).sqrt();
    eprintln!("variance: ML-SGLD {:.5e} vs exact {var:.5e} ({err:+.2} reported errors)", r.estimate);
    assert!(err.abs() < Z, "variance {} vs {var}", r.estimate);
    // The mean from a start 2 sd away.
    let sd0 = m.posterior_covariance()[[0, 0]].sqrt();
    let start = [mu[0] + 2.0 * sd0, mu[1]];
    let (ml, _) = MlSgld::sgld_from_curvature(&m, settings, Minibatch::new(50), &start).unwrap();
    let g0 = |t: &[f64]| t[0];
    let r = ml
        .run_adaptive(&m, &g0, &AdaptiveSettings { target: RmseTarget::Absolute(0.03 * sd0), ..Default::default() })
        .unwrap();
    let err = (r.estimate - mu[0]) / (r.variance + r.bias_estimate.unwrap().powi(2)).sqrt();
    eprintln!("mean: ML-SGLD {:.6} vs exact {:.6} ({err:+.2} reported errors)", r.estimate, mu[0]);
    assert!(err.abs() < Z);
    // Forced under-relaxation: the old default (h₀ = 1e-3/λ_max-scale step, horizon 5) simulates
    // a time far below 1/λ_min; the variance would come out near 0. Reported, not accepted.
    let short =
        MlSgld::sgld(MlSgldSettings { horizon: 5, ..settings }, 0.01 / curv.lambda_max, Minibatch::new(50), &mu)
            .unwrap();
    let e = short.run_adaptive(&m, &g, &target).unwrap_err();
    eprintln!("{e}");
    assert!(matches!(e, Error::NotRelaxed { .. }), "{e:?}");
}

/// The default target is relative to the posterior: `AdaptiveSettings::default()` aims at 0.1
/// posterior sd of g (estimated from level 2's fine paths), whatever the scale of g — here g = 1 000 θ and
/// g = θ / 1 000 get the same relative accuracy — and 20 runs meet it against the exact mean.
#[test]
fn the_default_adaptive_target_is_relative_to_the_posterior_sd() {
    let m = gaussian();
    let mu = m.posterior_mean()[0];
    let sd = m.posterior_covariance()[[0, 0]].sqrt();
    for scale in [1e3, 1e-3] {
        let g = |t: &[f64]| scale * t[0];
        let mut sq = 0.0;
        for run in 0..20u64 {
            // A horizon of 40 h₀ = 0.4 relaxes this posterior (precision ≈ 25): e^(−10).
            let settings = MlSgldSettings { seed: 500 + run, horizon: 40, ..Default::default() };
            let ml = MlSgld::sgld(settings, 1.0 / 100.0, Minibatch::new(10), &[mu + 2.0 * sd]).unwrap();
            let r = ml.run_adaptive(&m, &g, &AdaptiveSettings::default()).unwrap();
            let eps = r.target_rmse.unwrap();
            // Level 2's sd of g is the posterior sd of g to within its sampling error (100
            // samples: ±21 % at 3 standard errors) and the bias of its law (step h₀/4 with
            // minibatch noise: about +14 % here, measured over these runs).
            let ratio = eps / (0.1 * scale * sd);
            assert!((0.75..1.5).contains(&ratio), "ε {eps:e} is {ratio:.2} × 0.1 sd");
            sq += ((r.estimate - scale * mu) / (scale * sd)).powi(2);
        }
        let rmse_sd = (sq / 20.0).sqrt();
        eprintln!("scale {scale:e}: empirical RMSE {rmse_sd:.3} posterior sds (target 0.1)");
        // 20 runs: the empirical RMSE of a method meeting 0.1 is below 0.15 with high probability.
        assert!(rmse_sd <= 0.15, "{rmse_sd}");
    }
}

/// `MlmcResult::moments` gives every coordinate's mean and sd as the signed measure does, with
/// error bars that hold: over 100 adaptive runs (g = θ at target 0.05 sd, end points kept) on
/// the d = 1 Gaussian, the run's own `error_bound` (95 %: z·se + estimated bias, in sds) covers
/// both the mean's and the sd's error against the exact posterior in at least 88 runs
/// (P(≤ 87 | p = 0.95) < 0.001); the bound is not vacuous (its median below 0.5 sd). Here the sd
/// comes out about 15 % too wide (minibatch noise at the finest level's step) and the bias
/// estimate carries most of the bound: with the decay rate α fitted freely (1.2–1.5 on these
/// runs) instead of held at SGLD's weak order 1 it covered 74 of 100; with α held but the bound
/// in units of the run's own (too wide) sd instead of the posterior sd's lower bound, 92.

#[test]
fn moment_error_bars_of_the_signed_measure_cover_the_exact_posterior() {
    let m = gaussian();
    let mu = m.posterior_mean()[0];
    let sd = m.posterior_covariance()[[0, 0]].sqrt();
    let g = |t: &[f64]| t[0];
    let target =
        AdaptiveSettings { target: RmseTarget::Absolute(0.05 * sd), n_initial: 200, max_level: 8, max_cost: None };
    let (mut covered, mut bounds) = (0, Vec::new());
    let runs = 100u64;
    for run in 0..runs {
        let settings = MlSgldSettings { seed: 3_000 + run, keep_points: true, ..Default::default() };
        let ml = MlSgld::sgld(settings, 1.0 / 100.0, Minibatch::new(10), &[mu + 2.0 * sd]).unwrap();
        let r = ml.run_adaptive(&m, &g, &target).unwrap();
        let mo = r.moments.as_ref().unwrap();
        let measure = r.measure.as_ref().unwrap();
        // The same figures as the measure's.
        assert!((mo.mean[0] - measure.mean().unwrap()[0]).abs() < 1e-9 * sd);
        assert!((mo.sd[0] - measure.variance().unwrap()[0].max(0.0).sqrt()).abs() < 1e-6 * sd);
        let err = ((mo.mean[0] - mu).abs() / sd).max((mo.sd[0] / sd - 1.0).abs());
        covered += usize::from(err <= mo.error_bound);
        bounds.push(mo.error_bound);
    }
    bounds.sort_by(f64::total_cmp);
    eprintln!(
        "error_bound covered {covered}/{runs}; bound median {:.3}, range {:.3}–{:.3}",
        bounds[50], bounds[0], bounds[99]
    );
    assert!(covered >= 88, "covered {covered}");
    assert!(bounds[50] < 0.5, "median bound {}", bounds[50]);
}

/// Mean over runs and outputs of the squared errors of every coordinate's mean (in posterior sds)
/// and sd (relative), in units of ε², read off the signed measure of `runs` adaptive runs at
/// `target` on the d = 2 Gaussian, g = θ₀.
fn moment_errors_squared(target: RmseTarget, eps: f64, runs: u64) -> (f64, f64) {
    let m = LinearGaussian::synthetic(100, 2, 4.0, 10.0, 23).unwrap();
    let mu = m.posterior_mean();
    let cov = m.posterior_covariance();
    let sd: Vec<f64> = (0..2).map(|j| cov[[j, j]].sqrt()).collect();
    let g = |t: &[f64]| t[0];
    let adaptive = AdaptiveSettings { target, n_initial: 200, max_level: 8, max_cost: None };
    let (mut sum, mut worst_sd) = (0.0, 0.0f64);
    for run in 0..runs {
        let settings = MlSgldSettings { seed: 5_000 + run, keep_points: true, ..Default::default() };
        let start = [mu[0], mu[1]];
        let ml = MlSgld::sgld(settings, 1.0 / 100.0, Minibatch::new(10), &start).unwrap();
        let r = ml.run_adaptive(&m, &g, &adaptive).unwrap();
        let mo = r.moments.as_ref().unwrap();
        for j in 0..2 {
            let (e_mean, e_sd) = ((mo.mean[j] - mu[j]) / sd[j], mo.sd[j] / sd[j] - 1.0);
            sum += e_mean * e_mean + e_sd * e_sd;
            worst_sd = worst_sd.max(e_sd.abs());
        }
    }
    (sum / (4 * runs) as f64 / (eps * eps), worst_sd)
}

/// `RmseTarget::Moments(ε)` controls every coordinate's mean and sd, not g alone: over 20 runs
/// on a d = 2 Gaussian at ε = 0.05, the squared errors of the 4 outputs (means in posterior sds,
/// sds relative) average at most 2 ε². A met target gives E[e²] ≤ ε² (bias ≤ ε/√2, variance
/// ≤ ε²/2); for Gaussian errors the average of 80 has sd √(2/80) ε² if independent and at worst
/// √(2/20) ε² = 0.32 ε² if a run's four errors were one, so 2 ε² is 3 such sds above 1. The
/// power: the same runs targeting g alone (`PosteriorSd(0.05)`, the sd of g = θ₀) leave the sds
/// about 15 % wide (minibatch noise at the finest step) and average above 2 ε².
#[test]
fn a_moments_target_controls_every_mean_and_sd() {
    let eps = 0.05;
    let (moments, worst) = moment_errors_squared(RmseTarget::Moments(eps), eps, 20);
    let (g_only, worst_g) = moment_errors_squared(RmseTarget::PosteriorSd(eps), eps, 20);
    eprintln!(
        "mean squared error / ε²: Moments {moments:.2} (worst sd error {worst:.3}), g alone {g_only:.2} (worst sd error {worst_g:.3})"
    );
    assert!(moments <= 2.0, "the Moments target missed: mean e²/ε² = {moments:.2}");
    assert!(g_only > 2.0, "no power: the g-only target already met the moments ({g_only:.2})");
}

/// Under `RmseTarget::Moments` the adaptive run starts its estimator at a finer level when
/// Giles' cost model says level 0 costs more than it saves (`E[g_L] = E[g_1] + Σ_{l≥2} E[Δ_l]`,
/// level 1's fine paths alone as the base): at h₀ = 1.6/λ_max SGLD's level-0 law is 5× wider than
/// the posterior along the stiff direction, its corrections large. On the d = 2 Gaussian of the
/// test above, every one of 20 runs drops level 0 (its results' levels start at 1 or above, its
/// cost includes level 0's), and the means and sds still meet the target: the squared errors
/// of the four outputs average at most 2 ε² (the bound of the test above, same reasoning).
#[test]
fn a_moments_run_drops_a_coarsest_level_that_costs_more_than_it_saves() {
    let m = LinearGaussian::synthetic(100, 2, 4.0, 10.0, 23).unwrap();
    let mu = m.posterior_mean();
    let cov = m.posterior_covariance();
    let sd: Vec<f64> = (0..2).map(|j| cov[[j, j]].sqrt()).collect();
    // The precision's extreme eigenvalues, from the covariance's.
    let (tr, det) = (cov[[0, 0]] + cov[[1, 1]], cov[[0, 0]] * cov[[1, 1]] - cov[[0, 1]] * cov[[1, 0]]);
    let disc = (tr * tr / 4.0 - det).sqrt();
    let (lmax, lmin) = (1.0 / (tr / 2.0 - disc), 1.0 / (tr / 2.0 + disc));
    let h0 = 1.6 / lmax;
    let horizon = (4.0 / (h0 * lmin)).ceil() as usize;
    let eps = 0.05;
    let adaptive = AdaptiveSettings { target: RmseTarget::Moments(eps), n_initial: 200, max_level: 10, max_cost: None };
    let (mut sum, mut dropped) = (0.0, 0);
    let runs = 20u64;
    for run in 0..runs {
        let settings = MlSgldSettings { seed: 7_000 + run, keep_points: true, horizon, ..Default::default() };
        let ml = MlSgld::sgld(settings, h0, Minibatch::new(10), &[mu[0], mu[1]]).unwrap();
        let r = ml.run_adaptive(&m, &|t: &[f64]| t[0], &adaptive).unwrap();
        dropped += usize::from(r.levels[0].level >= 1);
        let spent: u64 = r.levels.iter().map(|l| l.cost.datum_gradients).sum();
        assert!(r.cost.datum_gradients > spent || r.levels[0].level == 0, "the dropped levels' cost is counted");
        let mo = r.moments.as_ref().unwrap();
        for j in 0..2 {
            let (e_mean, e_sd) = ((mo.mean[j] - mu[j]) / sd[j], mo.sd[j] / sd[j] - 1.0);
            sum += e_mean * e_mean + e_sd * e_sd;
        }
    }
    let e2 = sum / (4 * runs) as f64 / (eps * eps);
    eprintln!("h0 λ_max = 1.6, horizon {horizon}: level 0 dropped in {dropped}/{runs} runs; mean e²/ε² = {e2:.2}");
    assert_eq!(dropped, runs as usize);
    assert!(e2 <= 2.0, "mean e²/ε² = {e2:.2}");
}

/// `RmseTarget::Moments` reads the kept end points: without `keep_points` it is a named
/// setting error before any work.
#[test]
fn a_moments_target_needs_the_kept_points() {
    let m = gaussian();
    let ml = MlSgld::sgld(MlSgldSettings::default(), 0.01, Minibatch::new(10), &[0.0]).unwrap();
    let target = AdaptiveSettings { target: RmseTarget::Moments(0.1), ..Default::default() };
    match ml.run_adaptive(&m, &|t: &[f64]| t[0], &target) {
        Err(Error::InvalidParameter { name: "target", reason, .. }) => {
            assert!(reason.contains("keep_points"), "{reason}")
        }
        other => panic!("expected InvalidParameter(target), got {other:?}"),
    }
}

/// Multilevel UBU, every minibatch all the data (no gradient noise: the levels differ by the
/// discretisation alone): the coarse path's flow noise is the fine path's two half-steps'
/// combined (`LangevinKernel::combine_increments`) and the corrections shrink level by level.
/// At β ≈ 1, not UBU's strong order 2 (β ≈ 4): the crate runs UBU as `B(h)U(h)`, whose states
/// are UBU's midpoints, and a fine path's midpoints fall a quarter of a coarse step away from
/// the coarse path's, which costs the coupling its order (measured: the same β with the plain
/// `(z₁ + z₂)/√2` combination). A finding, stated in `Ubu`'s docs.
#[test]
fn multilevel_ubu_couples_its_levels() {
    let m = LogisticRegression::synthetic(1000, 3, 1.0, 41).unwrap();
    let map = m.map().unwrap();
    let map0 = map.clone();
    let g = move |t: &[f64]| t.iter().zip(map0.iter()).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
    let settings = MlSgldSettings { coupling: MlCoupling::Antithetic, seed: 53, ..Default::default() };
    let ubu = Ubu::new(KineticSettings::constant(0.03, 30.0), Minibatch::without_replacement(1000)).unwrap();
    let ml = MlSgld::new(settings, ubu, map.as_slice().unwrap()).unwrap();
    let r = ml.run_fixed(&m, &g, &[200, 3000, 3000, 3000, 3000, 3000]).unwrap();
    let v: Vec<f64> = r.levels.iter().skip(1).map(|l| l.variance).collect();
    let beta = decay_rate(&v);
    eprintln!("multilevel UBU: β = {beta:.2}, V_l = {v:?}");
    assert!(beta > 0.7 && v.windows(2).all(|w| w[1] < w[0]), "UBU's levels decay at {beta}: {v:?}");
}
