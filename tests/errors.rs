//! Every error variant is produced by the input that should produce it, and nothing panics.

use ndarray::{Array1, Array2, array};
use rand::Rng;
use sgmcmc::*;
use std::sync::atomic::{AtomicU64, Ordering};

fn lg() -> LinearGaussian {
    LinearGaussian::synthetic(100, 2, 1.0, 1.0, 1).unwrap()
}

fn sgld(step: f64, batch: usize) -> Sgld {
    Sgld::new(SgldSettings { step_size: StepSize::Constant(step) }, Minibatch::new(batch)).unwrap()
}

fn quick() -> RunSettings {
    RunSettings { n_iter: 100, burn_in: 10, ..Default::default() }
}

fn is_param(e: Error, name: &str) -> bool {
    matches!(e, Error::InvalidParameter { name: n, .. } if n == name)
}

#[test]
fn invalid_parameters_name_the_field() {
    let bad = |s: f64| Sgld::new(SgldSettings { step_size: StepSize::Constant(s) }, Minibatch::new(1)).unwrap_err();
    assert!(is_param(bad(0.0), "step_size"));
    assert!(is_param(bad(-1.0), "step_size"));
    assert!(is_param(bad(f64::NAN), "step_size"));
    assert!(is_param(bad(f64::INFINITY), "step_size"));
    let poly = SgldSettings { step_size: StepSize::Polynomial { gamma1: 1.0, alpha: -0.5 } };
    assert!(is_param(Sgld::new(poly, Minibatch::new(1)).unwrap_err(), "step_size"));
    let sh = |f: f64, b: f64| {
        Sghmc::new(
            SghmcSettings { step_size: StepSize::Constant(1e-3), friction: f, noise_estimate: b },
            Minibatch::new(1),
        )
        .unwrap_err()
    };
    assert!(is_param(sh(0.0, 0.0), "friction"));
    assert!(is_param(sh(1.5, 0.0), "friction"));
    assert!(is_param(sh(0.1, 0.1), "noise_estimate"));
    assert!(is_param(sh(0.1, -0.1), "noise_estimate"));
    let sh_lr = SghmcSettings { step_size: StepSize::Shifted { a: 1.0, b: -2.0, c: 0.5 }, ..SghmcSettings::default() };
    assert!(is_param(Sghmc::new(sh_lr, Minibatch::new(1)).unwrap_err(), "step_size"));
    assert!(is_param(Mala::new(MalaSettings::fixed(0.0)).unwrap_err(), "step_size"));
    assert!(is_param(
        Mala::new(MalaSettings { target_accept: 1.0, ..Default::default() }).unwrap_err(),
        "target_accept"
    ));
    let m = lg();
    let s = sgld(1e-3, 10);
    let r = |rs: RunSettings| Runner::new(&m, &s).start(&[0.0, 0.0]).settings(rs).run().unwrap_err();
    assert!(is_param(r(RunSettings { n_iter: 0, burn_in: 0, ..quick() }), "n_iter"));
    assert!(is_param(r(RunSettings { n_iter: 10, burn_in: 10, ..quick() }), "burn_in"));
    assert!(is_param(r(RunSettings { thin: 0, ..quick() }), "thin"));
    assert!(is_param(r(RunSettings { n_chains: 0, ..quick() }), "n_chains"));
    assert!(is_param(LinearGaussian::synthetic(10, 2, 0.0, 1.0, 1).unwrap_err(), "noise_var"));
    assert!(is_param(LinearGaussian::synthetic(10, 2, 1.0, -1.0, 1).unwrap_err(), "prior_var"));
    assert!(is_param(LinearGaussian::new(&array![[1.0, f64::NAN]], &array![1.0], 1.0, 1.0).unwrap_err(), "design"));
    assert!(is_param(LinearGaussian::new(&array![[1.0, 2.0]], &array![f64::NAN], 1.0, 1.0).unwrap_err(), "targets"));
    assert!(is_param(LogisticRegression::new(&array![[1.0]], &array![0.5], 1.0).unwrap_err(), "labels"));
    assert!(is_param(Estimate::from_weighted(array![[1.0]], array![f64::INFINITY]).unwrap_err(), "weights"));
}

