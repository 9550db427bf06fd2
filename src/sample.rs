//! The trustworthy path in one call: [`Sample`].
//!
//! ```
//! use sgmcmc::prelude::*;
//!
//! let model = LogisticRegression::synthetic(20_000, 3, 10.0, 1)?;
//! // Nothing set by hand: the estimator (control variates or a plain minibatch, and the
//! // minibatch size), the step and the run's length are chosen for the default accuracy.
//! let fit = Sample::new(&model, Sgld::auto()).seed(1).run()?;
//! println!("{fit}"); // the target reached, the step, the verdict with its step bias, the table
//! assert!(fit.target.as_ref().is_some_and(|t| t.reached));
//! # Ok::<(), sgmcmc::Error>(())
//! ```
//!
//! By default it aims at an accuracy ([`DEFAULT_ACCURACY`] = 0.1: every mean within ±0.1
//! posterior sd and every sd within ±10 %, 95 %, Monte Carlo error and step bias together) under
//! a budget; [`draws`](Sample::draws) asks for a fixed length instead. [`Sample::run`] does, in
//! order, what the seven-call path does by hand:
//! 1. [`tune`]: the mode, the whitening (the default [`Precondition::Auto`](crate::tune::Precondition::Auto)),
//!    the choice of an [`Auto`](crate::Auto) estimator, the gradient-noise correction where the
//!    sampler takes one, and the step — for the shortest run its error model predicts to meet
//!    the target ([`TuneSettings::target_accuracy`](crate::tune::TuneSettings::target_accuracy)),
//!    or for exactly the run asked for;
//! 2. [`dispersed_starts`]: one start per chain around the mode, twice the Laplace spread, so
//!    that split-R̂ can see chains that have not forgotten where they began;
//! 3. [`Runner`], with the model checked at the starts;
//! 4. [`step_bias`](crate::step_bias): a coupled companion at half the step from the chains'
//!    last states (an antithetic triple per chain), at [`STEP_BIAS_COST`] of the run's cost, grown
//!    up to [`STEP_BIAS_MAX_COST`] where its own noise sets the bound
//!    ([`bias_check`](Sample::bias_check) fixes its cost; `None` turns it off);
//! 5. the verdict ([`Convergence`], with the step bias folded into the accuracy it states) and
//!    the summary table (with the bias beside the Monte Carlo errors);
//! 6. aiming at an accuracy: until the run converges and states a bound within the target, the
//!    same chains extended ([`Resume`]: the draws of one run of the final length) by what their
//!    own errors say is needed, then 4 and 5 again — at most [`MAX_EXTENSIONS`] times, within
//!    the [`budget`](Sample::budget) and the [`time_limit`](Sample::time_limit) — and
//!    [`Sampled::target`] says what was reached, or why not and how long a run would reach it.
//!
//! **On the user's scale.** For a model with an [`output_layout`](Model::output_layout) (a
//! [`Constrained`](crate::Constrained) model, also under [`Tempered`](crate::Tempered)), every
//! draw of the run and of the bias check is mapped to the constrained scale first: R̂, ESS,
//! Monte Carlo errors, the step bias, the bound and the table are those of σ, τ, a simplex's
//! components, … as the user reads them, named after the blocks (a mean's error on log τ says
//! little about τ's, whose tail is heavier). [`Sampled::derived`] gives any function of the
//! parameters (θⱼ = μ + τ θ̃ⱼ, a prediction, a contrast) the same verdict and table.
//!
//! Every choice it made is in the [`Sampled`] it returns: the tuner's record ([`Tuned`], whose
//! `reason` and `preconditioning` say why), the run's settings and output, the bias check. The
//! pieces stay public for experts: the same draws come from calling them in this order with
//! the settings recorded in [`Sampled`].

use crate::coupled::mlsgld::{AdaptiveSettings, MlSgld, MlSgldSettings, MlmcResult, RmseTarget};
use crate::coupled::richardson::{RichardsonRomberg, RrOutput, extrapolated_rows};
use crate::coupled::step_bias::{
    Companion, STEP_BIAS_COST, STEP_BIAS_MAX_COST, StepBias, companion, rows_with_bias, with_bias,
};
use crate::coupled::tune_rr::{TunedRr, tune_rr};
use crate::error::{Error, Result};
use crate::gradient::SubsampledEstimator;
use crate::models::Layout;
use crate::models::model::Model;
use crate::run::observe::{Budget, WallTime};
use crate::run::runner::{Resume, Runner};
use crate::run::{RunOutput, RunSettings};
use crate::samplers::Discretisation;
use crate::trace::diagnostics::{Convergence, SummaryTable, convergence_of, summary};
use crate::trace::estimate::Estimate;
use crate::tune::Preconditioned;
use crate::tune::{PlannedRun, Tunable, TuneSettings, Tuned, dispersed_starts, tune};

