//! Giles' adaptive run to a target accuracy ([`MlSgld::run_adaptive`]), with the horizon
//! doubled where level 0 has not relaxed.

use crate::cost::Cost;
use crate::coupled::mlsgld::allocate::{
    COARSEST_MARGIN, Dropped, LevelAcc, Spend, coarser_costs, decay_rate, fine_fraction, fine_mean, level_outputs,
    moment_targets,
};
use crate::coupled::mlsgld::level::SampleExec;
use crate::coupled::mlsgld::sampler::MlSgld;
use crate::coupled::mlsgld::settings::{
    ADAPTIVE_HORIZON_DOUBLINGS, ADAPTIVE_RETRY_COST, AdaptiveSettings, Attempt, LevelStats, MlSgldSettings, MlmcResult,
    MomentErrors, RmseTarget,
};
use crate::error::{Error, Result, check_positive};
use crate::models::model::Model;
use crate::run::placement::Local;
use crate::samplers::SubsampledDiscretisation;
use crate::trace::estimate::Estimate;
use ndarray::{Array1, Array2};

impl<S: SubsampledDiscretisation> MlSgld<S> {
    /// Giles' adaptive MLMC for a target RMSE ε: start with levels 0..=2 and `n_initial` samples
    /// each; repeatedly set `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉` (so `Σ V_l/N_l ≤ ε²/2`) and
    /// take the missing samples; stop when the estimated remaining bias
    /// `|mean Δ_L| / (2^α − 1)` (α fitted to the decay of `|mean Δ_l|`, at least 0.5) is below
    /// `ε/√2`, else add a level.
    ///
    /// Under [`RmseTarget::Moments`] the estimator may start above level 0: a level-l sample's
    /// fine path alone is a draw of `g_l`, the law level l + 1's corrections start from, so
    /// `E[g_L] = E[g_k] + Σ_{l>k} E[Δ_l]` for any k. Before each allocation the run compares, by
    /// Giles' cost model over every output, the samples still to take with the current coarsest
    /// level and with it dropped (the next level's fine paths as the base, run alone at their
    /// share of a coupled sample's cost), and drops it if that is more than 10 % cheaper (M. B.
    /// Giles, *Multilevel Monte Carlo methods*, Acta Numerica 24, 2015: a coarse level is worth
    /// its place only if it lowers `Σ √(V_l C_l)`). The dropped levels' cost stays in the
    /// result's; [`MlmcResult::levels`] then starts at the base level.
    ///
    /// [`RmseTarget::Absolute`] and [`RmseTarget::PosteriorSd`] control g only.
    /// [`RmseTarget::Moments`] (with `keep_points`) controls every coordinate's mean and sd as
    /// well: each level takes the most samples any output needs, and a level is added until every
    /// output's bias test passes (see its docs). With `keep_points`, [`MlmcResult::moments`] gives
    /// every coordinate's mean and sd read off the signed measure with their own standard errors,
    /// remaining biases and an error bound: under a target on g alone, read it before trusting
    /// the measure for anything but g (on the crate's validation posteriors, single sds off by up
    /// to 39 % at a loose target on g came with bounds of 0.26–7.9 saying so).
    ///
    /// The cost of one run varies between seeds, in jumps: the bias tests decide how many levels
    /// it takes, and each level about doubles it (on the `validation` example's Poisson regression
    /// at its tuned h₀ and ε = 0.1, 41 seeds cost 5.2e6–1.55e7 datum gradients, 40 of them near
    /// 1.45e7). Set `max_cost` with that in mind.
    ///
    /// ```
    /// use sgmcmc::{AdaptiveSettings, LinearGaussian, Minibatch, MlSgld, MlSgldSettings, RmseTarget};
    /// let model = LinearGaussian::synthetic(100, 2, 4.0, 10.0, 23)?;
    /// let settings = MlSgldSettings { keep_points: true, seed: 1, ..Default::default() };
    /// let ml = MlSgld::sgld(settings, 0.01, Minibatch::new(10), &[0.0, 0.0])?;
    /// // Every mean to 0.1 posterior sd and every sd to 10 % (RMSE).
    /// let target = AdaptiveSettings { target: RmseTarget::Moments(0.1), ..Default::default() };
    /// let r = ml.run_adaptive(&model, &|t: &[f64]| t[0], &target)?;
    /// let m = r.moments.expect("kept points");
    /// println!("means {:?}, sds {:?}, 95 % bound {:.3} sd", m.mean, m.sd, m.error_bound);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    ///
    /// Level 0's relaxation is tested at the end (see [`Error::NotRelaxed`]); where its paths
    /// still depend on their start, the run starts again with the horizon doubled, at most
    /// [`ADAPTIVE_HORIZON_DOUBLINGS`] times and within [`ADAPTIVE_RETRY_COST`] times the first
    /// attempt's cost; [`MlmcResult::horizon`] and [`MlmcResult::horizon_doublings`] say what it
    /// did, and [`MlmcResult::cost`] includes every attempt.
    ///
    /// Errors: [`Error::BudgetExhausted`] (with what was achieved) when the next batch of samples
    /// would exceed `max_cost`, or `max_level` is reached before the bias test passes;
    /// [`Error::NotRelaxed`] when the doublings did not make level 0 relax; invalid settings;
    /// model errors.
    pub fn run_adaptive<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<MlmcResult> {
        self.run_adaptive_on(&Local, model, g, target)
    }

