//! Multilevel and antithetic multilevel SGLD (Giles, Nagapetyan, Szpruch, Vollmer & Zygalakis).

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len, check_positive};
use crate::estimate::Estimate;
use crate::gradient::{SubsampledEstimator, uniform_below};
use crate::model::{Model, check_model};
use crate::rng::{DEFAULT_SEED, fill_standard_normal, stream};
use ndarray::{Array1, Array2};
use rayon::prelude::*;

/// How the coarse path of a level is coupled to the fine one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MlCoupling {
    /// Algorithm 1: one coarse path; its minibatch is n indices drawn **without replacement**
    /// from the union τ¹ ∪ τ² of the two fine minibatches; `Δ_l = g(θᶠ) − g(θᶜ)`.
    Subsampling,
    /// Algorithm 2 (the default): two coarse paths, c⁺ on τ¹ and c⁻ on τ², both with the summed
    /// Gaussian increment; `Δ_l = g(θᶠ) − ½(g(θᶜ⁺) + g(θᶜ⁻))`.
    #[default]
    Antithetic,
}

/// Settings of [`MlSgld`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MlSgldSettings {
    /// The level-0 step h₀ (level l uses `h_l = h₀ 2^(−l)`). The paper takes `1/N`. Default 1e-3.
    pub h0: f64,
    /// m ≥ 1 in the horizons `T_l = m (l + 1) h₀`. The paper takes 5. Default 5.
    pub horizon: usize,
    /// The coupling. Default [`MlCoupling::Antithetic`].
    pub coupling: MlCoupling,
    /// Path averaging (§3.3): replace end-point values by averages over the last `W = window · h₀`
    /// of time, **the same time window for the fine and coarse paths of every level** (so the
    /// telescoping sum stays consistent), `0 < window ≤ horizon`. `None` (the default): end points.
    pub averaging_window: Option<f64>,
    /// Master seed: sample i of level l uses the stream `(seed, [l, i])`. Default [`DEFAULT_SEED`].
    pub seed: u64,
    /// Run the samples of a level in parallel on rayon (results are identical either way).
    /// Default true.
    pub parallel: bool,
    /// Keep the end points, so that the result can also be given as a signed-weight
    /// [`Estimate`] (not with averaging). Default false.
    pub keep_points: bool,
}

impl Default for MlSgldSettings {
    fn default() -> Self {
        MlSgldSettings {
            h0: 1e-3,
            horizon: 5,
            coupling: MlCoupling::Antithetic,
            averaging_window: None,
            seed: DEFAULT_SEED,
            parallel: true,
            keep_points: false,
        }
    }
}

impl MlSgldSettings {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        check_positive("h0", self.h0)?;
        if self.horizon == 0 {
            return Err(Error::invalid("horizon", self.horizon, "must be >= 1"));
        }
        if let Some(w) = self.averaging_window
            && !(w > 0.0 && w <= self.horizon as f64)
        {
            return Err(Error::invalid("averaging_window", w, "must be in (0, horizon] (units of h0)"));
        }
        Ok(())
    }
}

/// Settings of [`MlSgld::run_adaptive`] (Giles' adaptive MLMC).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveSettings {
    /// The target root-mean-square error ε of the estimate of `π(g)` (its bias being that of the
    /// finest level's law).
    pub rmse: f64,
    /// Samples taken at a new level before its variance is trusted. Default 100.
    pub n_initial: usize,
    /// Levels start at 0..=2 and are added up to this one. Default 10.
    pub max_level: usize,
    /// Stop with [`Error::BudgetExhausted`] once this many datum evaluations (gradients plus
    /// Hessian-vector products) have been spent. Default `None` (no limit).
    pub max_cost: Option<u64>,
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        AdaptiveSettings { rmse: 1e-2, n_initial: 100, max_level: 10, max_cost: None }
    }
}

/// Statistics of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// The level l.
    pub level: usize,
    /// Samples taken.
    pub n_samples: usize,
    /// The mean of `Δ_l` (for l = 0, of `g_0`).
    pub mean: f64,
    /// The sample variance of `Δ_l`.
    pub variance: f64,
    /// The mean of the fine quantity `g_l` alone (a plain single-level estimate at level l).
    pub mean_fine: f64,
    /// The sample variance of `g_l`.
    pub variance_fine: f64,
    /// Work spent on this level.
    pub cost: Cost,
    /// Datum evaluations (gradients + Hessian-vector products) per sample.
    pub cost_per_sample: f64,
}

