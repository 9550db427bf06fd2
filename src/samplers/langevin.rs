//! The Langevin driver: one generic sampler that owns the state, the gradient estimator, the
//! finiteness checks and the weights, around a small [`LangevinKernel`] that only knows its
//! update formula.

use super::{Discretisation, GradientNoise, Sampler, SubsampledDiscretisation, Whitening, check_fraction};
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::{GradientEstimator, Minibatch, SubsampledEstimator};
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::fill_standard_normal;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The update formula of a Langevin-type sampler: what distinguishes SGLD, SGHMC, pSGLD and
/// preconditioned SGLD from one another. Everything else (the position, the gradient estimate,
/// drawing the noise, the finiteness checks, the iteration count, the weights, coupled steps)
/// is written once, in [`Langevin`].
///
/// A kernel may keep per-chain state (SGHMC's momentum, pSGLD's squared-gradient average),
/// allocated in [`bind`](Self::bind); [`advance`](Self::advance) must not allocate.
///
/// # Writing a kernel
///
/// SGLD with a fixed diagonal preconditioner `θ ← θ − h D ∇Ũ(θ) + √(2h D) ⊙ z`:
///
/// ```
/// use sgmcmc::{Error, Langevin, LangevinKernel, LinearGaussian, Minibatch, RunSettings, Result, Runner};
///
/// #[derive(Debug, Clone)]
/// struct DiagonalSgld { h: f64, diag: Vec<f64> }
///
/// impl LangevinKernel for DiagonalSgld {
///     fn time_step(&self, _k: u64) -> f64 { self.h }
///     fn bind(&mut self, dim: usize, _n_data: usize) -> Result<()> {
///         if dim == self.diag.len() { Ok(()) } else {
///             Err(Error::DimensionMismatch { what: "preconditioner diagonal", expected: dim, got: self.diag.len() })
///         }
///     }
///     fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
///         let h = fraction * self.time_step(k);
///         for (((t, g), z), d) in theta.iter_mut().zip(grad).zip(z).zip(&self.diag) {
///             *t += (2.0 * h * d).sqrt() * z - h * d * g;
///         }
///     }
/// }
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7)?;
/// let sampler = Langevin::with_kernel(DiagonalSgld { h: 1e-4, diag: vec![1.0, 0.5] }, Minibatch::new(100));
/// let out = Runner::new(&model, &sampler).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 2_000, burn_in: 500, ..Default::default() }).run()?;
/// assert_eq!(out.estimate.mean()?.len(), 2);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub trait LangevinKernel: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The nominal time step `h_k` of the 1-based iteration k: `γ_k` for SGLD, `√η_k` for SGHMC.
    /// A sample is weighted by the time step of the step that leaves it.
    fn time_step(&self, k: u64) -> f64;

    /// Validates the kernel against the model's dimension and data size and (re)allocates its
    /// per-chain state; called by `init` (and by coupled methods' restarts). Default: nothing.
    fn bind(&mut self, dim: usize, n_data: usize) -> Result<()> {
        let _ = (dim, n_data);
        Ok(())
    }

    /// The weight of the draw `θ_k` (k = 0: the start), by default the time step `h_{k+1}` of
    /// the step that leaves it. A weight of exactly 0 means the draw is not kept (runs do not
    /// record it): cyclical SGLD's exploration stage.
    #[inline]
    fn weight(&self, k: u64) -> f64 {
        self.time_step(k + 1)
    }

    /// Called with every fresh gradient estimate at the current position (`first`: the first
    /// one since `bind`), for kernels that adapt to gradients (pSGLD). Default: nothing.
    fn observe_gradient(&mut self, grad: &[f64], first: bool) {
        let _ = (grad, first);
    }

    /// The weight `c` of the gradient noise in the step's noise: with a gradient noise of
    /// covariance V, a step of time step `fraction × h_k` driven by `S z` with `S Sᵀ = I − c V`
    /// has the total noise of the same step with exact gradients (see [`GradientNoise`]).
    /// `None` (the default): the kernel does not take the correction, and the driver's
    /// [`GradientNoise`], if any, is unused. SGLD: `c = f h/2`; SGHMC: `c = f η/(2(α − β̂))`;
    /// SGNHT: `c = f h/(2A)`; pSGLD: `c = f h/2` under its metric.
    fn gradient_noise_weight(&self, k: u64, fraction: f64) -> Option<f64> {
        let _ = (k, fraction);
        None
    }

    /// For a kernel whose step applies a diagonal metric M to the gradient and the noise
    /// (`θ ← θ − h M ∇Ũ + √(2h M) ⊙ z`, pSGLD's G): writes M's diagonal into `out` and returns
    /// `true`. The gradient noise then enters the step as `h² M V M`, and the driver shapes the
    /// increment by `S Sᵀ = I − c M^{1/2} V M^{1/2}` instead (a cubic series, see
    /// [`GradientNoise`]). Default: `false` (no metric: `S Sᵀ = I − c V`, exactly).
    fn gradient_noise_metric(&self, out: &mut [f64]) -> bool {
        let _ = out;
        false
    }

    /// The number m of standard normals per coordinate a step takes: `z` has `m·d` entries
    /// (coordinate j's are `z[j]`, `z[d + j]`, …). Default 1. A kernel with m > 1 (UBU) says in
    /// [`combine_increments`](Self::combine_increments) how coupled methods combine them.
    fn normals_per_coordinate(&self) -> usize {
        1
    }

    /// The increment of one step of `fraction × h_k` on the Brownian path of two steps of half
    /// that time step driven by `z1` then `z2` (see
    /// [`Discretisation::combine_increments`]). Default `(z₁ + z₂)/√2`, entry by entry: right
    /// for a kernel whose step's noise is its increment scaled by the square root of its time
    /// step.
    fn combine_increments(&self, k: u64, fraction: f64, z1: &[f64], z2: &[f64], coarse: &mut [f64]) {
        let _ = (k, fraction);
        let r2 = std::f64::consts::FRAC_1_SQRT_2;
        for ((c, a), b) in coarse.iter_mut().zip(z1).zip(z2) {
            *c = (a + b) * r2;
        }
    }

    /// One step of time step `fraction × h_k` (`fraction` in (0, 1]) from `theta`, with the
    /// gradient estimate `grad` at `theta` and the standard-normal increment `z`
    /// ([`normals_per_coordinate`](Self::normals_per_coordinate) `× d` of them).
    ///
    /// The increment must be scaled so that one step of time step h driven by `(z₁ + z₂)/√2` has
    /// the law of two steps of h/2 driven by `z₁`, `z₂` (one Brownian path), which is what
    /// coupled methods rely on.
    fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]);
}

