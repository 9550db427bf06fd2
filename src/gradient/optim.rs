//! Optimisers that find a centring value: SGD on minibatches (Baker et al. 2019, §3.4) and a
//! deterministic full-gradient L-BFGS mode finder (for SGLDFP, Brosse et al. 2018).
//!
//! Both count their datum-gradient evaluations, so the setup cost of control-variate methods
//! is part of every cost comparison.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::{FullGradient, GradientEstimator, Minibatch};
use crate::models::model::{Model, check_shape};
use crate::numeric::lbfgs::Lbfgs;
use crate::numeric::linalg::dot;
use crate::numeric::rng::{DEFAULT_SEED, stream};
use crate::numeric::schedule::StepSize;

/// The result of an optimiser.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    /// The point found.
    pub theta: Vec<f64>,
    /// Its cost in datum evaluations.
    pub cost: Cost,
    /// Iterations made.
    pub iterations: u64,
    /// `‖∇U(θ)‖` at the point, if the optimiser computed the full gradient there (L-BFGS); `None`
    /// for SGD, which never sees it.
    pub grad_norm: Option<f64>,
}

/// Settings of [`sgd`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdSettings {
    /// Minibatch size n (with replacement). Default 100.
    pub batch_size: usize,
    /// Passes over the data: the number of iterations is `⌈n_passes · N / n⌉`. Default 1
    /// (Baker et al. show one pass suffices for log-concave posteriors).
    pub n_passes: f64,
    /// Step schedule `h_k` on the **normalised** potential `U/N`: the update is
    /// `θ ← θ − (h_k / N) ∇Ũ(θ)`, so the step does not have to be rescaled with N when every
    /// parameter is informed by every datum (regressions). Tune it: the right scale is about
    /// `1/λ_min(∇²U/N)`; for models where each parameter sees only a few data (matrix
    /// factorisation: a user's factors see only that user's ratings), the normalised curvature is
    /// tiny and `a` must be correspondingly large (thousands for MovieLens-sized PMF).
    /// Default `Shifted { a: 1, b: 10, c: 0.6 }`, i.e. `h_k = (10 + k)^(−0.6)`.
    pub step_size: StepSize,
    /// Seed of the minibatch stream. Default [`DEFAULT_SEED`].
    pub seed: u64,
}

impl Default for SgdSettings {
    fn default() -> Self {
        SgdSettings {
            batch_size: 100,
            n_passes: 1.0,
            step_size: StepSize::Shifted { a: 1.0, b: 10.0, c: 0.6 },
            seed: DEFAULT_SEED,
        }
    }
}

impl SgdSettings {
    /// Checks every field (the batch size is checked against N when run).
    pub fn validate(&self) -> Result<()> {
        crate::error::check_positive("n_passes", self.n_passes)?;
        self.step_size.validate("step_size")
    }
}

/// Stochastic gradient descent `θ_{k+1} = θ_k − (h_k/N) ∇Ũ(θ_k)` from `theta0`, with minibatches
/// drawn with replacement; returns the last iterate.
///
/// Errors: invalid settings or batch size; [`Error::DimensionMismatch`] for `theta0`;
/// [`Error::NonFiniteState`] / [`Error::NonFiniteGradient`] (with the iteration) if it diverges.
pub fn sgd<M: Model + ?Sized>(model: &M, theta0: &[f64], settings: &SgdSettings) -> Result<Optimum> {
    settings.validate()?;
    check_shape(model)?;
    check_len("initial state theta0", model.dim(), theta0.len())?;
    let mut est = Minibatch::new(settings.batch_size);
    est.prepare(model)?;
    let n = model.n_data() as f64;
    let iters = (settings.n_passes * n / settings.batch_size as f64).ceil().max(1.0) as u64;
    let mut rng = stream(settings.seed, &[SGD_STREAM]);
    let mut theta = theta0.to_vec();
    let mut g = vec![0.0; theta.len()];
    for k in 1..=iters {
        est.estimate(model, &theta, &mut rng, &mut g).map_err(|e| e.at_iteration(k))?;
        if !all_finite(&g) {
            return Err(Error::NonFiniteGradient { iteration: k });
        }
        let h = settings.step_size.at(k) / n;
        for (t, gi) in theta.iter_mut().zip(&g) {
            *t -= h * gi;
        }
        if !all_finite(&theta) {
            return Err(Error::NonFiniteState { iteration: k });
        }
    }
    Ok(Optimum { theta, cost: Cost::gradients(est.n_datum_gradients()), iterations: iters, grad_norm: None })
}

