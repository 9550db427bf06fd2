//! Preconditioned SGLD with an RMSprop diagonal preconditioner.

use super::{LangevinState, Sampler};
use crate::cost::Cost;
use crate::error::{Error, Result, check_positive};
use crate::gradient::{GradientEstimator, Minibatch};
use crate::model::Model;
use crate::rng::fill_standard_normal;
use crate::schedule::StepSize;
use rand::Rng;

/// Settings of [`Psgld`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PsgldSettings {
    /// The step-size schedule `γ_k`. Default `Constant(1e-4)`.
    pub step_size: StepSize,
    /// RMSprop decay `β ∈ [0, 1)` of the squared-gradient average. Default 0.99.
    pub decay: f64,
    /// Damping `λ > 0` in `G = diag(1/(λ + √V))`. Default 1e-5.
    pub damping: f64,
}

impl Default for PsgldSettings {
    fn default() -> Self {
        PsgldSettings { step_size: StepSize::Constant(1e-4), decay: 0.99, damping: 1e-5 }
    }
}

impl PsgldSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.step_size.validate("step_size")?;
        if !(0.0..1.0).contains(&self.decay) {
            return Err(Error::invalid("decay", self.decay, "must be in [0, 1)"));
        }
        check_positive("damping", self.damping)
    }
}

/// Preconditioned SGLD (pSGLD) with the RMSprop preconditioner of Li, Chen, Carlson & Carin
/// (2016):
///
/// `V_k = β V_{k−1} + (1 − β) ḡ_k ⊙ ḡ_k`, `ḡ_k = ∇Ũ(θ_k)/N`, `G_k = diag(1 / (λ + √V_k))`,
/// `θ_{k+1} = θ_k − γ_{k+1} G_k ∇Ũ(θ_k) + √(2γ_{k+1} G_k) ⊙ Z`.
///
/// The correction term `Γ(θ) = ∇·G(θ)` of a position-dependent preconditioner is **dropped**, as
/// in the paper's practical algorithm (its authors report it negligible for β close to 1); that
/// leaves a bias that does not vanish with the step size. V starts at `(1 − β) ḡ₀²` from the
/// gradient at θ₀. Samples are weighted by `γ_{k+1}`.
///
/// Reference: C. Li, C. Chen, D. Carlson, L. Carin, *Preconditioned stochastic gradient
/// Langevin dynamics for deep neural networks*, AAAI 2016.
#[derive(Debug, Clone)]
pub struct Psgld<E = Minibatch> {
    settings: PsgldSettings,
    estimator: E,
    state: LangevinState,
    v: Vec<f64>,
    n_data: f64,
}

impl<E: GradientEstimator> Psgld<E> {
    /// pSGLD with the given settings and gradient estimator; errors on invalid settings.
    pub fn new(settings: PsgldSettings, estimator: E) -> Result<Self> {
        settings.validate()?;
        Ok(Psgld { settings, estimator, state: LangevinState::default(), v: Vec::new(), n_data: 1.0 })
    }

    /// The settings.
    pub fn settings(&self) -> &PsgldSettings {
        &self.settings
    }

    /// The current diagonal preconditioner entries `G_k`.
    pub fn preconditioner(&self) -> impl Iterator<Item = f64> + '_ {
        self.v.iter().map(|v| 1.0 / (self.settings.damping + v.sqrt()))
    }

    fn update_v(&mut self, first: bool) {
        let b = if first { 0.0 } else { self.settings.decay };
        let c = 1.0 - self.settings.decay;
        let n = self.n_data;
        for (v, g) in self.v.iter_mut().zip(&self.state.grad) {
            let gb = g / n;
            *v = b * *v + c * gb * gb;
        }
    }
}

impl<E: GradientEstimator> Sampler for Psgld<E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        self.state.reset(model, theta0, model.dim())?;
        self.estimator.prepare(model)?;
        self.n_data = model.n_data() as f64;
        self.v.clear();
        self.v.resize(model.dim(), 0.0);
        self.state.refresh_gradient(&mut self.estimator, model, rng)?;
        self.update_v(true);
        self.state.ready = true;
        Ok(())
    }

    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.state.check_ready(model)?;
        let h = self.settings.step_size.at(self.state.k + 1);
        fill_standard_normal(rng, &mut self.state.noise);
        let lam = self.settings.damping;
        for (((t, g), z), v) in self.state.theta.iter_mut().zip(&self.state.grad).zip(&self.state.noise).zip(&self.v) {
            let gi = 1.0 / (lam + v.sqrt());
            *t += (2.0 * h * gi).sqrt() * z - h * gi * g;
        }
        self.state.k += 1;
        self.state.check_state()?;
        self.state.refresh_gradient(&mut self.estimator, model, rng)?;
        self.update_v(false);
        Ok(())
    }

    langevin_accessors!(|s| s.settings.step_size.at(s.state.k + 1));
}
