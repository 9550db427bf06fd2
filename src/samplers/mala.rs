//! The Metropolis-adjusted Langevin algorithm: the exact full-data reference sampler.

use super::Sampler;
use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len, check_positive};
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::fill_standard_normal;
use rand::{Rng, RngExt};

/// Settings of [`Mala`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MalaSettings {
    /// The (initial) step size γ of the Langevin proposal. Default 1e-4 (a start: the default
    /// adaptation moves it).
    pub step_size: f64,
    /// Adapt γ during the first `adapt_steps` iterations towards `target_accept`
    /// (Robbins–Monro on log γ with gain `k^(−0.6)`), then freeze it. Default 1 000, the
    /// default burn-in of [`RunSettings`](crate::RunSettings); 0 for a fixed step
    /// ([`MalaSettings::fixed`]). Samples taken while adapting are not exact: a run whose
    /// burn-in is shorter is refused ([`Error::InvalidParameter`] on `burn_in`).
    pub adapt_steps: u64,
    /// The acceptance rate aimed at while adapting, in (0, 1). Default 0.574 (Roberts &
    /// Rosenthal 1998).
    pub target_accept: f64,
    /// The proposal's metric (inverse mass matrix). Default [`Metric::Auto`] (dense up to
    /// d = [`AUTO_DENSE_MAX_DIM`], diagonal above), adapted with the step during `adapt_steps`.
    pub metric: Metric,
}

/// The largest dimension for which [`Metric::Auto`] is dense: a dense metric costs d
/// Hessian-vector products at `init` and `d²` multiply-adds per step, small beside a gradient's
/// `N·d` up to here.
pub const AUTO_DENSE_MAX_DIM: usize = 200;

/// The metric (inverse mass matrix) D of [`Mala`]'s proposal `θ' = θ − γD∇U(θ) + √(2γ) D^{1/2} z`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Metric {
    /// D = I: plain MALA.
    #[default]
    Identity,
    /// Diagonal D adapted during the first `adapt_steps` iterations in Stan's windows: a first
    /// 75 iterations adapt the step only; then windows of 25, 50, 100, … iterations (the last
    /// stretched to end 50 iterations before `adapt_steps`) each estimate the draws' variances,
    /// and at a window's end D becomes those variances, regularised towards 10⁻³ as Stan does
    /// (`n/(n + 5) var + 10⁻³ · 5/(n + 5)`), the step is rescaled to keep the proposal's trace and
    /// its Robbins–Monro gain restarts; the last 50 iterations adapt the step to the final D.
    /// With `adapt_steps < 150` there is no room for a window and D stays I.
    Diagonal,
    /// Dense D, for correlated and ill-conditioned posteriors: at `init` D is the inverse Hessian
    /// of the potential at θ₀ (d Hessian-vector products, the model's or central differences of
    /// full gradients, counted in the cost; I if that Hessian is not positive definite), and the
    /// step starts at 0.1 (D makes the posterior about `N(0, I)` in D's coordinates, where 0.1
    /// is a moderate step; the adaptation moves it). Start near a mode (e.g. from
    /// [`dispersed_starts`](crate::tune::dispersed_starts)). Then, as
    /// [`Diagonal`](Metric::Diagonal), Stan's windows each estimate the draws' covariance and D
    /// becomes it, regularised towards its own diagonal (`n/(n + 5) cov + 10⁻³ · 5/(n + 5)
    /// diag(cov)`: scale-free, unlike Stan's `10⁻³ I`, so a parameter whose sd is 10⁻⁵ is not
    /// swamped) — but only windows of at least 10 d draws replace D (a covariance from fewer is
    /// too poor, from fewer than d singular); shorter ones adapt the step alone. Each step costs
    /// `d²` multiply-adds more than with a diagonal D.
    Dense,
    /// [`Dense`](Metric::Dense) when d ≤ [`AUTO_DENSE_MAX_DIM`], [`Diagonal`](Metric::Diagonal)
    /// above: the default. (A diagonal metric started at I adapts too slowly when the
    /// parameters' scales differ by 100× or more: it needs the draws of a chain that already
    /// moves in every direction.)
    Auto,
}

