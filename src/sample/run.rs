//! The paths of [`Sample::run`] for one chain per start ([`SamplePath`]'s impls): samplers tuned by [`tune`] and checked by
//! the step-bias companion, HAMCMC (tuned, not a [`Discretisation`]: no companion) and MALA (exact:
//! its own adaptation, no step bias), with the accuracy target's extensions (see the [module
//! docs](super)).

use super::builder::{START_SPREAD, Sample, Sampled, verdict};
use super::path::SamplePath;
use super::path::sealed::Sealed;
use super::target::{EXTENSION_MIN_GROWTH, MAX_EXTENSIONS, PLAN_MARGIN, Target, needed_growth};
use crate::coupled::step_bias::{Companion, STEP_BIAS_MAX_COST, companion};
use crate::error::{Error, Result};
use crate::gradient::GradientEstimator;
use crate::models::Layout;
use crate::models::model::Model;
use crate::run::RunOutput;
use crate::run::observe::{Budget, Control, Observer, Progress, WallTime};
use crate::run::runner::{Resume, Runner};
use crate::sample::builder::outside_chains;
use crate::samplers::{Discretisation, Hamcmc, Mala, ReSgld, Sampler, Sgld, SgldSettings};
use crate::trace::estimate::{Estimate, Samples};
use crate::tune::{Tunable, TuneSettings, Tuned, tune};
use std::sync::atomic::{AtomicBool, Ordering};

/// What a path's step-bias check is: the companion of a [`Discretisation`], or none.
/// Its observer (the user's, through [`UserStops`]) may stop it: `Ok(None)` then, and the run is
/// judged as it stands.
type Check<'a, M, S> =
    dyn Fn(&M, &S, &RunOutput<S>, Option<f64>, bool, Option<&dyn Observer>) -> Result<Option<Companion>> + 'a;

impl<M: Model + ?Sized, S: Tunable + Discretisation> Sealed<M> for S {}

/// Tunes, runs, checks the step's bias and states the verdict (see the [module
/// docs](crate::sample)); aiming at an accuracy (the default), extends the chains until the stated
/// bound meets it or the budget ends the run.
///
/// Errors: invalid settings (no draws, no chain, a bias-check cost outside (0, 10], an
/// accuracy that is not positive); those of [`tune`], [`dispersed_starts`](crate::tune::dispersed_starts),
/// [`Runner`] and [`step_bias`](crate::step_bias);
/// [`Error::DimensionMismatch`] for a start or names not of
/// the model's dimension.
impl<M: Model + ?Sized, S: Tunable + Discretisation> SamplePath<M> for S {
    type Output = Sampled<S>;

    fn sample(this: Sample<'_, M, S>) -> Result<Sampled<S>> {
        let hint = this.sampler.start_hint().map(<[f64]>::to_vec);
        let check = |model: &M,
                     sampler: &S,
                     out: &RunOutput<S>,
                     cost: Option<f64>,
                     grows: bool,
                     observer: Option<&dyn Observer>| match cost {
            Some(cost) => companion(model, sampler, out, cost, grows.then_some(STEP_BIAS_MAX_COST), observer),
            None => Ok(None),
        };
        this.run_path(hint, |m, s, t, ts| tune(m, s, t, ts), &check, None)
    }
}

/// The model check at `theta0`, when the tuned path's set-up failed: its error if it finds the
/// gradient wrong (the culprit then), else `None` (the set-up's own error stands).
fn blame_model<M: Model + ?Sized>(model: &M, theta0: &[f64], check: bool, failure: &Error) -> Option<Error> {
    if !check || theta0.len() != model.dim() || !crate::error::all_finite(theta0) {
        return None;
    }
    match crate::models::check::check_model(model, theta0, &crate::models::check::CheckSettings::default()) {
        Err(
            e @ (Error::GradientSign { .. }
            | Error::GradientMismatch { .. }
            | Error::NonFiniteGradientAt { .. }
            | Error::NonFiniteGradient { .. }),
        ) => Some(e),
        // A non-finite gradient the checked items did not show: located over all the data.
        _ if matches!(failure.root(), Error::NonFiniteGradient { .. }) => {
            crate::models::check::locate_non_finite(model, theta0, 0, None)
        }
        _ => None,
    }
}

