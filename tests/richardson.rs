//! Richardson–Romberg extrapolation: O(γ²) bias, the shared-noise coupling, parallel = serial.
//!
//! On a Gaussian target with exact gradients the stationary law of ULA at step γ is known,
//! `σ²_γ = 1/(λ(1 − γλ/2))`, so the extrapolated variance `2σ²_{γ/2} − σ²_γ` is known exactly:
//! its relative bias is `−(γλ)²/8 + O(γ³)` against ULA's `+γλ/2`. Replicates: 40, limit 4.5 SE.

use crate::common;

use common::mean_se;
use sgmcmc::*;

const R: usize = 40;
const Z: f64 = 4.5;

fn model() -> (LinearGaussian, f64) {
    let m = LinearGaussian::synthetic(20, 1, 1.0, 10.0, 5).unwrap();
    let lambda = m.posterior_precision()[[0, 0]];
    (m, lambda)
}

fn ula_var(lambda: f64, gamma: f64) -> f64 {
    1.0 / (lambda * (1.0 - gamma * lambda / 2.0))
}

/// Per-replicate variance estimates of (RR, coarse chain A, fine chain B).
fn variances(gamma: f64, coupling: NoiseCoupling, n_iter: u64, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (m, _) = model();
    let rr = RichardsonRomberg::with_coupling(Sgld::lmc(SgldSettings::constant(gamma)).unwrap(), coupling);
    let s = RunSettings { n_iter, burn_in: 1_000, n_chains: R, seed, storage: Storage::Moments, ..Default::default() };
    let out = Runner::new(&m, &rr).start(m.posterior_mean().as_slice().unwrap()).settings(s).run().unwrap();
    let rrv = (0..R).map(|c| out.replicate(c).unwrap().covariance().unwrap()[[0, 0]]).collect();
    let a = (0..R).map(|c| out.coarse.part(c).unwrap().covariance().unwrap()[[0, 0]]).collect();
    let b = (0..R).map(|c| out.fine.part(c).unwrap().covariance().unwrap()[[0, 0]]).collect();
    (rrv, a, b)
}

#[test]
fn extrapolation_has_second_order_bias() {
    let (m, lambda) = model();
    let post = m.posterior_covariance()[[0, 0]];
    let mut rr_bias = Vec::new();
    let mut sgld_bias = Vec::new();
    for (i, &gl) in [0.4, 0.2].iter().enumerate() {
        let gamma = gl / lambda;
        let (rrv, a, b) = variances(gamma, NoiseCoupling::Shared, 400_000, 400 + i as u64);
        let exact_rr = 2.0 * ula_var(lambda, gamma / 2.0) - ula_var(lambda, gamma);
        let (mr, ser) = mean_se(&rrv);
        let (ma, sea) = mean_se(&a);
        let (mb, seb) = mean_se(&b);
        let zr = (mr - exact_rr) / ser;
        let za = (ma - ula_var(lambda, gamma)) / sea;
        let zb = (mb - ula_var(lambda, gamma / 2.0)) / seb;
        eprintln!(
            "γλ = {gl}: RR {mr:.6e} (exact {exact_rr:.6e}, z {zr:+.2}), A {ma:.6e} (z {za:+.2}), B {mb:.6e} (z {zb:+.2}), posterior {post:.6e}"
        );
        assert!(zr.abs() < Z && za.abs() < Z && zb.abs() < Z);
        rr_bias.push(((mr - post) / post, ser / post));
        sgld_bias.push(((ma - post) / post, sea / post));
    }
    // Halving γ divides SGLD's bias by about 2 and the extrapolated bias by about 4 (exact
    // values 2.25 and 4.75 at these γλ); the ratios are measured, with their standard errors.
    let ratio = |v: &[(f64, f64)]| {
        let (b1, s1) = v[0];
        let (b2, s2) = v[1];
        let r = b1 / b2;
        (r, r * ((s1 / b1).powi(2) + (s2 / b2).powi(2)).sqrt())
    };
    let (r_rr, se_rr) = ratio(&rr_bias);
    let (r_sgld, se_sgld) = ratio(&sgld_bias);
    eprintln!("bias ratio γ → γ/2: SGRRLD {r_rr:.2} ± {se_rr:.2}, SGLD {r_sgld:.3} ± {se_sgld:.3}");
    assert!((r_rr - 4.75).abs() < Z * se_rr, "extrapolated bias ratio {r_rr} ± {se_rr}");
    assert!((r_sgld - 2.25).abs() < Z * se_sgld, "SGLD bias ratio {r_sgld} ± {se_sgld}");
    // And the extrapolated bias is far below SGLD's at the same γ.
    assert!(rr_bias[1].0.abs() * 10.0 < sgld_bias[1].0.abs());
}

