//! The engine every run goes through: units driven in blocks between observation points, the
//! runaway detector, the recorder of draws, and the fan-out over threads.

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::observe::{Control, Observer, Progress};
use crate::run::output::Divergence;
use crate::run::settings::{OnDivergence, RunSettings, Storage};
use crate::trace::estimate::{Estimate, Moments, Part, Samples};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Watches ‖θ‖ for geometric growth: the largest norm up to each power of two is remembered, and
/// from iteration 64 on, ‖θ_k‖ is compared with the largest norm up to the power of two below
/// k/2 (so at least a quarter and at most half of the chain so far).
///
/// Growth alone is not proof: a chain started far below the scale of its posterior (θ₀ = 0 for a
/// posterior whose intercept is −40, say) with a step that adapts upwards (MALA's warm-up) also
/// grows geometrically for a while, downhill. So when the model has potentials, a trigger is
/// confirmed by the full-data potential: a chain whose `U(θ_k)` is below `U` at its start is
/// moving towards the posterior, not away from it, and the detector accepts the new scale
/// (later growth is measured from it). Those potential evaluations (two full passes over the data
/// per dismissed trigger; at most a handful per chain, as each one raises the scale by the
/// factor) are not counted in the run's cost, like [`check_model`](crate::check_model)'s.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunawayDetector {
    max_so_far: f64,
    at_last_power: f64,
    reference: f64,
    /// The scale accepted at a dismissed trigger (0 if none).
    pub(super) floor: f64,
    /// Where the chain started (or resumed), and `U` there once computed.
    start: Vec<f64>,
    start_potential: Option<Option<f64>>,
}

impl RunawayDetector {
    /// Starts watching at ‖θ‖ (the start, or the resume point).
    pub(crate) fn new(theta: &[f64]) -> Self {
        let n = crate::numeric::linalg::norm(theta);
        RunawayDetector {
            max_so_far: n,
            at_last_power: n,
            reference: n,
            floor: 0.0,
            start: theta.to_vec(),
            start_potential: None,
        }
    }

    /// Records ‖θ‖ at iteration `k` and errors if it ran away.
    #[inline]
    pub(crate) fn check<M: Model + ?Sized>(
        &mut self,
        model: &M,
        k: u64,
        theta: &[f64],
        gradient: Option<&[f64]>,
        factor: Option<f64>,
    ) -> Result<()> {
        let Some(factor) = factor else { return Ok(()) };
        let n = crate::numeric::linalg::norm(theta);
        if k.is_power_of_two() {
            self.reference = self.at_last_power;
            self.at_last_power = self.max_so_far;
        }
        self.max_so_far = self.max_so_far.max(n);
        let reference = self.reference.max(self.floor);
        if k >= 64 && reference > 0.0 && n > factor * reference {
            if self.downhill(model, theta) {
                self.floor = n;
                return Ok(());
            }
            // Evidence for the cause: far out, a correct ∇U points outwards (θ·∇U > 0) and the
            // chain overshoots (step too large); ∇log p in its place points back inwards.
            let gradient_outward = gradient.and_then(|g| {
                let c = crate::numeric::linalg::dot(theta, g);
                c.is_finite().then_some(c > 0.0)
            });
            return Err(Error::Runaway { iteration: k, norm: n, reference, gradient_outward });
        }
        Ok(())
    }

    /// Whether the full-data potential at θ is finite and below the one at the start (false if
    /// the model has no potentials).
    #[cold]
    fn downhill<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64]) -> bool {
        let start = &self.start;
        let u0 = *self.start_potential.get_or_insert_with(|| full_potential(model, start));
        match (u0, full_potential(model, theta)) {
            (Some(u0), Some(u)) => u0.is_finite() && u.is_finite() && u < u0,
            _ => false,
        }
    }
}

/// `U(θ)` over all the data, in blocks of 4 096 items (`None` without potentials or when one
/// fails: the runaway detector then trusts the norms alone).
fn full_potential<M: Model + ?Sized>(model: &M, theta: &[f64]) -> Option<f64> {
    const BLOCK: usize = 4_096;
    let n = model.n_data();
    let mut u = model.potential_prior(theta).ok()?;
    let mut idx = Vec::with_capacity(n.min(BLOCK));
    for start in (0..n).step_by(BLOCK) {
        idx.clear();
        idx.extend(start..(start + BLOCK).min(n));
        u += model.potential_data_sum(theta, &idx).ok()?;
    }
    Some(u)
}