#[test]
fn dimension_mismatches_say_what_and_sizes() {
    let m = lg();
    let e = Runner::new(&m, &sgld(1e-3, 10)).start(&[0.0, 0.0, 0.0]).settings(quick()).run().unwrap_err();
    assert_eq!(e.root(), &Error::DimensionMismatch { what: "initial state theta0", expected: 2, got: 3 });
    assert!(matches!(e, Error::Chain { chain: 0, .. }));
    let e = LinearGaussian::new(&Array2::zeros((3, 2)), &Array1::zeros(4), 1.0, 1.0).unwrap_err();
    assert_eq!(e, Error::DimensionMismatch { what: "targets", expected: 3, got: 4 });
    let e = Runner::new(&m, &sgld(1e-3, 10))
        .starts(&[&[0.0, 0.0]])
        .settings(RunSettings { n_chains: 2, ..quick() })
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { expected: 2, got: 1, .. }));
    // A sampler bound to a d = 2 model, stepped with a d = 3 model.
    let mut s = sgld(1e-3, 10);
    let mut rng = sgmcmc::rng::stream(0, &[0]);
    s.init(&m, &[0.0, 0.0], &mut rng).unwrap();
    let m3 = LinearGaussian::synthetic(100, 3, 1.0, 1.0, 1).unwrap();
    assert!(matches!(s.step(&m3, &mut rng), Err(Error::DimensionMismatch { expected: 2, got: 3, .. })));
    assert!(matches!(
        s.step_fraction(&m, 1, 1.0, &[0.0; 3], &mut rng),
        Err(Error::DimensionMismatch { what: "noise increment z", .. })
    ));
    let mut mo = Moments::new(2);
    assert!(matches!(mo.push(&[1.0], 1.0), Err(Error::DimensionMismatch { .. })));
}

/// A user model with configurable size and a gradient that turns NaN at a chosen call.
struct Custom {
    n: usize,
    d: usize,
    nan_from_call: u64,
    calls: AtomicU64,
    potential: Option<f64>,
}

impl Custom {
    fn new(n: usize, d: usize) -> Self {
        Custom { n, d, nan_from_call: u64::MAX, calls: AtomicU64::new(0), potential: None }
    }
}

impl Model for Custom {
    fn dim(&self) -> usize {
        self.d
    }
    fn n_data(&self) -> usize {
        self.n
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        out.copy_from_slice(theta);
        Ok(())
    }
    fn grad_data_sum(&self, theta: &[f64], _idx: &[usize], out: &mut [f64]) -> Result<()> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let v = if call >= self.nan_from_call { f64::NAN } else { 0.0 };
        for (o, t) in out.iter_mut().zip(theta) {
            *o = t * 0.0 + v;
        }
        Ok(())
    }
    fn potential_prior(&self, _theta: &[f64]) -> Result<f64> {
        self.potential.ok_or(Error::Unsupported { method: "potential_prior", needed_by: "a potential" })
    }
    fn potential_data_sum(&self, _theta: &[f64], _idx: &[usize]) -> Result<f64> {
        self.potential.ok_or(Error::Unsupported { method: "potential_data_sum", needed_by: "a potential" })
    }
}

