//! One level's coupled samples: the fine and coarse paths of a sample, a level's batch of
//! samples on a placement (in sample order, whatever runs where).

use crate::cost::Cost;
use crate::coupled::SharedIncrements;
use crate::coupled::mlsgld::allocate::{Dropped, LevelAcc, Spend};
use crate::coupled::mlsgld::coupling::MlCoupling;
use crate::coupled::mlsgld::level_sample::LevelSample;
use crate::coupled::mlsgld::sampler::MlSgld;
use crate::coupled::mlsgld::settings::{LevelStats, MlSgldSettings};
use crate::error::{Error, Result, all_finite, check_len, check_positive};
use crate::gradient::uniform_below;
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::stream;
use crate::run::placement::{Failure, Local, Placement, rank_error};
use crate::samplers::SubsampledDiscretisation;
use serde::{Deserialize, Serialize};

/// The three paths of a sample and their buffers, reused from sample to sample.
pub(super) struct Work<S> {
    fine: S,
    c1: S,
    c2: S,
    z: SharedIncrements,
    idx1: Vec<usize>,
    idx2: Vec<usize>,
    pool: Vec<usize>,
}

impl<S: SubsampledDiscretisation> Work<S> {
    pub(super) fn new(base: &S, d: usize) -> Self {
        let n = base.batch_size();
        Work {
            fine: base.clone(),
            c1: base.clone(),
            c2: base.clone(),
            z: SharedIncrements::new(base.increment_len(d)),
            idx1: vec![0; n],
            idx2: vec![0; n],
            pool: vec![0; 2 * n],
        }
    }

    fn cost(&self) -> Cost {
        self.fine.cost() + self.c1.cost() + self.c2.cost()
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

/// Wraps an error of one path of one sample with where it happened.
fn at(level: usize, sample: u64, path: &'static str) -> impl Fn(Error) -> Error {
    move |e| Error::Sample { level, sample, path, source: Box::new(e) }
}

impl<S: SubsampledDiscretisation> MlSgld<S> {
    /// Multilevel estimation over paths of `base` from θ₀ (usually the MAP). The base sampler's
    /// time step must be constant: it is h₀.
    ///
    /// Errors: invalid settings; [`Error::NonFiniteState`] for a non-finite θ₀;
    /// [`Error::InvalidParameter`] (`step_size`) if the base sampler's time step is not constant.
    pub fn new(settings: MlSgldSettings, base: S, theta0: &[f64]) -> Result<Self> {
        settings.validate()?;
        if !all_finite(theta0) {
            return Err(Error::NonFiniteStart { what: "theta0" });
        }
        let h0 = base.time_step(1);
        if !base.is_constant_time_step() {
            return Err(Error::invalid("step_size", h0, "multilevel SGLD needs a constant step (it is h0)"));
        }
        check_positive("step_size", h0)?;
        Ok(MlSgld { settings, base, h0, theta0: theta0.to_vec() })
    }

    /// The settings.
    pub fn settings(&self) -> &MlSgldSettings {
        &self.settings
    }

    /// The base sampler.
    pub fn base(&self) -> &S {
        &self.base
    }

    /// The level-0 time step h₀ (the base sampler's).
    pub fn h0(&self) -> f64 {
        self.h0
    }

    /// Steps of the fine path of level l: `s_l = m (l + 1) 2^l`.
    ///
    /// Errors: [`Error::InvalidParameter`] (`level`) if that number does not fit in a `usize`.
    pub fn steps(&self, level: usize) -> Result<usize> {
        u32::try_from(level)
            .ok()
            .and_then(|l| 1usize.checked_shl(l))
            .and_then(|p| p.checked_mul(level + 1))
            .and_then(|p| p.checked_mul(self.settings.horizon))
            .ok_or_else(|| Error::invalid("level", level, "its path would have more steps than fit in a usize"))
    }

    fn window_steps(&self, fraction: f64) -> Option<usize> {
        self.settings.averaging_window.map(|w| ((w / fraction).round() as usize).max(1))
    }

    /// Sample `index` of level `level` (deterministic given the seed).
    ///
    /// Errors: [`Error::Sample`] around the path's error (non-finite gradient or state with its
    /// iteration); model and estimator errors.
    pub fn sample<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        level: usize,
        index: u64,
    ) -> Result<LevelSample> {
        self.check(model)?;
        let mut w = Work::new(&self.base, model.dim());
        self.sample_with(&mut w, model, g, level, index, false)
    }

    /// A level-0 sample: one path of `horizon` steps at h₀, from θ₀ (its g averaged over the
    /// window, and at the path's midpoint for the relaxation test).
    fn level0_sample<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        w: &mut Work<S>,
        model: &M,
        g: &G,
        rng: &mut crate::numeric::rng::ChainRng,
        before: Cost,
        index: u64,
    ) -> Result<LevelSample> {
        let fine_at = at(0, index, "fine");
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        let total = self.settings.horizon;
        let mut avg = Avg::new(total, self.window_steps(1.0));
        let mid = total.div_ceil(2);
        let mut half = g(w.fine.position());
        for step in 1..=total {
            w.fine.draw_indices(rng, &mut w.idx1);
            crate::numeric::rng::fill_standard_normal(rng, &mut w.z.z1);
            w.fine.step_on(model, step as u64, 1.0, &w.z.z1, &w.idx1).map_err(&fine_at)?;
            avg.add(step, g, w.fine.position());
            if step == mid {
                half = g(w.fine.position());
            }
        }
        let v = avg.value();
        let points = if keep { vec![w.fine.position().to_vec()] } else { Vec::new() };
        Ok(LevelSample { delta: v, fine: v, cost: w.cost() - before, points, half })
    }