/// The generic Langevin sampler: a [`LangevinKernel`] driven with a [`GradientEstimator`].
///
/// [`Sgld`](crate::Sgld), [`Lmc`](crate::Lmc), [`Sghmc`](crate::Sghmc),
/// [`Psgld`](crate::Psgld) and [`PreconditionedSgld`](crate::PreconditionedSgld) are this type
/// with their kernels. It implements [`Sampler`] (one step per iteration with fresh noise),
/// [`Discretisation`] (steps of a fraction of the time step driven by supplied increments,
/// for Richardson–Romberg) and, with a subsampling estimator, [`SubsampledDiscretisation`]
/// (steps on supplied minibatches, for multilevel SGLD).
///
/// Convention: after `init` and after each step the sampler holds `θ_k` and the gradient
/// estimate at `θ_k` (on a fresh minibatch), which the next step uses; `θ_k` is weighted by the
/// time step `h_{k+1}` of the step that leaves it. Every gradient and every state is checked:
/// a non-finite one is [`Error::NonFiniteGradient`] / [`Error::NonFiniteState`] with the
/// iteration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Langevin<K, E = Minibatch> {
    kernel: K,
    estimator: E,
    theta: Vec<f64>,
    grad: Vec<f64>,
    noise: Vec<f64>,
    k: u64,
    ready: bool,
    /// Whether `grad` is the estimate at `theta` (false after a coupled restart or step).
    grad_valid: bool,
    /// Whether the next gradient is the first since `bind` (for the kernel).
    first_gradient: bool,
    /// The constant whitening the kernel runs in, if any (shared by clones).
    whitening: Option<std::sync::Arc<Whitening>>,
    /// With a whitening: the kernel's coordinates φ (`θ = c + T φ`) and the gradient `Tᵀ ∇Ũ(θ)`.
    phi: Vec<f64>,
    grad_phi: Vec<f64>,
    /// The gradient noise the injected noise is corrected by, if any (shared by clones).
    gradient_noise: Option<std::sync::Arc<GradientNoise>>,
    /// With a gradient noise: the shaped increment and scratch (`3d` for a kernel's metric).
    shaped: Vec<f64>,
    shape_tmp: Vec<f64>,
    /// With a gradient noise and a kernel with a metric: the metric's diagonal (scratch, not
    /// stored: sized at `init`, or at the first step after loading).
    #[serde(skip)]
    metric: Vec<f64>,
}

