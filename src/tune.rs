//! Automatic step sizes: a curvature rule from the mode, refined by kernel Stein discrepancy on
//! short pilot runs.
//!
//! [`tune`] takes a model and a sampler (whatever step it was built with) and returns the sampler
//! with a chosen constant step, plus a record of everything tried:
//!
//! 1. **Mode**: the posterior mode θ̂ by [`find_mode`] from the starting point
//!    (or the starting point itself, if [`TuneSettings::find_mode`] is off).
//! 2. **Curvature** ([`curvature`]): `λ_max(∇²U(θ̂))` and `λ_min` by power iteration on
//!    Hessian-vector products — the model's own ([`Model::hvp_prior`],
//!    [`Model::hvp_data_sum`]) or central differences of full gradients.
//! 3. **Centre**: a sampler-specific step from the curvature ([`Tunable::centre_step`]): for
//!    SGLD (any estimator, so SGLD-CV too) and SGHMC `1/λ_max` (half the Euler stability limit
//!    `2/λ_max`; for SGHMC's `η = h²` the leapfrog limit is `4/λ_max`); for pSGLD
//!    `1/λ_max(G^{1/2}∇²U G^{1/2})` with its RMSprop preconditioner G as it settles at the mode;
//!    for HAMCMC `1/λ_max(H ∇²U)` with the L-BFGS matrix H its warm-up builds at the mode.
//! 4. **Selection**: pilot runs from the mode at `centre × factor` for each factor of
//!    [`TuneSettings::factors`] (default `2⁻⁶ … 2¹`), scored by the kernel Stein discrepancy
//!    (IMQ kernel) of their draws with **exact** full-data scores, as Gorham & Mackey (NeurIPS
//!    2015, ICML 2017) chose SGLD step sizes. A pilot that diverges or runs away is recorded as a
//!    failure. The smallest KSD wins. Every gradient spent — mode, curvature, centre, pilots and
//!    scoring — is counted in [`Tuned::cost`].
//!
//! The KSD of a pilot measures its draws' fit at the pilot's length: a step too small has not
//! explored, a step too large is biased. The chosen step is therefore tuned for runs of about the
//! pilot's length; much longer runs can afford a smaller step.

use crate::cost::Cost;
use crate::diagnostics::{KsdSettings, ksd_imq};
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::GradientEstimator;
use crate::model::{Model, check_shape};
use crate::optim::{ModeSettings, find_mode};
use crate::rng::{fill_standard_normal, stream};
use crate::run::{RunSettings, Storage, run};
use crate::samplers::{
    Hamcmc, HamcmcSettings, Langevin, PsgldKernel, PsgldSettings, Sampler, SghmcKernel, SghmcSettings, SgldKernel,
    SgldSettings,
};
use crate::schedule::StepSize;
use ndarray::Array2;
use rayon::prelude::*;

/// Settings of [`curvature`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvatureSettings {
    /// Most power iterations for each extreme eigenvalue. Default 1000.
    pub max_iter: usize,
    /// Stop when the Rayleigh quotient changes by at most `tol` relative. Default 1e-12.
    pub tol: f64,
    /// Seed of the starting vector. Default 0.
    pub seed: u64,
    /// Also estimate `λ_min` (a second power iteration on `λ_max I − ∇²U`). Default true.
    pub lambda_min: bool,
}

impl Default for CurvatureSettings {
    fn default() -> Self {
        CurvatureSettings { max_iter: 1000, tol: 1e-12, seed: 0, lambda_min: true }
    }
}

/// The extreme curvatures of the potential at a point.
#[derive(Debug, Clone, PartialEq)]
pub struct Curvature {
    /// The largest eigenvalue of `∇²U(θ)` (full data, prior included).
    pub lambda_max: f64,
    /// The smallest eigenvalue (`None` if not asked for). It converges more slowly than
    /// `lambda_max` (at the rate of the gap between the two smallest eigenvalues relative to the
    /// spectrum's width): treat it as an estimate, good to a few per cent on well-separated
    /// spectra.
    pub lambda_min: Option<f64>,
    /// Power iterations done (both phases).
    pub iterations: usize,
    /// Whether the model's own Hessian-vector products were used (else central differences of
    /// gradients).
    pub exact_hvp: bool,
    /// The evaluations spent.
    pub cost: Cost,
}