impl Default for MalaSettings {
    fn default() -> Self {
        MalaSettings { step_size: 1e-4, adapt_steps: 1_000, target_accept: 0.574, metric: Metric::Auto }
    }
}

impl MalaSettings {
    /// Plain MALA with a fixed step γ: no adaptation, identity metric (what
    /// `MalaSettings::default()` was before it adapted).
    pub fn fixed(step_size: f64) -> Self {
        MalaSettings { step_size, adapt_steps: 0, target_accept: 0.574, metric: Metric::Identity }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        check_positive("step_size", self.step_size)?;
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return Err(Error::invalid("target_accept", self.target_accept, "must be in (0, 1)"));
        }
        Ok(())
    }
}

/// The Metropolis-adjusted Langevin algorithm (MALA), with full-data gradients and potentials.
///
/// Proposal `θ' = θ − γ∇U(θ) + √(2γ) Z`, accepted with probability
/// `min(1, exp(U(θ) − U(θ') + [‖θ' − θ + γ∇U(θ)‖² − ‖θ − θ' + γ∇U(θ')‖²] / (4γ)))`.
/// Its stationary law is exactly π: it is the reference the stochastic-gradient samplers are
/// compared with. Each iteration costs N datum gradients and N datum potentials.
///
/// A proposal with potential `+∞` (zero density) is rejected; a NaN potential or a non-finite
/// gradient at a proposal of finite potential is an error.
///
/// Needs from the model: [`potential_prior`](Model::potential_prior) and
/// [`potential_data_sum`](Model::potential_data_sum) (else [`Error::Unsupported`] at `init`).
///
/// Reference: G. O. Roberts and R. L. Tweedie, *Exponential convergence of Langevin
/// distributions and their discrete approximations*, Bernoulli 2(4), 1996.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Mala {
    settings: MalaSettings,
    gamma: f64,
    all: Vec<usize>,
    theta: Vec<f64>,
    grad: Vec<f64>,
    u: f64,
    prop: Vec<f64>,
    grad_prop: Vec<f64>,
    scratch: Vec<f64>,
    noise: Vec<f64>,
    /// A second scratch vector (the dense metric's back-substitution).
    noise_back: Vec<f64>,
    k: u64,
    n_accepted: u64,
    n_accepted_adapting: u64,
    ready: bool,
    cost: Cost,
    /// The metric D (diagonal) and its square root.
    inv_mass: Vec<f64>,
    sqrt_inv_mass: Vec<f64>,
    /// The dense metric D (row-major) and its lower Cholesky factor, with [`Metric::Dense`].
    dense: Vec<f64>,
    dense_l: Vec<f64>,
    /// The window's Welford co-moment matrix (dense metric).
    win_m2_dense: Vec<f64>,
    /// Welford sums of the current adaptation window, its end and length, and the Robbins–Monro
    /// counter since the last metric update.
    win_mean: Vec<f64>,
    win_m2: Vec<f64>,
    win_n: u64,
    win_end: u64,
    win_len: u64,
    rm_k: u64,
}

/// Stan's window sizes: initial fast buffer, terminal fast buffer, first slow window.
const INIT_BUFFER: u64 = 75;
const TERM_BUFFER: u64 = 50;
const BASE_WINDOW: u64 = 25;