impl<K: LangevinKernel, E: GradientEstimator> Langevin<K, E> {
    /// The sampler with `kernel` and `estimator` (a kernel's own constructor validates it).
    pub fn with_kernel(kernel: K, estimator: E) -> Self {
        Langevin {
            kernel,
            estimator,
            theta: Vec::new(),
            grad: Vec::new(),
            noise: Vec::new(),
            k: 0,
            ready: false,
            grad_valid: false,
            first_gradient: true,
            whitening: None,
            phi: Vec::new(),
            grad_phi: Vec::new(),
            gradient_noise: None,
            shaped: Vec::new(),
            shape_tmp: Vec::new(),
            metric: Vec::new(),
        }
    }

    /// The same sampler running its kernel in the whitened coordinates φ of `whitening`
    /// (`θ = c + T φ`; see [`Whitening`]): the kernel sees the gradient `Tᵀ ∇Ũ(θ)` and its state
    /// is mapped back to θ after every step, so draws, weights and stored gradients stay on θ.
    /// `None` removes a whitening. Its dimension is checked against the model's at `init`.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::Whitening;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let w = Whitening::from_covariance(model.posterior_mean().as_slice().unwrap(), model.posterior_covariance())?;
    /// // In whitened coordinates the posterior is N(0, I): a step of 0.05 suits every direction.
    /// let sgld = Sgld::new(SgldSettings::constant(0.05), Minibatch::new(100))?.with_whitening(Some(w.into()));
    /// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn with_whitening(mut self, whitening: Option<std::sync::Arc<Whitening>>) -> Self {
        self.whitening = whitening;
        self.ready = false;
        self
    }

    /// The whitening the kernel runs in, if any.
    pub fn whitening(&self) -> Option<&std::sync::Arc<Whitening>> {
        self.whitening.as_ref()
    }

    /// The same sampler with its injected noise corrected by the gradient estimator's noise
    /// covariance V (in the kernel's coordinates: the whitened ones with a whitening): each step
    /// draws its increment as `S z`, `S Sᵀ = I − c V` (clipped at 0 per eigen-direction), c the
    /// kernel's [`gradient_noise_weight`](LangevinKernel::gradient_noise_weight), so that the
    /// step's total noise is that of its exact-gradient scheme. See [`GradientNoise`] (which
    /// measures V) for the rule and references. `None` removes it; kernels without a weight
    /// (preconditioned SGLD, cyclical SGLD) ignore it; pSGLD applies it under its metric
    /// ([`gradient_noise_metric`](LangevinKernel::gradient_noise_metric)). Its dimension is checked at `init`.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{GradientNoise, Whitening};
    /// use rand::SeedableRng;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// let w = Whitening::from_covariance(model.posterior_mean().as_slice().unwrap(), model.posterior_covariance())?;
    /// let mb = Minibatch::new(50);
    /// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
    /// let (noise, _cost) = GradientNoise::estimate(&model, &mb, &w, 2_000, &mut rng)?;
    /// // Whitened, a minibatch of 50 of 1 000 has noise of about N/n = 20 per direction.
    /// assert!(noise.eigenvalues().iter().all(|&l| l > 10.0 && l < 30.0));
    /// let sgld = Sgld::new(SgldSettings::constant(0.05), mb)?
    ///     .with_whitening(Some(w.into()))
    ///     .with_gradient_noise(Some(noise.into()));
    /// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert!(out.estimate.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn with_gradient_noise(mut self, noise: Option<std::sync::Arc<GradientNoise>>) -> Self {
        self.gradient_noise = noise;
        self.ready = false;
        self
    }

    /// The gradient noise the injected noise is corrected by, if any.
    pub fn gradient_noise(&self) -> Option<&std::sync::Arc<GradientNoise>> {
        self.gradient_noise.as_ref()
    }

    /// The update kernel (with its settings and per-chain state).
    pub fn kernel(&self) -> &K {
        &self.kernel
    }

    /// The same sampler with another gradient estimator of the same type (its state is bound
    /// again at the next `init`).
    pub fn with_estimator(mut self, estimator: E) -> Self {
        self.estimator = estimator;
        self.ready = false;
        self
    }

    /// The gradient estimator (with its cost counter).
    pub fn estimator(&self) -> &E {
        &self.estimator
    }

    /// The kernel, mutable (crate-internal settings of a sampler not yet bound).
    pub(crate) fn kernel_mut(&mut self) -> &mut K {
        &mut self.kernel
    }

    /// The estimator, taking the sampler apart (its cost counter included).
    pub fn into_estimator(self) -> E {
        self.estimator
    }

    /// Binds model, estimator and kernel and sets θ₀, without a gradient.
    fn bind<M: Model + ?Sized>(&mut self, model: &M, theta0: &[f64]) -> Result<()> {
        check_shape(model)?;
        let d = model.dim();
        check_len("initial state theta0", d, theta0.len())?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteStart { what: "theta0" });
        }
        if let Some(w) = &self.whitening {
            check_len("whitening dimension", d, w.dim())?;
        }
        if let Some(g) = &self.gradient_noise {
            check_len("gradient-noise dimension", d, g.dim())?;
            self.shaped.resize(d, 0.0);
            self.shape_tmp.resize(3 * d, 0.0);
            self.metric.resize(d, 0.0);
        }
        self.estimator.prepare(model)?;
        self.kernel.bind(d, model.n_data())?;
        self.theta.clear();
        self.theta.extend_from_slice(theta0);
        if let Some(w) = &self.whitening {
            self.phi.resize(d, 0.0);
            self.grad_phi.resize(d, 0.0);
            w.to_phi(&self.theta, &mut self.phi);
        }
        self.grad.resize(d, 0.0);
        self.noise.resize(d * self.kernel.normals_per_coordinate(), 0.0);
        self.k = 0;
        self.grad_valid = false;
        self.first_gradient = true;
        self.ready = true;
        Ok(())
    }

    #[inline]
    fn check_ready<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        if !self.ready {
            return Err(Error::NotInitialised);
        }
        check_len("model dimension", self.theta.len(), model.dim())
    }

    /// Checks the gradient just written into `grad` and shows it to the kernel.
    #[inline]
    fn accept_gradient(&mut self) -> Result<()> {
        if !all_finite(&self.grad) {
            return Err(Error::NonFiniteGradient { iteration: self.k });
        }
        if let Some(w) = &self.whitening {
            w.gradient_to_phi(&self.grad, &mut self.grad_phi);
            self.kernel.observe_gradient(&self.grad_phi, self.first_gradient);
            self.first_gradient = false;
            return Ok(());
        }
        self.kernel.observe_gradient(&self.grad, self.first_gradient);
        self.first_gradient = false;
        Ok(())
    }

    /// A fresh gradient estimate at θ (new minibatch).
    #[inline]
    fn refresh_gradient<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        let at = self.k;
        self.estimator.estimate(model, &self.theta, rng, &mut self.grad).map_err(|e| e.at_iteration(at))?;
        self.grad_valid = true;
        self.accept_gradient()
    }

    /// The update with the gradient in `grad`, then the iteration count and the state check.
    #[inline]
    fn advance_checked(&mut self, k: u64, fraction: f64, z_is_own: bool, z: &[f64]) -> Result<()> {
        let mut z = if z_is_own { &self.noise[..] } else { z };
        if let Some(g) = &self.gradient_noise
            && let Some(c) = self.kernel.gradient_noise_weight(k, fraction)
        {
            let d = self.shaped.len();
            if self.metric.len() != d || self.shape_tmp.len() < 3 * d {
                // Only after loading a stored sampler (init sizes them): once.
                self.metric.resize(d, 0.0);
                self.shape_tmp.resize(3 * d, 0.0);
            }
            if self.kernel.gradient_noise_metric(&mut self.metric) {
                g.shape_metric(c, &self.metric, z, &mut self.shape_tmp, &mut self.shaped);
            } else {
                g.shape(c, z, &mut self.shape_tmp[..self.shaped.len()], &mut self.shaped);
            }
            z = &self.shaped;
        }
        match &self.whitening {
            None => self.kernel.advance(&mut self.theta, &self.grad, k, fraction, z),
            Some(w) => {
                self.kernel.advance(&mut self.phi, &self.grad_phi, k, fraction, z);
                w.to_theta(&self.phi, &mut self.theta);
            }
        }
        self.k += 1;
        if all_finite(&self.theta) { Ok(()) } else { Err(Error::NonFiniteState { iteration: self.k }) }
    }

    /// Exchanges the positions of two bound samplers, with their gradient estimates (and their
    /// whitened forms): what a replica-exchange swap does. Kernel and estimator state stay.
    pub(crate) fn exchange_positions(&mut self, other: &mut Self) {
        std::mem::swap(&mut self.theta, &mut other.theta);
        std::mem::swap(&mut self.grad, &mut other.grad);
        std::mem::swap(&mut self.grad_valid, &mut other.grad_valid);
        for s in [&mut *self, other] {
            if let Some(w) = &s.whitening {
                w.to_phi(&s.theta, &mut s.phi);
                w.gradient_to_phi(&s.grad, &mut s.grad_phi);
            }
        }
    }

    #[inline]
    fn ensure_gradient<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        if self.grad_valid { Ok(()) } else { self.refresh_gradient(model, rng) }
    }
}