/// What the runner needs of a chain (or Richardson–Romberg pair) to drive it.
pub(crate) trait Unit: Send + Sized {
    /// The index reported to observers and in errors.
    fn index(&self) -> usize;
    /// Binds it (first call only).
    fn start<M: Model + ?Sized>(&mut self, model: &M, settings: &RunSettings) -> Result<()>;
    /// Advances to iteration `to` (> current), recording as the settings say. On an error the
    /// iteration count stays at the last completed iteration.
    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()>;
    /// Iterations done.
    fn iteration(&self) -> u64;
    /// Cost so far.
    fn cost(&self) -> Cost;
    /// The position shown to observers.
    fn position(&self) -> &[f64];
    /// The current sample's weight shown to observers.
    fn weight(&self) -> f64;
    /// Wall time spent so far, to be added to.
    fn wall_mut(&mut self) -> &mut Duration;
}

/// How a unit's run ended.
pub(crate) enum Finished<U> {
    /// Completed or stopped by an observer (`true`).
    Ran(U, bool),
    /// Diverged (under [`OnDivergence::Report`]), with the error it raised (in [`Error::Chain`])
    /// when known (not for a chain that had diverged before a resume).
    Diverged(U, Divergence, Option<Error>),
    /// Failed: an error (a divergence under [`OnDivergence::Error`], a model failure, a caught
    /// panic), wrapped in [`Error::Chain`]; the unit as it stood (its draws up to the failure).
    Failed(U, Error),
}

/// Drives every unit to `settings.n_iter` (or until an observer stops it) on the rayon pool,
/// and returns them in index order. A unit's error is returned wrapped in [`Error::Chain`]
/// (the lowest index first), unless it is a divergence under [`OnDivergence::Report`].
pub(crate) fn drive<M: Model + ?Sized, U: Unit>(
    model: &M,
    units: Vec<U>,
    settings: &RunSettings,
    observers: &[&dyn Observer],
    run_start: Instant,
) -> Result<Vec<Finished<U>>> {
    drive_all(model, units, settings, observers, run_start)
        .into_iter()
        .map(|f| match f {
            Finished::Failed(_, e) => Err(e),
            f => Ok(f),
        })
        .collect()
}

/// As [`drive`], keeping the failed units ([`Finished::Failed`]) with their draws.
pub(crate) fn drive_all<M: Model + ?Sized, U: Unit>(
    model: &M,
    units: Vec<U>,
    settings: &RunSettings,
    observers: &[&dyn Observer],
    run_start: Instant,
) -> Vec<Finished<U>> {
    let n_chains = settings.n_chains;
    fan_out(units, settings.parallel, || (), |(), u| drive_one(model, u, settings, observers, run_start, n_chains))
}

thread_local! {
    /// Whether this thread is inside a chain's [`contained`] region: a panic there is caught and
    /// becomes [`Error::Panic`] (the MPI panic hook lets it unwind instead of aborting the job).
    static CONTAINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with panics not contained (the MPI panic hook aborts the job on one): for code whose
/// panic must not unwind into a chain's boundary, because other ranks wait for it in a
/// collective (a sharded model's methods).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn uncontained<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONTAINED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CONTAINED.with(|c| c.replace(false)));
    f()
}

/// Whether a panic on this thread now will be caught by a chain's boundary.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn panic_is_contained() -> bool {
    CONTAINED.with(std::cell::Cell::get)
}

/// Runs `f` with panics caught: `Err(message)` if it panicked (the payload's `&str` or
/// `String`), else what `f` returned.
pub(crate) fn contained<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    let outer = CONTAINED.with(|c| c.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CONTAINED.with(|c| c.set(outer));
    r.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic payload that is not a string)".to_string())
    })
}

/// [`contained`] for code returning a [`Result`]: a panic becomes [`Error::Panic`] (`during`,
/// at the iteration `at` gives once `f` is done).
fn guarded<T, U: ?Sized>(
    during: &'static str,
    unit: &mut U,
    at: impl FnOnce(&U) -> u64,
    f: impl FnOnce(&mut U) -> Result<T>,
) -> Result<T> {
    match contained(|| f(unit)) {
        Ok(r) => r,
        Err(message) => Err(Error::Panic { during, iteration: at(unit), message }),
    }
}