#[test]
fn empty_data_and_batch_sizes() {
    let e = Runner::new(&Custom::new(0, 2), &sgld(1e-3, 1)).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err();
    assert!(matches!(e.root(), Error::EmptyData { .. }));
    let e = Runner::new(&Custom::new(5, 0), &sgld(1e-3, 1)).start(&[]).settings(quick()).run().unwrap_err();
    assert!(matches!(e.root(), Error::EmptyData { .. }));
    assert!(matches!(
        LinearGaussian::new(&Array2::zeros((0, 2)), &Array1::zeros(0), 1.0, 1.0),
        Err(Error::EmptyData { .. })
    ));
    let m = lg();
    let e = Runner::new(&m, &sgld(1e-3, 0)).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err();
    assert_eq!(e.root(), &Error::InvalidBatchSize { batch_size: 0, n_data: 100 });
    let e = Runner::new(&m, &sgld(1e-3, 101)).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err();
    assert_eq!(e.root(), &Error::InvalidBatchSize { batch_size: 101, n_data: 100 });
    let wo = Sgld::new(SgldSettings::default(), Minibatch::without_replacement(101)).unwrap();
    assert!(matches!(
        Runner::new(&m, &wo).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err().root(),
        Error::InvalidBatchSize { .. }
    ));
    // n = N is valid.
    assert!(Runner::new(&m, &sgld(1e-4, 100)).start(&[0.0, 0.0]).settings(quick()).run().is_ok());
}

#[test]
fn non_finite_values_report_the_iteration() {
    // Gradient call 1 is at θ₀ (iteration 0); call k + 1 is at the end of step k (the model
    // check, which would make calls of its own, is off).
    let unchecked = RunSettings { check_model: false, ..quick() };
    let mut m = Custom::new(10, 2);
    m.nan_from_call = 6;
    let e = Runner::new(&m, &sgld(1e-3, 2)).start(&[0.0, 0.0]).settings(unchecked).run().unwrap_err();
    assert_eq!(e.root(), &Error::NonFiniteGradient { iteration: 5 });
    let mut m = Custom::new(10, 2);
    m.nan_from_call = 1;
    let e = Runner::new(&m, &sgld(1e-3, 2)).start(&[0.0, 0.0]).settings(unchecked).run().unwrap_err();
    // At the start it is located: this model's data gradients are NaN from call 1 on, so the
    // first datum's, coordinate 0.
    assert_eq!(e.root(), &Error::NonFiniteGradientAt { iteration: 0, coordinate: 0, datum: Some(0) });
    // A non-finite starting point: its own error, not a divergence.
    let e = Runner::new(&lg(), &sgld(1e-3, 2)).start(&[f64::NAN, 0.0]).settings(quick()).run().unwrap_err();
    assert_eq!(e.root(), &Error::NonFiniteStart { what: "theta0" });
    // Divergence: a step far beyond the stability limit 2/λ_max. θ grows geometrically; whichever
    // comes first — the runaway detector (from iteration 64), an overflowing state or the
    // gradient at it — is reported with its iteration.
    let e = Runner::new(&lg(), &sgld(10.0, 10))
        .start(&[1.0, 1.0])
        .settings(RunSettings { n_iter: 10_000, ..quick() })
        .run()
        .unwrap_err();
    match e.root() {
        Error::NonFiniteState { iteration }
        | Error::NonFiniteGradient { iteration }
        | Error::Runaway { iteration, .. } => {
            assert!(*iteration > 1 && *iteration < 1_000)
        }
        other => panic!("expected a non-finite state or gradient, got {other:?}"),
    }
    // Without the detector, the overflow itself is reported.
    let e = Runner::new(&lg(), &sgld(10.0, 10))
        .start(&[1.0, 1.0])
        .settings(RunSettings { n_iter: 10_000, runaway_factor: None, ..quick() })
        .run()
        .unwrap_err();
    assert!(matches!(e.root(), Error::NonFiniteState { .. } | Error::NonFiniteGradient { .. }), "{e:?}");
    // A state that overflows while its gradient stays finite (bounded gradient, huge step).
    let e = Runner::new(&Custom::new(10, 2), &sgld(1e308, 2)).start(&[1.0, 1.0]).settings(quick()).run().unwrap_err();
    assert!(matches!(e.root(), Error::NonFiniteState { iteration: 1 }), "{e:?}");
    let sghmc =
        Sghmc::new(SghmcSettings { step_size: StepSize::Constant(10.0), ..Default::default() }, Minibatch::new(10))
            .unwrap();
    assert!(matches!(
        Runner::new(&lg(), &sghmc)
            .start(&[1.0, 1.0])
            .settings(RunSettings { n_iter: 10_000, ..quick() })
            .run()
            .unwrap_err()
            .root(),
        Error::NonFiniteState { .. } | Error::NonFiniteGradient { .. } | Error::Runaway { .. }
    ));
    // MALA: a NaN potential.
    let mut m = Custom::new(10, 2);
    m.potential = Some(f64::NAN);
    let mala = Mala::new(MalaSettings::fixed(1e-4)).unwrap();
    assert_eq!(
        Runner::new(&m, &mala).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err().root(),
        &Error::NonFinitePotential { iteration: 0 }
    );
}

