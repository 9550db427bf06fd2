//! Dense linear algebra, behind one small module so the backend (faer, pure Rust) is one file.
//!
//! Inputs and outputs are ndarray arrays; the few matrices involved are d × d with small d, so
//! copying into faer's layout costs nothing that matters.

use crate::error::{Error, Result};
use faer::Mat;
use faer::linalg::solvers::{DenseSolveCore, Solve};
use ndarray::{Array1, Array2};

fn to_faer(a: &Array2<f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[[i, j]])
}

fn from_faer(m: &Mat<f64>) -> Array2<f64> {
    Array2::from_shape_fn((m.nrows(), m.ncols()), |(i, j)| m[(i, j)])
}

fn check_square(what: &'static str, a: &Array2<f64>) -> Result<()> {
    crate::error::check_len(what, a.nrows(), a.ncols())
}

fn llt(what: &'static str, a: &Array2<f64>) -> Result<faer::linalg::solvers::Llt<f64>> {
    check_square(what, a)?;
    if a.iter().any(|x| !x.is_finite()) {
        return Err(Error::LinearAlgebra { what, reason: "matrix has non-finite entries" });
    }
    to_faer(a)
        .llt(faer::Side::Lower)
        .map_err(|_| Error::LinearAlgebra { what, reason: "matrix is not positive definite" })
}

/// `A⁻¹ b` for symmetric positive definite `A` (Cholesky).
pub fn spd_solve(what: &'static str, a: &Array2<f64>, b: &Array1<f64>) -> Result<Array1<f64>> {
    crate::error::check_len(what, a.nrows(), b.len())?;
    let f = llt(what, a)?;
    let rhs = Mat::from_fn(b.len(), 1, |i, _| b[i]);
    let x = f.solve(&rhs);
    Ok(Array1::from_shape_fn(b.len(), |i| x[(i, 0)]))
}

/// `A⁻¹` for symmetric positive definite `A` (Cholesky), symmetrised.
pub fn spd_inverse(what: &'static str, a: &Array2<f64>) -> Result<Array2<f64>> {
    let f = llt(what, a)?;
    let inv = from_faer(&f.inverse());
    Ok((&inv + &inv.t()) * 0.5)
}

/// The lower Cholesky factor `L` with `A = L Lᵀ`.
pub fn cholesky_lower(what: &'static str, a: &Array2<f64>) -> Result<Array2<f64>> {
    let f = llt(what, a)?;
    Ok(from_faer(&f.L().to_owned()))
}

/// `A⁻¹ b` for a general square `A` (LU with partial pivoting); errors if `A` is singular.
pub fn solve(what: &'static str, a: &Array2<f64>, b: &Array1<f64>) -> Result<Array1<f64>> {
    check_square(what, a)?;
    crate::error::check_len(what, a.nrows(), b.len())?;
    let lu = to_faer(a).partial_piv_lu();
    let rhs = Mat::from_fn(b.len(), 1, |i, _| b[i]);
    let x = lu.solve(&rhs);
    let out = Array1::from_shape_fn(b.len(), |i| x[(i, 0)]);
    if out.iter().all(|v| v.is_finite()) {
        Ok(out)
    } else {
        Err(Error::LinearAlgebra { what, reason: "matrix is singular" })
    }
}

/// The eigenvalues of a symmetric matrix, in increasing order.
pub fn symmetric_eigenvalues(what: &'static str, a: &Array2<f64>) -> Result<Array1<f64>> {
    check_square(what, a)?;
    if a.iter().any(|x| !x.is_finite()) {
        return Err(Error::LinearAlgebra { what, reason: "matrix has non-finite entries" });
    }
    let ev = to_faer(a)
        .self_adjoint_eigenvalues(faer::Side::Lower)
        .map_err(|_| Error::LinearAlgebra { what, reason: "eigenvalue iteration did not converge" })?;
    let mut v: Vec<f64> = ev.into_iter().collect();
    v.sort_by(f64::total_cmp);
    Ok(Array1::from_vec(v))
}

