//! From pilots to a step: the KSD fit, the per-coordinate error model ([`error_model_step`]) and
//! the predicted split-R̂ ([`predicted_max_rhat`]).

use crate::tune::settings::CONVERGENCE_MARGIN;
use crate::tune::settings::{PilotErrors, PlannedRun, Trial};
use ndarray::Array2;

/// The step of the KSD fit ([`discrepancy_fit_minimiser_scaled`]), or without a convex fit the
/// smallest-KSD step `h_ksd` scaled by `r^(1/3)` for runs longer than the pilots; with the reason.
pub(super) fn ksd_fit_step(
    scored: &[(f64, f64)],
    ses: &[f64],
    h_ksd: f64,
    ratio: f64,
    planned: &PlannedRun,
) -> (f64, String) {
    match discrepancy_fit_minimiser_scaled(scored, Some(ses), h_ksd, 2, ratio) {
        Some((h, clamped)) => (
            h,
            format!(
                "the minimiser of D²(h) ≈ r·a/h + b·h² + c fitted to all candidates (weighted by their KSD standard errors), \
                 with the pilots' Monte Carlo term scaled by \
                 r = {ratio:.3e} to the planned run of {} x {} kept draws{}",
                planned.iterations,
                planned.chains,
                if clamped { " (clamped to the grid's range)" } else { "" }
            ),
        ),
        // No convex fit (typically: every step above the smallest KSD failed, so the bias was
        // never seen). The smallest-KSD candidate balances the pilots' Monte Carlo error and
        // bias at best; a longer run needs the step that balances its smaller Monte Carlo error,
        // r^(1/3) times it under the same model. Never scaled up: above it steps failed or
        // scored worse.
        None if ratio < 1.0 => (
            h_ksd * ratio.cbrt(),
            format!(
                "the candidate with the smallest KSD scaled by r^(1/3) = {:.3} (r = {ratio:.3e}: the pilots' over the planned run's \
                 {} x {} kept draws), as the fit would; no convex fit D²(h) ≈ r·a/h + b·h² + c",
                ratio.cbrt(),
                planned.iterations,
                planned.chains,
            ),
        ),
        None => (
            h_ksd,
            "the candidate with the smallest KSD (no convex fit; the planned run is not longer than the pilots, and a \
             larger step is not tried beyond the grid)"
                .to_string(),
        ),
    }
}

/// The relative floor of the standard deviation of a KSD² in the weighted fit: a standard error
/// from four pilot chains is itself uncertain, so no candidate is trusted to better than 10 %.
const SE_FLOOR: f64 = 0.1;

/// The minimiser of the model `D²(h) ≈ a/h + b·h² + c` fitted to the candidates' discrepancies
/// `(h, D)` by least squares on relative errors (weights `1/D²`, so the divergent end does not
/// dominate), clamped to the candidates' range; `None` with fewer than four candidates or when
/// the fit is not convex (`a ≤ 0` or `b ≤ 0`). Steps are measured in units of `h_ref`.
///
/// The model: a pilot of fixed length has a Monte Carlo error whose square falls like `1/h` (its
/// autocorrelation time grows like `1/h`), a squared first-order discretisation and
/// minibatch bias that grows like `h²`, and a floor `c` from the finite number of scored draws.
/// Using every candidate smooths the pilots' noise, which on flat stretches of the curve
/// otherwise decides the winner.
#[cfg(test)]
pub(super) fn discrepancy_fit_minimiser(points: &[(f64, f64)], h_ref: f64) -> Option<f64> {
    discrepancy_fit_minimiser_scaled(points, None, h_ref, 2, 1.0).map(|(h, _)| h)
}

