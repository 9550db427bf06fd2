//! Tempered posteriors: `π_T(θ) ∝ p(θ)^{1/T₀} Πᵢ p(xᵢ | θ)^{1/T_L}`.

use crate::error::{Error, Result};
use crate::models::model::Model;

/// The temperatures of a tempered posterior: `likelihood` divides the data's potential
/// `Σ Uᵢ`, `prior` the prior's `U₀`. Both 1 is the posterior itself.
///
/// Build it with [`Temperature::posterior`] (both equal: the "cold posterior" of Wenzel et al.
/// 2020, `π(θ | x)^{1/T}`), [`Temperature::likelihood`] (likelihood tempering, prior untouched:
/// the "tempered likelihood" of Aitchison 2021 and of power/generalised posteriors) or
/// [`Temperature::new`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Temperature {
    /// `T_L > 0`, dividing `Σ Uᵢ`.
    pub likelihood: f64,
    /// `T₀ > 0`, dividing `U₀`.
    pub prior: f64,
}

impl Default for Temperature {
    /// `T_L = T₀ = 1`: the posterior.
    fn default() -> Self {
        Temperature { likelihood: 1.0, prior: 1.0 }
    }
}

impl Temperature {
    /// `T_L = likelihood`, `T₀ = prior`.
    pub fn new(likelihood: f64, prior: f64) -> Self {
        Temperature { likelihood, prior }
    }

    /// The whole posterior at temperature `t`: target `∝ exp(−U/t)` (`t < 1`: a "cold",
    /// sharper posterior; `t > 1`: a flatter one).
    pub fn posterior(t: f64) -> Self {
        Temperature { likelihood: t, prior: t }
    }

    /// The likelihood at temperature `t`, the prior untouched: target
    /// `∝ p(θ) Πᵢ p(xᵢ | θ)^{1/t}` (`1/t` is the "learning rate" of a generalised posterior).
    pub fn likelihood(t: f64) -> Self {
        Temperature { likelihood: t, prior: 1.0 }
    }

    /// Errors: [`Error::InvalidParameter`] naming `temperature.likelihood` or
    /// `temperature.prior` unless both are finite and `> 0`.
    pub fn validate(&self) -> Result<()> {
        for (name, t) in [("temperature.likelihood", self.likelihood), ("temperature.prior", self.prior)] {
            if !(t.is_finite() && t > 0.0) {
                return Err(Error::invalid(name, t, "a temperature must be finite and > 0"));
            }
        }
        Ok(())
    }

    /// Whether both temperatures are 1.
    pub fn is_one(&self) -> bool {
        self.likelihood == 1.0 && self.prior == 1.0
    }
}

