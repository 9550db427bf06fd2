//! Chains of a sampler as units of the engine: the [`Method`] of every [`Sampler`] (a run's
//! chains, a subset per rank, merged in chain order), the checks before a run, and the
//! [`Resumable`] run output.

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::numeric::rng::{ChainRng, stream};
use crate::run::drive::{Finished, Recorder, RunawayDetector, Unit, drive_all};
use crate::run::method::{Method, Resumable};
use crate::run::observe::Observer;
use crate::run::output::{ChainReport, Divergence, RunOutput};
use crate::run::settings::RunSettings;
use crate::samplers::Sampler;
use crate::trace::estimate::Estimate;
use std::time::{Duration, Instant};

/// Chains of a sampler: unit c is a chain, a clone of the sampler bound by [`Sampler::init`] at
/// `starts[c]` and driven by the generator [`stream`]`(seed, [c])`; after `burn_in` iterations
/// every `thin`-th position is recorded with the sampler's [`weight`](Sampler::weight) (and its
/// gradient for [`Storage::SamplesAndGradients`](crate::Storage::SamplesAndGradients)). Nothing of the starts or the sampler is
/// changed. Run by [`Runner`](crate::run::runner::Runner).
impl<S: Sampler> Method for S {
    type Output = RunOutput<S>;

    fn check_size(&self, settings: &RunSettings, dim: usize) -> Result<()> {
        settings.check_chains::<S>(dim, 1)
    }

    fn run_units<M: Model + ?Sized>(
        &self,
        model: &M,
        starts: &[&[f64]],
        settings: &RunSettings,
        observers: &[&dyn Observer],
        units: &[usize],
    ) -> Result<RunOutput<S>> {
        settings.validate()?;
        crate::error::check_len("number of starting points (n_chains)", settings.n_chains, starts.len())?;
        let d = model.dim();
        settings.check_memory(d, 1)?;
        check_burn_in(self, settings)?;
        let chains: Vec<ChainUnit<S>> = units
            .iter()
            .map(|&c| ChainUnit {
                chain: c,
                sampler: self.clone(),
                rng: stream(settings.seed, &[c as u64]),
                recorder: None,
                theta0: starts[c].to_vec(),
                iteration: 0,
                started: false,
                wall: Duration::ZERO,
                runaway: RunawayDetector::default(),
            })
            .collect();
        if settings.check_model {
            check_starts(model, starts, units)?;
        }
        let setup_cost = self.setup_cost();
        let start = Instant::now();
        let done = drive_all(model, chains, settings, observers, start).into_iter().map(Finished::into_done).collect();
        let wall = start.elapsed();
        // A part of a run over ranks whose chains all diverged under `Report` goes to the merge,
        // which fails only if every rank's did.
        let part = units.len() < settings.n_chains;
        assemble(
            done,
            settings,
            setup_cost,
            wall,
            Duration::ZERO,
            crate::run::checkpoint::ModelFingerprint::of(model),
            part,
        )
    }