mod target;
pub use target::{DEFAULT_ACCURACY, DEFAULT_BUDGET, DEFAULT_BUDGET_EPOCHS, MAX_EXTENSIONS, Target};
use target::{EXTENSION_MIN_GROWTH, PLAN_MARGIN, needed_growth};

/// The spread of [`Sample`]'s dispersed starts, in Laplace sds around the mode.
pub const START_SPREAD: f64 = 2.0;

/// The trustworthy path as one value: a model, a sampler (any step: [`tune`] chooses it), the
/// run's length stated once, then [`run`](Self::run). See the [module docs](self).
#[derive(Debug, Clone)]
#[must_use = "a Sample does nothing until .run()"]
pub struct Sample<'m, M: ?Sized, S> {
    model: &'m M,
    sampler: S,
    draws: u64,
    accuracy: Option<f64>,
    budget: Option<u64>,
    time_limit: Option<std::time::Duration>,
    thin: u64,
    chains: usize,
    burn_in: Option<u64>,
    seed: u64,
    start: Option<Vec<f64>>,
    tune: TuneSettings,
    bias_cost: Option<f64>,
    /// Whether the step-bias check grows where its own noise sets the bound (the default;
    /// [`bias_check`](Sample::bias_check) fixes its cost).
    bias_grows: bool,
    names: Option<Vec<String>>,
}

/// What [`Sample::plan`] settles before a run: its settings, the model's output layout, the
/// start of the mode search and the tuner's settings for this run.
type Plan = (RunSettings, Option<Layout>, Vec<f64>, TuneSettings);

impl<'m, M: Model + ?Sized, S> Sample<'m, M, S> {
    /// The run's settings, layout, start and tuner settings, checked.
    fn plan(&self) -> Result<Plan> {
        let d = self.model.dim();
        let settings = self.run_settings();
        settings.validate()?;
        let theta0 = self.start.clone().unwrap_or_else(|| vec![0.0; d]);
        let layout = self.model.output_layout().cloned();
        let ts = TuneSettings { planned_run: PlannedRun::new(self.draws, self.chains), ..self.tune.clone() };
        Ok((settings, layout, theta0, ts))
    }

    /// The reported quantities' names: the user's (checked against their number `width`), else
    /// the layout's block names, else the model's [`parameter_names`](Model::parameter_names),
    /// else `theta[j]`.
    fn reported_names(&self, layout: Option<&Layout>, width: usize) -> Result<Vec<String>> {
        let d = self.model.dim();
        Ok(match (&self.names, layout) {
            (Some(n), _) => {
                crate::error::check_len("names", width, n.len())?;
                n.clone()
            }
            (None, Some(l)) => l.names(),
            (None, None) => match self.model.parameter_names() {
                Some(n) if n.len() == d => n,
                _ => (0..d).map(|j| format!("theta[{j}]")).collect(),
            },
        })
    }
}

impl<'m, M: Model + ?Sized, S> Sample<'m, M, S> {
    /// `sampler` on `model` with the defaults: aiming at the accuracy [`DEFAULT_ACCURACY`] within
    /// the default [`budget`](Self::budget) (the first run's length the tuner's, see
    /// [`accuracy`](Self::accuracy)), 4 chains, burn-in `max(1 000, draws/10)` of the first run,
    /// no thinning, seed 0, the search for the mode from θ = 0 (or from a control-variate
    /// estimator's centre), [`TuneSettings::default()`] (its pilots sized for a run of 5 000 kept
    /// draws per chain), the step-bias check at [`STEP_BIAS_COST`] of the run's cost, grown up to
    /// [`STEP_BIAS_MAX_COST`] where its own noise sets the bound.
    pub fn new(model: &'m M, sampler: S) -> Self {
        Sample {
            model,
            sampler,
            draws: 5_000,
            accuracy: Some(DEFAULT_ACCURACY),
            budget: None,
            time_limit: None,
            thin: 1,
            chains: 4,
            burn_in: None,
            seed: 0,
            start: None,
            tune: TuneSettings::default(),
            bias_cost: Some(STEP_BIAS_COST),
            bias_grows: true,
            names: None,
        }
    }

    /// A fixed run of `draws` kept draws per chain (after the burn-in), the step tuned for them ×
    /// the chains, instead of the default [`accuracy`](Self::accuracy) target: the run states
    /// the accuracy it reached, whatever it is.
    pub fn draws(mut self, draws: u64) -> Self {
        self.draws = draws;
        self.accuracy = None;
        self
    }