impl Mala {
    /// MALA with the given settings; errors on invalid settings.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{Mala, MalaSettings};
    /// use sgmcmc::Metric;
    ///
    /// let model = LogisticRegression::synthetic(2_000, 3, 10.0, 1)?;
    /// // Step and a diagonal metric adapted during the first 1 000 iterations (kept out by burn-in).
    /// let mala = Mala::new(MalaSettings { adapt_steps: 1_000, metric: Metric::Diagonal, ..Default::default() })?;
    /// let out = Runner::new(&model, &mala).start(&[0.0; 3]).settings(RunSettings { n_iter: 3_000, burn_in: 1_000, ..Default::default() }).run()?;
    /// let rate = out.chains[0].sampler.acceptance_rate_after_adaptation();
    /// assert!(rate > 0.3 && rate < 0.9, "{rate}");
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(settings: MalaSettings) -> Result<Self> {
        settings.validate()?;
        Ok(Mala {
            settings,
            gamma: settings.step_size,
            all: Vec::new(),
            theta: Vec::new(),
            grad: Vec::new(),
            u: 0.0,
            prop: Vec::new(),
            grad_prop: Vec::new(),
            scratch: Vec::new(),
            noise: Vec::new(),
            noise_back: Vec::new(),
            k: 0,
            n_accepted: 0,
            n_accepted_adapting: 0,
            ready: false,
            cost: Cost::default(),
            inv_mass: Vec::new(),
            sqrt_inv_mass: Vec::new(),
            dense: Vec::new(),
            dense_l: Vec::new(),
            win_m2_dense: Vec::new(),
            win_mean: Vec::new(),
            win_m2: Vec::new(),
            win_n: 0,
            win_end: 0,
            win_len: 0,
            rm_k: 0,
        })
    }

    /// The metric D (the diagonal of the inverse mass matrix) in use: ones unless adapted.
    pub fn inverse_mass(&self) -> &[f64] {
        &self.inv_mass
    }

    /// The dense metric D (row-major d × d), with [`Metric::Dense`] (or [`Metric::Auto`] in
    /// dimension up to [`AUTO_DENSE_MAX_DIM`]); empty otherwise.
    pub fn dense_metric(&self) -> &[f64] {
        &self.dense
    }

    /// Whether the metric adapts in this run.
    fn adapts_metric(&self) -> bool {
        self.settings.metric != Metric::Identity && self.settings.adapt_steps >= INIT_BUFFER + TERM_BUFFER + BASE_WINDOW
    }

    /// Whether the metric is dense ([`Metric::Dense`], or [`Metric::Auto`] up to
    /// [`AUTO_DENSE_MAX_DIM`]; the dimension is the bound state's).
    fn is_dense(&self) -> bool {
        match self.settings.metric {
            Metric::Dense => true,
            Metric::Auto => self.theta.len() <= AUTO_DENSE_MAX_DIM,
            Metric::Identity | Metric::Diagonal => false,
        }
    }

    /// Sets the dense metric to `cov` (row-major) if it has a Cholesky factor; `false` if not.
    fn set_dense(&mut self, cov: &[f64]) -> bool {
        let d = self.theta.len();
        let a = ndarray::Array2::from_shape_fn((d, d), |(i, j)| cov[i * d + j]);
        match crate::numeric::linalg::cholesky_lower("MALA dense metric", &a) {
            Ok(l) => {
                self.dense.copy_from_slice(cov);
                for i in 0..d {
                    for j in 0..d {
                        self.dense_l[i * d + j] = l[[i, j]];
                    }
                }
                true
            }
            Err(_) => false,
        }
    }

    /// `‖L⁻¹ r‖²` for the dense metric's factor L (forward substitution into `out`).
    fn dense_norm2(&self, r: &[f64], out: &mut [f64]) -> f64 {
        let d = r.len();
        let mut s2 = 0.0;
        for i in 0..d {
            let row = &self.dense_l[i * d..i * d + i];
            let acc: f64 = row.iter().zip(&out[..i]).map(|(a, b)| a * b).sum();
            out[i] = (r[i] - acc) / self.dense_l[i * d + i];
            s2 += out[i] * out[i];
        }
        s2
    }

