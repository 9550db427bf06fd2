//! The engine: coupled methods on any Langevin-driver sampler (ML-SGLD honouring the
//! estimator's subsampling and checking every path; Richardson–Romberg on pSGLD and SGHMC).

use crate::common;

use common::{NoiseModel, mean_se};
use ndarray::{Array1, Array2};
use sgmcmc::*;

/// The exact law of minibatch SGLD on the linear-Gaussian model after `steps` steps of size h
/// from θ₀: with `e = θ − μ`, `m_{k+1} = (I − hH) m_k` and
/// `P_{k+1} = (I − hH) P_k (I − hH)ᵀ + h² E[Cov(ξ | θ_k)] + 2h I`, where
/// `E[Cov(ξ | θ)] = f · meanᵢ (Dᵢ P Dᵢᵀ + Dᵢ m rᵢᵀ + rᵢ mᵀ Dᵢᵀ + rᵢ rᵢᵀ)` (exact: the noise is
/// affine in θ). Returns `E[(θ − μ)(θ − μ)ᵀ] = P`.
fn sgld_transient_second_moment(nm: &NoiseModel, theta0: &[f64], h: f64, steps: usize) -> Array2<f64> {
    let d = nm.mu.len();
    let f = Array2::<f64>::eye(d) - &nm.h * h;
    let mut m = Array1::from_iter(theta0.iter().copied()) - &nm.mu;
    let mut p = Array2::from_shape_fn((d, d), |(i, j)| m[i] * m[j]);
    for _ in 0..steps {
        let mut noise = nm.noise_cov(&p, true);
        for (di, ri) in nm.d_i.iter().zip(&nm.r_i) {
            let dm = di.dot(&m);
            for a in 0..d {
                for b in 0..d {
                    noise[[a, b]] += nm.factor / nm.d_i.len() as f64 * (dm[a] * ri[b] + ri[a] * dm[b]);
                }
            }
        }
        p = f.dot(&p).dot(&f.t()) + noise * (h * h) + Array2::<f64>::eye(d) * (2.0 * h);
        m = f.dot(&m);
    }
    p
}

/// ML-SGLD honours `Minibatch::without_replacement`: its telescoping estimate matches the exact
/// law of the finest level's SGLD path **without** replacement, and differs significantly from
/// the with-replacement one (which matches its own law).
#[test]
fn mlsgld_honours_subsampling_without_replacement() {
    let model = LinearGaussian::synthetic(100, 1, 1.0, 10.0, 17).unwrap();
    let (n, h0, horizon, big_l) = (50, 8e-3, 10, 2usize);
    let mu = model.posterior_mean()[0];
    let sd = model.posterior_covariance()[[0, 0]].sqrt();
    let theta0 = [mu + 3.0 * sd];
    let g = move |t: &[f64]| (t[0] - mu).powi(2);
    let samples = [160_000, 80_000, 40_000];
    let settings = MlSgldSettings { horizon, seed: 71, ..Default::default() };
    let steps = (horizon * (big_l + 1)) << big_l;
    let h_fine = h0 / (1 << big_l) as f64;
    let mut rows = Vec::new();
    for (tag, replacement) in [("with", true), ("without", false)] {
        let est = if replacement { Minibatch::with_replacement(n) } else { Minibatch::without_replacement(n) };
        let ml = MlSgld::sgld(settings, h0, est, &theta0).unwrap();
        assert_eq!(ml.steps(big_l).unwrap(), steps);
        let r = ml.run_fixed(&model, &g, &samples).unwrap();
        let exact =
            sgld_transient_second_moment(&NoiseModel::new(&model, Some((n, replacement))), &theta0, h_fine, steps)
                [[0, 0]];
        let se = r.variance.sqrt();
        let z = (r.estimate - exact) / se;
        eprintln!("{tag} replacement: ML-SGLD {:.6e} ± {se:.1e}, exact {exact:.6e} (z {z:+.2})", r.estimate);
        assert!(z.abs() <= 4.5, "{tag} replacement: z = {z}");
        rows.push((r.estimate, se, exact));
    }
    let (w, wo) = (rows[0], rows[1]);
    // Power: the two exact laws are far apart at this precision, and the estimates differ.
    let z_laws = (w.2 - wo.2) / wo.1;
    assert!(z_laws.abs() > 4.5, "the two laws are too close to tell apart (z {z_laws})");
    let z_runs = (w.0 - wo.0) / (w.1 * w.1 + wo.1 * wo.1).sqrt();
    eprintln!("exact laws differ by {z_laws:.1} SE; the two runs by {z_runs:.1} SE");
    assert!(z_runs.abs() > 4.5, "with and without replacement gave the same estimate (z {z_runs})");
}

