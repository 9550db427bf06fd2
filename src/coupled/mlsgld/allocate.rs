//! Giles' allocation maths: samples per level for a target, the moments' error budget, the
//! coarsest level worth keeping, decay rates, and the per-level accumulators.

use crate::cost::Cost;
use crate::coupled::mlsgld::coupling::MlCoupling;
use crate::coupled::mlsgld::level_sample::LevelSample;
use crate::error::{Error, Result};
use crate::trace::diagnostics::bound_z;
use serde::{Deserialize, Serialize};

/// For [`RmseTarget::Moments`] at fraction `eps`: the samples each level needs (per output f of
/// θ_j and (θ_j − μ_j)², scaled by the multilevel estimate `s_j²` of θ_j's variance plus two of
/// its standard errors, resp.
/// `(2 s_j²)²` so that a variance's error is in units of the sd's relative error: Giles'
/// `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉`, the largest over outputs), and the largest scaled
/// remaining bias over outputs, `max(0, |mean Δ_L| − z se_L) / (2^α − 1)` with α fitted to the
/// decay of `|mean Δ_l|` over l ≥ 1 in [0.5, 1] (as [`MomentErrors`]) and z = `bound_z(d)`: the
/// noise of the finest correction is discounted so that 2d noisy tests do not add levels for
/// nothing. `costs` are the levels' datum evaluations per sample; μ is the coarsest level's mean
/// (level 0's unless the run dropped it); `dropped` holds the corrections of dropped levels the
/// decay fits still use.
pub(super) fn moment_targets(data: &[LevelAcc], costs: &[f64], eps: f64, dropped: &Dropped) -> (Vec<f64>, f64) {
    let d = data.first().and_then(|a| a.points.first()).map_or(0, |p| p.0.len());
    let n0 = data.first().map_or(0, |a| a.points.len());
    let mut want = vec![0.0; data.len()];
    if d == 0 || n0 == 0 {
        return (want, 0.0);
    }
    let mut mu = vec![0.0; d];
    for (p, _) in &data[0].points {
        mu.iter_mut().zip(p).for_each(|(m, x)| *m += x);
    }
    mu.iter_mut().for_each(|m| *m /= n0 as f64);
    let (level_mean, level_var, counts) = level_outputs(data, &mu);
    let big_l = data.len() - 1;
    let z = bound_z(d);
    // The multilevel estimate of each θ_j's variance (the signed measure's: its telescoped
    // E[(θ_j − μ_j)²] less the square of its mean's offset from μ_j), at its upper 2-se value: a
    // value that noise has made small (early, from n_initial samples per level, when level 0's
    // law is much wider than the posterior) would ask for samples in proportion to 1/s² (1/s⁴
    // for the sd); the allocation is re-read as the samples come in ([`MlSgld::run_adaptive`]),
    // so the final one uses a precise value. Level 0's variance if the estimate is not positive
    // (it can be several times the posterior's at a large h₀).
    let s2 = moment_scales(&level_mean, &level_var, &counts, &mu);
    let mut worst_bias: f64 = 0.0;
    for k in 0..2 * d {
        let s2 = s2[k % d];
        if !(s2 > 0.0 && s2.is_finite()) {
            continue;
        }
        let scale = if k < d { s2 } else { 4.0 * s2 * s2 };
        let v: Vec<f64> = level_var.iter().map(|lv| (lv[k] / scale).max(f64::MIN_POSITIVE)).collect();
        let sum: f64 = v.iter().zip(costs).map(|(v, c)| (v * c).sqrt()).sum();
        for (l, (v, c)) in v.iter().zip(costs).enumerate() {
            want[l] = f64::max(want[l], (2.0 / (eps * eps) * (v / c).sqrt() * sum).ceil());
        }
        if big_l >= 1 {
            let means = dropped
                .corrections(level_mean.iter().map(|m| m[k].abs() / scale.sqrt()), |f| f[k].abs() / scale.sqrt());
            let se = (v[big_l] / counts[big_l].max(1) as f64).sqrt();
            worst_bias = worst_bias.max((means[means.len() - 1] - z * se).max(0.0) / moment_bias_divisor(&means));
        }
    }
    (want, worst_bias)
}

