//! The Metropolis-adjusted Langevin algorithm: the exact full-data reference sampler.

use super::Sampler;
use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len, check_positive};
use crate::model::{Model, check_shape};
use crate::rng::fill_standard_normal;
use rand::{Rng, RngExt};

/// Settings of [`Mala`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MalaSettings {
    /// The (initial) step size γ of the Langevin proposal. Default 1e-4.
    pub step_size: f64,
    /// Adapt γ during the first `adapt_steps` iterations towards `target_accept`
    /// (Robbins–Monro on log γ with gain `k^(−0.6)`), then freeze it. Default 0 (no adaptation).
    /// Keep the run's burn-in at least this long: samples taken while adapting are not exact.
    pub adapt_steps: u64,
    /// The acceptance rate aimed at while adapting, in (0, 1). Default 0.574 (Roberts &
    /// Rosenthal 1998).
    pub target_accept: f64,
}

impl Default for MalaSettings {
    fn default() -> Self {
        MalaSettings { step_size: 1e-4, adapt_steps: 0, target_accept: 0.574 }
    }
}

impl MalaSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        check_positive("step_size", self.step_size)?;
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return Err(Error::invalid("target_accept", self.target_accept, "must be in (0, 1)"));
        }
        Ok(())
    }
}

/// The Metropolis-adjusted Langevin algorithm (MALA), with full-data gradients and potentials.
///
/// Proposal `θ' = θ − γ∇U(θ) + √(2γ) Z`, accepted with probability
/// `min(1, exp(U(θ) − U(θ') + [‖θ' − θ + γ∇U(θ)‖² − ‖θ − θ' + γ∇U(θ')‖²] / (4γ)))`.
/// Its stationary law is exactly π: it is the reference the stochastic-gradient samplers are
/// compared with. Each iteration costs N datum gradients and N datum potentials.
///
/// A proposal with potential `+∞` (zero density) is rejected; a NaN potential or a non-finite
/// gradient at a proposal of finite potential is an error.
///
/// Needs from the model: [`potential_prior`](Model::potential_prior) and
/// [`potential_data_sum`](Model::potential_data_sum) (else [`Error::Unsupported`] at `init`).
///
/// Reference: G. O. Roberts and R. L. Tweedie, *Exponential convergence of Langevin
/// distributions and their discrete approximations*, Bernoulli 2(4), 1996.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Mala {
    settings: MalaSettings,
    gamma: f64,
    all: Vec<usize>,
    theta: Vec<f64>,
    grad: Vec<f64>,
    u: f64,
    prop: Vec<f64>,
    grad_prop: Vec<f64>,
    scratch: Vec<f64>,
    noise: Vec<f64>,
    k: u64,
    n_accepted: u64,
    n_accepted_adapting: u64,
    ready: bool,
    cost: Cost,
}

