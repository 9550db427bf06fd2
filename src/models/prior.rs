//! Priors on one scalar parameter, for models that let the user state theirs ([`Glm`](crate::Glm)).

use crate::error::{Error, Result};

/// A prior on one scalar parameter, as a potential `U(x) = −log p(x)` up to its normalising
/// constant (constants do not change the posterior).
///
/// On a coefficient (a real parameter) every variant but [`Exponential`](Prior::Exponential)
/// is allowed. On a positive parameter (a scale σ, a size r) the same densities are truncated
/// to `x > 0`: [`half_normal`](Prior::half_normal) is `Normal` at location 0,
/// [`half_cauchy`](Prior::half_cauchy) is `StudentT` with one degree of freedom at location 0.
///
/// ```
/// use sgmcmc::Prior;
/// let weak = Prior::student_t(3.0, 0.0, 2.5);
/// assert_eq!(weak.to_string(), "student_t(df 3, location 0, scale 2.5)");
/// assert_eq!(Prior::cauchy(0.0, 1.0), Prior::student_t(1.0, 0.0, 1.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Prior {
    /// The improper flat prior `U = 0`: the posterior is the normalised likelihood, which must
    /// be proper (a logistic regression on separable classes is not).
    Flat,
    /// `N(location, scale²)`: `U = (x − location)²/(2 scale²)`.
    Normal {
        /// The mean.
        location: f64,
        /// The standard deviation, > 0.
        scale: f64,
    },
    /// Student-t with `df` degrees of freedom: `U = (df + 1)/2 · log(1 + z²/df)`,
    /// `z = (x − location)/scale`; `df = 1` is the Cauchy.
    StudentT {
        /// Degrees of freedom, > 0.
        df: f64,
        /// The centre.
        location: f64,
        /// The scale, > 0.
        scale: f64,
    },
    /// `Exponential(rate)` on a positive parameter: `U = rate · x`.
    Exponential {
        /// The rate, > 0 (the mean is `1/rate`).
        rate: f64,
    },
}

impl Prior {
    /// The flat (improper) prior.
    pub fn flat() -> Self {
        Prior::Flat
    }

    /// `N(location, scale²)`.
    pub fn normal(location: f64, scale: f64) -> Self {
        Prior::Normal { location, scale }
    }

    /// Student-t with `df` degrees of freedom, centre `location`, scale `scale`.
    pub fn student_t(df: f64, location: f64, scale: f64) -> Self {
        Prior::StudentT { df, location, scale }
    }

    /// The Cauchy: Student-t with one degree of freedom.
    pub fn cauchy(location: f64, scale: f64) -> Self {
        Prior::StudentT { df: 1.0, location, scale }
    }

    /// The half-normal of a positive parameter: `Normal` at location 0, truncated to `x > 0`.
    pub fn half_normal(scale: f64) -> Self {
        Prior::Normal { location: 0.0, scale }
    }

    /// The half-Cauchy of a positive parameter: `cauchy(0, scale)` truncated to `x > 0`.
    pub fn half_cauchy(scale: f64) -> Self {
        Prior::cauchy(0.0, scale)
    }

    /// `Exponential(rate)`, for positive parameters only.
    pub fn exponential(rate: f64) -> Self {
        Prior::Exponential { rate }
    }

    /// Checks the numbers: locations finite; scales, rates and degrees of freedom finite and
    /// positive; `positive`: the parameter is positive (else an exponential prior is refused).
    /// `what` names the setting in the error, `index` the entry of a list of priors.
    pub(crate) fn validate(&self, what: &'static str, index: Option<usize>, positive: bool) -> Result<()> {
        let bad = |v: f64, why: &'static str| {
            Err(Error::invalid(what, index.map_or_else(|| v.to_string(), |j| format!("[{j}]: {v}")), why))
        };
        let pos = |v: f64| v.is_finite() && v > 0.0;
        match *self {
            Prior::Flat => Ok(()),
            Prior::Normal { location, .. } | Prior::StudentT { location, .. } if !location.is_finite() => {
                bad(location, "a prior's location must be finite")
            }
            Prior::Normal { scale, .. } | Prior::StudentT { scale, .. } if !pos(scale) => {
                bad(scale, "a prior's scale must be finite and > 0")
            }
            Prior::StudentT { df, .. } if !pos(df) => {
                bad(df, "a Student-t prior's degrees of freedom must be finite and > 0")
            }
            Prior::Exponential { rate } if !pos(rate) => {
                bad(rate, "an exponential prior's rate must be finite and > 0")
            }
            Prior::Exponential { rate } if !positive => {
                bad(rate, "an exponential prior is for positive parameters (a scale or size), not a coefficient")
            }
            _ => Ok(()),
        }
    }

    /// The prior stated on a standardised parameter `z`, moved to `x = shift + factor · z`
    /// (`factor` > 0): location `shift + factor · location`, scale `factor · scale`, rate
    /// `rate / factor`.
    pub(crate) fn rescaled(self, shift: f64, factor: f64) -> Self {
        match self {
            Prior::Flat => Prior::Flat,
            Prior::Normal { location, scale } => {
                Prior::Normal { location: shift + factor * location, scale: factor * scale }
            }
            Prior::StudentT { df, location, scale } => {
                Prior::StudentT { df, location: shift + factor * location, scale: factor * scale }
            }
            Prior::Exponential { rate } => Prior::Exponential { rate: rate / factor },
        }
    }

    /// `U(x)` up to a constant.
    #[inline]
    pub(crate) fn potential(&self, x: f64) -> f64 {
        match *self {
            Prior::Flat => 0.0,
            Prior::Normal { location, scale } => {
                let z = (x - location) / scale;
                0.5 * z * z
            }
            Prior::StudentT { df, location, scale } => {
                let z = (x - location) / scale;
                0.5 * (df + 1.0) * (z * z / df).ln_1p()
            }
            Prior::Exponential { rate } => rate * x,
        }
    }

    /// `U'(x)`.
    #[inline]
    pub(crate) fn gradient(&self, x: f64) -> f64 {
        match *self {
            Prior::Flat => 0.0,
            Prior::Normal { location, scale } => (x - location) / (scale * scale),
            Prior::StudentT { df, location, scale } => {
                let r = x - location;
                (df + 1.0) * r / (df * scale * scale + r * r)
            }
            Prior::Exponential { rate } => rate,
        }
    }

    /// `U''(x)`.
    #[inline]
    pub(crate) fn curvature(&self, x: f64) -> f64 {
        match *self {
            Prior::Flat | Prior::Exponential { .. } => 0.0,
            Prior::Normal { scale, .. } => 1.0 / (scale * scale),
            Prior::StudentT { df, location, scale } => {
                let (r2, a) = ((x - location).powi(2), df * scale * scale);
                (df + 1.0) * (a - r2) / ((a + r2) * (a + r2))
            }
        }
    }
}