/// `∇²U(θ) v` for the full data set: the model's HVPs when it has them, else central
/// differences of full gradients with step `1e-5 · max(1, ‖θ‖)` (exact for quadratic U).
struct Hessian<'a, M: ?Sized> {
    model: &'a M,
    theta: &'a [f64],
    all: Vec<usize>,
    exact: bool,
    h: f64,
    buf: (Vec<f64>, Vec<f64>, Vec<f64>),
    cost: Cost,
}

impl<'a, M: Model + ?Sized> Hessian<'a, M> {
    fn new(model: &'a M, theta: &'a [f64]) -> Self {
        let d = model.dim();
        let all: Vec<usize> = (0..model.n_data()).collect();
        let mut probe = vec![0.0; d];
        let v = vec![0.0; d];
        let exact = model.hvp_prior(theta, &v, &mut probe).is_ok()
            && model.hvp_data_sum(theta, &v, &all[..1.min(all.len())], &mut probe).is_ok();
        let h = 1e-5 * norm(theta).max(1.0);
        Hessian { model, theta, all, exact, h, buf: (vec![0.0; d], vec![0.0; d], vec![0.0; d]), cost: Cost::default() }
    }

    fn grad(&mut self, x: &[f64], out: &mut [f64]) -> Result<()> {
        let (_, _, tmp) = &mut self.buf;
        self.model.grad_data_sum(x, &self.all, out);
        self.model.grad_prior(x, tmp);
        out.iter_mut().zip(tmp.iter()).for_each(|(o, t)| *o += t);
        self.cost.datum_gradients += self.all.len() as u64;
        if all_finite(out) { Ok(()) } else { Err(Error::NonFiniteGradient { iteration: 0 }) }
    }

    fn apply(&mut self, v: &[f64], out: &mut [f64]) -> Result<()> {
        let n = self.all.len() as u64;
        if self.exact {
            let (a, _, _) = &mut self.buf;
            self.model.hvp_data_sum(self.theta, v, &self.all, out)?;
            self.model.hvp_prior(self.theta, v, a)?;
            out.iter_mut().zip(a.iter()).for_each(|(o, t)| *o += t);
            self.cost.datum_hvps += n;
        } else {
            let h = self.h;
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

/// The largest eigenvalue of a symmetric positive semi-definite operator by power iteration,
/// from a seeded random start: (λ, iterations).
fn power_iteration(
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

/// The extreme eigenvalues of `∇²U(θ)` (full data, prior included) by power iteration on
/// Hessian-vector products (see [`Curvature`]). Each iteration costs one full HVP (N datum HVPs)
/// or, without the model's HVPs, two full gradients (2N datum gradients).
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
    let mut hess = Hessian::new(model, theta);
    let (lmax, it1) = power_iteration(d, settings, 0, |v, out| hess.apply(v, out))?;
    if lmax.is_nan() || lmax <= 0.0 {
        return Err(Error::invalid(
            "hessian",
            format!("largest curvature {lmax:.3e}"),
            "the potential does not curve upwards at θ: start from (near) a mode",
        ));
    }
    let (lambda_min, it2) = if settings.lambda_min {
        let (mu, it) = power_iteration(d, settings, 1, |v, out| {
            hess.apply(v, out)?;
            out.iter_mut().zip(v).for_each(|(o, x)| *o = lmax * x - *o);
            Ok(())
        })?;
        (Some(lmax - mu), it)
    } else {
        (None, 0)
    };
    Ok(Curvature { lambda_max: lmax, lambda_min, iterations: it1 + it2, exact_hvp: hess.exact, cost: hess.cost })
}

/// A sampler whose constant step size [`tune`] can choose.
pub trait Tunable: Sampler {
    /// The same sampler (settings, estimator) with the constant step size `step`.
    ///
    /// Errors: [`Error::InvalidParameter`] for a non-positive step.
    fn with_step_size(&self, step: f64) -> Result<Self>;

    /// The sampler's curvature-derived step at the mode (see the [module docs](self)), adding
    /// what it spends to `cost`.
    fn centre_step<M: Model + ?Sized>(&self, model: &M, mode: &[f64], curv: &Curvature, cost: &mut Cost)
    -> Result<f64>;
}

impl<E: GradientEstimator> Tunable for Langevin<SgldKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Self::new(SgldSettings { step_size: StepSize::Constant(step) }, self.estimator().clone())
    }

    /// `1/λ_max`: half the Euler scheme's stability limit.
    fn centre_step<M: Model + ?Sized>(&self, _: &M, _: &[f64], curv: &Curvature, _: &mut Cost) -> Result<f64> {
        Ok(1.0 / curv.lambda_max)
    }
}

impl<E: GradientEstimator> Tunable for Langevin<SghmcKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Self::new(SghmcSettings { step_size: StepSize::Constant(step), ..*self.settings() }, self.estimator().clone())
    }

    /// `η = 1/λ_max` (the leapfrog limit is `η λ_max < 4`).
    fn centre_step<M: Model + ?Sized>(&self, _: &M, _: &[f64], curv: &Curvature, _: &mut Cost) -> Result<f64> {
        Ok(1.0 / curv.lambda_max)
    }
}

