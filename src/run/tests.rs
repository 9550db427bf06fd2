use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::drive::RunawayDetector;

/// `U(θ) = (θ − m)²/2` in one dimension, one datum.
struct Far(f64);

impl Model for Far {
    fn dim(&self) -> usize {
        1
    }
    fn n_data(&self) -> usize {
        1
    }
    fn grad_prior(&self, _: &[f64], out: &mut [f64]) -> Result<()> {
        out[0] = 0.0;
        Ok(())
    }
    fn grad_data_sum(&self, t: &[f64], _: &[usize], out: &mut [f64]) -> Result<()> {
        out[0] = t[0] - self.0;
        Ok(())
    }
    fn potential_prior(&self, _: &[f64]) -> Result<f64> {
        Ok(0.0)
    }
    fn potential_data_sum(&self, t: &[f64], _: &[usize]) -> Result<f64> {
        Ok(0.5 * (t[0] - self.0).powi(2))
    }
}

/// Geometric growth from 0 (‖θ_k‖ = 1.1^k, k ≤ 400) is a runaway when it climbs the
/// potential and not when it descends towards a mode far out.
#[test]
fn runaway_is_confirmed_by_the_potential() {
    let path = |model: &dyn Model| -> Result<f64> {
        let mut det = RunawayDetector::new(&[0.0]);
        for k in 1..=400u64 {
            det.check(model, k, &[1.1f64.powi(k as i32)], None, Some(1e3))?;
        }
        Ok(det.floor)
    };
    // Uphill (mode at 0): stopped at the first trigger, with the right iteration.
    let e = path(&Far(0.0)).unwrap_err();
    let Error::Runaway { iteration, norm, reference, .. } = e else { panic!("{e:?}") };
    assert_eq!(iteration, 104, "{norm} {reference}");
    assert!(norm > 1e3 * reference);
    // Downhill towards m = 1e18 (1.1^400 = 3.7e16): the triggers at k = 104, 177, 250, 323
    // and 396 are dismissed, each raising the accepted scale to the norm then.
    let floor = path(&Far(1e18)).unwrap();
    assert!((floor / 1.1f64.powi(396) - 1.0).abs() < 1e-12, "{floor}");
    // Towards m = 1e11 the path passes U(0)'s level at 2e11 (k = 273): the triggers at 104,
    // 177 and 250 are dismissed, the one at 323 (1000 × the scale accepted at 250) is not.
    let e = path(&Far(1e11)).unwrap_err();
    assert!(matches!(e, Error::Runaway { iteration: 323, .. }), "{e:?}");
}
