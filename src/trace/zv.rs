//! Zero-variance (ZV) control-variate post-processing of any sampler's output.
//!
//! For draws θ⁽ʲ⁾ with the gradient estimates `∇Û(θ⁽ʲ⁾)` the sampler computed at them (store
//! them with [`Storage::SamplesAndGradients`](crate::Storage::SamplesAndGradients)) and a test
//! function g, the functions `h = ΔQ − ∇Q·∇U` have zero mean under π (integration by parts), and
//! stay zero-mean with an unbiased `∇Û` (Friel et al. 2016). For polynomial Q:
//! - first order, `Q = aᵀθ`: the d control variates `∂ᵢÛ(θ)`;
//! - second order, `Q` quadratic: also `2 − 2θᵢ∂ᵢÛ` (for each i) and `−(θⱼ∂ᵢÛ + θᵢ∂ⱼÛ)`
//!   (for i < j): `2d + d(d−1)/2` in all.
//!
//! The coefficients minimise the variance of `g − cᵀh`: `c = Var(h)⁻¹ Cov(h, g)`, solved by
//! Cholesky on the (column-scaled) normal equations; the estimate is `mean(g) − cᵀ mean(h)`.
//! ZV removes variance, not a sampler's bias.
//!
//! With a constant-step chain (whose law π_γ is not π): the first-order control variates `∂ᵢÛ`
//! have mean zero under the chain's own law too (`E_{π_γ}[∇U] = 0` at stationarity), so
//! first-order ZV leaves the estimate's expectation unchanged; the second-order ones have mean zero
//! only under π (for SGLD, `E_{π_γ}[2 − 2θᵢ∂ᵢÛ] ≈ −γE[(∂ᵢÛ)²]`), so second-order ZV may shift the
//! estimate by O(γ) — towards π's value or away from the chain's, depending on the case.
//!
//! References: A. Mira, R. Solgi, D. Imparato, *Zero variance Markov chain Monte Carlo for
//! Bayesian estimators*, Stat. Comput. 23, 2013; N. Friel, A. Mira, C. J. Oates, *Exploiting
//! multi-core architectures for reduced-variance estimation with intractable likelihoods*,
//! Bayesian Analysis 11, 2016; J. Baker et al., *Control variates for stochastic gradient MCMC*,
//! Stat. Comput. 29, 2019, §4.

use crate::error::{Error, Result, check_len};
use crate::trace::estimate::Samples;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};

/// The polynomial order of the ZV control variates.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZvOrder {
    /// `Q` linear: d control variates (exact for linear g under a Gaussian target).
    #[default]
    First,
    /// `Q` quadratic: `2d + d(d−1)/2` control variates (exact for quadratic g under a Gaussian).
    Second,
}

/// The outcome of ZV post-processing for one test function.
#[derive(Debug, Clone, PartialEq)]
pub struct ZvEstimate {
    /// The ZV estimate `mean(g − cᵀh)`.
    pub estimate: f64,
    /// The plain estimate `mean(g)`.
    pub plain_estimate: f64,
    /// The sample variance of g over the draws.
    pub plain_variance: f64,
    /// The sample variance of `g − cᵀh` over the draws.
    pub zv_variance: f64,
    /// `plain_variance / zv_variance` (∞ if the ZV variance is 0).
    pub variance_reduction: f64,
    /// The coefficients c.
    pub coefficients: Array1<f64>,
}

/// The control-variate matrix h (n × k) of the given order from draws and gradients (n × d).
///
/// Errors: [`Error::DimensionMismatch`] if the shapes differ.
pub fn control_variates(
    draws: ArrayView2<'_, f64>,
    gradients: ArrayView2<'_, f64>,
    order: ZvOrder,
) -> Result<Array2<f64>> {
    check_len("gradient rows", draws.nrows(), gradients.nrows())?;
    check_len("gradient columns", draws.ncols(), gradients.ncols())?;
    let (n, d) = draws.dim();
    let k = match order {
        ZvOrder::First => d,
        ZvOrder::Second => 2 * d + d * (d - 1) / 2,
    };
    let mut h = Array2::zeros((n, k));
    for r in 0..n {
        let (t, g) = (draws.row(r), gradients.row(r));
        let mut col = 0;
        for i in 0..d {
            h[[r, col]] = g[i];
            col += 1;
        }
        if order == ZvOrder::Second {
            for i in 0..d {
                h[[r, col]] = 2.0 - 2.0 * t[i] * g[i];
                col += 1;
            }
            for i in 0..d {
                for j in i + 1..d {
                    h[[r, col]] = -(t[j] * g[i] + t[i] * g[j]);
                    col += 1;
                }
            }
        }
    }
    Ok(h)
}

