//! Diagnostics against ArviZ, KSD against a direct formula and on known cases, export
//! round-trips, and the progress observer.

use ndarray::{Array1, Array2, Array3};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use sgmcmc::diagnostics::{self, KsdSettings};
use sgmcmc::observe::Progress;
use sgmcmc::*;
use std::sync::Mutex;

/// The fixture draws (4 chains × 301 draws × 4 quantities) and ArviZ's values, produced by
/// `tests/fixtures/arviz_reference.py` (ArviZ 0.23.4).
fn fixture() -> (Array3<f64>, Vec<Vec<f64>>) {
    let text = include_str!("fixtures/arviz_draws.csv");
    let mut x = Array3::zeros((4, 301, 4));
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (c, t): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        for j in 0..4 {
            x[[c, t, j]] = f[2 + j].parse().unwrap();
        }
    }
    let reference = include_str!("fixtures/arviz_reference.csv")
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(1).map(|v| v.parse().unwrap()).collect())
        .collect();
    (x, reference)
}

#[test]
fn ess_rhat_mcse_match_arviz() {
    let (x, reference) = fixture();
    for (j, expected) in reference.iter().enumerate() {
        let a: Array2<f64> = x.index_axis(ndarray::Axis(2), j).to_owned();
        let ours = [
            diagnostics::ess_bulk(a.view()).unwrap(),
            diagnostics::ess_tail(a.view()).unwrap(),
            diagnostics::ess_mean(a.view()).unwrap(),
            diagnostics::rhat(a.view()).unwrap(),
            diagnostics::mcse_mean(a.view()).unwrap(),
        ];
        for (k, (o, r)) in ours.iter().zip(expected).enumerate() {
            let rel = (o - r).abs() / r.abs();
            eprintln!("x{j} stat {k}: ours {o:.10} ArviZ {r:.10} (rel {rel:.1e})");
            assert!(rel < 1e-12, "x{j} statistic {k}: {o} vs ArviZ {r}");
        }
    }
}

/// ArviZ 1.x's `summary(dt, round_to="none")` on the same fixture
/// (`tests/fixtures/arviz1_summary.csv`, written by `arviz1_reference.py` with arviz_stats 1.3.3):
/// with [`diagnostics::Convention::ArviZ1`] every column to 1e-12 relative — the 89 %
/// equal-tailed interval, the tail ESS at 11 %/89 % (which differs from 0.23's by up to 66 %
/// here) and R̂ folded about the split draws' median — and the table prints 1.x's column names.
#[test]
fn summary_matches_arviz_1x_in_its_convention() {
    use diagnostics::Convention;
    let (x, _) = fixture();
    let reference: Vec<Vec<f64>> = include_str!("fixtures/arviz1_summary.csv")
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(1).map(|v| v.parse().unwrap()).collect())
        .collect();
    let mut rows = Vec::new();
    for (j, r) in reference.iter().enumerate() {
        let a: Array2<f64> = x.index_axis(ndarray::Axis(2), j).to_owned();
        let s = diagnostics::summary_of_draws_with(a.view(), Convention::ArviZ1).unwrap();
        // mean, sd, eti89_lb, eti89_ub, ess_bulk, ess_tail, r_hat, mcse_mean, mcse_sd
        let ours = [s.mean, s.sd, s.interval.0, s.interval.1, s.ess_bulk, s.ess_tail, s.rhat, s.mcse_mean, s.mcse_sd];
        for (k, (o, t)) in ours.iter().zip(r).enumerate() {
            let rel = (o - t).abs() / t.abs().max(1e-300);
            assert!(rel < 1e-12 || o == t, "x{j} column {k}: {o} vs ArviZ 1.x {t} (rel {rel:.1e})");
        }
        // Weighted with equal weights: the same row.
        let w = Array2::from_elem(a.dim(), 0.5);
        assert_eq!(diagnostics::summary_of_weighted_draws_with(a.view(), w.view(), Convention::ArviZ1).unwrap(), s);
        rows.push(s);
    }
    let text = diagnostics::SummaryTable::new((0..4).map(|j| format!("x{j}")).collect(), rows).unwrap().to_string();
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[2..4], ["eti89_lb", "eti89_ub"], "{text}");
}

