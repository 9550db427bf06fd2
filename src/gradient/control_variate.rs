//! The control-variate gradient estimator: SGLD-CV (Baker et al. 2019) and SGLDFP (Brosse et
//! al. 2018) with any sampler.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::optim::{ModeSettings, Optimum, SgdSettings, find_mode, sgd};
use crate::gradient::{FullGradient, GradientEstimator, Subsample};
use crate::models::model::{Model, check_shape};
use rand::Rng;
use std::sync::Arc;

/// Settings of the minibatch part of a [`ControlVariate`] estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CvSettings {
    /// Minibatch size n (1 ≤ n ≤ N). Default 100.
    pub batch_size: usize,
    /// Draw minibatches with replacement (the default) or without.
    pub replacement: bool,
    /// Keep every `∇Uᵢ(θ̂)` in memory as a dense N × d array so that an estimate costs n datum
    /// gradients instead of 2n. Default false. Dense: unsuitable for models with many parameters
    /// and sparse per-datum gradients (PMF: N·d can be billions). It pays only when a datum
    /// gradient costs more than a random read of d numbers: for the built-in logistic model the
    /// uncached estimator is faster (it re-reads the same, already cached, rows; see the
    /// `control_variates` bench).
    pub cache_centre_gradients: bool,
}

impl Default for CvSettings {
    fn default() -> Self {
        CvSettings { batch_size: 100, replacement: true, cache_centre_gradients: false }
    }
}

/// What every clone of the estimator shares: the centre and the full gradient there.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Centre {
    theta_hat: Vec<f64>,
    /// `∇U(θ̂)`, the full gradient (prior included).
    full_grad: Vec<f64>,
    /// `∇U₀(θ̂)`.
    prior_grad: Vec<f64>,
    /// Row i = `∇Uᵢ(θ̂)`, if cached.
    cache: Option<Vec<f64>>,
    n_data: usize,
    setup: Cost,
}

/// The control-variate estimator
///
/// `∇Ũ_cv(θ) = ∇U(θ̂) + [∇U₀(θ) − ∇U₀(θ̂)] + (N/n) Σ_{i∈S} [∇Uᵢ(θ) − ∇Uᵢ(θ̂)]`,
///
/// unbiased for `∇U(θ)`, with a variance that vanishes as θ → θ̂ (it is O(N ‖θ − θ̂‖²) rather than
/// O(N²)). With SGLD it is SGLD-CV (Baker et al. 2019); centred at the exact mode it is SGLDFP
/// (Brosse et al. 2018); with SGHMC it is SGHMC-CV — every sampler takes it unchanged.
///
/// Building it costs one full-gradient pass at the centre (N datum gradients), plus whatever
/// found the centre (SGD or L-BFGS); that is [`setup_cost`](GradientEstimator::setup_cost),
/// which the [`Runner`](crate::run::runner::Runner) adds once to the run's cost. Each estimate then costs 2n datum
/// gradients (n with cached centre gradients). Start chains at the centre, [`centre`](Self::centre):
/// the optimisation replaces burn-in.
///
/// Clones share the centre (an `Arc`), so many chains cost one setup.
///
/// References: J. Baker, P. Fearnhead, E. B. Fox, C. Nemeth, *Control variates for stochastic
/// gradient MCMC*, Statistics and Computing 29, 2019; N. Brosse, A. Durmus, E. Moulines, *The
/// promises and pitfalls of stochastic gradient Langevin dynamics*, NeurIPS 2018.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ControlVariate {
    centre: Arc<Centre>,
    sub: Subsample,
    buf_hat: Vec<f64>,
    buf_prior: Vec<f64>,
    count: u64,
}

impl ControlVariate {
    /// The estimator centred at a user-supplied `centre` θ̂; computes `∇U(θ̂)` (cost N).
    ///
    /// Errors: [`Error::DimensionMismatch`] for `centre`, [`Error::InvalidBatchSize`],
    /// [`Error::EmptyData`], [`Error::NonFiniteGradient`] (iteration 0) if `∇U(θ̂)` is not finite.
    pub fn at<M: Model + ?Sized>(model: &M, centre: &[f64], settings: CvSettings) -> Result<Self> {
        Self::build(model, centre, settings, Cost::default())
    }