    pub(super) fn sample_with<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        w: &mut Work<S>,
        model: &M,
        g: &G,
        level: usize,
        index: u64,
        fine_only: bool,
    ) -> Result<LevelSample> {
        // Checks that every step count of the level fits (so the shifts below cannot overflow).
        self.steps(level)?;
        let mut rng = stream(self.settings.seed, &[level as u64, index]);
        let before = w.cost();
        let m = self.settings.horizon;
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        let (fine_at, c1_at, c2_at) =
            (at(level, index, "fine"), at(level, index, "coarse"), at(level, index, "coarse (antithetic)"));
        w.fine.restart(model, &self.theta0).map_err(&fine_at)?;
        if level == 0 {
            return self.level0_sample(w, model, g, &mut rng, before, index);
        }
        let ff = 1.0 / (1u64 << level) as f64;
        let fc = 2.0 * ff;
        let alone = m << level;
        let coupled = (m * level) << (level - 1);
        let total_fine = alone + 2 * coupled;
        let mut avg_f = Avg::new(total_fine, self.window_steps(ff));
        let mut avg_c1 = Avg::new(coupled, self.window_steps(fc));
        let mut avg_c2 = Avg::new(coupled, self.window_steps(fc));
        for step in 1..=alone {
            w.fine.draw_indices(&mut rng, &mut w.idx1);
            crate::numeric::rng::fill_standard_normal(&mut rng, &mut w.z.z1);
            w.fine.step_on(model, step as u64, ff, &w.z.z1, &w.idx1).map_err(&fine_at)?;
            avg_f.add(step, g, w.fine.position());
        }
        let antithetic = self.settings.coupling == MlCoupling::Antithetic;
        // A base level's sample (`fine_only`) runs the fine path alone, drawing the same random
        // numbers as a coupled sample, so that its fine value is the coupled sample's.
        if !fine_only {
            w.c1.restart(model, &self.theta0).map_err(&c1_at)?;
            if antithetic {
                w.c2.restart(model, &self.theta0).map_err(&c2_at)?;
            }
        }
        let n = w.idx1.len();
        for k in 1..=coupled {
            w.fine.draw_indices(&mut rng, &mut w.idx1);
            w.fine.draw_indices(&mut rng, &mut w.idx2);
            let (kf, kc) = ((alone + 2 * k - 1) as u64, k as u64);
            w.z.draw(&w.fine, kc, fc, &mut rng);
            w.fine.step_on(model, kf, ff, &w.z.z1, &w.idx1).map_err(&fine_at)?;
            avg_f.add(alone + 2 * k - 1, g, w.fine.position());
            w.fine.step_on(model, kf + 1, ff, &w.z.z2, &w.idx2).map_err(&fine_at)?;
            avg_f.add(alone + 2 * k, g, w.fine.position());
            if fine_only {
                if !antithetic {
                    for j in 0..n {
                        uniform_below(&mut rng, (2 * n - j) as u64);
                    }
                }
                continue;
            }
            if antithetic {
                w.c1.step_on(model, kc, fc, &w.z.coarse, &w.idx1).map_err(&c1_at)?;
                w.c2.step_on(model, kc, fc, &w.z.coarse, &w.idx2).map_err(&c2_at)?;
                avg_c2.add(k, g, w.c2.position());
            } else {
                // n indices without replacement from the 2n-element multiset τ¹ ∪ τ².
                w.pool[..n].copy_from_slice(&w.idx1);
                w.pool[n..].copy_from_slice(&w.idx2);
                for j in 0..n {
                    let r = j + uniform_below(&mut rng, (2 * n - j) as u64) as usize;
                    w.pool.swap(j, r);
                }
                w.c1.step_on(model, kc, fc, &w.z.coarse, &w.pool[..n]).map_err(&c1_at)?;
            }
            avg_c1.add(k, g, w.c1.position());
        }
        let fine = avg_f.value();
        if fine_only {
            let points = if keep { vec![w.fine.position().to_vec()] } else { Vec::new() };
            return Ok(LevelSample { delta: fine, fine, cost: w.cost() - before, points, half: fine });
        }
        let coarse = if antithetic { 0.5 * (avg_c1.value() + avg_c2.value()) } else { avg_c1.value() };
        let points = match (keep, antithetic) {
            (false, _) => Vec::new(),
            (true, true) => vec![w.fine.position().to_vec(), w.c1.position().to_vec(), w.c2.position().to_vec()],
            (true, false) => vec![w.fine.position().to_vec(), w.c1.position().to_vec()],
        };
        Ok(LevelSample { delta: fine - coarse, fine, cost: w.cost() - before, points, half: fine })
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
        budget: &mut Spend,
    ) -> Result<()> {
        self.extend_level_on(&Local, model, g, acc, count, budget)
    }

    /// As `extend_level`, the samples computed by `exec` (here, or spread over MPI ranks): the
    /// samples come back in index order and are folded in that order, so the statistics do not
    /// depend on where they were computed.
    pub(super) fn extend_level_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        acc: &mut LevelAcc,
        count: usize,
        budget: &mut Spend,
    ) -> Result<()> {
        const CHUNK: usize = 4096;
        let d = model.dim();
        let mut left = count;
        while left > 0 {
            let c = left.min(CHUNK);
            budget.check(acc.cost_per_sample() * c as f64)?;
            let first = acc.n as u64;
            let (level, fine_only) = (acc.level, acc.base);
            let compute = |indices: Vec<u64>| {
                crate::run::fan_out(
                    indices,
                    self.settings.parallel,
                    || Work::new(&self.base, d),
                    |w, i| self.sample_with(w, model, g, level, i, fine_only),
                )
            };
            for r in exec.samples(first..first + c as u64, &compute) {
                let x = r?;
                budget.spent += (x.cost.datum_gradients + x.cost.datum_hvps) as f64;
                acc.push(x);
            }
            left -= c;
        }
        Ok(())
    }

    pub(super) fn check<M: Model + ?Sized>(&self, model: &M) -> Result<()> {
        check_shape(model)?;
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
        self.extend_level(model, g, &mut acc, n_samples, &mut Spend::unlimited())?;
        let mut r = self.summarise(model, &[acc], None, &Dropped::default());
        Ok(r.levels.remove(0))
    }
}

