//! The verdict of a run ([`Convergence`]): whether its chains mixed and the accuracy it states.

use crate::error::Result;
use crate::numeric::special::normal_quantile;
use crate::trace::diagnostics::summary;
use crate::trace::diagnostics::summary::{ESS_MIN, RHAT_MAX, Summary};
use crate::trace::estimate::Estimate;

/// Whether a run's chains mixed, by the thresholds [`RHAT_MAX`] and [`ESS_MIN`] on every
/// coordinate: what [`convergence`] returns.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Convergence {
    /// Every coordinate passed.
    pub converged: bool,
    /// The largest split-R̂ over the coordinates.
    pub max_rhat: f64,
    /// The smallest bulk ESS.
    pub min_ess_bulk: f64,
    /// The smallest tail ESS.
    pub min_ess_tail: f64,
    /// The coordinates that failed, in order.
    pub failed: Vec<usize>,
    /// Their names, where the verdict knows them (a [`Sample`](crate::Sample) run, a
    /// constrained model's [`convergence`](crate::Constrained::convergence)); else empty.
    pub failed_names: Vec<String>,
    /// The number of chains (split-R̂ compares halves of chains too, but only chains started
    /// apart can show that they did not find the same distribution).
    pub chains: usize,
    /// The largest Monte Carlo standard error of a coordinate's mean, in that coordinate's
    /// posterior sds (`mcse_mean / sd`; NaN if any is).
    pub max_mcse_mean: f64,
    /// The largest Monte Carlo standard error of a coordinate's sd, relative to that sd
    /// (`mcse_sd / sd`; NaN if any is).
    pub max_mcse_sd: f64,
    /// The run's own accuracy claim from its Monte Carlo error: with probability
    /// [`BOUND_PROB`] (Bonferroni over the `2d` means and sds) every mean lies within
    /// `error_bound` sds, and every sd within `error_bound × 100 %`, of what the chains would
    /// give run forever: `z · max(m, s) / (1 − z s)` with `m = max_mcse_mean`,
    /// `s = max_mcse_sd`, `z = Φ⁻¹(1 − (1 − BOUND_PROB) / (4d))` (the division expresses it in
    /// units of the limit's sd at its lower bound rather than of the run's own sd; ∞ if
    /// `z s ≥ 1`). It does **not** include the step's bias (the
    /// chains' limit is the sampler's law at its step, not the posterior): estimate that with
    /// [`discretisation_bias`](crate::discretisation_bias). Meaningful only when the run
    /// [`converged`](Self::converged) (below [`ESS_MIN`] the MCSEs themselves are unreliable).
    pub error_bound: f64,
    /// The accuracy the run states with its step's estimated bias included, where a step-bias
    /// check ran ([`convergence_with_bias`](crate::convergence_with_bias)): with the probability
    /// of [`error_bound`](Self::error_bound), every mean within `bias_bound` sds and every sd
    /// within `bias_bound × 100 %` of the posterior's, to the first order in the step that the
    /// check sees. `None` without a check.
    pub bias_bound: Option<f64>,
    /// The largest estimated |bias| of a mean or sd at the run's step that stands out of the
    /// check's noise (Bonferroni z), in posterior sds, where a step-bias check ran; 0 if none
    /// does. (A short check cannot resolve a small bias: its noise still widens
    /// [`bias_bound`](Self::bias_bound).)
    pub step_bias: Option<f64>,
    /// The step-bias check's cost relative to the run's (datum gradients), where it ran.
    pub bias_cost: Option<f64>,
}

impl Convergence {
    /// The accuracy the run states: [`bias_bound`](Self::bias_bound) where a step-bias check
    /// ran, else the Monte Carlo [`error_bound`](Self::error_bound) alone.
    pub fn stated_bound(&self) -> f64 {
        self.bias_bound.unwrap_or(self.error_bound)
    }

    /// Whether the estimated step bias is larger than the run's Monte Carlo bound: the run's
    /// accuracy is then set by its step, not by its length (a smaller step, tuned for a longer
    /// planned run, lowers it). False without a check.
    pub fn bias_dominates(&self) -> bool {
        self.step_bias.is_some_and(|b| b > self.error_bound)
    }

    /// Whether the run states a finite accuracy: false when its
    /// [`stated_bound`](Self::stated_bound) is infinite or NaN (the Monte Carlo error of an sd
    /// too large to bound, `z s ≥ 1`, or a step-bias check too noisy to bound the bias). A
    /// converged run without one says so in its verdict ("BUT ITS ACCURACY IS UNKNOWN"): its
    /// chains mixed, but nothing bounds how far its estimates are from the posterior's.
    pub fn accuracy_known(&self) -> bool {
        self.stated_bound().is_finite()
    }
}

/// The probability of [`Convergence::error_bound`]: 0.95.
pub const BOUND_PROB: f64 = 0.95;