/// `az.summary(idata, round_to="none")` and numpy's quantiles on the fixture
/// (`tests/fixtures/arviz_summary.csv`, same script, ArviZ 0.23.4): every column to 1e-12
/// relative, R̂ included (the default convention folds it about the unsplit draws' median, as
/// 0.23's `az.summary` does).
#[test]
fn summary_table_matches_arviz() {
    let (x, _) = fixture();
    let reference: Vec<Vec<f64>> = include_str!("fixtures/arviz_summary.csv")
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(1).map(|v| v.parse().unwrap()).collect())
        .collect();
    let mut rows = Vec::new();
    for (j, r) in reference.iter().enumerate() {
        let a: Array2<f64> = x.index_axis(ndarray::Axis(2), j).to_owned();
        let s = diagnostics::summary_of_draws(a.view()).unwrap();
        // mean, sd, hdi_3%, hdi_97%, mcse_mean, mcse_sd, ess_bulk, ess_tail, (r_hat), q5, q50, q95
        let ours = [
            s.mean,
            s.sd,
            s.hdi.0,
            s.hdi.1,
            s.mcse_mean,
            s.mcse_sd,
            s.ess_bulk,
            s.ess_tail,
            s.rhat,
            s.q05,
            s.median,
            s.q95,
        ];
        let theirs = [r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]];
        for (k, (o, t)) in ours.iter().zip(&theirs).enumerate() {
            let rel = (o - t).abs() / t.abs().max(1e-300);
            eprintln!("x{j} column {k}: ours {o:.12} ArviZ {t:.12} (rel {rel:.1e})");
            assert!(rel < 1e-12 || (o == t), "x{j} column {k}: {o} vs {t}");
        }
        assert_eq!(s.interval, s.hdi);
        assert_eq!(diagnostics::hdi(a.view(), diagnostics::HDI_PROB).unwrap(), s.hdi);
        assert_eq!(diagnostics::quantile(a.view(), 0.95).unwrap(), s.q95);
        assert_eq!(diagnostics::mcse_sd(a.view()).unwrap(), s.mcse_sd);
        rows.push(s);
    }
    let table = diagnostics::SummaryTable::new(vec!["x0".into(), "x1".into(), "x2".into(), "x3".into()], rows).unwrap();
    let text = table.to_string();
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    // Four rows and a footnote: rows failing R̂ ≤ 1.01 or ESS ≥ 400 are marked `*`.
    assert_eq!(lines.len(), 6);
    assert!(lines[5].starts_with("* not converged"), "{}", lines[5]);
    assert!(lines[3].ends_with(" *"), "x2 (ESS 6, R̂ 1.87) is flagged: {}", lines[3]);
    assert!(lines[0].split_whitespace().eq([
        "mean",
        "sd",
        "hdi_3%",
        "hdi_97%",
        "q5%",
        "q50%",
        "q95%",
        "mcse_mean",
        "mcse_sd",
        "ess_bulk",
        "ess_tail",
        "r_hat"
    ]));
    // ArviZ's printed row for x2 (az.summary's default rounding): mean 2.267, sd 1.960,
    // hdi -1.211 … 5.599, ESS 6 and 41, R̂ 1.87.
    assert!(lines[3].starts_with("x2"));
    for cell in ["2.267", "1.960", "-1.211", "5.599", "6", "41", "1.87"] {
        assert!(lines[3].split_whitespace().any(|c| c == cell), "{cell} missing from {}", lines[3]);
    }
    // Columns line up, names checked, precision honoured.
    assert!(lines[..5].iter().all(|l| l.chars().count() == lines[0].chars().count()));
    assert!(matches!(table.clone().with_names(&["a"]), Err(Error::DimensionMismatch { .. })));
    assert!(format!("{table:.6}").contains("2.267465"));
    assert!(matches!(diagnostics::hdi(Array2::zeros((2, 10)).view(), 1.5), Err(Error::InvalidParameter { .. })));
    assert!(matches!(diagnostics::quantile(Array2::zeros((2, 10)).view(), -0.1), Err(Error::InvalidParameter { .. })));
}

#[test]
fn rhat_flags_chains_that_did_not_mix() {
    let (x, _) = fixture();
    let mixed = diagnostics::rhat(x.index_axis(ndarray::Axis(2), 0)).unwrap();
    let apart = diagnostics::rhat(x.index_axis(ndarray::Axis(2), 2)).unwrap();
    assert!(mixed < 1.01, "{mixed}");
    assert!(apart > 1.5, "{apart}");
    // Too few draws, non-finite values: typed errors.
    assert!(matches!(diagnostics::ess_bulk(Array2::zeros((2, 3)).view()), Err(Error::TooFewSamples { .. })));
    let mut bad = Array2::<f64>::zeros((2, 10));
    bad[[0, 0]] = f64::NAN;
    assert!(matches!(diagnostics::rhat(bad.view()), Err(Error::InvalidParameter { .. })));
}