impl<K: LangevinKernel, E: GradientEstimator> Sampler for Langevin<K, E> {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], rng: &mut R) -> Result<()> {
        self.ready = false;
        self.bind(model, theta0)?;
        let r = self.refresh_gradient(model, rng);
        self.ready = r.is_ok();
        r
    }

    #[inline]
    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        self.check_ready(model)?;
        self.ensure_gradient(model, rng)?;
        fill_standard_normal(rng, &mut self.noise);
        self.advance_checked(self.k + 1, 1.0, true, &[])?;
        self.refresh_gradient(model, rng)
    }

    /// The kernel's weight of the current sample: by default the time step `h_{k+1}` of the
    /// step that leaves it.
    fn weight(&self) -> f64 {
        self.kernel.weight(self.k)
    }

    fn draw_step_size(&self) -> Option<f64> {
        Some(self.kernel.time_step(self.k + 1))
    }

    chain_accessors!(theta, grad, k);
    estimator_costs!(estimator);
}

impl<K: LangevinKernel, E: GradientEstimator> Discretisation for Langevin<K, E> {
    fn time_step(&self, k: u64) -> f64 {
        self.kernel.time_step(k)
    }

    fn increment_len(&self, dim: usize) -> usize {
        dim * self.kernel.normals_per_coordinate()
    }

