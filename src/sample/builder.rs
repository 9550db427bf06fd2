//! The [`Sample`] builder (the model, the sampler and the run's settings) and its result [`Sampled`].

use crate::coupled::step_bias::{Companion, STEP_BIAS_COST, StepBias, rows_with_bias, with_bias};
use crate::error::{Error, Result};
use crate::models::Layout;
use crate::models::model::Model;
use crate::run::observe::Observer;
use crate::run::{RunOutput, RunSettings};
use crate::sample::target::{DEFAULT_ACCURACY, DEFAULT_BUDGET, DEFAULT_BUDGET_EPOCHS, Target};
use crate::trace::diagnostics::{Convergence, SummaryTable, convergence_of, summary};
use crate::trace::estimate::Estimate;
use crate::tune::{PlannedRun, TuneSettings, Tuned};

/// Runs a `Sample` path with panics caught: user code outside the chains (the model's methods
/// in the mode search, the tuning, the step-bias check) panicking is [`Error::Panic`] at
/// iteration 0 (in a chain, the chain's boundary catches it first).
pub(super) fn outside_chains<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    crate::run::contained(f).unwrap_or_else(|message| {
        Err(Error::Panic {
            during: "Sample's set-up or checks outside the chains (the model's code in the mode search, the tuning or the step-bias check)",
            iteration: 0,
            message,
        })
    })
}

/// The spread of [`Sample`]'s dispersed starts, in Laplace sds around the mode.
pub const START_SPREAD: f64 = 2.0;

/// The trustworthy path as one value: a model, a sampler (any step: [`tune`](crate::tune::tune) chooses it), the
/// run's length stated once, then [`run`](Self::run). See the [module docs](crate::sample).
#[derive(Debug, Clone)]
#[must_use = "a Sample does nothing until .run()"]
pub struct Sample<'m, M: ?Sized, S> {
    pub(super) model: &'m M,
    pub(super) sampler: S,
    pub(super) draws: u64,
    pub(super) accuracy: Option<f64>,
    pub(super) budget: Option<u64>,
    pub(super) time_limit: Option<std::time::Duration>,
    pub(super) thin: u64,
    pub(super) chains: usize,
    pub(super) burn_in: Option<u64>,
    pub(super) seed: u64,
    pub(super) start: Option<Vec<f64>>,
    /// The user's chain starts ([`chain_starts`](Sample::chain_starts)), if any.
    pub(super) chain_starts: Option<Vec<Vec<f64>>>,
    pub(super) tune: TuneSettings,
    pub(super) bias_cost: Option<f64>,
    /// Whether the step-bias check grows where its own noise sets the bound (the default;
    /// [`bias_check`](Sample::bias_check) fixes its cost).
    pub(super) bias_grows: bool,
    pub(super) names: Option<Vec<String>>,
    /// The user's observers of the run's chains ([`observer`](Sample::observer)).
    pub(super) observers: Observers<'m>,
}

/// The user's observers of a [`Sample`]'s chains (a list of references, shown by their number).
#[derive(Clone, Default)]
pub(super) struct Observers<'m>(pub(super) Vec<&'m dyn Observer>);

impl std::fmt::Debug for Observers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} observer(s)", self.0.len())
    }
}

/// What [`Sample::plan`] settles before a run: its settings, the model's output layout, the
/// start of the mode search and the tuner's settings for this run.
type Plan = (RunSettings, Option<Layout>, Vec<f64>, TuneSettings);

