//! [`Constrained`]: a model written on the constrained scale, as a [`Model`] on ℝᵈ.

use crate::error::{Result, check_len};
use crate::models::constrained::layout::Layout;
use crate::models::constrained::transforms::with_scratch;
use crate::models::model::Model;

/// A model written on the constrained scale, seen on ℝᵈ: samplers move φ, the inner model sees
/// θ = T(φ) ([`Layout`]), and the potential gains the log-Jacobian,
///
/// `U_φ(φ) = U₀(T(φ)) − log |det J_T(φ)| + Σᵢ Uᵢ(T(φ))`.
///
/// The log-Jacobian goes with the prior part (so control variates, minibatches and tempering
/// treat the data part as before); gradients are `J_Tᵀ ∇_θ` (no allocation after a thread's
/// first call); potentials and Hessian-vector products are provided when the inner model
/// provides them (Hessian-vector products for every constraint: simplex and
/// Cholesky-correlation blocks by their reverse pass evaluated on dual numbers along v, exact and
/// allocation-free after a thread's first call). The inner model's `dim()` must be the layout's
/// [`dim`](Layout::dim).
///
/// Draws come out on φ: [`Layout::constrain_estimate`] maps them to θ, and
/// [`Constrained::summary_table`] names the rows after the blocks.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Mala, MalaSettings};
/// use sgmcmc::{Constrained, Layout, Result};
///
/// /// Exponential data with rate λ > 0, prior Gamma(2, 1): posterior Gamma(2 + N, 1 + Σx).
/// struct Rate(Vec<f64>);
/// impl Model for Rate {
///     fn dim(&self) -> usize { 1 }
///     fn n_data(&self) -> usize { self.0.len() }
///     fn grad_prior(&self, t: &[f64], out: &mut [f64]) -> Result<()> {
///         out[0] = -1.0 / t[0] + 1.0;
///         Ok(())
///     }
///     fn grad_data_sum(&self, t: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
///         out[0] = idx.iter().map(|&i| -1.0 / t[0] + self.0[i]).sum();
///         Ok(())
///     }
///     fn potential_prior(&self, t: &[f64]) -> Result<f64> { Ok(-t[0].ln() + t[0]) }
///     fn potential_data_sum(&self, t: &[f64], idx: &[usize]) -> Result<f64> {
///         Ok(idx.iter().map(|&i| -t[0].ln() + t[0] * self.0[i]).sum())
///     }
/// }
///
/// let data: Vec<f64> = (0..20).map(|i| 0.5 + 0.05 * i as f64).collect();
/// let model = Constrained::new(Rate(data.clone()), Layout::new().positive("lambda", &[]))?;
/// let mala = Mala::new(MalaSettings::default())?;
/// let s = RunSettings { n_iter: 21_000, burn_in: 1_000, n_chains: 2, seed: 4, ..Default::default() };
/// let out = Runner::new(&model, &mala).start(&[0.0]).settings(s).run()?;
/// let lambda = model.layout().constrain_estimate(&out.estimate)?;
/// let exact = (2.0 + 20.0) / (1.0 + data.iter().sum::<f64>());
/// assert!((lambda.mean()?[0] / exact - 1.0).abs() < 0.03);
/// println!("{}", model.summary_table(&out.estimate)?);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
///
#[doc = include_str!("../../../docs/guide/constrained.md")]
#[derive(Debug, Clone)]
pub struct Constrained<M> {
    model: M,
    layout: Layout,
    dim: usize,
}

