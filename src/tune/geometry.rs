//! Mode, curvature and whitening: [`precondition`] and the shared [`setup`] of [`tune`] and
//! [`tune_rr`](crate::tune_rr).

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::gradient::optim::{ModeSettings, find_mode, find_mode_with_hessian};
use crate::models::hessian::{Hessian, dense_hessian_on, hessian_columns_on, hessian_subset_size, random_subset};
use crate::models::model::{Model, check_shape};
use crate::models::subset::Subset;
use crate::samplers::Whitening;
use crate::tune::curvature::{Curvature, check_lambda_max, curvature, curvature_of_dense, lanczos};
use crate::tune::grid::{DENSE_LAPLACE_MAX_DIM, Laplace, ksd_scaling};
use crate::tune::settings::{Precondition, TuneSettings, Tuned};
use crate::tune::tunable::Tunable;
use ndarray::Array2;
use std::sync::Arc;

/// What [`tune`] and [`tune_rr`](crate::tune_rr) derive before their pilots.
pub(crate) struct Setup<S> {
    pub(crate) mode: Vec<f64>,
    pub(crate) curv: Curvature,
    pub(crate) centre: f64,
    pub(crate) scale: Vec<f64>,
    pub(crate) laplace: Laplace,
    /// The sampler the pilots run: the user's, whitened when chosen.
    pub(crate) base: S,
    pub(crate) whitening: Option<Arc<Whitening>>,
    pub(crate) preconditioning: String,
    pub(crate) cost: Cost,
    /// The Hessian at the mode, dense up to [`DENSE_LAPLACE_MAX_DIM`] (for the dispersed starts).
    pub(crate) hessian: Option<Arc<Array2<f64>>>,
}

/// Above this dimension [`Precondition::Auto`] whitens with a diagonal instead of a dense `T`.
pub const DENSE_WHITENING_MAX_DIM: usize = 1_000;

/// A sampler set up for the posterior's geometry, before any step is chosen: what [`tune`](crate::tune::tune) does
/// before its pilots (mode, Hessian, curvature, whitening), for methods that choose their step
/// another way (e.g. [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Preconditioned<S> {
    /// The sampler, running in [`whitening`](Self::whitening)'s coordinates when there is one
    /// (its step unchanged).
    pub sampler: S,
    /// The mode (or the starting point, if [`TuneSettings::find_mode`] is off).
    pub mode: Vec<f64>,
    /// The curvature of `∇²U` at the mode.
    pub curvature: Curvature,
    /// The curvature the sampler sees: that of `Tᵀ ∇²U T` with a whitening, else
    /// [`curvature`](Self::curvature).
    pub whitened_curvature: Curvature,
    /// The whitening chosen by [`TuneSettings::precondition`], if any.
    pub whitening: Option<Arc<Whitening>>,
    /// Which preconditioning was chosen and why, its cost per step, and the condition number
    /// before and after, in words.
    pub preconditioning: String,
    /// Everything spent: mode, Hessian, curvature.
    pub cost: Cost,
}

/// The first stages of [`tune`](crate::tune::tune) without its step selection: the mode, the Hessian there, its
/// curvature and the whitening [`TuneSettings::precondition`] chooses (see the
/// [module docs](crate::tune)), with `sampler` returned running in the whitened coordinates. Only
/// `find_mode`, `mode`, `curvature` and `precondition` of `settings` matter.
///
/// Errors: invalid settings or `theta0`; those of [`find_mode`] and [`curvature`].
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{tune::TuneSettings};
/// use sgmcmc::tune::precondition;
///
/// let model = LogisticRegression::synthetic(2_000, 3, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50))?;
/// let p = precondition(&model, &sgld, &[0.0; 3], &TuneSettings::default())?;
/// // Dense whitening by the Hessian at the mode: the sampler sees condition number 1.
/// let c = &p.whitened_curvature;
/// assert!((c.lambda_max / c.lambda_min.unwrap() - 1.0).abs() < 1e-8);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn precondition<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<Preconditioned<S>> {
    Ok(geometry(model, sampler, theta0, settings)?.0)
}