    /// Aim at an accuracy (the default, [`DEFAULT_ACCURACY`] = 0.1): every mean within `accuracy`
    /// posterior sds and every sd within `accuracy × 100 %` (95 %, the Monte Carlo error and the
    /// step's bias together, as [`Convergence::stated_bound`]; on the user's scale for a
    /// constrained model). The tuner chooses the step and the first length for it (the shortest
    /// run its error model predicts to meet it); the same chains are then extended — the draws
    /// those of a run of the final length from the start — until the run converges and states a
    /// bound within the target, or the [`budget`](Self::budget), the
    /// [`time_limit`](Self::time_limit) or [`MAX_EXTENSIONS`] end it with a verdict that says
    /// so ([`Sampled::target`]).
    pub fn accuracy(mut self, accuracy: f64) -> Self {
        self.accuracy = Some(accuracy);
        self
    }

    /// The most datum gradients the whole call may spend, tuning, runs and step-bias checks
    /// together, when aiming at an [`accuracy`](Self::accuracy). Default: the larger of
    /// [`DEFAULT_BUDGET`] and [`DEFAULT_BUDGET_EPOCHS`] passes over the data.
    pub fn budget(mut self, datum_gradients: u64) -> Self {
        self.budget = Some(datum_gradients);
        self
    }

