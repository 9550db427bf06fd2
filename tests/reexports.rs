//! A user crate can name the exact `ndarray` and `rand` of this crate through its re-exports (no
//! version clash with its own dependencies), and `run_chains` takes starting points in the shapes
//! users have at hand.

use sgmcmc::ndarray::Array2;
use sgmcmc::prelude::*;
use sgmcmc::rand::{Rng, SeedableRng};
use sgmcmc::tune::dispersed_starts;
use sgmcmc::{
    AdaptiveSettings, CyclicalSettings, CyclicalSgld, Hamcmc, HamcmcSettings, Lmc, Mala, MalaSettings, Metric, MlSgld,
    MlSgldSettings, PreconditionedSgld, Psgld, PsgldSettings, Sampler, Sgnht, SgnhtSettings, Sgrrhmc, Sgrrld,
    tune::tune, tune_rr,
};
use sgmcmc::{CentreRule, TunableKernel};

#[test]
fn ess_on_an_array_built_through_the_reexport() {
    // The crate's own generator, seeded through the re-exported `rand` trait.
    let mut rng = sgmcmc::rng::ChainRng::seed_from_u64(42);
    let x = Array2::from_shape_fn((4, 500), |_| rng.next_u64() as f64 / u64::MAX as f64);
    let ess = sgmcmc::diagnostics::ess_bulk(x.view()).unwrap();
    // Independent uniforms: the ESS is about the number of draws (2000).
    assert!(ess > 1500.0 && ess < 2600.0, "{ess}");
}

#[test]
fn run_chains_takes_vectors_and_arrays() {
    let model = LinearGaussian::synthetic(300, 3, 1.0, 10.0, 3).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(30)).unwrap();
    let settings = RunSettings { n_iter: 500, burn_in: 100, n_chains: 4, ..Default::default() };
    let arrays: [[f64; 3]; 4] = [[0.0; 3], [1.0; 3], [-1.0; 3], [0.5, -0.5, 0.0]];
    let from_arrays = Runner::new(&model, &sgld).starts(&arrays).settings(settings).run().unwrap();
    let vecs: Vec<Vec<f64>> = arrays.iter().map(|a| a.to_vec()).collect();
    let from_vecs = Runner::new(&model, &sgld).starts(&vecs).settings(settings).run().unwrap();
    let slices: Vec<&[f64]> = arrays.iter().map(|a| &a[..]).collect();
    let from_slices = Runner::new(&model, &sgld).starts(&slices).settings(settings).run().unwrap();
    // The same starting points give the same draws, whatever their container.
    assert_eq!(from_arrays.estimate.mean().unwrap(), from_vecs.estimate.mean().unwrap());
    assert_eq!(from_arrays.estimate.mean().unwrap(), from_slices.estimate.mean().unwrap());
    // Dispersed starts around the mode: distinct, seeded (same seed, same points).
    let starts = dispersed_starts(&model, model.posterior_mean().as_slice().unwrap(), 4, 2.0, 9).unwrap();
    assert_eq!(starts, dispersed_starts(&model, model.posterior_mean().as_slice().unwrap(), 4, 2.0, 9).unwrap());
    assert!(starts.windows(2).all(|w| w[0] != w[1]));
    assert!(Runner::new(&model, &sgld).starts(&starts).settings(settings).run().is_ok());
}

/// Dispersed starts are draws from N(mode, scale² ∇²U⁻¹): on a Gaussian model their variances
/// are scale² times the posterior's (4000 draws: relative standard error √(2/4000) = 0.022; the
/// tolerance is 5 of them).
#[test]
fn dispersed_starts_have_the_laplace_spread() {
    let model = LinearGaussian::synthetic(300, 3, 1.0, 10.0, 3).unwrap();
    let mu = model.posterior_mean().to_vec();
    let starts = dispersed_starts(&model, &mu, 4000, 2.0, 1).unwrap();
    let cov = model.posterior_covariance();
    for j in 0..3 {
        let m = starts.iter().map(|s| s[j]).sum::<f64>() / 4000.0;
        let v = starts.iter().map(|s| (s[j] - m).powi(2)).sum::<f64>() / 3999.0;
        let rel = v / (4.0 * cov[[j, j]]) - 1.0;
        assert!(rel.abs() < 5.0 * (2.0f64 / 4000.0).sqrt(), "coordinate {j}: variance ratio error {rel}");
    }
    assert!(matches!(dispersed_starts(&model, &mu, 0, 2.0, 1), Err(Error::InvalidParameter { .. })));
}