/// The result of a multilevel run.
#[derive(Debug, Clone)]
pub struct MlmcResult {
    /// The multilevel estimate `Σ_l mean(Δ_l)` of `π(g)`.
    pub estimate: f64,
    /// Its estimated variance `Σ_l V_l / N_l`.
    pub variance: f64,
    /// Per-level statistics, level 0 first.
    pub levels: Vec<LevelStats>,
    /// Total work, the estimator's setup included.
    pub cost: Cost,
    /// Total datum-gradient evaluations divided by N.
    pub epochs: f64,
    /// The estimated remaining bias `|mean Δ_L| / (2^α − 1)` (adaptive runs; `None` for fixed).
    pub bias_estimate: Option<f64>,
    /// The signed-weight measure of the end points, if `keep_points` was set (no averaging):
    /// weight `1/N_l` on each fine point, `−1/N_l` on each coarse one (`−1/(2N_l)` on each of the
    /// antithetic pair), so that `expectation(g)` reproduces `estimate`.
    pub measure: Option<Estimate>,
}

/// Multilevel SGLD for `π(g)`: `E[g_L] = E[g_0] + Σ_{l=1}^{L} E[g_l − g_{l−1}]`, each term estimated
/// from independent samples, level l with step `h_l = h₀ 2^(−l)` and horizon
/// `T_l = m(l + 1)h₀` (`s_l = T_l/h_l` steps) from θ₀.
///
/// One sample of level l ≥ 1: the fine path runs alone for `(T_l − T_{l−1})/h_l` steps, then fine
/// and coarse (the coarse from θ₀) run jointly for `T_{l−1}/h_{l−1}` coarse steps; each coarse step
/// uses the Gaussian `(ξ₁ + ξ₂)/√2` of the two fine steps it spans, and its minibatch as set by
/// [`MlCoupling`]. Level 0 is a single path. Every minibatch has the estimator's size n; the
/// gradient estimator is any [`SubsampledEstimator`] ([`Minibatch`](crate::Minibatch),
/// [`ControlVariate`](crate::ControlVariate), [`Taylor`](crate::Taylor)).
///
/// Samples are independent: they run on rayon with per-sample streams `(seed, [l, i])`, so results
/// do not depend on the number of threads.
///
/// Reference: M. B. Giles, T. Nagapetyan, L. Szpruch, S. J. Vollmer, K. C. Zygalakis, *Multilevel
/// Monte Carlo for scalable Bayesian computations*, arXiv:1609.06144 (2016/2017); M. B. Giles,
/// *Multilevel Monte Carlo path simulation*, Operations Research 56(3), 2008.
#[derive(Debug, Clone)]
pub struct MlSgld<E> {
    settings: MlSgldSettings,
    estimator: E,
    theta0: Vec<f64>,
}

/// One sample of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelSample {
    /// `Δ_l` (for level 0, `g_0`).
    pub delta: f64,
    /// The fine quantity `g_l`.
    pub fine: f64,
    /// Its cost.
    pub cost: Cost,
    /// End points (fine, then coarse ones), if kept.
    pub points: Vec<Vec<f64>>,
}

struct Work {
    fine: Vec<f64>,
    c1: Vec<f64>,
    c2: Vec<f64>,
    z1: Vec<f64>,
    z2: Vec<f64>,
    zc: Vec<f64>,
    grad: Vec<f64>,
    idx1: Vec<usize>,
    idx2: Vec<usize>,
    pool: Vec<usize>,
}

impl Work {
    fn new(d: usize, n: usize) -> Self {
        Work {
            fine: vec![0.0; d],
            c1: vec![0.0; d],
            c2: vec![0.0; d],
            z1: vec![0.0; d],
            z2: vec![0.0; d],
            zc: vec![0.0; d],
            grad: vec![0.0; d],
            idx1: vec![0; n],
            idx2: vec![0; n],
            pool: vec![0; 2 * n],
        }
    }
}

/// One Langevin step `x ← x − h ∇Ũ_S(x) + √(2h) z` on the index set `idx`.
fn langevin<M: Model + ?Sized, E: SubsampledEstimator>(
    est: &mut E,
    model: &M,
    x: &mut [f64],
    grad: &mut [f64],
    idx: &[usize],
    h: f64,
    z: &[f64],
) {
    est.eval_on(model, x, idx, grad);
    let s = (2.0 * h).sqrt();
    for ((xi, g), zi) in x.iter_mut().zip(grad.iter()).zip(z) {
        *xi += s * zi - h * g;
    }
}