    /// The most wall time the call may take when aiming at an [`accuracy`](Self::accuracy)
    /// (checked between extensions and by the run's observer; where the run stops then depends on
    /// the machine). Default none.
    pub fn time_limit(mut self, limit: std::time::Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// Keep every `thin`-th draw of the run (its kept draws are counted after thinning, and so
    /// are those of [`draws`](Self::draws)). Default 1.
    pub fn thin(mut self, thin: u64) -> Self {
        self.thin = thin;
        self
    }

    /// Chains (run in parallel; at least 2 for R̂ to mean much).
    pub fn chains(mut self, chains: usize) -> Self {
        self.chains = chains;
        self
    }

    /// Iterations discarded at the start of each chain. Default `max(1 000, draws/10)`.
    pub fn burn_in(mut self, burn_in: u64) -> Self {
        self.burn_in = Some(burn_in);
        self
    }

    /// The seed of the starts and the run (the tuner's is [`TuneSettings::seed`]).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Where the search for the mode starts. Default θ = 0.
    pub fn start(mut self, theta0: &[f64]) -> Self {
        self.start = Some(theta0.to_vec());
        self
    }

    /// The tuner's settings, for experts; their `planned_run` is replaced by this run's draws ×
    /// chains.
    pub fn tune_settings(mut self, settings: TuneSettings) -> Self {
        self.tune = settings;
        self
    }

    /// The step-bias check's cost relative to the run ([`step_bias`](crate::step_bias)), fixed;
    /// `None` turns it off (the verdict then states the Monte Carlo error alone). Default: at
    /// [`STEP_BIAS_COST`], grown up to [`STEP_BIAS_MAX_COST`] where the check's own noise is the
    /// larger part of the stated bound (to the share that makes a bound cheapest, run and check
    /// together).
    pub fn bias_check(mut self, cost: Option<f64>) -> Self {
        self.bias_cost = cost;
        self.bias_grows = false;
        self
    }

    /// The parameters' names for the verdict and the summary table, one per reported number
    /// (the layout's [`dim`](Layout::dim) for a constrained model). Default: the layout's block
    /// names (`sigma`, `beta[0]`, …), else the model's
    /// [`parameter_names`](Model::parameter_names) (a GLM's CSV columns), else `theta[0]`,
    /// `theta[1]`, …
    pub fn names<T: AsRef<str>>(mut self, names: &[T]) -> Self {
        self.names = Some(names.iter().map(|n| n.as_ref().to_string()).collect());
        self
    }

    /// The run's settings: what [`run`](Self::run) passes to [`Runner`] for a fixed run of
    /// [`draws`](Self::draws) (when aiming at an accuracy, the first run's length is the tuner's).
    pub fn run_settings(&self) -> RunSettings {
        self.settings_for(self.draws)
    }

    /// The run's settings for `draws` kept draws per chain.
    fn settings_for(&self, draws: u64) -> RunSettings {
        let thin = self.thin.max(1);
        let burn_in = self.burn_in.unwrap_or((draws.saturating_mul(thin) / 10).max(1_000));
        RunSettings {
            n_iter: draws.saturating_mul(thin).saturating_add(burn_in),
            burn_in,
            thin: self.thin,
            n_chains: self.chains,
            seed: self.seed,
            ..Default::default()
        }
    }

    /// The budget of an accuracy target, datum gradients.
    fn budget_or_default(&self) -> u64 {
        self.budget.unwrap_or(DEFAULT_BUDGET.max(DEFAULT_BUDGET_EPOCHS.saturating_mul(self.model.n_data() as u64)))
    }
}

impl<'m, M: Model + ?Sized, S: Tunable + Discretisation> Sample<'m, M, S> {
    /// Tunes, runs, checks the step's bias and states the verdict (see the [module
    /// docs](self)).
    ///
    /// Errors: invalid settings (no draws, no chain, a bias-check cost outside (0, 10]); those
    /// of [`tune`], [`dispersed_starts`], [`Runner`] and
    /// [`step_bias`](crate::step_bias); [`Error::DimensionMismatch`]
    /// for a start or names not of the model's dimension.
    pub fn run(self) -> Result<Sampled<S>> {
        let started = std::time::Instant::now();
        let (settings, layout, mut theta0, mut ts) = self.plan()?;
        if let (None, Some(c)) = (&self.start, self.sampler.start_hint()) {
            theta0 = c.to_vec();
        }
        if let Some(a) = self.accuracy {
            crate::error::check_positive("accuracy", a)?;
            ts.target_accuracy = Some(a * PLAN_MARGIN);
        }
        let width = layout.as_ref().map_or(self.model.dim(), Layout::dim);
        let names = self.reported_names(layout.as_ref(), width)?;
        let tuned = tune(self.model, &self.sampler, &theta0, &ts)?;
        // Aiming at an accuracy, the first run is the one the tuner chose (thinned draws counted
        // after thinning).
        let settings = match self.accuracy {
            Some(_) => self.settings_for((tuned.planned_run.iterations / self.thin.max(1)).max(1)),
            None => settings,
        };
        let starts = tuned.dispersed_starts(self.model, self.chains, START_SPREAD, self.seed)?;
        let mut spent = tuned.cost.datum_gradients;
        let runner = Runner::new(self.model, &tuned.sampler).starts(&starts).settings(settings);
        let mut output = match self.first_run_limits(spent, started) {
            (Some(budget), Some(wall)) => runner.observer(&budget).observer(&wall).run()?,
            (Some(budget), None) => runner.observer(&budget).run()?,
            (None, Some(wall)) => runner.observer(&wall).run()?,
            (None, None) => runner.run()?,
        };
        let mut extensions = 0;
        loop {
            let companion = match self.bias_cost {
                Some(cost) => {
                    let grow = self.bias_grows.then_some(STEP_BIAS_MAX_COST);
                    Some(companion(self.model, &tuned.sampler, &output, cost, grow)?)
                }
                None => None,
            };
            let (convergence, table, bias) = match &layout {
                Some(l) => {
                    let f = |phi: &[f64], theta: &mut [f64]| l.forward(phi, theta, None);
                    verdict(&output.estimate, companion.as_ref(), Some((width, &f)), names.clone())?
                }
                None => verdict(&output.estimate, companion.as_ref(), None, names.clone())?,
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
                })
            };
            if convergence.converged && bound <= accuracy {
                target.reached = true;
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
            output = Resume::new(self.model, output).run()?;
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

/// A run's datum gradients beyond its estimator's setup.
fn run_cost<S>(out: &RunOutput<S>) -> u64 {
    out.cost.datum_gradients.saturating_sub(out.setup_cost.datum_gradients)
}

/// The kept draws per chain of a run so far (the fewest over its chains).
fn kept_draws<S>(out: &RunOutput<S>) -> u64 {
    let s = &out.settings;
    out.chains.iter().map(|c| c.iterations.saturating_sub(s.burn_in) / s.thin.max(1)).min().unwrap_or(0)
}

impl<'m, M: Model + ?Sized, S: Tunable + Discretisation> Sample<'m, M, RichardsonRomberg<S>> {
    /// The trustworthy path for a Richardson–Romberg extrapolation (SGRRLD, SGRRHMC): chooses
    /// chain A's step for this run with [`tune_rr`] (the mode, the whitening, the step from the
    /// extrapolated measure's Stein moment errors), starts the replicate pairs dispersed around the
    /// mode, runs them ([`Runner`]) and states the verdict and table of the
    /// **extrapolated** draws (as [`RrOutput::convergence`] and [`RrOutput::summary_table`]; on
    /// the constrained scale with the blocks' names for a model with an
    /// [`output_layout`](Model::output_layout), both chains' draws mapped before they are
    /// combined). The extrapolation removes the step's first-order bias, so there is no step-bias
    /// companion: the stated bound is the extrapolated draws' Monte Carlo error
    /// ([`bias_check`](Sample::bias_check) is ignored).
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 42)?;
    /// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(100))?;
    /// let fit = Sample::new(&model, RichardsonRomberg::new(sgld)).draws(2_000).seed(1).run()?;
    /// println!("{fit}"); // chain A's step, the verdict, the extrapolated table
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    ///
    /// Errors: invalid settings; those of [`tune_rr`], [`dispersed_starts`] and
    /// [`Runner`]; [`Error::DimensionMismatch`] for a start or names not of the model's
    /// dimension.
    pub fn run(self) -> Result<SampledRr<S>> {
        let (settings, layout, theta0, ts) = self.plan()?;
        let names = self.reported_names(layout.as_ref(), layout.as_ref().map_or(self.model.dim(), Layout::dim))?;
        let tuned = tune_rr(self.model, &self.sampler, &theta0, &ts)?;
        let starts = dispersed_starts(self.model, &tuned.mode, self.chains, START_SPREAD, self.seed)?;
        let output = Runner::new(self.model, &tuned.rr).starts(&starts).settings(settings).run()?;
        let rows = match &layout {
            Some(l) => {
                let f = |phi: &[f64], theta: &mut [f64]| l.forward(phi, theta, None);
                let (coarse, fine) = (output.coarse.map_draws(l.dim(), f)?, output.fine.map_draws(l.dim(), f)?);
                extrapolated_rows(&coarse, &fine)?
            }
            None => extrapolated_rows(&output.coarse, &output.fine)?,
        };
        let convergence = convergence_of(&rows, output.fine.n_parts()).named(&names);
        let table = SummaryTable::new(names, rows)?;
        Ok(SampledRr { tuned, output, convergence, table, settings })
    }
}

/// What [`Sample::run`] made for a Richardson–Romberg extrapolation, and every choice on the
/// way.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct SampledRr<S> {
    /// The tuner's record: mode, whitening, chain A's step and why ([`TunedRr::reason`]).
    pub tuned: TunedRr<S>,
    /// The run: both chains' draws, the extrapolated estimate, cost, wall time.
    pub output: RrOutput<S>,
    /// The verdict on the extrapolated draws (on the constrained scale for a model with an
    /// [`output_layout`](Model::output_layout)); its bound is their Monte Carlo error.
    pub convergence: Convergence,
    /// The extrapolated draws' summary table (a signed measure: equal-tailed intervals, see
    /// [`RrOutput::summary_table`]).
    pub table: SummaryTable,
    /// The run's settings.
    pub settings: RunSettings,
}

impl<S> SampledRr<S> {
    /// The extrapolated estimate (signed weights), on the sampler's coordinates.
    pub fn estimate(&self) -> &Estimate {
        &self.output.estimate
    }
}

impl<S> std::fmt::Display for SampledRr<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "Richardson–Romberg: chain A's step {:.4e}, chain B's {:.4e}{} ({} replicate pairs x {} kept draws of A)",
            self.tuned.step_size,
            0.5 * self.tuned.step_size,
            if self.tuned.whitening.is_some() { " in whitened coordinates" } else { "" },
            self.settings.n_chains,
            self.settings.n_iter - self.settings.burn_in,
        )?;
        writeln!(f, "{}", self.convergence)?;
        write!(f, "{}", self.table)
    }
}