    /// Stan's windowed metric adaptation, after iteration `self.k` has produced `self.theta`.
    fn adapt_metric(&mut self) {
        let k = self.k;
        let slow_end = self.settings.adapt_steps - TERM_BUFFER;
        if k <= INIT_BUFFER || k > slow_end {
            return;
        }
        self.win_n += 1;
        let n = self.win_n as f64;
        let dim = self.theta.len();
        if self.is_dense() {
            // Welford on the full co-moment: C += (x − m_old)(x − m_new)ᵀ.
            for i in 0..dim {
                self.scratch[i] = self.theta[i] - self.win_mean[i];
            }
            for (m, dlt) in self.win_mean.iter_mut().zip(&self.scratch) {
                *m += dlt / n;
            }
            for i in 0..dim {
                let di = self.scratch[i];
                for j in 0..dim {
                    self.win_m2_dense[i * dim + j] += di * (self.theta[j] - self.win_mean[j]);
                }
            }
        } else {
            for ((m, m2), t) in self.win_mean.iter_mut().zip(self.win_m2.iter_mut()).zip(&self.theta) {
                let d = t - *m;
                *m += d / n;
                *m2 += d * (t - *m);
            }
        }
        if k < self.win_end {
            return;
        }
        let old_trace: f64 = self.metric_trace();
        if self.is_dense() {
            // A covariance from fewer than 10 d draws is too poor to replace the metric (with
            // fewer than d it is singular): keep the current one, adapt only the step.
            if n >= (10 * dim) as f64 {
                let (w, r) = (n / (n + 5.0), 1e-3 * 5.0 / (n + 5.0));
                let cov: Vec<f64> = (0..dim * dim)
                    .map(|ij| {
                        let (i, j) = (ij / dim, ij % dim);
                        let c = 0.5 * (self.win_m2_dense[i * dim + j] + self.win_m2_dense[j * dim + i]) / (n - 1.0);
                        w * c + if i == j { r * self.win_m2_dense[i * dim + i] / (n - 1.0) } else { 0.0 }
                    })
                    .collect();
                self.set_dense(&cov);
            }
            self.win_m2_dense.fill(0.0);
        } else {
            for ((d, s), m2) in self.inv_mass.iter_mut().zip(self.sqrt_inv_mass.iter_mut()).zip(&self.win_m2) {
                let var = if n > 1.0 { m2 / (n - 1.0) } else { *d };
                *d = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0));
                *s = d.sqrt();
            }
        }
        let new_trace: f64 = self.metric_trace();
        if new_trace > 0.0 && new_trace.is_finite() {
            self.gamma *= old_trace / new_trace;
        }
        self.rm_k = 0;
        self.win_mean.fill(0.0);
        self.win_m2.fill(0.0);
        self.win_n = 0;
        // The next window doubles; if the one after it would not fit, it runs to the slow end.
        self.win_len *= 2;
        let next_end = k + self.win_len;
        self.win_end = if next_end + 2 * self.win_len > slow_end { slow_end } else { next_end };
    }

    /// The trace of the metric D in use.
    fn metric_trace(&self) -> f64 {
        if self.is_dense() {
            let d = self.theta.len();
            (0..d).map(|i| self.dense[i * d + i]).sum()
        } else {
            self.inv_mass.iter().sum()
        }
    }

    /// The settings.
    pub fn settings(&self) -> &MalaSettings {
        &self.settings
    }

    /// The step size in use (after adaptation, if any).
    pub fn step_size(&self) -> f64 {
        self.gamma
    }

    /// Fraction of proposals accepted since `init` (0 before the first step), adaptation
    /// included.
    pub fn acceptance_rate(&self) -> f64 {
        if self.k == 0 { 0.0 } else { self.n_accepted as f64 / self.k as f64 }
    }

    /// Fraction of proposals accepted after the adaptation phase (the first `adapt_steps`
    /// iterations), at the frozen step size; 0 before any such step.
    pub fn acceptance_rate_after_adaptation(&self) -> f64 {
        let adapt = self.settings.adapt_steps.min(self.k);
        let k = self.k - adapt;
        if k == 0 { 0.0 } else { (self.n_accepted - self.n_accepted_adapting) as f64 / k as f64 }
    }

    /// Potential and gradient at `x` into (`u`, `g`); a model without potentials is
    /// [`Error::Unsupported`] (needed by MALA).
    fn evaluate<M: Model + ?Sized>(&mut self, model: &M, at_proposal: bool) -> Result<f64> {
        let (x, g) = if at_proposal { (&self.prop, &mut self.grad_prop) } else { (&self.theta, &mut self.grad) };
        let n = self.all.len() as u64;
        let k = self.k;
        let u = model.potential_prior(x).map_err(|e| e.needed_by("MALA").at_iteration(k))?
            + model.potential_data_sum(x, &self.all).map_err(|e| e.needed_by("MALA").at_iteration(k))?;
        self.cost.datum_potentials += n;
        if u.is_nan() {
            return Err(Error::NonFinitePotential { iteration: self.k });
        }
        if u == f64::INFINITY {
            return Ok(u);
        }
        model.grad_data_sum(x, &self.all, g).map_err(|e| e.at_iteration(k))?;
        model.grad_prior(x, &mut self.scratch).map_err(|e| e.at_iteration(k))?;
        for (gi, s) in g.iter_mut().zip(&self.scratch) {
            *gi += s;
        }
        self.cost.datum_gradients += n;
        if !all_finite(g) {
            return Err(Error::NonFiniteGradient { iteration: self.k });
        }
        Ok(u)
    }
}

