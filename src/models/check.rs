//! Model checks: is the model's gradient the gradient of its potential, with the right sign?
//!
//! The commonest model bug in SG-MCMC is a gradient of the wrong sign: writing `∇log p` (as
//! BlackJAX, NumPyro, nuts-rs and Stan ask for) where this crate asks for `∇U = −∇log p`. A
//! sampler then runs away from the mode and, without a check, returns `Ok` with absurd numbers.
//! [`check_model`] catches it before a run (the runner calls it unless
//! [`RunSettings::check_model`](crate::RunSettings::check_model) is `false`), and the runner's
//! runaway detector ([`RunSettings::runaway_factor`](crate::RunSettings::runaway_factor)) catches
//! what slips through at run time.

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::models::model::{Model, check_shape};
use crate::numeric::linalg::{dot, norm};
use crate::numeric::rng::{fill_standard_normal, stream};

/// Settings of [`check_model`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckSettings {
    /// How many data items the data part is checked on (spread evenly over the data set; at most
    /// N). Default 16.
    pub n_data: usize,
    /// Random directions tried besides the gradient's own. Default 3.
    pub n_directions: usize,
    /// The largest relative error between a directional derivative of the potential (central
    /// finite difference) and the gradient's, before it is a mismatch. Default 1e-3.
    pub rel_tol: f64,
    /// Seed of the random directions. Default 0.
    pub seed: u64,
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings { n_data: 16, n_directions: 3, rel_tol: 1e-3, seed: 0 }
    }
}

/// What [`check_model`] found (when it found no error).
///
/// Per directional derivative `a = ∇U·v` and its central finite difference `f` of the potential,
/// the check compares `|a − f|` with the finite difference's own noise `η` (its truncation error,
/// from the differences at h and 2h, and its rounding error), relative to `big = max(|a|, |f|,
/// ‖∇U‖/√d)`: the *relative difference* `|a − f|/big` (what a user would compute by hand; for a
/// correct model it is of the order of the finite difference's error) and the *excess*
/// `max(0, |a − f| − η)/big` that is tested against [`CheckSettings::rel_tol`] (0 for a correct
/// model whenever the difference is within the noise, as it almost always is).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCheck {
    /// Whether the model provides potentials, so that gradients were compared with finite
    /// differences of them (otherwise only the curvature test ran).
    pub used_potentials: bool,
    /// The prior gradient's largest relative difference from the finite differences, over the
    /// directions tried (`None` without potentials).
    pub prior_rel_difference: Option<f64>,
    /// The data gradient's largest relative difference on the checked items (`None` without
    /// potentials).
    pub data_rel_difference: Option<f64>,
    /// The prior gradient's largest excess of the difference over the finite difference's noise,
    /// relative (what `rel_tol` bounds; `None` without potentials).
    pub prior_excess: Option<f64>,
    /// The data gradient's largest excess over the noise, relative (`None` without potentials).
    pub data_excess: Option<f64>,
    /// The curvature `vᵀ ∇²U v` (by finite differences of gradients, full-data scale) along each
    /// direction tried: the gradient's own direction first.
    pub curvatures: Vec<f64>,
    /// The gradient and potential evaluations spent.
    pub cost: Cost,
}

/// Where `model`'s gradient at `theta` is not finite: the prior's first non-finite coordinate,
/// else the first of `items` (all the data if `None`) whose own `grad_data_sum` has one (items
/// scanned in blocks of 4 096, a failing block item by item), as [`Error::NonFiniteGradientAt`] at `iteration`.
/// `None` if every part is finite (the non-finite value came from summing them) or a model
/// method fails. For the error paths only: up to one pass over `items`.
pub(crate) fn locate_non_finite<M: Model + ?Sized>(
    model: &M,
    theta: &[f64],
    iteration: u64,
    items: Option<&[usize]>,
) -> Option<Error> {
    const BLOCK: usize = 4_096;
    let d = model.dim();
    let mut g = vec![0.0; d];
    let first_bad = |g: &[f64]| g.iter().position(|v| !v.is_finite());
    model.grad_prior(theta, &mut g).ok()?;
    if let Some(coordinate) = first_bad(&g) {
        return Some(Error::NonFiniteGradientAt { iteration, coordinate, datum: None });
    }
    let mut scan = |block: &[usize]| -> Option<Option<Error>> {
        model.grad_data_sum(theta, block, &mut g).ok()?;
        if first_bad(&g).is_none() {
            return Some(None);
        }
        for &i in block {
            model.grad_data_sum(theta, &[i], &mut g).ok()?;
            if let Some(coordinate) = first_bad(&g) {
                return Some(Some(Error::NonFiniteGradientAt { iteration, coordinate, datum: Some(i) }));
            }
        }
        Some(None)
    };
    match items {
        Some(items) => {
            for block in items.chunks(BLOCK) {
                if let Some(e) = scan(block)? {
                    return Some(e);
                }
            }
        }
        None => {
            let n = model.n_data();
            let mut block = Vec::with_capacity(n.min(BLOCK));
            for start in (0..n).step_by(BLOCK) {
                block.clear();
                block.extend(start..(start + BLOCK).min(n));
                if let Some(e) = scan(&block)? {
                    return Some(e);
                }
            }
        }
    }
    None
}

