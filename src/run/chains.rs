//! Chains of a sampler as units of the engine: a run's chains on a placement (a subset per rank,
//! merged in chain order), the checks before a run, resuming, and the deprecated run functions.

use super::*;

/// Runs `settings.n_chains` chains of `sampler` on `model`, all started at `theta0`.
///
/// Each chain is a clone of `sampler`, bound by [`Sampler::init`] and driven by the generator
/// [`stream`]`(seed, [c])`. After `burn_in` iterations every `thin`-th position is recorded with
/// the sampler's [`weight`](Sampler::weight) (and its gradient for
/// [`Storage::SamplesAndGradients`]). Nothing of `theta0` or `sampler` is changed.
///
/// Errors: invalid settings; anything `init` or `step` returns, wrapped in [`Error::Chain`]
/// with the chain's index (the lowest failing index when several fail); [`Error::NotStored`] if
/// gradients are to be stored but the sampler keeps none.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{StepSize};
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7).unwrap();
/// let sgld = Sgld::new(SgldSettings { step_size: StepSize::Constant(1e-4) }, Minibatch::new(100)).unwrap();
/// let settings = RunSettings { n_iter: 5_000, burn_in: 500, ..Default::default() };
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run().unwrap();
/// let mean = out.estimate.mean().unwrap();
/// assert_eq!(mean.len(), 2);
/// ```
#[deprecated(since = "0.2.0", note = "use `Runner::new(model, sampler).start(theta0).settings(*settings).run()`")]
pub fn run<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<RunOutput<S>> {
    Runner::new(model, sampler).start(theta0).settings(*settings).run()
}

/// As [`run`], with one starting point per chain (`inits.len()` must equal `n_chains`): a slice
/// of anything that views as `&[f64]` — `&[&[f64]]`, `&Vec<Vec<f64>>`, `&[[f64; D]; C]`, … (see
/// [`dispersed_starts`](crate::tune::dispersed_starts) for starting points spread around the mode, which R̂ needs).
///
/// A panic inside a chain (the model's code panicking, say) is caught at the chain's boundary:
/// [`Error::Panic`] in that chain, with the run's output kept ([`Error::Kept`]), as for
/// [`Runner::run`].
///
/// ```
/// use sgmcmc::prelude::*;
///
/// let model = LinearGaussian::synthetic(500, 3, 1.0, 10.0, 1)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, n_chains: 4, ..Default::default() };
/// let starts = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, -1.0, -1.0]];
/// let out = Runner::new(&model, &sgld).starts(&starts).settings(settings).run()?;
/// assert_eq!(out.chains.len(), 4);
/// let starts: Vec<Vec<f64>> = starts.iter().map(|s| s.to_vec()).collect();
/// assert!(Runner::new(&model, &sgld).starts(&starts).settings(settings).run().is_ok());
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[deprecated(since = "0.2.0", note = "use `Runner::new(model, sampler).starts(inits).settings(*settings).run()`")]
pub fn run_chains<M: Model + ?Sized, S: Sampler, I: AsRef<[f64]>>(
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
) -> Result<RunOutput<S>> {
    Runner::new(model, sampler).starts(inits).settings(*settings).run()
}

/// As [`run`], with observers (see [`observe`](crate::run::observe)): each is called at every chain's
/// start, every [`interval`](Observer::interval) iterations and at its end, from the thread
/// running that chain, and may stop it. A stopped chain keeps exactly the draws recorded up to
/// the iteration where it stopped; the run can be [`resume`]d.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Resume};
/// use sgmcmc::observe::Budget;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?;
/// let settings = RunSettings { n_iter: 5_000, burn_in: 500, n_chains: 2, ..Default::default() };
/// // 200 000 datum gradients for the run, 100 000 per chain: each chain stops once its initial
/// // gradient and 999 steps have cost 100 × 1 000.
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).observers(&[&Budget::datum_gradients(200_000)]).run()?;
/// assert!(!out.is_complete());
/// assert_eq!(out.chains[0].iterations, 999);
/// assert_eq!(out.cost.datum_gradients, 200_000);
/// // Later: carry on to 5 000 iterations, as if it had never stopped.
/// let done = Resume::new(&model, out).run()?;
/// assert!(done.is_complete());
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, sampler).start(theta0).settings(*settings).observers(observers).run()`"
)]
pub fn run_observed<M: Model + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    Runner::new(model, sampler).start(theta0).settings(*settings).observers(observers).run()
}

/// As [`run_observed`], with one starting point per chain (`inits.len()` must equal `n_chains`;
/// anything that views as `&[f64]`, as [`run_chains`]).
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, sampler).starts(inits).settings(*settings).observers(observers).run()`"
)]
pub fn run_chains_observed<M: Model + ?Sized, S: Sampler, I: AsRef<[f64]>>(
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    run_chains_on(&Local, model, sampler, inits, settings, observers)
}

