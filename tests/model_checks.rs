//! A gradient of the wrong sign (∇log p instead of ∇U = −∇log p) is caught: by `check_model`
//! before a run (with potentials by finite differences, without them by the curvature test), and
//! at run time by the runaway detector when the check is turned off. Correct models pass.

use crate::common;

use common::Altered;
use sgmcmc::*;

fn logistic() -> LogisticRegression {
    LogisticRegression::synthetic(2_000, 5, 10.0, 3).unwrap()
}

#[test]
fn correct_models_pass() {
    let lr = logistic();
    let lg = LinearGaussian::synthetic(500, 3, 1.0, 10.0, 1).unwrap();
    for potentials in [true, false] {
        let m = Altered { inner: &lr, factor: 1.0, potentials };
        for theta in [[0.0; 5], [0.3, -1.0, 2.0, 0.5, -0.2]] {
            let c = check_model(&m, &theta, &CheckSettings::default()).unwrap();
            assert_eq!(c.used_potentials, potentials);
            if potentials {
                assert!(c.data_excess.unwrap() < 1e-6 && c.prior_excess.unwrap() < 1e-6, "{c:?}");
            }
            assert!(c.curvatures.iter().all(|&k| k > 0.0), "{c:?}");
            assert!(c.cost.datum_gradients > 0);
        }
        let m = Altered { inner: &lg, factor: 1.0, potentials };
        check_model(&m, &[1.0, -2.0, 0.5], &CheckSettings::default()).unwrap();
    }
}

#[test]
fn check_model_names_a_sign_error() {
    let lr = logistic();
    // With potentials: the finite differences name the method.
    let m = Altered { inner: &lr, factor: -1.0, potentials: true };
    let e = check_model(&m, &[0.1; 5], &CheckSettings::default()).unwrap_err();
    assert!(matches!(e, Error::GradientSign { part: "grad_prior" | "grad_data_sum", .. }), "{e:?}");
    assert!(e.to_string().contains("−log p"), "{e}");
    // Without potentials: the curvature test.
    let m = Altered { inner: &lr, factor: -1.0, potentials: false };
    let e = check_model(&m, &[0.1; 5], &CheckSettings::default()).unwrap_err();
    assert!(matches!(e, Error::GradientSign { .. }), "{e:?}");
    // A gradient off by a factor 2 is a mismatch, not a sign error.
    let m = Altered { inner: &lr, factor: 2.0, potentials: true };
    let e = check_model(&m, &[0.1; 5], &CheckSettings::default()).unwrap_err();
    let Error::GradientMismatch { rel_error, .. } = e else { panic!("{e:?}") };
    assert!(rel_error > 0.01, "{rel_error}");
}

/// The runner checks the model at the start by default, so the wrong-sign model never runs.
#[test]
fn runs_refuse_a_wrong_sign_model() {
    let lr = logistic();
    let m = Altered { inner: &lr, factor: -1.0, potentials: false };
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).unwrap();
    let settings = RunSettings { n_iter: 20_000, burn_in: 1_000, n_chains: 2, ..Default::default() };
    let e = Runner::new(&m, &sgld).start(&[0.0; 5]).settings(settings).run().unwrap_err();
    assert!(matches!(e.root(), Error::GradientSign { .. }), "{e:?}");
    let rr = RichardsonRomberg::new(sgld.clone());
    assert!(matches!(
        Runner::new(&m, &rr).start(&[0.0; 5]).settings(settings).run().unwrap_err().root(),
        Error::GradientSign { .. }
    ));
    // With the check off, the runaway detector stops it: the reversed prior term makes θ grow
    // geometrically (by 1 + γ/σ² per step; here σ² = 1, γ = 1e-3): a typed error with the
    // iteration, not `Ok` with a mean of 1e16.
    let lr1 = LogisticRegression::synthetic(2_000, 5, 1.0, 3).unwrap();
    let m1 = Altered { inner: &lr1, factor: -1.0, potentials: false };
    let sgld1 = Sgld::new(SgldSettings::constant(1e-3), Minibatch::new(50)).unwrap();
    let unchecked = RunSettings { check_model: false, n_iter: 50_000, ..settings };
    let e = Runner::new(&m1, &sgld1).start(&[0.0; 5]).settings(unchecked).run().unwrap_err();
    let Error::Runaway { iteration, norm, reference, gradient_outward } = e.root() else {
        panic!("expected Runaway, got {e:?}")
    };
    assert!(*iteration < 50_000 && norm > &(1e3 * reference), "{e}");
    // The evidence (∇log p points back inwards) puts the wrong sign first.
    assert_eq!(*gradient_outward, Some(false), "{e}");
    assert!(e.to_string().contains("most likely the gradient has the wrong sign"), "{e}");
    // A correct model (Gaussian: U quadratic) with a full-gradient step 10 % above the Euler
    // stability limit 2/λ_max runs away too (by |1 − γλ_max| = 1.2 per step), and the message
    // puts the step first.
    let lg = LinearGaussian::synthetic(500, 3, 1.0, 10.0, 4).unwrap();
    let lmax = crate::support::symmetric_eigenvalues("precision", lg.posterior_precision()).unwrap()[2];
    let big = Lmc::new(SgldSettings::constant(2.2 / lmax), FullGradient::new()).unwrap();
    let e =
        Runner::new(&lg, &big).start(&[0.0; 3]).settings(RunSettings { n_chains: 1, ..unchecked }).run().unwrap_err();
    let Error::Runaway { gradient_outward, .. } = e.root() else { panic!("expected Runaway, got {e:?}") };
    assert_eq!(*gradient_outward, Some(true), "{e}");
    assert!(e.to_string().contains("most likely the step size is too large"), "{e}");
    // And the same correct model runs to the end without either (no false alarm).
    let ok = Altered { inner: &lr1, factor: 1.0, potentials: false };
    let out = Runner::new(&ok, &sgld1).start(&[0.0; 5]).settings(unchecked).run().unwrap();
    assert!(out.is_complete());
    // A runaway factor of 1 or less is refused.
    let bad = RunSettings { runaway_factor: Some(1.0), ..settings };
    assert!(matches!(
        Runner::new(&ok, &sgld).start(&[0.0; 5]).settings(bad).run(),
        Err(Error::InvalidParameter { name: "runaway_factor", .. })
    ));
}

/// `ModelCheck`'s figures are what their names say: for a correct model the excess over the
/// finite difference's noise is 0 and the relative difference is the finite difference's own
/// small error (not 0); for a gradient off by 0.1 % the relative difference shows it.
#[test]
fn the_check_reports_the_relative_difference_and_its_excess() {
    let m = logistic();
    let theta = vec![0.1; 5];
    let ok = check_model(&m, &theta, &CheckSettings::default()).unwrap();
    eprintln!("{ok:?}");
    assert_eq!((ok.prior_excess, ok.data_excess), (Some(0.0), Some(0.0)));
    let diff = ok.data_rel_difference.unwrap();
    assert!(diff > 0.0 && diff < 1e-5, "{diff}");
    let off = Altered { inner: &m, factor: 1.001, potentials: true };
    let c = check_model(&off, &theta, &CheckSettings { rel_tol: 1e-2, ..Default::default() }).unwrap();
    eprintln!("{c:?}");
    assert!(c.data_rel_difference.unwrap() > 5e-4 && c.data_rel_difference.unwrap() < 2e-3, "{c:?}");
}