    /// [`run_adaptive`](Self::run_adaptive) on an executor: the adaptive run, and where level 0
    /// has not relaxed ([`Error::NotRelaxed`]) the same run again with the horizon doubled, at
    /// most [`ADAPTIVE_HORIZON_DOUBLINGS`] times and within [`ADAPTIVE_RETRY_COST`] times the
    /// first attempt's cost, every attempt's cost counted against `max_cost` and in the result
    /// ([`MlmcResult::horizon_doublings`] says what it did).
    pub(crate) fn run_adaptive_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<MlmcResult> {
        let mut spent = Cost::default();
        let mut current: Option<Self> = None;
        let mut doubling = 0;
        // The retries' own budget: ADAPTIVE_RETRY_COST times the first attempt's cost (within the
        // user's max_cost); past it the last NotRelaxed is returned.
        let mut retry_budget: Option<u64> = None;
        let mut last_not_relaxed: Option<Error> = None;
        loop {
            let ml = current.as_ref().unwrap_or(self);
            let used = spent.datum_gradients + spent.datum_hvps;
            let user_left = target.max_cost.map(|m| m.saturating_sub(used));
            let retry_left = retry_budget.map(|b| b.saturating_sub(used));
            let max_cost = match (user_left, retry_left) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let left = AdaptiveSettings { max_cost, ..*target };
            match ml.run_adaptive_once(exec, model, g, &left) {
                Ok(Attempt::Done(r)) => {
                    let mut r = *r;
                    r.cost += spent;
                    r.epochs = r.cost.datum_gradients as f64 / model.n_data() as f64;
                    r.horizon = ml.settings.horizon;
                    r.horizon_doublings = doubling;
                    return Ok(r);
                }
                Ok(Attempt::NotRelaxed(e, _)) if doubling == ADAPTIVE_HORIZON_DOUBLINGS => return Err(e),
                Ok(Attempt::NotRelaxed(e, cost)) => {
                    spent += cost;
                    retry_budget
                        .get_or_insert(ADAPTIVE_RETRY_COST.saturating_mul(cost.datum_gradients + cost.datum_hvps));
                    last_not_relaxed = Some(e);
                    let horizon = ml.settings.horizon.checked_mul(2).ok_or_else(|| {
                        Error::invalid("horizon", ml.settings.horizon, "doubling it for relaxation overflows")
                    })?;
                    let settings = MlSgldSettings { horizon, ..ml.settings };
                    current = Some(Self::new(settings, ml.base.clone(), &ml.theta0)?);
                    doubling += 1;
                }
                // A retry that runs out of its budget or levels: the horizon is still too short
                // (what the last NotRelaxed says).
                Err(Error::BudgetExhausted { .. }) if last_not_relaxed.is_some() => {
                    return Err(last_not_relaxed.unwrap_or(Error::NoSamples { reason: "no attempt" }));
                }
                Err(Error::BudgetExhausted { reason, estimate, estimated_rmse, datum_evaluations }) => {
                    return Err(Error::BudgetExhausted {
                        reason,
                        estimate,
                        estimated_rmse,
                        datum_evaluations: datum_evaluations + used,
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One adaptive run at this horizon: done, or level 0 not relaxed (the error and the cost
    /// spent).
    fn run_adaptive_once<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<Attempt> {
        self.check(model)?;
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        let moments_eps = check_target(target, keep)?;
        let setup = self.base.setup_cost();
        let mut budget = Spend { spent: (setup.datum_gradients + setup.datum_hvps) as f64, max: target.max_cost };
        let mut data: Vec<LevelAcc> = Vec::new();
        // Levels dropped below the coarsest one kept (their cost), and level 0 for the
        // relaxation test.
        let mut dropped = Dropped::default();
        let exhausted = |me: &Self, data: &[LevelAcc], dropped: &Dropped, reason: &'static str, bias: f64| {
            me.exhausted(model, data, dropped, reason, bias)
        };
        let over = OVER_BUDGET;
        for l in 0..=2 {
            let mut acc = LevelAcc::new(l, keep);
            if let Err(e) = self.extend_level_on(exec, model, g, &mut acc, target.n_initial, &mut budget) {
                data.push(acc);
                return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                    exhausted(self, &data, &dropped, over, 0.0)
                } else {
                    e
                });
            }
            data.push(acc);
        }
        let eps = target_eps(target, &data[2], moments_eps.is_some())?;
        loop {
            // Under a Moments target, the coarsest level is dropped when Giles' cost model says
            // the next one's fine paths alone make a cheaper base (see `coarser_costs`).
            if let Some(f) = moments_eps
                && data.len() >= 3
            {
                let (keep_cost, drop_cost) = coarser_costs(&data, eps, f, self.settings.coupling);
                if drop_cost < COARSEST_MARGIN * keep_cost {
                    self.drop_coarsest(&mut data, &mut dropped, keep);
                    continue;
                }
            }
            let grew = self.top_up(exec, model, g, &mut data, &dropped, eps, moments_eps, &mut budget)?;
            // Under a Moments target the allocation is read again from the new samples until it
            // settles: its scales (the moments' variances, taken at their upper 2-se values) are
            // estimated from the samples and may have been loose.
            if grew && moments_eps.is_some() {
                continue;
            }
            let big_l = data.len() - 1;
            let mut means: Vec<f64> = dropped.g.clone();
            means.extend(data[1..].iter().map(|a| a.mean.abs()));
            let alpha = decay_rate(&means).max(0.5);
            let bias = means[means.len() - 1] / (2f64.powf(alpha) - 1.0);
            let moments_unbiased = moments_eps.is_none_or(|f| {
                let costs: Vec<f64> = data.iter().map(|a| a.cost_per_sample()).collect();
                moment_targets(&data, &costs, f, &dropped).1 <= f / std::f64::consts::SQRT_2
            });
            if bias <= eps / std::f64::consts::SQRT_2 && moments_unbiased {
                let finest = data[big_l].level;
                let r = self.summarise(model, &data, Some(bias), &dropped);
                if let Some(e) = self.relaxation_error(g, dropped.level0.as_ref().unwrap_or(&data[0]), finest, eps) {
                    return Ok(Attempt::NotRelaxed(e, r.cost));
                }
                let mut r = r;
                r.target_rmse = Some(eps);
                return Ok(Attempt::Done(Box::new(r)));
            }
            if data[big_l].level >= target.max_level {
                return Err(exhausted(self, &data, &dropped, "max_level reached before the bias test passed", bias));
            }
            let mut acc = LevelAcc::new(data[big_l].level + 1, keep);
            let r = self.extend_level_on(exec, model, g, &mut acc, target.n_initial, &mut budget);
            data.push(acc);
            if let Err(e) = r {
                return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                    exhausted(self, &data, &dropped, over, bias)
                } else {
                    e
                });
            }
        }
    }

    /// One round of Giles' allocation: every level topped up to the samples its variance and cost
    /// ask for the target `eps` (and, under a Moments target, what every mean and sd asks).
    /// Returns whether some level took more than 1 % more samples (Giles' test of a settled
    /// allocation).
    #[allow(clippy::too_many_arguments)]
    fn top_up<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        data: &mut [LevelAcc],
        dropped: &Dropped,
        eps: f64,
        moments_eps: Option<f64>,
        budget: &mut Spend,
    ) -> Result<bool> {
        let stats: Vec<(f64, f64)> =
            data.iter().map(|a| (a.var().max(f64::MIN_POSITIVE), a.cost_per_sample())).collect();
        let sum: f64 = stats.iter().map(|(v, c)| (v * c).sqrt()).sum();
        let moment_wants = moments_eps.map(|f| {
            let costs: Vec<f64> = stats.iter().map(|(_, c)| *c).collect();
            moment_targets(data, &costs, f, dropped).0
        });
        // Whether a level took more than 1 % more samples (Giles' test of a settled allocation).
        let mut grew = false;
        for (l, (v, c)) in stats.iter().enumerate() {
            let mut want = (2.0 / (eps * eps) * (v / c).sqrt() * sum).ceil();
            if let Some(w) = &moment_wants {
                want = want.max(w[l]);
            }
            let have = data[l].n as f64;
            if want > have {
                let extra = want - have;
                grew |= extra > 0.01 * have;
                if budget.max.is_some_and(|m| budget.spent + extra * c > m as f64) {
                    return Err(self.exhausted(model, data, dropped, OVER_BUDGET, 0.0));
                }
                if let Err(e) = self.extend_level_on(exec, model, g, &mut data[l], extra as usize, budget) {
                    return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                        self.exhausted(model, data, dropped, OVER_BUDGET, 0.0)
                    } else {
                        e
                    });
                }
            }
        }
        Ok(grew)
    }

    /// The error of a run stopped by its budget or its finest level, with what it achieved.
    fn exhausted<M: Model + ?Sized>(
        &self,
        model: &M,
        data: &[LevelAcc],
        dropped: &Dropped,
        reason: &'static str,
        bias: f64,
    ) -> Error {
        let r = self.summarise(model, data, None, dropped);
        Error::BudgetExhausted {
            reason,
            estimate: r.estimate,
            estimated_rmse: (r.variance + bias * bias).sqrt(),
            datum_evaluations: r.cost.datum_gradients + r.cost.datum_hvps,
        }
    }

    /// Drops the coarsest level (a Moments target, where the next one's fine paths alone make a
    /// cheaper base): its cost and (level 0) its samples are kept for the relaxation test, the
    /// new base's own correction stays in the bias tests' decay fits (μ: its fine points' mean,
    /// as the tests will use), and the new base keeps only its fine paths.
    fn drop_coarsest(&self, data: &mut Vec<LevelAcc>, dropped: &mut Dropped, keep: bool) {
        let old = data.remove(0);
        dropped.cost += old.cost;
        if old.level == 0 {
            dropped.level0 = Some(old);
        }
        dropped.g.push(data[0].mean.abs());
        if keep {
            let mu = fine_mean(&data[0]);
            dropped.moments.push(level_outputs(&data[..1], &mu).0.swap_remove(0));
        }
        let l = data[0].level;
        data[0].make_base(fine_fraction(l, self.settings.coupling));
    }

    /// The relaxation test, from level 0's paths (see [`Error::NotRelaxed`]): with
    /// `g₀ = g(θ₀)`, `D = mean g(T₀/2) − g₀` and `C = mean g(T₀) − mean g(T₀/2)`, an exponential
    /// relaxation has `r = C/D = e^{−λT₀/2}` and leaves a bias `C r/(1 − r)` at T₀, and
    /// `C r^{2L+1}/(1 − r)` at the finest level's horizon `T_L = (L + 1) T₀`, whose law the
    /// estimate targets. The paths have not relaxed when C is more than three standard errors
    /// from 0 and that bias, computed with a conservative `r⁺ = (|C| + 2 se_C)/(|D| − 2 se_D)`,
    /// exceeds ε/2 (or `r⁺ ≥ 1`: no decay shows).
    pub(super) fn relaxation_error<G: Fn(&[f64]) -> f64>(
        &self,
        g: &G,
        a: &LevelAcc,
        finest: usize,
        eps: f64,
    ) -> Option<Error> {
        if a.n < 2 {
            return None;
        }
        let n = a.n as f64;
        let se_c = (a.m2_r / (n - 1.0) / n).sqrt();
        let c = a.mean_r;
        if c.abs() <= 3.0 * se_c {
            return None;
        }
        // se of mean g(T/2) = mean(g(T)) − mean(C): at most the sum of the two.
        let se_d = (a.m2_f / (n - 1.0) / n).sqrt() + se_c;
        let d = (a.mean_f - c) - g(&self.theta0);
        let r_hi = (c.abs() + 2.0 * se_c) / (d.abs() - 2.0 * se_d);
        let same_sign = c * d > 0.0;
        let remaining = if same_sign && r_hi > 0.0 && r_hi < 1.0 {
            (c.abs() + 2.0 * se_c) * r_hi.powi(2 * finest as i32 + 1) / (1.0 - r_hi)
        } else {
            f64::INFINITY
        };
        (remaining > eps / 2.0).then_some(Error::NotRelaxed {
            horizon_time: self.settings.horizon as f64 * self.h0,
            change: c,
            standard_error: se_c,
            remaining_bias: remaining,
        })
    }

    /// The result from the levels the estimator uses (`data`, its coarsest first) and the cost
    /// of the levels it dropped (`sunk`).
    pub(super) fn summarise<M: Model + ?Sized>(
        &self,
        model: &M,
        data: &[LevelAcc],
        bias: Option<f64>,
        dropped: &Dropped,
    ) -> MlmcResult {
        let mut levels = Vec::new();
        let mut cost = self.base.setup_cost() + dropped.cost;
        let (mut estimate, mut variance) = (0.0, 0.0);
        for a in data {
            estimate += a.mean;
            variance += a.var() / a.n.max(1) as f64;
            cost += a.cost;
            levels.push(LevelStats {
                level: a.level,
                n_samples: a.n,
                mean: a.mean,
                variance: a.var(),
                mean_fine: a.mean_f,
                variance_fine: if a.n > 1 { a.m2_f / (a.n - 1) as f64 } else { 0.0 },
                cost: a.cost,
                cost_per_sample: a.cost_per_sample(),
            });
        }
        let measure = self.measure(data);
        let moments =
            measure.as_ref().and_then(|m| m.mean().ok()).and_then(|mu| MomentErrors::of(data, mu.as_slice()?, dropped));
        let epochs = cost.datum_gradients as f64 / model.n_data() as f64;
        MlmcResult {
            estimate,
            variance,
            levels,
            cost,
            epochs,
            bias_estimate: bias,
            measure,
            target_rmse: None,
            moments,
            horizon: self.settings.horizon,
            horizon_doublings: 0,
        }
    }

    fn measure(&self, data: &[LevelAcc]) -> Option<Estimate> {
        if !data.iter().all(|a| a.keep) {
            return None;
        }
        let d = self.theta0.len();
        let mut rows = Vec::new();
        let mut weights = Vec::new();
        for a in data {
            let inv = 1.0 / a.n as f64;
            for (p, class) in &a.points {
                rows.extend_from_slice(p);
                weights.push(inv * class);
            }
        }
        let draws = Array2::from_shape_vec((weights.len(), d), rows).ok()?;
        Estimate::from_weighted(draws, Array1::from_vec(weights)).ok()
    }
}