#[test]
fn shared_noise_coupling_is_present() {
    let (_, lambda) = model();
    let gamma = 0.2 / lambda;
    let (shared, sa, sb) = variances(gamma, NoiseCoupling::Shared, 50_000, 410);
    let (indep, ia, ib) = variances(gamma, NoiseCoupling::Independent, 50_000, 410);
    let var = |v: &[f64]| {
        let (_, se) = mean_se(v);
        se * se * v.len() as f64
    };
    let diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| y - x).collect::<Vec<f64>>();
    let (v_rr_s, v_rr_i) = (var(&shared), var(&indep));
    let (v_d_s, v_d_i) = (var(&diff(&sa, &sb)), var(&diff(&ia, &ib)));
    eprintln!("across replicates: Var(RR) shared {v_rr_s:.3e} independent {v_rr_i:.3e} (ratio {:.1})", v_rr_i / v_rr_s);
    eprintln!("                   Var(B − A) shared {v_d_s:.3e} independent {v_d_i:.3e} (ratio {:.1})", v_d_i / v_d_s);
    // Pathwise coupling: with shared increments the two chains' estimates move together, so their
    // difference varies far less than with independent increments (where it varies like the sum
    // of both). A ratio of two 39-degree-of-freedom sample variances exceeds 3.5 by chance with
    // probability < 1e-4; the coupled/independent ratio is expected to be in the hundreds.
    assert!(v_d_i > 20.0 * v_d_s, "no pathwise coupling: {v_d_s:e} vs {v_d_i:e}");
    // The extrapolated estimator itself: expected ratio about 5 (4 Var B + Var A against about
    // Var B); assert only that the independent variant is not better.
    assert!(v_rr_i > v_rr_s);
}

#[test]
fn parallel_equals_serial_and_costs_three_gradients_per_iteration() {
    let m = LinearGaussian::synthetic(500, 3, 1.0, 10.0, 9).unwrap();
    let base = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).unwrap();
    let rr = Sgrrld::new(base);
    let s = RunSettings { n_iter: 2_000, burn_in: 100, n_chains: 3, seed: 11, ..Default::default() };
    let par = Runner::new(&m, &rr).start(&[0.0; 3]).settings(s).run().unwrap();
    let ser = Runner::new(&m, &rr).start(&[0.0; 3]).settings(RunSettings { parallel: false, ..s }).run().unwrap();
    let bits = |e: &Estimate| e.stacked_draws().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&par.fine), bits(&ser.fine));
    assert_eq!(bits(&par.coarse), bits(&ser.coarse));
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| Runner::new(&m, &rr).start(&[0.0; 3]).settings(s).run().unwrap());
    assert_eq!(bits(&par.fine), bits(&one.fine));
    // Cost: per replicate, A takes 1 and B 2 minibatch gradients per iteration, plus one each at θ₀.
    assert_eq!(par.cost.datum_gradients, 3 * (3 * 2_000 + 2) * 50);
    // Weights: B's draws +γ (two per iteration), A's −γ: the total is Σγ over kept iterations.
    assert!((par.replicate(0).unwrap().total_weight() - 1_900.0 * 1e-4).abs() < 1e-12);
    assert_eq!(par.fine.n_samples(), 3 * 2 * 1_900);
    assert_eq!(par.coarse.n_samples(), 3 * 1_900);
    // The bias estimate B − A exists and is finite.
    assert!(par.bias_estimate_mean().unwrap().iter().all(|x| x.is_finite()));
}