#[test]
fn missing_model_methods_are_unsupported() {
    let m = Custom::new(10, 2);
    let mala = Mala::new(MalaSettings::fixed(1e-4)).unwrap();
    let e = Runner::new(&m, &mala).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err();
    assert_eq!(e.root(), &Error::Unsupported { method: "potential_prior", needed_by: "MALA" });
    let mut out = [0.0; 2];
    assert!(matches!(m.hvp_data_sum(&[0.0; 2], &[1.0; 2], &[0], &mut out), Err(Error::Unsupported { .. })));
    assert!(matches!(m.hvp_prior(&[0.0; 2], &[1.0; 2], &mut out), Err(Error::Unsupported { .. })));
    assert!(e.is_unsupported() && m.potential_data_sum(&[0.0; 2], &[0]).unwrap_err().is_unsupported());
    // Without potentials the model check falls back to the curvature test; with them it compares.
    assert!(!check_model(&m, &[0.0; 2], &CheckSettings::default()).unwrap().used_potentials);
    let with = Custom { potential: Some(0.0), ..Custom::new(10, 2) };
    assert!(check_model(&with, &[0.0; 2], &CheckSettings::default()).unwrap().used_potentials);
}

/// A potential that fails (not "not provided") is the model's error, not a reason to skip the
/// comparison with finite differences: `check_model`, MALA and runs report it.
#[test]
fn a_failing_potential_is_reported_not_read_as_absent() {
    struct BadPotential(LinearGaussian);
    impl Model for BadPotential {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn n_data(&self) -> usize {
            self.0.n_data()
        }
        fn grad_prior(&self, t: &[f64], out: &mut [f64]) -> Result<()> {
            self.0.grad_prior(t, out)
        }
        fn grad_data_sum(&self, t: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
            self.0.grad_data_sum(t, idx, out)
        }
        fn potential_prior(&self, t: &[f64]) -> Result<f64> {
            self.0.potential_prior(t)
        }
        fn potential_data_sum(&self, _: &[f64], _: &[usize]) -> Result<f64> {
            Err(Error::model_failure("potential_data_sum", "engine exploded"))
        }
    }
    let m = BadPotential(LinearGaussian::synthetic(50, 2, 1.0, 1.0, 3).unwrap());
    let e = check_model(&m, &[0.1, 0.2], &CheckSettings::default()).unwrap_err();
    assert!(matches!(&e, Error::ModelFailure { method: "potential_data_sum", .. }), "{e}");
    assert!(!e.is_unsupported());
    let mala = Mala::new(MalaSettings::fixed(1e-3)).unwrap();
    let e = Runner::new(&m, &mala)
        .start(&[0.1, 0.2])
        .settings(RunSettings { check_model: false, ..quick() })
        .run()
        .unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { method: "potential_data_sum", iteration: Some(0), .. }), "{e}");
}