/// Checks that `model`'s gradients are gradients of its potential `U = −log p`, with the right
/// sign, at `theta`.
///
/// - **With potentials** ([`Model::potential_prior`], [`Model::potential_data_sum`]): along the
///   gradient's direction and `n_directions` random ones, the central difference
///   `(U(θ + hv) − U(θ − hv)) / 2h` of the prior potential, and of the data potential on
///   `n_data` items, is compared with `∇U·v`. Agreement with the opposite sign is
///   [`Error::GradientSign`]; any other disagreement beyond `rel_tol` is
///   [`Error::GradientMismatch`].
/// - **Without potentials**: a small step along −∇U must not climb away from a mode, i.e. the
///   potential must curve upwards somewhere: if the curvature `vᵀ∇²U v` (central differences of
///   the full-scale gradient `∇U₀ + (N/n) Σ ∇Uᵢ`) is negative along **every** direction tried,
///   θ sits at a maximum of U — which for a correct model means a minimum of the density, and
///   almost always means the gradient is `∇log p`: [`Error::GradientSign`]. (A correct model
///   started at a local maximum of its density's *negative* would be refused too: choose another
///   `theta` or skip the check.)
///
/// Cost: `2 (n_directions + 1)` potential and gradient evaluations on `n_data` items and the
/// prior, plus one at θ; returned in [`ModelCheck::cost`].
///
/// Errors: the two above; [`Error::DimensionMismatch`], [`Error::NonFiniteStart`] for a bad
/// `theta`; [`Error::NonFiniteGradient`] (iteration 0) for a non-finite gradient at or near θ;
/// [`Error::InvalidParameter`] for bad settings.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{check_model};
///
/// let model = LogisticRegression::synthetic(1_000, 3, 10.0, 1)?;
/// let report = check_model(&model, &[0.1, -0.2, 0.3], &sgmcmc::CheckSettings::default())?;
/// assert!(report.used_potentials && report.data_excess.unwrap() < 1e-6);
/// assert!(report.data_rel_difference.unwrap() < 1e-4); // the finite difference's own error
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn check_model<M: Model + ?Sized>(model: &M, theta: &[f64], settings: &CheckSettings) -> Result<ModelCheck> {
    check_inputs(model, theta, settings)?;
    let d = model.dim();
    let n = model.n_data();
    let b = settings.n_data.min(n);
    let idx: Vec<usize> = (0..b).map(|i| i * n / b).collect();
    let scale = n as f64 / b as f64;
    let mut cost = Cost::default();

    // Full-scale gradient estimate on the checked items.
    let mut gp = vec![0.0; d];
    let mut gd = vec![0.0; d];
    let eval = |x: &[f64], gp: &mut [f64], gd: &mut [f64], cost: &mut Cost| -> Result<()> {
        model.grad_prior(x, gp)?;
        model.grad_data_sum(x, &idx, gd)?;
        cost.datum_gradients += b as u64;
        if !all_finite(gp) || !all_finite(gd) {
            return Err(locate_non_finite(model, x, 0, Some(&idx)).unwrap_or(Error::NonFiniteGradient { iteration: 0 }));
        }
        Ok(())
    };
    eval(theta, &mut gp, &mut gd, &mut cost)?;
    let g: Vec<f64> = gp.iter().zip(&gd).map(|(p, q)| p + scale * q).collect();

    let dirs = directions(&g, settings);
    let shifted = |v: &[f64], s: f64| -> Vec<f64> { theta.iter().zip(v).map(|(t, v)| t + s * v).collect() };
    let has_potentials = has_potentials(model, theta, &idx)?;
    let (mut prior_err, mut data_err) = (0.0f64, 0.0f64);
    let (mut prior_diff, mut data_diff) = (0.0f64, 0.0f64);
    let sqrt_d = (d as f64).sqrt();
    let base_h = 1e-4 * norm(theta).max(1.0);
    let mut curvatures = Vec::with_capacity(dirs.len());
    let (mut gp2, mut gd2) = (vec![0.0; d], vec![0.0; d]);
    for v in &dirs {
        // The curvature along v of the checked potential (prior + checked items, unscaled) and of
        // the full-scale one, by central differences of gradients at step h.
        let mut curv_at = |h: f64, gp: &mut [f64], gd: &mut [f64], cost: &mut Cost| -> Result<(f64, f64)> {
            eval(&shifted(v, h), gp, gd, cost)?;
            eval(&shifted(v, -h), &mut gp2, &mut gd2, cost)?;
            let (mut sub, mut full) = (0.0, 0.0);
            for (j, vj) in v.iter().enumerate() {
                sub += vj * ((gp[j] - gp2[j]) + (gd[j] - gd2[j])) / (2.0 * h);
                full += vj * ((gp[j] - gp2[j]) + scale * (gd[j] - gd2[j])) / (2.0 * h);
            }
            Ok((sub, full))
        };
        // The step: a thousandth of the checked potential's own length scale along v,
        // 1/√|curvature| (so a coefficient that multiplies values near 2 000, or a posterior
        // a million times narrower than ‖θ‖, gets a step to match), refined once; the fixed
        // 1e-4·max(1, ‖θ‖) where the potential is flat.
        let (mut gpa, mut gda) = (vec![0.0; d], vec![0.0; d]);
        let (sub0, _) = curv_at(1e-3 * base_h, &mut gpa, &mut gda, &mut cost)?;
        let step_of =
            |c: f64| if c.abs() > 0.0 && c.is_finite() { (1e-3 / c.abs().sqrt()).min(base_h) } else { base_h };
        let h = step_of(sub0);
        let (sub1, full) = curv_at(h, &mut gpa, &mut gda, &mut cost)?;
        let h = step_of(sub1);
        curvatures.push(full);
        if !has_potentials {
            continue;
        }
        // Central differences of the potentials at h and 2h: their difference estimates the
        // truncation error, and |U|·ε/h the rounding error; both widen the tolerance.
        let fd = |f: &dyn Fn(&[f64]) -> Option<f64>, h: f64| -> Option<(f64, f64)> {
            let (up, um) = (f(&shifted(v, h))?, f(&shifted(v, -h))?);
            Some(((up - um) / (2.0 * h), f64::EPSILON * (up.abs() + um.abs()) / h))
        };
        let prior = |x: &[f64]| model.potential_prior(x).ok();
        let data = |x: &[f64]| model.potential_data_sum(x, &idx).ok();
        cost.datum_potentials += 4 * b as u64;
        let (Some((fp, rp)), Some((fp2, _))) = (fd(&prior, h), fd(&prior, 2.0 * h)) else { continue };
        let (Some((fdd, rd)), Some((fdd2, _))) = (fd(&data, h), fd(&data, 2.0 * h)) else { continue };
        let (ap, ad) = (dot(&gp, v), dot(&gd, v));
        let noise_p = 10.0 * rp + 2.0 * (fp - fp2).abs();
        let noise_d = 10.0 * rd + 2.0 * (fdd - fdd2).abs();
        let (pe, pd) = compare("grad_prior", ap, fp, settings.rel_tol, norm(&gp) / sqrt_d, noise_p)?;
        let (de, dd) = compare("grad_data_sum", ad, fdd, settings.rel_tol, norm(&gd) / sqrt_d, noise_d)?;
        prior_err = prior_err.max(pe);
        data_err = data_err.max(de);
        prior_diff = prior_diff.max(pd);
        data_diff = data_diff.max(dd);
    }
    if !has_potentials && curvatures.iter().all(|&c| c < 0.0) {
        return Err(downhill_everywhere(&curvatures));
    }
    Ok(ModelCheck {
        used_potentials: has_potentials,
        prior_rel_difference: has_potentials.then_some(prior_diff),
        data_rel_difference: has_potentials.then_some(data_diff),
        prior_excess: has_potentials.then_some(prior_err),
        data_excess: has_potentials.then_some(data_err),
        curvatures,
        cost,
    })
}