/// The eigen-decomposition `A = Q diag(λ) Qᵀ` of a symmetric matrix: the eigenvalues in
/// increasing order and Q (its columns the eigenvectors) row-major.
pub fn symmetric_eigen(what: &'static str, a: &Array2<f64>) -> Result<(Vec<f64>, Vec<f64>)> {
    check_square(what, a)?;
    if a.iter().any(|x| !x.is_finite()) {
        return Err(Error::LinearAlgebra { what, reason: "matrix has non-finite entries" });
    }
    let evd = to_faer(a)
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|_| Error::LinearAlgebra { what, reason: "eigenvalue iteration did not converge" })?;
    let d = a.nrows();
    let s = evd.S().column_vector();
    let u = evd.U();
    let lambda: Vec<f64> = (0..d).map(|i| s[i]).collect();
    let q: Vec<f64> = (0..d).flat_map(|i| (0..d).map(move |j| (i, j))).map(|(i, j)| u[(i, j)]).collect();
    if lambda.iter().chain(&q).all(|v| v.is_finite()) {
        Ok((lambda, q))
    } else {
        Err(Error::LinearAlgebra { what, reason: "eigen-decomposition is not finite" })
    }
}

/// `aᵀb`, summed in index order: the crate's dot product of parameter-space vectors (L-BFGS,
/// curvature, mode search, model checks, matrix factorisation). The models' data kernels use
/// their own four-accumulator row kernel `models::row_dot` instead: its summation order is part
/// of every built-in model's gradients, hence of their draws, and lets the compiler vectorise.
#[inline]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `‖x‖₂`, the crate's one norm: `√(xᵀx)` summed in index order, and rescaled by the largest
/// entry when that sum overflows (entries beyond about 1e154), so that a runaway chain's norm
/// stays finite.
pub(crate) fn norm(x: &[f64]) -> f64 {
    let ss = dot(x, x);
    if ss.is_finite() {
        return ss.sqrt();
    }
    let m = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if !m.is_finite() || m == 0.0 {
        return m;
    }
    m * x.iter().map(|v| (v / m) * (v / m)).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn failures_are_linear_algebra_errors_naming_the_matrix() {
        let e = spd_inverse("test", &array![[1.0, 2.0], [2.0, 1.0]]).unwrap_err();
        assert!(matches!(e, Error::LinearAlgebra { what: "test", .. }));
        let e = solve("test", &array![[1.0, 2.0], [2.0, 4.0]], &array![1.0, 1.0]).unwrap_err();
        assert!(matches!(e, Error::LinearAlgebra { .. }));
    }

    #[test]
    fn solves() {
        let a = array![[4.0, 1.0], [1.0, 3.0]];
        let b = array![1.0, 2.0];
        let x = spd_solve("t", &a, &b).unwrap();
        let r = a.dot(&x) - &b;
        assert!(r.iter().all(|v| v.abs() < 1e-14));
        let x2 = solve("t", &a, &b).unwrap();
        assert!((&x - &x2).iter().all(|v| v.abs() < 1e-14));
        let inv = spd_inverse("t", &a).unwrap();
        let id = a.dot(&inv);
        assert!((id[[0, 0]] - 1.0).abs() < 1e-14 && id[[0, 1]].abs() < 1e-14);
        let l = cholesky_lower("t", &a).unwrap();
        assert!((l.dot(&l.t()) - &a).iter().all(|v| v.abs() < 1e-14));
        assert!(spd_inverse("t", &array![[1.0, 2.0], [2.0, 1.0]]).is_err());
        let ev = symmetric_eigenvalues("t", &array![[2.0, 1.0], [1.0, 2.0]]).unwrap();
        assert!((ev[0] - 1.0).abs() < 1e-14 && (ev[1] - 3.0).abs() < 1e-14);
        assert!(solve("t", &array![[1.0, 2.0], [2.0, 4.0]], &b).is_err());
    }
}
