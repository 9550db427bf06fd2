//! Replica exchange and contour SGLD against known mode weights (`examples/multimodal.rs` is the
//! full form with every table): 40 seeded runs from one mode, the mean over runs of each mode's
//! weight against the truth in units of its Monte Carlo standard error (sd/√40). The methods
//! must come within 3 of it on every mode; the baselines — plain SGLD, naive swaps, contour
//! SGLD's draws without their weights — must not (the test can fail).

use crate::multimodal::{NoisyMixture, forty_runs};
use sgmcmc::*;

/// Each mode's `z = (mean over runs − truth)/MCSE`, the draws weighted or not.
fn mode_z<S: Sampler>(out: &RunOutput<S>, m: &NoisyMixture, weighted: bool) -> Vec<f64> {
    let (truth, _) = m.mode_weights();
    let k = truth.len();
    let mut per_mode = vec![Vec::new(); k];
    for c in 0..out.estimate.n_parts() {
        let s = out.estimate.samples(c).unwrap();
        let mut acc = vec![0.0; k];
        for (x, &w) in s.draws().outer_iter().zip(s.weights()) {
            acc[m.mode_of(x.as_slice().unwrap())] += if weighted { w } else { 1.0 };
        }
        let total: f64 = acc.iter().sum();
        per_mode.iter_mut().zip(&acc).for_each(|(p, a)| p.push(a / total));
    }
    per_mode
        .iter()
        .zip(&truth)
        .map(|(xs, t)| {
            let r = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / r;
            let se = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r - 1.0) / r).sqrt();
            if se > 0.0 { (mean - t) / se } else { f64::INFINITY }
        })
        .collect()
}

fn max_abs(z: &[f64]) -> f64 {
    z.iter().fold(0.0f64, |a, z| a.max(z.abs()))
}

fn resgld(cold: f64, hot: f64, ladder: &[f64], correction: f64) -> ReSgld {
    let mut s = ReSgldSettings::new(cold, ladder);
    s.step_sizes[1..].iter_mut().for_each(|h| *h = hot);
    s.swap_every = 5;
    s.correction = correction;
    ReSgld::new(s, Minibatch::new(100)).unwrap()
}

/// `0.4 N(−4, 0.7²) + 0.6 N(3, 0.5²)` with minibatch-noisy energies (sd ≈ 2) and gradients:
/// reSGLD with the corrected swap recovers 0.4/0.6; the naive swap and plain SGLD do not.
#[test]
fn resgld_with_corrected_swaps_recovers_the_mode_weights_where_naive_swaps_and_sgld_fail() {
    let m = NoisyMixture::resgld_paper(3);
    let start = [-4.0];
    let out = Runner::new(&m, &resgld(0.002, 0.01, &[1.0, 10.0], 1.0))
        .start(&start)
        .settings(forty_runs(30_000, 41))
        .run()
        .unwrap();
    let z = mode_z(&out, &m, true);
    let rate = out.chains[0].sampler.swap_rates()[0];
    eprintln!("corrected: z {z:?}, swap rate {rate:.2}");
    assert!(max_abs(&z) <= 3.0, "corrected swaps: z {z:?}");
    assert!(rate > 0.05, "swaps happen ({rate})");
    let out = Runner::new(&m, &resgld(0.002, 0.01, &[1.0, 10.0], f64::INFINITY))
        .start(&start)
        .settings(forty_runs(30_000, 41))
        .run()
        .unwrap();
    let z = mode_z(&out, &m, true);
    eprintln!("naive: z {z:?}");
    assert!(max_abs(&z) > 3.0, "naive swaps not told apart: z {z:?}");
    let sgld = Sgld::new(SgldSettings::constant(0.002), Minibatch::new(100)).unwrap();
    let out = Runner::new(&m, &sgld).start(&start).settings(forty_runs(30_000, 41)).run().unwrap();
    assert!(max_abs(&mode_z(&out, &m, true)) > 3.0, "plain SGLD crossed the barrier");
}

/// Four modes in 2-D (weights 0.1–0.4): reSGLD on a ladder of three recovers every weight.
#[test]
fn resgld_recovers_four_mode_weights_in_two_dimensions() {
    let m = NoisyMixture::four_modes(3);
    let out = Runner::new(&m, &resgld(0.002, 0.01, &[1.0, 4.0, 16.0], 1.0))
        .start(&[-4.0, -4.0])
        .settings(forty_runs(30_000, 42))
        .run()
        .unwrap();
    let z = mode_z(&out, &m, true);
    eprintln!("four modes, corrected: z {z:?}, rates {:?}", out.chains[0].sampler.swap_rates());
    assert!(max_abs(&z) <= 3.0, "z {z:?}");
}

/// Contour SGLD (exact energies) on the reSGLD paper's mixture: its draws weighted by
/// `ϑ(J)^ζ` recover 0.4/0.6; unweighted they do not (they follow the flattened target). The
/// first half of each run is burn-in: while ϑ is still far from its limit the weighted draws
/// lag it (60 000 iterations with a tenth discarded gave |z| = 3.0 on this seed; 100 000 with
/// half discarded left the unweighted draws at |z| = 2.8, too few to tell them apart).
#[test]
fn contour_sgld_with_its_weights_recovers_the_mode_weights_and_without_them_does_not() {
    let m = NoisyMixture::resgld_paper(3);
    let mut s = CsgldSettings::new(0.002, 0.0, 0.5, 60);
    s.zeta = 0.75;
    s.energy_batch = m.n_data();
    s.sa_step = StepSize::Shifted { a: 10.0, b: 1_000.0, c: 0.8 };
    let cs = Csgld::new(s, Minibatch::new(100)).unwrap();
    let s = RunSettings { burn_in: 100_000, ..forty_runs(200_000, 43) };
    let out = Runner::new(&m, &cs).start(&[-4.0]).settings(s).run().unwrap();
    let (zw, zu) = (mode_z(&out, &m, true), mode_z(&out, &m, false));
    eprintln!("CSGLD weighted z {zw:?}, unweighted z {zu:?}");
    assert!(max_abs(&zw) <= 3.0, "weighted: z {zw:?}");
    assert!(max_abs(&zu) > 3.0, "unweighted draws not told apart: z {zu:?}");
}