/// The fit of [`discrepancy_fit_minimiser`] with the bias term `b·h^p` (`p = 4` for an
/// extrapolation that removes the first-order bias) and the Monte Carlo term scaled by `ratio`
/// (the pilots' draws over a planned run's): minimiser `(ratio·a/(p b))^{1/(p+1)}`, clamped to
/// `[smallest/8, largest]` of the candidates (with whether it was clamped). A run `1/ratio`
/// times as long as the pilots has `1/ratio` times their squared Monte Carlo error at the same
/// step, and the same bias.
///
/// With `ses` (each candidate's KSD standard error, from its pilot chains' spread), the least
/// squares are weighted by the standard deviation of D², `2·D·se`, floored at [`SE_FLOOR`]·D²:
/// a pilot whose chains disagree counts less. Small steps' pilots, short for their mixing time,
/// are the noisy ones (relative standard errors up to 0.8 against 0.03–0.1 for the steps near
/// the bias end), and a lucky low KSD there pulled the fitted minimum down.
pub(crate) fn discrepancy_fit_minimiser_scaled(
    points: &[(f64, f64)],
    ses: Option<&[f64]>,
    h_ref: f64,
    p: i32,
    ratio: f64,
) -> Option<(f64, bool)> {
    if points.len() < 4 {
        return None;
    }
    let mut ata = Array2::<f64>::zeros((3, 3));
    let mut atb = ndarray::Array1::<f64>::zeros(3);
    for (k, &(h, d)) in points.iter().enumerate() {
        let x = h / h_ref;
        let y = d * d;
        if !(y > 0.0 && y.is_finite()) {
            continue;
        }
        // The standard deviation of D²: 2·D·se from the pilot chains' spread, floored at 10 % of
        // D² (a spread over four chains is itself uncertain); without standard errors, D² (a fit
        // on relative errors).
        let sigma = match ses.and_then(|s| s.get(k)) {
            Some(&se) if se.is_finite() => (2.0 * d * se).max(SE_FLOOR * y),
            _ => y,
        };
        let row = [1.0 / x / sigma, x.powi(p) / sigma, 1.0 / sigma];
        for i in 0..3 {
            atb[i] += row[i] * y / sigma;
            for j in 0..3 {
                ata[[i, j]] += row[i] * row[j];
            }
        }
    }
    let coef = crate::numeric::linalg::solve("discrepancy fit", &ata, &atb).ok()?;
    let (a, b) = (coef[0], coef[1]);
    if !(a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite()) {
        return None;
    }
    let lo = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.0).fold(0.0, f64::max);
    let lo = if ratio < 1.0 { lo / 8.0 } else { lo };
    let h = h_ref * (ratio * a / (p as f64 * b)).powf(1.0 / (p as f64 + 1.0));
    let c = h.clamp(lo, hi);
    Some((c, c != h))
}

/// `E[max of k squared standard normals]` by quadrature of `∫ (1 − F(x)^k) dx`.
pub(super) fn expected_max_chi2(k: usize) -> f64 {
    // erfc by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
    let erfc = |x: f64| {
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let y =
            t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        y * (-x * x).exp()
    };
    let (n, top) = (20_000, 80.0);
    let dx = top / n as f64;
    (0..n)
        .map(|i| {
            let x = (i as f64 + 0.5) * dx;
            1.0 - (1.0 - erfc((x / 2.0).sqrt())).powi(k as i32)
        })
        .sum::<f64>()
        * dx
}

/// The slope `b` of the weighted least-squares fit `e(h) = b·h^q + c·h^(q+1)` to points
/// `(h, e, variance of e)`, and its variance: the first-order bias coefficient of a pilot error
/// series, with the next order free so that the growth near the stability limit does not inflate
/// it. One point: `b = e/h^q`. `None` without points or with a singular fit.
fn first_order_slope(points: &[(f64, f64, f64)], q: f64) -> Option<(f64, f64)> {
    match points {
        [] => None,
        [(h, e, v)] => Some((e / h.powf(q), v / h.powf(2.0 * q))),
        _ => {
            let (mut a, mut b, mut c, mut r1, mut r2) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for (h, e, v) in points {
                let (x1, x2, w) = (h.powf(q), h.powf(q + 1.0), 1.0 / v);
                a += w * x1 * x1;
                b += w * x1 * x2;
                c += w * x2 * x2;
                r1 += w * x1 * e;
                r2 += w * x2 * e;
            }
            let det = a * c - b * b;
            (det > 1e-12 * a * c).then(|| ((c * r1 - b * r2) / det, c / det))
        }
    }
}