/// Multilevel SGLD on the trustworthy path: what `Sample::new(&model, Multilevel::new(estimator))`
/// runs ([`MlSgld::sgld_tuned`], then [`MlSgld::run_adaptive`] with every mean and sd at a
/// target accuracy). Build it with [`new`](Self::new) and the setters.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Multilevel<E> {
    /// The gradient estimator of every level (a [`ControlVariate`](crate::ControlVariate) or a
    /// plain [`Minibatch`](crate::Minibatch)).
    pub estimator: E,
    /// The multilevel settings before tuning (h₀ and the horizon are tuned; `keep_points` is
    /// set, the seed is [`Sample::seed`]'s).
    pub settings: MlSgldSettings,
    /// The target: every coordinate's mean to this RMSE in posterior sds and every sd to this
    /// relative RMSE ([`RmseTarget::Moments`]). Default 0.1.
    pub accuracy: f64,
    /// The most datum gradients the run may spend ([`AdaptiveSettings::max_cost`]); default
    /// none.
    pub max_cost: Option<u64>,
}

impl<E> Multilevel<E> {
    /// Multilevel SGLD with `estimator`, the default settings and accuracy 0.1.
    pub fn new(estimator: E) -> Self {
        Multilevel { estimator, settings: MlSgldSettings::default(), accuracy: 0.1, max_cost: None }
    }