/// A sampler that keeps no gradient (the trait's default), to test storage requests.
#[derive(Clone, Debug)]
struct NoGrad(Vec<f64>, u64);

impl Sampler for NoGrad {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], _rng: &mut R) -> Result<()> {
        let _ = model;
        self.0 = theta0.to_vec();
        Ok(())
    }
    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, _model: &M, rng: &mut R) -> Result<()> {
        self.0[0] = rng.next_u32() as f64;
        self.1 += 1;
        Ok(())
    }
    fn position(&self) -> &[f64] {
        &self.0
    }
    fn iteration(&self) -> u64 {
        self.1
    }
    fn cost(&self) -> Cost {
        Cost::default()
    }
}

#[test]
fn not_initialised_not_stored_no_samples_zero_weight() {
    let m = lg();
    let mut s = sgld(1e-3, 10);
    let mut rng = sgmcmc::rng::stream(0, &[0]);
    assert_eq!(s.step(&m, &mut rng), Err(Error::NotInitialised));
    let mut mala = Mala::new(MalaSettings::default()).unwrap();
    assert_eq!(mala.step(&m, &mut rng), Err(Error::NotInitialised));
    let e = Runner::new(&m, &NoGrad(vec![], 0))
        .start(&[0.0, 0.0])
        .settings(RunSettings { storage: Storage::SamplesAndGradients, ..quick() })
        .run()
        .unwrap_err();
    assert!(matches!(e.root(), Error::NotStored { .. }));
    let out = Runner::new(&m, &sgld(1e-3, 10))
        .start(&[0.0, 0.0])
        .settings(RunSettings { storage: Storage::Moments, ..quick() })
        .run()
        .unwrap();
    assert!(out.estimate.mean().is_ok());
    assert!(matches!(out.estimate.expectation(|t| t[0]), Err(Error::NotStored { .. })));
    assert!(matches!(out.estimate.stacked_draws(), Err(Error::NotStored { .. })));
    assert!(matches!(Estimate::combine(Vec::new()), Err(Error::NoSamples { .. })));
    assert!(matches!(Estimate::from_moments(Moments::new(2)).covariance(), Err(Error::NoSamples { .. })));
    let signed = Estimate::from_weighted(array![[1.0], [2.0]], array![0.5, -0.5]).unwrap();
    assert_eq!(signed.mean(), Err(Error::ZeroTotalWeight));
}

#[test]
fn user_inputs_are_not_changed() {
    let m = lg();
    let theta0 = vec![0.25, -0.5];
    let s = sgld(1e-3, 10);
    let out = Runner::new(&m, &s).start(&theta0).settings(quick()).run().unwrap();
    assert_eq!(theta0, vec![0.25, -0.5]);
    // The template sampler is unchanged (never initialised); each chain got its own clone.
    let mut t = s.clone();
    assert_eq!(t.step(&m, &mut sgmcmc::rng::stream(0, &[0])), Err(Error::NotInitialised));
    assert_eq!(out.chains[0].sampler.iteration(), 100);
}

#[test]
fn errors_display_their_details() {
    let e = Error::Chain { chain: 3, source: Box::new(Error::NonFiniteGradient { iteration: 17 }) };
    assert_eq!(e.to_string(), "chain 3: non-finite gradient at iteration 17");
    let e = Error::InvalidBatchSize { batch_size: 0, n_data: 10 };
    assert!(e.to_string().contains("batch size 0"));
}

/// A model whose gradient fails (as an AD engine can) on its `fail_at`-th call of
/// `grad_data_sum`: the failure comes back as `ModelFailure` with the sampler's iteration
/// and the chain, from every sampler family, and the run stops; nothing panics.
struct Failing {
    inner: LinearGaussian,
    calls: AtomicU64,
    fail_at: u64,
}

impl Model for Failing {
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
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
            return Err(Error::model_failure("grad_data_sum", "engine exploded"));
        }
        self.inner.grad_data_sum(theta, idx, out)
    }
    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        self.inner.potential_prior(theta)
    }
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        self.inner.potential_data_sum(theta, idx)
    }
}