/// SGRRHMC against the exact stationary laws of its two SGHMC chains (time steps h and h/2:
/// learning rates η and η/4, frictions α and α/2), with minibatch noise.
#[test]
fn sgrrhmc_matches_the_exact_extrapolation() {
    use common::{NoiseModel, sghmc_stationary_cov};
    let (m, lambda) = model();
    let post = m.posterior_covariance()[[0, 0]];
    for (i, (n, hl)) in [(None, 0.3), (Some(5), 0.15)].into_iter().enumerate() {
        let h = hl / lambda.sqrt();
        let (eta, alpha) = (h * h, 0.5);
        let nm = NoiseModel::new(&m, n.map(|b| (b, true)));
        let exact_a = sghmc_stationary_cov(&nm, eta, alpha)[[0, 0]];
        let exact_b = sghmc_stationary_cov(&nm, eta / 4.0, alpha / 2.0)[[0, 0]];
        let exact_rr = 2.0 * exact_b - exact_a;
        let settings = SghmcSettings::constant(eta, alpha);
        let rr_a;
        let rr_v;
        let b_v;
        let s = RunSettings {
            n_iter: 200_000,
            burn_in: 2_000,
            n_chains: R,
            seed: 420 + i as u64,
            storage: Storage::Moments,
            ..Default::default()
        };
        let x0 = m.posterior_mean().to_vec();
        let pick = |e: &Estimate| e.covariance().unwrap()[[0, 0]];
        match n {
            None => {
                let out = Runner::new(&m, &Sgrrhmc::new(Sghmc::new(settings, FullGradient::new()).unwrap()))
                    .start(&x0)
                    .settings(s)
                    .run()
                    .unwrap();
                rr_v = (0..R).map(|c| pick(&out.replicate(c).unwrap())).collect::<Vec<_>>();
                rr_a = (0..R).map(|c| pick(&out.coarse.part(c).unwrap())).collect::<Vec<_>>();
                b_v = (0..R).map(|c| pick(&out.fine.part(c).unwrap())).collect::<Vec<_>>();
            }
            Some(b) => {
                let out = Runner::new(&m, &Sgrrhmc::new(Sghmc::new(settings, Minibatch::new(b)).unwrap()))
                    .start(&x0)
                    .settings(s)
                    .run()
                    .unwrap();
                rr_v = (0..R).map(|c| pick(&out.replicate(c).unwrap())).collect::<Vec<_>>();
                rr_a = (0..R).map(|c| pick(&out.coarse.part(c).unwrap())).collect::<Vec<_>>();
                b_v = (0..R).map(|c| pick(&out.fine.part(c).unwrap())).collect::<Vec<_>>();
            }
        }
        let (mr, ser) = mean_se(&rr_v);
        let (ma, sea) = mean_se(&rr_a);
        let (mb, seb) = mean_se(&b_v);
        eprintln!(
            "SGHMC {} h√λ = {hl}: A {ma:.5e} (exact {exact_a:.5e}), B {mb:.5e} (exact {exact_b:.5e}), RR {mr:.5e} ± {ser:.1e} (exact {exact_rr:.5e}); posterior {post:.5e}; bias A {:+.2e}, RR {:+.2e}",
            if n.is_some() { "minibatch" } else { "full-gradient" },
            exact_a - post,
            exact_rr - post
        );
        assert!(((ma - exact_a) / sea).abs() < Z);
        assert!(((mb - exact_b) / seb).abs() < Z);
        assert!(((mr - exact_rr) / ser).abs() < Z);
    }
}

