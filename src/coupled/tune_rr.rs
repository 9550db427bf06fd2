//! Richardson–Romberg step selection ([`tune_rr`]): pilots of coupled pairs at h and h/2 scored
//! by the Stein moment discrepancy of the extrapolated measure, never returning a step whose own
//! bias estimate exceeds the planned run's Monte Carlo error. It sits with the coupled methods
//! and draws on [`tune`](crate::tune)'s mode, curvature, whitening and pilot plan.

use crate::cost::Cost;
use crate::coupled::richardson::RichardsonRomberg;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::runner::Runner;
use crate::samplers::{Discretisation, Whitening};
use crate::tune::{
    Curvature, GridPilot, Scorer, Setup, Tunable, TuneSettings, discrepancy_fit_minimiser_scaled, moments_norm2,
    noise_norm, pilot_grid, setup,
};
use std::sync::Arc;

/// One candidate of [`tune_rr`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct RrTrial {
    /// Chain A's step size tried (chain B runs at half of it).
    pub step_size: f64,
    /// The first-order difference `π̂_{h/2} − π̂_h` of the means and variances (RMS over them, in
    /// posterior-sd units), what Richardson–Romberg removes.
    pub first_order: Option<f64>,
    /// The estimated remaining (second-order) bias of the extrapolation (RMS, sd units).
    pub bias: Option<f64>,
    /// The noise level of [`bias`](Self::bias): the RMS of the standard errors of its terms
    /// (from the replicates' spread). A bias estimate below about twice it is not
    /// distinguishable from zero.
    pub bias_se: Option<f64>,
    /// The Monte Carlo error of the extrapolation at the pilot's budget (RMS, sd units), from
    /// the spread of the pilot's replicates.
    pub mc_error: Option<f64>,
    /// The Stein moment discrepancy of the extrapolated (signed) measure `2 π̂_{h/2} − π̂_h`
    /// pooled over the replicates (RMS over coordinates of the mean and sd errors, sd units;
    /// see [`TuneSettings::moment_weight`]): what the step is chosen on.
    pub discrepancy: Option<f64>,
    /// Why it failed (divergence, runaway), if it did.
    pub failure: Option<String>,
    /// Its pilot cost.
    pub cost: Cost,
}

/// What [`tune_rr`] chose, and why.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct TunedRr<S> {
    /// The extrapolation with the chosen step.
    pub rr: RichardsonRomberg<S>,
    /// Chain A's chosen step.
    pub step_size: f64,
    /// The base sampler's curvature-derived centre.
    pub centre: f64,
    /// The curvature at the mode.
    pub curvature: Curvature,
    /// The mode the pilots started from.
    pub mode: Vec<f64>,
    /// Every candidate, in increasing step order.
    pub trials: Vec<RrTrial>,
    /// Everything spent.
    pub cost: Cost,
    /// Why the winner won.
    pub reason: String,
    /// The whitening the base sampler runs in, if any (see [`TuneSettings::precondition`]).
    pub whitening: Option<Arc<Whitening>>,
    /// Wall time of the whole tuning (mode search, curvature, whitening and pilots).
    pub wall_time: std::time::Duration,
}

/// Replicates of each Richardson–Romberg pilot (their spread gives the Monte Carlo error).
const RR_REPLICATES: usize = 4;

/// One Richardson–Romberg pilot of [`tune_rr`]: its step, what it measured (`None` if it
/// failed, with the reason), its cost.
struct RrPilot {
    step: f64,
    measured: Option<RrMeasured>,
    failure: Option<String>,
    cost: Cost,
}

/// What a Richardson–Romberg pilot measured, per standardised mean and variance q.
struct RrMeasured {
    /// The first-order differences `D_q = π̂_{h/2}(q) − π̂_h(q)` (pooled over the replicates).
    diff: Vec<f64>,
    /// Their standard errors, from the replicates' own differences.
    diff_se: Vec<f64>,
    /// The extrapolated estimate of every q, per replicate.
    reps: Vec<Vec<f64>>,
    /// The squared Stein moment discrepancy of the extrapolated measure: the score.
    discrepancy2: f64,
}

impl GridPilot for RrPilot {
    fn step_size(&self) -> f64 {
        self.step
    }

    fn score(&self) -> Option<f64> {
        self.measured.as_ref().map(|m| m.discrepancy2)
    }
}