impl Mala {
    /// MALA with the given settings; errors on invalid settings.
    pub fn new(settings: MalaSettings) -> Result<Self> {
        settings.validate()?;
        Ok(Mala {
            settings,
            gamma: settings.step_size,
            all: Vec::new(),
            theta: Vec::new(),
            grad: Vec::new(),
            u: 0.0,
            prop: Vec::new(),
            grad_prop: Vec::new(),
            scratch: Vec::new(),
            noise: Vec::new(),
            k: 0,
            n_accepted: 0,
            n_accepted_adapting: 0,
            ready: false,
            cost: Cost::default(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &MalaSettings {
        &self.settings
    }

    /// The step size in use (after adaptation, if any).
    pub fn step_size(&self) -> f64 {
        self.gamma
    }

    /// Fraction of proposals accepted since `init` (0 before the first step), adaptation
    /// included.
    pub fn acceptance_rate(&self) -> f64 {
        if self.k == 0 { 0.0 } else { self.n_accepted as f64 / self.k as f64 }
    }

    /// Fraction of proposals accepted after the adaptation phase (the first `adapt_steps`
    /// iterations), at the frozen step size; 0 before any such step.
    pub fn acceptance_rate_after_adaptation(&self) -> f64 {
        let adapt = self.settings.adapt_steps.min(self.k);
        let k = self.k - adapt;
        if k == 0 { 0.0 } else { (self.n_accepted - self.n_accepted_adapting) as f64 / k as f64 }
    }

    /// Potential and gradient at `x` into (`u`, `g`); `None` potential = unsupported.
    fn evaluate<M: Model + ?Sized>(&mut self, model: &M, at_proposal: bool) -> Result<f64> {
        let (x, g) = if at_proposal { (&self.prop, &mut self.grad_prop) } else { (&self.theta, &mut self.grad) };
        let n = self.all.len() as u64;
        let u = match (model.potential_prior(x), model.potential_data_sum(x, &self.all)) {
            (Some(a), Some(b)) => a + b,
            (None, _) => return Err(Error::Unsupported { method: "potential_prior", needed_by: "MALA" }),
            (_, None) => return Err(Error::Unsupported { method: "potential_data_sum", needed_by: "MALA" }),
        };
        self.cost.datum_potentials += n;
        if u.is_nan() {
            return Err(Error::NonFinitePotential { iteration: self.k });
        }
        if u == f64::INFINITY {
            return Ok(u);
        }
        model.grad_data_sum(x, &self.all, g);
        model.grad_prior(x, &mut self.scratch);
        for (gi, s) in g.iter_mut().zip(&self.scratch) {
            *gi += s;
        }
        self.cost.datum_gradients += n;
        if !all_finite(g) {
            return Err(Error::NonFiniteGradient { iteration: self.k });
        }
        Ok(u)
    }
}

impl Sampler for Mala {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], _rng: &mut R) -> Result<()> {
        check_shape(model)?;
        let d = model.dim();
        check_len("initial state theta0", d, theta0.len())?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteStart { what: "theta0" });
        }
        if self.all.len() != model.n_data() {
            self.all = (0..model.n_data()).collect();
        }
        self.theta.clear();
        self.theta.extend_from_slice(theta0);
        for buf in [&mut self.grad, &mut self.prop, &mut self.grad_prop, &mut self.scratch, &mut self.noise] {
            buf.resize(d, 0.0);
        }
        self.k = 0;
        self.n_accepted = 0;
        self.n_accepted_adapting = 0;
        self.gamma = self.settings.step_size;
        self.ready = false;
        let u = self.evaluate(model, false)?;
        if !u.is_finite() {
            return Err(Error::NonFinitePotential { iteration: 0 });
        }
        self.u = u;
        self.ready = true;
        Ok(())
    }

    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        if !self.ready {
            return Err(Error::NotInitialised);
        }
        check_len("model dimension", self.theta.len(), model.dim())?;
        self.k += 1;
        let g = self.gamma;
        let s = (2.0 * g).sqrt();
        fill_standard_normal(rng, &mut self.noise);
        for (((p, t), gr), z) in self.prop.iter_mut().zip(&self.theta).zip(&self.grad).zip(&self.noise) {
            *p = t - g * gr + s * z;
        }
        let u_prop = self.evaluate(model, true)?;
        let log_u: f64 = rng.random::<f64>().ln();
        let mut accept_prob = 0.0;
        if u_prop.is_finite() {
            // ‖θ' − θ + γ∇U(θ)‖² = 2γ‖z‖²; reverse move: ‖θ − θ' + γ∇U(θ')‖².
            let fwd: f64 = self.noise.iter().map(|z| z * z).sum::<f64>() * 2.0 * g;
            let rev: f64 = self
                .theta
                .iter()
                .zip(&self.prop)
                .zip(&self.grad_prop)
                .map(|((t, p), gp)| {
                    let r = t - p + g * gp;
                    r * r
                })
                .sum();
            let log_alpha = self.u - u_prop + (fwd - rev) / (4.0 * g);
            accept_prob = log_alpha.exp().min(1.0);
            if log_u < log_alpha {
                std::mem::swap(&mut self.theta, &mut self.prop);
                std::mem::swap(&mut self.grad, &mut self.grad_prop);
                self.u = u_prop;
                self.n_accepted += 1;
            }
        }
        if self.k <= self.settings.adapt_steps {
            self.n_accepted_adapting = self.n_accepted;
            let gain = (self.k as f64).powf(-0.6);
            self.gamma *= (gain * (accept_prob - self.settings.target_accept)).exp();
        }
        Ok(())
    }

    chain_accessors!(theta, grad, k);

    fn cost(&self) -> Cost {
        self.cost
    }
}