/// A linear-Gaussian model whose gradient turns NaN from a given call on.
struct NanAfter {
    inner: LinearGaussian,
    from_call: u64,
    calls: std::sync::atomic::AtomicU64,
}

impl Model for NanAfter {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn n_data(&self) -> usize {
        self.inner.n_data()
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.inner.grad_prior(theta, out)?;
        Ok(())
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.inner.grad_data_sum(theta, idx, out)?;
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= self.from_call {
            out[0] = f64::NAN;
        }
        Ok(())
    }
}

/// A gradient that turns NaN in the middle of a path is reported with the level, the sample,
/// the path and the iteration, on the fine and on a coarse path.
#[test]
fn mlsgld_reports_non_finite_gradients_with_level_and_iteration() {
    let inner = LinearGaussian::synthetic(100, 1, 1.0, 10.0, 17).unwrap();
    let settings = MlSgldSettings { horizon: 4, parallel: false, ..Default::default() };
    let ml = MlSgld::sgld(settings, 1e-3, Minibatch::new(10), &[0.0]).unwrap();
    let g = |t: &[f64]| t[0];
    // Level 2: the fine path runs alone for 4·4 = 16 steps (one gradient each), then each coupled
    // step evaluates fine, fine, coarse⁺, coarse⁻.
    let model = NanAfter { inner: inner.clone(), from_call: 7, calls: Default::default() };
    let e = ml.sample(&model, &g, 2, 3).unwrap_err();
    assert_eq!(
        e,
        Error::Sample {
            level: 2,
            sample: 3,
            path: "fine",
            source: Box::new(Error::NonFiniteGradient { iteration: 7 })
        }
    );
    assert_eq!(e.root(), &Error::NonFiniteGradient { iteration: 7 });
    // Calls 16, 17 are the first coupled step's fine gradients, 18 and 19 its coarse ones; call 22
    // is the second coupled step's coarse⁺ gradient, at that path's θ₁.
    let model = NanAfter { inner: inner.clone(), from_call: 22, calls: Default::default() };
    let e = ml.sample(&model, &g, 2, 0).unwrap_err();
    assert_eq!(
        e,
        Error::Sample {
            level: 2,
            sample: 0,
            path: "coarse",
            source: Box::new(Error::NonFiniteGradient { iteration: 1 })
        }
    );
    // Through the adaptive and fixed runners too.
    let model = NanAfter { inner, from_call: 1_000, calls: Default::default() };
    let e = ml.run_fixed(&model, &g, &[100, 100]).unwrap_err();
    assert!(matches!(e, Error::Sample { .. }), "{e:?}");
    assert!(matches!(e.root(), Error::NonFiniteGradient { .. }), "{e:?}");
}

/// ML-SGLD coupling SGHMC paths: the telescoping sum matches an independent plain estimate at
/// the finest level while level 0 alone is far from it.
#[test]
fn mlsgld_couples_sghmc() {
    let model = LinearGaussian::synthetic(100, 1, 1.0, 10.0, 23).unwrap();
    let mu = model.posterior_mean()[0];
    let sd = model.posterior_covariance()[[0, 0]].sqrt();
    let start = [mu + 3.0 * sd];
    let g = |t: &[f64]| t[0] * t[0];
    // Time step h0 = √η = 0.01 (η = 1e-4), friction C = α/h = 50.
    let sghmc = Sghmc::new(SghmcSettings::constant(1e-4, 0.5), Minibatch::new(10)).unwrap();
    let settings = MlSgldSettings { horizon: 5, seed: 81, ..Default::default() };
    let ml = MlSgld::new(settings, sghmc.clone(), &start).unwrap();
    assert_eq!(ml.h0(), 0.01);
    let r = ml.run_fixed(&model, &g, &[4000, 2000, 1000, 500]).unwrap();
    let plain_ml = MlSgld::new(MlSgldSettings { seed: 82, ..settings }, sghmc, &start).unwrap();
    let plain: Vec<f64> = (0..4000).map(|i| plain_ml.sample(&model, &g, 3, i).unwrap().fine).collect();
    let (pm, pse) = mean_se(&plain);
    let z = (r.estimate - pm) / (r.variance + pse * pse).sqrt();
    let level0 = r.levels[0].mean;
    let z0 = (level0 - pm) / (r.levels[0].variance / r.levels[0].n_samples as f64 + pse * pse).sqrt();
    eprintln!(
        "SGHMC MLMC {:.6} ± {:.1e}, plain level 3 {pm:.6} ± {pse:.1e} (z {z:+.2}); level 0 {level0:.6} (z {z0:+.1})",
        r.estimate,
        r.variance.sqrt()
    );
    assert!(z.abs() <= 4.5, "telescoping sum off the finest level: z = {z}");
    assert!(z0.abs() > 4.5, "level 0 alone is already at the finest level's value: the test is too weak");
}