    /// Centring by SGD (Baker et al. 2019, §3.4) from `theta0`, then the full gradient there.
    /// The SGD cost is part of the setup cost.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::SgdSettings;
    ///
    /// let model = LogisticRegression::synthetic(10_000, 5, 10.0, 1)?;
    /// // SGLD-CV: centre by SGD, then one full gradient there (both in the setup cost).
    /// let cv = ControlVariate::from_sgd(&model, &[0.0; 5], &SgdSettings::default(), CvSettings::default())?;
    /// let sgld_cv = Sgld::new(SgldSettings::constant(1e-5), cv)?;
    /// let out = Runner::new(&model, &sgld_cv).start(&[0.0; 5]).settings(RunSettings { n_iter: 2_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.setup_cost.datum_gradients >= 10_000);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn from_sgd<M: Model + ?Sized>(
        model: &M,
        theta0: &[f64],
        sgd_settings: &SgdSettings,
        settings: CvSettings,
    ) -> Result<Self> {
        let Optimum { theta, cost, .. } = sgd(model, theta0, sgd_settings)?;
        Self::build(model, &theta, settings, cost)
    }

    /// SGLDFP: centred at the exact mode θ*, found by L-BFGS on the full potential from `theta0`
    /// (its cost is part of the setup cost).
    pub fn at_mode<M: Model + ?Sized>(
        model: &M,
        theta0: &[f64],
        mode_settings: &ModeSettings,
        settings: CvSettings,
    ) -> Result<Self> {
        let Optimum { theta, cost, .. } = find_mode(model, theta0, mode_settings)?;
        Self::build(model, &theta, settings, cost)
    }

    fn build<M: Model + ?Sized>(model: &M, centre: &[f64], settings: CvSettings, found: Cost) -> Result<Self> {
        check_shape(model)?;
        let (n, d) = (model.n_data(), model.dim());
        check_len("centre", d, centre.len())?;
        if !all_finite(centre) {
            return Err(Error::NonFiniteStart { what: "centre" });
        }
        let mut sub = Subsample::new(settings.batch_size, settings.replacement);
        sub.prepare(n)?;
        let mut full = FullGradient::new();
        full.prepare(model)?;
        let mut full_grad = vec![0.0; d];
        let mut prior_grad = vec![0.0; d];
        let mut setup = found;
        let cache = if settings.cache_centre_gradients {
            crate::error::check_bytes(
                "the cached centre gradients (n_data × dim; CvSettings::cache_centre_gradients)",
                n as u128 * d as u128 * 8,
                Some(crate::error::DEFAULT_MEMORY_LIMIT),
            )?;
            // One pass that yields every per-datum gradient; their sum is the data part of ∇U(θ̂).
            let mut cache = vec![0.0; n * d];
            for (i, row) in cache.chunks_exact_mut(d).enumerate() {
                model.grad_data_sum(centre, &[i], row)?;
                for (f, r) in full_grad.iter_mut().zip(row.iter()) {
                    *f += r;
                }
            }
            model.grad_prior(centre, &mut prior_grad)?;
            for (f, p) in full_grad.iter_mut().zip(&prior_grad) {
                *f += p;
            }
            setup.datum_gradients += n as u64;
            Some(cache)
        } else {
            let mut rng = crate::numeric::rng::stream(0, &[0]);
            full.estimate(model, centre, &mut rng, &mut full_grad)?;
            model.grad_prior(centre, &mut prior_grad)?;
            setup.datum_gradients += full.n_datum_gradients();
            None
        };
        if !all_finite(&full_grad) {
            return Err(Error::NonFiniteGradient { iteration: 0 });
        }
        let centre = Centre { theta_hat: centre.to_vec(), full_grad, prior_grad, cache, n_data: n, setup };
        Ok(ControlVariate { centre: Arc::new(centre), sub, buf_hat: vec![0.0; d], buf_prior: vec![0.0; d], count: 0 })
    }

    /// The same estimator drawing its minibatches (of the same size) by epoch-wise random
    /// reshuffling ([`Batches::Reshuffled`](crate::Batches::Reshuffled)) instead of as its settings said.
    pub fn reshuffled(mut self) -> Self {
        self.sub = Subsample::reshuffled(self.sub.batch_size());
        self
    }

    /// The centring value θ̂ (start chains here).
    pub fn centre(&self) -> &[f64] {
        &self.centre.theta_hat
    }

    /// The full gradient `∇U(θ̂)` at the centre.
    pub fn full_gradient_at_centre(&self) -> &[f64] {
        &self.centre.full_grad
    }

    /// The index sampler.
    pub fn subsample(&self) -> &Subsample {
        &self.sub
    }
}