/// A fixed stream index for SGD's generator (distinct from chain streams).
const SGD_STREAM: u64 = 0x56D0_0000;

/// Settings of [`find_mode`].
///
/// Build with `ModeSettings { max_iter: 5_000, ..Default::default() }`: fields may be added.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeSettings {
    /// Maximum number of L-BFGS iterations. Default 2 000.
    pub max_iter: u64,
    /// Number of (s, y) pairs kept. Default 10.
    pub memory: usize,
    /// Stop when `‖∇U(θ)‖ ≤ grad_tol · (N + 1)` (the gradient grows with N). Default 1e-10.
    pub grad_tol: f64,
    /// Stop when the Newton decrement `√(∇Uᵀ [∇²U]⁻¹ ∇U)` — the distance to the mode measured in
    /// posterior standard deviations of the Laplace approximation, whatever the scale and
    /// conditioning of θ — is at most this. L-BFGS's own inverse-Hessian estimate proposes it;
    /// up to [`newton_max_dim`](Self::newton_max_dim) the exact Hessian confirms it. Default 1e-7.
    pub decrement_tol: f64,
    /// Up to this dimension, Newton's method with the exact Hessian (d Hessian-vector products
    /// per iteration: the model's, or central differences of full gradients) finishes what
    /// L-BFGS did not: on a posterior of condition number 10¹² L-BFGS stalls far from the mode
    /// in sd units, Newton converges in a few iterations. 0 turns it off. Default 1 000.
    pub newton_max_dim: usize,
    /// Most Newton iterations. Default 50.
    pub newton_max_iter: u64,
    /// Newton's Hessian from at most this many data drawn at random (`max(hessian_rows, 100 d)`,
    /// scaled by N/m; all of them when that is more than half the data). Default `usize::MAX`:
    /// all. [`tune`](crate::tune::tune) uses its own
    /// [`TuneSettings::hessian_rows`](crate::tune::TuneSettings::hessian_rows): a Newton step with
    /// a Hessian to a few per cent converges as fast, and costs `d m` instead of `d N` datum
    /// Hessian-vector products.
    pub hessian_rows: usize,
}

impl Default for ModeSettings {
    fn default() -> Self {
        ModeSettings {
            max_iter: 2_000,
            memory: 10,
            grad_tol: 1e-10,
            decrement_tol: 1e-7,
            newton_max_dim: 1_000,
            newton_max_iter: 50,
            hessian_rows: usize::MAX,
        }
    }
}

impl ModeSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        if self.max_iter == 0 {
            return Err(Error::invalid("max_iter", self.max_iter, "must be >= 1"));
        }
        if self.memory == 0 {
            return Err(Error::invalid("memory", self.memory, "must be >= 1"));
        }
        crate::error::check_positive("grad_tol", self.grad_tol)?;
        crate::error::check_positive("decrement_tol", self.decrement_tol)
    }
}