/// Richardson–Romberg over pSGLD and SGHMC runs through the same generic code as SGRRLD, and
/// the shared increments couple the two chains: across 16 replicates, the variance of
/// mean(B) − mean(A) is smaller than with independent increments, by more than the 0.999
/// quantile of F(15, 15) (5.54), i.e. significantly at the 0.1 % level.
#[test]
fn richardson_romberg_drives_psgld_and_sghmc() {
    let model = LinearGaussian::synthetic(1000, 2, 1.0, 10.0, 29).unwrap();
    let settings = RunSettings { n_iter: 2_000, burn_in: 200, n_chains: 16, seed: 90, ..Default::default() };
    // pSGLD with exact gradients (each chain's preconditioner then follows its own path only).
    let psgld_settings = PsgldSettings { step_size: StepSize::Constant(2e-4), decay: 0.99, damping: 1.0 };
    let psgld = Psgld::new(psgld_settings, FullGradient::new()).unwrap();
    let sghmc = Sghmc::new(SghmcSettings::constant(1e-6, 0.1), Minibatch::new(50)).unwrap();
    fn spread<S: Discretisation>(model: &LinearGaussian, base: S, coupling: NoiseCoupling, s: &RunSettings) -> f64 {
        let out = Runner::new(model, &RichardsonRomberg::with_coupling(base, coupling))
            .start(&model.posterior_mean().to_vec())
            .settings(*s)
            .run()
            .unwrap();
        assert!(out.estimate.is_finite());
        let diffs: Vec<f64> = (0..s.n_chains)
            .map(|c| out.fine.part(c).unwrap().mean().unwrap()[0] - out.coarse.part(c).unwrap().mean().unwrap()[0])
            .collect();
        mean_se(&diffs).1
    }
    for (name, shared, independent) in [
        (
            "pSGLD",
            spread(&model, psgld.clone(), NoiseCoupling::Shared, &settings),
            spread(&model, psgld, NoiseCoupling::Independent, &settings),
        ),
        (
            "SGHMC",
            spread(&model, sghmc.clone(), NoiseCoupling::Shared, &settings),
            spread(&model, sghmc, NoiseCoupling::Independent, &settings),
        ),
    ] {
        eprintln!("{name}: SE of mean(B) − mean(A): shared {shared:.2e}, independent {independent:.2e}");
        let f = (independent / shared).powi(2);
        assert!(f > 5.54, "{name}: shared increments do not couple the chains (variance ratio {f:.2})");
    }
}

/// ML-SGLD couples pSGLD paths too (each path keeps its own preconditioner): the telescoping sum
/// matches an independent plain estimate at the finest level.
#[test]
fn mlsgld_couples_psgld() {
    let model = LinearGaussian::synthetic(100, 1, 1.0, 10.0, 31).unwrap();
    let mu = model.posterior_mean()[0];
    let sd = model.posterior_covariance()[[0, 0]].sqrt();
    let start = [mu + 3.0 * sd];
    let g = |t: &[f64]| t[0] * t[0];
    let psgld_settings = PsgldSettings { step_size: StepSize::Constant(1e-3), decay: 0.9, damping: 1.0 };
    let psgld = Psgld::new(psgld_settings, Minibatch::new(10)).unwrap();
    let settings = MlSgldSettings { horizon: 5, seed: 91, ..Default::default() };
    let ml = MlSgld::new(settings, psgld.clone(), &start).unwrap();
    let r = ml.run_fixed(&model, &g, &[4000, 2000, 1000]).unwrap();
    let plain_ml = MlSgld::new(MlSgldSettings { seed: 92, ..settings }, psgld, &start).unwrap();
    let plain: Vec<f64> = (0..4000).map(|i| plain_ml.sample(&model, &g, 2, i).unwrap().fine).collect();
    let (pm, pse) = mean_se(&plain);
    let z = (r.estimate - pm) / (r.variance + pse * pse).sqrt();
    eprintln!(
        "pSGLD MLMC {:.6} ± {:.1e}, plain level 2 {pm:.6} ± {pse:.1e} (z {z:+.2})",
        r.estimate,
        r.variance.sqrt()
    );
    assert!(z.abs() <= 4.5, "telescoping sum off the finest level: z = {z}");
    // A time step that changes along the chain cannot be h0.
    let decaying = Psgld::new(
        PsgldSettings { step_size: StepSize::Polynomial { gamma1: 1e-3, alpha: 0.5 }, ..psgld_settings },
        Minibatch::new(10),
    )
    .unwrap();
    assert!(matches!(MlSgld::new(settings, decaying, &start), Err(Error::InvalidParameter { name: "step_size", .. })));
}