    fn combine_increments(&self, k: u64, fraction: f64, z1: &[f64], z2: &[f64], coarse: &mut [f64]) {
        self.kernel.combine_increments(k, fraction, z1, z2, coarse);
    }

    fn step_fraction<M, R>(&mut self, model: &M, k: u64, fraction: f64, z: &[f64], rng: &mut R) -> Result<()>
    where
        M: Model + ?Sized,
        R: Rng + ?Sized,
    {
        check_fraction(fraction)?;
        self.check_ready(model)?;
        check_len("noise increment z", self.noise.len(), z.len())?;
        self.ensure_gradient(model, rng)?;
        self.advance_checked(k, fraction, false, z)?;
        self.refresh_gradient(model, rng)
    }
}

impl<K: LangevinKernel, E: SubsampledEstimator> SubsampledDiscretisation for Langevin<K, E> {
    fn batch_size(&self) -> usize {
        self.estimator.batch_size()
    }

    #[inline]
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.estimator.draw_indices(rng, out);
    }

    fn restart<M: Model + ?Sized>(&mut self, model: &M, theta0: &[f64]) -> Result<()> {
        self.ready = false;
        self.bind(model, theta0)
    }

    #[inline]
    fn step_on<M: Model + ?Sized>(&mut self, model: &M, k: u64, fraction: f64, z: &[f64], idx: &[usize]) -> Result<()> {
        check_fraction(fraction)?;
        self.check_ready(model)?;
        check_len("noise increment z", self.noise.len(), z.len())?;
        let n_data = model.n_data();
        if idx.is_empty() || idx.iter().any(|&i| i >= n_data) {
            return Err(Error::InvalidBatchSize { batch_size: idx.len(), n_data });
        }
        let at = self.k;
        self.estimator.eval_on(model, &self.theta, idx, &mut self.grad).map_err(|e| e.at_iteration(at))?;
        self.accept_gradient()?;
        self.grad_valid = false;
        self.advance_checked(k, fraction, false, z)
    }
}

