//! The Taylor gradient estimator (Giles et al., §3.4): a second-order control variate.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::control_variate::CvSettings;
use crate::gradient::{GradientEstimator, Subsample, SubsampledEstimator};
use crate::models::model::{Model, check_shape};
use rand::Rng;
use std::sync::Arc;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Expansion {
    theta0: Vec<f64>,
    /// `Σᵣ ∇Uᵣ(θ₀)` (data part only).
    data_grad0: Vec<f64>,
    /// `Σᵣ ∇²Uᵣ(θ₀)`, row-major d × d.
    hess_data: Vec<f64>,
    /// Row r = `∇Uᵣ(θ₀)`, if cached.
    cache: Option<Vec<f64>>,
    n_data: usize,
    setup: Cost,
}

/// The Taylor-expansion gradient estimator around θ₀ (usually the MAP):
///
/// `∇Ũ_T(θ) = ∇U₀(θ) + Σᵣ∇Uᵣ(θ₀) + H(θ₀)(θ − θ₀) + (N/n) Σ_{r∈S} [∇Uᵣ(θ) − ∇Uᵣ(θ₀) − ∇²Uᵣ(θ₀)(θ − θ₀)]`
///
/// with `H(θ₀) = Σᵣ ∇²Uᵣ(θ₀)` the data Hessian, computed once. The prior enters exactly (its own
/// Taylor remainder is zero in this form), so the estimator is unbiased for `∇U(θ)`. Its noise is
/// the subsampled second-order remainder, O(N ‖θ − θ₀‖²)-small near θ₀ — smaller than the
/// first-order control variate's O(N ‖θ − θ₀‖).
///
/// Setup: one full gradient pass and d full Hessian-vector passes at θ₀ (N datum gradients and
/// N·d datum Hessian-vector products, counted in [`setup_cost`](GradientEstimator::setup_cost));
/// memory d² (N·d more with cached centre gradients). Each estimate: n datum gradients at θ, n at
/// θ₀ (none if cached) and n Hessian-vector products, plus O(d²). Needs
/// [`Model::hvp_data_sum`]. Usable by every sampler, and by multilevel SGLD.
///
/// Reference: M. B. Giles, T. Nagapetyan, L. Szpruch, S. J. Vollmer, K. C. Zygalakis,
/// *Multilevel Monte Carlo for scalable Bayesian computations*, arXiv:1609.06144, §3.4.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Taylor {
    exp: Arc<Expansion>,
    sub: Subsample,
    buf_a: Vec<f64>,
    buf_b: Vec<f64>,
    buf_v: Vec<f64>,
    buf_hv: Vec<f64>,
    grads: u64,
    hvps: u64,
}