/// `Sample` with `Multilevel` is `MlSgld::sgld_tuned` + `run_adaptive` (every mean and sd at
/// the target) in one: the same estimate bit for bit as the calls by hand, and on a Gaussian
/// posterior every mean and sd within the bound it states.
#[test]
fn sample_runs_multilevel_sgld_as_the_calls_by_hand() {
    use sgmcmc::tune::TuneSettings;
    let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 42).unwrap();
    let fit = Sample::new(&model, Multilevel::new(Minibatch::new(25)).accuracy(0.1)).seed(5).run().unwrap();
    eprintln!("{fit}");
    let settings = MlSgldSettings { keep_points: true, seed: 5, ..Default::default() };
    let ts = TuneSettings { planned_run: sgmcmc::tune::PlannedRun::new(5_000, 4), ..Default::default() };
    let (ml, setup) = MlSgld::sgld_tuned(&model, settings, Minibatch::new(25), &[0.0, 0.0], &ts).unwrap();
    let w = setup.whitening.clone().unwrap();
    let g = move |t: &[f64]| -> f64 {
        let mut phi = t.to_vec();
        w.to_phi(t, &mut phi);
        phi.iter().map(|x| x * x).sum::<f64>() / t.len() as f64
    };
    let target = AdaptiveSettings { target: RmseTarget::Moments(0.1), ..Default::default() };
    let r = ml.run_adaptive(&model, &g, &target).unwrap();
    assert_eq!(fit.h0, ml.h0());
    assert_eq!(fit.result.estimate.to_bits(), r.estimate.to_bits());
    let m = r.moments.unwrap();
    assert_eq!(fit.moments.mean, m.mean);
    assert_eq!(fit.names, ["theta[0]", "theta[1]"]);
    let (exact, sd) = (model.posterior_mean(), model.posterior_covariance().diag().mapv(f64::sqrt));
    let bound = fit.moments.error_bound;
    for j in 0..2 {
        let (e_mean, e_sd) = ((m.mean[j] - exact[j]).abs() / sd[j], (m.sd[j] / sd[j] - 1.0).abs());
        assert!(e_mean <= bound && e_sd <= bound, "theta[{j}]: {e_mean:.3} sd / {e_sd:.3} off, bound {bound:.3}");
    }
}