/// Why a HAMCMC run does not state a checked accuracy.
const HAMCMC_UNCHECKED: &str = "HAMCMC's step bias is not checked (its L-BFGS metric is not a Discretisation, so no \
    companion at half the step can be coupled to it): the bound is its Monte Carlo error alone, and no accuracy \
    target is declared reached; use Sgld::auto() or pSGLD for a checked accuracy";

impl<M: Model + ?Sized, E: GradientEstimator> Sealed<M> for Hamcmc<E> {}

/// The path for HAMCMC: [`tune`] (its centre step from the L-BFGS metric at the mode), the
/// dispersed starts, the run and the verdict — without a step-bias check (HAMCMC is not a
/// [`Discretisation`]): the verdict's bound is the Monte Carlo error alone, and aiming at an
/// accuracy the chains are extended until it meets the target, which is then not declared
/// reached ([`Target::why`] says why).
///
/// Errors: as for the other samplers.
impl<M: Model + ?Sized, E: GradientEstimator> SamplePath<M> for Hamcmc<E> {
    type Output = Sampled<Hamcmc<E>>;

    fn sample(this: Sample<'_, M, Hamcmc<E>>) -> Result<Sampled<Hamcmc<E>>> {
        this.run_path(None, |m, s, t, ts| tune(m, s, t, ts), &|_, _, _, _, _, _| Ok(None), Some(HAMCMC_UNCHECKED))
    }
}

impl<M: Model + ?Sized, E: GradientEstimator> Sealed<M> for ReSgld<E> {}

/// The path for replica-exchange SGLD: [`tune`] chooses the τ = 1 replica's SGLD — its step,
/// whitening, gradient-noise correction and (for [`Auto`](crate::Auto)) estimator — on the
/// posterior around the mode it finds; every replica takes them, the hotter ones keeping their
/// steps' ratio to the first, on the ladder as given (adapted in the burn-in with
/// [`adapt_ladder`](crate::ReSgldSettings::adapt_ladder)). The chains (each a whole ladder)
/// start dispersed around that mode, or at [`Sample::chain_starts`]; the verdict is on the
/// τ = 1 replicas' draws, and the step-bias check couples a companion ladder at half the step
/// to each chain's ladder (through the τ = 1 replica's Brownian path: the ladder is a
/// [`Discretisation`]), so that the bias it measures is the whole method's, the mode weights'
/// included. The burn-in is at least the ladder's adaptation.
///
/// Errors: as for the other samplers; a model without potentials is
/// [`Error::Unsupported`](crate::Error::Unsupported) (the swaps need energies).
impl<M: Model + ?Sized, E: GradientEstimator> SamplePath<M> for ReSgld<E> {
    type Output = Sampled<ReSgld<E>>;

    fn sample(this: Sample<'_, M, ReSgld<E>>) -> Result<Sampled<ReSgld<E>>> {
        let adapt = this.sampler.settings().adapt_ladder;
        let this = match this.burn_in {
            None if adapt > 0 => {
                let planned = (this.draws.saturating_mul(this.thin) / 10).max(1_000);
                Sample { burn_in: Some(planned.max(adapt)), ..this }
            }
            _ => this,
        };
        let check = |model: &M,
                     re: &ReSgld<E>,
                     out: &RunOutput<ReSgld<E>>,
                     cost: Option<f64>,
                     grows: bool,
                     observer: Option<&dyn Observer>| match cost {
            Some(cost) => companion(model, re, out, cost, grows.then_some(STEP_BIAS_MAX_COST), observer),
            None => Ok(None),
        };
        this.run_path(None, resgld_setup, &check, None)
    }
}