/// Where the samples of a level are computed: `samples(range, compute)` returns the samples of
/// the indices in `range` in index order (at least up to the first failing one, whose error is
/// then in its place); `compute` takes a list of indices and returns their samples (or errors)
/// in that order. Implemented once, for every [`Placement`]: sample i of the range (counted from
/// its start) where `runs_here(i)` says, every sample then exchanged so that every process folds
/// all of them in index order.
pub(crate) trait SampleExec {
    fn samples(
        &self,
        range: std::ops::Range<u64>,
        compute: &dyn Fn(Vec<u64>) -> Vec<Result<LevelSample>>,
    ) -> Vec<Result<LevelSample>>;
}

/// One process's share of a batch of multilevel samples.
#[derive(Serialize, Deserialize)]
struct SampleReport {
    samples: Vec<(u64, LevelSample)>,
    failure: Option<(u64, Failure)>,
}

impl<P: Placement> SampleExec for P {
    fn samples(
        &self,
        range: std::ops::Range<u64>,
        compute: &dyn Fn(Vec<u64>) -> Vec<Result<LevelSample>>,
    ) -> Vec<Result<LevelSample>> {
        let mine: Vec<u64> = range.clone().filter(|i| self.runs_here(i - range.start)).collect();
        if !self.over_ranks() {
            return compute(mine);
        }
        let mut report = SampleReport { samples: Vec::with_capacity(mine.len()), failure: None };
        let mut my_error = None;
        for (&i, r) in mine.iter().zip(compute(mine.clone())) {
            match r {
                Ok(x) => report.samples.push((i, x)),
                Err(e) => {
                    report.failure = Some((i, Failure::of(&e)));
                    my_error = Some(e);
                    break;
                }
            }
        }
        let all: Vec<SampleReport> = match self.exchange(report, "multilevel samples") {
            Ok(all) => all,
            Err(e) => return vec![Err(e)],
        };
        let mut samples = Vec::with_capacity((range.end - range.start) as usize);
        let mut first_failure: Option<(u64, usize, Failure)> = None;
        for (rank, r) in all.into_iter().enumerate() {
            samples.extend(r.samples);
            if let Some((i, f)) = r.failure
                && first_failure.as_ref().is_none_or(|(j, _, _)| i < *j)
            {
                first_failure = Some((i, rank, f));
            }
        }
        samples.sort_by_key(|(i, _)| *i);
        let stop = first_failure.as_ref().map_or(u64::MAX, |(i, _, _)| *i);
        let mut out: Vec<Result<_>> = samples.into_iter().take_while(|(i, _)| *i < stop).map(|(_, x)| Ok(x)).collect();
        if let Some((_, rank, f)) = first_failure {
            // The first failing sample's rank, whatever the rank order.
            let mine = my_error.filter(|_| rank == self.rank());
            out.extend(rank_error(self, mine, &[(rank, f)]).map(Err));
        }
        out
    }
}
