//! The curvature at a point: `λ_max` and `λ_min` of `∇²U(θ)` from Hessian-vector products — the
//! exact eigenvalues of the dense Hessian up to [`DENSE_CURVATURE_MAX_DIM`], Lanczos with full
//! reorthogonalisation above (and power iteration when only `λ_max` is asked for). What [`tune`](super::tune)
//! centres its step grid on and multilevel SGLD derives its horizons from.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::models::hessian::{Hessian, dense_hessian};
use crate::models::model::{Model, check_shape};
use crate::numeric::linalg::{dot, norm};
use crate::numeric::rng::{fill_standard_normal, stream};
use ndarray::Array2;

/// Settings of [`curvature`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvatureSettings {
    /// Most Lanczos iterations (Hessian-vector products) when the spectrum is not computed
    /// densely (d above [`DENSE_CURVATURE_MAX_DIM`]). Default 1000.
    pub max_iter: usize,
    /// Lanczos stops when both extreme Ritz values changed by at most `tol` relative over the
    /// last 5 iterations (at most 1e-10 is used). Default 1e-12.
    pub tol: f64,
    /// Seed of the Lanczos starting vector. Default 0.
    pub seed: u64,
    /// Also report `λ_min`. Default true.
    pub lambda_min: bool,
}

impl Default for CurvatureSettings {
    fn default() -> Self {
        CurvatureSettings { max_iter: 1000, tol: 1e-12, seed: 0, lambda_min: true }
    }
}

/// Up to this dimension [`curvature`] computes the whole Hessian (d Hessian-vector products)
/// and its exact eigenvalues; above it, Lanczos.
pub const DENSE_CURVATURE_MAX_DIM: usize = 200;

/// The extreme curvatures of the potential at a point.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Curvature {
    /// The largest eigenvalue of `∇²U(θ)` (full data, prior included).
    pub lambda_max: f64,
    /// The smallest eigenvalue (`None` if not asked for). Exact (to rounding) up to
    /// [`DENSE_CURVATURE_MAX_DIM`]; above it a Lanczos estimate, which can only be too large,
    /// exact once the iterations reach d.
    pub lambda_min: Option<f64>,
    /// Hessian-vector products made (d for the dense spectrum, the Lanczos iterations else).
    pub iterations: usize,
    /// Whether the model's own Hessian-vector products were used (else central differences of
    /// gradients).
    pub exact_hvp: bool,
    /// The evaluations spent.
    pub cost: Cost,
}

/// The largest eigenvalue of a symmetric positive semi-definite operator by power iteration,
/// from a seeded random start: (λ, iterations).
pub(super) fn power_iteration(
    d: usize,
    settings: &CurvatureSettings,
    stream_index: u64,
    mut op: impl FnMut(&[f64], &mut [f64]) -> Result<()>,
) -> Result<(f64, usize)> {
    let mut rng = stream(settings.seed, &[0x7475_6e65, stream_index]);
    let mut v = vec![0.0; d];
    fill_standard_normal(&mut rng, &mut v);
    let nv = norm(&v);
    v.iter_mut().for_each(|x| *x /= nv);
    let mut w = vec![0.0; d];
    let mut lambda = f64::NAN;
    for it in 1..=settings.max_iter {
        op(&v, &mut w)?;
        let rq = dot(&v, &w);
        let nw = norm(&w);
        if nw == 0.0 {
            return Ok((0.0, it));
        }
        v.iter_mut().zip(&w).for_each(|(a, b)| *a = b / nw);
        if (rq - lambda).abs() <= settings.tol * rq.abs() {
            return Ok((rq, it));
        }
        lambda = rq;
    }
    Ok((lambda, settings.max_iter))
}