/// What an adaptive run dropped below the coarsest level it kept (see `coarser_costs`): their
/// cost, level 0's statistics (for the relaxation test), and the mean corrections `mean Δ_l`
/// of g and of each output (θ_j, (θ_j − μ_j)²) of the levels from 1 to the coarsest kept (the
/// latter's from its coupled samples), which the bias tests' decay fits still use.
#[derive(Debug, Default)]
pub(super) struct Dropped {
    pub(super) cost: Cost,
    pub(super) level0: Option<LevelAcc>,
    pub(super) g: Vec<f64>,
    pub(super) moments: Vec<Vec<f64>>,
}

impl Dropped {
    /// `|mean Δ_l|` for the bias tests: the coarsest level kept's value first (unused by the
    /// fits), then the dropped corrections (by `frozen`), then those of the levels kept above it.
    pub(super) fn corrections(&self, kept: impl Iterator<Item = f64>, frozen: impl Fn(&Vec<f64>) -> f64) -> Vec<f64> {
        let mut kept = kept;
        let mut out: Vec<f64> = kept.next().into_iter().collect();
        out.extend(self.moments.iter().map(frozen));
        out.extend(kept);
        out
    }
}

/// Each θ_j's variance as [`moment_targets`] scales its outputs: the multilevel estimate plus
/// two of its standard errors, or level 0's variance if the estimate is not positive.
fn moment_scales(level_mean: &[Vec<f64>], level_var: &[Vec<f64>], counts: &[usize], mu: &[f64]) -> Vec<f64> {
    let d = mu.len();
    (0..d)
        .map(|j| {
            let mean_ml: f64 = level_mean.iter().map(|m| m[j]).sum();
            let var_ml = level_mean.iter().map(|m| m[d + j]).sum::<f64>() - (mean_ml - mu[j]).powi(2);
            let se_var = level_var.iter().zip(counts).map(|(v, n)| v[d + j] / (*n).max(1) as f64).sum::<f64>().sqrt();
            if var_ml > 0.0 { var_ml + 2.0 * se_var } else { level_var[0][j] }
        })
        .collect()
}

/// A Moments run drops its coarsest level when the predicted cost of the samples it still has
/// to take is below this fraction of the cost with the level (the variances come from as few
/// as `n_initial` samples).
pub(super) const COARSEST_MARGIN: f64 = 0.9;

/// The share of a coupled sample's steps at level l that are the fine path's:
/// `(1 + l)/(1 + 2l)` (antithetic: two coarse paths), `(1 + l)/(1 + 3l/2)` (subsampling); 1 at
/// level 0.
pub(super) fn fine_fraction(level: usize, coupling: MlCoupling) -> f64 {
    let l = level as f64;
    match coupling {
        MlCoupling::Antithetic => (1.0 + l) / (1.0 + 2.0 * l),
        MlCoupling::Subsampling => (1.0 + l) / (1.0 + 1.5 * l),
    }
}