    /// Chains, estimate parts and divergences in chain order, costs summed (the setup cost
    /// once), the wall time the longest part's. The pooled estimate is built exactly as a single
    /// process builds it.
    fn merge(parts: Vec<(Vec<usize>, RunOutput<S>)>) -> Result<RunOutput<S>> {
        let mut chains: Vec<(usize, ChainReport<S>, Option<Estimate>)> = Vec::new();
        let mut divergences = Vec::new();
        let (mut settings, mut setup_cost, mut wall, mut fingerprint) = (None, Cost::default(), Duration::ZERO, None);
        for (subset, out) in parts {
            if subset.len() != out.chains.len() {
                return Err(Error::CorruptCheckpoint { reason: "a part's chains do not match its subset".into() });
            }
            settings.get_or_insert(out.settings);
            setup_cost = out.setup_cost;
            wall = wall.max(out.wall_time);
            fingerprint.get_or_insert(out.model);
            let mut healthy = out.estimate.into_parts().into_iter();
            for (c, report) in subset.into_iter().zip(out.chains) {
                let est = if report.diverged { None } else { healthy.next() };
                chains.push((c, report, est));
            }
            divergences.extend(out.divergences);
        }
        let settings = settings.ok_or(Error::NoSamples { reason: "no chain" })?;
        chains.sort_by_key(|c| c.0);
        if chains.iter().enumerate().any(|(i, c)| c.0 != i) || chains.len() != settings.n_chains {
            return Err(Error::CorruptCheckpoint { reason: "the parts do not cover every chain once".into() });
        }
        divergences.sort_by_key(|d: &Divergence| d.chain);
        let estimates: Vec<Estimate> = chains.iter_mut().filter_map(|c| c.2.take()).collect();
        if estimates.is_empty() {
            return Err(divergences
                .first()
                .map(Divergence::to_error)
                .unwrap_or(Error::NoSamples { reason: "no chain" }));
        }
        let chains: Vec<ChainReport<S>> = chains.into_iter().map(|c| c.1).collect();
        let cost = chains.iter().map(|c| c.cost).sum::<Cost>() + setup_cost;
        Ok(RunOutput {
            estimate: Estimate::combine(estimates)?,
            chains,
            cost,
            setup_cost,
            wall_time: wall,
            settings,
            divergences,
            model: fingerprint.ok_or(Error::NoSamples { reason: "no chain" })?,
        })
    }
}

/// Refuses a burn-in shorter than the sampler's adaptation (its draws then are not exact).
fn check_burn_in<S: Sampler>(sampler: &S, settings: &RunSettings) -> Result<()> {
    let adapt = sampler.adaptation_steps();
    if settings.burn_in < adapt {
        return Err(Error::invalid(
            "burn_in",
            format!("{} (the sampler adapts during its first {adapt} iterations)", settings.burn_in),
            "is shorter than the sampler's adaptation, whose draws are not exact: raise burn_in or lower the sampler's adapt_steps (0 for a fixed step)",
        ));
    }
    Ok(())
}

/// Runs [`check_model`](crate::check_model) at each distinct starting point (errors wrapped
/// with the chain), returning the cost spent (which runs do not count).
pub(crate) fn check_starts<M: Model + ?Sized, I: AsRef<[f64]>>(
    model: &M,
    inits: &[I],
    selected: &[usize],
) -> Result<Cost> {
    let mut cost = Cost::default();
    for &c in selected {
        let theta = inits[c].as_ref();
        if selected.iter().take_while(|&&o| o < c).any(|&o| inits[o].as_ref() == theta) {
            continue;
        }
        if theta.len() != model.dim() || !crate::error::all_finite(theta) {
            // The sampler's own checks name these.
            continue;
        }
        let check = crate::models::check::check_model(model, theta, &crate::models::check::CheckSettings::default())
            .map_err(|e| Error::Chain { chain: c, source: Box::new(e) })?;
        cost += check.cost;
    }
    Ok(cost)
}