    /// Every mean to RMSE `accuracy` posterior sds and every sd to relative RMSE `accuracy`.
    pub fn accuracy(mut self, accuracy: f64) -> Self {
        self.accuracy = accuracy;
        self
    }

    /// The most datum gradients the run may spend.
    pub fn max_cost(mut self, max_cost: u64) -> Self {
        self.max_cost = Some(max_cost);
        self
    }
}

impl<'m, M: Model + ?Sized, E: SubsampledEstimator> Sample<'m, M, Multilevel<E>> {
    /// The trustworthy path for multilevel SGLD: [`MlSgld::sgld_tuned`] (the mode, the whitening,
    /// h₀ and the horizon from the whitened curvature, h₀ capped at the gradient noise's limit),
    /// then Giles' adaptive multilevel Monte Carlo ([`MlSgld::run_adaptive`]) with every
    /// coordinate's mean and sd at the target [`Multilevel::accuracy`]
    /// ([`RmseTarget::Moments`]), doubling the horizon itself where level 0 has not relaxed.
    /// The paths are independent, so there is no R̂: the run's verdict is its bias tests, which
    /// it passes or returns an error, and its stated accuracy is
    /// [`MomentErrors::error_bound`](crate::MomentErrors::error_bound) (standard errors and
    /// remaining biases together). [`draws`](Sample::draws), [`chains`](Sample::chains),
    /// [`burn_in`](Sample::burn_in) and [`bias_check`](Sample::bias_check) do not apply; the
    /// tuner's planned run is left as they give it. The estimates are of the sampler's
    /// coordinates (φ for a constrained model, rows named `phi[j]`; names given with
    /// [`names`](Sample::names) name these d coordinates).
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::Multilevel;
    ///
    /// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 42)?;
    /// let fit = Sample::new(&model, Multilevel::new(Minibatch::new(25)).accuracy(0.2)).seed(1).run()?;
    /// println!("{fit}"); // h₀, levels, cost, every mean and sd with its error bars
    /// assert!(fit.moments.error_bound.is_finite());
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    ///
    /// Errors: those of [`MlSgld::sgld_tuned`] and [`MlSgld::run_adaptive`] (a budget exhausted,
    /// level 0 not relaxed after the doublings); [`Error::InvalidParameter`] for an accuracy that
    /// is not finite and positive; [`Error::DimensionMismatch`] for a start or names not of the
    /// model's dimension.
    pub fn run(self) -> Result<SampledMl<E>> {
        let (_, layout, theta0, ts) = self.plan()?;
        crate::error::check_positive("accuracy", self.sampler.accuracy)?;
        // The estimates are of the sampler's coordinates: φ for a constrained model.
        let d = self.model.dim();
        let names = match (&layout, &self.names) {
            (Some(_), None) => (0..d).map(|j| format!("phi[{j}]")).collect(),
            _ => self.reported_names(None, d)?,
        };
        let settings = MlSgldSettings { keep_points: true, seed: self.seed, ..self.sampler.settings };
        let (ml, setup) = MlSgld::sgld_tuned(self.model, settings, self.sampler.estimator.clone(), &theta0, &ts)?;
        let g = whitened_square_mean(setup.whitening.clone());
        let target = AdaptiveSettings {
            target: RmseTarget::Moments(self.sampler.accuracy),
            max_cost: self.sampler.max_cost,
            ..Default::default()
        };
        let result = ml.run_adaptive(self.model, &g, &target)?;
        let moments = result.moments.clone().ok_or(Error::NotStored { what: "the multilevel run's end points" })?;
        Ok(SampledMl { h0: ml.h0(), ml, setup, result, moments, names })
    }
}

/// What [`Sample::run`] made for multilevel SGLD, and every choice on the way.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct SampledMl<E> {
    /// The tuned level-0 step.
    pub h0: f64,
    /// The tuned multilevel sampler (its horizon before any doubling).
    pub ml: MlSgld<crate::samplers::Sgld<E>>,
    /// The tuner's record: mode, whitening, curvature, cost.
    pub setup: Preconditioned<crate::samplers::Sgld<E>>,
    /// The adaptive run: levels, cost, horizon doublings, the signed measure of the end points.
    pub result: MlmcResult,
    /// Every coordinate's mean and sd with their standard errors, remaining biases and the
    /// stated accuracy ([`MomentErrors::error_bound`](crate::MomentErrors::error_bound)).
    pub moments: crate::coupled::mlsgld::MomentErrors,
    /// The rows' names.
    pub names: Vec<String>,
}