fn draw<R: rand::Rng + ?Sized>(rng: &mut R, n_data: usize, idx: &mut [usize]) {
    for i in idx.iter_mut() {
        *i = uniform_below(rng, n_data as u64) as usize;
    }
}

/// Running average over the last `p` states of a path of `total` steps.
struct Avg {
    from: usize,
    acc: f64,
    count: usize,
}

impl Avg {
    fn new(total: usize, p: Option<usize>) -> Self {
        let p = p.unwrap_or(1).clamp(1, total.max(1));
        Avg { from: total + 1 - p, acc: 0.0, count: 0 }
    }
    #[inline]
    fn add<G: Fn(&[f64]) -> f64>(&mut self, step: usize, g: &G, x: &[f64]) {
        if step >= self.from {
            self.acc += g(x);
            self.count += 1;
        }
    }
    fn value(&self) -> f64 {
        self.acc / self.count.max(1) as f64
    }
}

impl<E: SubsampledEstimator> MlSgld<E> {
    /// Multilevel SGLD from θ₀ (usually the MAP) with the given estimator; errors on invalid
    /// settings or a non-finite θ₀.
    pub fn new(settings: MlSgldSettings, estimator: E, theta0: &[f64]) -> Result<Self> {
        settings.validate()?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteState { iteration: 0 });
        }
        Ok(MlSgld { settings, estimator, theta0: theta0.to_vec() })
    }

    /// The settings.
    pub fn settings(&self) -> &MlSgldSettings {
        &self.settings
    }

    /// Steps of the fine path of level l: `s_l = m (l + 1) 2^l`.
    pub fn steps(&self, level: usize) -> usize {
        (self.settings.horizon * (level + 1)) << level
    }

    fn window_steps(&self, h: f64) -> Option<usize> {
        self.settings.averaging_window.map(|w| ((w * self.settings.h0 / h).round() as usize).max(1))
    }

    /// Sample `index` of level `level` (deterministic given the seed).
    pub fn sample<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        level: usize,
        index: u64,
    ) -> Result<LevelSample> {
        let mut est = self.estimator.clone();
        est.prepare(model)?;
        let mut w = Work::new(model.dim(), est.batch_size());
        self.sample_with(&mut est, &mut w, model, g, level, index)
    }

    fn sample_with<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        est: &mut E,
        w: &mut Work,
        model: &M,
        g: &G,
        level: usize,
        index: u64,
    ) -> Result<LevelSample> {
        let mut rng = stream(self.settings.seed, &[level as u64, index]);
        let before = est.cost();
        let n_data = model.n_data();
        let m = self.settings.horizon;
        let h0 = self.settings.h0;
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        w.fine.copy_from_slice(&self.theta0);
        if level == 0 {
            let total = m;
            let mut avg = Avg::new(total, self.window_steps(h0));
            for step in 1..=total {
                draw(&mut rng, n_data, &mut w.idx1);
                fill_standard_normal(&mut rng, &mut w.z1);
                langevin(est, model, &mut w.fine, &mut w.grad, &w.idx1, h0, &w.z1);
                avg.add(step, g, &w.fine);
            }
            if !all_finite(&w.fine) {
                return Err(Error::NonFiniteState { iteration: total as u64 });
            }
            let v = avg.value();
            let points = if keep { vec![w.fine.clone()] } else { Vec::new() };
            return Ok(LevelSample { delta: v, fine: v, cost: diff(est.cost(), before), points });
        }
        let hf = h0 / (1u64 << level) as f64;
        let hc = 2.0 * hf;
        let alone = m << level;
        let coupled = (m * level) << (level - 1);
        let total_fine = alone + 2 * coupled;
        let mut avg_f = Avg::new(total_fine, self.window_steps(hf));
        let mut avg_c1 = Avg::new(coupled, self.window_steps(hc));
        let mut avg_c2 = Avg::new(coupled, self.window_steps(hc));
        for step in 1..=alone {
            draw(&mut rng, n_data, &mut w.idx1);
            fill_standard_normal(&mut rng, &mut w.z1);
            langevin(est, model, &mut w.fine, &mut w.grad, &w.idx1, hf, &w.z1);
            avg_f.add(step, g, &w.fine);
        }
        w.c1.copy_from_slice(&self.theta0);
        w.c2.copy_from_slice(&self.theta0);
        let r2 = std::f64::consts::FRAC_1_SQRT_2;
        let n = w.idx1.len();
        for k in 1..=coupled {
            draw(&mut rng, n_data, &mut w.idx1);
            draw(&mut rng, n_data, &mut w.idx2);
            fill_standard_normal(&mut rng, &mut w.z1);
            fill_standard_normal(&mut rng, &mut w.z2);
            langevin(est, model, &mut w.fine, &mut w.grad, &w.idx1, hf, &w.z1);
            avg_f.add(alone + 2 * k - 1, g, &w.fine);
            langevin(est, model, &mut w.fine, &mut w.grad, &w.idx2, hf, &w.z2);
            avg_f.add(alone + 2 * k, g, &w.fine);
            for ((c, a), b) in w.zc.iter_mut().zip(&w.z1).zip(&w.z2) {
                *c = (a + b) * r2;
            }
            match self.settings.coupling {
                MlCoupling::Antithetic => {
                    langevin(est, model, &mut w.c1, &mut w.grad, &w.idx1, hc, &w.zc);
                    langevin(est, model, &mut w.c2, &mut w.grad, &w.idx2, hc, &w.zc);
                    avg_c2.add(k, g, &w.c2);
                }
                MlCoupling::Subsampling => {
                    // n indices without replacement from the 2n-element multiset τ¹ ∪ τ².
                    w.pool[..n].copy_from_slice(&w.idx1);
                    w.pool[n..].copy_from_slice(&w.idx2);
                    for j in 0..n {
                        let r = j + uniform_below(&mut rng, (2 * n - j) as u64) as usize;
                        w.pool.swap(j, r);
                    }
                    langevin(est, model, &mut w.c1, &mut w.grad, &w.pool[..n], hc, &w.zc);
                }
            }
            avg_c1.add(k, g, &w.c1);
        }
        if !all_finite(&w.fine) || !all_finite(&w.c1) || !all_finite(&w.c2) {
            return Err(Error::NonFiniteState { iteration: total_fine as u64 });
        }
        let fine = avg_f.value();
        let coarse = match self.settings.coupling {
            MlCoupling::Antithetic => 0.5 * (avg_c1.value() + avg_c2.value()),
            MlCoupling::Subsampling => avg_c1.value(),
        };
        let points = if keep {
            match self.settings.coupling {
                MlCoupling::Antithetic => vec![w.fine.clone(), w.c1.clone(), w.c2.clone()],
                MlCoupling::Subsampling => vec![w.fine.clone(), w.c1.clone()],
            }
        } else {
            Vec::new()
        };
        Ok(LevelSample { delta: fine - coarse, fine, cost: diff(est.cost(), before), points })
    }

    /// Adds samples `acc.n .. acc.n + count` of `level` to `acc`, in chunks (parallel within a
    /// chunk if set), folded in index order so the sums do not depend on the thread count.
    /// Checks the budget before each chunk.
    fn extend_level<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        acc: &mut LevelAcc,
        count: usize,
        budget: &mut Budget,
    ) -> Result<()> {
        const CHUNK: usize = 4096;
        let mut proto = self.estimator.clone();
        proto.prepare(model)?;
        let (d, n) = (model.dim(), proto.batch_size());
        let mut left = count;
        while left > 0 {
            let c = left.min(CHUNK);
            budget.check(acc.cost_per_sample() * c as f64)?;
            let first = acc.n as u64;
            let range = first..first + c as u64;
            let level = acc.level;
            let out: Vec<Result<LevelSample>> = if self.settings.parallel {
                range
                    .into_par_iter()
                    .map_init(
                        || (proto.clone(), Work::new(d, n)),
                        |(e, w), i| self.sample_with(e, w, model, g, level, i),
                    )
                    .collect()
            } else {
                let (mut e, mut w) = (proto.clone(), Work::new(d, n));
                range.map(|i| self.sample_with(&mut e, &mut w, model, g, level, i)).collect()
            };
            for r in out {
                let x = r?;
                budget.spent += (x.cost.datum_gradients + x.cost.datum_hvps) as f64;
                acc.push(x);
            }
            left -= c;
        }
        Ok(())
    }

    fn check<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        check_model(model)?;
        check_len("theta0", model.dim(), self.theta0.len())
    }

    /// Statistics of `n_samples` samples (indices `0..n_samples`) of one level alone, e.g. to study
    /// how `Var[Δ_l]` decays with l.
    ///
    /// Errors: [`Error::NoSamples`] for fewer than 2 samples; model, estimator and non-finite
    /// errors.
    pub fn level<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        level: usize,
        n_samples: usize,
    ) -> Result<LevelStats> {
        self.check(model)?;
        if n_samples < 2 {
            return Err(Error::NoSamples { reason: "a level needs at least 2 samples" });
        }
        let mut acc = LevelAcc::new(level, false);
        self.extend_level(model, g, &mut acc, n_samples, &mut Budget::unlimited())?;
        let mut r = self.summarise(model, &[acc], None);
        Ok(r.levels.remove(0))
    }

    /// Fixed levels 0..samples.len() with `samples[l]` samples at level l.
    ///
    /// Errors: [`Error::NoSamples`] for an empty list or a level with fewer than 2 samples; model,
    /// estimator and non-finite errors.
    pub fn run_fixed<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        samples: &[usize],
    ) -> Result<MlmcResult> {
        self.check(model)?;
        if samples.is_empty() || samples.iter().any(|&n| n < 2) {
            return Err(Error::NoSamples { reason: "every level needs at least 2 samples" });
        }
        let mut budget = Budget::unlimited();
        let mut data = Vec::new();
        for (l, &n) in samples.iter().enumerate() {
            let mut acc = LevelAcc::new(l, self.settings.keep_points && self.settings.averaging_window.is_none());
            self.extend_level(model, g, &mut acc, n, &mut budget)?;
            data.push(acc);
        }
        Ok(self.summarise(model, &data, None))
    }

    /// Giles' adaptive MLMC for a target RMSE ε: start with levels 0..=2 and `n_initial` samples
    /// each; repeatedly set `N_l = ⌈2ε⁻² √(V_l/C_l) Σ_k √(V_k C_k)⌉` (so `Σ V_l/N_l ≤ ε²/2`) and
    /// take the missing samples; stop when the estimated remaining bias
    /// `|mean Δ_L| / (2^α − 1)` (α fitted to the decay of `|mean Δ_l|`, at least 0.5) is below
    /// `ε/√2`, else add a level.
    ///
    /// Errors: [`Error::BudgetExhausted`] (with what was achieved) when the next batch of samples
    /// would exceed `max_cost`, or `max_level` is reached before the bias test passes; invalid
    /// settings; model errors.
    pub fn run_adaptive<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        target: &AdaptiveSettings,
    ) -> Result<MlmcResult> {
        self.check(model)?;
        check_positive("rmse", target.rmse)?;
        if target.n_initial < 2 {
            return Err(Error::invalid("n_initial", target.n_initial, "must be >= 2"));
        }
        if target.max_level < 2 {
            return Err(Error::invalid("max_level", target.max_level, "must be >= 2"));
        }
        let setup = self.estimator.setup_cost();
        let mut budget = Budget { spent: (setup.datum_gradients + setup.datum_hvps) as f64, max: target.max_cost };
        let eps = target.rmse;
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        let mut data: Vec<LevelAcc> = Vec::new();
        let exhausted = |me: &Self, data: &[LevelAcc], reason: &'static str, bias: f64| {
            let r = me.summarise(model, data, None);
            Error::BudgetExhausted {
                reason,
                estimate: r.estimate,
                estimated_rmse: (r.variance + bias * bias).sqrt(),
                datum_evaluations: r.cost.datum_gradients + r.cost.datum_hvps,
            }
        };
        let over = "max_cost would be exceeded before the target RMSE is reached";
        for l in 0..=2 {
            let mut acc = LevelAcc::new(l, keep);
            if let Err(e) = self.extend_level(model, g, &mut acc, target.n_initial, &mut budget) {
                data.push(acc);
                return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                    exhausted(self, &data, over, 0.0)
                } else {
                    e
                });
            }
            data.push(acc);
        }
        loop {
            let stats: Vec<(f64, f64)> =
                data.iter().map(|a| (a.var().max(f64::MIN_POSITIVE), a.cost_per_sample())).collect();
            let sum: f64 = stats.iter().map(|(v, c)| (v * c).sqrt()).sum();
            for (l, (v, c)) in stats.iter().enumerate() {
                let want = (2.0 / (eps * eps) * (v / c).sqrt() * sum).ceil();
                let have = data[l].n as f64;
                if want > have {
                    let extra = want - have;
                    if budget.max.is_some_and(|m| budget.spent + extra * c > m as f64) {
                        return Err(exhausted(self, &data, over, 0.0));
                    }
                    if let Err(e) = self.extend_level(model, g, &mut data[l], extra as usize, &mut budget) {
                        return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                            exhausted(self, &data, over, 0.0)
                        } else {
                            e
                        });
                    }
                }
            }
            let means: Vec<f64> = data.iter().map(|a| a.mean.abs()).collect();
            let big_l = data.len() - 1;
            let alpha = decay_rate(&means[1..]).max(0.5);
            let bias = means[big_l] / (2f64.powf(alpha) - 1.0);
            if bias <= eps / std::f64::consts::SQRT_2 {
                return Ok(self.summarise(model, &data, Some(bias)));
            }
            if big_l >= target.max_level {
                return Err(exhausted(self, &data, "max_level reached before the bias test passed", bias));
            }
            let mut acc = LevelAcc::new(big_l + 1, keep);
            let r = self.extend_level(model, g, &mut acc, target.n_initial, &mut budget);
            data.push(acc);
            if let Err(e) = r {
                return Err(if matches!(e, Error::BudgetExhausted { .. }) {
                    exhausted(self, &data, over, bias)
                } else {
                    e
                });
            }
        }
    }

    fn summarise<M: Model + ?Sized>(&self, model: &M, data: &[LevelAcc], bias: Option<f64>) -> MlmcResult {
        let mut levels = Vec::new();
        let mut cost = self.estimator.setup_cost();
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
        let epochs = cost.datum_gradients as f64 / model.n_data() as f64;
        MlmcResult { estimate, variance, levels, cost, epochs, bias_estimate: bias, measure }
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

/// Work spent and the limit, in datum evaluations (gradients + Hessian-vector products).
struct Budget {
    spent: f64,
    max: Option<u64>,
}

impl Budget {
    fn unlimited() -> Self {
        Budget { spent: 0.0, max: None }
    }

    fn check(&self, next: f64) -> Result<()> {
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
struct LevelAcc {
    level: usize,
    n: usize,
    mean: f64,
    m2: f64,
    mean_f: f64,
    m2_f: f64,
    cost: Cost,
    keep: bool,
    /// End points with their weight class (+1 fine / level 0, −1 or −½ coarse).
    points: Vec<(Vec<f64>, f64)>,
}

impl LevelAcc {
    fn new(level: usize, keep: bool) -> Self {
        LevelAcc {
            level,
            n: 0,
            mean: 0.0,
            m2: 0.0,
            mean_f: 0.0,
            m2_f: 0.0,
            cost: Cost::default(),
            keep,
            points: Vec::new(),
        }
    }

    fn push(&mut self, x: LevelSample) {
        self.n += 1;
        let k = self.n as f64;
        let d1 = x.delta - self.mean;
        self.mean += d1 / k;
        self.m2 += d1 * (x.delta - self.mean);
        let d2 = x.fine - self.mean_f;
        self.mean_f += d2 / k;
        self.m2_f += d2 * (x.fine - self.mean_f);
        self.cost += x.cost;
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

    fn var(&self) -> f64 {
        if self.n > 1 { self.m2 / (self.n - 1) as f64 } else { 0.0 }
    }

    /// Datum evaluations per sample (1 before any sample, so budgets stay finite).
    fn cost_per_sample(&self) -> f64 {
        if self.n == 0 {
            1.0
        } else {
            ((self.cost.datum_gradients + self.cost.datum_hvps) as f64 / self.n as f64).max(1.0)
        }
    }
}

fn diff(a: Cost, b: Cost) -> Cost {
    Cost {
        datum_gradients: a.datum_gradients - b.datum_gradients,
        datum_potentials: a.datum_potentials - b.datum_potentials,
        datum_hvps: a.datum_hvps - b.datum_hvps,
    }
}

/// The least-squares slope α of `−log₂ y_l` against l (the decay rate of `y_l ∝ 2^(−αl)`).
fn decay_rate(y: &[f64]) -> f64 {
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