/// Chains go on from where they stopped: each chain carries its sampler state, its generator
/// and its recorder.
impl<S: Sampler> Resumable for RunOutput<S> {
    fn resume<M: Model + ?Sized>(self, model: &M, observers: &[&dyn Observer]) -> Result<Self> {
        // Refused before anything is taken apart: the run comes back with the error.
        let checks = (|| {
            self.settings.validate()?;
            crate::error::check_len("model dimension (resumed run)", self.model.dim, model.dim())?;
            self.model.check(model)?;
            self.settings.check_memory(self.model.dim, 1)?;
            if self.chains.iter().any(|c| c.iterations > self.settings.n_iter) {
                return Err(Error::invalid(
                    "n_iter",
                    self.settings.n_iter,
                    "is below the iterations a chain has already done",
                ));
            }
            Ok(())
        })();
        if let Err(e) = checks {
            return Err(e.keeping(self));
        }
        let settings = self.settings;
        let mut healthy = self.estimate.into_parts().into_iter();
        let mut diverged = self.divergences.into_iter();
        let mut units = Vec::with_capacity(self.chains.len());
        let mut done_diverged = Vec::new();
        for (c, report) in self.chains.into_iter().enumerate() {
            if report.diverged {
                let div = diverged.next().ok_or_else(|| Error::CorruptCheckpoint {
                    reason: "a diverged chain has no divergence record".into(),
                })?;
                done_diverged.push((c, report, div));
                continue;
            }
            let part = healthy.next();
            let recorder = Recorder::from_part(&settings, model.dim(), 1, report.sampler.gradient().is_some(), part)?;
            let runaway = RunawayDetector::new(report.sampler.position());
            units.push(ChainUnit {
                chain: c,
                sampler: report.sampler,
                rng: report.rng,
                recorder: Some(recorder),
                theta0: Vec::new(),
                iteration: report.iterations,
                started: true,
                wall: report.wall_time,
                runaway,
            });
        }
        let setup_cost = self.setup_cost;
        let start = Instant::now();
        let mut done: Vec<Finished<ChainUnitDone<S>>> =
            drive_all(model, units, &settings, observers, start).into_iter().map(Finished::into_done).collect();
        for (chain, report, div) in done_diverged {
            done.push(Finished::Diverged(ChainUnitDone { chain, report, estimate: None }, div, None));
        }
        done.sort_by_key(Finished::chain);
        assemble(done, &settings, setup_cost, start.elapsed(), self.wall_time, self.model, false)
    }
}

/// A chain as the runner drives it: the sampler, its generator and recorder, where it is.
struct ChainUnit<S> {
    chain: usize,
    sampler: S,
    rng: ChainRng,
    recorder: Option<Recorder>,
    theta0: Vec<f64>,
    iteration: u64,
    started: bool,
    wall: Duration,
    runaway: RunawayDetector,
}

impl<S: Sampler> Unit for ChainUnit<S> {
    fn index(&self) -> usize {
        self.chain
    }

    fn start<M: Model + ?Sized>(&mut self, model: &M, settings: &RunSettings) -> Result<()> {
        if !self.started {
            if let Err(e) = self.sampler.init(model, &self.theta0, &mut self.rng) {
                // A non-finite gradient at the start is located: the coordinate and the datum.
                return Err(match e.root() {
                    Error::NonFiniteGradient { iteration: 0 } => {
                        crate::models::check::locate_non_finite(model, &self.theta0, 0, None).unwrap_or(e)
                    }
                    _ => e,
                });
            }
            self.runaway = RunawayDetector::new(&self.theta0);
            self.recorder = Some(Recorder::new(settings, model.dim(), 1, self.sampler.gradient().is_some())?);
            self.started = true;
        }
        Ok(())
    }

    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()> {
        let rec = self.recorder.as_mut().ok_or(Error::NotInitialised)?;
        let s = &mut self.sampler;
        for k in self.iteration + 1..=to {
            s.step(model, &mut self.rng)?;
            self.runaway.check(model, k, s.position(), s.gradient(), settings.runaway_factor)?;
            self.iteration = k;
            // A weight of exactly 0 marks a draw the sampler does not keep (cSGLD's exploration).
            if settings.keeps(k) && s.weight() != 0.0 {
                rec.record(s.position(), s.weight(), s.gradient(), s.cost().datum_gradients, s.draw_step_size());
            }
        }
        Ok(())
    }

    fn iteration(&self) -> u64 {
        self.iteration
    }

    fn cost(&self) -> Cost {
        self.sampler.cost()
    }

    fn position(&self) -> &[f64] {
        self.sampler.position()
    }

    fn weight(&self) -> f64 {
        self.sampler.weight()
    }

    fn wall_mut(&mut self) -> &mut Duration {
        &mut self.wall
    }
}

impl<S: Sampler> Finished<ChainUnit<S>> {
    fn into_done(self) -> Finished<ChainUnitDone<S>> {
        match self {
            Finished::Ran(u, stopped) => Finished::Ran(u.into_done(), stopped),
            Finished::Diverged(u, div, e) => Finished::Diverged(u.into_done(), div, e),
            Finished::Failed(u, e) => Finished::Failed(u.into_done(), e),
        }
    }
}