/// The checks every tuning entry makes before it spends anything: the settings, the model's
/// shape, and a start of the model's dimension with finite values.
fn check_inputs<M: Model + ?Sized>(model: &M, theta0: &[f64], settings: &TuneSettings) -> Result<()> {
    settings.validate()?;
    check_shape(model)?;
    check_len("theta0", model.dim(), theta0.len())?;
    if !all_finite(theta0) {
        return Err(Error::NonFiniteStart { what: "theta0" });
    }
    Ok(())
}

/// [`precondition`], plus the Hessian at the mode (dense up to [`DENSE_LAPLACE_MAX_DIM`]) and its
/// diagonal.
#[allow(clippy::type_complexity)]
fn geometry<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<(Preconditioned<S>, Option<Array2<f64>>, Vec<f64>)> {
    check_inputs(model, theta0, settings)?;
    let mut cost = Cost::default();
    let d = model.dim();
    let (mode, newton_hessian) = if settings.find_mode {
        let mode_settings = ModeSettings { hessian_rows: settings.hessian_rows, ..settings.mode };
        let (start, warm) = warm_start(model, theta0, &mode_settings, settings.seed, &mut cost);
        // From a warm start straight to Newton with the (subsampled) Hessian.
        let (opt, h) = find_mode_with_hessian(model, &start, &mode_settings, warm)?;
        cost += opt.cost;
        (opt.theta.to_vec(), h)
    } else {
        (theta0.to_vec(), None)
    };
    let exact_hvp = Hessian::new(model, &mode).exact;
    let mut hess_cost = Cost::default();
    let rows = hessian_rows(model, settings);
    // The Hessian the mode search's last Newton iteration computed at the mode, where it did.
    let (dense, diag) = match newton_hessian.filter(|_| d <= DENSE_LAPLACE_MAX_DIM) {
        Some(h) => {
            let diag = (0..d).map(|j| h[[j, j]]).collect();
            (Some(h), diag)
        }
        None => hessian_at_mode(model, &mode, rows.as_deref(), &mut hess_cost)?,
    };
    cost += hess_cost;
    let curv = match &dense {
        Some(h) => spectrum_of(h, settings, exact_hvp, hess_cost)?,
        None => {
            let c = curvature(model, &mode, &settings.curvature)?;
            cost += c.cost;
            c
        }
    };
    let (mut base, whitening, mut preconditioning) = choose_whitening(sampler, &mode, dense.as_ref(), &diag, settings)?;
    // An estimator for the tuner to choose, chosen in the whitened coordinates (a diagonal
    // scaling of the Hessian's where the sampler runs without a whitening).
    let measure = match &whitening {
        Some(w) => Some(w.clone()),
        None => {
            Whitening::diagonal(&mode, &diag.iter().map(|h| 1.0 / h.max(f64::MIN_POSITIVE).sqrt()).collect::<Vec<_>>())
                .ok()
                .map(Arc::new)
        }
    };
    if let Some(w) = &measure
        && let Some((chosen, why)) = base.estimator_chosen(model, &mode, w, settings.seed, &mut cost)?
    {
        base = chosen;
        preconditioning.push_str("; ");
        preconditioning.push_str(&why);
    }
    if let Some((fitted, why)) = base.fitted_to_scale(model)? {
        base = fitted;
        preconditioning.push_str("; ");
        preconditioning.push_str(&why);
    }
    // The curvature the (whitened) sampler sees: that of Tᵀ ∇²U T.
    let seen = match (&whitening, &dense) {
        (None, _) => curv.clone(),
        (Some(w), Some(h)) => spectrum_of(&w.congruence(h), settings, exact_hvp, Cost::default())?,
        (Some(w), None) => {
            let mut hess = Hessian::subsampled(model, &mode, rows.as_deref());
            let (mut a, mut b) = (vec![0.0; d], vec![0.0; d]);
            let (lmin, lmax, it) = lanczos(d, &settings.curvature, 4, |v, out| {
                w.to_theta(v, &mut a);
                a.iter_mut().zip(w.centre()).for_each(|(a, c)| *a -= c);
                hess.apply(&a, &mut b)?;
                w.gradient_to_phi(&b, out);
                Ok(())
            })?;
            check_lambda_max(lmax)?;
            cost += hess.cost;
            Curvature { lambda_max: lmax, lambda_min: Some(lmin), iterations: it, exact_hvp, cost: hess.cost }
        }
    };
    if whitening.is_some() {
        preconditioning.push_str(&format!(
            "; whitened curvature [{:.3e}, {:.3e}] (condition {:.2e}, from {:.2e})",
            seen.lambda_min.unwrap_or(f64::NAN),
            seen.lambda_max,
            seen.lambda_max / seen.lambda_min.unwrap_or(f64::NAN),
            curv.lambda_max / curv.lambda_min.unwrap_or(f64::NAN),
        ));
    }
    let p = Preconditioned {
        sampler: base,
        mode,
        curvature: curv,
        whitened_curvature: seen,
        whitening,
        preconditioning,
        cost,
    };
    Ok((p, dense, diag))
}