/// The ladder from a tuned SGLD at τ = 1 (see the [`ReSgld`] path).
fn resgld_setup<M: Model + ?Sized, E: GradientEstimator>(
    model: &M,
    re: &ReSgld<E>,
    theta0: &[f64],
    ts: &TuneSettings,
) -> Result<Tuned<ReSgld<E>>> {
    let sgld = Sgld::new(SgldSettings::constant(re.settings().step_sizes[0]), re.cold().estimator().clone())?;
    let tuned = tune(model, &sgld, theta0, ts)?;
    let ladder = re.tuned_from(&tuned.sampler, tuned.step_size)?;
    Ok(tuned.with_sampler(ladder))
}

impl<M: Model + ?Sized> Sealed<M> for Mala {}

/// The path for MALA, the exact reference: the mode and the Hessian there (for the dispersed
/// starts; [`Tuned`] records them, with no pilots), the run — MALA adapts its own step and
/// metric in the burn-in ([`MalaSettings`](crate::MalaSettings)), the burn-in at least its
/// `adapt_steps` — and the verdict. Metropolis-adjusted, it has no step bias: the bound is
/// the Monte Carlo error. Aiming at an accuracy, the first run is the planned length
/// ([`TuneSettings::planned_run`]'s, 5 000 draws per chain), then the chains are extended.
///
/// Errors: those of the mode search, the Hessian and the run.
impl<M: Model + ?Sized> SamplePath<M> for Mala {
    type Output = Sampled<Mala>;

    fn sample(this: Sample<'_, M, Mala>) -> Result<Sampled<Mala>> {
        let adapt = this.sampler.settings().adapt_steps;
        let this = match this.burn_in {
            None => Sample { burn_in: Some(adapt.max(1_000)), ..this },
            Some(_) => this,
        };
        this.run_path(None, mala_setup, &|_, _, _, _, _, _| Ok(None), None)
    }
}

/// MALA's record in the shape of the tuner's: the mode (from `theta0`, with the tuning's mode
/// settings), the Hessian there (with its data subset), its curvature, and the sampler as given.
fn mala_setup<M: Model + ?Sized>(model: &M, mala: &Mala, theta0: &[f64], ts: &TuneSettings) -> Result<Tuned<Mala>> {
    let started = std::time::Instant::now();
    crate::tune::geometry::mala_record(model, mala, theta0, ts, started)
}

impl<'m, M: Model + ?Sized, S: Sampler> Sample<'m, M, S> {
    /// The one path: `setup` chooses the sampler (the tuner, or MALA's record) from `theta0`
    /// (the start given, else `hint`), the chains start dispersed, run, are checked (`check`:
    /// the step-bias companion, or none) and judged, and aiming at an accuracy are extended
    /// until the stated bound meets it; `unchecked` says why a bound without a bias check is not
    /// a reached target.
    ///
    /// User code outside the chains (the model's methods in the mode search, the tuning and the
    /// step-bias check) runs under `catch_unwind` too: a panic there is [`Error::Panic`]
    /// (iteration 0); in a chain it is caught at the chain's boundary first.
    fn run_path(
        self,
        hint: Option<Vec<f64>>,
        setup: impl FnOnce(&M, &S, &[f64], &TuneSettings) -> Result<Tuned<S>>,
        check: &Check<'_, M, S>,
        unchecked: Option<&str>,
    ) -> Result<Sampled<S>> {
        outside_chains(|| self.run_path_inner(hint, setup, check, unchecked))
    }