/// The verdict on a missed mode. R̂ compares chains, so it sees only what they visit: with
/// `Sample`'s default starts (dispersed around the mode the tuner found) every chain stays in
/// that mode and the verdict is "converged" on a weight of 1 where the truth is 0.4 — the
/// limitation the `Sample::chain_starts` docs state (this test pins it: a default that learns
/// to see the other mode must change it). Chains started across the line disagree, and the
/// verdict says NOT CONVERGED.
#[test]
fn the_verdict_sees_a_missed_mode_only_when_chains_start_in_both() {
    let m = NoisyMixture::resgld_paper(3);
    let below = |t: ndarray::ArrayView1<'_, f64>| if t[0] < -0.5 { 1.0 } else { 0.0 };
    let fit = Sample::new(&m, Sgld::auto()).seed(44).run().unwrap();
    let w = fit.estimate().expectation(below).unwrap();
    eprintln!(
        "default starts: converged {}, max R̂ {:.3}, weight {w:.3}",
        fit.convergence.converged, fit.convergence.max_rhat
    );
    assert!(fit.convergence.converged && !(0.01..=0.99).contains(&w), "one mode, judged converged");
    let starts = [[-8.0], [-2.0], [2.0], [8.0]];
    let fit = Sample::new(&m, Sgld::auto()).seed(44).draws(5_000).chain_starts(&starts).run().unwrap();
    eprintln!("spread starts: converged {}, max R̂ {:.3}", fit.convergence.converged, fit.convergence.max_rhat);
    assert!(!fit.convergence.converged && fit.convergence.max_rhat > 1.5, "{}", fit.convergence);
}

/// `Sample` with a replica ladder: it tunes the τ = 1 replica as SGLD, runs the ladder, checks
/// the whole method's step bias with a companion ladder at half the step and judges the τ = 1
/// draws. Its stated bound is honest: on 3 seeds every run it calls converged is right within
/// it (the mixture's mean, 0.2, in its sd, 3.48) — where plain SGLD's default path said
/// converged on one mode (above). The bound is loose: mode switches decouple the companion from
/// the run, and the bias it then finds (the mode weights' at the tuned step, about 0.08 sd
/// here) is often above the default ±0.1 sd aim, so the target is rarely declared reached.
#[test]
fn sample_runs_a_replica_ladder_and_is_right_within_its_stated_bound() {
    let m = NoisyMixture::resgld_paper(3);
    let (truth, _) = m.mode_weights();
    let mean = truth[0] * -4.0 + truth[1] * 3.0;
    let second = truth[0] * (16.0 + 0.49) + truth[1] * (9.0 + 0.25);
    let sd = (second - mean * mean).sqrt();
    for seed in [45, 46, 50] {
        let mut s = ReSgldSettings::new(1e-3, &[1.0, 10.0]);
        s.swap_every = 5;
        let fit = Sample::new(&m, ReSgld::new(s, Minibatch::new(100)).unwrap()).seed(seed).run().unwrap();
        let got = fit.estimate().mean().unwrap()[0];
        let bound = fit.convergence.stated_bound();
        let err = (got - mean).abs() / sd;
        eprintln!("seed {seed}: converged {}, error {err:.4} sd, stated {bound:.4}", fit.convergence.converged);
        assert!(!fit.convergence.converged || err <= bound, "seed {seed}: error {err} sd beyond the stated {bound}");
    }
}

/// The ladder's adaptation evens out the swap rates of a badly spaced ladder (three
/// temperatures crowded near 1 under a hot one), keeping τ₁ = 1 and the hottest fixed.
#[test]
fn the_ladder_adapts_towards_equal_swap_rates() {
    let m = NoisyMixture::resgld_paper(3);
    let run = |adapt: u64| {
        let mut s = ReSgldSettings::new(0.002, &[1.0, 1.1, 1.2, 10.0]);
        s.swap_every = 5;
        s.adapt_ladder = adapt;
        let re = ReSgld::new(s, Minibatch::new(100)).unwrap();
        let rs = RunSettings {
            n_iter: 60_000,
            burn_in: 30_000,
            n_chains: 2,
            seed: 46,
            parallel: true,
            ..Default::default()
        };
        let out = Runner::new(&m, &re).start(&[-4.0]).settings(rs).run().unwrap();
        let c = &out.chains[0].sampler;
        (c.swap_rates(), c.temperatures().to_vec())
    };
    let spread = |r: &[f64]| r.iter().copied().fold(0.0f64, f64::max) - r.iter().copied().fold(1.0f64, f64::min);
    let (fixed, _) = run(0);
    let (adapted, temps) = run(30_000);
    eprintln!("fixed ladder rates {fixed:?}; adapted {adapted:?} at temperatures {temps:?}");
    assert_eq!((temps[0], temps[3]), (1.0, 10.0));
    assert!(temps.windows(2).all(|w| w[1] > w[0]), "{temps:?}");
    assert!(spread(&adapted) < 0.5 * spread(&fixed), "rates {adapted:?} against {fixed:?}");
}