/// `E[max of k independent χ²_m/m]`, by quadrature of `∫ (1 − F(x)^k) dx` with the χ²
/// distribution function from the regularised lower incomplete gamma function.
fn expected_max_scaled_chi2(k: usize, m: usize) -> f64 {
    let a = m as f64 / 2.0;
    // ln Γ(a) for a half-integer or integer a ≥ 1/2: down to Γ(1/2) = √π or Γ(1) = 1.
    let ln_gamma_a = {
        let (mut x, mut acc) = (a, 0.0);
        while x > 1.0 {
            x -= 1.0;
            acc += x.ln();
        }
        if (x - 0.5).abs() < 1e-12 { acc + 0.5 * std::f64::consts::PI.ln() } else { acc }
    };
    // P(a, y): the series below a + 1, the continued fraction (modified Lentz) above.
    let p = |y: f64| -> f64 {
        if y <= 0.0 {
            return 0.0;
        }
        let front = (a * y.ln() - y - ln_gamma_a).exp();
        if y < a + 1.0 {
            let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
            for _ in 0..1_000 {
                ap += 1.0;
                term *= y / ap;
                sum += term;
                if term < sum * 1e-15 {
                    break;
                }
            }
            sum * front
        } else {
            let tiny = 1e-300;
            let mut b = y + 1.0 - a;
            let mut c = 1.0 / tiny;
            let mut dd = 1.0 / b;
            let mut h = dd;
            for i in 1..1_000 {
                let an = -(i as f64) * (i as f64 - a);
                b += 2.0;
                dd = an * dd + b;
                dd = if dd.abs() < tiny { tiny } else { dd };
                c = b + an / c;
                c = if c.abs() < tiny { tiny } else { c };
                dd = 1.0 / dd;
                let del = dd * c;
                h *= del;
                if (del - 1.0).abs() < 1e-15 {
                    break;
                }
            }
            1.0 - front * h
        }
    };
    let (n, top) = (20_000, 1.0 + 80.0 * (2.0 / m as f64).sqrt());
    let dx = top / n as f64;
    (0..n)
        .map(|i| {
            let x = (i as f64 + 0.5) * dx;
            1.0 - p(a * x).clamp(0.0, 1.0).powi(k as i32)
        })
        .sum::<f64>()
        * dx
}

/// The largest split-R̂ expected over `d` coordinates of a run of `planned` chains that has
/// mixed, with smallest bulk ESS `ess`: `√(1 + M X/ESS − 1/n)`, with `M = 2 × chains` half-chains
/// of `n` draws and `X = E[max of 2d χ²_{M−1}/(M−1)]` (a bulk and a folded R̂ per coordinate).
///
/// Why: R̂² = `(n − 1)/n + B/(nW)` and for stationary half-chains `B/(nW)` ≈ `(τ/n)·χ²_{M−1}/(M−1)`
/// (the spread of M independent half-chain means, each of variance `τσ²/n`), while `τ/n = M/ESS`.
/// Conservative: every coordinate is counted at the smallest ESS, and a coordinate's bulk and
/// folded values as independent. Test `the_predicted_rhat_matches_mixed_chains`.
pub fn predicted_max_rhat(ess: f64, planned: &PlannedRun, d: usize) -> f64 {
    let (mx, n) = rhat_terms(planned, d);
    (1.0 + mx / ess - 1.0 / n).max(1.0).sqrt()
}

/// The smallest bulk ESS at which [`predicted_max_rhat`] is `rhat`.
pub(super) fn ess_for_rhat(rhat: f64, planned: &PlannedRun, d: usize) -> f64 {
    let (mx, n) = rhat_terms(planned, d);
    mx / (rhat * rhat - 1.0 + 1.0 / n)
}

