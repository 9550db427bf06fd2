//! [`Auto`]: the gradient estimator the tuner chooses — a plain minibatch or control variates at
//! the mode, and the minibatch size — from what it measures at the mode.

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::gradient::control_variate::ControlVariate;
use crate::gradient::{FullGradient, GradientEstimator, Minibatch, SubsampledEstimator};
use crate::models::model::Model;
use rand::Rng;

/// The estimator [`tune`](crate::tune::tune) (and so [`Sample`](crate::Sample)) chooses for you:
/// `Sgld::auto()`, or `Auto::new()` with any Langevin sampler (SGLD, SGHMC, SGNHT, pSGLD).
///
/// At the mode, in the whitened coordinates the tuner builds, it measures the noise of a single
/// datum's gradient for a plain minibatch (`N ∇Uᵢ(θ)`) and for control variates centred at the
/// mode (`N (∇Uᵢ(θ) − ∇Uᵢ(θ̂))`), at Laplace draws (small minibatches, see
/// [`GRADIENT_NOISE_BATCH`](crate::GRADIENT_NOISE_BATCH)). On minibatches of n the noise
/// covariance is theirs divided by n (drawn with replacement), and the tuner's gradient-noise
/// correction is complete up to the step `2n/λ` (λ its largest eigenvalue). So each estimator
/// needs `n ≥ h λ / m` for the steps `h` up to [`AUTO_STEP`](crate::tune::AUTO_STEP) that the
/// tuner chooses on a whitened posterior (m = 2 × [`CORRECTION_MARGIN`](crate::tune::CORRECTION_MARGIN)),
/// at least [`AUTO_MIN_BATCH`](crate::tune::AUTO_MIN_BATCH) (and d, so that the gradient's work
/// is not dwarfed by the step's own `d²`);
/// it costs `n` datum gradients per step (control variates: `2n`) plus the step's work. The
/// cheaper one is chosen, and why is in the tuner's `preconditioning` text. Far from Gaussian
/// posteriors make control variates noisier away from the mode; the tuner's pilots and the
/// step-bias check measure that, as for any estimator.
///
/// Until it is chosen it cannot run: `prepare` says to run it through [`Sample`](crate::Sample)
/// or [`tune`](crate::tune::tune) (or to pick an estimator yourself).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Auto {
    chosen: Option<Chosen>,
}

/// What [`Auto`] became.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Chosen {
    /// A plain minibatch.
    Minibatch(Minibatch),
    /// Control variates centred at the mode.
    ControlVariate(ControlVariate),
    /// The exact gradient, where a minibatch would need as many data as there are.
    Full(FullGradient),
}

impl Auto {
    /// An estimator for the tuner to choose.
    pub fn new() -> Self {
        Auto { chosen: None }
    }

    /// What it became, once chosen.
    pub fn chosen(&self) -> Option<&Chosen> {
        self.chosen.as_ref()
    }

    /// The estimator `chosen`.
    pub fn from_chosen(chosen: Chosen) -> Self {
        Auto { chosen: Some(chosen) }
    }

    fn unchosen() -> Error {
        Error::invalid(
            "estimator",
            "Auto (not chosen yet)",
            "an automatic estimator is chosen by the tuner: run it through Sample or tune, or build a Minibatch or \
             ControlVariate yourself",
        )
    }
}

/// Dispatches to the chosen estimator.
macro_rules! dispatch {
    ($self:expr, $e:ident => $body:expr, $none:expr) => {
        match &$self.chosen {
            Some(Chosen::Minibatch($e)) => $body,
            Some(Chosen::ControlVariate($e)) => $body,
            Some(Chosen::Full($e)) => $body,
            None => $none,
        }
    };
    (mut $self:expr, $e:ident => $body:expr, $none:expr) => {
        match &mut $self.chosen {
            Some(Chosen::Minibatch($e)) => $body,
            Some(Chosen::ControlVariate($e)) => $body,
            Some(Chosen::Full($e)) => $body,
            None => $none,
        }
    };
}

impl GradientEstimator for Auto {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        dispatch!(mut self, e => e.prepare(model), Err(Self::unchosen()))
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        dispatch!(mut self, e => e.resample(rng), ())
    }

    #[inline]
    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        dispatch!(mut self, e => e.eval(model, theta, out), Err(Self::unchosen()))
    }

    fn independent_draws(&self) -> bool {
        dispatch!(self, e => e.independent_draws(), false)
    }

    fn resized(&self, batch_size: usize, n_data: usize) -> Option<(Self, f64)> {
        match &self.chosen {
            Some(Chosen::Minibatch(e)) => {
                e.resized(batch_size, n_data).map(|(e, f)| (Auto { chosen: Some(Chosen::Minibatch(e)) }, f))
            }
            Some(Chosen::ControlVariate(e)) => {
                e.resized(batch_size, n_data).map(|(e, f)| (Auto { chosen: Some(Chosen::ControlVariate(e)) }, f))
            }
            Some(Chosen::Full(_)) | None => None,
        }
    }

    fn n_datum_gradients(&self) -> u64 {
        dispatch!(self, e => e.n_datum_gradients(), 0)
    }

    fn cost(&self) -> Cost {
        dispatch!(self, e => e.cost(), Cost::default())
    }

    fn setup_cost(&self) -> Cost {
        dispatch!(self, e => e.setup_cost(), Cost::default())
    }

    fn centre(&self) -> Option<&[f64]> {
        dispatch!(self, e => GradientEstimator::centre(e), None)
    }

    fn is_exact(&self) -> bool {
        dispatch!(self, e => e.is_exact(), false)
    }

    fn is_unchosen(&self) -> bool {
        self.chosen.is_none()
    }

    fn with_choice(&self, choice: Chosen) -> Option<Self> {
        Some(Auto::from_chosen(choice))
    }
}

impl SubsampledEstimator for Auto {
    fn batch_size(&self) -> usize {
        match &self.chosen {
            Some(Chosen::Minibatch(e)) => e.batch_size(),
            Some(Chosen::ControlVariate(e)) => e.batch_size(),
            Some(Chosen::Full(_)) | None => 0,
        }
    }

    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        match &mut self.chosen {
            Some(Chosen::Minibatch(e)) => e.draw_indices(rng, out),
            Some(Chosen::ControlVariate(e)) => e.draw_indices(rng, out),
            Some(Chosen::Full(_)) | None => {}
        }
    }

    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        match &mut self.chosen {
            Some(Chosen::Minibatch(e)) => e.eval_on(model, theta, idx, out),
            Some(Chosen::ControlVariate(e)) => e.eval_on(model, theta, idx, out),
            Some(Chosen::Full(e)) => e.eval(model, theta, out),
            None => Err(Self::unchosen()),
        }
    }
}