    fn run_path_inner(
        self,
        hint: Option<Vec<f64>>,
        setup: impl FnOnce(&M, &S, &[f64], &TuneSettings) -> Result<Tuned<S>>,
        check: &Check<'_, M, S>,
        unchecked: Option<&str>,
    ) -> Result<Sampled<S>> {
        let started = std::time::Instant::now();
        let (settings, layout, mut theta0, mut ts) = self.plan()?;
        if let (None, Some(c)) = (&self.start, hint) {
            theta0 = c;
        }
        if let Some(a) = self.accuracy {
            crate::error::check_positive("accuracy", a)?;
            ts.target_accuracy = Some(a * PLAN_MARGIN);
        }
        let width = layout.as_ref().map_or(self.model.dim(), Layout::dim);
        let names = self.reported_names(layout.as_ref(), width)?;
        let tuned = match setup(self.model, &self.sampler, &theta0, &ts) {
            Ok(t) => t,
            // A set-up that failed on a model with a wrong gradient (∇log p for ∇U, a mismatch,
            // a non-finite gradient at the start) blames the model, not the search's limits.
            Err(e) => return Err(blame_model(self.model, &theta0, settings.check_model, &e).unwrap_or(e)),
        };
        // Aiming at an accuracy, the first run is the one the tuner chose (thinned draws counted
        // after thinning).
        let settings = match self.accuracy {
            Some(_) => self.settings_for((tuned.planned_run.iterations / self.thin.max(1)).max(1)),
            None => settings,
        };
        let starts =
            self.chain_starts_or(|| tuned.dispersed_starts(self.model, self.chains, START_SPREAD, self.seed))?;
        let mut spent = tuned.cost.datum_gradients;
        let user = UserStops { observers: &self.observers.0, stopped: AtomicBool::new(false) };
        let runner = Runner::new(self.model, &tuned.sampler).starts(&starts).settings(settings);
        let runner = if self.observers.0.is_empty() { runner } else { runner.observer(&user) };
        let mut output = match self.first_run_limits(spent, started) {
            (Some(budget), Some(wall)) => runner.observer(&budget).observer(&wall).run()?,
            (Some(budget), None) => runner.observer(&budget).run()?,
            (None, Some(wall)) => runner.observer(&wall).run()?,
            (None, None) => runner.run()?,
        };
        let mut extensions = 0;
        loop {
            // A run the user's observer stopped, in its chains or in the step-bias check, is
            // judged as it stands, without the companion.
            let companion = if user.stopped.load(Ordering::Relaxed) {
                None
            } else {
                let observer = (!self.observers.0.is_empty()).then_some(&user as &dyn Observer);
                check(self.model, &tuned.sampler, &output, self.bias_cost, self.bias_grows, observer)?
            };
            let stopped = user.stopped.load(Ordering::Relaxed);
            // A stopped run's chains may differ in length (a chain not started has none): it is
            // judged on the chains that drew, cut to the shortest (the output keeps every draw).
            let cut;
            let judged = if stopped {
                cut = chains_cut_to_shortest(&output.estimate)?;
                &cut
            } else {
                &output.estimate
            };
            let (convergence, table, bias) = match &layout {
                Some(l) => {
                    let f = |phi: &[f64], theta: &mut [f64]| l.forward(phi, theta, None);
                    verdict(judged, companion.as_ref(), Some((width, &f)), names.clone())?
                }
                None => verdict(judged, companion.as_ref(), None, names.clone())?,
            };
            spent += run_cost(&output) + bias.as_ref().map_or(0, |b| b.cost.datum_gradients);
            let Some(accuracy) = self.accuracy else {
                let settings = output.settings;
                return Ok(Sampled {
                    tuned,
                    output,
                    bias,
                    convergence,
                    table,
                    settings,
                    layout,
                    companion,
                    target: None,
                    stopped,
                });
            };
            let draws = kept_draws(&output);
            let bound = convergence.stated_bound();
            let mut target =
                Target { accuracy, reached: false, bound, extensions, draws, needed_draws: None, why: None };
            let finish = |target: Target, output: RunOutput<S>| -> Result<Sampled<S>> {
                let settings = output.settings;
                let target = Some(target);
                Ok(Sampled {
                    tuned: tuned.clone(),
                    output,
                    bias: bias.clone(),
                    convergence: convergence.clone(),
                    table: table.clone(),
                    settings,
                    layout: layout.clone(),
                    companion: companion.clone(),
                    target,
                    stopped,
                })
            };
            if stopped {
                target.why = Some(format!(
                    "stopped by an observer (Sample::observer) at {draws} kept draws per chain: the step-bias check \
                     was skipped, so the bound is the Monte Carlo error alone and the target is not declared reached"
                ));
                return finish(target, output);
            }
            if convergence.converged && bound <= accuracy {
                match unchecked {
                    // The Monte Carlo error alone meets the target; the step's bias is unknown.
                    Some(why) => target.why = Some(why.to_string()),
                    None => target.reached = true,
                }
                return finish(target, output);
            }
            if !output.is_complete() {
                target.why = Some(self.stopped_why());
                return finish(target, output);
            }
            let growth = match needed_growth(&table.rows, bias.as_ref(), accuracy) {
                Ok(g) => g.max(EXTENSION_MIN_GROWTH),
                Err(b) => {
                    target.why = Some(format!(
                        "the step's estimated bias alone gives ±{b:.3} sd, above the target whatever the length: ask for a \
                         longer fixed run (Sample::draws) or a smaller step (TuneSettings::planned_run), or a looser accuracy"
                    ));
                    return finish(target, output);
                }
            };
            let want = (draws as f64 * growth).ceil() as u64;
            target.needed_draws = Some(want);
            if extensions >= MAX_EXTENSIONS {
                target.why = Some(format!(
                    "{MAX_EXTENSIONS} extensions made; the run predicts {want} kept draws per chain for the target"
                ));
                return finish(target, output);
            }
            // What the extension may cost: the budget left, at this run's cost per kept draw
            // (its step-bias check in proportion), and the wall time left.
            let per_draw =
                (run_cost(&output) + bias.as_ref().map_or(0, |b| b.cost.datum_gradients)) as f64 / draws.max(1) as f64;
            let budget = self.budget_or_default();
            let affordable = draws + (budget.saturating_sub(spent) as f64 / per_draw.max(1e-300)) as u64;
            let timed = self.time_limit.map(|t| {
                let per = started.elapsed().as_secs_f64() / (draws as f64 + 1.0);
                draws + ((t.as_secs_f64() - started.elapsed().as_secs_f64()).max(0.0) / per.max(1e-300)) as u64
            });
            let cap = affordable.min(timed.unwrap_or(u64::MAX));
            let next = want.min(cap);
            if next < draws + draws / 10 + 1 {
                target.why = Some(format!(
                    "{} left; the run predicts {want} kept draws per chain for the target (raise Sample::{})",
                    if timed.is_some_and(|t| t < affordable) { "no time" } else { "no budget" },
                    if timed.is_some_and(|t| t < affordable) { "time_limit" } else { "budget" },
                ));
                return finish(target, output);
            }
            output.settings.n_iter = output.settings.burn_in + next * output.settings.thin.max(1);
            // The run's cost is counted again, whole, after the extension.
            spent -= run_cost(&output);
            let resume = Resume::new(self.model, output);
            output = if self.observers.0.is_empty() { resume.run()? } else { resume.observer(&user).run()? };
            extensions += 1;
        }
    }