impl<'m, M: Model + ?Sized, S> Sample<'m, M, S> {
    /// The run's settings, layout, start and tuner settings, checked.
    pub(super) fn plan(&self) -> Result<Plan> {
        let d = self.model.dim();
        if self.accuracy.is_none() && self.draws == 0 {
            return Err(Error::invalid(
                "draws",
                0,
                "must be >= 1: the kept draws per chain of a fixed run (Sample::draws)",
            ));
        }
        let settings = self.run_settings();
        settings.validate()?;
        // Sizes before anything is allocated: the chains, their step-bias companions (an
        // antithetic triple each), the tuner's pilots and the mode search's vectors.
        let units = self.chains.saturating_mul(4).saturating_add(self.tune.pilot_chains).saturating_add(4);
        RunSettings { n_chains: units, ..settings }.check_states::<S>(
            d,
            1,
            "the tuned path's chains, companions, pilots and mode search (Sample::chains × the sampler's state in the model's dimension)",
        )?;
        if self.accuracy.is_none() {
            settings.check_memory(d, 1)?;
        }
        let theta0 = self.start.clone().unwrap_or_else(|| vec![0.0; d]);
        for s in self.chain_starts.iter().flatten() {
            crate::error::check_len("chain start (Sample::chain_starts)", d, s.len())?;
            if !crate::error::all_finite(s) {
                return Err(Error::NonFiniteStart { what: "a chain start (Sample::chain_starts)" });
            }
        }
        let layout = self.model.output_layout().cloned();
        let ts = TuneSettings { planned_run: PlannedRun::new(self.draws, self.chains), ..self.tune.clone() };
        Ok((settings, layout, theta0, ts))
    }

    /// The reported quantities' names: the user's (checked against their number `width`), else
    /// the layout's block names, else the model's [`parameter_names`](Model::parameter_names),
    /// else `theta[j]`.
    pub(super) fn reported_names(&self, layout: Option<&Layout>, width: usize) -> Result<Vec<String>> {
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
    /// [`STEP_BIAS_MAX_COST`](crate::STEP_BIAS_MAX_COST) where its own noise sets the bound.
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
            chain_starts: None,
            tune: TuneSettings::default(),
            bias_cost: Some(STEP_BIAS_COST),
            bias_grows: true,
            names: None,
            observers: Observers::default(),
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
    /// [`time_limit`](Self::time_limit) or [`MAX_EXTENSIONS`](crate::sample::MAX_EXTENSIONS) end it with a verdict that says
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

    /// Where the chains start, one point per chain (their number sets [`chains`](Self::chains)),
    /// instead of dispersed around the tuned mode (the default: [`START_SPREAD`] Laplace sds).
    /// The tuner's mode search still starts at [`start`](Self::start).
    ///
    /// The verdict's R̂ compares the chains, so it sees only what they visit: on a posterior
    /// with several modes, chains started around one mode agree with each other and can all
    /// miss the others — the default starts then give a "converged" verdict on one mode.
    /// Starts spread over the places a mode may be let R̂ see chains that disagree (NOT
    /// CONVERGED); a sampler made to cross between modes ([`ReSgld`](crate::ReSgld)) is the
    /// remedy.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    ///
    /// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 3)?;
    /// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(25))?;
    /// let starts = [[-2.0, -2.0], [2.0, 2.0], [-2.0, 2.0], [2.0, -2.0]];
    /// let fit = Sample::new(&model, sgld).draws(2_000).chain_starts(&starts).run()?;
    /// assert_eq!(fit.output.chains.len(), 4);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn chain_starts<I: AsRef<[f64]>>(mut self, starts: &[I]) -> Self {
        self.chain_starts = Some(starts.iter().map(|s| s.as_ref().to_vec()).collect());
        self.chains = starts.len();
        self
    }

    /// The chains' starts: the user's, or `dispersed` (the default, around the tuned mode).
    pub(super) fn chain_starts_or(&self, dispersed: impl FnOnce() -> Result<Vec<Vec<f64>>>) -> Result<Vec<Vec<f64>>> {
        match &self.chain_starts {
            Some(s) => Ok(s.clone()),
            None => dispersed(),
        }
    }

    /// The tuner's settings, for experts; their `planned_run` is replaced by this run's draws ×
    /// chains.
    pub fn tune_settings(mut self, settings: TuneSettings) -> Self {
        self.tune = settings;
        self
    }

    /// The step-bias check's cost relative to the run ([`step_bias`](crate::step_bias)), fixed;
    /// `None` turns it off (the verdict then states the Monte Carlo error alone). Default: at
    /// [`STEP_BIAS_COST`], grown up to [`STEP_BIAS_MAX_COST`](crate::STEP_BIAS_MAX_COST) where the check's own noise is the
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

