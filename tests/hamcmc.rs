//! HAMCMC and its L-BFGS machinery; pSGLD; constant-metric preconditioned SGLD.

use crate::common;

use common::*;
use ndarray::{Array1, Array2};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use sgmcmc::*;
use std::sync::Mutex;

const Z: f64 = 4.5;

fn dense_h(lb: &mut Lbfgs, d: usize) -> Array2<f64> {
    let mut h = Array2::zeros((d, d));
    let mut out = vec![0.0; d];
    for j in 0..d {
        let mut e = vec![0.0; d];
        e[j] = 1.0;
        lb.apply_h(&e, &mut out).unwrap();
        for i in 0..d {
            h[[i, j]] = out[i];
        }
    }
    h
}

fn dense_s(lb: &mut Lbfgs, d: usize) -> Array2<f64> {
    let mut s = Array2::zeros((d, d));
    let mut out = vec![0.0; d];
    for j in 0..d {
        let mut e = vec![0.0; d];
        e[j] = 1.0;
        lb.apply_s(&e, &mut out).unwrap();
        for i in 0..d {
            s[[i, j]] = out[i];
        }
    }
    s
}

/// The dense BFGS recursion (eq. 6): Hᵐ = (I − ρ s yᵀ) Hᵐ⁻¹ (I − ρ y sᵀ) + ρ s sᵀ.
fn dense_bfgs(pairs: &[(Array1<f64>, Array1<f64>)], gamma: f64, d: usize) -> Array2<f64> {
    let id = Array2::<f64>::eye(d);
    let mut h = &id * gamma;
    for (s, y) in pairs {
        let rho = 1.0 / s.dot(y);
        let sy = outer(s, y) * rho;
        let ss = outer(s, s) * rho;
        let left = &id - &sy;
        h = left.dot(&h).dot(&left.t()) + ss;
    }
    h
}

fn outer(a: &Array1<f64>, b: &Array1<f64>) -> Array2<f64> {
    Array2::from_shape_fn((a.len(), b.len()), |(i, j)| a[i] * b[j])
}

fn random_pairs(d: usize, m: usize, seed: u64) -> Vec<(Array1<f64>, Array1<f64>)> {
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(seed);
    let mut n = || -> f64 { StandardNormal.sample(&mut rng) };
    // A random SPD "Hessian" A = QQᵀ + I; pairs y = A s (+ small noise), so sᵀy > 0.
    let q = Array2::from_shape_fn((d, d), |_| n());
    let a = q.dot(&q.t()) + Array2::<f64>::eye(d);
    (0..m)
        .map(|_| {
            let s = Array1::from_shape_fn(d, |_| n());
            let y = a.dot(&s) + Array1::from_shape_fn(d, |_| 0.1 * n());
            (s, y)
        })
        .collect()
}

#[test]
fn lbfgs_matches_dense_bfgs_and_its_square_root() {
    for (seed, (d, m)) in [(1u64, (5usize, 4usize)), (2, (5, 4)), (3, (8, 3)), (4, (3, 6))] {
        let pairs = random_pairs(d, m, seed);
        let gamma = 0.3;
        let mut lb = Lbfgs::new(d, m, gamma).unwrap();
        for (s, y) in &pairs {
            assert!(lb.push(s.as_slice().unwrap(), y.as_slice().unwrap()).unwrap());
        }
        let h = dense_h(&mut lb, d);
        let reference = dense_bfgs(&pairs, gamma, d);
        let scale = reference.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        let err_h = (&h - &reference).iter().fold(0.0f64, |a, x| a.max(x.abs())) / scale;
        let asym = (&h - &h.t()).iter().fold(0.0f64, |a, x| a.max(x.abs())) / scale;
        let eig = linalg::symmetric_eigenvalues("H", &((&h + &h.t()) * 0.5)).unwrap();
        let s = dense_s(&mut lb, d);
        let err_s = (s.dot(&s.t()) - &h).iter().fold(0.0f64, |a, x| a.max(x.abs())) / scale;
        eprintln!(
            "d={d} M={m}: |H - BFGS| {err_h:.1e}, asym {asym:.1e}, min eig {:.3e}, |SSᵀ - H| {err_s:.1e}",
            eig[0]
        );
        assert!(err_h < 1e-12 && asym < 1e-12 && eig[0] > 0.0 && err_s < 1e-12);
    }
}

