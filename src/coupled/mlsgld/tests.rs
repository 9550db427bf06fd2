use crate::coupled::mlsgld::allocate::{allocate, decay_rate, fine_fraction, moment_bias_divisor};
use crate::coupled::mlsgld::coupling::MlCoupling;
use crate::coupled::mlsgld::level::Work;
use crate::coupled::mlsgld::sampler::MlSgld;
use crate::coupled::mlsgld::settings::MlSgldSettings;
use crate::gradient::Minibatch;
use crate::models::LinearGaussian;

/// Giles' allocation `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉` by hand; its variance
/// `Σ V_l/N_l` is within the half of ε² it is given, and among allocations with that variance
/// it costs least (perturbing it along the constraint costs more); it only raises `want`.
#[test]
fn giles_allocation_meets_its_variance_at_least_cost() {
    let (v, c, eps) = ([4.0, 1.0, 0.25], [1.0, 4.0, 16.0], 0.05);
    let mut want = [0.0; 3];
    allocate(&v, &c, eps, &mut want);
    let sum: f64 = v.iter().zip(&c).map(|(v, c)| (v * c).sqrt()).sum();
    assert_eq!(sum, 6.0);
    for l in 0..3 {
        assert_eq!(want[l], (2.0 / (eps * eps) * (v[l] / c[l]).sqrt() * sum).ceil());
    }
    assert_eq!(want, [9_600.0, 2_400.0, 600.0]);
    let variance = |n: &[f64]| v.iter().zip(n).map(|(v, n)| v / n).sum::<f64>();
    let cost = |n: &[f64]| c.iter().zip(n).map(|(c, n)| c * n).sum::<f64>();
    assert!(variance(&want) <= eps * eps / 2.0 + 1e-15);
    // Move samples between levels 0 and 1 keeping the variance: the cost rises.
    for t in [-0.2, 0.2] {
        let n0 = want[0] * (1.0 + t);
        let n1 = v[1] / (variance(&want) - v[0] / n0 - v[2] / want[2]);
        assert!(cost(&[n0, n1, want[2]]) > cost(&want), "t = {t}");
    }
    let mut higher = [20_000.0, 0.0, 0.0];
    allocate(&v, &c, eps, &mut higher);
    assert_eq!(higher, [20_000.0, 2_400.0, 600.0]);
}

/// The decay rate of an exact geometric sequence, the defaults with too few points, and the
/// bias divisor's clamp of α to [0.5, 1] (SGLD's weak order).
#[test]
fn decay_rates_and_bias_divisors_by_hand() {
    let y: Vec<f64> = (0..5).map(|l| 3.0 * 2f64.powf(-0.8 * l as f64)).collect();
    assert!((decay_rate(&y) - 0.8).abs() < 1e-12);
    assert_eq!(decay_rate(&[1.0]), 0.5);
    assert_eq!(decay_rate(&[1.0, 0.0]), 0.5);
    // Level 0 is left out of the fit.
    let fast: Vec<f64> = (0..5).map(|l| 2f64.powf(-3.0 * l as f64)).collect();
    assert!((moment_bias_divisor(&fast) - 1.0).abs() < 1e-12, "alpha capped at 1: 2 - 1");
    let slow: Vec<f64> = (0..5).map(|l| 2f64.powf(-0.1 * l as f64)).collect();
    assert!((moment_bias_divisor(&slow) - (2f64.sqrt() - 1.0)).abs() < 1e-12, "alpha held at 0.5");
    let mid: Vec<f64> = [100.0, 1.0, 0.5f64.powf(0.75), 0.5f64.powf(1.5)].to_vec();
    assert!((moment_bias_divisor(&mid) - (2f64.powf(0.75) - 1.0)).abs() < 1e-12);
}

/// The fine path's share of a level's steps: all of them at level 0; `(1 + l)/(1 + 2l)`
/// with two coarse paths, `(1 + l)/(1 + 3l/2)` with one subsampled.
#[test]
fn fine_fractions_by_hand() {
    for coupling in [MlCoupling::Antithetic, MlCoupling::Subsampling] {
        assert_eq!(fine_fraction(0, coupling), 1.0);
    }
    assert!((fine_fraction(1, MlCoupling::Antithetic) - 2.0 / 3.0).abs() < 1e-15);
    assert!((fine_fraction(3, MlCoupling::Antithetic) - 4.0 / 7.0).abs() < 1e-15);
    assert!((fine_fraction(2, MlCoupling::Subsampling) - 0.75).abs() < 1e-15);
}

/// A base level's fine-only sample draws the same random numbers as the coupled sample of
/// the same index, so its fine path (value and end point) is bit-identical, at the fine
/// path's share of the cost.
#[test]
fn a_fine_only_sample_is_the_coupled_samples_fine_path() {
    let m = LinearGaussian::synthetic(100, 2, 4.0, 10.0, 23).unwrap();
    let g = |t: &[f64]| t[0] + t[1] * t[1];
    for coupling in [MlCoupling::Antithetic, MlCoupling::Subsampling] {
        let settings = MlSgldSettings { coupling, keep_points: true, ..Default::default() };
        let ml = MlSgld::sgld(settings, 0.01, Minibatch::new(10), &[0.0, 0.0]).unwrap();
        for level in 1..4 {
            for i in 0..3 {
                let full = ml.sample_with(&mut Work::new(&ml.base, 2), &m, &g, level, i, false).unwrap();
                let fine = ml.sample_with(&mut Work::new(&ml.base, 2), &m, &g, level, i, true).unwrap();
                assert_eq!(full.fine.to_bits(), fine.fine.to_bits());
                assert_eq!(fine.delta.to_bits(), fine.fine.to_bits());
                assert_eq!(fine.points.len(), 1);
                assert_eq!(full.points[0], fine.points[0]);
                let ratio = fine.cost.datum_gradients as f64 / full.cost.datum_gradients as f64;
                assert!((ratio - fine_fraction(level, coupling)).abs() < 1e-12, "{coupling:?} {level}: {ratio}");
            }
        }
    }
}
