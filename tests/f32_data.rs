//! Data stored in f32 (`new_f32`, `to_f32`): the gradients are exactly the f64 model's on the
//! rounded data, within their stated bound of the f64 model on the original data, and a chain on
//! f32 data agrees with a chain on f64 data within Monte Carlo error.
//!
//! Statistical tolerance: |difference| ≤ 4 · √(MCSE₃₂² + MCSE₆₄²) per coordinate (two
//! independent chains; the summary's MCSE), for the mean and the sd.

use ndarray::{Array1, Array2};
use sgmcmc::prelude::*;
use sgmcmc::{Family, GlmSettings, StepSize, diagnostics};

/// f32's unit roundoff, 2⁻²⁴: a rounded entry is within `U·|x|` of the original.
const U: f64 = 1.0 / 16_777_216.0;
/// Tolerance of the chain comparison, in combined MCSEs.
const Z: f64 = 4.0;

/// A seeded design with badly scaled columns (scales 1e-3 to 1e3) and a column of ones.
fn design(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = sgmcmc::rng::stream(seed, &[0xf3]);
    let mut x =
        Array2::from_shape_fn((n, d), |_| rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng));
    for (j, mut col) in x.columns_mut().into_iter().enumerate() {
        let scale = 10f64.powi(j as i32 % 7 - 3);
        col.mapv_inplace(|v| v * scale);
    }
    x.column_mut(0).fill(1.0);
    x
}

fn round32(x: &Array2<f64>) -> Array2<f64> {
    x.mapv(|v| f64::from(v as f32))
}

/// Minibatches of several lengths (across the 16-row blocks) with repeats.
fn index_sets(n: usize) -> Vec<Vec<usize>> {
    [1usize, 15, 16, 17, 100, 1_000].iter().map(|&len| (0..len).map(|k| (k * 7_919 + 13) % n).collect()).collect()
}

/// The data parts of two models agree bit for bit on every index set.
fn same_data_terms<A: Model, B: Model>(a: &A, b: &B, theta: &[f64], label: &str) {
    let d = a.dim();
    let v: Vec<f64> = (0..d).map(|j| 0.3 - 0.1 * j as f64).collect();
    for idx in index_sets(a.n_data()) {
        let (mut ga, mut gb, mut ha, mut hb) = (vec![0.0; d], vec![0.0; d], vec![0.0; d], vec![0.0; d]);
        a.grad_data_sum(theta, &idx, &mut ga).unwrap();
        b.grad_data_sum(theta, &idx, &mut gb).unwrap();
        assert_eq!(ga, gb, "{label}: gradient, |S| = {}", idx.len());
        a.hvp_data_sum(theta, &v, &idx, &mut ha).unwrap();
        b.hvp_data_sum(theta, &v, &idx, &mut hb).unwrap();
        assert_eq!(ha, hb, "{label}: HVP, |S| = {}", idx.len());
        let (ua, ub) = (a.potential_data_sum(theta, &idx).unwrap(), b.potential_data_sum(theta, &idx).unwrap());
        assert_eq!(ua.to_bits(), ub.to_bits(), "{label}: potential, |S| = {}", idx.len());
    }
}

