//! The GLM's response families and links ([`Family`]) and its settings ([`GlmSettings`]).

use crate::models::prior::Prior;
use ndarray::Array1;

/// The response distribution and link of a [`Glm`](crate::Glm). With `η = b₀ + xᵀβ + offset`:
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Family {
    /// `y ~ N(η, σ²)`, σ > 0 a parameter (the last coordinate of θ).
    Gaussian,
    /// `y ∈ {0, 1}`, `P(y = 1) = logistic(η)`.
    Logistic,
    /// `y ∈ {0, 1}`, `P(y = 1) = Φ(η)` (standard normal CDF).
    Probit,
    /// `y ∈ {0, 1, 2, …}`, `y ~ Poisson(e^η)`.
    Poisson,
    /// `y ∈ {0, 1, 2, …}`, negative binomial with mean `μ = e^η` and size (dispersion) r > 0 a
    /// parameter (the last coordinate of θ): `Var y = μ + μ²/r`.
    NegativeBinomial,
}

impl Family {
    /// Whether the family has a positive auxiliary parameter (σ, r) after β.
    pub fn has_aux(self) -> bool {
        matches!(self, Family::Gaussian | Family::NegativeBinomial)
    }

    pub(super) fn aux_name(self) -> &'static str {
        match self {
            Family::NegativeBinomial => "r",
            _ => "sigma",
        }
    }
}

/// Settings of a [`Glm`](crate::Glm); build with `GlmSettings { intercept: false, ..Default::default() }`
/// (fields may be added: always end a literal with `..Default::default()`).
///
/// **Priors.** The defaults are rstanarm's weakly informative priors, scaled to the data
/// ([`autoscale`](Self::autoscale)) so that they cannot dominate a regression on covariates as
/// measured: each coefficient `βⱼ ~ N(0, (2.5 · s_y / s_xⱼ)²)`, the intercept at the covariates'
/// means `b₀ + x̄ᵀβ ~ N(ȳ, (2.5 · s_y)²)` (location 0 and `s_y` = 1 outside the Gaussian
/// family), σ ~ Exponential(1 / s_y), r ~ Exponential(1); `s_y`, `s_xⱼ` are the sample sds of
/// y and of column j. They are a model choice, not a neutral one: print the model
/// (`println!("{glm}")`) to see the priors actually used, and state your own with
/// [`Prior`] (flat, normal, Student-t, Cauchy; half-normal, half-Cauchy, exponential on σ or r)
/// and `autoscale: false` to reproduce a published model.
///
/// Migration from 0.1's `prior_sd: s, aux_rate: a` (one `N(0, s²)` on every coefficient and on
/// b₀ itself, σ or r ~ Exponential(a)): `prior: Prior::normal(0.0, s), prior_intercept:
/// Prior::normal(0.0, s), centred_intercept: false, prior_aux: Prior::exponential(a),
/// autoscale: false`.
#[derive(Debug, Clone, PartialEq)]
pub struct GlmSettings {
    /// Add an intercept `b₀` (the first coordinate of θ). Default true.
    pub intercept: bool,
    /// Per-datum offsets added to η (e.g. log exposure for counts). Default none.
    pub offset: Option<Array1<f64>>,
    /// Per-datum weights `wᵢ > 0` multiplying each datum's potential. Default none (all 1).
    pub weights: Option<Array1<f64>>,
    /// The prior of every coefficient βⱼ (not the intercept) unless
    /// [`coefficient_priors`](Self::coefficient_priors) gives one per column. Default
    /// `Prior::normal(0.0, 2.5)` (autoscaled). Not [`Prior::Exponential`].
    pub prior: Prior,
    /// One prior per column of the features (p of them), replacing [`prior`](Self::prior);
    /// autoscaled like it. Default none.
    pub coefficient_priors: Option<Vec<Prior>>,
    /// The prior of the intercept: of `b₀ + x̄ᵀβ` (the intercept at the covariates' means, as
    /// rstanarm) if [`centred_intercept`](Self::centred_intercept), else of b₀. Default
    /// `Prior::normal(0.0, 2.5)` (autoscaled). Not [`Prior::Exponential`].
    pub prior_intercept: Prior,
    /// Whether [`prior_intercept`](Self::prior_intercept) is on the intercept at the
    /// covariates' means (true, the default: the prior then says nothing about b₀ itself, which
    /// for uncentred covariates can be far from 0) or on b₀.
    pub centred_intercept: bool,
    /// The prior of σ (Gaussian) or r (negative binomial), positive parameters. Default
    /// `Prior::exponential(1.0)` (autoscaled: rate `1/s_y` for σ, 1 for r).
    pub prior_aux: Prior,
    /// Scale the priors to the data (default true): each prior is read as a prior on the model
    /// with standardised covariates and, for the Gaussian family, a standardised response.
    /// A coefficient's location and scale are multiplied by `s_y / s_xⱼ` (a constant column's
    /// `s_xⱼ` is taken as 1); the intercept's location becomes `ȳ + s_y · location` and its
    /// scale `s_y · scale` (`ȳ` = 0, `s_y` = 1 outside the Gaussian family); σ's scale is
    /// multiplied and its rate divided by `s_y`; r is not scaled. With false, the priors are
    /// used as written.
    pub autoscale: bool,
}

impl Default for GlmSettings {
    fn default() -> Self {
        GlmSettings {
            intercept: true,
            offset: None,
            weights: None,
            prior: Prior::normal(0.0, 2.5),
            coefficient_priors: None,
            prior_intercept: Prior::normal(0.0, 2.5),
            centred_intercept: true,
            prior_aux: Prior::exponential(1.0),
            autoscale: true,
        }
    }
}