/// What every Richardson–Romberg pilot of [`tune_rr`] shares: the model, the base sampler, the
/// replicates' dispersed starts and the units of the standardised means and variances.
struct RrPlan<'a, M: ?Sized, S> {
    model: &'a M,
    base: &'a S,
    coupling: crate::coupled::richardson::NoiseCoupling,
    starts: Vec<Vec<f64>>,
    /// 1 / the Laplace approximation's marginal sds.
    unit: Vec<f64>,
    laplace: &'a crate::tune::Laplace,
    scorer: &'a Scorer,
    /// `√Hⱼⱼ`, the scale of the scores' noise check.
    scale: Vec<f64>,
    mode: &'a [f64],
    settings: &'a TuneSettings,
    thin: u64,
    d: usize,
}

impl<M: Model + ?Sized, S: Tunable + Discretisation> RrPlan<'_, M, S> {
    /// The pilot at step `h` (chain A's), index `i` for its streams: one replicate pair per start;
    /// a divergence or a non-finite score is a failed pilot, not an error.
    fn pilot(&self, h: f64, i: u64) -> Result<RrPilot> {
        let failed = |why: String, cost: Cost| RrPilot { step: h, measured: None, failure: Some(why), cost };
        let r = RichardsonRomberg::with_coupling(self.base.with_step_size(h)?, self.coupling);
        // One replicate pair per dispersed start (the same self.starts for every candidate).
        let mut outs = Vec::with_capacity(RR_REPLICATES);
        for (k, start) in self.starts.iter().enumerate() {
            let rs = self.settings.pilot_run(1, self.thin, i, k as u64);
            match Runner::new(self.model, &r).start(start).settings(rs).run() {
                Ok(out) => outs.push(out),
                Err(e) if e.is_divergence() => return Ok(failed(e.to_string(), Cost::default())),
                Err(e) => return Err(e),
            }
        }
        // Standardised means and variances q.
        let q = |e: &crate::trace::estimate::Estimate| -> Result<Vec<f64>> {
            let (m, v) = (e.mean()?, e.variance()?);
            Ok((0..self.d)
                .map(|j| m[j] * self.unit[j])
                .chain((0..self.d).map(|j| v[j] * self.unit[j] * self.unit[j]))
                .collect())
        };
        let fine = q(&crate::trace::estimate::Estimate::combine(outs.iter().map(|o| o.fine.clone()))?)?;
        let coarse = q(&crate::trace::estimate::Estimate::combine(outs.iter().map(|o| o.coarse.clone()))?)?;
        let diff: Vec<f64> = fine.iter().zip(&coarse).map(|(a, b)| a - b).collect();
        // The standard error of each difference, from the replicates' own differences.
        let per = outs.iter().map(|o| Ok(q(&o.fine)?.iter().zip(q(&o.coarse)?).map(|(a, b)| a - b).collect()));
        let per: Vec<Vec<f64>> = per.collect::<Result<_>>()?;
        let r = per.len() as f64;
        let diff_se: Vec<f64> = (0..2 * self.d)
            .map(|k| {
                let m = per.iter().map(|p| p[k]).sum::<f64>() / r;
                (per.iter().map(|p| (p[k] - m).powi(2)).sum::<f64>() / (r - 1.0) / r).sqrt()
            })
            .collect();
        let reps = outs.iter().map(|o| q(&o.estimate)).collect::<Result<Vec<_>>>()?;
        let mut spent = outs.iter().fold(Cost::default(), |c, o| c + (o.cost - o.setup_cost));
        // The Stein moment vectors of the extrapolated measure 2·π̂_{h/2} − π̂_h (linear in the
        // measure), averaged over the replicates, with the pilots' scores at the thinned draws;
        // stochastic scores' noise (independent between draws) is taken out of the square.
        let (mut m, mut mm) = (vec![0.0; self.d], vec![0.0; self.d]);
        let mut noise2 = 0.0;
        let r = RR_REPLICATES as f64;
        for (k, o) in outs.iter().enumerate() {
            for (c, (w, e)) in [(2.0, &o.fine), (-1.0, &o.coarse)].into_iter().enumerate() {
                let x = e.stacked_draws()?;
                let seed = self.settings.pilot_run(1, self.thin, i, k as u64).seed ^ (c as u64 + 1);
                let Some(sc) = self.scorer.score(self.model, x.view(), &self.scale, seed) else {
                    spent.datum_gradients += self.scorer.cost_per_score(self.model) * x.nrows() as u64;
                    return Ok(failed("non-finite score at a draw".into(), spent));
                };
                spent += sc.cost;
                let (a, b) = self.laplace.moment_vectors(x.view(), sc.scores.view(), self.mode);
                m.iter_mut().zip(&a).for_each(|(m, a)| *m += w * a / r);
                mm.iter_mut().zip(&b).for_each(|(m, b)| *m += w * b / r);
                if let Some(e) = &sc.noise {
                    noise2 += w * w / (r * r) * noise_norm(&self.laplace.moment_noise(x.view(), e.view(), self.mode));
                }
            }
        }
        let discrepancy2 = (moments_norm2(&(m, mm)) - noise2).max(0.0);
        let measured = RrMeasured { diff, diff_se, reps, discrepancy2 };
        Ok(RrPilot { step: h, measured: Some(measured), failure: None, cost: spent })
    }
}