/// `(M X, n)` of [`predicted_max_rhat`].
fn rhat_terms(planned: &PlannedRun, d: usize) -> (f64, f64) {
    let m = 2 * planned.chains.max(1);
    let x = expected_max_scaled_chi2(2 * d.max(1), m - 1);
    (m as f64 * x, (planned.iterations as f64 / 2.0).max(1.0))
}

/// What [`error_model_step`] fitted.
#[derive(Clone, Copy)]
pub(super) struct ErrorModel {
    /// The minimiser of the predicted error; NaN when no bias was seen.
    pub(super) step: f64,
    /// Whether any pilot showed bias (else the KSD fit chooses the step).
    pub(super) bias_seen: bool,
    /// Whether the minimiser is at an end of the searched range.
    pub(super) clamped: bool,
    pub(super) gamma: f64,
    /// `max_j β_j²`.
    pub(super) beta2: f64,
    /// `K`.
    pub(super) k_mc: f64,
    /// `max_j κ_j` of `τ_j(h) = κ_j h^{−γ}`.
    pub(super) kappa_max: f64,
}

impl ErrorModel {
    /// The planned run's predicted smallest effective sample size over the coordinates at step
    /// h: `min_j N / τ_j(h)`.
    pub(super) fn min_ess(&self, h: f64, run_draws: f64) -> f64 {
        run_draws / (self.kappa_max * h.powf(-self.gamma)).max(1.0)
    }

    /// The smallest step at which [`min_ess`](Self::min_ess) reaches `ess`.
    pub(super) fn step_for_ess(&self, ess: f64, run_draws: f64) -> f64 {
        (self.kappa_max * ess / run_draws).powf(1.0 / self.gamma)
    }

    /// The unconstrained minimiser of the predicted error for `run_draws` draws,
    /// `(γ K/(2 β² N))^{1/(2+γ)}` (with bias seen).
    pub(super) fn accuracy_step(&self, run_draws: f64) -> f64 {
        (self.gamma * self.k_mc / (2.0 * self.beta2 * run_draws)).powf(1.0 / (2.0 + self.gamma))
    }

    /// The predicted worst error (posterior sds) of the planned run at step h:
    /// `√(max_j β_j² h^p + K h^{−γ}/N)` with p = 2 (0 bias when no pilot showed any).
    pub(super) fn predicted_error(&self, h: f64, run_draws: f64) -> f64 {
        predicted_error2(self.beta2, self.k_mc, self.gamma, 2, h, run_draws).sqrt()
    }

    /// The squared predicted worst error at step h with a further sd bias `residual` (a
    /// gradient-noise correction's approximate residual) added to the bias `√β² h`:
    /// `(√β² h + residual)² + K h^{−γ}/N`.
    pub(super) fn predicted_error2_with(&self, h: f64, run_draws: f64, residual: f64) -> f64 {
        let b = self.beta2.sqrt() * h + residual;
        b * b + self.k_mc * h.powf(-self.gamma) / run_draws
    }
}

/// The error model's predicted squared worst error `β² h^p + K h^{−γ}/N` (what
/// [`error_model_step`] minimises).
fn predicted_error2(beta2: f64, k_mc: f64, gamma: f64, p: i32, h: f64, run_draws: f64) -> f64 {
    beta2 * h.powi(p) + k_mc * h.powf(-gamma) / run_draws
}