/// What observers see of a unit.
fn progress<U: Unit>(u: &U, n_chains: usize, n_iter: u64, elapsed: Duration, run_start: Instant) -> Progress<'_> {
    Progress {
        chain: u.index(),
        n_chains,
        iteration: u.iteration(),
        n_iter,
        elapsed,
        run_elapsed: run_start.elapsed(),
        cost: u.cost(),
        position: u.position(),
        weight: u.weight(),
    }
}

/// Runs observers' code with panics caught: [`Error::Panic`] in an observer at `iteration`.
fn observing<T>(iteration: u64, f: impl FnOnce() -> T) -> Result<T> {
    contained(f).map_err(|message| Error::Panic { during: IN_OBSERVER, iteration, message })
}

/// Where in a chain user code runs, for [`Error::Panic`].
const IN_INIT: &str = "the chain's start (the sampler's init: the model's code or the sampler's)";
const IN_STEP: &str = "the chain's step (the model's code or the sampler's)";
const IN_OBSERVER: &str = "an observer";

/// Drives one unit to the end of the run or until an observer stops it. User code (the model,
/// the observers) runs inside [`contained`]: a panic becomes [`Error::Panic`], the unit is kept.
fn drive_one<M: Model + ?Sized, U: Unit>(
    model: &M,
    mut u: U,
    settings: &RunSettings,
    observers: &[&dyn Observer],
    run_start: Instant,
    n_chains: usize,
) -> Finished<U> {
    let chain = u.index();
    let t0 = Instant::now();
    let wall0 = *u.wall_mut();
    let wrap = |e: Error| Error::Chain { chain, source: Box::new(e) };
    let first = u.iteration() == 0;
    let outcome = (|| -> Result<bool> {
        guarded(IN_INIT, &mut u, |_| 0, |u| u.start(model, settings))?;
        let mut stop = false;
        if first {
            let p = progress(&u, n_chains, settings.n_iter, wall0 + t0.elapsed(), run_start);
            stop = observing(0, || observers.iter().fold(false, |s, o| s | (o.init(&p) == Control::Stop)))?;
        }
        while !stop && u.iteration() < settings.n_iter {
            let k = u.iteration();
            let next = observers
                .iter()
                .map(|o| {
                    let iv = o.interval().max(1);
                    (k / iv + 1).saturating_mul(iv)
                })
                .min()
                .unwrap_or(settings.n_iter)
                .min(settings.n_iter);
            // A panicking step is one past the last completed iteration (units count their
            // iterations as they complete them).
            guarded(IN_STEP, &mut u, |u| u.iteration() + 1, |u| u.advance(model, next, settings))?;
            let p = progress(&u, n_chains, settings.n_iter, wall0 + t0.elapsed(), run_start);
            stop = observing(next, || {
                observers.iter().fold(stop, |s, o| {
                    let due = next % o.interval().max(1) == 0 || next == settings.n_iter;
                    s | (due && o.observe(&p) == Control::Stop)
                })
            })?;
        }
        Ok(stop && u.iteration() < settings.n_iter)
    })();
    let reported = match &outcome {
        Ok(_) => true,
        Err(e) => e.is_divergence() && settings.on_divergence == OnDivergence::Report,
    };
    let mut outcome = outcome;
    *u.wall_mut() = wall0 + t0.elapsed();
    if reported {
        let p = progress(&u, n_chains, settings.n_iter, wall0 + t0.elapsed(), run_start);
        if let Err(e) = observing(p.iteration, || observers.iter().for_each(|o| o.finish(&p))) {
            outcome = Err(e);
        }
    }
    match outcome {
        Ok(stopped) => Finished::Ran(u, stopped),
        Err(e) if e.is_divergence() && settings.on_divergence == OnDivergence::Report => {
            let iteration = e.iteration().unwrap_or(0);
            let non_finite_state = matches!(e.root(), Error::NonFiniteState { .. });
            let div = Divergence { chain, iteration, non_finite_state, message: e.to_string(), draws: Vec::new() };
            Finished::Diverged(u, div, Some(wrap(e)))
        }
        Err(e) => Finished::Failed(u, wrap(e)),
    }
}