/// The pilots of [`tune_rr`] scored.
struct Scored {
    /// One per pilot, in increasing step order.
    trials: Vec<RrTrial>,
    /// Whether each trial's bias estimate calls it safe for the planned run.
    safe: Vec<bool>,
    /// The index and squared discrepancy of the best-scored trial.
    best: Option<(usize, f64)>,
    /// The pilots' cost.
    cost: Cost,
}

/// The pilots of [`tune_rr`] as trials: each one's first-order difference, estimated remaining
/// bias (from the slope of `D_q/h` to its next successful neighbour) with its noise, Monte Carlo
/// error and discrepancy; whether its bias estimate calls it safe for the planned run (`ratio` =
/// pilot draws / planned draws); the best-scored one; and the pilots' cost.
fn score_trials(pilots: &[RrPilot], ratio: f64, d: usize) -> Result<Scored> {
    let mut cost = Cost::default();
    let ok: Vec<&RrPilot> = pilots.iter().filter(|p| p.measured.is_some()).collect();
    if ok.len() < 2 {
        return Err(Error::NotConverged { what: "tune_rr", iterations: pilots.len() as u64, residual: f64::NAN });
    }
    // Per candidate and q, the slope s of D/h between it and its next larger successful
    // neighbour (the next smaller for the largest): RR bias ≈ −(2/3) s h².
    let nq = 2 * d;
    // With each slope, its standard error from those of the two differences.
    let slope_at = |i: usize| -> Vec<(f64, f64)> {
        let j = if i + 1 < ok.len() { i + 1 } else { i - 1 };
        let (hi, (di, si)) = (ok[i].step, ok[i].measured.as_ref().map(|p| (&p.diff, &p.diff_se)).expect("filtered"));
        let (hj, (dj, sj)) = (ok[j].step, ok[j].measured.as_ref().map(|p| (&p.diff, &p.diff_se)).expect("filtered"));
        (0..nq)
            .map(|k| {
                let slope = (dj[k] / hj - di[k] / hi) / (hj - hi);
                let se = ((sj[k] / hj).powi(2) + (si[k] / hi).powi(2)).sqrt() / (hj - hi).abs();
                (slope, se)
            })
            .collect()
    };
    let mut trials = Vec::with_capacity(pilots.len());
    // The planned run's Monte Carlo error, scaled from the pilot's replicates (variance ratio of
    // draws); whether each trial's estimate calls it biased.
    let mut safe: Vec<bool> = Vec::with_capacity(pilots.len());
    let mut best: Option<(usize, f64)> = None;
    let mut ok_index = 0;
    for (i, RrPilot { step: h, measured, failure, cost: c }) in pilots.iter().enumerate() {
        cost += *c;
        let Some(RrMeasured { diff, reps, discrepancy2: moments, .. }) = measured else {
            safe.push(false);
            trials.push(RrTrial {
                step_size: *h,
                first_order: None,
                bias: None,
                bias_se: None,
                mc_error: None,
                discrepancy: None,
                failure: failure.clone(),
                cost: *c,
            });
            continue;
        };
        let r = reps.len() as f64;
        let slopes = slope_at(ok_index);
        ok_index += 1;
        let (mut b2, mut v, mut f2, mut s2) = (0.0, 0.0, 0.0, 0.0);
        let mut biases = Vec::with_capacity(nq);
        for k in 0..nq {
            let bias = 2.0 / 3.0 * slopes[k].0 * h * h;
            let se = 2.0 / 3.0 * slopes[k].1 * h * h;
            s2 += se * se;
            let mean = reps.iter().map(|x| x[k]).sum::<f64>() / r;
            let var = reps.iter().map(|x| (x[k] - mean).powi(2)).sum::<f64>() / (r - 1.0) / r;
            biases.push((bias, (var * ratio).sqrt()));
            b2 += bias * bias;
            v += var;
            f2 += diff[k] * diff[k];
        }
        // RMS over q; the bias's noise floor: E[RMS²] of pure noise is the mean of se².
        let (b, e, bse) = ((b2 / nq as f64).sqrt(), (v / nq as f64).sqrt(), (s2 / nq as f64).sqrt());
        if best.is_none_or(|(_, s)| *moments < s) {
            best = Some((i, *moments));
        }
        // A mean or variance is called biased when its bias estimate is above both the planned
        // run's Monte Carlo error for it and four standard errors of the estimates (pooled over
        // the 2d quantities: four replicates give each its own only three degrees of freedom).
        safe.push(biases.iter().all(|(b, e)| b.abs() <= e.max(4.0 * bse)));
        trials.push(RrTrial {
            step_size: *h,
            first_order: Some((f2 / nq as f64).sqrt()),
            bias: Some(b),
            bias_se: Some(bse),
            mc_error: Some(e),
            discrepancy: Some(moments.sqrt()),
            failure: None,
            cost: *c,
        });
    }
    Ok(Scored { trials, safe, best, cost })
}