#[test]
fn a_failing_model_gradient_is_a_typed_error_with_iteration_and_chain() {
    let failing = |fail_at| Failing { inner: lg(), calls: AtomicU64::new(0), fail_at };
    let settings = RunSettings { n_iter: 100, burn_in: 10, check_model: false, ..Default::default() };
    let expect = |e: Error, it: u64| {
        // After iterations were made, the error keeps the run's output around the chain's error.
        assert_eq!(e.chain(), Some(0), "{e}");
        if it > 0 {
            let out: RunOutput<Sgld<Minibatch>> = e.clone().into_output().expect("the output is kept");
            assert_eq!(out.chains[0].iterations, it - 1, "{e}");
            assert_eq!(out.divergences[0].iteration, it, "{e}");
        }
        match e.root() {
            Error::ModelFailure { method: "grad_data_sum", iteration: Some(k), message } => {
                assert_eq!(*k, it, "{e}");
                assert_eq!(message, "engine exploded");
            }
            other => panic!("expected ModelFailure, got {other:?}"),
        }
        assert!(e.to_string().contains(&format!("at iteration {it}")), "{e}");
    };
    // SGLD: one call at init (iteration 0), one per step: call 38 is the gradient at θ₃₇.
    expect(Runner::new(&failing(38), &sgld(1e-3, 10)).start(&[0.0, 0.0]).settings(settings).run().unwrap_err(), 37);
    // SGLD-CV: the control variate's own setup pass fails before any chain exists.
    let e =
        ControlVariate::at(&failing(1), &[0.0, 0.0], CvSettings { batch_size: 10, ..Default::default() }).unwrap_err();
    assert!(matches!(e, Error::ModelFailure { iteration: None, .. }), "{e}");
    // MALA (full gradients): call 5 is the gradient at the 4th proposal.
    let mala = Mala::new(MalaSettings::fixed(1e-3)).unwrap();
    let e = Runner::new(&failing(5), &mala).start(&[0.0, 0.0]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { iteration: Some(_), .. }), "{e}");
    // HAMCMC.
    let h = Hamcmc::new(HamcmcSettings { memory: 3, ..Default::default() }, Minibatch::new(10)).unwrap();
    let e = Runner::new(&failing(30), &h).start(&[0.0, 0.0]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { iteration: Some(_), .. }), "{e}");
    // Richardson–Romberg and the SVRG / SAGA estimators pass it on too.
    let e = Runner::new(&failing(40), &RichardsonRomberg::new(sgld(1e-3, 10)))
        .start(&[0.0, 0.0])
        .settings(settings)
        .run()
        .unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { iteration: Some(_), .. }), "{e}");
    let svrg = Sgld::new(SgldSettings::constant(1e-3), Svrg::new(10)).unwrap();
    let e = Runner::new(&failing(20), &svrg).start(&[0.0, 0.0]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { iteration: Some(_), .. }), "{e}");
    let saga = Sgld::new(SgldSettings::constant(1e-3), Saga::new(10)).unwrap();
    let e = Runner::new(&failing(150), &saga).start(&[0.0, 0.0]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { iteration: Some(_), .. }), "{e}");
    // With the start-up model check on, the failure is reported by the check (no iteration).
    let e = Runner::new(&failing(1), &sgld(1e-3, 10)).start(&[0.0, 0.0]).settings(quick()).run().unwrap_err();
    assert!(matches!(e.root(), Error::ModelFailure { iteration: None, .. }), "{e}");
}

/// A model that panics at its `at`-th data-gradient call.
struct Panics {
    inner: LinearGaussian,
    calls: AtomicU64,
    at: u64,
}