impl<E> SampledMl<E> {
    /// The signed measure of the kept end points (weights `±1/N_l`).
    pub fn estimate(&self) -> Option<&Estimate> {
        self.result.measure.as_ref()
    }

    /// The scalar g the run targeted besides every mean and sd: the mean squared whitened
    /// coordinate `‖φ‖²/d` (about 1 under the Laplace approximation), for further runs of
    /// [`ml`](Self::ml) comparable with this one.
    pub fn g(&self) -> impl Fn(&[f64]) -> f64 + Send + Sync + use<E> {
        whitened_square_mean(self.setup.whitening.clone())
    }
}

/// `θ ↦ ‖φ‖²/d` with φ the whitened θ (θ itself without a whitening).
fn whitened_square_mean(w: Option<std::sync::Arc<crate::samplers::Whitening>>) -> impl Fn(&[f64]) -> f64 + Send + Sync {
    move |t: &[f64]| -> f64 {
        let mut phi = t.to_vec();
        if let Some(w) = &w {
            w.to_phi(t, &mut phi);
        }
        phi.iter().map(|x| x * x).sum::<f64>() / t.len() as f64
    }
}

impl<E> std::fmt::Display for SampledMl<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.result;
        writeln!(
            f,
            "multilevel SGLD: h₀ {:.4e}{}, {} levels, horizon {} ({} doubling(s)), {:.3e} datum gradients",
            self.h0,
            if self.setup.whitening.is_some() { " in whitened coordinates" } else { "" },
            r.levels.len(),
            r.horizon,
            r.horizon_doublings,
            r.cost.datum_gradients as f64,
        )?;
        writeln!(
            f,
            "bias tests passed: means within ±{:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates; standard errors and \
             remaining biases)",
            self.moments.error_bound,
            100.0 * self.moments.error_bound,
            100.0 * crate::trace::diagnostics::BOUND_PROB
        )?;
        let m = &self.moments;
        let width = self.names.iter().map(String::len).max().unwrap_or(4).max(4);
        writeln!(
            f,
            "{:width$}  {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "", "mean", "sd", "se_mean", "se_sd", "bias_mean", "bias_sd"
        )?;
        for (j, name) in self.names.iter().enumerate() {
            writeln!(
                f,
                "{name:width$}  {:>10.4} {:>10.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4}",
                m.mean[j], m.sd[j], m.se_mean[j], m.se_sd[j], m.bias_mean[j], m.bias_sd[j]
            )?;
        }
        Ok(())
    }
}

/// The map of a draw to the reported quantities and their number.
type Map<'a> = (usize, &'a dyn Fn(&[f64], &mut [f64]));

/// The verdict, table and step bias of the quantities `map` (identity if `None`) of the draws of
/// `est`, the bias from the companion's draws mapped alike.
fn verdict(
    est: &Estimate,
    companion: Option<&Companion>,
    map: Option<Map<'_>>,
    names: Vec<String>,
) -> Result<(Convergence, SummaryTable, Option<StepBias>)> {
    let mapped;
    let est = match map {
        Some((width, f)) => {
            mapped = est.map_draws(width, f)?;
            &mapped
        }
        None => est,
    };
    let bias = match (companion, map) {
        (Some(c), Some((width, f))) => Some(c.mapped(width, f)?),
        (Some(c), None) => Some(c.bias.clone()),
        (None, _) => None,
    };
    let rows = match &bias {
        Some(b) => rows_with_bias(est, b)?,
        None => summary(est)?,
    };
    let mut convergence = convergence_of(&rows, est.n_parts());
    if let Some(b) = &bias {
        convergence = with_bias(convergence, &rows, b);
    }
    let convergence = convergence.named(&names);
    Ok((convergence, SummaryTable::new(names, rows)?, bias))
}

/// What [`Sample::run`] made, and every choice on the way.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Sampled<S> {
    /// The tuner's record: mode, whitening, step and why ([`Tuned::reason`]), predicted error.
    pub tuned: Tuned<S>,
    /// The run: draws, per-chain reports, cost, wall time.
    pub output: RunOutput<S>,
    /// The step-bias check, if it ran, per reported quantity (on the constrained scale for a
    /// model with an [`output_layout`](Model::output_layout), as the table).
    pub bias: Option<StepBias>,
    /// The verdict on the reported quantities, with the step bias in the accuracy it states
    /// where the check ran.
    pub convergence: Convergence,
    /// The summary table (with the bias columns where the check ran), on the constrained scale
    /// with the blocks' names for a constrained model.
    pub table: SummaryTable,
    /// The run's settings.
    pub settings: RunSettings,
    /// The model's output layout, if any.
    layout: Option<Layout>,
    /// The bias check's draws, for [`derived`](Self::derived).
    companion: Option<Companion>,
    /// What a run aiming at an accuracy reached ([`Sample::accuracy`], the default); `None` for
    /// a fixed run ([`Sample::draws`]).
    pub target: Option<Target>,
}