/// Iterations of the nearly-still pilots that let pSGLD's and HAMCMC's preconditioners settle.
const SETTLE_STEPS: u64 = 300;

impl<E: GradientEstimator> Tunable for Langevin<PsgldKernel, E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Self::new(PsgldSettings { step_size: StepSize::Constant(step), ..*self.settings() }, self.estimator().clone())
    }

    /// `1/λ_max(G^{1/2} ∇²U G^{1/2})`, G the RMSprop preconditioner after 300 steps at the mode
    /// with a step `1e-12/λ_max` (so the chain stays put while V averages the squared gradient
    /// estimates there).
    fn centre_step<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        curv: &Curvature,
        cost: &mut Cost,
    ) -> Result<f64> {
        let mut s = self.with_step_size(1e-12 / curv.lambda_max)?;
        let mut rng = stream(0x0070_7367_6c64, &[0]);
        s.init(model, mode, &mut rng)?;
        for _ in 0..SETTLE_STEPS {
            s.step(model, &mut rng)?;
        }
        *cost += s.cost();
        let g: Vec<f64> = s.preconditioner().map(f64::sqrt).collect();
        let mut hess = Hessian::new(model, mode);
        let mut tmp = vec![0.0; g.len()];
        let (l, _) = power_iteration(g.len(), &CurvatureSettings { tol: 1e-8, ..Default::default() }, 2, |v, out| {
            tmp.iter_mut().zip(v).zip(&g).for_each(|((t, v), g)| *t = g * v);
            hess.apply(&tmp, out)?;
            out.iter_mut().zip(&g).for_each(|(o, g)| *o *= g);
            Ok(())
        })?;
        *cost += hess.cost;
        Ok(1.0 / l)
    }
}

impl<E: GradientEstimator> Tunable for Hamcmc<E> {
    fn with_step_size(&self, step: f64) -> Result<Self> {
        Hamcmc::new(
            HamcmcSettings { step_size: StepSize::Constant(step), ..*self.settings() },
            self.estimator().clone(),
        )
    }

    /// `1/λ_max(H ∇²U)`, H the L-BFGS inverse-Hessian approximation after the warm-up and 300
    /// steps at the mode with step `1e-2/λ_max` (warm-up step likewise).
    fn centre_step<M: Model + ?Sized>(
        &self,
        model: &M,
        mode: &[f64],
        curv: &Curvature,
        cost: &mut Cost,
    ) -> Result<f64> {
        let small = 1e-2 / curv.lambda_max;
        let mut s = Hamcmc::new(
            HamcmcSettings { step_size: StepSize::Constant(small), warmup_step_size: small, ..*self.settings() },
            self.estimator().clone(),
        )?;
        let mut rng = stream(0x6861_6d63_6d63, &[0]);
        s.init(model, mode, &mut rng)?;
        for _ in 0..SETTLE_STEPS {
            s.step(model, &mut rng)?;
        }
        *cost += s.cost();
        let Some(lbfgs) = s.lbfgs() else {
            return Ok(1.0 / curv.lambda_max);
        };
        let mut lbfgs = lbfgs.clone();
        let mut hess = Hessian::new(model, mode);
        let d = mode.len();
        let mut tmp = vec![0.0; d];
        let (l, _) = power_iteration(d, &CurvatureSettings { tol: 1e-8, ..Default::default() }, 3, |v, out| {
            hess.apply(v, &mut tmp)?;
            lbfgs.apply_h(&tmp, out)
        })?;
        *cost += hess.cost;
        if l > 0.0 { Ok(1.0 / l) } else { Ok(1.0 / curv.lambda_max) }
    }
}