/// The step that minimises a prediction, in posterior sds, of the planned run's worst error
/// (the largest error of a mean or sd over the coordinates), built from what the pilots measured
/// per coordinate j ([`PilotErrors`]):
///
/// - **Monte Carlo**: iterations per effective draw `τ_j(h) = κ_j h^{−γ}`, γ pooled over the
///   coordinates by least squares on log τ against log h (or fixed by the sampler's
///   [`Tunable::mixing_exponent`], 1 for the overdamped Langevin schemes), κ_j their mean
///   intercept, from the
///   pilots whose τ is resolved (at least 20 effective draws and two kept draws per τ) and below
///   the step of smallest τ (above it, near the stability limit, τ grows again); a coordinate
///   with no resolved τ takes the bound `τ < 2·thin` of the smallest step whose pilot explored
///   but mixed faster than its thinning resolves (before, the largest `τ h^γ` seen: on the
///   quickstart's SGHMC-CV one coordinate's κ came out 100× the others' from the largest step's
///   τ, and the predicted ESS was 364 for a run that measured 14 850). The run's
///   squared error of a mean is `τ_j/N` (N = kept draws × chains); the worst of the 2d reported
///   errors is counted as `K h^{−γ}/N`, `K = E[max of 2d squared normals] · max_j κ_j`.
/// - **Bias**: per coordinate and for each of the mean's and the sd's Stein moment error, the
///   slope `b` of the fit `e(h) = b h^{p/2} + c h^{p/2+1}` ([`first_order_slope`]; first-order
///   bias: p = 2) to the pilots at and above the smallest-KSD step (below it a pilot's error is
///   mostly that it has not explored yet) whose error is below 1 (beyond, the expansion in h has
///   broken down), weighted by each pilot's own Monte Carlo variance (`τ/N_pilot` for a mean,
///   half that for an sd). A slope counts when it stands out of its standard error at the
///   Bonferroni z over the 2d slopes (`Φ⁻¹(1 − 0.05/(4d))`, 3.35 for d = 31: pure Monte Carlo
///   noise creates a bias with probability at most 5 % across all of them), as
///   `β_j² = b̂² − Var(b̂)`. Then the check against the pilots directly (the unbroken run of
///   pilots up to the largest scored step whose errors all stand out of their noise with one
///   sign, at least two of them): β_j at least the run's smallest slope `|e|/h^{p/2}`; where no
///   slope of the run falls below the one before by more than their noise, at most its smallest
///   upper bound `(|e| + z·se)/h^{p/2}`.
///   The free second-order term keeps the growth near the stability limit from inflating β; the
///   rule it replaced (the mean of `(error² − variance)/h²` at the two smallest steps whose error
///   exceeded 2σ) took noise and that growth for first-order bias, and chose steps 1.4–2× below
///   the best of the validation grid at 5 000 × 4 draws.
///
/// Minimises `max_j β_j² h^p + K h^{−γ}/N` over `[smallest/8, largest]` of the scored steps.
/// `None` with fewer than three scored pilots; when no pilot showed bias (then the KSD fit
/// decides) the model has no step (`bias_seen` false) but predicts the Monte Carlo error.
pub(super) fn error_model_step(
    trials: &[Trial],
    h_ksd: f64,
    pilot_draws: f64,
    thin: f64,
    run_draws: f64,
    p: i32,
    fixed_gamma: Option<f64>,
) -> Option<ErrorModel> {
    let ok: Vec<(f64, &PilotErrors)> = trials
        .iter()
        .filter_map(|t| t.errors.as_ref().map(|e| (t.step_size, e)))
        .filter(|(_, e)| e.tau.iter().all(|v| v.is_finite() && *v > 0.0))
        .collect();
    if ok.len() < 3 {
        return None;
    }
    let d = ok[0].1.tau.len();
    let (gamma, kappa) = mixing(&ok, pilot_draws, thin, fixed_gamma);
    let beta2 = bias_slopes2(&ok, h_ksd, pilot_draws, p);
    // The worst coordinate's Monte Carlo variance, counted as if every one of the 2d reported
    // errors (means and sds) had it: K = E[max of 2d squared normals] · max_j κ_j.
    let kappa_max = kappa.iter().fold(0.0f64, |a, k| a.max(*k));
    let k_mc = expected_max_chi2(2 * d) * kappa_max;
    if beta2.iter().all(|b| *b == 0.0) {
        // No bias seen: no step from the model, but its Monte Carlo part still predicts the ESS.
        return Some(ErrorModel {
            step: f64::NAN,
            bias_seen: false,
            clamped: false,
            gamma,
            beta2: 0.0,
            k_mc,
            kappa_max,
        });
    }
    let b_max = beta2.iter().fold(0.0f64, |a, b| a.max(*b));
    let lo = ok.iter().map(|o| o.0).fold(f64::INFINITY, f64::min) / 8.0;
    let hi = ok.iter().map(|o| o.0).fold(0.0, f64::max);
    let objective = |h: f64| predicted_error2(b_max, k_mc, gamma, p, h, run_draws);
    let n = 400;
    let (i, step) = (0..=n)
        .map(|i| (i, lo * (hi / lo).powf(i as f64 / n as f64)))
        .min_by(|a, b| objective(a.1).total_cmp(&objective(b.1)))?;
    Some(ErrorModel { step, bias_seen: true, clamped: i == 0 || i == n, gamma, beta2: b_max, k_mc, kappa_max })
}
/// The pilots' mixing per coordinate: the exponent γ of `τ_j(h) = κ_j h^(−γ)` (the sampler's
/// `fixed_gamma`, else pooled over the coordinates by least squares on log τ against log h) and
/// each coordinate's κ_j from the pilots whose autocorrelation time is resolved.
fn mixing(ok: &[(f64, &PilotErrors)], pilot_draws: f64, thin: f64, fixed_gamma: Option<f64>) -> (f64, Vec<f64>) {
    let d = ok[0].1.tau.len();
    // A pilot explored a coordinate when it holds at least 20 effective draws of it; its
    // autocorrelation time is resolved when it also spans at least two kept (thinned) draws.
    let explored = |tau: f64| pilot_draws / tau >= 20.0;
    let reliable = |tau: f64| explored(tau) && tau >= 2.0 * thin;
    let mut kappa = vec![0.0; d];
    let mut counts = vec![0usize; d];
    // Per coordinate, the steps up to the one with the smallest τ (above it, near the stability
    // limit, τ grows again).
    let tau_top: Vec<f64> = (0..d)
        .map(|j| ok.iter().min_by(|a, b| a.1.tau[j].total_cmp(&b.1.tau[j])).map_or(f64::INFINITY, |o| o.0))
        .collect();
    let reliable_at = |j: usize, h: f64, tau: f64| reliable(tau) && h <= tau_top[j];
    // γ: the sampler's, else pooled over the coordinates by least squares on log τ against log h.
    let gamma = fixed_gamma.unwrap_or_else(|| {
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for j in 0..d {
            let pts: Vec<(f64, f64)> =
                ok.iter().filter(|(h, e)| reliable_at(j, *h, e.tau[j])).map(|(h, e)| (h.ln(), e.tau[j].ln())).collect();
            if pts.len() < 2 {
                continue;
            }
            let mx = pts.iter().map(|p| p.0).sum::<f64>() / pts.len() as f64;
            let my = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
            for (x, y) in &pts {
                sxy += (x - mx) * (y - my);
                sxx += (x - mx) * (x - mx);
            }
        }
        if sxx > 0.0 { (-sxy / sxx).clamp(0.25, 1.5) } else { 1.0 }
    });
    for j in 0..d {
        for (h, e) in ok {
            if reliable_at(j, *h, e.tau[j]) {
                kappa[j] += e.tau[j].ln() + gamma * h.ln();
                counts[j] += 1;
            }
        }
        kappa[j] = if counts[j] > 0 {
            (kappa[j] / counts[j] as f64).exp()
        } else {
            // No resolved time. A pilot that explored (at least 20 effective draws) but mixed
            // faster than its thinning resolves (τ < 2·thin) bounds it: τ_j(h) < 2·thin, so
            // κ_j ≤ 2·thin·h^γ, tightest at the smallest such step. Else (and never above it)
            // the largest τ·h^γ seen.
            let seen = ok.iter().map(|(h, e)| e.tau[j] * h.powf(gamma)).fold(0.0, f64::max);
            ok.iter()
                .filter(|(_, e)| explored(e.tau[j]) && e.tau[j] < 2.0 * thin)
                .map(|(h, _)| 2.0 * thin * h.powf(gamma))
                .fold(seen, f64::min)
        };
    }
    (gamma, kappa)
}