/// Chooses the step of a Richardson–Romberg extrapolation from an estimate of its error, not from
/// its IMQ KSD (the KSD of a signed-weight measure is not comparable across steps).
///
/// After the mode, curvature and the base sampler's centre step (as [`tune`](crate::tune::tune)), each candidate
/// `h = centre × factor` runs a pilot of 4 replicate pairs, each from its own draw of the Laplace
/// approximation `N(θ̂, ∇²U(θ̂)⁻¹)` (the same draws for every candidate, so that what a pilot
/// too short for its step has not forgotten of its start shows). The step is chosen on the
/// **Stein moment discrepancy of the extrapolated measure** `2 π̂_{h/2} − π̂_h`: the moment
/// identities of [`TuneSettings::moment_weight`] are linear in the measure, so the signed
/// combination's are the same combination of the two chains' (exact scores at the thinned
/// draws), and they estimate the extrapolation's errors of each mean and sd in posterior sds —
/// remaining bias, Monte Carlo error and what has not relaxed together. The winner minimises
/// `D²(h) ≈ a/h + b·h⁴ + c` fitted to all candidates (the extrapolation removes the first-order
/// bias), clamped to the grid; the smallest discrepancy when the fit is not convex. The grid is
/// [`tune`](crate::tune::tune)'s: extended by factors of 2 until two scored candidates lie on each
/// side of the smallest discrepancy, at most [`TuneSettings::max_extensions`] times, never above
/// a step that failed.
///
/// Each [`RrTrial`] also records the bias estimate of the first-order differences
/// `D_q(h) = π̂_{h/2}(q) − π̂_h(q) ≈ a h/2 + (3/4) b h²` of the standardised means and variances q
/// (remaining bias `−b h²/2` from the slope of `D_q/h` to the next candidate) and the replicates'
/// Monte Carlo error. Chosen on those alone, the step came out up to 4× too small on the
/// ill-conditioned posterior of the `tune_logistic` example: a pilot whose chains have not
/// relaxed has small differences and a small spread.
///
/// **Safety**: the step returned is never above the largest candidate that its bias estimate
/// does not call biased. A candidate is called biased when, for some standardised mean or
/// variance, the estimated remaining bias is above both the planned run's Monte Carlo error of
/// that quantity ([`TuneSettings::planned_run`]; the pilot's replicate error scaled by the
/// square root of the ratio of draws) and four standard errors of the estimates (RMS over the
/// quantities, [`RrTrial::bias_se`]: a pilot cannot call a step biased by less than it can
/// measure). If the fit's minimiser is above the
/// largest safe candidate, the step is lowered to it and the reason says so.
///
/// Errors: as [`tune`](crate::tune::tune); [`Error::NotConverged`] (`"tune_rr"`) when fewer than two candidates ran
/// (no fit is possible), or when no candidate is safe.
pub fn tune_rr<M: Model + ?Sized, S: Tunable + Discretisation>(
    model: &M,
    rr: &RichardsonRomberg<S>,
    theta0: &[f64],
    settings: &TuneSettings,
) -> Result<TunedRr<S>> {
    let started = std::time::Instant::now();
    settings.validate()?;
    let settings = &settings.scaled_to_run();
    let Setup { mode, curv, centre, scale, laplace, base, whitening, preconditioning, mut cost, .. } =
        setup(model, rr.base(), theta0, settings)?;
    let kept = settings.pilot_iterations - settings.pilot_burn_in;
    // Means and variances are measured in the Laplace approximation's marginal sds (not the
    // conditional ones 1/√Hⱼⱼ, far smaller on a correlated posterior).
    let d = mode.len();
    let scorer = Scorer::new(model, &mode, (&laplace, &scale), settings.scoring, settings.seed, &mut cost)?;
    let plan = RrPlan {
        model,
        base: &base,
        coupling: rr.coupling(),
        starts: laplace.draws(&mode, RR_REPLICATES, settings.seed)?,
        unit: laplace.sd.iter().map(|s| 1.0 / s).collect(),
        laplace: &laplace,
        scorer: &scorer,
        scale,
        mode: &mode,
        settings,
        thin: settings.pilot_thin(),
        d: mode.len(),
    };
    let pilots: Vec<RrPilot> = pilot_grid(centre, settings, None, |h, i| plan.pilot(h, i))?;
    // The planned run's Monte Carlo error is scaled from the pilots' replicates by the ratio of
    // draws.
    let pilot_draws = (RR_REPLICATES as u64 * kept) as f64;
    let ratio = pilot_draws / settings.planned_run.draws();
    let Scored { trials, safe, best, cost: pilot_cost } = score_trials(&pilots, ratio, d)?;
    cost += pilot_cost;
    let (bi, score) = best.expect("at least two candidates ran");
    let largest_safe = trials.iter().zip(&safe).filter(|(_, s)| **s).map(|(t, _)| t.step_size).reduce(f64::max);
    let Some(largest_safe) = largest_safe else {
        return Err(Error::NotConverged {
            what: "tune_rr: no candidate step has an estimated remaining bias below the planned run's Monte Carlo \
                   error (add smaller TuneSettings::factors, or plan a shorter run)",
            iterations: trials.len() as u64,
            residual: trials.iter().filter_map(|t| t.bias).fold(f64::INFINITY, f64::min),
        });
    };
    let scored: Vec<(f64, f64)> = trials.iter().filter_map(|t| t.discrepancy.map(|k| (t.step_size, k))).collect();
    let (fitted, how) = match discrepancy_fit_minimiser_scaled(&scored, None, trials[bi].step_size, 4, ratio) {
        Some((h, _)) => (h, "the minimiser of D²(h) ≈ r·a/h + b·h⁴ + c fitted to all candidates"),
        None => (trials[bi].step_size, "the candidate with the smallest discrepancy (no convex fit)"),
    };
    let (step, limit) = if fitted > largest_safe {
        (
            largest_safe,
            format!(
                "; lowered from {fitted:.4e} to the largest candidate whose estimated remaining bias is below the planned \
                 run's Monte Carlo error"
            ),
        )
    } else {
        (fitted, String::new())
    };
    let reason = format!(
        "step {step:.4e}: {how}, Monte Carlo term scaled by r = {ratio:.3e} to the planned run of {} x {} kept draws{limit}; \
         safe candidates (no mean or variance with an estimated remaining bias above both the planned run's Monte \
         Carlo error and 4 standard errors of the estimates) up to {largest_safe:.3e}; smallest \
         Stein moment discrepancy of the extrapolation {:.3e} (sd units) at {:.3e} (estimated remaining bias there {:.3e}, \
         pilot Monte Carlo error {:.3e}), of {} candidate steps around the curvature step {centre:.3e} (λ_max = {:.4e}; grid extended {} \
         time(s)); {} failed; preconditioning: {preconditioning}",
        settings.planned_run.iterations,
        settings.planned_run.chains,
        score.sqrt(),
        trials[bi].step_size,
        trials[bi].bias.unwrap_or(f64::NAN),
        trials[bi].mc_error.unwrap_or(f64::NAN),
        trials.len(),
        curv.lambda_max,
        trials.len() - settings.factors.len(),
        trials.iter().filter(|t| t.failure.is_some()).count()
    );
    Ok(TunedRr {
        rr: RichardsonRomberg::with_coupling(base.with_step_size(step)?, rr.coupling()),
        step_size: step,
        centre,
        curvature: curv,
        mode,
        trials,
        cost,
        reason,
        whitening,
        wall_time: started.elapsed(),
    })
}
