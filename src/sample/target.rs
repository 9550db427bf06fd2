//! [`Sample`](super::Sample) aiming at an accuracy: how far a run must grow to state it, and what
//! it reached ([`Target`]).

use crate::coupled::step_bias::StepBias;
use crate::trace::diagnostics::{ESS_MIN, RHAT_MAX, Summary, bound_z, relative_bound};

/// The default accuracy of [`Sample`](super::Sample): every mean within 0.1 posterior sd and
/// every sd within 10 % (95 %, Monte Carlo error and the step's bias together).
pub const DEFAULT_ACCURACY: f64 = 0.1;

/// The default budget of [`Sample`](super::Sample) in datum gradients, tuning included: the larger
/// of this and [`DEFAULT_BUDGET_EPOCHS`] passes over the data (about 25 s of gradients on a
/// logistic regression with d = 20).
pub const DEFAULT_BUDGET: u64 = 1_000_000_000;

/// The default budget of [`Sample`](super::Sample) in epochs, where it is more than
/// [`DEFAULT_BUDGET`].
pub const DEFAULT_BUDGET_EPOCHS: u64 = 200;

/// The most times [`Sample`](super::Sample) extends its chains towards the target.
pub const MAX_EXTENSIONS: usize = 8;

/// The tuner plans the first run for a predicted worst error of this fraction of the target: the
/// run's stated bound is a 95 % bound over every mean and sd, with the step-bias check's noise
/// in it, and comes out about 1.4 times the tuner's predicted (expected) worst error, so a first
/// run planned at the target itself was nearly always extended once.
pub(super) const PLAN_MARGIN: f64 = 0.7;

/// An extension aims at this fraction of the target, so that the next verdict's own noise rarely
/// lands it just above.
const EXTENSION_AIM: f64 = 0.9;

/// The least factor by which an extension grows the run (fewer, larger extensions: each one
/// re-runs the step-bias check).
pub(super) const EXTENSION_MIN_GROWTH: f64 = 1.25;

/// What a run that aimed at an accuracy reached ([`Sampled::target`](super::Sampled::target)).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The accuracy asked for, in posterior sds (means) and relative units (sds).
    pub accuracy: f64,
    /// Whether the run converged and stated a bound within it.
    pub reached: bool,
    /// The bound the run stated at its end ([`Convergence::stated_bound`](crate::diagnostics::Convergence::stated_bound)).
    pub bound: f64,
    /// How many times the chains were extended after the first run.
    pub extensions: usize,
    /// Kept draws per chain at the end.
    pub draws: u64,
    /// Where the target was not reached and more draws would reach it: the kept draws per chain
    /// the run's own errors predict for it.
    pub needed_draws: Option<u64>,
    /// Why it was not reached: the budget, the wall-time limit, the extension limit, or a step
    /// whose bias alone exceeds the target (then more draws do not help).
    pub why: Option<String>,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ext = match self.extensions {
            0 => String::new(),
            1 => " (1 extension)".to_string(),
            k => format!(" ({k} extensions)"),
        };
        if self.reached {
            return write!(
                f,
                "target ±{} sd REACHED: stated ±{:.3} sd after {} kept draws per chain{ext}",
                self.accuracy, self.bound, self.draws
            );
        }
        write!(
            f,
            "target ±{} sd NOT REACHED: ±{:.3} sd after {} kept draws per chain{ext}",
            self.accuracy, self.bound, self.draws
        )?;
        if let Some(why) = &self.why {
            write!(f, "; {why}")?;
        }
        Ok(())
    }
}

/// How much longer a run must be to state `target`: the least factor f on its kept draws at
/// which, with every Monte Carlo and bias-check standard error shrunk by `√f` and the estimated
/// biases kept, every coordinate's bound is at most [`EXTENSION_AIM`] × `target` and the
/// convergence checks pass (ESS ≥ [`ESS_MIN`] and split-R̂ ≤ [`RHAT_MAX`], from `R̂² − 1 ∝
/// 1/ESS`), with a margin of 10 %; `Err(bias)` when the estimated biases alone exceed the aim
/// (more draws cannot reach it: the largest such bias in sds).
pub(super) fn needed_growth(rows: &[Summary], bias: Option<&StepBias>, target: f64) -> Result<f64, f64> {
    let z = bound_z(rows.len());
    let aim = EXTENSION_AIM * target;
    // Per coordinate: the bound when the standard errors are divided by √f.
    let bound_j = |j: usize, f: f64| -> f64 {
        let r = &rows[j];
        let (bm, bs, sem, ses) = match bias {
            Some(b) => (b.bias_mean[j].abs(), b.bias_sd[j].abs(), b.bias_mean_se[j], b.bias_sd_se[j]),
            None => (0.0, 0.0, 0.0, 0.0),
        };
        let quad = |mcse: f64, se: f64| (mcse * mcse + if se.is_nan() { 0.0 } else { se * se }).sqrt();
        let shrink = 1.0 / f.sqrt();
        let a_mean = bm + z * quad(r.mcse_mean, sem) * shrink;
        let a_sd = bs + z * quad(r.mcse_sd, ses) * shrink;
        relative_bound(a_mean, a_sd, r.sd)
    };
    let worst = |f: f64| {
        (0..rows.len()).map(|j| bound_j(j, f)).fold(0.0_f64, |m, b| if b.is_nan() { f64::INFINITY } else { m.max(b) })
    };
    let at_infinity = worst(f64::INFINITY);
    if at_infinity.is_nan() || at_infinity >= aim {
        return Err(at_infinity);
    }
    // Bisection on ln f over [0, ln 10⁸].
    let (mut lo, mut hi) = (0.0_f64, (1e8_f64).ln());
    if worst(1.0) <= aim {
        hi = 0.0;
    } else if worst(hi.exp()) > aim {
        return Ok(hi.exp());
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if worst(mid.exp()) <= aim {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let f_bound = hi.exp();
    // The convergence checks: ESS grows like f, R̂² − 1 shrinks like 1/f.
    let ess = rows.iter().map(|r| r.ess_bulk.min(r.ess_tail)).fold(f64::INFINITY, f64::min);
    let rhat = rows.iter().map(|r| r.rhat).fold(1.0_f64, f64::max);
    let f_ess = if ess.is_finite() && ess > 0.0 { ESS_MIN / ess } else { 1.0 };
    let f_rhat = if rhat > 1.0 { (rhat * rhat - 1.0) / (RHAT_MAX * RHAT_MAX - 1.0) } else { 0.0 };
    Ok(1.1 * f_bound.max(f_ess).max(f_rhat))
}