impl Taylor {
    /// The estimator expanded around `theta0`, with minibatch settings as for the control
    /// variate.
    ///
    /// Errors: [`Error::Unsupported`] if the model has no Hessian-vector products;
    /// [`Error::DimensionMismatch`], [`Error::InvalidBatchSize`], [`Error::EmptyData`];
    /// [`Error::NonFiniteGradient`] (iteration 0) for non-finite derivatives at θ₀.
    pub fn at<M: Model + ?Sized>(model: &M, theta0: &[f64], settings: CvSettings) -> Result<Self> {
        check_shape(model)?;
        let (n, d) = (model.n_data(), model.dim());
        check_len("expansion point theta0", d, theta0.len())?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteStart { what: "theta0" });
        }
        let mut sub = Subsample::new(settings.batch_size, settings.replacement);
        sub.prepare(n)?;
        let all = crate::error::all_indices(n)?;
        let mut data_grad0 = vec![0.0; d];
        let mut setup = Cost::default();
        let cache = if settings.cache_centre_gradients {
            crate::error::check_bytes(
                "the cached centre gradients (n_data × dim; CvSettings::cache_centre_gradients)",
                n as u128 * d as u128 * 8,
                Some(crate::error::DEFAULT_MEMORY_LIMIT),
            )?;
            let mut cache = vec![0.0; n * d];
            for (i, row) in cache.chunks_exact_mut(d).enumerate() {
                model.grad_data_sum(theta0, &[i], row)?;
                for (g, r) in data_grad0.iter_mut().zip(row.iter()) {
                    *g += r;
                }
            }
            Some(cache)
        } else {
            model.grad_data_sum(theta0, &all, &mut data_grad0)?;
            None
        };
        setup.datum_gradients += n as u64;
        let mut hess_data = vec![0.0; d * d];
        let mut e = vec![0.0; d];
        let mut col = vec![0.0; d];
        for j in 0..d {
            e.fill(0.0);
            e[j] = 1.0;
            model.hvp_data_sum(theta0, &e, &all, &mut col).map_err(|err| match err {
                Error::Unsupported { method, .. } => Error::Unsupported { method, needed_by: "the Taylor estimator" },
                other => other,
            })?;
            for i in 0..d {
                hess_data[i * d + j] = col[i];
            }
            setup.datum_hvps += n as u64;
        }
        if !all_finite(&data_grad0) || !all_finite(&hess_data) {
            return Err(Error::NonFiniteGradient { iteration: 0 });
        }
        let exp = Expansion { theta0: theta0.to_vec(), data_grad0, hess_data, cache, n_data: n, setup };
        Ok(Taylor {
            exp: Arc::new(exp),
            sub,
            buf_a: vec![0.0; d],
            buf_b: vec![0.0; d],
            buf_v: vec![0.0; d],
            buf_hv: vec![0.0; d],
            grads: 0,
            hvps: 0,
        })
    }

    /// The same estimator drawing its minibatches (of the same size) by epoch-wise random
    /// reshuffling ([`Batches::Reshuffled`](crate::Batches::Reshuffled)) instead of as its settings said.
    pub fn reshuffled(mut self) -> Self {
        self.sub = Subsample::reshuffled(self.sub.batch_size());
        self
    }

    /// The expansion point θ₀ (start chains here).
    pub fn centre(&self) -> &[f64] {
        &self.exp.theta0
    }

    /// The data Hessian `Σᵣ ∇²Uᵣ(θ₀)`, row-major d × d.
    pub fn data_hessian(&self) -> &[f64] {
        &self.exp.hess_data
    }

    fn eval_idx<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let e = &*self.exp;
        let d = e.theta0.len();
        for ((v, t), t0) in self.buf_v.iter_mut().zip(theta).zip(&e.theta0) {
            *v = t - t0;
        }
        // A = Σ_S ∇Uᵣ(θ) into out.
        model.grad_data_sum(theta, idx, out)?;
        self.grads += idx.len() as u64;
        // B = Σ_S ∇Uᵣ(θ₀).
        match &e.cache {
            Some(cache) => {
                self.buf_b.fill(0.0);
                for &i in idx {
                    for (b, r) in self.buf_b.iter_mut().zip(&cache[i * d..(i + 1) * d]) {
                        *b += r;
                    }
                }
            }
            None => {
                model.grad_data_sum(&e.theta0, idx, &mut self.buf_b)?;
                self.grads += idx.len() as u64;
            }
        }
        // C = Σ_S ∇²Uᵣ(θ₀) v.
        model.hvp_data_sum(&e.theta0, &self.buf_v, idx, &mut self.buf_hv)?;
        self.hvps += idx.len() as u64;
        model.grad_prior(theta, &mut self.buf_a)?;
        let scale = e.n_data as f64 / idx.len() as f64;
        for (i, o) in out.iter_mut().enumerate() {
            let hv: f64 = e.hess_data[i * d..(i + 1) * d].iter().zip(&self.buf_v).map(|(a, b)| a * b).sum();
            *o = self.buf_a[i] + e.data_grad0[i] + hv + scale * (*o - self.buf_b[i] - self.buf_hv[i]);
        }
        Ok(())
    }
}

impl GradientEstimator for Taylor {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        check_shape(model)?;
        check_len("model dimension (Taylor expansion point)", self.exp.theta0.len(), model.dim())?;
        check_len("model data size (Taylor expansion)", self.exp.n_data, model.n_data())?;
        self.sub.prepare(model.n_data())
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.sub.draw(rng);
    }

    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let idx = std::mem::take(&mut self.sub);
        let r = self.eval_idx(model, theta, idx.indices(), out);
        self.sub = idx;
        r
    }

    fn n_datum_gradients(&self) -> u64 {
        self.grads
    }

    /// Fresh minibatch per estimate: independent draws, unless reshuffling.
    fn independent_draws(&self) -> bool {
        self.sub.independent_draws()
    }

    fn cost(&self) -> Cost {
        Cost { datum_gradients: self.grads, datum_potentials: 0, datum_hvps: self.hvps }
    }

    fn setup_cost(&self) -> Cost {
        self.exp.setup
    }

    fn resized(&self, batch_size: usize, n_data: usize) -> Option<(Self, f64)> {
        let (sub, f) = self.sub.resized(batch_size, n_data)?;
        Some((Taylor { sub, grads: 0, hvps: 0, ..self.clone() }, f))
    }

    fn centre(&self) -> Option<&[f64]> {
        Some(&self.exp.theta0)
    }
}

impl SubsampledEstimator for Taylor {
    fn batch_size(&self) -> usize {
        self.sub.batch_size()
    }

    #[inline]
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.sub.draw_into(rng, out);
    }

    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.eval_idx(model, theta, idx, out)
    }
}