#[cfg(test)]
mod tests {
    //! The driver's wiring, with a kernel of its own: one step is the kernel's update at the
    //! estimator's gradient with the chain's own normals; a non-finite gradient or state is the
    //! error naming its iteration; the weight and the draw's step follow the kernel's time step.
    use super::*;
    use crate::gradient::FullGradient;
    use crate::models::LinearGaussian;
    use crate::numeric::rng::stream;

    /// Euler–Maruyama at time steps `h_k = h / k` (a schedule, so that the weights show which k
    /// is used), optionally writing ∞ at its `blow_up`-th call.
    #[derive(Debug, Clone)]
    struct Euler {
        h: f64,
        calls: u64,
        blow_up: u64,
    }

    impl LangevinKernel for Euler {
        fn time_step(&self, k: u64) -> f64 {
            self.h / k.max(1) as f64
        }
        fn advance(&mut self, theta: &mut [f64], grad: &[f64], k: u64, fraction: f64, z: &[f64]) {
            self.calls += 1;
            let h = fraction * self.time_step(k);
            for ((t, g), z) in theta.iter_mut().zip(grad).zip(z) {
                *t += (2.0 * h).sqrt() * z - h * g;
            }
            if self.calls == self.blow_up {
                theta[0] = f64::INFINITY;
            }
        }
    }

    fn full_gradient(m: &LinearGaussian, theta: &[f64]) -> Vec<f64> {
        let all: Vec<usize> = (0..m.n_data()).collect();
        let (mut gp, mut gd) = (vec![0.0; theta.len()], vec![0.0; theta.len()]);
        m.grad_prior(theta, &mut gp).unwrap();
        m.grad_data_sum(theta, &all, &mut gd).unwrap();
        gp.iter().zip(&gd).map(|(a, b)| a + b).collect()
    }