/// `Sample` with a Richardson–Romberg sampler is `tune_rr` + `dispersed_starts` +
/// `run_rr_chains` in one: the same draws bit for bit, the verdict of `RrOutput::convergence`
/// (with names), and on a Gaussian posterior the extrapolated means within the bound it states.
#[test]
fn sample_runs_richardson_romberg_as_the_calls_by_hand() {
    use sgmcmc::tune::{PlannedRun, TuneSettings, dispersed_starts};
    let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 42).unwrap();
    let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::default(), Minibatch::new(100)).unwrap());
    let fit = Sample::new(&model, rr.clone()).draws(4_000).chains(4).burn_in(500).seed(3).run().unwrap();
    let ts = TuneSettings { planned_run: PlannedRun::new(4_000, 4), ..Default::default() };
    let tuned = tune_rr(&model, &rr, &[0.0, 0.0], &ts).unwrap();
    let starts = dispersed_starts(&model, &tuned.mode, 4, 2.0, 3).unwrap();
    let rs = RunSettings { n_iter: 4_500, burn_in: 500, n_chains: 4, seed: 3, ..Default::default() };
    let out = Runner::new(&model, &tuned.rr).starts(&starts).settings(rs).run().unwrap();
    let bits = |e: &Estimate| e.stacked_draws().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(fit.tuned.step_size, tuned.step_size);
    assert_eq!(bits(&fit.output.fine), bits(&out.fine));
    assert_eq!(bits(&fit.output.coarse), bits(&out.coarse));
    let mut verdict = fit.convergence.clone();
    assert_eq!(verdict.failed_names.len(), verdict.failed.len());
    verdict.failed_names.clear();
    assert_eq!(verdict, out.convergence().unwrap());
    assert_eq!(fit.table.names, ["theta[0]", "theta[1]"]);
    eprintln!("{fit}");
    if fit.convergence.converged {
        let (mean, exact) = (fit.estimate().mean().unwrap(), model.posterior_mean());
        let sd = model.posterior_covariance().diag().mapv(f64::sqrt);
        for j in 0..2 {
            let err = ((mean[j] - exact[j]) / sd[j]).abs();
            assert!(err <= fit.convergence.stated_bound(), "theta[{j}]: {err:.3} sd off, bound {}", fit.convergence);
        }
    }
}

/// `Sample` is the seven-call path in one: with the same seeds it makes the same draws as
/// `tune` (planned run = its draws × chains) + `dispersed_starts` + `run_chains`, bit for bit,
/// and its verdict with the bias check off is `convergence()`'s (with the failed coordinates'
/// names).
#[test]
fn sample_makes_the_draws_of_the_seven_call_path() {
    use sgmcmc::tune::{PlannedRun, TuneSettings, dispersed_starts, tune};
    let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 42).unwrap();
    let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(100)).unwrap();
    let fit = Sample::new(&model, sgld.clone()).draws(2_000).chains(3).burn_in(500).seed(9).run().unwrap();
    let ts = TuneSettings { planned_run: PlannedRun::new(2_000, 3), ..Default::default() };
    let tuned = tune(&model, &sgld, &[0.0, 0.0], &ts).unwrap();
    let starts = dispersed_starts(&model, &tuned.mode, 3, 2.0, 9).unwrap();
    let rs = RunSettings { n_iter: 2_500, burn_in: 500, n_chains: 3, seed: 9, ..Default::default() };
    let out = Runner::new(&model, &tuned.sampler).starts(&starts).settings(rs).run().unwrap();
    let bits = |e: &Estimate| e.stacked_draws().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(fit.tuned.step_size, tuned.step_size);
    assert_eq!(bits(fit.estimate()), bits(&out.estimate));
    assert!(fit.bias.is_some() && fit.convergence.bias_bound.is_some());
    let off = Sample::new(&model, sgld).draws(2_000).chains(3).burn_in(500).seed(9).bias_check(None).run().unwrap();
    // The same verdict, which `Sample` also names.
    let mut verdict = off.convergence.clone();
    let names: Vec<String> = verdict.failed.iter().map(|j| format!("theta[{j}]")).collect();
    assert_eq!(verdict.failed_names, names);
    verdict.failed_names.clear();
    assert_eq!(verdict, out.convergence().unwrap());
    assert!(off.bias.is_none());
}

/// `Sample` aiming at an accuracy extends the same chains until it states it: its draws are
/// those of one run of the final length from the start, bit for bit (the same tuned sampler,
/// starts and settings), and it reached a target that needed at least one extension.
#[test]
fn a_run_extended_to_its_target_makes_the_draws_of_one_run_of_that_length() {
    let model = LinearGaussian::synthetic(2_000, 3, 1.0, 10.0, 5).unwrap();
    let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50)).unwrap();
    let fit = Sample::new(&model, sgld).accuracy(0.04).seed(3).run().unwrap();
    let target = fit.target.clone().expect("an accuracy target");
    eprintln!("{target}");
    assert!(target.extensions >= 1, "{target}");
    assert!(target.reached, "{target}");
    assert!(fit.convergence.stated_bound() <= 0.04);
    let starts = fit.tuned.dispersed_starts(&model, 4, sgmcmc::sample::START_SPREAD, 3).unwrap();
    let once = Runner::new(&model, &fit.tuned.sampler).starts(&starts).settings(fit.settings).run().unwrap();
    let bits = |e: &Estimate| e.stacked_draws().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(fit.estimate()), bits(&once.estimate));
    assert_eq!(target.draws, fit.settings.n_iter - fit.settings.burn_in);
}