/// The posterior mode θ* by L-BFGS on the full potential, from `theta0`, finished by Newton's
/// method when the dimension allows.
///
/// Directions come from the crate's one L-BFGS (two-loop recursion) with the usual
/// initial scaling `sᵀy / yᵀy`. Uses only gradients (so it works for models without
/// potentials): the line search looks for a
/// step where the directional derivative has fallen to at most 0.9 of its initial magnitude
/// (the strong Wolfe curvature condition), by doubling then bisection — sound for the
/// log-concave posteriors control variates are meant for. Every gradient is a full pass
/// (N datum gradients), counted in the result.
///
/// Convergence: `‖∇U‖ ≤ grad_tol·(N + 1)`, or a Newton decrement below
/// [`ModeSettings::decrement_tol`] (scale-free: distance to the mode in posterior sds). When
/// L-BFGS stops short (iteration limit, failed line search) and `d ≤ newton_max_dim`, Newton
/// iterations with the exact Hessian (Cholesky; a Hessian that is not positive definite stops
/// them) and the same line search take over; their Hessian-vector products are in the cost. On
/// a badly conditioned posterior the gradient's rounding error (about `ε·‖∇²U‖·‖θ‖`) may keep
/// the decrement above `decrement_tol`: Newton then stops where its decrement no longer falls
/// by a factor 4 per iteration, and accepts that point if the decrement is below 1e-3 sd.
///
/// Errors: invalid settings; [`Error::DimensionMismatch`] for `theta0`; [`Error::NonFiniteGradient`]
/// at the start; [`Error::NotConverged`] when neither phase converged (with the gradient norm and
/// the settings to raise; the last iterate is not returned). The stopping test is on the gradient,
/// so a start at a stationary point that is not a mode (a saddle, e.g. θ = 0 in matrix
/// factorisation) stops at once.
pub fn find_mode<M: Model + ?Sized>(model: &M, theta0: &[f64], settings: &ModeSettings) -> Result<Optimum> {
    find_mode_with_hessian(model, theta0, settings, false).map(|(o, _)| o)
}