/// Settings of [`tune`].
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSettings {
    /// Multiples of the curvature-derived centre step tried by pilot runs. Default
    /// `2⁻⁶, 2⁻⁵, …, 2¹` (eight candidates).
    pub factors: Vec<f64>,
    /// Iterations of each pilot run, burn-in included. Default 2000.
    pub pilot_iterations: u64,
    /// Burn-in of each pilot run. Default 200.
    pub pilot_burn_in: u64,
    /// At most this many (thinned, evenly spaced) draws of a pilot are scored: each costs one
    /// full gradient. Default 200.
    pub scored_draws: usize,
    /// The IMQ kernel. Default `c = 1, β = −1/2`.
    pub ksd: KsdSettings,
    /// Seed of the pilots. Default 0.
    pub seed: u64,
    /// Start from the mode found by [`find_mode`] from the given θ₀ (default true); otherwise
    /// θ₀ must already be near a mode.
    pub find_mode: bool,
    /// The mode search.
    pub mode: ModeSettings,
    /// The curvature estimate.
    pub curvature: CurvatureSettings,
}

impl Default for TuneSettings {
    fn default() -> Self {
        TuneSettings {
            factors: (-6..=1).map(|e| 2f64.powi(e)).collect(),
            pilot_iterations: 2000,
            pilot_burn_in: 200,
            scored_draws: 200,
            ksd: KsdSettings::default(),
            seed: 0,
            find_mode: true,
            mode: ModeSettings::default(),
            curvature: CurvatureSettings::default(),
        }
    }
}

impl TuneSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        if self.factors.is_empty() {
            return Err(Error::invalid("factors", "[]", "must name at least one candidate"));
        }
        if let Some(f) = self.factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return Err(Error::invalid("factors", f, "every factor must be positive and finite"));
        }
        if self.scored_draws < 2 {
            return Err(Error::invalid("scored_draws", self.scored_draws, "must be >= 2"));
        }
        RunSettings { n_iter: self.pilot_iterations, burn_in: self.pilot_burn_in, ..Default::default() }.validate()
    }
}

/// One pilot run of [`tune`].
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// The step size tried.
    pub step_size: f64,
    /// Its KSD (`None` if it failed).
    pub ksd: Option<f64>,
    /// Why it failed (divergence, runaway), if it did.
    pub failure: Option<String>,
    /// Its pilot run and scoring cost.
    pub cost: Cost,
}

/// What [`tune`] chose, and why.
#[derive(Debug, Clone)]
pub struct Tuned<S> {
    /// The sampler with the chosen constant step.
    pub sampler: S,
    /// The chosen step.
    pub step_size: f64,
    /// The curvature-derived centre of the candidates.
    pub centre: f64,
    /// The curvature at the mode.
    pub curvature: Curvature,
    /// The mode the pilots started from (start runs there too).
    pub mode: Vec<f64>,
    /// Every candidate, in the order of [`TuneSettings::factors`].
    pub trials: Vec<Trial>,
    /// Everything spent: mode, curvature, centre, pilots and scoring.
    pub cost: Cost,
    /// Why the winner won, in words.
    pub reason: String,
}