#[test]
fn rr_errors_name_the_replicate() {
    let m = LinearGaussian::synthetic(100, 2, 1.0, 1.0, 1).unwrap();
    let rr = Sgrrld::new(Sgld::new(SgldSettings::constant(10.0), Minibatch::new(10)).unwrap());
    let s = RunSettings { n_iter: 1_000, burn_in: 1, n_chains: 2, ..Default::default() };
    let e = Runner::new(&m, &rr).start(&[1.0, 1.0]).settings(s).run().unwrap_err();
    assert!(matches!(e, Error::Chain { chain: 0, .. }));
    assert!(matches!(e.root(), Error::NonFiniteState { .. } | Error::NonFiniteGradient { .. }));
    let e = Runner::new(&m, &rr).start(&[1.0]).settings(s).run().unwrap_err();
    assert!(matches!(e.root(), Error::DimensionMismatch { .. }));
    assert!(matches!(
        Runner::new(&m, &rr).start(&[0.0, 0.0]).settings(RunSettings { thin: 0, ..s }).run(),
        Err(Error::InvalidParameter { name: "thin", .. })
    ));
}

/// `RrOutput::convergence` is calibrated: over 400 independent runs (4 replicates × 2 000 kept
/// iterations each, exact gradients, γλ = 0.2, ESS ≈ 800) the extrapolated mean's and sd's
/// errors against their exact values (the posterior mean, which ULA keeps, and
/// `√(2σ²_{γ/2} − σ²_γ)`), divided by the reported MCSEs, have a mean square within
/// [0.64, 1.56]: the MCSEs are right to 25 % (design tolerance; the χ²₄₀₀ noise at 99.9 % is
/// ±0.23). Measured on seeds not used here: 1.02 for the mean, 1.16 ± 0.07 for the sd (ArviZ's
/// `mcse_sd` formula, which this applies to the extrapolated squared deviations, under-reports by
/// about 8 % at this ESS). And the run's `error_bound` (95 %) covers both errors in at least 366
/// of the 400 runs (P(≤ 365 | p = 0.95) < 0.001).
#[test]
fn extrapolated_convergence_reports_calibrated_monte_carlo_errors() {
    let (m, lambda) = model();
    let gamma = 0.2 / lambda;
    let exact_mean = m.posterior_mean()[0];
    let exact_sd = (2.0 * ula_var(lambda, gamma / 2.0) - ula_var(lambda, gamma)).sqrt();
    let rr = RichardsonRomberg::new(Sgld::lmc(SgldSettings::constant(gamma)).unwrap());
    let (mut zm2, mut zs2, mut covered) = (0.0, 0.0, 0);
    let runs = 400;
    for seed in 0..runs {
        let s = RunSettings { n_iter: 2_500, burn_in: 500, n_chains: 4, seed: 7_000 + seed, ..Default::default() };
        let out = Runner::new(&m, &rr).start(&[exact_mean + 2.0 * exact_sd]).settings(s).run().unwrap();
        let conv = out.convergence().unwrap();
        let (mean, sd) = (out.estimate.mean().unwrap()[0], out.estimate.variance().unwrap()[0].sqrt());
        let (mcse_m, mcse_s) = (conv.max_mcse_mean * sd, conv.max_mcse_sd * sd);
        assert!(mcse_m > 0.0 && mcse_s > 0.0);
        zm2 += ((mean - exact_mean) / mcse_m).powi(2);
        zs2 += ((sd - exact_sd) / mcse_s).powi(2);
        let err = ((mean - exact_mean).abs() / exact_sd).max((sd / exact_sd - 1.0).abs());
        covered += usize::from(err <= conv.error_bound);
    }
    let (zm2, zs2) = (zm2 / runs as f64, zs2 / runs as f64);
    eprintln!("mean z² of the extrapolated mean {zm2:.3}, of its sd {zs2:.3}; error_bound covered {covered}/{runs}");
    assert!((0.64..=1.56).contains(&zm2), "mean z² {zm2}");
    assert!((0.64..=1.56).contains(&zs2), "sd z² {zs2}");
    assert!(covered >= 366, "covered {covered}");
}