#[test]
fn lbfgs_drops_oldest_and_skips_non_positive_pairs() {
    let d = 4;
    let pairs = random_pairs(d, 5, 9);
    let mut lb = Lbfgs::new(d, 3, 0.5).unwrap();
    for (s, y) in &pairs {
        lb.push(s.as_slice().unwrap(), y.as_slice().unwrap()).unwrap();
    }
    // Capacity 3: the last three pairs only.
    let h = dense_h(&mut lb, d);
    let reference = dense_bfgs(&pairs[2..], 0.5, d);
    assert!((&h - &reference).iter().all(|x| x.abs() < 1e-10));
    // A pair with sᵀy ≤ 0 is skipped and changes nothing.
    let s = vec![1.0, 0.0, 0.0, 0.0];
    let y = vec![-1.0, 0.5, 0.0, 0.0];
    assert!(!lb.push(&s, &y).unwrap());
    assert!(!lb.push(&s, &[0.0, 1.0, 0.0, 0.0]).unwrap());
    assert_eq!(lb.n_skipped(), 2);
    assert_eq!(lb.len(), 3);
    let h2 = dense_h(&mut lb, d);
    assert_eq!(h, h2);
    assert!(matches!(lb.push(&[1.0], &[1.0]), Err(Error::DimensionMismatch { .. })));
    assert!(Lbfgs::new(3, 2, 0.0).is_err());
    // A memory that cannot be addressed is an error, not an abort.
    assert!(matches!(Lbfgs::new(usize::MAX / 2, 2, 1.0), Err(Error::OutOfMemory { limit: None, .. })));
}

/// A model that records every point its gradient is evaluated at (exact linear-Gaussian model).
struct Recording {
    inner: LinearGaussian,
    points: Mutex<Vec<Vec<f64>>>,
}

impl Model for Recording {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn n_data(&self) -> usize {
        self.inner.n_data()
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.inner.grad_prior(theta, out)
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.points.lock().unwrap().push(theta.to_vec());
        self.inner.grad_data_sum(theta, idx, out)
    }
}

fn full_grad(m: &LinearGaussian, theta: &[f64]) -> Vec<f64> {
    let all: Vec<usize> = (0..m.n_data()).collect();
    let (mut g, mut p) = (vec![0.0; m.dim()], vec![0.0; m.dim()]);
    m.grad_data_sum(theta, &all, &mut g).unwrap();
    m.grad_prior(theta, &mut p).unwrap();
    g.iter().zip(&p).map(|(a, b)| a + b).collect()
}