    #[test]
    fn a_step_is_the_kernels_update_at_the_estimators_gradient_with_the_chains_normals() {
        let m = LinearGaussian::synthetic(100, 3, 1.0, 10.0, 2).unwrap();
        let mut s = Langevin::with_kernel(Euler { h: 1e-3, calls: 0, blow_up: 0 }, FullGradient::new());
        let mut rng = stream(9, &[0]);
        s.init(&m, &[0.5, -0.5, 0.1], &mut rng).unwrap();
        for k in 1..=20u64 {
            let theta = s.position().to_vec();
            let g = full_gradient(&m, &theta);
            for (a, b) in s.gradient().unwrap().iter().zip(&g) {
                assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "the kept gradient is ∇U(θ): {a} vs {b}");
            }
            let mut replay = rng.clone();
            let mut z = vec![0.0; 3];
            fill_standard_normal(&mut replay, &mut z);
            let h = 1e-3 / k as f64;
            // The weight of the current sample and the step a draw records: h_{k}, the step that
            // leaves it.
            assert_eq!(s.weight(), h);
            assert_eq!(s.draw_step_size(), Some(h));
            s.step(&m, &mut rng).unwrap();
            for j in 0..3 {
                let want = theta[j] + (2.0 * h).sqrt() * z[j] - h * g[j];
                assert!((s.position()[j] - want).abs() <= 1e-14 * want.abs().max(1.0), "k {k}, j {j}");
            }
            assert_eq!(s.iteration(), k);
        }
    }

    #[test]
    fn a_non_finite_state_names_the_iteration_that_made_it() {
        let m = LinearGaussian::synthetic(100, 2, 1.0, 10.0, 2).unwrap();
        let mut s = Langevin::with_kernel(Euler { h: 1e-3, calls: 0, blow_up: 7 }, FullGradient::new());
        let mut rng = stream(9, &[0]);
        s.init(&m, &[0.0, 0.0], &mut rng).unwrap();
        for _ in 0..6 {
            s.step(&m, &mut rng).unwrap();
        }
        assert_eq!(s.step(&m, &mut rng), Err(Error::NonFiniteState { iteration: 7 }));
    }

    #[test]
    fn a_non_finite_gradient_names_its_iteration_and_a_step_before_init_is_refused() {
        struct NanAfter(LinearGaussian, std::sync::atomic::AtomicU64);
        impl Model for NanAfter {
            fn dim(&self) -> usize {
                self.0.dim()
            }
            fn n_data(&self) -> usize {
                self.0.n_data()
            }
            fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
                self.0.grad_prior(t, o)
            }
            fn grad_data_sum(&self, t: &[f64], i: &[usize], o: &mut [f64]) -> Result<()> {
                self.0.grad_data_sum(t, i, o)?;
                // Call 1 is at θ₀ (iteration 0); call k + 1 at the end of step k.
                if self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 >= 5 {
                    o[1] = f64::NAN;
                }
                Ok(())
            }
        }
        let m = NanAfter(LinearGaussian::synthetic(100, 2, 1.0, 10.0, 2).unwrap(), 0.into());
        let mut s = Langevin::with_kernel(Euler { h: 1e-3, calls: 0, blow_up: 0 }, FullGradient::new());
        let mut rng = stream(9, &[0]);
        assert_eq!(s.step(&m, &mut rng), Err(Error::NotInitialised));
        s.init(&m, &[0.0, 0.0], &mut rng).unwrap();
        for _ in 0..3 {
            s.step(&m, &mut rng).unwrap();
        }
        assert_eq!(s.step(&m, &mut rng), Err(Error::NonFiniteGradient { iteration: 4 }));
        assert_eq!(s.iteration(), 4, "the step itself was made; its gradient is the failure");
    }
}