/// A model at a [`Temperature`]: the potential `U_T(θ) = U₀(θ)/T₀ + Σᵢ Uᵢ(θ)/T_L`, so that any
/// sampler, estimator, the tuner and the coupled methods target `π_T ∝ exp(−U_T)`.
///
/// Gradients, potentials and Hessian-vector products are the inner model's divided by the
/// temperature (multiplied by `1/T`; nothing is done at T = 1, so draws are bit-identical to the
/// untempered model's); the cost of a gradient and the weights of draws do not change.
/// Failures of the inner model pass through unchanged.
///
/// **Steps.** `U_T`'s curvature is `1/T` times `U`'s. A run on the tempered model at step `hT`
/// is the run on `U` with step `h` and its injected noise scaled by `√T` (what the
/// `temperature` of BlackJAX and of `posteriors` does): to keep a step tuned at T = 1, multiply
/// it by T. [`tune`](crate::tune::tune) on the tempered model derives its steps from `U_T`, so
/// it needs nothing. A checkpoint remembers the model's fingerprint (its data's and its prior's
/// gradients at a fixed point), so resuming at another likelihood or prior temperature is a
/// `CheckpointMismatch`.
///
/// **With constraints, the order matters** when the prior is tempered (`T₀ ≠ 1`).
/// `Constrained::new(Tempered::new(model, t)?, layout)` adds the log-Jacobian after tempering:
/// its target on θ's own scale is `p(θ)^{1/T₀} Πᵢ p(xᵢ | θ)^{1/T_L}`, whatever the
/// parametrisation — the tempered posterior as usually meant; use this order.
/// `Tempered::new(Constrained::new(model, layout)?, t)` tempers the log-Jacobian with the
/// prior (it is part of the constrained model's prior potential): its target on θ is
/// `p(θ)^{1/T₀} |det J_T|^{1/T₀ − 1} Πᵢ p(xᵢ | θ)^{1/T_L}`, which depends on the transform
/// (log for a positive σ, logit for an interval, …). Tempering the likelihood only
/// ([`Temperature::likelihood`]) gives the same target in either order.
///
/// **Why.** Bayesian neural networks with standard priors often predict better at `T < 1`
/// (the "cold posterior effect", F. Wenzel et al., *How good is the Bayes posterior in deep
/// neural networks really?*, ICML 2020); whether that reflects a misspecified prior or
/// likelihood, data augmentation, or the sampler's bias is debated (L. Aitchison, *A statistical
/// theory of cold posteriors in deep neural networks*, ICLR 2021; P. Izmailov et al., *What are
/// Bayesian neural network posteriors really like?*, ICML 2021). Tempering only the likelihood
/// gives generalised (power) posteriors (P. Grünwald and T. van Ommen, *Inconsistency of
/// Bayesian inference for misspecified linear models*, Bayesian Analysis 2017). `bnn_digits`
/// reports what temperature changes on this crate's own BNN.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Mala, MalaSettings, Temperature, Tempered};
///
/// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 3)?;
/// // The posterior at T = 0.5: variances halved.
/// let cold = Tempered::new(&model, Temperature::posterior(0.5))?;
/// let mala = Mala::new(MalaSettings::default())?;
/// let s = RunSettings { n_iter: 11_000, burn_in: 1_000, n_chains: 2, seed: 1, ..Default::default() };
/// let out = Runner::new(&cold, &mala).start(&[0.0, 0.0]).settings(s).run()?;
/// let (v, exact) = (out.estimate.covariance()?[[0, 0]], 0.5 * model.posterior_covariance()[[0, 0]]);
/// assert!((v / exact - 1.0).abs() < 0.2, "{v} vs {exact}");
/// # Ok::<(), sgmcmc::Error>(())
/// ```
///
#[doc = include_str!("../../docs/guide/tempering.md")]
#[derive(Debug, Clone)]
pub struct Tempered<M> {
    model: M,
    temperature: Temperature,
    inv_likelihood: f64,
    inv_prior: f64,
}

impl<M: Model> Tempered<M> {
    /// `model` at `temperature` (pass `&model` to keep using the model itself).
    ///
    /// Errors: [`Error::InvalidParameter`] for a temperature that is not finite and `> 0`.
    pub fn new(model: M, temperature: Temperature) -> Result<Self> {
        temperature.validate()?;
        Ok(Tempered {
            model,
            temperature,
            inv_likelihood: 1.0 / temperature.likelihood,
            inv_prior: 1.0 / temperature.prior,
        })
    }

    /// The temperatures.
    pub fn temperature(&self) -> Temperature {
        self.temperature
    }

    /// The untempered model.
    pub fn inner(&self) -> &M {
        &self.model
    }

    /// The untempered model, unwrapped.
    pub fn into_inner(self) -> M {
        self.model
    }
}

#[inline]
fn scale(out: &mut [f64], c: f64) {
    if c != 1.0 {
        for o in out {
            *o *= c;
        }
    }
}

impl<M: Model> Model for Tempered<M> {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn n_data(&self) -> usize {
        self.model.n_data()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.model.grad_prior(theta, out)?;
        scale(out, self.inv_prior);
        Ok(())
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.model.grad_data_sum(theta, idx, out)?;
        scale(out, self.inv_likelihood);
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        self.model.potential_prior(theta).map(|u| if self.inv_prior == 1.0 { u } else { u * self.inv_prior })
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        self.model
            .potential_data_sum(theta, idx)
            .map(|u| if self.inv_likelihood == 1.0 { u } else { u * self.inv_likelihood })
    }

    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.model.hvp_prior(theta, v, out)?;
        scale(out, self.inv_prior);
        Ok(())
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.model.hvp_data_sum(theta, v, idx, out)?;
        scale(out, self.inv_likelihood);
        Ok(())
    }

    fn output_layout(&self) -> Option<&crate::models::Layout> {
        self.model.output_layout()
    }

    fn parameter_names(&self) -> Option<Vec<String>> {
        self.model.parameter_names()
    }
}
