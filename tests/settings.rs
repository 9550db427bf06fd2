//! Every settings struct built the documented way — a constructor, or named fields followed by
//! `..Default::default()` — and checked with its `validate` (or by building what uses it). Code
//! written like this keeps compiling when a field is added; an exhaustive struct literal does
//! not (see "API stability" in the README and CHANGELOG.md). The `previous_style` module is a
//! user program written against the previous release's API, with the one change CHANGELOG.md
//! asks for (`AdaptiveSettings::rmse` → `target`).

use sgmcmc::diagnostics::KsdSettings;
use sgmcmc::mf::MfRunSettings;
use sgmcmc::tune::{CurvatureSettings, PlannedRun, Precondition, TuneSettings};
use sgmcmc::*;

#[test]
fn every_settings_struct_builds_the_documented_way() {
    // Samplers: the settings and the sampler they make.
    let mb = || Minibatch::new(10);
    let sgld = SgldSettings { step_size: StepSize::Constant(1e-3), ..Default::default() };
    sgld.validate().unwrap();
    Sgld::new(SgldSettings::constant(1e-3), mb()).unwrap();
    Sgld::new(sgld, mb()).unwrap();
    let sghmc = SghmcSettings { friction: 0.2, ..Default::default() };
    sghmc.validate().unwrap();
    Sghmc::new(sghmc, mb()).unwrap();
    Sghmc::new(SghmcSettings::constant(1e-6, 0.1), mb()).unwrap();
    let psgld = PsgldSettings { decay: 0.95, ..Default::default() };
    psgld.validate().unwrap();
    Psgld::new(psgld, mb()).unwrap();
    let sgnht = SgnhtSettings { diffusion: 2.0, ..Default::default() };
    Sgnht::new(sgnht, mb()).unwrap();
    let hamcmc = HamcmcSettings { memory: 4, ..Default::default() };
    hamcmc.validate().unwrap();
    Hamcmc::new(hamcmc, mb()).unwrap();
    let cyclical = CyclicalSettings { exploration: 0.5, ..Default::default() };
    cyclical.validate().unwrap();
    CyclicalSgld::new(cyclical, mb()).unwrap();
    CyclicalSgld::new(CyclicalSettings::new(1e-3, 1_000, 4, 0.8), mb()).unwrap();
    let mala = MalaSettings { target_accept: 0.6, ..Default::default() };
    mala.validate().unwrap();
    Mala::new(mala).unwrap();
    Mala::new(MalaSettings::fixed(1e-3)).unwrap();
    // Estimators, optimisers, checks.
    let cv = CvSettings { batch_size: 20, ..Default::default() };
    let lg = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap();
    ControlVariate::at_mode(&lg, &[0.0; 2], &ModeSettings { max_iter: 3_000, ..Default::default() }, cv).unwrap();
    ModeSettings { grad_tol: 1e-7, ..Default::default() }.validate().unwrap();
    SgdSettings { batch_size: 20, ..Default::default() }.validate().unwrap();
    check_model(&lg, &[0.0; 2], &CheckSettings { n_directions: 4, ..Default::default() }).unwrap();
    // Runs, tuning, multilevel, diagnostics, matrix factorisation.
    RunSettings { n_iter: 100, burn_in: 10, ..Default::default() }.validate().unwrap();
    let tune = TuneSettings {
        seed: 3,
        precondition: Precondition::Diagonal,
        planned_run: PlannedRun::new(5_000, 4),
        ksd: KsdSettings { beta: -0.5, ..Default::default() },
        ..TuneSettings::default()
    };
    tune.validate().unwrap();
    let _curvature = CurvatureSettings { max_iter: 50, ..Default::default() };
    MlSgldSettings { keep_points: true, ..Default::default() }.validate().unwrap();
    let _target = AdaptiveSettings { target: RmseTarget::Absolute(0.01), ..Default::default() };
    let _relative = AdaptiveSettings { target: RmseTarget::PosteriorSd(0.05), n_initial: 50, ..Default::default() };
    assert_eq!(MfRunSettings { eval_every: 10, ..Default::default() }.eval_every, 10);
}