impl Sampler for Mala {
    fn init<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, theta0: &[f64], _rng: &mut R) -> Result<()> {
        check_shape(model)?;
        let d = model.dim();
        check_len("initial state theta0", d, theta0.len())?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteStart { what: "theta0" });
        }
        if self.all.len() != model.n_data() {
            self.all = crate::error::all_indices(model.n_data())?;
        }
        self.theta.clear();
        self.theta.extend_from_slice(theta0);
        for buf in [
            &mut self.grad,
            &mut self.prop,
            &mut self.grad_prop,
            &mut self.scratch,
            &mut self.noise,
            &mut self.noise_back,
        ] {
            buf.resize(d, 0.0);
        }
        for buf in [&mut self.inv_mass, &mut self.sqrt_inv_mass] {
            buf.clear();
            buf.resize(d, 1.0);
        }
        for buf in [&mut self.win_mean, &mut self.win_m2] {
            buf.clear();
            buf.resize(d, 0.0);
        }
        self.win_n = 0;
        self.win_len = BASE_WINDOW;
        self.win_end = INIT_BUFFER + BASE_WINDOW;
        if self.adapts_metric() && self.win_end + 2 * BASE_WINDOW > self.settings.adapt_steps - TERM_BUFFER {
            self.win_end = self.settings.adapt_steps - TERM_BUFFER;
        }
        self.rm_k = 0;
        self.k = 0;
        self.n_accepted = 0;
        self.n_accepted_adapting = 0;
        self.gamma = self.settings.step_size;
        self.ready = false;
        if self.is_dense() {
            for buf in [&mut self.dense, &mut self.dense_l, &mut self.win_m2_dense] {
                buf.clear();
                buf.resize(d * d, 0.0);
            }
            let identity: Vec<f64> = (0..d * d).map(|ij| if ij / d == ij % d { 1.0 } else { 0.0 }).collect();
            self.set_dense(&identity);
            // The inverse Hessian at θ₀, if positive definite.
            let h = crate::models::hessian::dense_hessian(model, theta0, &mut self.cost)?;
            if let Ok(cov) = crate::numeric::linalg::spd_inverse("Hessian at the MALA start", &h) {
                let flat: Vec<f64> = cov.iter().copied().collect();
                if self.set_dense(&flat) {
                    self.gamma = 0.1;
                }
            }
        }
        let u = self.evaluate(model, false)?;
        if !u.is_finite() {
            return Err(Error::NonFinitePotential { iteration: 0 });
        }
        self.u = u;
        self.ready = true;
        Ok(())
    }

    fn step<M: Model + ?Sized, R: Rng + ?Sized>(&mut self, model: &M, rng: &mut R) -> Result<()> {
        if !self.ready {
            return Err(Error::NotInitialised);
        }
        check_len("model dimension", self.theta.len(), model.dim())?;
        self.k += 1;
        let g = self.gamma;
        let s = (2.0 * g).sqrt();
        fill_standard_normal(rng, &mut self.noise);
        let dim = self.theta.len();
        if self.is_dense() {
            for i in 0..dim {
                let dg: f64 = self.dense[i * dim..(i + 1) * dim].iter().zip(&self.grad).map(|(a, b)| a * b).sum();
                let lz: f64 = self.dense_l[i * dim..=i * dim + i].iter().zip(&self.noise).map(|(a, b)| a * b).sum();
                self.prop[i] = self.theta[i] - g * dg + s * lz;
            }
        } else {
            for ((((p, t), gr), z), (dm, sd)) in self
                .prop
                .iter_mut()
                .zip(&self.theta)
                .zip(&self.grad)
                .zip(&self.noise)
                .zip(self.inv_mass.iter().zip(&self.sqrt_inv_mass))
            {
                *p = t - g * dm * gr + s * sd * z;
            }
        }
        let u_prop = self.evaluate(model, true)?;
        let log_u: f64 = rng.random::<f64>().ln();
        let mut accept_prob = 0.0;
        if u_prop.is_finite() {
            // In the metric D⁻¹: ‖θ' − θ + γD∇U(θ)‖² = 2γ‖z‖²; reverse move:
            // ‖θ − θ' + γD∇U(θ')‖²_{D⁻¹}. (With D = I these are the plain norms.)
            let fwd: f64 = self.noise.iter().map(|z| z * z).sum::<f64>() * 2.0 * g;
            let rev: f64 = if self.is_dense() {
                // r = θ − θ' + γ D ∇U(θ'), measured in D⁻¹: ‖L⁻¹ r‖².
                let mut r = std::mem::take(&mut self.scratch);
                for (i, ri) in r.iter_mut().enumerate() {
                    let dg: f64 =
                        self.dense[i * dim..(i + 1) * dim].iter().zip(&self.grad_prop).map(|(a, b)| a * b).sum();
                    *ri = self.theta[i] - self.prop[i] + g * dg;
                }
                let mut out = std::mem::take(&mut self.noise_back);
                let v = self.dense_norm2(&r, &mut out);
                self.scratch = r;
                self.noise_back = out;
                v
            } else {
                self.theta
                    .iter()
                    .zip(&self.prop)
                    .zip(&self.grad_prop)
                    .zip(&self.inv_mass)
                    .map(|(((t, p), gp), dm)| {
                        let r = t - p + g * dm * gp;
                        r * r / dm
                    })
                    .sum()
            };
            let log_alpha = self.u - u_prop + (fwd - rev) / (4.0 * g);
            accept_prob = log_alpha.exp().min(1.0);
            if log_u < log_alpha {
                std::mem::swap(&mut self.theta, &mut self.prop);
                std::mem::swap(&mut self.grad, &mut self.grad_prop);
                self.u = u_prop;
                self.n_accepted += 1;
            }
        }
        if self.k <= self.settings.adapt_steps {
            self.n_accepted_adapting = self.n_accepted;
            self.rm_k += 1;
            let gain = (self.rm_k as f64).powf(-0.6);
            self.gamma *= (gain * (accept_prob - self.settings.target_accept)).exp();
            if self.adapts_metric() {
                self.adapt_metric();
            }
        }
        Ok(())
    }

    fn draw_step_size(&self) -> Option<f64> {
        Some(self.gamma)
    }

    chain_accessors!(theta, grad, k);

    fn cost(&self) -> Cost {
        self.cost
    }

    fn adaptation_steps(&self) -> u64 {
        self.settings.adapt_steps
    }
}