/// Checks an adaptive run's target; returns the Moments target's ε (`None` for a target on g).
/// A Moments target reads the kept end points (`keep`).
fn check_target(target: &AdaptiveSettings, keep: bool) -> Result<Option<f64>> {
    let (RmseTarget::PosteriorSd(t) | RmseTarget::Absolute(t) | RmseTarget::Moments(t)) = target.target;
    check_positive("target (RMSE)", t)?;
    if target.n_initial < 2 {
        return Err(Error::invalid("n_initial", target.n_initial, "must be >= 2"));
    }
    if target.max_level < 2 {
        return Err(Error::invalid("max_level", target.max_level, "must be >= 2"));
    }
    match target.target {
        RmseTarget::Moments(f) if !keep => Err(Error::invalid(
            "target",
            format!("RmseTarget::Moments({f})"),
            "it reads the kept end points: set keep_points (without averaging_window)",
        )),
        RmseTarget::Moments(f) => Ok(Some(f)),
        _ => Ok(None),
    }
}

/// The target RMSE ε on g: absolute, or relative to g's posterior sd read off level 2's fine
/// samples (`fine`); infinite for a constant g under a Moments target (nothing to target but
/// the moments).
fn target_eps(target: &AdaptiveSettings, fine: &LevelAcc, moments: bool) -> Result<f64> {
    match target.target {
        RmseTarget::Absolute(e) => Ok(e),
        RmseTarget::PosteriorSd(f) | RmseTarget::Moments(f) => {
            let sd = (fine.m2_f / (fine.n as f64 - 1.0)).sqrt();
            if sd == 0.0 && moments {
                Ok(f64::INFINITY)
            } else if !(sd > 0.0 && sd.is_finite()) {
                Err(Error::invalid(
                    "target",
                    format!("{:?} (level 2's samples of g have sd {sd})", target.target),
                    "a target relative to the posterior sd needs g to vary: give RmseTarget::Absolute",
                ))
            } else {
                Ok(f * sd)
            }
        }
    }
}

/// Why an adaptive run stopped when its next batch would exceed `max_cost`.
const OVER_BUDGET: &str = "max_cost would be exceeded before the target RMSE is reached";
