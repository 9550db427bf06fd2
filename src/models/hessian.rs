//! The Hessian of the full potential at a point, from Hessian-vector products (the model's, or
//! central differences of full gradients): what the mode search, the curvature and the
//! preconditioning of the tuner use.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite};
use crate::models::model::Model;
use crate::numeric::linalg::norm;
use ndarray::Array2;

/// `∇²U(θ) v` for the full data set: the model's HVPs when it has them, else central
/// differences of full gradients with step `1e-5 · max(1, ‖θ‖)` (exact for quadratic U). Built
/// with [`subsampled`](Self::subsampled), the data sum is estimated from a fixed subset of the
/// data, scaled by `N/m`.
pub(crate) struct Hessian<'a, M: ?Sized> {
    model: &'a M,
    theta: &'a [f64],
    all: Vec<usize>,
    /// `N/m` for a subset of m of the N data (1 for all of them).
    scale: f64,
    pub(crate) exact: bool,
    h: f64,
    buf: (Vec<f64>, Vec<f64>, Vec<f64>),
    pub(crate) cost: Cost,
}

/// The default number of data the tuner's Hessians are estimated from (see
/// [`TuneSettings::hessian_rows`](crate::tune::TuneSettings::hessian_rows)): the tuner's whitening, curvature and Laplace approximation, and the Newton
/// steps of its mode search, need the Hessian to a few per cent, not to rounding.
pub const HESSIAN_ROWS: usize = 10_000;

/// The data a Hessian is estimated from at most, for a model of dimension `d` on `n_data` data
/// with the budget `rows` ([`TuneSettings::hessian_rows`](crate::tune::TuneSettings::hessian_rows)):
/// `max(rows, 100 d)` (the spectral error of a sum of m rank-one terms falls like `√(d/m)`), or
/// all of them (`None`) when that is more than half the data.
pub(crate) fn hessian_subset_size(rows: usize, d: usize, n_data: usize) -> Option<usize> {
    let m = rows.max(100usize.saturating_mul(d));
    (m.saturating_mul(2) < n_data).then_some(m)
}

/// `m` distinct data indices drawn uniformly from `0..n_data` (a partial Fisher–Yates shuffle of
/// a stream seeded by `seed`), sorted.
pub(crate) fn random_subset(n_data: usize, m: usize, seed: u64) -> Vec<usize> {
    let mut rng = crate::numeric::rng::stream(seed, &[0x6865_7373]);
    let mut perm: Vec<usize> = (0..n_data).collect();
    for j in 0..m.min(n_data) {
        let k = j + crate::numeric::rng::uniform_below(&mut rng, (n_data - j) as u64) as usize;
        perm.swap(j, k);
    }
    perm.truncate(m.min(n_data));
    perm.sort_unstable();
    perm
}

impl<'a, M: Model + ?Sized> Hessian<'a, M> {
    pub(crate) fn new(model: &'a M, theta: &'a [f64]) -> Self {
        Self::on(model, theta, (0..model.n_data()).collect())
    }

    /// The Hessian with its data sum estimated from the data `rows` (all of them if `None`).
    pub(crate) fn subsampled(model: &'a M, theta: &'a [f64], rows: Option<&[usize]>) -> Self {
        match rows {
            Some(r) => Self::on(model, theta, r.to_vec()),
            None => Self::new(model, theta),
        }
    }

    fn on(model: &'a M, theta: &'a [f64], all: Vec<usize>) -> Self {
        let d = model.dim();
        let scale = model.n_data() as f64 / all.len().max(1) as f64;
        let mut probe = vec![0.0; d];
        let v = vec![0.0; d];
        let exact = model.hvp_prior(theta, &v, &mut probe).is_ok()
            && model.hvp_data_sum(theta, &v, &all[..1.min(all.len())], &mut probe).is_ok();
        let h = 1e-5 * norm(theta).max(1.0);
        let buf = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
        Hessian { model, theta, all, scale, exact, h, buf, cost: Cost::default() }
    }