impl Model for Panics {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn n_data(&self) -> usize {
        self.inner.n_data()
    }
    fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
        self.inner.grad_prior(t, o)
    }
    fn grad_data_sum(&self, t: &[f64], i: &[usize], o: &mut [f64]) -> Result<()> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            panic!("the model panicked on purpose");
        }
        self.inner.grad_data_sum(t, i, o)
    }
}

/// A panic in one chain of a parallel run is caught at the chain's boundary: a typed error
/// naming the chain, the iteration and the panic's message, with the draws of every chain up to
/// then kept in the error (the other chains ran to their end), and nothing hangs.
#[test]
fn a_panic_in_one_chain_is_a_typed_error_and_the_draws_are_kept() {
    let model =
        Panics { inner: LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap(), calls: AtomicU64::new(0), at: 500 };
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let settings = RunSettings { n_iter: 1_000, burn_in: 0, n_chains: 4, check_model: false, ..Default::default() };
    let starts = [[0.0, 0.0]; 4];
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Runner::new(&model, &sgld).starts(&starts).settings(settings).run()
    }));
    std::panic::set_hook(hook);
    let e = r.expect("no panic reaches the caller").expect_err("the run fails");
    let chain = e.chain().expect("the chain is named");
    let Error::Panic { iteration, message, during } = e.root().clone() else {
        panic!("expected Error::Panic, got {e:?}")
    };
    assert_eq!(message, "the model panicked on purpose");
    assert!(during.contains("step"), "{e}");
    assert!(e.to_string().contains(&format!("chain {chain}: a panic in")), "{e}");
    let out: RunOutput<Sgld<Minibatch>> = e.into_output().expect("the draws are kept");
    // The panicking chain: its draws up to the panic, recorded as a divergence at its iteration.
    assert_eq!(out.divergences.len(), 1);
    let div = &out.divergences[0];
    assert_eq!((div.chain, div.iteration), (chain, iteration));
    assert_eq!(out.chains[chain].iterations, iteration - 1);
    assert_eq!(div.draws[0].samples(0).expect("stored draws").len(), (iteration - 1) as usize);
    // The other three ran to their end, their draws pooled.
    assert_eq!(out.chains.iter().filter(|c| c.iterations == 1_000).count(), 3);
    assert_eq!(out.estimate.n_parts(), 3);
}

/// An observer that panics is caught alike, naming the observer.
#[test]
fn a_panicking_observer_is_a_typed_error() {
    struct Bad;
    impl sgmcmc::observe::Observer for Bad {
        fn interval(&self) -> u64 {
            100
        }
        fn observe(&self, p: &sgmcmc::observe::Progress<'_>) -> sgmcmc::observe::Control {
            assert!(p.iteration < 300, "observer bug at {}", p.iteration);
            sgmcmc::observe::Control::Continue
        }
    }
    let m = lg();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let settings = RunSettings { n_iter: 1_000, burn_in: 0, parallel: false, ..Default::default() };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let e = Runner::new(&m, &sgld).start(&[0.0, 0.0]).settings(settings).observer(&Bad).run().unwrap_err();
    std::panic::set_hook(hook);
    assert!(
        matches!(e.root(), Error::Panic { during: "an observer", iteration: 300, message } if message.contains("observer bug at 300")),
        "{e:?}"
    );
    let out: RunOutput<Sgld<Minibatch>> = e.into_output().expect("kept");
    assert_eq!(out.chains[0].iterations, 300);
}