/// Giles' cost model for the coarsest level of an [`RmseTarget::Moments`] run (M. B. Giles,
/// *Multilevel Monte Carlo methods*, Acta Numerica 24, 2015, §2: a coarse level is worth its
/// place only if it lowers `Σ √(V_l C_l)`). A level-l sample's fine path alone is a draw of
/// `g_l`, the law the level-(l+1) corrections start from, so the estimator may start at any
/// level: `E[g_L] = E[g_k] + Σ_{l>k} E[Δ_l]`. For each output — g at RMSE `eps`, and as
/// [`moment_targets`] scales them, every θ_j's mean and variance at fraction `frac` — Giles'
/// allocation `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉`, the largest over outputs per level,
/// with the current levels, and with the coarsest dropped and the next one's fine paths as the
/// base (their variance, and the fine path's share of its per-sample cost). Returns the cost of
/// the samples each would still take beyond those already taken (a dropped level's are lost):
/// at a loose target both are 0 (the levels' initial samples already suffice) and the level
/// stays; at a tight one the cheaper wins.
pub(super) fn coarser_costs(data: &[LevelAcc], eps: f64, frac: f64, coupling: MlCoupling) -> (f64, f64) {
    let costs: Vec<f64> = data.iter().map(|a| a.cost_per_sample()).collect();
    let mut drop_costs = costs[1..].to_vec();
    drop_costs[0] *= fine_fraction(data[1].level, coupling);
    let (mut want_keep, mut want_drop) = (vec![0.0; costs.len()], vec![0.0; drop_costs.len()]);
    let mut add = |v: &[f64], v1f: f64, target: f64| {
        if !(target > 0.0 && target.is_finite()) {
            return;
        }
        allocate(v, &costs, target, &mut want_keep);
        let mut vd = v[1..].to_vec();
        vd[0] = v1f;
        allocate(&vd, &drop_costs, target, &mut want_drop);
    };
    let n1 = (data[1].n.max(2) - 1) as f64;
    let vg: Vec<f64> = data.iter().map(|a| a.var()).collect();
    add(&vg, data[1].m2_f / n1, eps);
    // The coarsest level's points are all fine ones (level 0's paths, or a base level's).
    let mu = fine_mean(&data[0]);
    let d = mu.len();
    if d > 0 {
        let (level_mean, level_var, counts) = level_outputs(data, &mu);
        let s2 = moment_scales(&level_mean, &level_var, &counts, &mu);
        let fine1 = fine_variances(&data[1], &mu);
        for k in 0..2 * d {
            let s2 = s2[k % d];
            let target = if k < d { frac * s2.sqrt() } else { frac * 2.0 * s2 };
            let v: Vec<f64> = level_var.iter().map(|lv| lv[k]).collect();
            add(&v, fine1[k], target);
        }
    }
    let still = |want: &[f64], costs: &[f64], have: &[LevelAcc]| -> f64 {
        want.iter().zip(costs).zip(have).map(|((w, c), a)| c * (w - a.n as f64).max(0.0)).sum()
    };
    (still(&want_keep, &costs, data), still(&want_drop, &drop_costs, &data[1..]))
}

/// Giles' allocation for one output at RMSE `target` (variances `v`, costs per sample `costs`),
/// raising `want` to it level by level.
pub(super) fn allocate(v: &[f64], costs: &[f64], target: f64, want: &mut [f64]) {
    let v: Vec<f64> = v.iter().map(|v| v.max(f64::MIN_POSITIVE)).collect();
    let sum: f64 = v.iter().zip(costs).map(|(v, c)| (v * c).sqrt()).sum();
    for ((w, v), c) in want.iter_mut().zip(&v).zip(costs) {
        *w = f64::max(*w, (2.0 / (target * target) * (v / c).sqrt() * sum).ceil());
    }
}

/// The mean of a level's fine end points (class +1), empty without kept points.
pub(super) fn fine_mean(a: &LevelAcc) -> Vec<f64> {
    let fine: Vec<&Vec<f64>> = a.points.iter().filter(|(_, c)| *c > 0.0).map(|(p, _)| p).collect();
    let mut mu = vec![0.0; fine.first().map_or(0, |p| p.len())];
    for p in &fine {
        mu.iter_mut().zip(p.iter()).for_each(|(m, x)| *m += x / fine.len() as f64);
    }
    mu
}

/// The sample variance of each output (θ_j, then (θ_j − μ_j)²) over a level's fine end points.
fn fine_variances(a: &LevelAcc, mu: &[f64]) -> Vec<f64> {
    let d = mu.len();
    let (mut s1, mut s2, mut n) = (vec![0.0; 2 * d], vec![0.0; 2 * d], 0usize);
    for (p, class) in &a.points {
        if *class > 0.0 {
            for j in 0..d {
                let x = p[j] - mu[j];
                let y = x * x;
                s1[j] += x;
                s2[j] += x * x;
                s1[d + j] += y;
                s2[d + j] += y * y;
            }
            n += 1;
        }
    }
    let nf = n as f64;
    s1.iter().zip(&s2).map(|(a, b)| if n > 1 { ((b - a * a / nf) / (nf - 1.0)).max(0.0) } else { 0.0 }).collect()
}