impl std::fmt::Display for Convergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.converged && !self.accuracy_known() {
            write!(
                f,
                "converged (chains mixed), BUT ITS ACCURACY IS UNKNOWN (nothing bounds the estimates' error: run \
                 longer, or give the step-bias check more of the run): "
            )?;
        } else if self.converged && self.bias_dominates() {
            write!(f, "converged (chains mixed), BUT THE STEP IS BIASED beyond the Monte Carlo error: ")?;
        } else if self.converged {
            write!(f, "converged: ")?;
        } else {
            write!(f, "NOT CONVERGED ({} of the coordinates fail", self.failed.len())?;
            if !self.failed_names.is_empty() {
                let shown: Vec<&str> = self.failed_names.iter().take(8).map(String::as_str).collect();
                write!(f, ": {}{}", shown.join(", "), if self.failed_names.len() > 8 { ", …" } else { "" })?;
            }
            write!(f, "): ")?;
        }
        write!(
            f,
            "max split-R̂ {:.3} (≤ {RHAT_MAX}), min ESS bulk {:.0} / tail {:.0} (≥ {ESS_MIN:.0}) over {} chain(s)",
            self.max_rhat, self.min_ess_bulk, self.min_ess_tail, self.chains
        )?;
        match (self.bias_bound, self.step_bias) {
            (Some(bound), Some(bias)) => write!(
                f,
                "; Monte Carlo error ±{:.3} sd; step bias {} (a companion at half the step, {:.0} % of the run's \
                 cost); together: means within ±{bound:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates)",
                self.error_bound,
                if bias > 0.0 { format!("up to {bias:.3} sd") } else { "not detected".to_string() },
                100.0 * self.bias_cost.unwrap_or(f64::NAN),
                100.0 * bound,
                100.0 * BOUND_PROB
            )?,
            _ => write!(
                f,
                "; Monte Carlo error: means within ±{:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates; step bias \
                 not included)",
                self.error_bound,
                100.0 * self.error_bound,
                100.0 * BOUND_PROB
            )?,
        }
        if self.chains < 2 {
            write!(f, "; one chain: run several from dispersed starts for R̂ to mean much")?;
        }
        Ok(())
    }
}

/// Whether the chains of `est` mixed: split-R̂ and bulk and tail ESS of every coordinate against
/// [`RHAT_MAX`] and [`ESS_MIN`]. Start the chains dispersed around the mode
/// ([`dispersed_starts`](crate::tune::dispersed_starts)): chains started at one point can agree
/// with each other and all be wrong.
///
/// Errors: as [`summary`].
pub fn convergence(est: &Estimate) -> Result<Convergence> {
    let rows = summary(est)?;
    Ok(convergence_of(&rows, est.n_parts()))
}

impl Convergence {
    /// `self` with the names of its failed coordinates from `names` (one per coordinate).
    pub(crate) fn named(mut self, names: &[String]) -> Self {
        self.failed_names = self.failed.iter().filter_map(|&j| names.get(j).cloned()).collect();
        self
    }
}

/// The larger of two numbers, NaN if either is.
pub(crate) fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

/// The z of every [`BOUND_PROB`] error bound over `d` coordinates: two-sided, Bonferroni over
/// the 2d means and sds, `Φ⁻¹(1 − (1 − BOUND_PROB) / (4d))`.
pub(crate) fn bound_z(d: usize) -> f64 {
    normal_quantile(1.0 - (1.0 - BOUND_PROB) / (4.0 * d.max(1) as f64))
}

/// Absolute error bounds on a mean (`a_mean`) and an sd (`a_sd`) of a coordinate whose estimated
/// sd is `sd`, as one relative bound in units of the true sd at its lower bound:
/// `max(a_mean, a_sd) / (sd − a_sd)`; NaN if a bound is NaN, ∞ if `a_sd ≥ sd`.
pub(crate) fn relative_bound(a_mean: f64, a_sd: f64, sd: f64) -> f64 {
    let sd_lo = sd - a_sd;
    if sd_lo > 0.0 {
        nan_max(a_mean, a_sd) / sd_lo
    } else if a_sd.is_nan() {
        f64::NAN
    } else {
        f64::INFINITY
    }
}

pub(crate) fn convergence_of(rows: &[Summary], chains: usize) -> Convergence {
    let failed: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| !r.converged()).map(|(j, _)| j).collect();
    let nan_min = |a: f64, b: f64| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) };
    let max_mcse_mean = rows.iter().map(|r| r.mcse_mean / r.sd).fold(0.0, nan_max);
    let max_mcse_sd = rows.iter().map(|r| r.mcse_sd / r.sd).fold(0.0, nan_max);
    let z = bound_z(rows.len());
    Convergence {
        converged: failed.is_empty(),
        max_rhat: rows.iter().map(|r| r.rhat).fold(0.0, nan_max),
        min_ess_bulk: rows.iter().map(|r| r.ess_bulk).fold(f64::INFINITY, nan_min),
        min_ess_tail: rows.iter().map(|r| r.ess_tail).fold(f64::INFINITY, nan_min),
        failed,
        failed_names: Vec::new(),
        chains,
        max_mcse_mean,
        max_mcse_sd,
        // Relative MCSEs: the bound in units of the sd at its lower bound, `1 − z s`.
        error_bound: relative_bound(z * max_mcse_mean, z * max_mcse_sd, 1.0),
        bias_bound: None,
        step_bias: None,
        bias_cost: None,
    }
}