    /// The observers that keep the first run of an accuracy target within the budget and the
    /// time limit, given what the tuning spent and when the call started.
    fn first_run_limits(&self, spent: u64, started: std::time::Instant) -> (Option<Budget>, Option<WallTime>) {
        if self.accuracy.is_none() {
            return (None, None);
        }
        // The run and its step-bias check share what the tuning left.
        let share = 1.0 + self.bias_cost.unwrap_or(0.0);
        let left = (self.budget_or_default().saturating_sub(spent) as f64 / share) as u64;
        let wall = self.time_limit.map(|t| WallTime::new(t.saturating_sub(started.elapsed())));
        (Some(Budget::datum_gradients(left)), wall)
    }

    /// Why an accuracy target's run stopped before its length.
    fn stopped_why(&self) -> String {
        format!(
            "the run stopped at the {} (raise Sample::{})",
            if self.time_limit.is_some() { "budget or the time limit" } else { "budget" },
            if self.time_limit.is_some() { "budget or Sample::time_limit" } else { "budget" }
        )
    }
}

/// The chains of `est` that kept a draw, each cut to the shortest one's length (a stopped run's
/// verdict).
///
/// Errors: [`Error::NoSamples`] if no chain kept a draw.
fn chains_cut_to_shortest(est: &Estimate) -> Result<Estimate> {
    let parts: Vec<&Samples> = (0..est.n_parts()).filter_map(|i| est.samples(i)).filter(|s| !s.is_empty()).collect();
    let n = parts.iter().map(|s| s.len()).min().ok_or(Error::NoSamples {
        reason: "the run was stopped before any chain kept a draw (all still in their burn-in)",
    })?;
    let cut = parts.iter().map(|s| {
        let draws = s.draws().slice(ndarray::s![..n, ..]).to_owned();
        let weights = s.weights().slice(ndarray::s![..n]).to_owned();
        let gradients = s.gradients().map(|g| g.slice(ndarray::s![..n, ..]).to_owned());
        Samples::new(draws, weights, gradients).map(Estimate::from_samples)
    });
    Estimate::combine(cut.collect::<Result<Vec<_>>>()?)
}