/// `Sample::thin(k)` keeps every k-th draw of the same chains: its kept draws (counted after
/// thinning, as `draws` asks) are, bit for bit, one fixed subsequence of every k-th draw of the
/// unthinned run of the same tuned sampler, starts and seed; `thin(0)` is refused by name.
#[test]
fn sample_thins_the_same_chains_and_counts_draws_after_thinning() {
    let model = LinearGaussian::synthetic(2_000, 3, 1.0, 10.0, 5).unwrap();
    let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50)).unwrap();
    let (k, draws) = (5u64, 400u64);
    let fit = Sample::new(&model, sgld.clone()).draws(draws).thin(k).seed(3).run().unwrap();
    assert_eq!(fit.settings.thin, k);
    assert_eq!(fit.settings.n_iter - fit.settings.burn_in, draws * k);
    let starts = fit.tuned.dispersed_starts(&model, 4, sgmcmc::sample::START_SPREAD, 3).unwrap();
    let all = RunSettings { thin: 1, ..fit.settings };
    let once = Runner::new(&model, &fit.tuned.sampler).starts(&starts).settings(all).run().unwrap();
    for c in 0..4 {
        let thinned = fit.estimate().part(c).unwrap().stacked_draws().unwrap();
        let full = once.estimate.part(c).unwrap().stacked_draws().unwrap();
        assert_eq!(thinned.nrows() as u64, draws);
        assert_eq!(full.nrows() as u64, draws * k);
        let row = |a: &Array2<f64>, i: usize| a.row(i).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let offset = (0..k as usize)
            .find(|&o| row(&full, o) == row(&thinned, 0))
            .expect("the first kept draw is one of the first k");
        for i in 0..draws as usize {
            assert_eq!(row(&thinned, i), row(&full, i * k as usize + offset), "chain {c}, kept draw {i}");
        }
    }
    let e = Sample::new(&model, sgld).draws(draws).thin(0).run().unwrap_err();
    assert!(matches!(e.root(), Error::InvalidParameter { name: "thin", .. }), "{e}");
}

/// The default path's setup — mode, Hessian, the choice of estimator, the gradient-noise
/// measurement, the pilots and their scores, the step-bias check — costs at most the larger of
/// 30 passes over the data and the run itself, at N = 10⁵ (counted in datum gradients and
/// datum Hessian-vector products): the pilots' exact full-data scores, 6 400 passes here until
/// 2026-12, cannot come back unnoticed.
#[test]
fn the_default_paths_setup_costs_a_fixed_number_of_epochs_at_n_1e5() {
    let n = 100_000;
    let model = LogisticRegression::synthetic(n, 10, 10.0, 2026).unwrap();
    let fit = Sample::new(&model, Sgld::auto()).seed(1).run().unwrap();
    let run = (fit.output.cost - fit.output.setup_cost).datum_gradients as f64;
    let tuning = (fit.tuned.cost.datum_gradients + fit.tuned.cost.datum_hvps) as f64;
    let check = fit.bias.as_ref().map_or(0.0, |b| b.cost.datum_gradients as f64);
    let setup = tuning + check;
    eprintln!(
        "setup {:.1} epochs (tuning {:.1}, step-bias check {:.1}); run {:.1} epochs; {}",
        setup / n as f64,
        tuning / n as f64,
        check / n as f64,
        run / n as f64,
        fit.target.as_ref().unwrap()
    );
    assert!(setup <= (30.0 * n as f64).max(run), "setup {setup} vs run {run}");
    assert!(tuning <= 30.0 * n as f64, "tuning alone {} epochs", tuning / n as f64);
}

/// The worst error of a fit's means against the linear-Gaussian posterior, in posterior sds.
fn worst_mean_error<S>(model: &LinearGaussian, fit: &Sampled<S>) -> f64 {
    let (mu, cov) = (model.posterior_mean(), model.posterior_covariance());
    fit.table.rows.iter().enumerate().map(|(i, r)| (r.mean - mu[i]).abs() / cov[[i, i]].sqrt()).fold(0.0, f64::max)
}