/// `RrOutput::summary_table` gives the extrapolated estimate's table (`diagnostics::summary` of
/// `RrOutput::estimate` refuses it, naming the way): its means and sds are the signed measure's,
/// its R̂/ESS/MCSE those of `RrOutput::convergence`, and its quantiles those of the
/// extrapolated law N(μ, 2σ²_{γ/2} − σ²_γ) (exact here) to within Z = 4.5 of their Monte
/// Carlo errors `√(p(1 − p)) / φ(z_p) · sd / √ESS_bulk` (the sample quantile's asymptotic sd;
/// the mean's to Z MCSEs, the sd's to Z of its MCSE).
#[test]
fn extrapolated_summary_table_matches_the_exact_extrapolated_law() {
    let (m, lambda) = model();
    let gamma = 0.2 / lambda;
    let mu = m.posterior_mean()[0];
    let exact_sd = (2.0 * ula_var(lambda, gamma / 2.0) - ula_var(lambda, gamma)).sqrt();
    let rr = RichardsonRomberg::new(Sgld::lmc(SgldSettings::constant(gamma)).unwrap());
    let s = RunSettings { n_iter: 101_000, burn_in: 1_000, n_chains: 4, seed: 8_123, ..Default::default() };
    let out = Runner::new(&m, &rr).start(&[mu + 2.0 * exact_sd]).settings(s).run().unwrap();
    match diagnostics::summary(&out.estimate) {
        Err(Error::DimensionMismatch { what, .. }) => assert!(what.contains("RrOutput::summary_table"), "{what}"),
        other => panic!("expected a dimension mismatch naming RrOutput::summary_table, got {other:?}"),
    }
    let table = out.summary_table().unwrap();
    let conv = out.convergence().unwrap();
    eprintln!("{table}\n{conv}");
    let r = &table.rows[0];
    assert!((r.mean - out.estimate.mean().unwrap()[0]).abs() < 1e-9 * exact_sd);
    assert!((r.sd - out.estimate.variance().unwrap()[0].max(0.0).sqrt()).abs() < 1e-6 * exact_sd);
    assert_eq!(conv.max_rhat, r.rhat);
    assert!(r.converged() && conv.converged);
    let q = |p: f64| mu + exact_sd * diagnostics::normal_quantile(p);
    let density = |p: f64| (-0.5 * diagnostics::normal_quantile(p).powi(2)).exp() / (2.0 * std::f64::consts::PI).sqrt();
    for (got, p) in [
        (r.q05, 0.05f64),
        (r.median, 0.5),
        (r.q95, 0.95),
        (r.interval.0, 0.055),
        (r.interval.1, 0.945),
        (r.hdi.0, 0.03),
        (r.hdi.1, 0.97),
    ] {
        let tol = Z * (p * (1.0 - p)).sqrt() / density(p) * exact_sd / r.ess_bulk.sqrt();
        assert!((got - q(p)).abs() < tol, "quantile {p}: {got} vs exact {} (tol {tol:e})", q(p));
    }
    assert!((r.mean - mu).abs() < Z * r.mcse_mean, "mean {} vs {mu}", r.mean);
    assert!((r.sd - exact_sd).abs() < Z * r.mcse_sd, "sd {} vs {exact_sd}", r.sd);
}