/// A gradient-noise correction: a non-square, asymmetric or indefinite covariance, too few
/// points, an estimator whose draws are not independent, a whitening or a sampler of another
/// dimension — each a specific error, and nothing changed.
#[test]
fn gradient_noise_errors_name_the_culprit() {
    use ndarray::arr2;
    let m = lg();
    let d = m.dim();
    let bad = GradientNoise::from_covariance(&Array2::zeros((2, 3))).unwrap_err();
    assert!(matches!(bad, Error::DimensionMismatch { what: "gradient-noise covariance columns", .. }), "{bad}");
    let bad = GradientNoise::from_covariance(&arr2(&[[1.0, 0.5], [0.0, 1.0]])).unwrap_err();
    assert!(matches!(bad, Error::LinearAlgebra { what: "gradient-noise covariance", .. }), "{bad}");
    let bad = GradientNoise::from_covariance(&arr2(&[[1.0, 2.0], [2.0, 1.0]])).unwrap_err();
    assert!(is_param(bad, "gradient-noise covariance"));
    let w = Whitening::from_covariance(m.posterior_mean().as_slice().unwrap(), m.posterior_covariance()).unwrap();
    let mut rng = sgmcmc::rng::stream(1, &[0]);
    let mb = Minibatch::new(10);
    assert!(is_param(GradientNoise::estimate(&m, &mb, &w, 1, &mut rng).unwrap_err(), "gradient-noise points"));
    let svrg = Svrg::new(10);
    assert!(is_param(GradientNoise::estimate(&m, &svrg, &w, 100, &mut rng).unwrap_err(), "gradient-noise estimator"));
    let other = Whitening::diagonal(&vec![0.0; d + 1], &vec![1.0; d + 1]).unwrap();
    let bad = GradientNoise::estimate(&m, &mb, &other, 100, &mut rng).unwrap_err();
    assert!(matches!(bad, Error::DimensionMismatch { what: "whitening dimension", .. }), "{bad}");
    // A sampler given a noise of another dimension refuses to start.
    let noise = GradientNoise::from_covariance(&Array2::eye(d + 1)).unwrap();
    let s = sgld(1e-4, 10).with_gradient_noise(Some(noise.into()));
    let bad = Runner::new(&m, &s).start(&vec![0.0; d]).settings(quick()).run().unwrap_err();
    assert!(format!("{bad}").contains("gradient-noise dimension"), "{bad}");
}

/// Storage the machine cannot give is a typed error, not an abort: 10¹³ kept draws of two
/// numbers with no memory limit (the allocator refuses 160 TB), and a draw count whose byte size
/// overflows.
#[test]
fn storage_the_machine_cannot_give_is_out_of_memory() {
    let settings = RunSettings { n_iter: 10_000_000_000_000, burn_in: 0, memory_limit: None, ..Default::default() };
    let e = Runner::new(&lg(), &sgld(1e-4, 10)).start(&[0.0, 0.0]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::OutOfMemory { what: "the run's stored draws", limit: None, .. }), "{e:?}");
    let settings = RunSettings { n_iter: u64::MAX, burn_in: 0, memory_limit: None, ..Default::default() };
    let e = Runner::new(&lg(), &sgld(1e-4, 10)).start(&[0.0, 0.0]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::OutOfMemory { .. }), "{e:?}");
}

/// `Sample::chain_starts` checks each start before any tuning: a wrong length is a dimension
/// mismatch naming the chain starts, a non-finite one a non-finite start; none is an empty run.
#[test]
fn chain_starts_are_checked_before_tuning() {
    let m = lg();
    let e = Sample::new(&m, sgld(1e-3, 10)).draws(100).chain_starts(&[vec![0.0, 0.0], vec![0.0]]).run().unwrap_err();
    assert!(
        matches!(e, Error::DimensionMismatch { what, expected: 2, got: 1 } if what.contains("chain_starts")),
        "{e}"
    );
    let e = Sample::new(&m, sgld(1e-3, 10)).draws(100).chain_starts(&[[0.0, f64::NAN]]).run().unwrap_err();
    assert!(matches!(e, Error::NonFiniteStart { .. }), "{e}");
    let none: [[f64; 2]; 0] = [];
    let e = Sample::new(&m, sgld(1e-3, 10)).draws(100).chain_starts(&none).run().unwrap_err();
    assert!(matches!(e, Error::InvalidParameter { .. }), "{e}");
}