/// A program written against the previous release (settings by `..Default::default()`, match
/// arms with a wildcard), with the migrations CHANGELOG.md lists applied — the names that left
/// the prelude imported from the crate root, `AdaptiveSettings`, and the run functions removed in
/// 0.3.0 replaced by the `Runner` and `Resume` lines the note gives — compiles and runs, and a
/// stopped, resumed run is the whole run bit for bit.
mod previous_style {
    use sgmcmc::prelude::*;
    // Left the prelude (CHANGELOG.md, 0.2.0): named at the root.
    use sgmcmc::{AdaptiveSettings, Mala, MalaSettings, Metric, MlSgld, MlSgldSettings, Resume, RmseTarget};

    #[test]
    fn a_previous_release_program_compiles_and_runs() {
        let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 1).unwrap();
        let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).unwrap();
        let settings = RunSettings { n_iter: 2_000, burn_in: 1_000, n_chains: 2, ..Default::default() };
        // Was `run_chains(&model, &sgld, &[[0.0, 0.0], [0.1, 0.1]], &settings)`.
        let out = Runner::new(&model, &sgld).starts(&[[0.0, 0.0], [0.1, 0.1]]).settings(settings).run().unwrap();
        assert!(out.estimate.mean().unwrap().iter().all(|m| m.is_finite()));
        let budget = sgmcmc::observe::Budget::datum_gradients(60_000);
        // Was `run_observed(&model, &sgld, &[0.0, 0.0], &settings, &[&budget])`.
        let stopped = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).observers(&[&budget]).run();
        let stopped = stopped.unwrap();
        assert!(!stopped.is_complete());
        // Was `resume(&model, stopped, &[])`.
        let resumed = Resume::new(&model, stopped).observers(&[]).run().unwrap();
        // Was `run(&model, &sgld, &[0.0, 0.0], &settings)`.
        let whole = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run().unwrap();
        assert_eq!(resumed.estimate.mean().unwrap(), whole.estimate.mean().unwrap());
        // Was `run_rr(&model, &RichardsonRomberg::new(sgld.clone()), &[0.0, 0.0], &settings)`.
        let rr = Runner::new(&model, &RichardsonRomberg::new(sgld.clone())).start(&[0.0, 0.0]).settings(settings).run();
        assert!(rr.unwrap().estimate.mean().unwrap().iter().all(|m| m.is_finite()));
        // MalaSettings built as before: it now adapts (CHANGELOG.md), within the burn-in.
        let mala = Mala::new(MalaSettings { step_size: 1e-3, ..Default::default() }).unwrap();
        assert!(Runner::new(&model, &mala).start(&[0.0, 0.0]).settings(settings).run().is_ok());
        let ml =
            MlSgld::sgld(MlSgldSettings { horizon: 10, ..Default::default() }, 1e-3, Minibatch::new(10), &[0.0, 0.0])
                .unwrap();
        // Was `AdaptiveSettings { rmse: 0.05, ..Default::default() }`.
        let target = AdaptiveSettings { target: RmseTarget::Absolute(0.05), ..Default::default() };
        let _ = ml.run_adaptive(&model, &|t: &[f64]| t[0], &target);
        let described = match MalaSettings::default().metric {
            Metric::Identity => "identity",
            Metric::Diagonal => "diagonal",
            _ => "dense or automatic",
        };
        assert_eq!(described, "dense or automatic");
    }
}

/// The migration CHANGELOG.md gives for `Sample`'s default, which now aims at an accuracy: a
/// fixed length is `.draws(n)`, and then there is no target and exactly n kept draws per chain.
#[test]
fn sample_with_draws_keeps_the_fixed_length_of_before() {
    let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 42).unwrap();
    let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(100)).unwrap();
    let fit = Sample::new(&model, sgld).draws(5_000).run().unwrap(); // the 0.1 behaviour
    assert!(fit.target.is_none());
    assert_eq!(fit.settings.n_iter - fit.settings.burn_in, 5_000);
    assert_eq!(fit.tuned.planned_run, sgmcmc::tune::PlannedRun::new(5_000, 4));
}
