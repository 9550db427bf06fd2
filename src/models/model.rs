//! The [`Model`] trait: what a sampler needs to know about a posterior.

use crate::error::{Error, Result};

/// A Bayesian model, seen through the gradients of its potential.
///
/// # Sign convention (the one place it is stated)
///
/// The target is `π(θ) ∝ exp(−U(θ))`, θ ∈ ℝᵈ, with the **potential**
///
/// `U(θ) = U₀(θ) + Σᵢ₌₁ᴺ Uᵢ(θ)`,  `U₀ = −log p(θ)` (prior),  `Uᵢ = −log p(xᵢ | θ)` (datum i).
///
/// Potentials are *negative* log densities; gradients are gradients of potentials, so they point
/// *away* from the mode. Additive constants may be dropped. (BlackJAX, NumPyro, nuts-rs and Stan
/// ask for `∇log p`: negate it. [`check_model`](crate::check_model) catches a wrong sign, and
/// runs call it at their start by default.)
///
/// # What to implement
///
/// Four required methods: [`dim`](Model::dim), [`n_data`](Model::n_data),
/// [`grad_prior`](Model::grad_prior) and [`grad_data_sum`](Model::grad_data_sum). Gradients are
/// written into a buffer the caller owns (of length `dim()`), which they **overwrite**; a model
/// should not allocate in them, so that a sampler step allocates nothing.
///
/// Optional methods, with documented defaults:
/// - [`potential_prior`](Model::potential_prior) / [`potential_data_sum`](Model::potential_data_sum):
///   needed by MALA and by diagnostics; default `None` ("not available").
/// - [`hvp_prior`](Model::hvp_prior) / [`hvp_data_sum`](Model::hvp_data_sum): Hessian-vector
///   products, needed by the Taylor gradient estimator of ML-SGLD; default
///   [`Error::Unsupported`].
///
/// # Fallible gradients
///
/// Samplers and estimators call [`try_grad_prior`](Model::try_grad_prior) and
/// [`try_grad_data_sum`](Model::try_grad_data_sum), whose defaults call the infallible methods
/// and return `Ok`. A model whose gradient can fail (an automatic-differentiation engine, as
/// in the adapters of features `candle` and `forward-ad`) overrides them to return
/// [`Error::ModelFailure`](crate::Error::ModelFailure) with the engine's message; the sampler
/// stamps it with the iteration and the run with the chain, and stops. Such a model's infallible
/// methods should fill `out` with NaN on failure (a sampler would then report a non-finite
/// gradient), never panic.
///
/// Models take `&self` and are `Sync`, so many chains can share one model across threads.
///
/// ```
/// use sgmcmc::Model;
///
/// /// Gaussian mean with known unit variance and a N(0, 10² I) prior.
/// struct GaussianMean { data: Vec<[f64; 2]> }
///
/// impl Model for GaussianMean {
///     fn dim(&self) -> usize { 2 }
///     fn n_data(&self) -> usize { self.data.len() }
///     fn grad_prior(&self, theta: &[f64], out: &mut [f64]) {
///         for (o, t) in out.iter_mut().zip(theta) { *o = t / 100.0; }
///     }
///     fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) {
///         out.fill(0.0);
///         for &i in idx {
///             for j in 0..2 { out[j] += theta[j] - self.data[i][j]; }
///         }
///     }
/// }
/// ```
pub trait Model: Sync {
    /// The dimension d of θ.
    fn dim(&self) -> usize;

    /// The number of data items N.
    fn n_data(&self) -> usize;

    /// Writes `∇U₀(θ)` (the gradient of the prior potential) into `out`, overwriting it.
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]);

    /// Writes `Σ_{i ∈ idx} ∇Uᵢ(θ)` into `out`, overwriting it.
    ///
    /// `idx` may repeat indices (minibatches drawn with replacement): a repeated index counts
    /// as many times as it appears. Every index is `< n_data()`.
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]);

    /// [`grad_prior`](Model::grad_prior), for models whose gradient can fail: what samplers and
    /// estimators call. Default: `grad_prior` and `Ok`.
    #[inline]
    fn try_grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.grad_prior(theta, out);
        Ok(())
    }

    /// [`grad_data_sum`](Model::grad_data_sum), for models whose gradient can fail (errors:
    /// [`Error::ModelFailure`](crate::Error::ModelFailure)): what samplers and estimators call.
    /// Default: `grad_data_sum` and `Ok`.
    #[inline]
    fn try_grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.grad_data_sum(theta, idx, out);
        Ok(())
    }

    /// The prior potential `U₀(θ)`, or `None` if the model does not provide it (the default).
    fn potential_prior(&self, theta: &[f64]) -> Option<f64> {
        let _ = theta;
        None
    }

    /// `Σ_{i ∈ idx} Uᵢ(θ)`, or `None` if the model does not provide it (the default).
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Option<f64> {
        let _ = (theta, idx);
        None
    }

    /// Writes `∇²U₀(θ) v` into `out`. Default: [`Error::Unsupported`].
    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        let _ = (theta, v, out);
        Err(Error::Unsupported { method: "hvp_prior", needed_by: "a Hessian-vector product" })
    }

    /// Writes `Σ_{i ∈ idx} ∇²Uᵢ(θ) v` into `out`. Default: [`Error::Unsupported`].
    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let _ = (theta, v, idx, out);
        Err(Error::Unsupported { method: "hvp_data_sum", needed_by: "a Hessian-vector product" })
    }
}

/// A shared reference to a model is that model, so that wrappers such as
/// [`Tempered`](crate::Tempered) can borrow one (`Tempered::new(&model, t)`).
impl<M: Model + ?Sized> Model for &M {
    #[inline]
    fn dim(&self) -> usize {
        (**self).dim()
    }
    #[inline]
    fn n_data(&self) -> usize {
        (**self).n_data()
    }
    #[inline]
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) {
        (**self).grad_prior(theta, out)
    }
    #[inline]
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) {
        (**self).grad_data_sum(theta, idx, out)
    }
    #[inline]
    fn try_grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        (**self).try_grad_prior(theta, out)
    }
    #[inline]
    fn try_grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        (**self).try_grad_data_sum(theta, idx, out)
    }
    fn potential_prior(&self, theta: &[f64]) -> Option<f64> {
        (**self).potential_prior(theta)
    }
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Option<f64> {
        (**self).potential_data_sum(theta, idx)
    }
    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        (**self).hvp_prior(theta, v, out)
    }
    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        (**self).hvp_data_sum(theta, v, idx, out)
    }
}

/// Checks a model's own shape: `d ≥ 1`, `N ≥ 1`.
pub(crate) fn check_shape<M: Model + ?Sized>(model: &M) -> Result<()> {
    if model.dim() == 0 {
        return Err(Error::EmptyData { what: "model dimension d is 0" });
    }
    if model.n_data() == 0 {
        return Err(Error::EmptyData { what: "model has no data (N = 0)" });
    }
    Ok(())
}