/// Replays every HAMCMC step independently: θ_t must equal θ_{t−M} − εH∇U(θ_{t−M}) + √(2ε) S z
/// with H, S built from the pairs τ = t−M+1 … t−1 only. Stepping from θ_{t−1}, or using the pair
/// τ = t−M (which contains θ_{t−M}), gives a different point, and the test checks that too.
#[test]
fn hamcmc_history_indexing_is_algorithm_1() {
    let inner = correlated_model(50, 0.9, 1.0, 10.0, 3);
    let (d, m_mem, eps, lambda, gamma) = (2usize, 3usize, 2e-3, 0.5, 1e-2);
    let model = Recording { inner: inner.clone(), points: Mutex::new(Vec::new()) };
    let settings = HamcmcSettings {
        step_size: StepSize::Constant(eps),
        memory: m_mem,
        trust_region: lambda,
        initial_scale: gamma,
        warmup_step_size: 1e-3,
    };
    let mut sampler = Hamcmc::new(settings, FullGradient::new()).unwrap();
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(17);
    // 2M + 1 starting samples of our own.
    let mut theta: Vec<Vec<f64>> = (0..=2 * m_mem)
        .map(|_| (0..d).map(|j| inner.posterior_mean()[j] + 0.05 * rng.random::<f64>()).collect())
        .collect();
    let refs: Vec<&[f64]> = theta.iter().map(Vec::as_slice).collect();
    sampler.init_history(&model, &refs, &mut rng).unwrap();
    let pair = |theta: &[Vec<f64>], tau: usize| -> (Vec<f64>, Vec<f64>) {
        let s: Vec<f64> = theta[tau].iter().zip(&theta[tau - m_mem]).map(|(a, b)| a - b).collect();
        let (g1, g0) = (full_grad(&inner, &theta[tau]), full_grad(&inner, &theta[tau - m_mem]));
        let y = g1.iter().zip(&g0).zip(&s).map(|((a, b), s)| a - b + lambda * s).collect();
        (s, y)
    };
    let predict = |theta: &[Vec<f64>], from: usize, taus: std::ops::RangeInclusive<usize>, z: &[f64]| -> Vec<f64> {
        let mut lb = Lbfgs::new(d, m_mem, gamma).unwrap();
        for tau in taus {
            let (s, y) = pair(theta, tau);
            lb.push(&s, &y).unwrap();
        }
        let g = full_grad(&inner, &theta[from]);
        let (mut hg, mut sz) = (vec![0.0; d], vec![0.0; d]);
        lb.apply_h(&g, &mut hg).unwrap();
        lb.apply_s(z, &mut sz).unwrap();
        (0..d).map(|j| theta[from][j] - eps * hg[j] + (2.0 * eps).sqrt() * sz[j]).collect()
    };
    let mut max_wrong = f64::INFINITY;
    for t in (2 * m_mem + 1)..(2 * m_mem + 40) {
        // Replay the step's randomness: FullGradient draws nothing, then d standard normals.
        let mut replay = rng.clone();
        let z: Vec<f64> = (0..d).map(|_| StandardNormal.sample(&mut replay)).collect();
        model.points.lock().unwrap().clear();
        sampler.step(&model, &mut rng).unwrap();
        let got = sampler.position().to_vec();
        // Gradients were evaluated at θ_{t−M} first, then at θ_t.
        let pts = model.points.lock().unwrap().clone();
        assert_eq!(pts[0], theta[t - m_mem], "step {t} did not start from θ_(t−M)");
        assert_eq!(pts[1], got);
        let expect = predict(&theta, t - m_mem, (t - m_mem + 1)..=(t - 1), &z);
        let err = got.iter().zip(&expect).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(err < 1e-12, "step {t}: {got:?} vs Algorithm 1 {expect:?}");
        // The two wrong variants land elsewhere.
        let from_last = predict(&theta, t - 1, (t - m_mem + 1)..=(t - 1), &z);
        let with_old_pair = predict(&theta, t - m_mem, (t - m_mem)..=(t - 1), &z);
        let dist = |a: &[f64]| a.iter().zip(&got).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        max_wrong = max_wrong.min(dist(&from_last)).min(dist(&with_old_pair));
        // After step t the pairs ready for step t + 1 are τ = t − M + 2 … t.
        let pairs: Vec<u64> = sampler.pair_iterations().collect();
        assert_eq!(pairs, ((t - m_mem + 2) as u64..=t as u64).collect::<Vec<_>>());
        theta.push(got);
    }
    assert!(max_wrong > 1e-8, "the naive variants are indistinguishable ({max_wrong:e})");
}

/// With full gradients and a small step, HAMCMC recovers a strongly correlated Gaussian. The
/// bias of a well-preconditioned Langevin step is about ε/2 relative (here 0.1%), far below the
/// test's standard errors (checked).
#[test]
fn hamcmc_recovers_a_correlated_gaussian() {
    let m = correlated_model(50, 0.95, 1.0, 10.0, 5);
    let p = m.posterior_precision();
    let ev = linalg::symmetric_eigenvalues("P", p).unwrap();
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
    let out = run(&m, &h, m.posterior_mean().as_slice().unwrap(), &s).unwrap();
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
    let out = run(&m, &h, &[0.0, 0.0], &s).unwrap();
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
    let out = run(&m, &s, m.posterior_mean().as_slice().unwrap(), &settings).unwrap();
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
    let out = run(&m, &s, m.posterior_mean().as_slice().unwrap(), &settings).unwrap();
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
