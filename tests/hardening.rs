//! The bad inputs of a hostile but fair user, each as the user would call it, each one test that
//! fails if its typed error regresses: sizes refused before anything is allocated (each within a
//! second, where an allocation of that size would abort the process), user panics contained with
//! the draws kept, wrong gradients and bad data named by their culprit.

use ndarray::{Array1, Array2, array};
use sgmcmc::*;
use std::time::{Duration, Instant};

/// How long a refusal may take: it must not allocate or run (an allocation of these sizes
/// aborts the process, and a run of 10⁹ chains never ends), so a second is ample.
const AT_ONCE: Duration = Duration::from_secs(1);

fn lg() -> LinearGaussian {
    LinearGaussian::synthetic(100, 2, 1.0, 10.0, 1).unwrap()
}

fn sgld() -> Sgld {
    Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(10)).unwrap()
}

/// `OutOfMemory` naming `what` (a substring), with the limit, within [`AT_ONCE`].
fn refused<T: std::fmt::Debug>(what: &str, started: Instant, r: Result<T>) {
    let e = r.expect_err("refused");
    assert!(started.elapsed() < AT_ONCE, "took {:?}: {e}", started.elapsed());
    match &e {
        Error::OutOfMemory { what: w, needed, limit: Some(limit) } => {
            assert!(w.contains(what), "{e}");
            assert!(needed > limit, "{e}");
        }
        other => panic!("expected OutOfMemory naming {what:?}, got {other:?}"),
    }
    assert!(e.to_string().contains("bytes"), "{e}");
}

/// A model of any dimension that allocates nothing itself.
struct Wide(usize);

impl Model for Wide {
    fn dim(&self) -> usize {
        self.0
    }
    fn n_data(&self) -> usize {
        10
    }
    fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
        o.copy_from_slice(t);
        Ok(())
    }
    fn grad_data_sum(&self, _: &[f64], _: &[usize], o: &mut [f64]) -> Result<()> {
        o.fill(0.0);
        Ok(())
    }
}

#[test]
fn a_billion_chains_in_a_runner_are_refused_before_any_start_is_built() {
    let (m, s) = (lg(), sgld());
    for storage in [Storage::Samples, Storage::Moments] {
        let st = RunSettings { n_iter: 10, burn_in: 0, n_chains: 1_000_000_000, storage, ..Default::default() };
        let t = Instant::now();
        refused("n_chains", t, Runner::new(&m, &s).start(&[0.0, 0.0]).settings(st).run());
        let rr = RichardsonRomberg::new(s.clone());
        let t = Instant::now();
        refused("n_chains", t, Runner::new(&m, &rr).start(&[0.0, 0.0]).settings(st).run());
    }
}

#[test]
fn a_billion_chains_in_sample_are_refused_before_tuning() {
    let m = lg();
    let t = Instant::now();
    refused("Sample::chains", t, Sample::new(&m, Sgld::auto()).chains(1_000_000_000).run());
}

#[test]
fn synthetic_data_sets_of_two_to_the_forty_are_refused() {
    let t = Instant::now();
    refused("synthetic data set", t, LinearGaussian::synthetic(10, 1 << 40, 1.0, 1.0, 1));
    refused("synthetic data set", t, LinearGaussian::synthetic(1 << 40, 10, 1.0, 1.0, 1));
    refused("synthetic data set", t, LogisticRegression::synthetic(10, 1 << 40, 1.0, 1));
    refused("synthetic data set", t, Glm::synthetic(Family::Poisson, 1 << 40, 3, 1));
    refused("synthetic ratings", t, Ratings::synthetic(10, 10, 2, 1 << 60, 0.1, 1));
}

#[test]
fn a_model_of_dimension_two_to_the_forty_or_usize_max_is_refused() {
    for d in [1usize << 40, usize::MAX] {
        let t = Instant::now();
        refused("Sample::chains", t, Sample::new(&Wide(d), Sgld::auto()).run());
        let st = RunSettings { storage: Storage::Moments, ..Default::default() };
        let t = Instant::now();
        refused("n_chains", t, Runner::new(&Wide(d), &sgld()).start(&[0.0]).settings(st).run());
    }
}

#[test]
fn draws_zero_is_named_as_draws() {
    let e = Sample::new(&lg(), Sgld::auto()).draws(0).run().unwrap_err();
    assert!(matches!(e, Error::InvalidParameter { name: "draws", .. }), "{e}");
}

/// ∇log p where ∇U is asked for, with potentials: through `Sample`, the error is the wrong sign
/// (not the mode search's or the Hessian's).
struct WrongSign;