/// The Stein kernel written out directly for one pair (a second, independent transcription).
fn stein_direct(x: &[f64], sx: &[f64], y: &[f64], sy: &[f64], c: f64, beta: f64) -> f64 {
    let d = x.len();
    let r: Vec<f64> = (0..d).map(|i| x[i] - y[i]).collect();
    let r2: f64 = r.iter().map(|v| v * v).sum();
    let q = c * c + r2;
    let k = q.powf(beta);
    let grad_x_k: Vec<f64> = r.iter().map(|ri| 2.0 * beta * q.powf(beta - 1.0) * ri).collect();
    let grad_y_k: Vec<f64> = grad_x_k.iter().map(|g| -g).collect();
    // tr ∇ₓ∇ᵧ k = Σᵢ ∂²k/∂xᵢ∂yᵢ.
    let mut trace = 0.0;
    for ri in &r {
        trace += -2.0 * beta * q.powf(beta - 1.0) - 4.0 * beta * (beta - 1.0) * q.powf(beta - 2.0) * ri * ri;
    }
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>();
    trace + dot(&grad_x_k, sy) + dot(&grad_y_k, sx) + k * dot(sx, sy)
}

/// Both of `ksd_imq`'s paths (pairs below `KSD_GRAM_MIN_DIM`, Gram tiles from it) agree with a
/// direct double loop to rounding: signed weights, two kernels, several tiles with a partial one
/// (n = 600), and draws at an offset of 2 000 with a spread of 10⁻² (a calendar-year
/// coordinate), where the Gram form without centring would lose ten of the sixteen digits of ‖x − y‖².
#[test]
fn ksd_matches_a_direct_double_loop() {
    use sgmcmc::diagnostics::KSD_GRAM_MIN_DIM;
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(5);
    for (n, d, offset, spread) in
        [(30usize, 3usize, 0.0f64, 1.0f64), (600, KSD_GRAM_MIN_DIM, 0.0, 1.0), (300, 40, 2_000.0, 1e-2)]
    {
        let x = Array2::from_shape_fn((n, d), |_| {
            offset
                + spread * {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    z
                }
        });
        let s = Array2::from_shape_fn((n, d), |_| StandardNormal.sample(&mut rng));
        let w = Array1::from_shape_fn(n, |i| if i % 5 == 0 { -0.3 } else { 1.0 + i as f64 / 10.0 });
        for (c, beta) in [(1.0, -0.5), (0.5, -0.3)] {
            let mut total = 0.0;
            for i in 0..n {
                for j in 0..n {
                    let (xi, si) = (x.row(i).to_vec(), s.row(i).to_vec());
                    let (xj, sj) = (x.row(j).to_vec(), s.row(j).to_vec());
                    total += w[i] * w[j] * stein_direct(&xi, &si, &xj, &sj, c, beta);
                }
            }
            let direct = (total / w.sum().powi(2)).max(0.0).sqrt();
            let ours = diagnostics::ksd_imq(x.view(), s.view(), Some(w.view()), KsdSettings { c, beta }).unwrap();
            eprintln!(
                "n {n}, d {d}, offset {offset}, c {c}, beta {beta}: relative difference {:.1e}",
                (ours - direct).abs() / direct
            );
            assert!((ours - direct).abs() < 1e-12 * direct.max(1.0), "d = {d}: {ours} vs {direct}");
        }
    }
}

/// Exact Gaussian samples with exact scores: KSD is small and decreases with n (about n^(−1/2)).
#[test]
fn ksd_of_exact_samples_decreases_with_n() {
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(9);
    let d = 2;
    let mut prev = f64::INFINITY;
    let mut values = Vec::new();
    for &n in &[100usize, 400, 1600] {
        let x = Array2::from_shape_fn((n, d), |_| StandardNormal.sample(&mut rng));
        let ksd = diagnostics::ksd_imq(x.view(), (-&x).view(), None, KsdSettings::default()).unwrap();
        values.push(ksd);
        assert!(ksd < prev, "KSD did not decrease: {values:?}");
        prev = ksd;
    }
    eprintln!("KSD of exact N(0, I) samples at n = 100, 400, 1600: {values:?}");
    // Quadrupling n halves the KSD in expectation; allow a factor 1.4 either side per step.
    assert!(values[0] / values[1] > 1.4 && values[1] / values[2] > 1.4);
    assert!(values[2] < 0.1);
}

