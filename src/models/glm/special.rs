//! Special functions of the families: Mills' ratio and log Φ (probit), digamma and trigamma
//! (negative binomial), a Poisson draw (the synthetic generator).

use super::*;

/// The inverse Mills ratio `φ(z)/Φ(z)`, accurate in both tails.
pub(super) fn mills(z: f64) -> f64 {
    if z > -30.0 {
        let phi = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
        phi / (0.5 * libm::erfc(-z / std::f64::consts::SQRT_2))
    } else {
        // Φ(z)/φ(z) = (1/x)(1 − 1/x² + 3/x⁴ − 15/x⁶ + …), x = −z.
        let x = -z;
        let x2 = x * x;
        x / (1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2))
    }
}

/// `log Φ(z)`, accurate in both tails.
pub(super) fn log_phi(z: f64) -> f64 {
    if z > -30.0 {
        (0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)).ln()
    } else {
        -0.5 * z * z - 0.5 * (2.0 * std::f64::consts::PI).ln() - mills(z).ln()
    }
}

/// The digamma function ψ(x), x > 0: recurrence up to x ≥ 12, then the asymptotic series
/// (next term below 3e-15 there).
pub(super) fn digamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 12.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    acc + x.ln()
        - 0.5 / x
        - f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (1.0 / 240.0 - f * (1.0 / 132.0)))))
}

/// The trigamma function ψ'(x), x > 0, likewise.
pub(super) fn trigamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 12.0 {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    acc + 1.0 / x
        + f / 2.0
        + f / x * (1.0 / 6.0 - f * (1.0 / 30.0 - f * (1.0 / 42.0 - f * (1.0 / 30.0 - f * (5.0 / 66.0)))))
}

/// A Poisson(λ) draw: inversion by sequential search for λ < 30, the normal approximation
/// rounded (only for synthetic data) above.
pub(super) fn poisson<R: rand::Rng + ?Sized>(lam: f64, rng: &mut R) -> f64 {
    if lam < 30.0 {
        let (mut k, mut p, u) = (0.0, (-lam).exp(), rng.random::<f64>());
        let mut cdf = p;
        while u > cdf && k < 1_000.0 {
            k += 1.0;
            p *= lam / k;
            cdf += p;
        }
        k
    } else {
        (lam + lam.sqrt() * standard_normal(rng)).round().max(0.0)
    }
}
