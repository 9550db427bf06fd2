//! The Hessian of the full potential at a point, from Hessian-vector products (the model's, or
//! central differences of full gradients): what the mode search, the curvature and the
//! preconditioning of the tuner use.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite};
use crate::models::model::Model;
use crate::numeric::linalg::norm;
use ndarray::Array2;

/// `∇²U(θ) v` for the full data set: the model's HVPs when it has them, else central
/// differences of full gradients with step `1e-5 · max(1, ‖θ‖)` (exact for quadratic U).
pub(crate) struct Hessian<'a, M: ?Sized> {
    model: &'a M,
    theta: &'a [f64],
    all: Vec<usize>,
    pub(crate) exact: bool,
    h: f64,
    buf: (Vec<f64>, Vec<f64>, Vec<f64>),
    pub(crate) cost: Cost,
}

impl<'a, M: Model + ?Sized> Hessian<'a, M> {
    pub(crate) fn new(model: &'a M, theta: &'a [f64]) -> Self {
        let d = model.dim();
        let all: Vec<usize> = (0..model.n_data()).collect();
        let mut probe = vec![0.0; d];
        let v = vec![0.0; d];
        let exact = model.hvp_prior(theta, &v, &mut probe).is_ok()
            && model.hvp_data_sum(theta, &v, &all[..1.min(all.len())], &mut probe).is_ok();
        let h = 1e-5 * norm(theta).max(1.0);
        Hessian { model, theta, all, exact, h, buf: (vec![0.0; d], vec![0.0; d], vec![0.0; d]), cost: Cost::default() }
    }

    pub(crate) fn grad(&mut self, x: &[f64], out: &mut [f64]) -> Result<()> {
        let (_, _, tmp) = &mut self.buf;
        self.model.grad_data_sum(x, &self.all, out)?;
        self.model.grad_prior(x, tmp)?;
        out.iter_mut().zip(tmp.iter()).for_each(|(o, t)| *o += t);
        self.cost.datum_gradients += self.all.len() as u64;
        if all_finite(out) { Ok(()) } else { Err(Error::NonFiniteGradient { iteration: 0 }) }
    }

    pub(crate) fn apply(&mut self, v: &[f64], out: &mut [f64]) -> Result<()> {
        let n = self.all.len() as u64;
        if self.exact {
            let (a, _, _) = &mut self.buf;
            self.model.hvp_data_sum(self.theta, v, &self.all, out)?;
            self.model.hvp_prior(self.theta, v, a)?;
            out.iter_mut().zip(a.iter()).for_each(|(o, t)| *o += t);
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
    let d = theta.len();
    let mut h = Array2::zeros((d, d));
    hessian_columns(model, theta, cost, |j, col| h.column_mut(j).iter_mut().zip(col).for_each(|(h, c)| *h = *c))?;
    Ok((&h + &h.t()) * 0.5)
}

/// Calls `f(j, ∇²U(θ) eⱼ)` for each column j, from d Hessian-vector products (cost added).
pub(crate) fn hessian_columns<M: Model + ?Sized>(
    model: &M,
    theta: &[f64],
    cost: &mut Cost,
    mut f: impl FnMut(usize, &[f64]),
) -> Result<()> {
    let d = theta.len();
    let mut hess = Hessian::new(model, theta);
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
