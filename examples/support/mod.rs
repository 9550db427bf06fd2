//! Helpers shared by the examples, benches and integration tests (included with `mod support;`
//! or `#[path]`): dense linear algebra for reference answers (exact posteriors, Laplace
//! covariances, eigenvalues) on faer, and standard normal vectors. The crate's own dense
//! algebra and noise helpers are internal; these call the same faer routines and draw the same
//! normals (`StandardNormal`, one per entry, in order), so reference values are unchanged.
#![allow(dead_code)]

use faer::Mat;
use faer::linalg::solvers::{DenseSolveCore, Solve};
use ndarray::{Array1, Array2};
use rand_distr::{Distribution, StandardNormal};

/// Fills `out` with independent standard normal draws from `rng`, in order.
pub fn normals<R: rand::Rng + ?Sized>(rng: &mut R, out: &mut [f64]) {
    for o in out.iter_mut() {
        *o = StandardNormal.sample(rng);
    }
}

fn to_faer(a: &Array2<f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[[i, j]])
}

fn from_faer(m: &Mat<f64>) -> Array2<f64> {
    Array2::from_shape_fn((m.nrows(), m.ncols()), |(i, j)| m[(i, j)])
}

fn llt(what: &str, a: &Array2<f64>) -> Result<faer::linalg::solvers::Llt<f64>, String> {
    if a.nrows() != a.ncols() || a.iter().any(|x| !x.is_finite()) {
        return Err(format!("{what}: not a finite square matrix"));
    }
    to_faer(a).llt(faer::Side::Lower).map_err(|_| format!("{what}: matrix is not positive definite"))
}

/// `A⁻¹` for symmetric positive definite `A` (Cholesky), symmetrised.
pub fn spd_inverse(what: &str, a: &Array2<f64>) -> Result<Array2<f64>, String> {
    let inv = from_faer(&llt(what, a)?.inverse());
    Ok((&inv + &inv.t()) * 0.5)
}

/// The lower Cholesky factor `L` with `A = L Lᵀ`.
pub fn cholesky_lower(what: &str, a: &Array2<f64>) -> Result<Array2<f64>, String> {
    Ok(from_faer(&llt(what, a)?.L().to_owned()))
}

/// `A⁻¹ b` for a general square `A` (LU with partial pivoting).
pub fn solve(what: &str, a: &Array2<f64>, b: &Array1<f64>) -> Result<Array1<f64>, String> {
    if a.nrows() != a.ncols() || a.nrows() != b.len() {
        return Err(format!("{what}: dimensions do not match"));
    }
    let x = to_faer(a).partial_piv_lu().solve(&Mat::from_fn(b.len(), 1, |i, _| b[i]));
    let out = Array1::from_shape_fn(b.len(), |i| x[(i, 0)]);
    if out.iter().all(|v| v.is_finite()) { Ok(out) } else { Err(format!("{what}: matrix is singular")) }
}

/// The eigenvalues of a symmetric matrix, in increasing order.
pub fn symmetric_eigenvalues(what: &str, a: &Array2<f64>) -> Result<Array1<f64>, String> {
    if a.nrows() != a.ncols() || a.iter().any(|x| !x.is_finite()) {
        return Err(format!("{what}: not a finite square matrix"));
    }
    let ev = to_faer(a)
        .self_adjoint_eigenvalues(faer::Side::Lower)
        .map_err(|_| format!("{what}: eigenvalue iteration did not converge"))?;
    let mut v: Vec<f64> = ev.into_iter().collect();
    v.sort_by(f64::total_cmp);
    Ok(Array1::from_vec(v))
}

/// The Wisconsin breast-cancer data (`data/wdbc.csv`): "benign" on an intercept and the 30
/// features standardised (mean 0, sd 1: what a NUTS user does before sampling), prior
/// `N(0, prior_var I)`.
pub fn wdbc_standardised(prior_var: f64) -> sgmcmc::Result<sgmcmc::LogisticRegression> {
    let text = include_str!("../../data/wdbc.csv");
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(|v| v.trim().parse().unwrap_or(f64::NAN)).collect())
        .collect();
    let n = rows.len();
    let p = rows[0].len() - 1;
    let mut x = Array2::zeros((n, p + 1));
    for j in 0..p {
        let m = rows.iter().map(|r| r[j]).sum::<f64>() / n as f64;
        let s = (rows.iter().map(|r| (r[j] - m).powi(2)).sum::<f64>() / (n as f64 - 1.0)).sqrt();
        for i in 0..n {
            x[[i, j + 1]] = (rows[i][j] - m) / s;
        }
    }
    x.column_mut(0).fill(1.0);
    let y = Array1::from_iter(rows.iter().map(|r| r[p]));
    sgmcmc::LogisticRegression::new(&x, &y, prior_var)
}