/// Per coordinate, the squared first-order bias slope β_j² of its mean and sd errors (the larger
/// of the two), from the pilots at or above the smallest-KSD step `h_ksd`; 0 where none stands
/// out.
fn bias_slopes2(ok: &[(f64, &PilotErrors)], h_ksd: f64, pilot_draws: f64, p: i32) -> Vec<f64> {
    let d = ok[0].1.tau.len();
    // Bias: for each coordinate and each of the mean and sd errors, the slope b of the fit
    // e(h) = b·h^(p/2) + c·h^(p/2+1) to the errors at the steps at or above the smallest-KSD step
    // (below it a pilot's error is mostly that it has not explored yet) whose error is below 1
    // (beyond, the expansion in h has broken down), weighted by each pilot's own Monte Carlo
    // variance; counted when b̂ stands out of its standard error at the Bonferroni z over the 2d
    // slopes, as β² = b̂² − Var(b̂). No detected bias: 0.
    // The Bonferroni z of the runs' 95 % error bounds, over the same 2d means and sds.
    let z2 = crate::trace::diagnostics::bound_z(d).powi(2);
    let q = f64::from(p) / 2.0;
    // The pilots the fit and its check see: those at or above the smallest-KSD step.
    let above: Vec<&(f64, &PilotErrors)> = ok.iter().filter(|(h, _)| *h >= h_ksd).collect();
    // The Bonferroni z over all these pilots' 2d errors, for the check below.
    let z_all = crate::numeric::special::normal_quantile(
        1.0 - (1.0 - crate::trace::diagnostics::BOUND_PROB) / (4.0 * (d * above.len().max(1)) as f64),
    );
    let mut beta2 = vec![0.0f64; d];
    for (j, b2) in beta2.iter_mut().enumerate() {
        for series in 0..2 {
            // (h, error, its Monte Carlo variance) per pilot, by increasing step.
            let points: Vec<(f64, f64, f64)> = above
                .iter()
                .map(|(h, e)| {
                    // The pilot's Monte Carlo variance, and what its stochastic scores add.
                    let noise = e.tau[j] / pilot_draws;
                    if series == 0 {
                        (*h, e.mean[j], noise + e.mean_noise[j])
                    } else {
                        (*h, e.sd[j], 0.5 * noise + e.sd_noise[j])
                    }
                })
                .filter(|(_, e, v)| e.is_finite() && v.is_finite() && *v > 0.0)
                .collect();
            let fit = coordinate_bias(&points, q, z2, z_all);
            *b2 = b2.max(fit);
        }
    }
    beta2
}

