//! The trustworthy path in one call: [`Sample`].
//!
//! ```
//! use sgmcmc::prelude::*;
//!
//! let model = LogisticRegression::synthetic(2_000, 3, 10.0, 1)?;
//! let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(50))?;
//! let fit = Sample::new(&model, sgld).draws(2_000).chains(4).run()?;
//! println!("{fit}"); // the tuned step, the verdict with its step bias, the summary table
//! assert!(fit.convergence.bias_bound.is_some());
//! # Ok::<(), sgmcmc::Error>(())
//! ```
//!
//! [`Sample::run`] does, in order, what the seven-call path does by hand:
//! 1. [`tune`]: the mode, the whitening (the default [`Precondition::Auto`](crate::tune::Precondition::Auto)), the gradient-noise
//!    correction where the sampler takes one, and the step for exactly this run (the planned
//!    run is the kept draws × chains given here, stated once);
//! 2. [`dispersed_starts`]: one start per chain around the mode, twice the Laplace spread, so
//!    that split-R̂ can see chains that have not forgotten where they began;
//! 3. [`run_chains`], with the model checked at the starts;
//! 4. [`step_bias`]: a coupled companion at half the step from the chains'
//!    last states, at [`STEP_BIAS_COST`] of the run's cost by default
//!    ([`bias_check`](Sample::bias_check) sets it; `None` turns it off);
//! 5. the verdict ([`Convergence`], with the step bias folded into the accuracy it states) and
//!    the summary table (with the bias beside the Monte Carlo errors).
//!
//! Every choice it made is in the [`Sampled`] it returns: the tuner's record ([`Tuned`], whose
//! `reason` and `preconditioning` say why), the run's settings and output, the bias check. The
//! pieces stay public for experts: the same draws come from calling them in this order with
//! the settings recorded in [`Sampled`].

use crate::coupled::step_bias::{STEP_BIAS_COST, StepBias, rows_with_bias, step_bias, with_bias};
use crate::error::Result;
use crate::models::model::Model;
use crate::run::{RunOutput, RunSettings, run_chains};
use crate::samplers::Discretisation;
use crate::trace::diagnostics::{Convergence, SummaryTable, convergence_of, summary};
use crate::tune::{PlannedRun, Tunable, TuneSettings, Tuned, dispersed_starts, tune};

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
    chains: usize,
    burn_in: Option<u64>,
    seed: u64,
    start: Option<Vec<f64>>,
    tune: TuneSettings,
    bias_cost: Option<f64>,
    names: Option<Vec<String>>,
}

impl<'m, M: Model + ?Sized, S: Tunable + Discretisation> Sample<'m, M, S> {
    /// `sampler` on `model` with the defaults: 5 000 kept draws per chain, 4 chains, burn-in
    /// `max(1 000, draws/10)`, seed 0, the search for the mode from θ = 0,
    /// [`TuneSettings::default()`], the step-bias check at [`STEP_BIAS_COST`] of the run's cost.
    pub fn new(model: &'m M, sampler: S) -> Self {
        Sample {
            model,
            sampler,
            draws: 5_000,
            chains: 4,
            burn_in: None,
            seed: 0,
            start: None,
            tune: TuneSettings::default(),
            bias_cost: Some(STEP_BIAS_COST),
            names: None,
        }
    }

    /// Kept draws per chain (after the burn-in); the step is tuned for them × the chains.
    pub fn draws(mut self, draws: u64) -> Self {
        self.draws = draws;
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

    /// The step-bias check's cost relative to the run ([`step_bias`]); `None`
    /// turns it off (the verdict then states the Monte Carlo error alone). Default
    /// `Some(`[`STEP_BIAS_COST`]`)`.
    pub fn bias_check(mut self, cost: Option<f64>) -> Self {
        self.bias_cost = cost;
        self
    }

    /// The parameters' names for the summary table. Default `theta[0]`, `theta[1]`, …
    pub fn names<T: AsRef<str>>(mut self, names: &[T]) -> Self {
        self.names = Some(names.iter().map(|n| n.as_ref().to_string()).collect());
        self
    }

    /// The run's settings: what [`run`](Self::run) passes to [`run_chains`].
    pub fn run_settings(&self) -> RunSettings {
        let burn_in = self.burn_in.unwrap_or((self.draws / 10).max(1_000));
        RunSettings {
            n_iter: self.draws.saturating_add(burn_in),
            burn_in,
            n_chains: self.chains,
            seed: self.seed,
            ..Default::default()
        }
    }

    /// Tunes, runs, checks the step's bias and states the verdict (see the [module
    /// docs](self)).
    ///
    /// Errors: invalid settings (no draws, no chain, a bias-check cost outside (0, 10]); those
    /// of [`tune`], [`dispersed_starts`], [`run_chains`] and
    /// [`step_bias`]; [`Error::DimensionMismatch`](crate::Error::DimensionMismatch)
    /// for a start or names not of the model's dimension.
    pub fn run(self) -> Result<Sampled<S>> {
        let d = self.model.dim();
        let settings = self.run_settings();
        settings.validate()?;
        let theta0 = self.start.clone().unwrap_or_else(|| vec![0.0; d]);
        let names = match &self.names {
            Some(n) => {
                crate::error::check_len("names", d, n.len())?;
                n.clone()
            }
            None => (0..d).map(|j| format!("theta[{j}]")).collect(),
        };
        let ts = TuneSettings { planned_run: PlannedRun::new(self.draws, self.chains), ..self.tune.clone() };
        let tuned = tune(self.model, &self.sampler, &theta0, &ts)?;
        let starts = dispersed_starts(self.model, &tuned.mode, self.chains, START_SPREAD, self.seed)?;
        let output = run_chains(self.model, &tuned.sampler, &starts, &settings)?;
        let (bias, rows) = match self.bias_cost {
            Some(cost) => {
                let b = step_bias(self.model, &tuned.sampler, &output, cost)?;
                let rows = rows_with_bias(&output.estimate, &b)?;
                (Some(b), rows)
            }
            None => (None, summary(&output.estimate)?),
        };
        let mut convergence = convergence_of(&rows, output.estimate.n_parts());
        if let Some(b) = &bias {
            convergence = with_bias(convergence, &rows, b);
        }
        let table = SummaryTable::new(names, rows)?;
        Ok(Sampled { tuned, output, bias, convergence, table, settings })
    }
}

/// What [`Sample::run`] made, and every choice on the way.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Sampled<S> {
    /// The tuner's record: mode, whitening, step and why ([`Tuned::reason`]), predicted error.
    pub tuned: Tuned<S>,
    /// The run: draws, per-chain reports, cost, wall time.
    pub output: RunOutput<S>,
    /// The step-bias check, if it ran.
    pub bias: Option<StepBias>,
    /// The verdict, with the step bias in the accuracy it states where the check ran.
    pub convergence: Convergence,
    /// The summary table (with the bias columns where the check ran).
    pub table: SummaryTable,
    /// The run's settings.
    pub settings: RunSettings,
}

impl<S> Sampled<S> {
    /// The pooled draws.
    pub fn estimate(&self) -> &crate::trace::estimate::Estimate {
        &self.output.estimate
    }
}

impl<S> std::fmt::Display for Sampled<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