/// `2^α − 1` for a mean or sd read off the measure, from `|mean Δ_l|` over levels (l = 0 first):
/// α fitted to their decay over l ≥ 1, capped at SGLD's weak order 1 (a faster fitted decay comes
/// from the horizon's relaxation in the first corrections, not from the step; see the docs of
/// [`MomentErrors::error_bound`]) and held at 0.5 or more.
pub(super) fn moment_bias_divisor(abs_means: &[f64]) -> f64 {
    2f64.powf(decay_rate(&abs_means[1..]).clamp(0.5, 1.0)) - 1.0
}

/// Per level and output (θ_j, then (θ_j − μ_j)², j < d) from the levels' kept points: the mean
/// of `Δ_l` over samples, the sample variance of one `Δ_l`, and the number of samples.
#[allow(clippy::type_complexity)]
pub(super) fn level_outputs(data: &[LevelAcc], mu: &[f64]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<usize>) {
    let d = mu.len();
    let outputs = 2 * d;
    let mut level_mean = vec![vec![0.0; outputs]; data.len()];
    let mut level_var = vec![vec![0.0; outputs]; data.len()];
    let mut counts = vec![0; data.len()];
    let mut delta = vec![0.0; outputs];
    for (l, a) in data.iter().enumerate() {
        let (mut s1, mut s2) = (vec![0.0; outputs], vec![0.0; outputs]);
        let mut n = 0usize;
        let mut flush = |delta: &mut [f64], n: &mut usize| {
            for k in 0..outputs {
                s1[k] += delta[k];
                s2[k] += delta[k] * delta[k];
                delta[k] = 0.0;
            }
            *n += 1;
        };
        for (i, (p, class)) in a.points.iter().enumerate() {
            if *class > 0.0 && i > 0 {
                flush(&mut delta, &mut n);
            }
            for j in 0..d {
                delta[j] += class * p[j];
                delta[d + j] += class * (p[j] - mu[j]) * (p[j] - mu[j]);
            }
        }
        flush(&mut delta, &mut n);
        let nf = n as f64;
        for k in 0..outputs {
            let m = s1[k] / nf;
            level_mean[l][k] = m;
            level_var[l][k] = if n > 1 { ((s2[k] - nf * m * m) / (nf - 1.0)).max(0.0) } else { 0.0 };
        }
        counts[l] = n;
    }
    (level_mean, level_var, counts)
}

/// What a multilevel run has spent and may spend, in datum evaluations (gradients +
/// Hessian-vector products). (Not the observer [`Budget`](crate::observe::Budget), which stops
/// chains.)
pub(super) struct Spend {
    pub(super) spent: f64,
    pub(super) max: Option<u64>,
}

impl Spend {
    pub(super) fn unlimited() -> Self {
        Spend { spent: 0.0, max: None }
    }

    pub(super) fn check(&self, next: f64) -> Result<()> {
        match self.max {
            Some(m) if self.spent + next > m as f64 => Err(Error::BudgetExhausted {
                reason: "max_cost",
                estimate: f64::NAN,
                estimated_rmse: f64::NAN,
                datum_evaluations: self.spent as u64,
            }),
            _ => Ok(()),
        }
    }
}