/// [`find_mode`], with the Hessian its last Newton iteration used, if it ended in that phase; with
/// `newton_only` (a start already near the mode, and `d ≤ newton_max_dim`) straight to Newton's
/// iterations. With a subsampled Hessian ([`ModeSettings::hessian_rows`]) Newton keeps its
/// Hessian from one iteration to the next while the decrement falls by at least 10× per
/// iteration (a Hessian to a few per cent is as good as a fresh one near the mode), so the
/// Hessian returned may be from an earlier iterate.
pub(crate) fn find_mode_with_hessian<M: Model + ?Sized>(
    model: &M,
    theta0: &[f64],
    settings: &ModeSettings,
    newton_only: bool,
) -> Result<(Optimum, Option<ndarray::Array2<f64>>)> {
    settings.validate()?;
    check_shape(model)?;
    let d = model.dim();
    check_len("initial state theta0", d, theta0.len())?;
    let mut est = FullGradient::new();
    est.prepare(model)?;
    let mut rng = stream(0, &[0]);
    let tol = settings.grad_tol * (model.n_data() as f64 + 1.0);
    let dtol2 = settings.decrement_tol * settings.decrement_tol;
    let newton_ok = d <= settings.newton_max_dim && settings.newton_max_iter > 0;
    let mut extra = Cost::default();
    let mut x = theta0.to_vec();
    let mut g = vec![0.0; d];
    est.estimate(model, &x, &mut rng, &mut g).map_err(|e| e.at_iteration(0))?;
    if !all_finite(&g) {
        return Err(Error::NonFiniteGradient { iteration: 0 });
    }
    let mut lbfgs = Lbfgs::new(d, settings.memory, 1.0)?;
    let (mut xt, mut gt, mut dir) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
    let (mut s, mut y) = (vec![0.0; d], vec![0.0; d]);
    let mut done = 0;
    let mut converged = false;
    let lbfgs_iterations = if newton_only && newton_ok { 0 } else { settings.max_iter };
    for it in 1..=lbfgs_iterations {
        done = it;
        let gn = dot(&g, &g).sqrt();
        if gn <= tol {
            return Ok((optimum(&est, extra, x, it - 1, gn), None));
        }
        let mut dphi0 = lbfgs_direction(&mut lbfgs, &g, gn, &mut dir)?;
        // L-BFGS's Newton decrement −gᵀdir = gᵀ H g: small means near the mode in sd units.
        if lbfgs.len() >= 2 && dphi0 < 0.0 && -dphi0 <= dtol2 {
            converged = true;
            done = it - 1;
            break;
        }
        if dphi0.is_nan() || dphi0 >= 0.0 {
            // Not a descent direction (numerical trouble): restart from steepest descent.
            lbfgs.clear();
            for (q, gi) in dir.iter_mut().zip(&g) {
                *q = -gi / gn;
            }
            dphi0 = dot(&g, &dir);
        }
        if !line_search(model, &mut est, &mut rng, &x, &dir, dphi0, &mut xt, &mut gt)? {
            break;
        }
        push_pair(&mut lbfgs, (&x, &xt), (&g, &gt), (&mut s, &mut y))?;
        std::mem::swap(&mut x, &mut xt);
        std::mem::swap(&mut g, &mut gt);
    }
    if !converged && !newton_ok {
        return Err(not_converged(done, &g, settings));
    }
    if !newton_ok {
        let gn = dot(&g, &g).sqrt();
        return Ok((optimum(&est, extra, x, done, gn), None));
    }
    // Newton: confirm L-BFGS's decrement with the exact Hessian, or finish the job.
    let rows = crate::models::hessian::hessian_subset_size(settings.hessian_rows, d, model.n_data())
        .map(|m| crate::models::hessian::random_subset(model.n_data(), m, NEWTON_SUBSET_SEED));
    let mut prev_dec2 = f64::INFINITY;
    let mut kept: Option<ndarray::Array2<f64>> = None;
    for nit in 0..=settings.newton_max_iter {
        let gn = dot(&g, &g).sqrt();
        let h = match kept.take() {
            Some(h) => h,
            None => crate::models::hessian::dense_hessian_on(model, &x, rows.as_deref(), &mut extra)?,
        };
        let Ok(step) = crate::numeric::linalg::spd_solve(
            "Hessian in the Newton mode search",
            &h,
            &ndarray::Array1::from(g.clone()),
        ) else {
            // Not positive definite: not (near) a mode of a log-concave posterior.
            if converged || gn <= tol {
                break;
            }
            return Err(not_converged(done + nit, &g, settings));
        };
        let dec2 = dot(&g, step.as_slice().expect("contiguous"));
        // At the rounding floor of the gradient (‖∇U‖ cannot be computed to better than about
        // ε·‖∇²U‖·‖θ‖), the decrement stops falling: accept it there if below 1e-3 sd.
        let floor = dec2 >= 0.25 * prev_dec2 && dec2 <= NEWTON_FLOOR_DECREMENT * NEWTON_FLOOR_DECREMENT;
        let before = prev_dec2;
        prev_dec2 = dec2;
        if gn <= tol || (dec2 >= 0.0 && dec2 <= dtol2) || floor {
            return Ok((optimum(&est, extra, x, done + nit, gn), Some(h)));
        }
        if nit == settings.newton_max_iter {
            break;
        }
        dir.iter_mut().zip(step.iter()).for_each(|(d, s)| *d = -s);
        let dphi0 = dot(&g, &dir);
        if dphi0.is_nan() || dphi0 >= 0.0 || !line_search(model, &mut est, &mut rng, &x, &dir, dphi0, &mut xt, &mut gt)?
        {
            break;
        }
        std::mem::swap(&mut x, &mut xt);
        std::mem::swap(&mut g, &mut gt);
        // A subsampled Hessian serves the next iteration too (a chord Newton step) unless the
        // last one did not cut the decrement tenfold.
        if rows.is_some() && (before.is_infinite() || dec2 <= 0.1 * before) {
            kept = Some(h);
        }
    }
    if converged {
        let gn = dot(&g, &g).sqrt();
        return Ok((optimum(&est, extra, x, done, gn), None));
    }
    Err(not_converged(done + settings.newton_max_iter, &g, settings))
}