/// A model on f32 data computes exactly what the f64 model computes on the same (rounded)
/// values: the logistic and linear models and three GLM families, on a small data set and on
/// one above 1 MiB in f32 (the prefetching, huge-page path).
#[test]
fn f32_models_are_the_f64_models_of_the_rounded_data() {
    for n in [300usize, 150_000] {
        let d = 10;
        let x = design(n, d, 1);
        let x32 = x.mapv(|v| v as f32);
        let theta: Vec<f64> =
            (0..d).map(|j| 0.5 / 10f64.powi(j as i32 % 7 - 3) * if j % 2 == 0 { 1.0 } else { -1.0 }).collect();
        let labels = Array1::from_shape_fn(n, |i| f64::from(u8::from((i * 31) % 7 < 3)));
        let m = LogisticRegression::new(&x, &labels, 2.0).unwrap();
        let rounded = LogisticRegression::new(&round32(&x), &labels, 2.0).unwrap();
        let via_new = LogisticRegression::new_f32(&x32, &labels, 2.0).unwrap();
        same_data_terms(&m.to_f32().unwrap(), &rounded, &theta, "logistic to_f32");
        same_data_terms(&via_new, &rounded, &theta, "logistic new_f32");
        assert_eq!(via_new.features(), x32.view());
        assert_eq!(via_new.hessian(&theta).unwrap(), rounded.hessian(&theta).unwrap());

        let targets = Array1::from_shape_fn(n, |i| (i % 11) as f64 - 5.0);
        let lin = LinearGaussian::new(&x, &targets, 0.5, 3.0).unwrap();
        let lin_rounded = LinearGaussian::new(&round32(&x), &targets, 0.5, 3.0).unwrap();
        let lin32 = lin.to_f32().unwrap();
        same_data_terms(&lin32, &lin_rounded, &theta, "linear to_f32");
        same_data_terms(
            &LinearGaussian::new_f32(&x32, &targets, 0.5, 3.0).unwrap(),
            &lin_rounded,
            &theta,
            "linear new_f32",
        );
        assert_eq!(lin32.posterior_mean(), lin_rounded.posterior_mean());
        assert_eq!(lin32.posterior_covariance(), lin_rounded.posterior_covariance());

        let settings = GlmSettings { intercept: true, ..Default::default() };
        for (family, y) in [
            (Family::Logistic, labels.clone()),
            (Family::Poisson, targets.mapv(|t| (t + 5.0).floor())),
            (Family::Gaussian, targets.clone()),
        ] {
            let glm = Glm::new(family, &x, &y, &settings).unwrap();
            let glm_rounded = Glm::new(family, &round32(&x), &y, &settings).unwrap();
            let glm_new32 = Glm::new_f32(family, &x32, &y, &settings).unwrap();
            let mut t = vec![0.1];
            t.extend(theta.iter().map(|v| v * 0.1));
            if family.has_aux() {
                t.push(1.3);
            }
            // to_f32 keeps the priors scaled to the f64 data: only the data terms are compared.
            same_data_terms(&glm.to_f32().unwrap(), &glm_rounded, &t, "GLM to_f32");
            same_data_terms(&glm_new32, &glm_rounded, &t, "GLM new_f32");
            let (mut gp, mut gq) = (vec![0.0; t.len()], vec![0.0; t.len()]);
            glm_new32.grad_prior(&t, &mut gp).unwrap();
            glm_rounded.grad_prior(&t, &mut gq).unwrap();
            assert_eq!(gp, gq, "{family:?}: new_f32's priors are scaled to the f32 values");
        }
    }
}

/// The f32 model's gradient differs from the f64 model's on the original data by at most its
/// first-order bound: with `aᵢ = Σₖ |xᵢₖ θₖ|` (so `|Δzᵢ| ≤ U aᵢ`) and the residual's slope at
/// most `s` (1/4 for the logistic, 1/σ² for the linear model),
/// `|Δgⱼ| ≤ U Σᵢ |xᵢⱼ| (|rᵢ| + s aᵢ)`, plus f64 rounding of the sums.
#[test]
fn f32_gradient_error_is_within_its_bound() {
    let (n, d) = (20_000, 8);
    let x = design(n, d, 2);
    let theta: Vec<f64> =
        (0..d).map(|j| 0.8 / 10f64.powi(j as i32 % 7 - 3) * if j % 3 == 0 { -1.0 } else { 1.0 }).collect();
    let labels = Array1::from_shape_fn(n, |i| f64::from(u8::from((i * 17) % 5 < 2)));
    let targets = Array1::from_shape_fn(n, |i| (i % 13) as f64 * 0.7 - 4.0);
    let all: Vec<usize> = (0..n).collect();
    let lg = LogisticRegression::new(&x, &labels, 1.0).unwrap();
    let lin = LinearGaussian::new(&x, &targets, 0.5, 1.0).unwrap();
    let z = |i: usize| x.row(i).iter().zip(&theta).map(|(a, b)| a * b).sum::<f64>();
    let a = |i: usize| x.row(i).iter().zip(&theta).map(|(a, b)| (a * b).abs()).sum::<f64>();
    let (lg32, lin32) = (lg.to_f32().unwrap(), lin.to_f32().unwrap());
    let cases: [Case; 2] = [
        ("logistic", &|i| 1.0 / (1.0 + (-z(i)).exp()) - labels[i], 0.25, &|idx| {
            [grad(&lg, &theta, idx), grad(&lg32, &theta, idx)]
        }),
        ("linear", &|i| (z(i) - targets[i]) / 0.5, 1.0 / 0.5, &|idx| {
            [grad(&lin, &theta, idx), grad(&lin32, &theta, idx)]
        }),
    ];
    for (label, r, slope, grads) in cases {
        // One datum at a time (no cancellation between data: the bound is nearly attained).
        let mut worst_row = 0.0f64;
        for i in (0..n).step_by(97) {
            let [g64, g32] = grads(&[i]);
            for j in 0..d {
                let ri = r(i);
                let allowed =
                    U * x[[i, j]].abs() * (ri.abs() + slope * a(i)) * (1.0 + 1e-6) + 1e-15 * (ri * x[[i, j]]).abs();
                let err = (g32[j] - g64[j]).abs();
                worst_row = worst_row.max(err / allowed);
                assert!(err <= allowed, "{label} datum {i} coordinate {j}: error {err:e} above its bound {allowed:e}");
            }
        }
        eprintln!("{label}: largest error / bound on one datum {worst_row:.3}");
        let [g64, g32] = grads(&all);
        let mut worst = 0.0f64;
        for j in 0..d {
            let (mut bound, mut size) = (0.0, 0.0);
            for i in 0..n {
                let (xij, ri) = (x[[i, j]].abs(), r(i));
                bound += U * xij * (ri.abs() + slope * a(i));
                size += (ri * xij).abs();
            }
            let err = (g32[j] - g64[j]).abs();
            let allowed = bound * (1.0 + 1e-6) + 1e-12 * size;
            worst = worst.max(err / allowed);
            assert!(err <= allowed, "{label} coordinate {j}: error {err:e} above its bound {allowed:e}");
        }
        eprintln!("{label}: largest error / bound on all {n} data {worst:.4}");
    }
}