/// [`geometry`], then the sampler's centre step (in the whitened coordinates) and the KSD's
/// scaling, with their cost.
pub(crate) fn setup<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<Setup<S>> {
    let (p, dense, diag) = geometry(model, sampler, theta0, settings)?;
    let Preconditioned {
        sampler: base,
        mode,
        curvature: curv,
        whitened_curvature: seen,
        whitening,
        preconditioning,
        mut cost,
    } = p;
    let centre = base.centre_step(model, &mode, &seen, &mut cost)?;
    let (scale, laplace) = ksd_scaling(dense.as_ref(), &diag);
    let hessian = dense.map(Arc::new);
    Ok(Setup { mode, curv, centre, scale, laplace, base, whitening, preconditioning, cost, hessian })
}

/// The [`Curvature`] of a dense symmetric matrix: exact eigenvalues up to
/// [`DENSE_WHITENING_MAX_DIM`], Lanczos on the matrix above it.
fn spectrum_of(h: &Array2<f64>, settings: &TuneSettings, exact_hvp: bool, cost: Cost) -> Result<Curvature> {
    if h.nrows() <= DENSE_WHITENING_MAX_DIM {
        return curvature_of_dense(h, true, exact_hvp, cost);
    }
    let (lmin, lmax, it) = lanczos(h.nrows(), &settings.curvature, 5, |v, out| {
        out.iter_mut().zip(h.outer_iter()).for_each(|(o, row)| *o = row.iter().zip(v).map(|(a, b)| a * b).sum());
        Ok(())
    })?;
    check_lambda_max(lmax)?;
    Ok(Curvature { lambda_max: lmax, lambda_min: Some(lmin), iterations: it, exact_hvp, cost })
}