impl<S> Sampled<S> {
    /// The pooled draws, on the sampler's coordinates (φ for a constrained model: map them with
    /// [`Layout::constrain_estimate`]).
    pub fn estimate(&self) -> &Estimate {
        &self.output.estimate
    }

    /// The verdict and summary table of derived quantities: `f(θ, out)` writes `names.len()`
    /// numbers for a parameter θ on the scale the table reports (constrained, for a model with
    /// an [`output_layout`](Model::output_layout)); every draw of the run and of the step-bias
    /// check is mapped, so R̂, ESS, the Monte Carlo error, the step bias and the stated bound
    /// are those of the derived quantities themselves.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 3)?;
    /// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(25))?;
    /// let fit = Sample::new(&model, sgld).draws(2_000).run()?;
    /// // The sum and the ratio of the two coefficients.
    /// let derived = fit.derived(&["sum", "ratio"], |t, out| {
    ///     out[0] = t[0] + t[1];
    ///     out[1] = t[0] / t[1];
    /// })?;
    /// println!("{derived}");
    /// assert_eq!(derived.table.names, ["sum", "ratio"]);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    ///
    /// Errors: [`Error::InvalidParameter`] (`"derived"`) naming the quantity and the value
    /// where one is not finite at some draw, or for no names; [`Error::NotStored`] for a
    /// streaming run.
    pub fn derived<T: AsRef<str>>(&self, names: &[T], f: impl Fn(&[f64], &mut [f64])) -> Result<Derived> {
        let names: Vec<String> = names.iter().map(|n| n.as_ref().to_string()).collect();
        let width = names.len();
        if width == 0 {
            return Err(Error::invalid("derived", "no names", "name at least one derived quantity"));
        }
        // The first quantity found not finite (its index and value), reported by name.
        let bad: std::cell::Cell<Option<(usize, f64)>> = std::cell::Cell::new(None);
        let checked = |theta: &[f64], out: &mut [f64]| {
            f(theta, out);
            if bad.get().is_none()
                && let Some((j, v)) = out.iter().enumerate().find(|(_, v)| !v.is_finite())
            {
                bad.set(Some((j, *v)));
            }
        };
        let result = match &self.layout {
            Some(l) => {
                // One buffer for θ over every draw (the map is called once per draw).
                let theta = std::cell::RefCell::new(vec![0.0; l.dim()]);
                let g = |phi: &[f64], out: &mut [f64]| {
                    let mut theta = theta.borrow_mut();
                    l.forward(phi, &mut theta, None);
                    checked(&theta, out)
                };
                verdict(&self.output.estimate, self.companion.as_ref(), Some((width, &g)), names.clone())
            }
            None => verdict(&self.output.estimate, self.companion.as_ref(), Some((width, &checked)), names.clone()),
        };
        if let Some((j, v)) = bad.get() {
            return Err(Error::invalid(
                "derived",
                format!("{} = {v} at a draw", names[j]),
                "a derived quantity must be finite at every draw",
            ));
        }
        let (convergence, table, bias) = result?;
        Ok(Derived { convergence, table, bias })
    }
}

/// The verdict and table of derived quantities ([`Sampled::derived`]).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Derived {
    /// The verdict, with the step bias of the derived quantities where the check ran.
    pub convergence: Convergence,
    /// Their summary table.
    pub table: SummaryTable,
    /// Their step bias, where the check ran.
    pub bias: Option<StepBias>,
}

impl std::fmt::Display for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.convergence)?;
        write!(f, "{}", self.table)
    }
}

impl<S> std::fmt::Display for Sampled<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = &self.target {
            writeln!(f, "{t}")?;
        }
        writeln!(
            f,
            "step {:.4e}{} ({} chains x {} kept draws); {}",
            self.tuned.step_size,
            if self.tuned.whitening.is_some() { " in whitened coordinates" } else { "" },
            self.settings.n_chains,
            self.settings.n_iter - self.settings.burn_in,
            self.tuned
                .predicted_error
                .map_or("no error prediction".to_string(), |e| format!("tune predicted a worst error of {e:.3} sd")),
        )?;
        writeln!(f, "{}", self.convergence)?;
        write!(f, "{}", self.table)
    }
}