/// The optimum found at `x` after `iterations`, with the full gradient's norm there and the
/// search's cost (the estimator's datum gradients plus `extra`: Hessians).
fn optimum(est: &FullGradient, extra: Cost, x: Vec<f64>, iterations: u64, grad_norm: f64) -> Optimum {
    let cost = Cost::gradients(est.n_datum_gradients()) + extra;
    Optimum { theta: x, cost, iterations, grad_norm: Some(grad_norm) }
}

/// L-BFGS's search direction `dir = −H g`, with `H⁰ = (sᵀy / yᵀy) I` from the newest pair
/// (`1/‖g‖` without pairs); returns the directional derivative `gᵀ dir`.
fn lbfgs_direction(lbfgs: &mut Lbfgs, g: &[f64], gn: f64, dir: &mut [f64]) -> Result<f64> {
    let scale = match lbfgs.newest() {
        Some((s, y)) => dot(s, y) / dot(y, y),
        None => 1.0 / gn,
    };
    lbfgs.set_initial_scale(scale)?;
    lbfgs.apply_h(g, dir)?;
    dir.iter_mut().for_each(|q| *q = -*q);
    Ok(dot(g, dir))
}

/// Pushes the pair `s = x_new − x`, `y = g_new − g` when its curvature `sᵀy` is positive.
fn push_pair(
    lbfgs: &mut Lbfgs,
    (x, x_new): (&[f64], &[f64]),
    (g, g_new): (&[f64], &[f64]),
    (s, y): (&mut [f64], &mut [f64]),
) -> Result<()> {
    for (((si, yi), (a, b)), (ga, gb)) in
        s.iter_mut().zip(y.iter_mut()).zip(x_new.iter().zip(x)).zip(g_new.iter().zip(g))
    {
        *si = a - b;
        *yi = ga - gb;
    }
    if dot(s, y) > 1e-300 {
        lbfgs.push(s, y)?;
    }
    Ok(())
}

/// The seed of the data subset of Newton's Hessian ([`ModeSettings::hessian_rows`]).
const NEWTON_SUBSET_SEED: u64 = 0x6e65_7774;

/// The Newton decrement (posterior sds) accepted when Newton's iterations stop making progress
/// (the rounding floor of the gradient): see [`find_mode`].
const NEWTON_FLOOR_DECREMENT: f64 = 1e-3;

fn not_converged(iterations: u64, g: &[f64], settings: &ModeSettings) -> Error {
    let _ = settings;
    Error::NotConverged { what: crate::error::MODE_SEARCH, iterations, residual: dot(g, g).sqrt() }
}

/// The line search of [`find_mode`] on `φ'(t) = ∇U(x + t·dir)ᵀdir` from `t = 1`: doubling, then
/// bisection, until `|φ'(t)| ≤ 0.9 |φ'(0)|`. Writes the point and its gradient; `false` if no
/// such step was found in 60 trials.
#[allow(clippy::too_many_arguments)]
fn line_search<M: Model + ?Sized>(
    model: &M,
    est: &mut FullGradient,
    rng: &mut crate::numeric::rng::ChainRng,
    x: &[f64],
    dir: &[f64],
    dphi0: f64,
    xt: &mut [f64],
    gt: &mut [f64],
) -> Result<bool> {
    let (mut lo, mut hi, mut t) = (0.0f64, f64::INFINITY, 1.0f64);
    for _ in 0..60 {
        for ((xi, x0), di) in xt.iter_mut().zip(x).zip(dir) {
            *xi = x0 + t * di;
        }
        est.estimate(model, xt, rng, gt)?;
        let dphi = dot(gt, dir);
        if !dphi.is_finite() || !all_finite(gt) {
            hi = t;
        } else if dphi.abs() <= 0.9 * dphi0.abs() {
            return Ok(true);
        } else if dphi < 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        t = if hi.is_finite() { 0.5 * (lo + hi) } else { 2.0 * t };
    }
    Ok(false)
}
