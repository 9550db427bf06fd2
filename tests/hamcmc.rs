//! HAMCMC; pSGLD; constant-metric preconditioned SGLD (the L-BFGS recursion's own tests are unit tests of `numeric::lbfgs` and `samplers::hamcmc`).

use crate::common;

use common::*;
use ndarray::Array2;
use rand::SeedableRng;
use sgmcmc::*;

const Z: f64 = 4.5;

/// With full gradients and a small step, HAMCMC recovers a strongly correlated Gaussian. The
/// bias of a well-preconditioned Langevin step is about ε/2 relative (here 0.1%), far below the
/// test's standard errors (checked).
#[test]
fn hamcmc_recovers_a_correlated_gaussian() {
    let m = correlated_model(50, 0.95, 1.0, 10.0, 5);
    let p = m.posterior_precision();
    let ev = crate::support::symmetric_eigenvalues("P", p).unwrap();
    eprintln!("posterior precision eigenvalues {ev} (condition {:.0})", ev[1] / ev[0]);
    let settings = HamcmcSettings {
        step_size: StepSize::Constant(2e-3),
        memory: 3,
        trust_region: 0.5,
        initial_scale: 1e-3,
        warmup_step_size: 1e-3,
    };
    let h = Hamcmc::new(settings, FullGradient::new()).unwrap();
    let s = RunSettings { n_iter: 150_000, burn_in: 15_000, thin: 10, n_chains: 40, seed: 501, ..Default::default() };
    let out = Runner::new(&m, &h).start(m.posterior_mean().as_slice().unwrap()).settings(s).run().unwrap();
    let rows = z_scores(&out.estimate, m.posterior_mean(), m.posterior_covariance());
    assert_z("HAMCMC (full gradient) vs posterior", &rows, Z);
    let post = m.posterior_covariance();
    assert!(rows[2].3 < 0.05 * post[[0, 0]], "test too weak");
    assert!(0.001 * post[[0, 0]] < 0.5 * rows[2].3);
    assert_eq!(out.chains[0].sampler.n_skipped_pairs(), 0);
}

#[test]
fn hamcmc_with_minibatches_runs_and_counts() {
    let m = correlated_model(1000, 0.9, 1.0, 10.0, 7);
    let settings = HamcmcSettings {
        step_size: StepSize::Polynomial { gamma1: 2e-3, alpha: 0.51 },
        memory: 2,
        trust_region: 0.01,
        initial_scale: 1e-4,
        warmup_step_size: 1e-5,
    };
    let h = Hamcmc::new(settings, Minibatch::new(10)).unwrap();
    let s = RunSettings { n_iter: 5_000, burn_in: 500, n_chains: 2, seed: 502, ..Default::default() };
    let out = Runner::new(&m, &h).start(&[0.0, 0.0]).settings(s).run().unwrap();
    assert!(out.estimate.is_finite());
    // Two minibatch gradients per iteration, plus 2M warm-up, 2(M − 1) pair and 1 initial ones.
    let per_chain = (2 * 5_000 + 4 + 2 + 1) * 10;
    assert_eq!(out.cost.datum_gradients, 2 * per_chain);
    // Weights follow ε_t, constant within blocks of M = 2.
    let w = out.estimate.samples(0).unwrap().weights();
    assert_eq!(w[0], w[1]);
    assert!(w[1] > w[2]);
    eprintln!("skipped pairs: {}", out.chains[0].sampler.n_skipped_pairs());
    let bad = HamcmcSettings { memory: 1, ..HamcmcSettings::default() };
    assert!(matches!(Hamcmc::new(bad, Minibatch::new(10)), Err(Error::InvalidParameter { name: "memory", .. })));
    let mut hh = Hamcmc::new(HamcmcSettings::default(), Minibatch::new(10)).unwrap();
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(0);
    assert!(matches!(hh.init_history(&m, &[&[0.0, 0.0]], &mut rng), Err(Error::DimensionMismatch { .. })));
    assert_eq!(hh.step(&m, &mut rng), Err(Error::NotInitialised));
}

/// With G = Σ_post (so GP = I) and exact gradients, the stationary covariance is exactly
/// Σ_post / (1 − γ/2).
#[test]
fn preconditioned_sgld_matches_its_exact_law() {
    let m = correlated_model(200, 0.95, 1.0, 10.0, 8);
    let gamma = 0.2;
    let s =
        PreconditionedSgld::new(SgldSettings::constant(gamma), m.posterior_covariance(), FullGradient::new()).unwrap();
    let settings = RunSettings { n_iter: 20_000, burn_in: 500, n_chains: 40, seed: 503, ..Default::default() };
    let out = Runner::new(&m, &s).start(m.posterior_mean().as_slice().unwrap()).settings(settings).run().unwrap();
    let exact = m.posterior_covariance() / (1.0 - gamma / 2.0);
    assert_z("preconditioned SGLD vs Σ/(1 − γ/2)", &z_scores(&out.estimate, m.posterior_mean(), &exact), Z);
    let not_pd = Array2::from_shape_vec((2, 2), vec![1.0, 2.0, 2.0, 1.0]).unwrap();
    assert!(matches!(
        PreconditionedSgld::new(SgldSettings::constant(0.1), &not_pd, FullGradient::new()),
        Err(Error::LinearAlgebra { .. })
    ));
}

/// pSGLD drops the Γ term, so its law is biased in general; on a Gaussian its stationary law is
/// symmetric about the mean (the preconditioner depends on |∇U| only), so the mean is exact.
#[test]
fn psgld_mean_on_a_gaussian() {
    let m = correlated_model(200, 0.9, 1.0, 10.0, 9);
    let s =
        Psgld::new(PsgldSettings { step_size: StepSize::Constant(1e-3), ..Default::default() }, FullGradient::new())
            .unwrap();
    let settings = RunSettings { n_iter: 30_000, burn_in: 3_000, n_chains: 40, seed: 504, ..Default::default() };
    let out = Runner::new(&m, &s).start(m.posterior_mean().as_slice().unwrap()).settings(settings).run().unwrap();
    let rows = z_scores(&out.estimate, m.posterior_mean(), m.posterior_covariance());
    for r in &rows[..2] {
        eprintln!("pSGLD {}: {:.5} vs {:.5} (z {:+.2})", r.0, r.1, r.2, r.4);
        assert!(r.4.abs() < Z);
    }
    for r in &rows[2..] {
        eprintln!("pSGLD {}: {:.4e} vs posterior {:.4e} (relative {:+.3})", r.0, r.1, r.2, (r.1 - r.2) / r.2);
    }
    assert!(matches!(
        Psgld::new(PsgldSettings { decay: 1.0, ..Default::default() }, Minibatch::new(1)),
        Err(Error::InvalidParameter { name: "decay", .. })
    ));
}