impl Model for WrongSign {
    fn dim(&self) -> usize {
        2
    }
    fn n_data(&self) -> usize {
        100
    }
    fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
        o.iter_mut().zip(t).for_each(|(o, t)| *o = 1.0 - t);
        Ok(())
    }
    fn grad_data_sum(&self, t: &[f64], i: &[usize], o: &mut [f64]) -> Result<()> {
        o.iter_mut().zip(t).for_each(|(o, t)| *o = (1.0 - t) * i.len() as f64);
        Ok(())
    }
    fn potential_prior(&self, t: &[f64]) -> Result<f64> {
        Ok(0.5 * t.iter().map(|x| (x - 1.0) * (x - 1.0)).sum::<f64>())
    }
    fn potential_data_sum(&self, t: &[f64], i: &[usize]) -> Result<f64> {
        Ok(0.5 * i.len() as f64 * t.iter().map(|x| (x - 1.0) * (x - 1.0)).sum::<f64>())
    }
}

#[test]
fn a_wrong_sign_gradient_through_sample_is_reported_as_the_wrong_sign() {
    let e = Sample::new(&WrongSign, Sgld::auto()).run().unwrap_err();
    assert!(matches!(e, Error::GradientSign { .. }), "{e}");
    assert!(e.to_string().contains("negate it"), "{e}");
}

#[test]
fn the_mode_search_failure_is_a_readable_sentence() {
    let e = Error::NotConverged {
        what: "the mode search (L-BFGS, then Newton up to ModeSettings::newton_max_dim)",
        iterations: 1,
        residual: 2.0,
    };
    let msg = e.to_string();
    assert!(msg.starts_with("the mode search (L-BFGS, then Newton up to ModeSettings::newton_max_dim) did not converge in 1 iteration (residual 2e0): raise"), "{msg}");
    assert!(msg.contains("check_model"), "{msg}");
}

fn csv(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sgmcmc-hardening-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn non_finite_csv_cells_are_named_by_line_and_column() {
    let settings = GlmSettings::default();
    for cell in ["NaN", "inf", "-inf"] {
        let p = csv("nan.csv", &format!("y,a,b\n1,0.5,1.0\n0,{cell},2.0\n1,0.1,3.0\n"));
        let e = Glm::from_csv(Family::Logistic, &p, "y", &settings).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("line 3, column `a`") && msg.contains("not a finite number"), "{msg}");
    }
    // Blank lines are counted as an editor counts them.
    let p = csv("blank.csv", "y,a,b\n1,0.5,1.0\n\n0,NaN,2.0\n");
    let msg = Glm::from_csv(Family::Logistic, &p, "y", &settings).unwrap_err().to_string();
    assert!(msg.contains("line 4, column `a`"), "{msg}");
}

#[test]
fn constant_and_duplicate_csv_columns_are_refused_by_name() {
    let settings = GlmSettings::default();
    let p = csv("constant.csv", "y,a,ones\n1,0.5,1\n0,0.7,1\n1,0.1,1\n");
    let msg = Glm::from_csv(Family::Logistic, &p, "y", &settings).unwrap_err().to_string();
    assert!(msg.contains("column `ones` = 1 in every row") && msg.contains("constant covariate"), "{msg}");
    let p = csv("duplicate.csv", "y,a,a\n1,0.5,1\n0,0.7,2\n1,0.1,3\n");
    let msg = Glm::from_csv(Family::Logistic, &p, "y", &settings).unwrap_err().to_string();
    assert!(msg.contains("column `a` (columns 2 and 3)") && msg.contains("same name"), "{msg}");
}

#[test]
fn non_finite_array_cells_are_named_by_row_and_column() {
    let mut x = Array2::<f64>::zeros((5, 3));
    x[[3, 1]] = f64::NAN;
    let y = Array1::from(vec![0.0, 1.0, 0.0, 1.0, 1.0]);
    for e in [
        Glm::new(Family::Logistic, &x, &y, &GlmSettings::default()).unwrap_err(),
        LogisticRegression::new(&x, &y, 1.0).unwrap_err(),
        LinearGaussian::new(&x, &y, 1.0, 1.0).unwrap_err(),
    ] {
        assert!(e.to_string().contains("NaN at row 3, column 1 (0-based)"), "{e}");
    }
    let e = LinearGaussian::new(&array![[1.0], [2.0]], &array![0.0, f64::INFINITY], 1.0, 1.0).unwrap_err();
    assert!(e.to_string().contains("inf at index 1 (0-based)"), "{e}");
    let e = LogisticRegression::new(&array![[1.0], [2.0]], &array![0.0, 0.5], 1.0).unwrap_err();
    assert!(e.to_string().contains("0.5 at index 1 (0-based)"), "{e}");
}