/// SGLD samples at a large step are visibly worse by KSD than at a small one (full gradients,
/// exact scores at the draws).
#[test]
fn ksd_ranks_sgld_step_sizes() {
    // A posterior of unit scale (few data, unit prior): the IMQ kernel with c = 1 suits it.
    let m = LinearGaussian::synthetic(5, 2, 1.0, 1.0, 3).unwrap();
    let ksd_at = |gamma: f64| {
        let s = Sgld::lmc(SgldSettings::constant(gamma)).unwrap();
        let settings = RunSettings {
            n_iter: 40_000,
            burn_in: 2_000,
            thin: 20,
            storage: Storage::SamplesAndGradients,
            seed: 11,
            ..Default::default()
        };
        let out = Runner::new(&m, &s).start(m.posterior_mean().as_slice().unwrap()).settings(settings).run().unwrap();
        diagnostics::ksd_of(&out.estimate, KsdSettings::default()).unwrap()
    };
    let lam_max = crate::support::symmetric_eigenvalues("P", m.posterior_precision()).unwrap()[1];
    let (small, large) = (ksd_at(0.05 / lam_max), ksd_at(1.5 / lam_max));
    eprintln!("KSD: γλ = 0.05 → {small:.3e}; γλ = 1.5 → {large:.3e}");
    assert!(large > 3.0 * small, "KSD does not see the large-step bias: {small} vs {large}");
    assert!(matches!(
        diagnostics::ksd_imq(
            Array2::zeros((2, 2)).view(),
            Array2::zeros((2, 2)).view(),
            None,
            KsdSettings { c: 1.0, beta: 0.5 }
        ),
        Err(Error::InvalidParameter { name: "beta", .. })
    ));
}