impl<S> Finished<ChainUnitDone<S>> {
    fn chain(&self) -> usize {
        match self {
            Finished::Ran(u, _) | Finished::Diverged(u, ..) | Finished::Failed(u, _) => u.chain,
        }
    }
}

/// A finished chain's parts, for assembling the output.
struct ChainUnitDone<S> {
    chain: usize,
    report: ChainReport<S>,
    estimate: Option<Estimate>,
}

/// Builds the output of a run of chains. A failed chain (an error, a caught panic) is kept in
/// the output as a divergence with its draws, and the run's result is then the lowest failing
/// chain's error with the output kept ([`Error::Kept`]); so is a run whose every chain diverged
/// under [`OnDivergence::Report`], unless it is a `part` of a run over ranks (the merge judges the
/// whole). When no chain made an iteration (every start failed) there is nothing to keep: the
/// error alone.
fn assemble<S: Sampler>(
    done: Vec<Finished<ChainUnitDone<S>>>,
    settings: &RunSettings,
    setup_cost: Cost,
    wall: Duration,
    wall_before: Duration,
    model: crate::run::checkpoint::ModelFingerprint,
    part: bool,
) -> Result<RunOutput<S>> {
    let mut estimates = Vec::new();
    let mut chains = Vec::new();
    let mut divergences = Vec::new();
    let mut first_divergence = None;
    let mut failure = None;
    for f in done {
        match f {
            Finished::Ran(u, stopped) => {
                let ChainUnitDone { mut report, estimate, .. } = u;
                report.stopped = stopped;
                if let Some(e) = estimate {
                    estimates.push(e);
                }
                chains.push(report);
            }
            Finished::Diverged(u, mut div, error) => {
                let ChainUnitDone { mut report, estimate, .. } = u;
                report.diverged = true;
                if let Some(e) = estimate {
                    div.draws.push(e);
                }
                first_divergence.get_or_insert_with(|| error.unwrap_or_else(|| div.to_error()));
                chains.push(report);
                divergences.push(div);
            }
            Finished::Failed(u, error) => {
                let ChainUnitDone { chain, mut report, estimate } = u;
                report.diverged = true;
                let div = Divergence {
                    chain,
                    iteration: error.iteration().unwrap_or(report.iterations + 1),
                    non_finite_state: matches!(error.root(), Error::NonFiniteState { .. }),
                    message: error.to_string(),
                    draws: estimate.into_iter().collect(),
                };
                failure.get_or_insert(error);
                chains.push(report);
                divergences.push(div);
            }
        }
    }
    let all_diverged = estimates.is_empty();
    let cost = chains.iter().map(|c| c.cost).sum::<Cost>() + setup_cost;
    let estimate = if all_diverged { Estimate::empty(model.dim) } else { Estimate::combine(estimates)? };
    let output = RunOutput {
        estimate,
        chains,
        cost,
        setup_cost,
        wall_time: wall_before + wall,
        settings: *settings,
        divergences,
        model,
    };
    let all_diverged = all_diverged && !part;
    match failure.or_else(|| all_diverged.then(|| first_divergence.unwrap_or(Error::NoSamples { reason: "no chain" })))
    {
        // Kept only when some chain made an iteration (a failure at every start has nothing).
        Some(e) if output.chains.iter().any(|c| c.iterations > 0) => Err(e.keeping(output)),
        Some(e) => Err(e),
        None => Ok(output),
    }
}

impl<S: Sampler> ChainUnit<S> {
    /// The report and the estimate of a finished chain.
    fn into_done(self) -> ChainUnitDone<S> {
        let cost = self.sampler.cost();
        let estimate = self.recorder.map(Recorder::finish);
        let report = ChainReport {
            sampler: self.sampler,
            cost,
            wall_time: self.wall,
            iterations: self.iteration,
            stopped: false,
            diverged: false,
            rng: self.rng,
        };
        ChainUnitDone { chain: self.chain, report, estimate }
    }
}