/// Chooses `sampler`'s constant step size for `model` from `theta0` without the user's help (see
/// the [module docs](self)).
///
/// Errors: invalid settings; those of [`find_mode`], [`curvature`] and the centre rule; a
/// candidate that fails (diverges, runs away) is recorded, not an error, but
/// [`Error::NotConverged`] (`"tune"`) is returned when every candidate failed.
pub fn tune<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<Tuned<S>> {
    settings.validate()?;
    check_shape(model)?;
    check_len("theta0", model.dim(), theta0.len())?;
    if !all_finite(theta0) {
        return Err(Error::NonFiniteStart { what: "theta0" });
    }
    let mut cost = Cost::default();
    let mode = if settings.find_mode {
        let opt = find_mode(model, theta0, &settings.mode)?;
        cost += opt.cost;
        opt.theta.to_vec()
    } else {
        theta0.to_vec()
    };
    let curv = curvature(model, &mode, &settings.curvature)?;
    cost += curv.cost;
    let centre = sampler.centre_step(model, &mode, &curv, &mut cost)?;
    let scale = whitening(model, &mode, &mut cost)?;
    let trials: Vec<Trial> = settings
        .factors
        .par_iter()
        .enumerate()
        .map(|(i, f)| pilot(model, sampler, &mode, &scale, centre * f, i as u64, settings))
        .collect::<Result<_>>()?;
    for t in &trials {
        cost += t.cost;
    }
    let best = trials
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.ksd.map(|k| (i, k)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or(Error::NotConverged { what: "tune", iterations: trials.len() as u64, residual: f64::NAN })?;
    let failed = trials.iter().filter(|t| t.failure.is_some()).count();
    let step = trials[best.0].step_size;
    let reason = format!(
        "smallest KSD ({:.4e}) of {} candidate steps {:.3e} … {:.3e} around the curvature step {centre:.3e} \
         (λ_max = {:.4e}); {failed} failed",
        best.1,
        trials.len(),
        trials.first().map_or(f64::NAN, |t| t.step_size),
        trials.last().map_or(f64::NAN, |t| t.step_size),
        curv.lambda_max,
    );
    Ok(Tuned {
        sampler: sampler.with_step_size(step)?,
        step_size: step,
        centre,
        curvature: curv,
        mode,
        trials,
        cost,
        reason,
    })
}

/// One pilot: a run from the mode at `step`, its draws thinned and scored by KSD with exact
/// scores.
fn pilot<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    mode: &[f64],
    scale: &[f64],
    step: f64,
    index: u64,
    settings: &TuneSettings,
) -> Result<Trial> {
    let s = sampler.with_step_size(step)?;
    let kept = settings.pilot_iterations - settings.pilot_burn_in;
    let thin = (kept / settings.scored_draws as u64).max(1);
    let rs = RunSettings {
        n_iter: settings.pilot_iterations,
        burn_in: settings.pilot_burn_in,
        thin,
        n_chains: 1,
        seed: settings.seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        storage: Storage::Samples,
        parallel: false,
        check_model: false,
        ..Default::default()
    };
    let out = match run(model, &s, mode, &rs) {
        Ok(out) => out,
        Err(e) => {
            let root = e.root();
            if matches!(root, Error::NonFiniteState { .. } | Error::NonFiniteGradient { .. } | Error::Runaway { .. }) {
                return Ok(Trial { step_size: step, ksd: None, failure: Some(e.to_string()), cost: Cost::default() });
            }
            return Err(e);
        }
    };
    let mut cost = out.cost - out.setup_cost;
    let mut draws = out.estimate.stacked_draws()?;
    let n = draws.nrows();
    let d = draws.ncols();
    let all: Vec<usize> = (0..model.n_data()).collect();
    let mut scores = Array2::zeros((n, d));
    let mut tmp = vec![0.0; d];
    let mut g = vec![0.0; d];
    for (i, row) in draws.outer_iter().enumerate() {
        let x = row.to_vec();
        model.grad_data_sum(&x, &all, &mut g);
        model.grad_prior(&x, &mut tmp);
        for j in 0..d {
            scores[[i, j]] = -(g[j] + tmp[j]) / scale[j];
        }
    }
    // Whitened coordinates x'ⱼ = (xⱼ − θ̂ⱼ)·√Hⱼⱼ have scores sⱼ/√Hⱼⱼ.
    for mut row in draws.outer_iter_mut() {
        row.iter_mut().zip(scale).zip(mode).for_each(|((x, s), m)| *x = (*x - m) * s);
    }
    cost.datum_gradients += (n * all.len()) as u64;
    if scores.iter().any(|v: &f64| !v.is_finite()) {
        return Ok(Trial { step_size: step, ksd: None, failure: Some("non-finite score at a draw".into()), cost });
    }
    let ksd = ksd_imq(draws.view(), scores.view(), None, settings.ksd)?;
    Ok(Trial { step_size: step, ksd: Some(ksd), failure: None, cost })
}

/// `√(∇²U(θ̂))ⱼⱼ` for each coordinate (d Hessian-vector products): the KSD is computed on
/// coordinates scaled to unit posterior curvature, so that the IMQ kernel's width (c = 1) is on
/// the posterior's own scale in every direction, and variance errors count, not only the mean's.
fn whitening<M: Model + ?Sized>(model: &M, mode: &[f64], cost: &mut Cost) -> Result<Vec<f64>> {
    let d = mode.len();
    let mut hess = Hessian::new(model, mode);
    let mut e = vec![0.0; d];
    let mut out = vec![0.0; d];
    let mut scale = vec![0.0; d];
    for j in 0..d {
        e[j] = 1.0;
        hess.apply(&e, &mut out)?;
        e[j] = 0.0;
        scale[j] = if out[j] > 0.0 { out[j].sqrt() } else { 1.0 };
    }
    *cost += hess.cost;
    Ok(scale)
}

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