/// Runs `f(worker, item)` for every item, in parallel on rayon (each worker thread with its own
/// state from `init`) or serially, and returns the results in item order. The one fan-out of
/// the crate: chains, Richardson–Romberg replicates and multilevel samples all go through it,
/// so results never depend on the number of threads as long as `f` derives its randomness from
/// the item.
pub(crate) fn fan_out<T, W, R, I, F>(items: Vec<T>, parallel: bool, init: I, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    I: Fn() -> W + Sync + Send,
    F: Fn(&mut W, T) -> R + Sync + Send,
{
    if parallel && items.len() > 1 {
        items.into_par_iter().map_init(&init, |w, t| f(w, t)).collect()
    } else {
        let mut w = init();
        items.into_iter().map(|t| f(&mut w, t)).collect()
    }
}

/// Records draws of one chain according to the storage mode; allocates everything up front.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Recorder {
    samples: Option<Samples>,
    moments: Option<Moments>,
    with_gradients: bool,
    i: usize,
    capacity: usize,
}

impl Recorder {
    /// Room for `per_iteration` draws per recorded iteration. Errors with [`Error::NotStored`]
    /// if gradients are to be stored but the sampler keeps none.
    pub(crate) fn new(settings: &RunSettings, d: usize, per_iteration: usize, has_gradients: bool) -> Result<Self> {
        let with_gradients = settings.storage == Storage::SamplesAndGradients;
        if with_gradients && !has_gradients {
            return Err(Error::NotStored { what: "gradient estimates (this sampler keeps none)" });
        }
        let capacity = usize::try_from(settings.n_recorded())
            .ok()
            .and_then(|n| n.checked_mul(per_iteration))
            .ok_or(Error::OutOfMemory { what: "the run's stored draws", needed: u64::MAX, limit: None })?;
        let (samples, moments) = match settings.storage {
            Storage::Moments => (None, Some(Moments::new(d))),
            _ => (Some(Samples::with_capacity(capacity, d, with_gradients)?), None),
        };
        Ok(Recorder { samples, moments, with_gradients, i: 0, capacity })
    }

    /// A recorder for a resumed chain, holding the draws of `part` (its estimate so far).
    pub(crate) fn from_part(
        settings: &RunSettings,
        d: usize,
        per_iteration: usize,
        has_gradients: bool,
        part: Option<Estimate>,
    ) -> Result<Self> {
        let mut rec = Self::new(settings, d, per_iteration, has_gradients)?;
        let Some(part) = part else { return Ok(rec) };
        let corrupt =
            || Error::CorruptCheckpoint { reason: "a chain's stored draws do not match the run's settings".into() };
        match (part.into_single(), rec.moments.is_some()) {
            (Some(Part::Moments(m)), true) => {
                if m.dim() != d {
                    return Err(corrupt());
                }
                rec.i = m.len();
                rec.moments = Some(m);
            }
            (Some(Part::Samples(s)), false) => {
                let st = rec.samples.as_mut().ok_or_else(corrupt)?;
                if s.len() > rec.capacity || s.draws().ncols() != d || s.gradients().is_some() != rec.with_gradients {
                    return Err(corrupt());
                }
                st.copy_prefix(&s);
                rec.i = s.len();
            }
            _ => return Err(corrupt()),
        }
        Ok(rec)
    }

    #[inline]
    pub(crate) fn record(&mut self, theta: &[f64], w: f64, grad: Option<&[f64]>, cost: u64, step: Option<f64>) {
        if self.i >= self.capacity {
            return;
        }
        if let Some(st) = self.samples.as_mut() {
            st.set(self.i, theta, w, if self.with_gradients { grad } else { None }, cost, step);
        }
        if let Some(m) = self.moments.as_mut() {
            // The length always matches: θ comes from a sampler bound to a model of dimension d.
            let _ = m.push(theta, w);
        }
        self.i += 1;
    }

    /// The estimate of what was recorded (only the draws recorded so far, if stopped early).
    pub(crate) fn finish(self) -> Estimate {
        match (self.samples, self.moments) {
            (Some(mut st), _) => {
                st.truncate(self.i);
                st.drop_unknown_step_sizes();
                Estimate::from_samples(st)
            }
            (_, Some(m)) => Estimate::from_moments(m),
            (None, None) => Estimate::from_moments(Moments::new(0)),
        }
    }
}