/// Running statistics of one level (Welford, folded in sample order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct LevelAcc {
    pub(super) level: usize,
    pub(super) n: usize,
    pub(super) mean: f64,
    m2: f64,
    pub(super) mean_f: f64,
    pub(super) m2_f: f64,
    /// Running mean and sum of squares of `g(end) − g(half horizon)` (level 0's relaxation).
    pub(super) mean_r: f64,
    pub(super) m2_r: f64,
    pub(super) cost: Cost,
    pub(super) keep: bool,
    /// End points with their weight class (+1 fine / level 0, −1 or −½ coarse).
    pub(super) points: Vec<(Vec<f64>, f64)>,
    /// Whether this level is the estimator's coarsest (its fine paths alone, `g_l` instead of
    /// `Δ_l`; see [`LevelAcc::make_base`]).
    #[serde(default)]
    pub(super) base: bool,
    /// For a base level: the datum evaluations of one fine path alone, estimated when it became
    /// the base and then measured on the fine-only samples it takes.
    #[serde(default)]
    fine_cost: f64,
    /// Fine-only samples taken as a base level, and their cost.
    #[serde(default)]
    fine_n: usize,
    #[serde(default)]
    fine_spent: Cost,
}

impl LevelAcc {
    pub(super) fn new(level: usize, keep: bool) -> Self {
        LevelAcc {
            level,
            n: 0,
            mean: 0.0,
            m2: 0.0,
            mean_f: 0.0,
            m2_f: 0.0,
            mean_r: 0.0,
            m2_r: 0.0,
            cost: Cost::default(),
            keep,
            points: Vec::new(),
            base: false,
            fine_cost: 0.0,
            fine_n: 0,
            fine_spent: Cost::default(),
        }
    }

    /// Makes this level the estimator's coarsest: its statistics become those of its fine
    /// values `g_l` (the coarse paths of its samples are dropped from the measure), and the
    /// samples it takes from now on run the fine path alone. `fine_fraction` is the share of a
    /// coupled sample's steps that are the fine path's.
    pub(super) fn make_base(&mut self, fine_fraction: f64) {
        self.fine_cost = self.cost_per_sample() * fine_fraction;
        self.mean = self.mean_f;
        self.m2 = self.m2_f;
        self.points.retain(|(_, class)| *class > 0.0);
        self.base = true;
    }

    pub(super) fn push(&mut self, x: LevelSample) {
        self.n += 1;
        let k = self.n as f64;
        let d1 = x.delta - self.mean;
        self.mean += d1 / k;
        self.m2 += d1 * (x.delta - self.mean);
        let d2 = x.fine - self.mean_f;
        self.mean_f += d2 / k;
        self.m2_f += d2 * (x.fine - self.mean_f);
        let r = x.fine - x.half;
        let d3 = r - self.mean_r;
        self.mean_r += d3 / k;
        self.m2_r += d3 * (r - self.mean_r);
        self.cost += x.cost;
        if self.base {
            self.fine_n += 1;
            self.fine_spent += x.cost;
        }
        if self.keep {
            let n_pts = x.points.len();
            for (j, p) in x.points.into_iter().enumerate() {
                let class = if j == 0 {
                    1.0
                } else if n_pts == 3 {
                    -0.5
                } else {
                    -1.0
                };
                self.points.push((p, class));
            }
        }
    }

    pub(super) fn var(&self) -> f64 {
        if self.n > 1 { self.m2 / (self.n - 1) as f64 } else { 0.0 }
    }

    /// Datum evaluations per sample (1 before any sample, so budgets stay finite); for a base
    /// level, per fine-only sample.
    pub(super) fn cost_per_sample(&self) -> f64 {
        if self.base {
            if self.fine_n > 0 {
                ((self.fine_spent.datum_gradients + self.fine_spent.datum_hvps) as f64 / self.fine_n as f64).max(1.0)
            } else {
                self.fine_cost.max(1.0)
            }
        } else if self.n == 0 {
            1.0
        } else {
            ((self.cost.datum_gradients + self.cost.datum_hvps) as f64 / self.n as f64).max(1.0)
        }
    }
}

/// The least-squares slope α of `−log₂ y_l` against l (the decay rate of `y_l ∝ 2^(−αl)`).
pub(super) fn decay_rate(y: &[f64]) -> f64 {
    let pts: Vec<(f64, f64)> =
        y.iter().enumerate().filter(|(_, v)| **v > 0.0).map(|(l, v)| (l as f64, -v.log2())).collect();
    if pts.len() < 2 {
        return 0.5;
    }
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx > 0.0 { sxy / sxx } else { 0.5 }
}