/// [`run_chains_observed`] on a placement: the chains placed here run, and over ranks every
/// process gets the whole run (`distributed::run_chains_mpi`). The one runner of chains.
pub(crate) fn run_chains_on<P, M, S, I>(
    p: &P,
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>>
where
    P: Distribute<RunOutput<S>>,
    M: Model + ?Sized,
    S: Sampler,
    I: AsRef<[f64]>,
{
    p.distribute(
        settings.n_chains,
        |units| run_chain_subset(model, sampler, inits, settings, observers, units),
        merge_chain_subsets,
    )
}

/// The chains `selected` (increasing indices below `n_chains`) of the run
/// [`run_chains_observed`] would make, with the same streams `(seed, [c])`: the output holds
/// only those chains, in that order. The MPI runner gives each rank a subset and merges the
/// outputs with [`merge_chain_subsets`].
pub(crate) fn run_chain_subset<M: Model + ?Sized, S: Sampler, I: AsRef<[f64]>>(
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
    selected: &[usize],
) -> Result<RunOutput<S>> {
    settings.validate()?;
    crate::error::check_len("number of starting points (n_chains)", settings.n_chains, inits.len())?;
    let d = model.dim();
    settings.check_memory(d, 1)?;
    check_burn_in(sampler, settings)?;
    let units: Vec<ChainUnit<S>> = selected
        .iter()
        .map(|&c| ChainUnit {
            chain: c,
            sampler: sampler.clone(),
            rng: stream(settings.seed, &[c as u64]),
            recorder: None,
            theta0: inits[c].as_ref().to_vec(),
            iteration: 0,
            started: false,
            wall: Duration::ZERO,
            runaway: RunawayDetector::default(),
        })
        .collect();
    if settings.check_model {
        check_starts(model, inits, selected)?;
    }
    let setup_cost = sampler.setup_cost();
    let start = Instant::now();
    let done = drive_all(model, units, settings, observers, start).into_iter().map(Finished::into_done).collect();
    let wall = start.elapsed();
    // A part of a run over ranks whose chains all diverged under `Report` goes to the merge,
    // which fails only if every rank's did.
    let part = selected.len() < settings.n_chains;
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

/// Merges the outputs of [`run_chain_subset`] over disjoint subsets that together cover every
/// chain (`parts[i]` ran chains `subsets[i]`) into the output of the whole run: chains, estimate
/// parts and divergences in chain order, costs summed (the setup cost once), the wall time the
/// longest part's. The pooled estimate is built exactly as a single process builds it.
pub(crate) fn merge_chain_subsets<S>(parts: Vec<(Vec<usize>, RunOutput<S>)>) -> Result<RunOutput<S>> {
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
        return Err(divergences.first().map(Divergence::to_error).unwrap_or(Error::NoSamples { reason: "no chain" }));
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

/// Refuses a burn-in shorter than the sampler's adaptation (its draws then are not exact).
pub(crate) fn check_burn_in<S: Sampler>(sampler: &S, settings: &RunSettings) -> Result<()> {
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

/// Continues a run that was stopped (or resumes one loaded from a checkpoint) up to
/// `run.settings.n_iter` iterations per chain — raise that field first to extend a finished
/// run. The draws are **bit-identical** to those of an uninterrupted run with the same settings:
/// each chain carries its sampler state, its generator and its recorder.
///
/// Errors: [`Error::DimensionMismatch`] if `model` does not have the run's dimension; invalid
/// settings (`n_iter` below the iterations already done); then as [`run`].
#[deprecated(since = "0.2.0", note = "use `Resume::new(model, run).observers(observers).run()`")]
pub fn resume<M: Model + ?Sized, S: Sampler>(
    model: &M,
    run: RunOutput<S>,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    resume_inner(model, run, observers)
}

/// The body of [`Resume::run`](crate::run::runner::Resume::run) for chains.
pub(crate) fn resume_inner<M: Model + ?Sized, S: Sampler>(
    model: &M,
    run: RunOutput<S>,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>> {
    // Refused before anything is taken apart: the run comes back with the error.
    let checks = (|| {
        run.settings.validate()?;
        crate::error::check_len("model dimension (resumed run)", run.model.dim, model.dim())?;
        run.model.check(model)?;
        run.settings.check_memory(run.model.dim, 1)?;
        if run.chains.iter().any(|c| c.iterations > run.settings.n_iter) {
            return Err(Error::invalid(
                "n_iter",
                run.settings.n_iter,
                "is below the iterations a chain has already done",
            ));
        }
        Ok(())
    })();
    if let Err(e) = checks {
        return Err(e.keeping(run));
    }
    let settings = run.settings;
    let mut healthy = run.estimate.into_parts().into_iter();
    let mut diverged = run.divergences.into_iter();
    let mut units = Vec::with_capacity(run.chains.len());
    let mut done_diverged = Vec::new();
    for (c, report) in run.chains.into_iter().enumerate() {
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
    let setup_cost = run.setup_cost;
    let start = Instant::now();
    let mut done: Vec<Finished<ChainUnitDone<S>>> =
        drive_all(model, units, &settings, observers, start).into_iter().map(Finished::into_done).collect();
    for (chain, report, div) in done_diverged {
        done.push(Finished::Diverged(ChainUnitDone { chain, report, estimate: None }, div, None));
    }
    done.sort_by_key(Finished::chain);
    assemble(done, &settings, setup_cost, start.elapsed(), run.wall_time, run.model, false)
}

/// A chain as the runner drives it: the sampler, its generator and recorder, where it is.
pub(super) struct ChainUnit<S> {
    pub(super) chain: usize,
    pub(super) sampler: S,
    pub(super) rng: ChainRng,
    pub(super) recorder: Option<Recorder>,
    pub(super) theta0: Vec<f64>,
    pub(super) iteration: u64,
    pub(super) started: bool,
    pub(super) wall: Duration,
    pub(super) runaway: RunawayDetector,
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
    pub(super) fn into_done(self) -> Finished<ChainUnitDone<S>> {
        match self {
            Finished::Ran(u, stopped) => Finished::Ran(u.into_done(), stopped),
            Finished::Diverged(u, div, e) => Finished::Diverged(u.into_done(), div, e),
            Finished::Failed(u, e) => Finished::Failed(u.into_done(), e),
        }
    }
}

impl<S> Finished<ChainUnitDone<S>> {
    pub(super) fn chain(&self) -> usize {
        match self {
            Finished::Ran(u, _) | Finished::Diverged(u, ..) | Finished::Failed(u, _) => u.chain,
        }
    }
}

/// A finished chain's parts, for assembling the output.
pub(super) struct ChainUnitDone<S> {
    pub(super) chain: usize,
    pub(super) report: ChainReport<S>,
    pub(super) estimate: Option<Estimate>,
}

/// Builds the output of a run of chains. A failed chain (an error, a caught panic) is kept in
/// the output as a divergence with its draws, and the run's result is then the lowest failing
/// chain's error with the output kept ([`Error::Kept`]); so is a run whose every chain diverged
/// under [`OnDivergence::Report`], unless it is a `part` of a run over ranks (the merge judges the
/// whole). When no chain made an iteration (every start failed) there is nothing to keep: the
/// error alone.
pub(super) fn assemble<S: Sampler>(
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
    pub(super) fn into_done(self) -> ChainUnitDone<S> {
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