#[cfg(test)]
mod tests {
    //! MALA's accept/reject step replayed by hand: the proposal from the chain's own normals,
    //! the acceptance probability from the documented formula with full-data potentials and
    //! gradients computed here, the decision from the chain's own uniform.
    use super::*;
    use crate::models::LinearGaussian;
    use crate::numeric::rng::stream;

    /// `U(θ)` and `∇U(θ)` over all the data, computed independently of the sampler.
    fn potential_and_gradient(m: &LinearGaussian, theta: &[f64]) -> (f64, Vec<f64>) {
        let all: Vec<usize> = (0..m.n_data()).collect();
        let (mut gp, mut gd) = (vec![0.0; theta.len()], vec![0.0; theta.len()]);
        m.grad_prior(theta, &mut gp).unwrap();
        m.grad_data_sum(theta, &all, &mut gd).unwrap();
        let u = m.potential_prior(theta).unwrap() + m.potential_data_sum(theta, &all).unwrap();
        (u, gp.iter().zip(&gd).map(|(a, b)| a + b).collect())
    }

    #[test]
    fn each_step_accepts_exactly_when_the_documented_ratio_says() {
        let m = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 3).unwrap();
        // A step near the posterior's scale: some proposals are accepted, some rejected.
        let gamma = 6e-3;
        let mut mala = Mala::new(MalaSettings::fixed(gamma)).unwrap();
        let mut rng = stream(5, &[0]);
        mala.init(&m, &[0.3, -0.2], &mut rng).unwrap();
        let (mut accepted, mut rejected) = (0, 0);
        for _ in 0..300 {
            let theta = mala.position().to_vec();
            let (u, g) = potential_and_gradient(&m, &theta);
            // The chain's draws: d normals, then one uniform.
            let mut replay = rng.clone();
            let mut z = vec![0.0; 2];
            fill_standard_normal(&mut replay, &mut z);
            let log_u: f64 = replay.random::<f64>().ln();
            let s = (2.0 * gamma).sqrt();
            let prop: Vec<f64> = (0..2).map(|i| theta[i] - gamma * g[i] + s * z[i]).collect();
            let (u_prop, g_prop) = potential_and_gradient(&m, &prop);
            let fwd: f64 = (0..2).map(|i| (prop[i] - theta[i] + gamma * g[i]).powi(2)).sum();
            let rev: f64 = (0..2).map(|i| (theta[i] - prop[i] + gamma * g_prop[i]).powi(2)).sum();
            let log_alpha = u - u_prop + (fwd - rev) / (4.0 * gamma);
            mala.step(&m, &mut rng).unwrap();
            let moved = mala.position() != theta.as_slice();
            if log_u < log_alpha - 1e-9 {
                assert!(moved, "a proposal with log α = {log_alpha} > log u = {log_u} was rejected");
                for (a, b) in mala.position().iter().zip(&prop) {
                    assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
                }
                accepted += 1;
            } else if log_u > log_alpha + 1e-9 {
                assert!(!moved, "a proposal with log α = {log_alpha} < log u = {log_u} was accepted");
                rejected += 1;
            }
        }
        assert!(accepted > 30 && rejected > 30, "{accepted} accepted, {rejected} rejected: the test must see both");
        let rate = mala.acceptance_rate();
        assert!((rate - accepted as f64 / 300.0).abs() < 0.02, "reported rate {rate}, replayed {accepted}/300");
    }

    #[test]
    fn a_model_without_potentials_is_refused_at_init() {
        struct NoPotentials;
        impl Model for NoPotentials {
            fn dim(&self) -> usize {
                1
            }
            fn n_data(&self) -> usize {
                1
            }
            fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
                o.copy_from_slice(t);
                Ok(())
            }
            fn grad_data_sum(&self, _: &[f64], _: &[usize], o: &mut [f64]) -> Result<()> {
                o.fill(0.0);
                Ok(())
            }
        }
        let mut mala = Mala::new(MalaSettings::fixed(0.1)).unwrap();
        let e = mala.init(&NoPotentials, &[0.0], &mut stream(1, &[0])).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert!(matches!(mala.step(&NoPotentials, &mut stream(1, &[0])), Err(Error::NotInitialised)));
    }
}