/// ZV post-processing of test-function values `values` (n × m: m test functions), given draws
/// and gradients (n × d). One regression per test function, sharing one factorisation.
///
/// Errors: [`Error::DimensionMismatch`] for inconsistent shapes; [`Error::TooFewSamples`] unless
/// n ≥ k + 2 (k control variates); [`Error::LinearAlgebra`] if the control variates are
/// collinear (e.g. a constant gradient coordinate); [`Error::InvalidParameter`] for non-finite
/// inputs.
pub fn zv_matrix(
    draws: ArrayView2<'_, f64>,
    gradients: ArrayView2<'_, f64>,
    values: ArrayView2<'_, f64>,
    order: ZvOrder,
) -> Result<Vec<ZvEstimate>> {
    check_len("rows of test-function values", draws.nrows(), values.nrows())?;
    if draws.iter().chain(gradients.iter()).chain(values.iter()).any(|x| !x.is_finite()) {
        return Err(Error::invalid("zv inputs", "non-finite entry", "draws, gradients and values must be finite"));
    }
    let h = control_variates(draws, gradients, order)?;
    let (n, k) = h.dim();
    if n < k + 2 {
        return Err(Error::TooFewSamples { needed: k + 2, got: n });
    }
    let nf = n as f64;
    let h_mean = h.mean_axis(Axis(0)).expect("n > 0");
    let mut hc = &h - &h_mean;
    // Scale columns to unit variance so that the normal equations are well conditioned.
    let scale: Array1<f64> = hc.map_axis(Axis(0), |c| (c.dot(&c) / (nf - 1.0)).sqrt());
    if scale.iter().any(|&s| s.is_nan() || s <= 0.0) {
        return Err(Error::LinearAlgebra { what: "ZV regression", reason: "a control variate is constant" });
    }
    hc /= &scale;
    let gram = hc.t().dot(&hc);
    // Collinear control variates: the Cholesky factor of the (unit-diagonal-scaled) Gram matrix
    // has a pivot at rounding level, or the factorisation fails outright.
    let l = crate::numeric::linalg::cholesky_lower("ZV regression", &gram)?;
    let pivots = l.diag().mapv(|x| x * x / (nf - 1.0));
    if pivots.iter().any(|&p| p.is_nan() || p <= 1e-10) {
        return Err(Error::LinearAlgebra { what: "ZV regression", reason: "the control variates are collinear" });
    }
    let mut out = Vec::with_capacity(values.ncols());
    for g in values.columns() {
        let g_mean = g.sum() / nf;
        let gc = g.mapv(|x| x - g_mean);
        let cs = crate::numeric::linalg::spd_solve("ZV regression", &gram, &hc.t().dot(&gc))?;
        let resid = &gc - &hc.dot(&cs);
        let coefficients = &cs / &scale;
        let plain_variance = gc.dot(&gc) / (nf - 1.0);
        let zv_variance = resid.dot(&resid) / (nf - 1.0);
        out.push(ZvEstimate {
            estimate: g_mean - coefficients.dot(&h_mean),
            plain_estimate: g_mean,
            plain_variance,
            zv_variance,
            variance_reduction: if zv_variance > 0.0 { plain_variance / zv_variance } else { f64::INFINITY },
            coefficients,
        });
    }
    Ok(out)
}

/// ZV post-processing of one test function's values (n), given draws and gradients (n × d).
/// Errors as [`zv_matrix`].
pub fn zv(
    draws: ArrayView2<'_, f64>,
    gradients: ArrayView2<'_, f64>,
    values: ArrayView1<'_, f64>,
    order: ZvOrder,
) -> Result<ZvEstimate> {
    let v = values.insert_axis(Axis(1));
    Ok(zv_matrix(draws, gradients, v, order)?.remove(0))
}

/// ZV post-processing of a test function `f` over a chain's stored samples (which must hold
/// gradients and equal weights, i.e. a constant step size).
///
/// Errors: [`Error::NotStored`] without gradients; [`Error::InvalidParameter`] (`weights`) for
/// unequal weights; then as [`zv_matrix`].
pub fn zv_samples<F: Fn(ArrayView1<'_, f64>) -> f64>(samples: &Samples, f: F, order: ZvOrder) -> Result<ZvEstimate> {
    let grads =
        samples.gradients().ok_or(Error::NotStored { what: "gradients (run with Storage::SamplesAndGradients)" })?;
    let w = samples.weights();
    if let Some(&w0) = w.first()
        && w.iter().any(|&x| x != w0)
    {
        return Err(Error::invalid("weights", "unequal", "ZV needs equally weighted draws (a constant step size)"));
    }
    let values: Array1<f64> = samples.draws().outer_iter().map(f).collect();
    zv(samples.draws(), grads, values.view(), order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn second_order_columns() {
        let h = control_variates(array![[1.0, 2.0]].view(), array![[0.5, -1.0]].view(), ZvOrder::Second).unwrap();
        // [g0, g1, 2-2 t0 g0, 2-2 t1 g1, -(t1 g0 + t0 g1)]
        assert_eq!(h.row(0).to_vec(), vec![0.5, -1.0, 1.0, 6.0, -(2.0 * 0.5 - 1.0)]);
    }

    #[test]
    fn errors() {
        let d = Array2::<f64>::zeros((3, 2));
        assert!(matches!(
            zv(d.view(), d.view(), Array1::zeros(3).view(), ZvOrder::First),
            Err(Error::TooFewSamples { needed: 4, got: 3 })
        ));
        assert!(matches!(
            zv(d.view(), Array2::zeros((3, 1)).view(), Array1::zeros(3).view(), ZvOrder::First),
            Err(Error::DimensionMismatch { .. })
        ));
        let d = Array2::<f64>::zeros((10, 2));
        assert!(matches!(
            zv(d.view(), d.view(), Array1::zeros(10).view(), ZvOrder::First),
            Err(Error::LinearAlgebra { .. })
        ));
    }
}
