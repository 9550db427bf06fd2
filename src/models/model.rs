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
///   needed by MALA, by the gradient check and by diagnostics;
/// - [`hvp_prior`](Model::hvp_prior) / [`hvp_data_sum`](Model::hvp_data_sum): Hessian-vector
///   products, used by the Taylor gradient estimator of ML-SGLD and by the tuner (which otherwise
///   differences gradients).
///
/// # One failure convention
///
/// Every method but `dim` and `n_data` returns [`Result`](crate::Result):
/// - a method the model does not provide returns [`Error::Unsupported`] (the optional methods'
///   default), which callers that can do without it (the gradient check, the tuner's Hessian)
///   take as "not available" ([`Error::is_unsupported`]) and the others report;
/// - a computation that fails (an automatic-differentiation engine, as in the adapters of
///   features `candle` and `forward-ad`) returns [`Error::ModelFailure`] with the engine's
///   message; the sampler stamps it with the iteration and the run with the chain, and stops.
///
/// A model that cannot fail ends its gradients with `Ok(())`. Non-finite values are not errors
/// of the model: samplers check the gradients they receive and report
/// [`Error::NonFiniteGradient`].
///
/// Models take `&self` and are `Sync`, so many chains can share one model across threads.
///
/// ```
/// use sgmcmc::{Model, Result};
///
/// /// Gaussian mean with known unit variance and a N(0, 10² I) prior.
/// struct GaussianMean { data: Vec<[f64; 2]> }
///
/// impl Model for GaussianMean {
///     fn dim(&self) -> usize { 2 }
///     fn n_data(&self) -> usize { self.data.len() }
///     fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
///         for (o, t) in out.iter_mut().zip(theta) { *o = t / 100.0; }
///         Ok(())
///     }
///     fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
///         out.fill(0.0);
///         for &i in idx {
///             for j in 0..2 { out[j] += theta[j] - self.data[i][j]; }
///         }
///         Ok(())
///     }
/// }
/// ```
///
#[doc = include_str!("../../docs/guide/models.md")]
pub trait Model: Sync {
    /// The dimension d of θ.
    fn dim(&self) -> usize;

    /// The number of data items N.
    fn n_data(&self) -> usize;

    /// Writes `∇U₀(θ)` (the gradient of the prior potential) into `out`, overwriting it.
    ///
    /// Errors: [`Error::ModelFailure`] if the computation fails.
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()>;

    /// Writes `Σ_{i ∈ idx} ∇Uᵢ(θ)` into `out`, overwriting it.
    ///
    /// `idx` may repeat indices (minibatches drawn with replacement): a repeated index counts
    /// as many times as it appears. Every index is `< n_data()`.
    ///
    /// Errors: [`Error::ModelFailure`] if the computation fails.
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()>;

    /// The prior potential `U₀(θ)`. Default: [`Error::Unsupported`] (not provided).
    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        let _ = theta;
        Err(Error::Unsupported { method: "potential_prior", needed_by: "a potential" })
    }

    /// `Σ_{i ∈ idx} Uᵢ(θ)`. Default: [`Error::Unsupported`] (not provided).
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let _ = (theta, idx);
        Err(Error::Unsupported { method: "potential_data_sum", needed_by: "a potential" })
    }

    /// `Σ_{i ∈ idx} Uᵢ(θ)`, with `Σ_{i ∈ idx} ∇Uᵢ(θ)` written into `out`: what a sampler that
    /// needs both at every point (MALA, HMC and NUTS) asks for, in one pass over the data where
    /// the model can fuse them (the built-in logistic regression does: one dot product per
    /// datum serves both). Default: [`grad_data_sum`](Self::grad_data_sum), then
    /// [`potential_data_sum`](Self::potential_data_sum).
    ///
    /// Errors: those of the two.
    fn potential_and_grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<f64> {
        self.grad_data_sum(theta, idx, out)?;
        self.potential_data_sum(theta, idx)
    }

    /// Writes `∇²U₀(θ) v` into `out`. Default: [`Error::Unsupported`] (not provided).
    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        let _ = (theta, v, out);
        Err(Error::Unsupported { method: "hvp_prior", needed_by: "a Hessian-vector product" })
    }

    /// Writes `Σ_{i ∈ idx} ∇²Uᵢ(θ) v` into `out`. Default: [`Error::Unsupported`] (not provided).
    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let _ = (theta, v, idx, out);
        Err(Error::Unsupported { method: "hvp_data_sum", needed_by: "a Hessian-vector product" })
    }

    /// The scale the user reads the parameters on, if it is not the sampler's: for a
    /// [`Constrained`](crate::Constrained) model its [`Layout`](crate::Layout), under which
    /// [`Sample`](crate::Sample) maps every draw to the constrained scale (θ = T(φ)) and states
    /// its verdict, bounds and table there, with the blocks' names. Default `None`: the draws
    /// are reported as they are. Wrappers ([`Tempered`](crate::Tempered), references, sharded
    /// models) pass their inner model's through.
    fn output_layout(&self) -> Option<&crate::models::Layout> {
        None
    }

    /// The names of θ's coordinates, one per [`dim`](Self::dim), if the model knows them (a
    /// [`Glm`](crate::Glm) read from a CSV file names its coefficients after the columns):
    /// [`Sample`](crate::Sample) names its verdict's failed coordinates and its table's rows
    /// with them when the model has no [`output_layout`](Self::output_layout). Default `None`
    /// (`theta[0]`, `theta[1]`, …). Wrappers pass their inner model's through.
    fn parameter_names(&self) -> Option<Vec<String>> {
        None
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
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        (**self).grad_prior(theta, out)
    }
    #[inline]
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        (**self).grad_data_sum(theta, idx, out)
    }
    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        (**self).potential_prior(theta)
    }
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        (**self).potential_data_sum(theta, idx)
    }
    fn potential_and_grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<f64> {
        (**self).potential_and_grad_data_sum(theta, idx, out)
    }
    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        (**self).hvp_prior(theta, v, out)
    }
    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        (**self).hvp_data_sum(theta, v, idx, out)
    }

    fn output_layout(&self) -> Option<&crate::models::Layout> {
        (**self).output_layout()
    }
    fn parameter_names(&self) -> Option<Vec<String>> {
        (**self).parameter_names()
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

/// Checks that the model gives potentials, at `theta` (its prior's and one datum's): a model
/// without them is [`Error::Unsupported`] naming `who` needs them, at iteration 0.
pub(crate) fn check_potentials<M: Model + ?Sized>(model: &M, theta: &[f64], who: &'static str) -> Result<()> {
    let needed = |e: Error| e.needed_by(who).at_iteration(0);
    model.potential_prior(theta).map_err(needed)?;
    if model.n_data() > 0 {
        model.potential_data_sum(theta, &[0]).map_err(needed)?;
    }
    Ok(())
}