/// Whether the model gives potentials at θ: potentials it does not provide mean the sign-only
/// check; any other failure is the model's error.
fn has_potentials<M: Model + ?Sized>(model: &M, theta: &[f64], idx: &[usize]) -> Result<bool> {
    match (model.potential_prior(theta), model.potential_data_sum(theta, idx)) {
        (Ok(_), Ok(_)) => Ok(true),
        (Err(e), _) | (_, Err(e)) if !e.is_unsupported() => Err(e),
        _ => Ok(false),
    }
}

/// The checks of [`check_model`]'s inputs: the model's shape, θ's length and finiteness, the
/// settings.
fn check_inputs<M: Model + ?Sized>(model: &M, theta: &[f64], settings: &CheckSettings) -> Result<()> {
    check_shape(model)?;
    check_len("theta", model.dim(), theta.len())?;
    if !all_finite(theta) {
        return Err(Error::NonFiniteStart { what: "theta" });
    }
    if settings.n_data == 0 {
        return Err(Error::invalid("n_data", settings.n_data, "must be >= 1"));
    }
    if !(settings.rel_tol > 0.0 && settings.rel_tol < 1.0) {
        return Err(Error::invalid("rel_tol", settings.rel_tol, "must be in (0, 1)"));
    }
    Ok(())
}