/// The prelude alone is enough for a first program: a built-in model, the two workhorse samplers
/// run through the `Runner`, a Richardson–Romberg pair run and resumed, the trustworthy path
/// (`Sample`) and its multilevel form named (a nested module sees none of the file's imports,
/// so a name missing from the prelude fails to compile).
mod prelude_only {
    use sgmcmc::prelude::*;

    #[test]
    fn the_prelude_runs_a_first_program() {
        let model = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap();
        let rs = RunSettings { n_iter: 50, burn_in: 10, n_chains: 1, ..Default::default() };
        let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
        let out: RunOutput<Sgld> = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(rs).run().unwrap();
        assert!(out.estimate.is_finite());
        let sghmc = Sghmc::new(SghmcSettings::constant(1e-7, 0.1), FullGradient::new()).unwrap();
        assert!(Runner::new(&model, &sghmc).start(&[0.0, 0.0]).settings(rs).run().unwrap().estimate.is_finite());
        let rr = RichardsonRomberg::new(sgld.clone());
        let out = Runner::new(&model, &rr).start(&[0.0, 0.0]).settings(rs).run().unwrap();
        assert!(out.estimate.is_finite());
        let mode = model.posterior_mean().to_vec();
        let cv = ControlVariate::at_mode(&model, &mode, &ModeSettings::default(), CvSettings::default()).unwrap();
        let sampled: Sampled<Sgld<ControlVariate>> =
            Sample::new(&model, Sgld::new(SgldSettings::default(), cv).unwrap()).draws(400).chains(2).run().unwrap();
        assert!(sampled.output.estimate.is_finite());
        fn _names(_: &Glm, _: &LogisticRegression, _: &Error, _: &Estimate, _: Cost) {}
        fn _model_trait<M: Model>(_: &M) {}
    }
}