/// The whitening [`TuneSettings::precondition`] asks for, the sampler running in it, and the
/// rule applied in words.
fn choose_whitening<S: Tunable>(
    sampler: &S,
    mode: &[f64],
    dense: Option<&Array2<f64>>,
    diag: &[f64],
    settings: &TuneSettings,
) -> Result<(S, Option<Arc<Whitening>>, String)> {
    let d = mode.len();
    if let Some(w) = sampler.current_whitening() {
        return Ok((sampler.clone(), Some(w.clone()), "the sampler's own whitening (kept)".into()));
    }
    if settings.precondition == Precondition::None {
        return Ok((sampler.clone(), None, "none (TuneSettings::precondition = None)".into()));
    }
    if sampler.whitened(None).is_none() {
        return Ok((sampler.clone(), None, "none (this sampler has its own preconditioner)".into()));
    }
    let diagonal = || -> Option<Whitening> {
        let scales: Vec<f64> = diag.iter().map(|h| 1.0 / h.sqrt()).collect();
        Whitening::diagonal(mode, &scales).ok()
    };
    let dense_w = || dense.and_then(|h| Whitening::from_hessian(mode, h).ok());
    let (w, note) = match settings.precondition {
        Precondition::Dense => match dense_w() {
            Some(w) => (Some(w), format!("dense (asked for): T Tᵀ = ∇²U(θ̂)⁻¹, {} multiply-adds per step", d * d)),
            None => {
                return Err(Error::invalid(
                    "precondition",
                    "Dense",
                    "the Hessian at the mode is not positive definite (or d is above DENSE_LAPLACE_MAX_DIM): use Auto or Diagonal",
                ));
            }
        },
        Precondition::Diagonal => match diagonal() {
            Some(w) => (Some(w), format!("diagonal (asked for): 1/√∇²U(θ̂)ⱼⱼ, {} multiply-adds per step", 2 * d)),
            None => {
                return Err(Error::invalid(
                    "precondition",
                    "Diagonal",
                    "a diagonal entry of the Hessian at the mode is not positive: use Auto or None",
                ));
            }
        },
        _ => {
            if let Some(w) = (d <= DENSE_WHITENING_MAX_DIM).then(dense_w).flatten() {
                (
                    Some(w),
                    format!(
                        "dense (auto: d = {d} ≤ {DENSE_WHITENING_MAX_DIM} and ∇²U(θ̂) positive definite): T Tᵀ = ∇²U(θ̂)⁻¹, \
                         {} multiply-adds per step",
                        d * d
                    ),
                )
            } else if let Some(w) = diagonal() {
                (
                    Some(w),
                    format!(
                        "diagonal (auto: {}): 1/√∇²U(θ̂)ⱼⱼ, {} multiply-adds per step",
                        if d > DENSE_WHITENING_MAX_DIM {
                            format!("d = {d} > {DENSE_WHITENING_MAX_DIM}")
                        } else {
                            "∇²U(θ̂) not positive definite".to_string()
                        },
                        2 * d
                    ),
                )
            } else {
                (None, "none (auto: a diagonal entry of ∇²U(θ̂) is not positive)".to_string())
            }
        }
    };
    let w = w.map(Arc::new);
    let base = sampler.whitened(w.clone()).expect("checked above");
    Ok((base, w, note))
}

/// The Hessian at the mode: dense (d Hessian-vector products) up to
/// [`DENSE_LAPLACE_MAX_DIM`], and its diagonal (columns one at a time above it), with the data
/// sum estimated from the data `rows` (all if `None`; see [`TuneSettings::hessian_rows`]).
fn hessian_at_mode<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    rows: Option<&[usize]>,
    cost: &mut Cost,
) -> Result<(Option<Array2<f64>>, Vec<f64>)> {
    let d = mode.len();
    if d <= DENSE_LAPLACE_MAX_DIM {
        let h = dense_hessian_on(model, mode, rows, cost)?;
        let diag = (0..d).map(|j| h[[j, j]]).collect();
        return Ok((Some(h), diag));
    }
    let mut diag = vec![0.0; d];
    hessian_columns_on(model, mode, rows, cost, |j, col| diag[j] = col[j])?;
    Ok((None, diag))
}

/// The mode search's warm start on a large data set: the mode of the posterior on a random
/// `1/`[`WARM_START_FRACTION`] of the data (scaled to the whole), found at that fraction of the
/// cost, within a few posterior sds of the full mode (about `√(fraction⁻¹)`), where Newton's
/// method with the (subsampled) Hessian finishes in a few full gradients; `(theta0, false)` below
/// [`WARM_START_MIN_N`] data, above Newton's dimension, or if the subset's search fails.
fn warm_start<M: Model + ?Sized>(
    model: &M,
    theta0: &[f64],
    mode: &ModeSettings,
    seed: u64,
    cost: &mut Cost,
) -> (Vec<f64>, bool) {
    let n = model.n_data();
    if n < WARM_START_MIN_N || model.dim() > mode.newton_max_dim || mode.newton_max_iter == 0 {
        return (theta0.to_vec(), false);
    }
    let rows = random_subset(n, n / WARM_START_FRACTION, seed ^ WARM_SEED);
    // L-BFGS alone to a tenth of a posterior sd: Newton on the full data does the rest.
    let rough = ModeSettings { decrement_tol: WARM_START_DECREMENT, newton_max_iter: 0, ..*mode };
    match find_mode(&Subset::new(model, rows), theta0, &rough) {
        Ok(opt) => {
            *cost += opt.cost;
            (opt.theta, true)
        }
        Err(_) => (theta0.to_vec(), false),
    }
}