/// A run's datum gradients beyond its estimator's setup.
fn run_cost<S>(out: &RunOutput<S>) -> u64 {
    out.cost.datum_gradients.saturating_sub(out.setup_cost.datum_gradients)
}

/// The kept draws per chain of a run so far (after thinning; the fewest over its chains).
fn kept_draws<S>(out: &RunOutput<S>) -> u64 {
    let s = &out.settings;
    out.chains.iter().map(|c| c.iterations.saturating_sub(s.burn_in) / s.thin.max(1)).min().unwrap_or(0)
}

/// The user's observers of a [`Sample`] run as one, recording whether one of them stopped a
/// chain (the run is then judged as it stands: [`Sampled::stopped`]).
struct UserStops<'a, 'm> {
    observers: &'a [&'m dyn Observer],
    stopped: AtomicBool,
}

impl UserStops<'_, '_> {
    fn record(&self, control: Control, p: &Progress<'_>) -> Control {
        if control == Control::Stop && p.iteration < p.n_iter {
            self.stopped.store(true, Ordering::Relaxed);
        }
        control
    }
}

impl Observer for UserStops<'_, '_> {
    fn init(&self, p: &Progress<'_>) -> Control {
        let any = self.observers.iter().fold(Control::Continue, |c, o| match o.init(p) {
            Control::Stop => Control::Stop,
            Control::Continue => c,
        });
        self.record(any, p)
    }

    fn observe(&self, p: &Progress<'_>) -> Control {
        // Each observer is asked at its own interval, as the runner would.
        let any = self.observers.iter().fold(Control::Continue, |c, o| {
            let every = o.interval().max(1);
            if !p.iteration.is_multiple_of(every) && p.iteration != p.n_iter {
                return c;
            }
            match o.observe(p) {
                Control::Stop => Control::Stop,
                Control::Continue => c,
            }
        });
        self.record(any, p)
    }

    fn finish(&self, p: &Progress<'_>) {
        for o in self.observers {
            o.finish(p);
        }
    }

    fn observe_bias_check(&self, iteration: u64, n_iter: u64) -> Control {
        // Each observer is asked at its own interval (and at the end of the plan).
        let any = self.observers.iter().fold(Control::Continue, |c, o| {
            if !iteration.is_multiple_of(o.interval().max(1)) && iteration != n_iter {
                return c;
            }
            match o.observe_bias_check(iteration, n_iter) {
                Control::Stop => Control::Stop,
                Control::Continue => c,
            }
        });
        if any == Control::Stop {
            self.stopped.store(true, Ordering::Relaxed);
        }
        any
    }

    fn interval(&self) -> u64 {
        // The greatest common divisor of their intervals: each is then called at its own.
        self.observers.iter().map(|o| o.interval().max(1)).fold(0, gcd).max(1)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