/// Everything else is named at the crate root: every sampler and its settings, the coupled
/// methods and both tuners.
#[test]
fn the_root_names_every_sampler_coupled_method_and_tuner() {
    use sgmcmc::prelude::*;
    use sgmcmc::{Multilevel, Resume, tune::dispersed_starts};
    let _multilevel = Multilevel::new(Minibatch::new(20));
    let _resume = Resume::<LinearGaussian, RunOutput<Sgld>>::new;
    let _starts = dispersed_starts::<LinearGaussian>;
    fn runs<S: Sampler>(model: &LinearGaussian, s: &S) {
        let rs = RunSettings { n_iter: 50, burn_in: 10, n_chains: 1, ..Default::default() };
        assert!(Runner::new(model, s).start(&[0.0, 0.0]).settings(rs).run().unwrap().estimate.is_finite());
    }
    let model = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap();
    let mb = || Minibatch::new(20);
    runs(&model, &Psgld::new(PsgldSettings::default(), mb()).unwrap());
    let identity = sgmcmc::ndarray::Array2::<f64>::eye(2);
    runs(&model, &PreconditionedSgld::new(SgldSettings::constant(1e-4), &identity, mb()).unwrap());
    runs(&model, &Hamcmc::new(HamcmcSettings::default(), mb()).unwrap());
    runs(&model, &Sgnht::new(SgnhtSettings::default(), mb()).unwrap());
    runs(&model, &CyclicalSgld::new(CyclicalSettings::new(1e-4, 50, 2, 0.5), mb()).unwrap());
    runs(&model, &sgmcmc::Baoab::new(sgmcmc::KineticSettings::constant(1e-3, 1.0), Minibatch::reshuffled(20)).unwrap());
    runs(&model, &sgmcmc::Ubu::new(sgmcmc::KineticSettings::constant(1e-3, 1.0), mb()).unwrap());
    runs(&model, &sgmcmc::ReSgld::new(sgmcmc::ReSgldSettings::new(1e-4, &[1.0, 2.0]), mb()).unwrap());
    runs(&model, &sgmcmc::Csgld::new(sgmcmc::CsgldSettings::new(1e-4, 0.0, 10.0, 20), mb()).unwrap());
    let _policy: sgmcmc::Batches = sgmcmc::Batches::RESHUFFLED;
    runs(&model, &Lmc::new(SgldSettings::constant(1e-4), FullGradient::new()).unwrap());
    runs(&model, &Mala::new(MalaSettings { metric: Metric::Dense, adapt_steps: 0, ..Default::default() }).unwrap());
    let _sgrrld: Sgrrld = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-4), mb()).unwrap());
    let _sgrrhmc: Sgrrhmc = RichardsonRomberg::new(Sghmc::new(SghmcSettings::constant(1e-7, 0.1), mb()).unwrap());
    let ml = MlSgld::sgld(MlSgldSettings::default(), 1e-3, mb(), &[0.0, 0.0]).unwrap();
    let _target = AdaptiveSettings::default();
    assert!(ml.run_fixed(&model, &|t: &[f64]| t[0], &[4, 2]).unwrap().estimate.is_finite());
    // Both tuners are in scope (not run here: tests/tune.rs runs them).
    let _tune = tune::<LinearGaussian, Sgld>;
    let _tune_rr = tune_rr::<LinearGaussian, Sgld>;
}

/// Each kernel states its tuning facts (`TunableKernel`, at the crate root): the centre rules of
/// the four built-in tunable kernels, and the policy that SGHMC with a given β̂ takes no measured
/// correction.
#[test]
fn kernels_state_their_tuning_facts() {
    let sgld = Sgld::new(SgldSettings::constant(1e-3), Minibatch::new(10)).unwrap();
    assert_eq!(sgld.kernel().centre_rule(), CentreRule::InverseLambdaMax);
    assert_eq!(sgld.kernel().mixing_exponent(), Some(1.0));
    let sghmc = Sghmc::new(SghmcSettings::constant(1e-3, 0.1), Minibatch::new(10)).unwrap();
    assert_eq!(sghmc.kernel().centre_rule().step(4.0), Some(0.25));
    assert!(sghmc.kernel().takes_noise_correction());
    let given = SghmcSettings { noise_estimate: 0.05, ..SghmcSettings::constant(1e-3, 0.1) };
    assert!(!Sghmc::new(given, Minibatch::new(10)).unwrap().kernel().takes_noise_correction());
    let sgnht = Sgnht::new(SgnhtSettings::constant(1e-3, 1.0), Minibatch::new(10)).unwrap();
    assert_eq!(sgnht.kernel().centre_rule().step(4.0), Some(0.5));
    assert_eq!(sgnht.kernel().mixing_exponent(), None);
    let psgld = Psgld::new(PsgldSettings { damping: 1e-3, ..Default::default() }, Minibatch::new(10)).unwrap();
    assert_eq!(psgld.kernel().centre_rule(), CentreRule::SettledMetric { damping: 1e-3 });
    assert_eq!(psgld.kernel().centre_rule().step(4.0), None);
    // A rebuilt kernel keeps its other settings and refuses a non-positive step.
    let rebuilt = sghmc.kernel().at_constant_step(2e-3).unwrap();
    assert_eq!(Sghmc::with_kernel(rebuilt, Minibatch::new(10)).settings().friction, 0.1);
    assert!(sgld.kernel().at_constant_step(-1.0).is_err());
}