/// `run_rr_chains`: with every start at θ₀ its draws are `run_rr`'s bit for bit; replicate c
/// starts at `starts[c]` (its first kept draws are near it after a one-iteration burn-in); the
/// wrong number of starts is a `DimensionMismatch` naming them.
#[test]
fn replicates_start_where_they_are_told() {
    let m = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 9).unwrap();
    let mode = m.posterior_mean().to_vec();
    let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-5), Minibatch::new(50)).unwrap());
    let s = RunSettings { n_iter: 300, burn_in: 1, n_chains: 3, seed: 4, ..Default::default() };
    let a = Runner::new(&m, &rr).start(&mode).settings(s).run().unwrap();
    let b = Runner::new(&m, &rr).starts(&[mode.clone(), mode.clone(), mode.clone()]).settings(s).run().unwrap();
    for c in 0..3 {
        assert_eq!(a.fine.samples(c).unwrap().draws(), b.fine.samples(c).unwrap().draws());
        assert_eq!(a.coarse.samples(c).unwrap().draws(), b.coarse.samples(c).unwrap().draws());
    }
    let sd = m.posterior_covariance().diag().mapv(f64::sqrt);
    let starts: Vec<Vec<f64>> = (0..3)
        .map(|c| vec![mode[0] + 10.0 * (c as f64 - 1.0) * sd[0], mode[1] - 10.0 * (c as f64 - 1.0) * sd[1]])
        .collect();
    let out = Runner::new(&m, &rr).starts(&starts).settings(s).run().unwrap();
    for (c, start) in starts.iter().enumerate() {
        let first = out.coarse.samples(c).unwrap().draws().row(0).to_owned();
        for j in 0..2 {
            assert!(
                (first[j] - start[j]).abs() < 1.0 * sd[j],
                "replicate {c} coordinate {j}: {} vs start {}",
                first[j],
                start[j]
            );
        }
    }
    // Started 20 sds apart and run for 300 small steps, the replicates disagree, and say so.
    assert!(!out.convergence().unwrap().converged);
    match Runner::new(&m, &rr).starts(&starts[..2]).settings(s).run() {
        Err(Error::DimensionMismatch { what, expected: 3, got: 2 }) => assert!(what.contains("starting points")),
        other => panic!("expected a dimension mismatch, got {:?}", other.map(|_| ())),
    }
}

/// `discretisation_bias` states the run's accuracy with its step bias: ULA at γλ = 0.2 on a
/// Gaussian keeps the mean and widens the sd by `1/√(1 − γλ/2) − 1` = 5.4 % (exact). Over
/// 4 × 50 000 iterations the run's Monte Carlo bound alone (`convergence.error_bound`) is far below
/// that error — the chains mixed and are precisely wrong — while `error_bound`, which adds the
/// companion's first-order bias estimate (`2(sd_h − sd_{h/2})` = 5.6 % here, exact), covers it.
#[test]
fn bias_report_bound_covers_the_step_bias_that_the_monte_carlo_bound_misses() {
    let (m, lambda) = model();
    let gamma = 0.2 / lambda;
    let mu = m.posterior_mean()[0];
    let sd = m.posterior_covariance()[[0, 0]].sqrt();
    let s = RunSettings { n_iter: 51_000, burn_in: 1_000, n_chains: 4, seed: 6_001, ..Default::default() };
    let rep = discretisation_bias(&m, &Sgld::lmc(SgldSettings::constant(gamma)).unwrap(), &[mu], &s).unwrap();
    let err = ((rep.mean[0] - mu).abs() / sd).max((rep.sd[0] / sd - 1.0).abs());
    eprintln!("{rep}\nerror {err:.4} (exact sd error {:.4})", (1.0 - 0.1f64).sqrt().recip() - 1.0);
    assert!(rep.convergence.converged);
    assert!(
        rep.convergence.error_bound < 0.5 * err,
        "Monte Carlo bound {} vs error {err}",
        rep.convergence.error_bound
    );
    assert!(err <= rep.error_bound, "error {err} above the bound {}", rep.error_bound);
    assert!(rep.error_bound < 3.0 * err, "bound {} vacuous against error {err}", rep.error_bound);
}