/// The extreme eigenvalues `(λ_min, λ_max, iterations)` of a symmetric operator by Lanczos with
/// full reorthogonalisation, from a seeded random start. At most `max_iter`, d, and as many
/// iterations as keep the Krylov basis under 400 MB; stops early when both extreme Ritz values
/// have settled (see [`CurvatureSettings::tol`]) or the Krylov space is invariant (then exact).
pub(super) fn lanczos(
    d: usize,
    settings: &CurvatureSettings,
    stream_index: u64,
    mut op: impl FnMut(&[f64], &mut [f64]) -> Result<()>,
) -> Result<(f64, f64, usize)> {
    let budget = (50_000_000 / d).max(50);
    let m_max = settings.max_iter.min(d).min(budget).max(1);
    let tol = settings.tol.min(1e-10);
    let mut rng = stream(settings.seed, &[0x6c61_6e63, stream_index]);
    let mut q = vec![0.0; d];
    fill_standard_normal(&mut rng, &mut q);
    let nq = norm(&q);
    q.iter_mut().for_each(|x| *x /= nq);
    let mut basis: Vec<Vec<f64>> = Vec::with_capacity(m_max);
    let (mut alpha, mut beta): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut w = vec![0.0; d];
    let mut history: Vec<(f64, f64)> = Vec::new();
    let ritz = |alpha: &[f64], beta: &[f64]| -> Result<(f64, f64)> {
        let k = alpha.len();
        let t = Array2::from_shape_fn((k, k), |(i, j)| {
            if i == j {
                alpha[i]
            } else if i + 1 == j {
                beta[i]
            } else if j + 1 == i {
                beta[j]
            } else {
                0.0
            }
        });
        let ev = crate::numeric::linalg::symmetric_eigenvalues("Lanczos tridiagonal matrix", &t)?;
        Ok((ev[0], ev[k - 1]))
    };
    for it in 1..=m_max {
        op(&q, &mut w)?;
        let a = dot(&q, &w);
        basis.push(std::mem::take(&mut q));
        alpha.push(a);
        // Full reorthogonalisation, twice (classical Gram–Schmidt is stable that way).
        for _ in 0..2 {
            for b in &basis {
                let c = dot(b, &w);
                w.iter_mut().zip(b).for_each(|(w, b)| *w -= c * b);
            }
        }
        let b = norm(&w);
        let invariant = b <= 1e-13 * alpha.iter().fold(0.0f64, |m, a| m.max(a.abs())).max(f64::MIN_POSITIVE);
        let check = it % 5 == 0 || it == m_max || invariant;
        if check {
            let (lo, hi) = ritz(&alpha, &beta)?;
            let settled = history.last().is_some_and(|&(plo, phi)| {
                (lo - plo).abs() <= tol * lo.abs().max(f64::MIN_POSITIVE)
                    && (hi - phi).abs() <= tol * hi.abs().max(f64::MIN_POSITIVE)
            });
            history.push((lo, hi));
            if invariant || settled || it == m_max {
                return Ok((lo, hi, it));
            }
        }
        beta.push(b);
        q = w.iter().map(|x| x / b).collect();
    }
    let (lo, hi) = ritz(&alpha, &beta)?;
    Ok((lo, hi, m_max))
}

/// The extreme eigenvalues of `∇²U(θ)` (full data, prior included) from Hessian-vector products
/// (see [`Curvature`]): up to [`DENSE_CURVATURE_MAX_DIM`] the whole Hessian (d products) and its
/// exact eigenvalues; above it Lanczos with full reorthogonalisation (one product per iteration;
/// exact in at most d iterations, and λ_max in far fewer). Each product costs one full HVP (N
/// datum HVPs) or, without the model's HVPs, two full gradients (2N datum gradients).
///
/// Errors: [`Error::DimensionMismatch`] / [`Error::NonFiniteStart`] for a bad θ;
/// [`Error::NonFiniteGradient`] for a non-finite product; [`Error::InvalidParameter`] for bad
/// settings; [`Error::InvalidParameter`] (`"hessian"`) when the largest curvature is not positive
/// (θ is not near a mode: nothing to derive a step from).
pub fn curvature<M: Model + ?Sized>(model: &M, theta: &[f64], settings: &CurvatureSettings) -> Result<Curvature> {
    check_shape(model)?;
    let d = model.dim();
    check_len("theta", d, theta.len())?;
    if !all_finite(theta) {
        return Err(Error::NonFiniteStart { what: "theta" });
    }
    if settings.max_iter == 0 {
        return Err(Error::invalid("max_iter", settings.max_iter, "must be >= 1"));
    }
    if settings.tol.is_nan() || settings.tol <= 0.0 {
        return Err(Error::invalid("tol", settings.tol, "must be > 0"));
    }
    if d <= DENSE_CURVATURE_MAX_DIM {
        let mut cost = Cost::default();
        let exact = Hessian::new(model, theta).exact;
        let h = dense_hessian(model, theta, &mut cost)?;
        return curvature_of_dense(&h, settings.lambda_min, exact, cost);
    }
    let mut hess = Hessian::new(model, theta);
    let (lmin, lmax, it) = lanczos(d, settings, 0, |v, out| hess.apply(v, out))?;
    check_lambda_max(lmax)?;
    Ok(Curvature {
        lambda_max: lmax,
        lambda_min: settings.lambda_min.then_some(lmin),
        iterations: it,
        exact_hvp: hess.exact,
        cost: hess.cost,
    })
}

pub(super) fn check_lambda_max(lmax: f64) -> Result<()> {
    if lmax.is_nan() || lmax <= 0.0 {
        return Err(Error::invalid(
            "hessian",
            format!("largest curvature {lmax:.3e}"),
            "the potential does not curve upwards at θ: start from (near) a mode",
        ));
    }
    Ok(())
}

/// The [`Curvature`] of a dense symmetric Hessian (its exact extreme eigenvalues).
pub(super) fn curvature_of_dense(h: &Array2<f64>, lambda_min: bool, exact_hvp: bool, cost: Cost) -> Result<Curvature> {
    let ev = crate::numeric::linalg::symmetric_eigenvalues("Hessian", h)?;
    let (lmin, lmax) = (ev[0], ev[ev.len() - 1]);
    check_lambda_max(lmax)?;
    Ok(Curvature { lambda_max: lmax, lambda_min: lambda_min.then_some(lmin), iterations: h.nrows(), exact_hvp, cost })
}