/// A user model whose datum 700 holds a NaN: its gradient is NaN on any set of items with it.
struct NanDatum(LinearGaussian);

impl Model for NanDatum {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn n_data(&self) -> usize {
        self.0.n_data()
    }
    fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
        self.0.grad_prior(t, o)
    }
    fn grad_data_sum(&self, t: &[f64], idx: &[usize], o: &mut [f64]) -> Result<()> {
        self.0.grad_data_sum(t, idx, o)?;
        if idx.contains(&700) {
            o[1] = f64::NAN;
        }
        Ok(())
    }
}

#[test]
fn a_nan_in_a_user_models_data_is_named_by_datum_and_coordinate() {
    let m = NanDatum(LinearGaussian::synthetic(1_600, 3, 1.0, 10.0, 4).unwrap());
    // The runner's model check at the start (16 items, 700 among them) locates it.
    let e = Runner::new(&m, &sgld()).start(&[0.0; 3]).run().unwrap_err();
    assert!(matches!(e.root(), Error::NonFiniteGradientAt { iteration: 0, coordinate: 1, datum: Some(700) }), "{e:?}");
    assert_eq!(e.chain(), Some(0));
    assert!(e.to_string().contains("coordinate 1 of datum 700's gradient"), "{e}");
    assert!(e.is_divergence());
    // Without the check, the sampler's first gradient on all the data: located over the data.
    let full = Sgld::new(SgldSettings::constant(1e-4), Svrg::new(10)).unwrap();
    let st = RunSettings { check_model: false, ..Default::default() };
    let e = Runner::new(&m, &full).start(&[0.0; 3]).settings(st).run().unwrap_err();
    assert!(matches!(e.root(), Error::NonFiniteGradientAt { iteration: 0, coordinate: 1, datum: Some(700) }), "{e:?}");
    // Through Sample: the set-up fails, and the located datum is the error.
    let e = Sample::new(&m, Sgld::auto()).run().unwrap_err();
    assert!(matches!(e.root(), Error::NonFiniteGradientAt { coordinate: 1, datum: Some(700), .. }), "{e:?}");
}

#[test]
fn a_billion_pilot_chains_are_refused_before_the_mode_search() {
    let m = lg();
    let ts = sgmcmc::tune::TuneSettings { pilot_chains: 1_000_000_000, ..Default::default() };
    let t = Instant::now();
    refused("TuneSettings::pilot_chains", t, sgmcmc::tune::tune(&m, &sgld(), &[0.0, 0.0], &ts));
}

/// A model that panics at its `at`-th data-gradient call.
struct PanicsAt {
    inner: LinearGaussian,
    calls: std::sync::atomic::AtomicU64,
    at: u64,
}

impl Model for PanicsAt {
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
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.at {
            panic!("user bug at call {}", self.at);
        }
        self.inner.grad_data_sum(t, i, o)
    }
}

/// Through `Sample`, a model panicking in the set-up (the mode search calls it first) is a typed
/// error, not an unwind into the caller.
#[test]
fn a_panicking_model_through_sample_is_a_typed_error() {
    let m = PanicsAt { inner: LinearGaussian::synthetic(2_000, 2, 1.0, 10.0, 1).unwrap(), calls: 0.into(), at: 300 };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Sample::new(&m, Sgld::auto()).run()));
    std::panic::set_hook(hook);
    let e = r.expect("no panic reaches the caller").unwrap_err();
    assert!(matches!(e.root(), Error::Panic { message, .. } if message == "user bug at call 300"), "{e:?}");
}

/// Every chain diverging under `Report`: the error is the first chain's own (a runaway stays a
/// runaway), with every chain's draws up to its divergence kept.
#[test]
fn all_chains_diverging_keep_their_draws_and_their_own_error() {
    let m = lg();
    let far = Sgld::new(SgldSettings::constant(10.0), Minibatch::new(10)).unwrap();
    let st = RunSettings {
        n_iter: 1_000,
        burn_in: 0,
        n_chains: 2,
        on_divergence: OnDivergence::Report,
        ..Default::default()
    };
    let e = Runner::new(&m, &far).start(&[1.0, 1.0]).settings(st).run().unwrap_err();
    assert!(e.is_divergence(), "{e}");
    let kept: &RunOutput<Sgld> = e.output().expect("kept");
    assert_eq!(kept.divergences.len(), 2);
    assert_eq!(e.to_string(), format!("chain 0: {}", kept.divergences[0].message));
    for d in &kept.divergences {
        let drawn = d.draws[0].samples(0).expect("stored draws").len() as u64;
        assert_eq!(drawn, d.iteration - 1, "chain {}", d.chain);
    }
}