/// Data sets at least this large get the mode search's warm start on a subset.
pub const WARM_START_MIN_N: usize = 50_000;

/// The warm start's subset is this fraction's inverse of the data.
pub const WARM_START_FRACTION: usize = 8;

/// The Newton decrement (posterior sds of the subset's posterior) the warm start's L-BFGS stops at.
const WARM_START_DECREMENT: f64 = 0.1;

/// Mixed into [`TuneSettings::seed`] for the warm start's subset.
const WARM_SEED: u64 = 0x7761_726d;

/// The data the tuning's Hessians are estimated from ([`TuneSettings::hessian_rows`]), `None` for
/// all of them.
pub(crate) fn hessian_rows<M: Model + ?Sized>(model: &M, settings: &TuneSettings) -> Option<Vec<usize>> {
    let n = model.n_data();
    hessian_subset_size(settings.hessian_rows, model.dim(), n)
        .map(|m| random_subset(n, m, settings.seed ^ HESSIAN_SEED))
}

/// Mixed into [`TuneSettings::seed`] for the data subset of the tuning's Hessians.
const HESSIAN_SEED: u64 = 0x4865_7373_6961_6e73;

/// MALA's record in the shape of [`Tuned`] (MALA adapts its own step and metric; nothing is
/// piloted): the mode from `theta0` (with `settings.mode` and its Hessian subset), the Hessian
/// there (for the dispersed starts) and its curvature, the sampler as given.
///
/// Errors: invalid settings or `theta0`; those of [`find_mode`] and the Hessian.
pub(crate) fn mala_record<M: Model + ?Sized>(
    model: &M,
    mala: &crate::samplers::Mala,
    theta0: &[f64],
    settings: &TuneSettings,
    started: std::time::Instant,
) -> Result<Tuned<crate::samplers::Mala>> {
    check_inputs(model, theta0, settings)?;
    let mut cost = Cost::default();
    let mode = if settings.find_mode {
        let opt = find_mode(model, theta0, &ModeSettings { hessian_rows: settings.hessian_rows, ..settings.mode })?;
        cost += opt.cost;
        opt.theta
    } else {
        theta0.to_vec()
    };
    let rows = hessian_rows(model, settings);
    let mut hess_cost = Cost::default();
    let h = dense_hessian_on(model, &mode, rows.as_deref(), &mut hess_cost)?;
    cost += hess_cost;
    let curvature = curvature_of_dense(&h, true, Hessian::new(model, &mode).exact, hess_cost)?;
    Ok(Tuned {
        sampler: mala.clone(),
        step_size: mala.settings().step_size,
        centre: f64::NAN,
        curvature,
        mode,
        trials: Vec::new(),
        cost,
        reason: "MALA, Metropolis-adjusted and exact: its step and metric adapt in the burn-in \
                 (MalaSettings::adapt_steps, target_accept, metric); nothing is piloted and there is no step bias"
            .to_string(),
        whitening: None,
        preconditioning: "MALA's own metric (MalaSettings::metric), adapted in the burn-in".to_string(),
        wall_time: started.elapsed(),
        predicted_ess: None,
        predicted_rhat: None,
        predicted_error: None,
        planned_run: settings.planned_run,
        hessian: Some(Arc::new(h)),
    })
}
