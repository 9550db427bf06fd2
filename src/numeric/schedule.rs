//! Step-size schedules `γ_k`, k = 1, 2, … (1-based: `γ_1` is the first step's size).

use crate::error::{Error, Result, check_non_negative, check_positive};

/// A step-size schedule. `k` is the 1-based iteration index.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum StepSize {
    /// `γ_k = γ` for every k.
    Constant(f64),
    /// `γ_k = γ₁ k^(−α)` (Welling & Teh 2011 use α ∈ (0.5, 1] for consistency).
    Polynomial {
        /// `γ₁ > 0`, the first step size.
        gamma1: f64,
        /// Decay exponent `α ≥ 0`.
        alpha: f64,
    },
    /// `γ_k = a (b + k)^(−c)` (Welling & Teh 2011, eq. 9 with their `b + t`).
    Shifted {
        /// Scale `a > 0`.
        a: f64,
        /// Shift `b ≥ 0`.
        b: f64,
        /// Decay exponent `c ≥ 0`.
        c: f64,
    },
    /// Cosine cycles (Zhang et al., ICLR 2020): `γ_k = γ₀/2 · (cos(π r(k)) + 1)` with
    /// `r(k) = ((k − 1) mod L) / L`. For the full cyclical method (exploration and sampling
    /// stages, only sampling draws kept) use [`CyclicalSgld`](crate::CyclicalSgld).
    Cyclical {
        /// The largest step `γ₀ > 0` (at the start of each cycle).
        gamma0: f64,
        /// The cycle length `L ≥ 1` in iterations.
        cycle_len: u64,
    },
}

impl Default for StepSize {
    /// `Constant(1e-4)`; almost every model wants its own value.
    fn default() -> Self {
        StepSize::Constant(1e-4)
    }
}

impl From<f64> for StepSize {
    /// A constant step: `StepSize::from(1e-4) == StepSize::Constant(1e-4)`.
    fn from(gamma: f64) -> Self {
        StepSize::Constant(gamma)
    }
}

impl StepSize {
    /// Checks the parameters; `name` is the settings field the schedule belongs to.
    pub fn validate(&self, name: &'static str) -> Result<()> {
        match *self {
            StepSize::Constant(g) => check_positive(name, g),
            StepSize::Polynomial { gamma1, alpha } => {
                check_positive(name, gamma1)?;
                check_non_negative(name, alpha)
                    .map_err(|_| Error::invalid(name, alpha, "decay exponent alpha must be finite and >= 0"))
            }
            StepSize::Shifted { a, b, c } => {
                check_positive(name, a)?;
                check_non_negative(name, b).map_err(|_| Error::invalid(name, b, "shift b must be finite and >= 0"))?;
                check_non_negative(name, c)
                    .map_err(|_| Error::invalid(name, c, "decay exponent c must be finite and >= 0"))
            }
            StepSize::Cyclical { gamma0, cycle_len } => {
                check_positive(name, gamma0)?;
                if cycle_len == 0 {
                    return Err(Error::invalid(name, cycle_len, "cycle length must be >= 1"));
                }
                Ok(())
            }
        }
    }

    /// `γ_k` for the 1-based iteration `k` (k = 0 is treated as k = 1).
    #[inline]
    pub fn at(&self, k: u64) -> f64 {
        let kf = k.max(1) as f64;
        match *self {
            StepSize::Constant(g) => g,
            StepSize::Polynomial { gamma1, alpha } => gamma1 * kf.powf(-alpha),
            StepSize::Shifted { a, b, c } => a * (b + kf).powf(-c),
            StepSize::Cyclical { gamma0, cycle_len } => {
                let r = ((k.max(1) - 1) % cycle_len.max(1)) as f64 / cycle_len.max(1) as f64;
                0.5 * gamma0 * ((std::f64::consts::PI * r).cos() + 1.0)
            }
        }
    }

    /// Whether the schedule is constant (then every sample gets the same weight).
    pub fn is_constant(&self) -> bool {
        match *self {
            StepSize::Constant(_) => true,
            StepSize::Polynomial { alpha, .. } => alpha == 0.0,
            StepSize::Shifted { c, .. } => c == 0.0,
            StepSize::Cyclical { cycle_len, .. } => cycle_len == 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas() {
        assert_eq!(StepSize::Constant(0.1).at(7), 0.1);
        let p = StepSize::Polynomial { gamma1: 0.5, alpha: 0.5 };
        assert!((p.at(4) - 0.25).abs() < 1e-15);
        let s = StepSize::Shifted { a: 2.0, b: 3.0, c: 1.0 };
        assert!((s.at(1) - 0.5).abs() < 1e-15);
        // Cosine cycles of length 4: γ₀, γ₀(1 + cos(π/4))/2, γ₀/2, ..., then γ₀ again.
        let c = StepSize::Cyclical { gamma0: 2.0, cycle_len: 4 };
        assert_eq!(c.at(1), 2.0);
        assert!((c.at(2) - (1.0 + std::f64::consts::FRAC_1_SQRT_2)).abs() < 1e-15);
        assert!((c.at(3) - 1.0).abs() < 1e-15);
        assert_eq!(c.at(5), 2.0);
        assert!(StepSize::Cyclical { gamma0: 1.0, cycle_len: 0 }.validate("s").is_err());
    }

    #[test]
    fn validation() {
        assert!(StepSize::Constant(0.0).validate("step_size").is_err());
        assert!(StepSize::Constant(f64::NAN).validate("step_size").is_err());
        assert!(StepSize::Polynomial { gamma1: 1.0, alpha: -1.0 }.validate("s").is_err());
        assert!(StepSize::Shifted { a: 1.0, b: -1.0, c: 0.5 }.validate("s").is_err());
        assert!(StepSize::Shifted { a: 1.0, b: 0.0, c: 0.55 }.validate("s").is_ok());
    }
}