/// The directions [`check_model`] differentiates along: the gradient's own (if non-zero), then
/// `n_directions` random ones (at least one), all of unit length.
fn directions(g: &[f64], settings: &CheckSettings) -> Vec<Vec<f64>> {
    let mut dirs: Vec<Vec<f64>> = Vec::new();
    let gnorm = norm(g);
    if gnorm > 0.0 {
        dirs.push(g.iter().map(|x| x / gnorm).collect());
    }
    let mut rng = stream(settings.seed, &[0x636865636b]);
    for _ in 0..settings.n_directions.max(1) {
        let mut v = vec![0.0; g.len()];
        fill_standard_normal(&mut rng, &mut v);
        let nv = norm(&v);
        dirs.push(v.iter().map(|x| x / nv).collect());
    }
    dirs
}

/// The error of a model without potentials whose potential curves downwards along every
/// direction tried: its gradient has the wrong sign.
fn downhill_everywhere(curvatures: &[f64]) -> Error {
    Error::GradientSign {
        part: "grad_prior + grad_data_sum",
        evidence: format!(
            "the potential curves downwards along every direction tried (curvatures {}): \
             a step along −∇U climbs away from the mode",
            curvatures.iter().map(|c| format!("{c:.3e}")).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Relative error of an analytic directional derivative `a` against a finite difference `fd`;
/// a sign error or a mismatch is an error. `typical` is the size a directional derivative of
/// this gradient has along a random direction (‖g‖/√d): errors are relative to at least it, so
/// a direction nearly orthogonal to the gradient does not blow rounding up. `noise` is the
/// finite difference's own estimated error (rounding and truncation), which is allowed on top
/// of `tol`.
fn compare(part: &'static str, a: f64, fd: f64, tol: f64, typical: f64, noise: f64) -> Result<(f64, f64)> {
    let big = a.abs().max(fd.abs()).max(typical);
    // Both zero to rounding (e.g. a flat prior): nothing to compare.
    if big <= 1e-12 {
        return Ok((0.0, 0.0));
    }
    let rel = ((a - fd).abs() - noise).max(0.0) / big;
    if rel <= tol {
        return Ok((rel, (a - fd).abs() / big));
    }
    if (((a + fd).abs() - noise).max(0.0)) / big <= tol {
        return Err(Error::GradientSign {
            part,
            evidence: format!(
                "its directional derivative is {a:.6e} while the potential's finite difference is {fd:.6e}: \
                 it returns ∇log p, not ∇U = −∇log p"
            ),
        });
    }
    Err(Error::GradientMismatch { part, analytic: a, finite_difference: fd, rel_error: rel })
}