impl GradientEstimator for ControlVariate {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        check_shape(model)?;
        check_len("model dimension (control variate centre)", self.centre.theta_hat.len(), model.dim())?;
        check_len("model data size (control variate centre)", self.centre.n_data, model.n_data())?;
        self.sub.prepare(model.n_data())?;
        let d = model.dim();
        self.buf_hat.resize(d, 0.0);
        self.buf_prior.resize(d, 0.0);
        Ok(())
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.sub.draw(rng);
    }

    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let ControlVariate { centre, sub, buf_hat, buf_prior, count } = self;
        *count += cv_eval(centre, model, theta, sub.indices(), out, buf_hat, buf_prior)?;
        Ok(())
    }

    fn n_datum_gradients(&self) -> u64 {
        self.count
    }

    /// Fresh minibatch per estimate: independent draws, unless reshuffling.
    fn independent_draws(&self) -> bool {
        self.sub.independent_draws()
    }

    fn setup_cost(&self) -> Cost {
        self.centre.setup
    }

    fn resized(&self, batch_size: usize, n_data: usize) -> Option<(Self, f64)> {
        let (sub, f) = self.sub.resized(batch_size, n_data)?;
        Some((ControlVariate { centre: self.centre.clone(), sub, count: 0, ..self.clone() }, f))
    }

    fn centre(&self) -> Option<&[f64]> {
        Some(&self.centre.theta_hat)
    }
}

/// The control-variate formula on the index multiset `idx`; returns the datum gradients used.
#[inline]
fn cv_eval<M: Model + ?Sized>(
    c: &Centre,
    model: &M,
    theta: &[f64],
    idx: &[usize],
    out: &mut [f64],
    buf_hat: &mut [f64],
    buf_prior: &mut [f64],
) -> Result<u64> {
    let mut used = idx.len() as u64;
    model.grad_data_sum(theta, idx, out)?;
    match &c.cache {
        Some(cache) => {
            let d = c.theta_hat.len();
            buf_hat.fill(0.0);
            for &i in idx {
                for (b, r) in buf_hat.iter_mut().zip(&cache[i * d..(i + 1) * d]) {
                    *b += r;
                }
            }
        }
        None => {
            model.grad_data_sum(&c.theta_hat, idx, buf_hat)?;
            used += idx.len() as u64;
        }
    }
    model.grad_prior(theta, buf_prior)?;
    let scale = c.n_data as f64 / idx.len() as f64;
    for ((((o, h), p), fg), pg) in
        out.iter_mut().zip(buf_hat.iter()).zip(buf_prior.iter()).zip(&c.full_grad).zip(&c.prior_grad)
    {
        *o = fg + (p - pg) + scale * (*o - h);
    }
    Ok(used)
}

impl crate::gradient::SubsampledEstimator for ControlVariate {
    fn batch_size(&self) -> usize {
        self.sub.batch_size()
    }

    #[inline]
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.sub.draw_into(rng, out);
    }

    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let ControlVariate { centre, buf_hat, buf_prior, count, .. } = self;
        *count += cv_eval(centre, model, theta, idx, out, buf_hat, buf_prior)?;
        Ok(())
    }
}