/// A model's name, its residual rᵢ, the residual's largest slope, and its f64 and f32 gradients.
type Case<'a> = (&'a str, &'a dyn Fn(usize) -> f64, f64, &'a dyn Fn(&[usize]) -> [Vec<f64>; 2]);

fn grad<M: Model>(m: &M, theta: &[f64], idx: &[usize]) -> Vec<f64> {
    let mut g = vec![0.0; m.dim()];
    m.grad_data_sum(theta, idx, &mut g).unwrap();
    g
}

/// SGLD on f32 data and on the f64 data (independent seeds) agree in every coordinate's mean
/// and sd within Monte Carlo error: a logistic regression with badly scaled covariates.
#[test]
fn f32_chain_agrees_with_f64_chain() {
    let (n, d) = (10_000, 4);
    // Unit-scale covariates here (the chain's one step must suit every coordinate); the
    // badly scaled design is the bound test's.
    let mut x = design(n, d, 3);
    for (j, mut col) in x.columns_mut().into_iter().enumerate().skip(1) {
        col.mapv_inplace(|v| v / 10f64.powi(j as i32 % 7 - 3));
    }
    let truth = ndarray::arr1(&[0.5, 1.0, -0.7, 0.3]);
    let labels = Array1::from_shape_fn(n, |i| {
        let p = 1.0 / (1.0 + (-x.row(i).dot(&truth)).exp());
        f64::from(u8::from(((i as f64 * 0.618_033_988_75) % 1.0) < p))
    });
    let m64 = LogisticRegression::new(&x, &labels, 10.0).unwrap();
    let m32 = m64.to_f32().unwrap();
    let map = m64.map().unwrap();
    let h = m64.hessian(map.as_slice().unwrap()).unwrap();
    let largest = (0..d).map(|j| h[[j, j]]).fold(0.0, f64::max);
    let sampler =
        Sgld::new(SgldSettings { step_size: StepSize::Constant(0.05 / largest) }, Minibatch::new(100)).unwrap();
    let settings = |seed| RunSettings { n_iter: 40_000, burn_in: 4_000, n_chains: 2, seed, ..Default::default() };
    let out64 = Runner::new(&m64, &sampler).start(map.as_slice().unwrap()).settings(settings(11)).run().unwrap();
    let out32 = Runner::new(&m32, &sampler).start(map.as_slice().unwrap()).settings(settings(12)).run().unwrap();
    let (s64, s32) = (diagnostics::summary(&out64.estimate).unwrap(), diagnostics::summary(&out32.estimate).unwrap());
    for (j, (a, b)) in s64.iter().zip(&s32).enumerate() {
        let zm = (b.mean - a.mean) / a.mcse_mean.hypot(b.mcse_mean);
        let zs = (b.sd - a.sd) / a.mcse_sd.hypot(b.mcse_sd);
        eprintln!("θ{j}: mean {:.5} vs {:.5} (z {zm:+.2}), sd {:.5} vs {:.5} (z {zs:+.2})", b.mean, a.mean, b.sd, a.sd);
        assert!(zm.abs() <= Z && zs.abs() <= Z, "θ{j}: z {zm:.2} / {zs:.2}");
        assert!(a.rhat < 1.01 && b.rhat < 1.01, "θ{j}: chains did not mix (R-hat {} / {})", a.rhat, b.rhat);
    }
}