/// Numbers as a person writes them: up to 4 significant digits, no trailing zeros.
fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

impl std::fmt::Display for Prior {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Prior::Flat => write!(f, "flat"),
            Prior::Normal { location, scale } => write!(f, "normal(location {}, scale {})", num(location), num(scale)),
            Prior::StudentT { df: 1.0, location, scale } => {
                write!(f, "cauchy(location {}, scale {})", num(location), num(scale))
            }
            Prior::StudentT { df, location, scale } => {
                write!(f, "student_t(df {}, location {}, scale {})", num(df), num(location), num(scale))
            }
            Prior::Exponential { rate } => write!(f, "exponential(rate {})", num(rate)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        let priors = [
            Prior::normal(0.3, 2.0),
            Prior::student_t(3.0, -1.0, 0.7),
            Prior::cauchy(0.0, 2.5),
            Prior::exponential(0.4),
            Prior::flat(),
        ];
        for p in priors {
            for x in [-3.1f64, -0.2, 0.05, 1.7, 40.0] {
                let h = 1e-5 * (1.0 + x.abs());
                let g = (p.potential(x + h) - p.potential(x - h)) / (2.0 * h);
                let c = (p.gradient(x + h) - p.gradient(x - h)) / (2.0 * h);
                assert!((p.gradient(x) - g).abs() <= 1e-7 * (1.0 + g.abs()), "{p} at {x}: {} vs {g}", p.gradient(x));
                assert!((p.curvature(x) - c).abs() <= 1e-6 * (1.0 + c.abs()), "{p} at {x}: {} vs {c}", p.curvature(x));
            }
        }
        // The potential is −log density up to a constant: the t density's shape at ν = 3.
        let t = Prior::student_t(3.0, 0.0, 1.0);
        let logpdf = |x: f64| -2.0 * (1.0 + x * x / 3.0).ln();
        assert!(((t.potential(0.0) - t.potential(2.0)) - (logpdf(2.0) - logpdf(0.0))).abs() < 1e-14);
    }

    #[test]
    fn invalid_numbers_are_refused_by_name() {
        assert!(Prior::normal(0.0, 0.0).validate("prior", None, false).is_err());
        assert!(Prior::normal(f64::NAN, 1.0).validate("prior", None, false).is_err());
        assert!(Prior::student_t(-1.0, 0.0, 1.0).validate("prior_intercept", None, false).is_err());
        let e = Prior::exponential(1.0).validate("coefficient_priors", Some(3), false).unwrap_err().to_string();
        assert!(e.contains("coefficient_priors") && e.contains("[3]") && e.contains("positive"), "{e}");
        assert!(Prior::exponential(1.0).validate("prior_aux", None, true).is_ok());
        assert!(Prior::exponential(0.0).validate("prior_aux", None, true).is_err());
        assert_eq!(Prior::normal(0.0, 2.5).rescaled(10.0, 4.0), Prior::normal(10.0, 10.0));
        assert_eq!(Prior::exponential(1.0).rescaled(0.0, 4.0), Prior::exponential(0.25));
        assert_eq!(Prior::normal(0.0, 2.5).to_string(), "normal(location 0, scale 2.5)");
        assert_eq!(Prior::normal(152.13, 192.8).to_string(), "normal(location 152.1, scale 192.8)");
    }
}