#[test]
fn export_round_trips_and_summary_works() {
    let m = LogisticRegression::synthetic(500, 3, 1.0, 4).unwrap();
    let s = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(20)).unwrap();
    let settings = RunSettings {
        n_iter: 2_000,
        burn_in: 500,
        n_chains: 3,
        storage: Storage::SamplesAndGradients,
        seed: 12,
        ..Default::default()
    };
    let out = Runner::new(&m, &s).start(&[0.0; 3]).settings(settings).run().unwrap();
    let dir = std::env::temp_dir().join(format!("sgmcmc-export-{}", std::process::id()));
    let files = export::write_npy(&dir, &out.estimate).unwrap();
    assert_eq!(files.len(), 5);
    let draws = export::draws_array(&out.estimate).unwrap();
    assert_eq!(draws.dim(), (3, 1_500, 3));
    let back = export::read_npy3(dir.join("draws.npy")).unwrap();
    let bits = |a: &Array3<f64>| a.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back), bits(&draws));
    assert_eq!(
        bits(&export::read_npy3(dir.join("gradients.npy")).unwrap()),
        bits(&export::gradients_array(&out.estimate).unwrap())
    );
    let w = export::read_npy2(dir.join("weights.npy")).unwrap();
    assert_eq!(w, export::weights_array(&out.estimate).unwrap());
    let costs = export::costs_array(&out.estimate).unwrap();
    assert_eq!(costs[[0, 0]], (501 + 1) * 20 - 20 + 20);
    let h = export::read_npy2(dir.join("step_sizes.npy")).unwrap();
    assert_eq!(h, export::step_sizes_array(&out.estimate).unwrap());
    assert!(h.iter().all(|&x| x == 2e-4));
    // CSV round trip, exact.
    let csv = dir.join("trace.csv");
    export::write_csv(&csv, &out.estimate).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), "chain,draw,weight,cost,theta_0,theta_1,theta_2,grad_0,grad_1,grad_2");
    for (row, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let (c, k) = (row / 1_500, row % 1_500);
        for j in 0..3 {
            assert_eq!(f[4 + j].parse::<f64>().unwrap().to_bits(), draws[[c, k, j]].to_bits());
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // The summary table: one row per coordinate, finite.
    let table = diagnostics::summary(&out.estimate).unwrap();
    assert_eq!(table.len(), 3);
    assert!(table.iter().all(|r| r.ess_bulk > 10.0 && r.rhat.is_finite() && r.mcse_mean > 0.0));
    // Streaming mode cannot be exported.
    let moments = Runner::new(&m, &s)
        .start(&[0.0; 3])
        .settings(RunSettings { storage: Storage::Moments, ..settings })
        .run()
        .unwrap();
    assert!(matches!(export::draws_array(&moments.estimate), Err(Error::NotStored { .. })));
    assert!(matches!(diagnostics::summary(&moments.estimate), Err(Error::NotStored { .. })));
}

#[test]
fn observer_sees_progress_and_changes_nothing() {
    let m = LinearGaussian::synthetic(100, 2, 1.0, 1.0, 1).unwrap();
    let s = Sgld::new(SgldSettings::constant(1e-3), Minibatch::new(10)).unwrap();
    let settings = RunSettings { n_iter: 1_000, burn_in: 100, n_chains: 2, seed: 13, ..Default::default() };
    let seen = Mutex::new(Vec::new());
    let observer = |p: &Progress<'_>| seen.lock().unwrap().push((p.chain, p.iteration, p.cost.datum_gradients));
    let every = sgmcmc::observe::Every { every: 250, f: observer };
    let observed = Runner::new(&m, &s).start(&[0.0, 0.0]).settings(settings).observers(&[&every]).run().unwrap();
    let plain = Runner::new(&m, &s).start(&[0.0, 0.0]).settings(settings).run().unwrap();
    assert_eq!(observed.estimate.stacked_draws().unwrap(), plain.estimate.stacked_draws().unwrap());
    let mut v = seen.lock().unwrap().clone();
    v.sort();
    let expect: Vec<(usize, u64, u64)> =
        (0..2).flat_map(|c| [250u64, 500, 750, 1000].map(move |k| (c, k, (k + 1) * 10))).collect();
    assert_eq!(v, expect);
}

/// With a decreasing step schedule the draws carry unequal weights: `summary` uses them, so its
/// mean is `Estimate::mean`'s, and its MCSE describes the spread of that weighted mean over
/// independent replicates.
#[test]
fn summary_uses_the_weights_of_a_polynomial_schedule() {
    let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 7).unwrap();
    let sgld =
        Sgld::new(SgldSettings { step_size: StepSize::Polynomial { gamma1: 2e-3, alpha: 0.4 } }, Minibatch::new(50))
            .unwrap();
    let settings = |seed| RunSettings { n_iter: 4000, burn_in: 200, n_chains: 2, seed, ..RunSettings::default() };
    let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings(11)).run().unwrap();
    let mean = out.estimate.mean().unwrap();
    let table = diagnostics::summary(&out.estimate).unwrap();
    for (j, s) in table.iter().enumerate() {
        assert!(s.weighted);
        let rel = (s.mean - mean[j]).abs() / mean[j].abs();
        assert!(rel < 1e-12, "coordinate {j}: summary mean {} vs Estimate::mean {}", s.mean, mean[j]);
        // The unweighted mean is a different number here: the test is not vacuous.
        let plain =
            diagnostics::summary_of_draws(diagnostics::chains_of(&out.estimate, |t| t[j]).unwrap().view()).unwrap();
        assert!(!plain.weighted && (plain.mean - s.mean).abs() > 1e-9);
    }
    // MCSE against the replicate spread: 60 independent runs; the reported MCSE² (averaged) and
    // the variance of the weighted means agree within the sampling error of a 59-dof variance
    // estimate (relative sd √(2/59) = 0.18; a 3.5σ band is [0.45, 1.9] for the ratio, widened
    // for the MCSE estimator's own noise to [0.4, 2.2]).
    // The same for the weighted sd and its MCSE.
    let reps: Vec<[f64; 4]> = (0..60u64)
        .map(|r| {
            let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings(1000 + r)).run().unwrap();
            let s = &diagnostics::summary(&out.estimate).unwrap()[0];
            [s.mean, s.mcse_mean * s.mcse_mean, s.sd, s.mcse_sd * s.mcse_sd]
        })
        .collect();
    let n = reps.len() as f64;
    for (what, k) in [("mean", 0), ("sd", 2)] {
        let m = reps.iter().map(|r| r[k]).sum::<f64>() / n;
        let var = reps.iter().map(|r| (r[k] - m).powi(2)).sum::<f64>() / (n - 1.0);
        let mcse2 = reps.iter().map(|r| r[k + 1]).sum::<f64>() / n;
        eprintln!("{what}: replicate variance {var:.3e}, mean reported MCSE² {mcse2:.3e}, ratio {:.3}", var / mcse2);
        assert!((0.4..2.2).contains(&(var / mcse2)), "{what}: variance {var} vs MCSE² {mcse2}");
    }
    // The weighted quantiles are ordered and the weighted HDI is the shortest interval between
    // draws that holds 94 % of the weight (brute force over all pairs).
    let x = diagnostics::chains_of(&out.estimate, |t| t[0]).unwrap();
    let w = diagnostics::weights_of(&out.estimate).unwrap();
    let s = &table[0];
    assert!(s.q05 < s.median && s.median < s.q95);
    let mut pairs: Vec<(f64, f64)> = x.iter().copied().zip(w.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    let mass = |lo: f64, hi: f64| pairs.iter().filter(|p| p.0 >= lo && p.0 <= hi).map(|p| p.1).sum::<f64>();
    assert!(mass(s.hdi.0, s.hdi.1) >= diagnostics::HDI_PROB * total * (1.0 - 1e-12));
    let mut shortest = f64::INFINITY;
    let mut j = 0;
    for i in 0..pairs.len() {
        j = j.max(i);
        while j < pairs.len() && mass(pairs[i].0, pairs[j].0) < diagnostics::HDI_PROB * total {
            j += 1;
        }
        if j < pairs.len() {
            shortest = shortest.min(pairs[j].0 - pairs[i].0);
        }
    }
    assert!((s.hdi.1 - s.hdi.0 - shortest).abs() <= 1e-12 * shortest, "{:?} vs width {shortest}", s.hdi);
    // Mismatched weights and zero weights are typed errors.
    let x = Array2::<f64>::zeros((2, 10));
    assert!(matches!(
        diagnostics::summary_of_weighted_draws(x.view(), Array2::zeros((2, 9)).view()),
        Err(Error::DimensionMismatch { .. })
    ));
    assert!(matches!(
        diagnostics::summary_of_weighted_draws(x.view(), Array2::zeros((2, 10)).view()),
        Err(Error::ZeroTotalWeight)
    ));
}