/// MALA through `Sample`: the mode and Hessian set the dispersed starts, MALA adapts in a
/// burn-in of at least its `adapt_steps`, and — Metropolis-adjusted, no step bias — the run
/// states its Monte Carlo bound, extends to the target and is right within it on a posterior
/// known exactly.
#[test]
fn mala_through_sample_reaches_its_target_and_is_right_within_it() {
    let model = LinearGaussian::synthetic(2_000, 3, 1.0, 10.0, 7).unwrap();
    let mala = Mala::new(MalaSettings::default()).unwrap();
    let adapt = mala.settings().adapt_steps;
    let fit = Sample::new(&model, mala).accuracy(0.08).seed(11).run().unwrap();
    let target = fit.target.clone().unwrap();
    eprintln!("{target}; {}", fit.convergence);
    assert!(target.reached, "{target}");
    assert!(fit.bias.is_none());
    assert!(fit.settings.burn_in >= adapt);
    assert!(fit.tuned.mode.len() == 3);
    let err = worst_mean_error(&model, &fit);
    assert!(err <= fit.convergence.stated_bound(), "error {err} vs stated {}", fit.convergence.stated_bound());
}

/// HAMCMC through `Sample`: tuned (its step from the L-BFGS metric at the mode), run and judged
/// without a step-bias check (it is not a `Discretisation`), so an accuracy target is never
/// declared reached — the reason says why — even when its Monte Carlo bound meets it.
#[test]
fn hamcmc_through_sample_is_tuned_and_never_claims_an_unchecked_target() {
    let model = LinearGaussian::synthetic(2_000, 3, 1.0, 10.0, 7).unwrap();
    let hamcmc = Hamcmc::new(HamcmcSettings::default(), Minibatch::new(50)).unwrap();
    let fit = Sample::new(&model, hamcmc).accuracy(0.2).seed(12).run().unwrap();
    let target = fit.target.clone().unwrap();
    eprintln!("{target}; {}; {}", fit.convergence, fit.tuned.reason);
    assert!(!target.reached, "{target}");
    assert!(target.why.as_deref().is_some_and(|w| w.contains("HAMCMC")), "{target}");
    assert!(fit.bias.is_none());
    assert!(fit.convergence.converged, "{}", fit.convergence);
    assert!(fit.convergence.stated_bound() <= 0.2);
    // Unchecked, the step's bias adds to the stated Monte Carlo bound (here it is most of the
    // error: the bound alone would be too tight, which is why no target is claimed); the tuner
    // planned the step for a predicted error of 0.7 × the accuracy, which holds it.
    let err = worst_mean_error(&model, &fit);
    assert!(err <= 0.2, "error {err} vs the accuracy asked 0.2");
}

