//! Mode, curvature and whitening: [`precondition`] and the shared [`setup`] of [`tune`] and
//! [`tune_rr`](crate::tune_rr).

use super::*;

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
}

/// Above this dimension [`Precondition::Auto`] whitens with a diagonal instead of a dense `T`.
pub const DENSE_WHITENING_MAX_DIM: usize = 1_000;

/// A sampler set up for the posterior's geometry, before any step is chosen: what [`tune`] does
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

/// The first stages of [`tune`] without its step selection: the mode, the Hessian there, its
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

/// [`precondition`], plus the Hessian at the mode (dense up to [`DENSE_LAPLACE_MAX_DIM`]) and its
/// diagonal.
#[allow(clippy::type_complexity)]
pub(super) fn geometry<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<(Preconditioned<S>, Option<Array2<f64>>, Vec<f64>)> {
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
    let d = mode.len();
    let exact_hvp = Hessian::new(model, &mode).exact;
    let mut hess_cost = Cost::default();
    let (dense, diag) = hessian_at_mode(model, &mode, &mut hess_cost)?;
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
            let mut hess = Hessian::new(model, &mode);
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
    Ok(Setup { mode, curv, centre, scale, laplace, base, whitening, preconditioning, cost })
}

/// The [`Curvature`] of a dense symmetric matrix: exact eigenvalues up to
/// [`DENSE_WHITENING_MAX_DIM`], Lanczos on the matrix above it.
pub(super) fn spectrum_of(h: &Array2<f64>, settings: &TuneSettings, exact_hvp: bool, cost: Cost) -> Result<Curvature> {
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
pub(super) fn choose_whitening<S: Tunable>(
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
/// [`DENSE_LAPLACE_MAX_DIM`], and its diagonal (columns one at a time above it).
pub(super) fn hessian_at_mode<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    cost: &mut Cost,
) -> Result<(Option<Array2<f64>>, Vec<f64>)> {
    let d = mode.len();
    if d <= DENSE_LAPLACE_MAX_DIM {
        let h = dense_hessian(model, mode, cost)?;
        let diag = (0..d).map(|j| h[[j, j]]).collect();
        return Ok((Some(h), diag));
    }
    let mut diag = vec![0.0; d];
    hessian_columns(model, mode, cost, |j, col| diag[j] = col[j])?;
    Ok((None, diag))
}