impl<M: Model> Constrained<M> {
    /// `model` (on the constrained scale) under `layout`.
    ///
    /// Errors: as [`Layout::validate`]; [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) unless
    /// `model.dim() == layout.dim()`.
    pub fn new(model: M, layout: Layout) -> Result<Self> {
        layout.validate()?;
        check_len("model dimension (the layout's constrained dimension)", layout.dim(), model.dim())?;
        let dim = layout.unconstrained_dim();
        Ok(Constrained { model, layout, dim })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The inner model (constrained scale).
    pub fn inner(&self) -> &M {
        &self.model
    }

    /// φ for a starting point θ on the constrained scale (see [`Layout::unconstrain`]).
    pub fn unconstrain(&self, theta: &[f64]) -> Result<Vec<f64>> {
        let mut phi = vec![0.0; self.dim];
        self.layout.unconstrain(theta, &mut phi)?;
        Ok(phi)
    }

    /// `out = J_Tᵀ ∇_θ(inner part) − jac ∇ log|J|` at φ.
    fn pull_back(
        &self,
        phi: &[f64],
        out: &mut [f64],
        jac: f64,
        inner: impl FnOnce(&[f64], &mut [f64]) -> Result<()>,
    ) -> Result<()> {
        check_len("unconstrained parameters", self.dim, phi.len())?;
        let d = self.layout.dim();
        with_scratch(d, |[theta, g, _, _]| {
            self.layout.forward(phi, theta, None);
            inner(theta, g)?;
            self.layout.backward(phi, theta, g, jac, out);
            Ok(())
        })
    }

    fn hvp(
        &self,
        phi: &[f64],
        v: &[f64],
        out: &mut [f64],
        jac: f64,
        grad: impl FnOnce(&[f64], &mut [f64]) -> Result<()>,
        hvp: impl FnOnce(&[f64], &[f64], &mut [f64]) -> Result<()>,
    ) -> Result<()> {
        check_len("unconstrained parameters", self.dim, phi.len())?;
        check_len("hvp direction v", self.dim, v.len())?;
        let d = self.layout.dim();
        with_scratch(d, |[theta, g, jv, h]| {
            self.layout.forward(phi, theta, None);
            grad(theta, g)?;
            self.layout.jvp(phi, v, jv);
            hvp(theta, jv, h)?;
            self.layout.backward_hvp(phi, theta, g, h, v, jac, out);
            Ok(())
        })
    }
}

impl<M: Model> Model for Constrained<M> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn n_data(&self) -> usize {
        self.model.n_data()
    }

    fn grad_prior(&self, phi: &[f64], out: &mut [f64]) -> Result<()> {
        self.pull_back(phi, out, 1.0, |t, g| self.model.grad_prior(t, g))
    }

    fn grad_data_sum(&self, phi: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.pull_back(phi, out, 0.0, |t, g| self.model.grad_data_sum(t, idx, g))
    }

    fn potential_prior(&self, phi: &[f64]) -> Result<f64> {
        check_len("unconstrained parameters", self.dim, phi.len())?;
        with_scratch(self.layout.dim(), |[theta, ..]| {
            let mut lj = 0.0;
            self.layout.forward(phi, theta, Some(&mut lj));
            self.model.potential_prior(theta).map(|u| u - lj)
        })
    }

    fn potential_data_sum(&self, phi: &[f64], idx: &[usize]) -> Result<f64> {
        check_len("unconstrained parameters", self.dim, phi.len())?;
        with_scratch(self.layout.dim(), |[theta, ..]| {
            self.layout.forward(phi, theta, None);
            self.model.potential_data_sum(theta, idx)
        })
    }

    fn hvp_prior(&self, phi: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.hvp(phi, v, out, 1.0, |t, g| self.model.grad_prior(t, g), |t, w, h| self.model.hvp_prior(t, w, h))
    }

    fn hvp_data_sum(&self, phi: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.hvp(
            phi,
            v,
            out,
            0.0,
            |t, g| self.model.grad_data_sum(t, idx, g),
            |t, w, h| self.model.hvp_data_sum(t, w, idx, h),
        )
    }

    /// This model's layout: draws are reported on the constrained scale.
    fn output_layout(&self) -> Option<&Layout> {
        Some(&self.layout)
    }
}