/// Each draw carries the step size the sampler used there (ArviZ's `sample_stats.step_size`):
/// SGLD's schedule γ_{k+1}, MALA's adapted step, the fine chain's γ/2 in Richardson–Romberg; a
/// sampler without a step records none.
#[test]
fn draws_carry_their_step_sizes() {
    let m = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 5).unwrap();
    let settings = RunSettings { n_iter: 600, burn_in: 100, n_chains: 2, seed: 3, ..Default::default() };
    // A decreasing schedule: the recorded step of draw k is γ_{k+1}, the step that leaves it.
    let sched = StepSize::Polynomial { gamma1: 1e-3, alpha: 0.55 };
    let sgld = Sgld::new(SgldSettings { step_size: sched, ..Default::default() }, Minibatch::new(20)).unwrap();
    let out = Runner::new(&m, &sgld).start(&[0.0; 2]).settings(settings).run().unwrap();
    let s0 = out.estimate.samples(0).unwrap();
    let h = s0.step_sizes().unwrap();
    for (i, &x) in h.iter().enumerate() {
        let k = settings.burn_in + 1 + i as u64; // the 1-based iteration that produced draw i
        assert_eq!(x, sched.at(k + 1), "draw {i}");
        assert_eq!(x, s0.weights()[i], "for SGLD the weight is the step");
    }
    // MALA: its adapted step, constant after adaptation, not the weight (1).
    let mala = Mala::new(MalaSettings { adapt_steps: 50, ..Default::default() }).unwrap();
    let out = Runner::new(&m, &mala).start(&[0.0; 2]).settings(settings).run().unwrap();
    for (c, chain) in out.chains.iter().enumerate() {
        let h = out.estimate.samples(c).unwrap().step_sizes().unwrap();
        assert!(h.iter().all(|&x| x == chain.sampler.step_size()), "chain {c}");
        assert!(out.estimate.samples(c).unwrap().weights().iter().all(|&w| w == 1.0));
    }
    // Richardson–Romberg: chain A records γ, chain B γ/2.
    let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(2e-3), Minibatch::new(20)).unwrap());
    let out = Runner::new(&m, &rr).start(&[0.0; 2]).settings(settings).run().unwrap();
    assert!(out.coarse.samples(0).unwrap().step_sizes().unwrap().iter().all(|&x| x == 2e-3));
    assert!(out.fine.samples(0).unwrap().step_sizes().unwrap().iter().all(|&x| x == 1e-3));
    // Samples built by hand have none; their Zarr/npy step size is NaN.
    let hand = Samples::new(Array2::zeros((3, 2)), Array1::ones(3), None).unwrap();
    assert!(hand.step_sizes().is_none());
    let est = Estimate::from_samples(hand);
    assert!(export::step_sizes_array(&est).unwrap().iter().all(|x| x.is_nan()));
}