/// `Sample::observer`: an observer that never stops changes no draw, verdict or text (a
/// progress display, the Python package's watch); one that stops the run ends it with what the
/// chains drew, the step-bias check skipped, an accuracy target not extended and saying why;
/// chains that had not started (4 chains on fewer threads) are left out of the verdict.
#[test]
fn sample_observers_watch_without_changing_and_stop_with_what_was_drawn() {
    use sgmcmc::observe::{Every, Progress, StopWhen};
    let model = LinearGaussian::synthetic(2_000, 2, 1.0, 10.0, 9).unwrap();
    let sgld = || Sgld::new(SgldSettings::default(), Minibatch::new(50)).unwrap();
    let plain = Sample::new(&model, sgld()).draws(3_000).seed(4).run().unwrap();
    let seen = std::sync::atomic::AtomicU64::new(0);
    let watch = Every {
        every: 250,
        f: |_: &Progress<'_>| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        },
    };
    let watched = Sample::new(&model, sgld()).draws(3_000).seed(4).observer(&watch).run().unwrap();
    assert!(seen.load(std::sync::atomic::Ordering::Relaxed) >= 4 * (4_000 / 250));
    assert_eq!(plain.estimate().stacked_draws().unwrap(), watched.estimate().stacked_draws().unwrap());
    assert_eq!(format!("{plain}"), format!("{watched}"));
    assert!(!watched.stopped && watched.bias.is_some());

    // Aiming at ±0.05 sd (a first run longer than 2 500 iterations), stopped at iteration 2 500
    // (burn-in 1 000): 1 500 kept draws per chain.
    let stop = StopWhen { condition: |p: &Progress<'_>| p.iteration >= 2_500, interval: 100 };
    let fit = Sample::new(&model, sgld()).accuracy(0.05).burn_in(1_000).seed(4).observer(&stop).run().unwrap();
    assert!(fit.output.settings.n_iter > 2_500);
    assert!(fit.stopped && fit.bias.is_none() && fit.convergence.bias_bound.is_none());
    let target = fit.target.as_ref().unwrap();
    assert!(!target.reached && target.extensions == 0);
    assert!(target.why.as_deref().unwrap().contains("stopped by an observer"), "{target}");
    assert!(fit.output.chains.iter().all(|c| c.iterations == 2_500 && c.stopped));

    // Only chain 0 draws (the others stop at their start): the verdict is on chain 0 alone.
    let first = StopWhen { condition: |p: &Progress<'_>| p.chain > 0, interval: 100 };
    let fit = Sample::new(&model, sgld()).draws(2_000).seed(4).observer(&first).run().unwrap();
    assert!(fit.stopped && fit.convergence.chains == 1, "{}", fit.convergence);
    // Every chain stopped before a kept draw: an error, not a verdict on nothing.
    let none = StopWhen { condition: |_: &Progress<'_>| true, interval: 1 };
    let err = Sample::new(&model, sgld()).draws(2_000).seed(4).observer(&none).run().unwrap_err();
    assert!(matches!(err.root(), Error::NoSamples { .. }), "{err}");
}

#[test]
fn sample_observers_are_asked_in_the_step_bias_check_and_may_stop_it() {
    use sgmcmc::observe::{Control, Observer};
    use std::sync::atomic::{AtomicU64, Ordering};
    // Asked during the check every 40 companion iterations; stops it once `at` is reached.
    struct Check {
        at: u64,
        asked: AtomicU64,
        last: AtomicU64,
    }
    impl Observer for Check {
        fn interval(&self) -> u64 {
            40
        }
        fn observe_bias_check(&self, iteration: u64, n_iter: u64) -> Control {
            assert!(
                iteration <= n_iter && (iteration.is_multiple_of(40) || iteration == n_iter),
                "{iteration}/{n_iter}"
            );
            self.asked.fetch_add(1, Ordering::Relaxed);
            self.last.store(iteration, Ordering::Relaxed);
            if iteration >= self.at { Control::Stop } else { Control::Continue }
        }
    }
    let model = LinearGaussian::synthetic(2_000, 2, 1.0, 10.0, 9).unwrap();
    let sgld = || Sgld::new(SgldSettings::default(), Minibatch::new(50)).unwrap();
    let plain = Sample::new(&model, sgld()).draws(3_000).seed(4).run().unwrap();
    let check = |at| Check { at, asked: AtomicU64::new(0), last: AtomicU64::new(0) };

    // Never stopping: asked all along the companion, and nothing changes (draws, bound, text).
    let never = check(u64::MAX);
    let watched = Sample::new(&model, sgld()).draws(3_000).seed(4).observer(&never).run().unwrap();
    let companion = plain.bias.as_ref().unwrap().iterations;
    assert_eq!(never.last.load(Ordering::Relaxed), companion);
    assert!(never.asked.load(Ordering::Relaxed) >= companion / 40, "{:?}", never.asked);
    assert_eq!(plain.estimate().stacked_draws().unwrap(), watched.estimate().stacked_draws().unwrap());
    assert_eq!(format!("{plain}"), format!("{watched}"));
    assert!(!watched.stopped);

    // Stopping the check at its 400th iteration: every chain's draws kept (the same draws), the
    // check skipped, the run marked stopped.
    let early = check(400);
    let fit = Sample::new(&model, sgld()).draws(3_000).seed(4).observer(&early).run().unwrap();
    assert_eq!(early.last.load(Ordering::Relaxed), 400);
    assert!(fit.stopped && fit.bias.is_none() && fit.convergence.bias_bound.is_none());
    assert!(fit.output.chains.iter().all(|c| c.iterations == fit.output.settings.n_iter && !c.stopped));
    assert_eq!(plain.estimate().stacked_draws().unwrap(), fit.estimate().stacked_draws().unwrap());

    // Aiming at an accuracy: a stopped check is not extended and does not declare the target met.
    let fit = Sample::new(&model, sgld()).accuracy(0.5).seed(4).observer(&check(400)).run().unwrap();
    let target = fit.target.as_ref().unwrap();
    assert!(fit.stopped && !target.reached && target.extensions == 0, "{target}");
    assert!(target.why.as_deref().unwrap().contains("stopped by an observer"), "{target}");
}