/// One coordinate's squared first-order bias slope β² from its errors at the pilots `points`
/// ((h, error, its Monte Carlo variance), by increasing step): the weighted fit's slope where it
/// stands out of its noise (`z2`, the Bonferroni z²), floored and capped by what the pilots
/// measured directly (at `z_all`).
fn coordinate_bias(points: &[(f64, f64, f64)], q: f64, z2: f64, z_all: f64) -> f64 {
    let small: Vec<(f64, f64, f64)> = points.iter().copied().filter(|(_, e, _)| e.abs() < 1.0).collect();
    let mut fit = match first_order_slope(&small, q) {
        Some((b, var)) if b * b > z2 * var => b * b - var,
        _ => 0.0,
    };
    // The check against what the pilots measured directly: the unbroken run of pilots,
    // ending at the largest scored step, whose errors all stand out of their noise (at
    // z_all) with one sign. A bias that grows at least linearly (e(h)/h^q non-decreasing,
    // as for the Langevin schemes up to their stability limit) has β ≤ e/h^q at every
    // step, tightest at the run's lowest steps; when the run spans at least two pilots
    // (one alone at the top may be a breakdown near the stability limit), its smallest
    // slope |e|/h^q floors the fit (near the limit the slopes grow, so the smallest is
    // the lowest pilot's, within the convexity of one grid factor of β; where the bias
    // grows linearly, within the noise; where it grows more slowly, the largest pilot's,
    // below β), and where its slopes confirm that growth its smallest upper bound
    // (|e| + z·se)/h^q caps the fit.
    let significant = |&(_, e, v): &(f64, f64, f64)| e.abs() > z_all * v.sqrt();
    let sign = points.last().filter(|pt| significant(pt)).map(|pt| pt.1.signum());
    let run: Vec<(f64, f64, f64)> = match sign {
        Some(sign) => {
            let n = points.iter().rev().take_while(|pt| significant(pt) && pt.1.signum() == sign).count();
            points[points.len() - n..].to_vec()
        }
        None => Vec::new(),
    };
    if run.len() >= 2 {
        let slopes =
            |pad: f64| run.iter().map(|(h, e, v)| (e.abs() + pad * v.sqrt()) / h.powf(q)).fold(f64::INFINITY, f64::min);
        // The cap only where the run itself shows the growth at least linear: no slope
        // falls below the one before it by more than their noise (HAMCMC's, whose
        // metric adapts to the step, can grow more slowly, and there a cap from the
        // larger steps would lower β and raise the step: on `tune_logistic`'s
        // condition-382 model 1.4x, its error 0.435 → 0.553 sd).
        let at_least_linear = run.windows(2).all(|w| {
            let (s0, s1) = (w[0].1.abs() / w[0].0.powf(q), w[1].1.abs() / w[1].0.powf(q));
            let se = (w[0].2 / w[0].0.powf(2.0 * q) + w[1].2 / w[1].0.powf(2.0 * q)).sqrt();
            s1 >= s0 - z_all * se
        });
        if at_least_linear {
            fit = fit.min(slopes(z_all).powi(2));
        }
        // The floor, unless the run is a breakdown near the stability limit: every pilot of it
        // beyond the expansion's range (|e| ≥ 1), and the largest pilot below it, inside that
        // range, showing a bias well below the floor's linear prediction there (its upper bound
        // under half of it). On the validation's diagnosis posterior the two largest steps' sd
        // errors were 1.7 and 11.6 above −0.09 ± 0.03 at half the step: a floor from them put β
        // 5× above the fit's and the step 2× below. Where the bias grows linearly from the small
        // steps on (uncorrected pSGLD), the pilot below lies on the floor's line and it stays.
        let floor = slopes(0.0);
        let beyond = run.iter().all(|(_, e, _)| e.abs() >= 1.0);
        let breakdown = beyond
            && points[..points.len() - run.len()]
                .iter()
                .rev()
                .find(|(_, e, _)| e.abs() < 1.0)
                .is_some_and(|&(h, e, v)| e.abs() + z_all * v.sqrt() < 0.5 * floor * h.powf(q));
        if !breakdown {
            fit = fit.max(floor * floor);
        }
    }
    fit
}

/// The predicted smallest ESS [`Objective::Convergence`] asks of a planned run:
/// [`CONVERGENCE_MARGIN`] × the larger of [`ESS_MIN`](crate::diagnostics::ESS_MIN) and the ESS at
/// which [`predicted_max_rhat`] is [`RHAT_MAX`](crate::diagnostics::RHAT_MAX).
pub(super) fn convergence_ess(planned: &PlannedRun, d: usize) -> f64 {
    CONVERGENCE_MARGIN
        * crate::trace::diagnostics::ESS_MIN.max(ess_for_rhat(crate::trace::diagnostics::RHAT_MAX, planned, d))
}

/// The centre of the candidate grid: the curvature step, or, where a noise-corrected sampler's
/// limit is below half of it (the minibatch noise dominates), the step that puts the grid's top
/// candidate at the limit. Above the limit the injected noise cannot shrink further and the bias
/// grows faster than the pilots' linear model of it.
pub(super) fn grid_centre(centre: f64, limit: Option<f64>, factors: &[f64]) -> f64 {
    let top_factor = factors.iter().copied().fold(0.0, f64::max);
    match limit {
        Some(l) if l < centre / 2.0 => centre.min(l / top_factor),
        _ => centre,
    }
}