    /// Adds an observer of the run's chains (the first run and its extensions; not the tuner's
    /// pilots): a progress display, a [`StopFlag`](crate::observe::StopFlag) raised by a signal
    /// handler or a user interface, any [`Observer`]. It is also asked, through
    /// [`Observer::observe_bias_check`], during the step-bias check that follows the chains.
    /// Observers do not change the draws (nor the check's) of a run they do not stop.
    ///
    /// An observer that stops the step-bias check ends the run as one stopped in its chains: the
    /// chains' draws are all kept, the check is skipped. An observer that stops a chain ends the
    /// run there: the result keeps what the chains drew,
    /// the step-bias check is skipped (its companion would cost a share of the run, and the user
    /// asked to stop), so the verdict's bound is the Monte Carlo error alone, and a run aiming at an
    /// accuracy is not extended: its [`Target`](crate::sample::Target) is not reached and says why.
    /// [`Sampled::stopped`] tells whether an observer stopped it. On the coupled paths
    /// (Richardson–Romberg, multilevel) observers are not called.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::observe::{Progress, StopWhen};
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 3)?;
    /// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50))?;
    /// // As a StopFlag raised by a Ctrl-C handler would: stop at iteration 4 000 of 11 000.
    /// let stop = StopWhen { condition: |p: &Progress<'_>| p.iteration >= 4_000, interval: 100 };
    /// let fit = Sample::new(&model, sgld).draws(10_000).observer(&stop).run()?;
    /// assert!(fit.stopped && fit.bias.is_none());
    /// assert!(fit.output.chains.iter().all(|c| c.iterations == 4_000));
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn observer(mut self, observer: &'m dyn Observer) -> Self {
        self.observers.0.push(observer);
        self
    }

    /// The run's settings: what [`run`](Self::run) passes to [`Runner`](crate::Runner) for a fixed run of
    /// [`draws`](Self::draws) (when aiming at an accuracy, the first run's length is the tuner's).
    pub fn run_settings(&self) -> RunSettings {
        self.settings_for(self.draws)
    }

    /// The run's settings for `draws` kept draws per chain.
    pub(super) fn settings_for(&self, draws: u64) -> RunSettings {
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
    pub(super) fn budget_or_default(&self) -> u64 {
        self.budget.unwrap_or(DEFAULT_BUDGET.max(DEFAULT_BUDGET_EPOCHS.saturating_mul(self.model.n_data() as u64)))
    }
}

/// The map of a draw to the reported quantities and their number.
type Map<'a> = (usize, &'a dyn Fn(&[f64], &mut [f64]));

/// The verdict, table and step bias of the quantities `map` (identity if `None`) of the draws of
/// `est`, the bias from the companion's draws mapped alike.
pub(super) fn verdict(
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
    pub(super) layout: Option<Layout>,
    /// The bias check's draws, for [`derived`](Self::derived).
    pub(super) companion: Option<Companion>,
    /// What a run aiming at an accuracy reached ([`Sample::accuracy`], the default); `None` for
    /// a fixed run ([`Sample::draws`]).
    pub target: Option<Target>,
    /// Whether an observer of the user's ([`Sample::observer`]) stopped the run before its end
    /// or stopped its step-bias check (the check then did not run, or gave no bound).
    pub stopped: bool,
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
        // The chains judged (a stopped run's that drew), at the kept draws they were cut to.
        let s = &self.output.settings;
        let kept = (self.output.chains.iter().filter(|c| !c.diverged))
            .map(|c| c.iterations.saturating_sub(s.burn_in) / s.thin.max(1))
            .filter(|&k| k > 0);
        let (chains, draws) = kept.fold((0, u64::MAX), |(n, m), k| (n + 1, m.min(k)));
        writeln!(
            f,
            "step {:.4e}{} ({} chains x {} kept draws); {}",
            self.tuned.step_size,
            if self.tuned.whitening.is_some() { " in whitened coordinates" } else { "" },
            chains,
            if chains == 0 { 0 } else { draws },
            self.tuned
                .predicted_error
                .map_or("no error prediction".to_string(), |e| format!("tune predicted a worst error of {e:.3} sd")),
        )?;
        writeln!(f, "{}", self.convergence)?;
        write!(f, "{}", self.table)
    }
}