    pub(crate) fn grad(&mut self, x: &[f64], out: &mut [f64]) -> Result<()> {
        let (_, _, tmp) = &mut self.buf;
        self.model.grad_data_sum(x, &self.all, out)?;
        self.model.grad_prior(x, tmp)?;
        let scale = self.scale;
        out.iter_mut().zip(tmp.iter()).for_each(|(o, t)| *o = scale * *o + t);
        self.cost.datum_gradients += self.all.len() as u64;
        if all_finite(out) { Ok(()) } else { Err(Error::NonFiniteGradient { iteration: 0 }) }
    }

    pub(crate) fn apply(&mut self, v: &[f64], out: &mut [f64]) -> Result<()> {
        let n = self.all.len() as u64;
        if self.exact {
            let (a, _, _) = &mut self.buf;
            self.model.hvp_data_sum(self.theta, v, &self.all, out)?;
            self.model.hvp_prior(self.theta, v, a)?;
            let scale = self.scale;
            out.iter_mut().zip(a.iter()).for_each(|(o, t)| *o = scale * *o + t);
            self.cost.datum_hvps += n;
        } else {
            // Central differences along v/‖v‖ (so the step is h whatever v's length).
            let nv = norm(v);
            if nv == 0.0 {
                out.fill(0.0);
                return Ok(());
            }
            let h = self.h / nv;
            let xp: Vec<f64> = self.theta.iter().zip(v).map(|(t, v)| t + h * v).collect();
            let xm: Vec<f64> = self.theta.iter().zip(v).map(|(t, v)| t - h * v).collect();
            let mut gp = std::mem::take(&mut self.buf.0);
            let mut gm = std::mem::take(&mut self.buf.1);
            let r = self.grad(&xp, &mut gp).and_then(|_| self.grad(&xm, &mut gm));
            for ((o, a), b) in out.iter_mut().zip(&gp).zip(&gm) {
                *o = (a - b) / (2.0 * h);
            }
            self.buf.0 = gp;
            self.buf.1 = gm;
            r?;
        }
        if all_finite(out) { Ok(()) } else { Err(Error::NonFiniteGradient { iteration: 0 }) }
    }
}

/// `∇²U(θ)` for the full data set, column by column from d Hessian-vector products, symmetrised.
pub(crate) fn dense_hessian<M: Model + ?Sized>(model: &M, theta: &[f64], cost: &mut Cost) -> Result<Array2<f64>> {
    dense_hessian_on(model, theta, None, cost)
}

/// [`dense_hessian`] with the data sum estimated from the data `rows` (all if `None`).
pub(crate) fn dense_hessian_on<M: Model + ?Sized>(
    model: &M,
    theta: &[f64],
    rows: Option<&[usize]>,
    cost: &mut Cost,
) -> Result<Array2<f64>> {
    let d = theta.len();
    let mut h = Array2::zeros((d, d));
    let fill = |j: usize, col: &[f64]| h.column_mut(j).iter_mut().zip(col).for_each(|(h, c)| *h = *c);
    hessian_columns_on(model, theta, rows, cost, fill)?;
    Ok((&h + &h.t()) * 0.5)
}

/// Calls `f(j, ∇²U(θ) eⱼ)` for each column j, from d Hessian-vector products (cost added), with
/// the data sum estimated from the data `rows` (all if `None`).
pub(crate) fn hessian_columns_on<M: Model + ?Sized>(
    model: &M,
    theta: &[f64],
    rows: Option<&[usize]>,
    cost: &mut Cost,
    mut f: impl FnMut(usize, &[f64]),
) -> Result<()> {
    let d = theta.len();
    let mut hess = Hessian::subsampled(model, theta, rows);
    let mut e = vec![0.0; d];
    let mut col = vec![0.0; d];
    for j in 0..d {
        e[j] = 1.0;
        hess.apply(&e, &mut col)?;
        e[j] = 0.0;
        f(j, &col);
    }
    *cost += hess.cost;
    Ok(())
}
