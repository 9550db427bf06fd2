//! Coupled pairs as units of the engine: a replicate's two chains on shared increments, and
//! the [`Method`] of [`RichardsonRomberg`] (the replicates of a run, a subset per rank, merged
//! in replicate order) and its [`Resumable`] output.

use crate::cost::Cost;
use crate::coupled::SharedIncrements;
use crate::coupled::richardson::output::RrOutput;
use crate::coupled::richardson::{NoiseCoupling, RichardsonRomberg};
use crate::error::{Error, Result, check_len};
use crate::models::model::Model;
use crate::numeric::rng::{ChainRng, stream};
use crate::run::method::{Method, Resumable};
use crate::run::observe::Observer;
use crate::run::{Divergence, Finished, Recorder, RunSettings, Unit, drive};
use crate::samplers::Discretisation;
use crate::trace::estimate::Estimate;
use std::time::{Duration, Instant};

/// One chain of a pair: A (`fine = false`) takes full steps driven by `(z₁ + z₂)/√2`, B takes
/// two half steps driven by `z₁`, `z₂`; both draw `z₁, z₂` from their copy of the noise stream.
#[derive(Debug, Clone)]
struct CoupledChain<S> {
    sampler: S,
    noise: ChainRng,
    rng: ChainRng,
    recorder: Option<Recorder>,
    z: SharedIncrements,
    fine: bool,
    iteration: u64,
}

impl<S: Discretisation> CoupledChain<S> {
    fn start<M: Model + ?Sized>(&mut self, model: &M, theta0: &[f64], settings: &RunSettings) -> Result<()> {
        self.sampler.init(model, theta0, &mut self.rng)?;
        let per = if self.fine { 2 } else { 1 };
        self.recorder = Some(Recorder::new(settings, model.dim(), per, self.sampler.gradient().is_some())?);
        self.z = SharedIncrements::new(self.sampler.increment_len(model.dim()));
        Ok(())
    }

    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()> {
        let rec = self.recorder.as_mut().ok_or(Error::NotInitialised)?;
        let (s, z) = (&mut self.sampler, &mut self.z);
        for k in self.iteration + 1..=to {
            z.draw(&*s, k, 1.0, &mut self.noise);
            let keep = settings.keeps(k);
            let w = s.time_step(k + 1);
            if self.fine {
                s.step_fraction(model, k, 0.5, &z.z1, &mut self.rng)?;
                if keep {
                    rec.record(s.position(), w, s.gradient(), s.cost().datum_gradients, Some(0.5 * w));
                }
                s.step_fraction(model, k, 0.5, &z.z2, &mut self.rng)?;
            } else {
                s.step_fraction(model, k, 1.0, &z.coarse, &mut self.rng)?;
            }
            if keep {
                let step = if self.fine { 0.5 * w } else { w };
                rec.record(s.position(), w, s.gradient(), s.cost().datum_gradients, Some(step));
            }
            self.iteration = k;
        }
        Ok(())
    }
}

/// A replicate: the pair of coupled chains, driven by the crate's runner.
struct PairUnit<S> {
    index: usize,
    a: CoupledChain<S>,
    b: CoupledChain<S>,
    theta0: Vec<f64>,
    started: bool,
    parallel: bool,
    wall: Duration,
}

impl<S: Discretisation> Unit for PairUnit<S> {
    fn index(&self) -> usize {
        self.index
    }

    fn start<M: Model + ?Sized>(&mut self, model: &M, settings: &RunSettings) -> Result<()> {
        if !self.started {
            self.a.start(model, &self.theta0, settings)?;
            self.b.start(model, &self.theta0, settings)?;
            self.started = true;
        }
        Ok(())
    }

    /// The two chains are independent given the noise: long blocks run on two threads.
    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()> {
        let (a, b) = (&mut self.a, &mut self.b);
        let (ra, rb) = if self.parallel && to - a.iteration.min(b.iteration) >= 64 {
            rayon::join(|| a.advance(model, to, settings), || b.advance(model, to, settings))
        } else {
            (a.advance(model, to, settings), b.advance(model, to, settings))
        };
        ra.and(rb)
    }

    fn iteration(&self) -> u64 {
        self.a.iteration.min(self.b.iteration)
    }

    fn cost(&self) -> Cost {
        self.a.sampler.cost() + self.b.sampler.cost()
    }

    fn position(&self) -> &[f64] {
        self.b.sampler.position()
    }

    fn weight(&self) -> f64 {
        self.b.sampler.time_step(self.b.iteration + 1)
    }

    fn wall_mut(&mut self) -> &mut Duration {
        &mut self.wall
    }
}

/// Richardson–Romberg replicates: unit c is a pair of coupled chains at steps γ and γ/2 from
/// `starts[c]` (see [`RichardsonRomberg`]); the output extrapolates. `n_iter`, `burn_in` and
/// `thin` count iterations of chain A (chain B does twice as many steps; both of its draws in a
/// kept iteration are kept). Replicate c uses the streams `(seed, [c, 0])` for the shared
/// increments and `(seed, [c, 1])`, `(seed, [c, 2])` for the minibatches of A and B (and
/// `(seed, [c, 3])` for A's increments under independent coupling). With `parallel`, replicates
/// and the two chains of each run on the rayon pool; the results are the same either way. Run
/// by [`Runner`](crate::run::runner::Runner).
impl<S: Discretisation> Method for RichardsonRomberg<S> {
    type Output = RrOutput<S>;

    fn check_size(&self, settings: &RunSettings, dim: usize) -> Result<()> {
        settings.check_chains::<S>(dim, 2)
    }

    fn run_units<M: Model + ?Sized>(
        &self,
        model: &M,
        starts: &[&[f64]],
        settings: &RunSettings,
        observers: &[&dyn Observer],
        units: &[usize],
    ) -> Result<RrOutput<S>> {
        settings.validate()?;
        check_len("number of starting points (n_chains)", settings.n_chains, starts.len())?;
        let d = model.dim();
        // Chain A keeps one draw per recorded iteration, chain B two.
        settings.check_memory(d, 3)?;
        let chain = |fine: bool, noise: ChainRng, rng: ChainRng| CoupledChain {
            sampler: self.base.clone(),
            noise,
            rng,
            recorder: None,
            z: SharedIncrements::default(),
            fine,
            iteration: 0,
        };
        let pairs: Vec<PairUnit<S>> = units
            .iter()
            .map(|&c| c as u64)
            .map(|c| {
                let noise_a = match self.coupling {
                    NoiseCoupling::Shared => stream(settings.seed, &[c, 0]),
                    NoiseCoupling::Independent => stream(settings.seed, &[c, 3]),
                };
                PairUnit {
                    index: c as usize,
                    a: chain(false, noise_a, stream(settings.seed, &[c, 1])),
                    b: chain(true, stream(settings.seed, &[c, 0]), stream(settings.seed, &[c, 2])),
                    theta0: starts[c as usize].to_vec(),
                    started: false,
                    parallel: settings.parallel,
                    wall: Duration::ZERO,
                }
            })
            .collect();
        if settings.check_model {
            crate::run::check_starts(model, starts, units)?;
        }
        let setup_cost = self.base.setup_cost();
        let start = Instant::now();
        let done = drive(model, pairs, settings, observers, start)?;
        let wall = start.elapsed();
        let fingerprint = crate::run::checkpoint::ModelFingerprint::of(model);
        assemble(done, settings, setup_cost, self.coupling, wall, Duration::ZERO, fingerprint)
    }

    /// Replicates in index order: the estimates are built exactly as a single process builds
    /// them (bit-identical), costs summed (setup once), the wall time the longest part's.
    fn merge(parts: Vec<(Vec<usize>, RrOutput<S>)>) -> Result<RrOutput<S>> {
        let mut reps: Vec<(usize, Option<Replicate<S>>)> = Vec::new();
        let mut divergences = Vec::new();
        let mut head = None;
        let mut cost = Cost::default();
        let mut wall = Duration::ZERO;
        for (subset, out) in parts {
            head.get_or_insert((out.settings, out.setup_cost, out.coupling, out.model));
            cost += out.cost - out.setup_cost;
            wall = wall.max(out.wall_time);
            let diverged: Vec<usize> = out.divergences.iter().map(|d| d.chain).collect();
            divergences.extend(out.divergences);
            let mut healthy = out
                .coarse
                .into_parts()
                .into_iter()
                .zip(out.fine.into_parts())
                .zip(out.chains)
                .zip(out.streams)
                .zip(out.iterations);
            for c in subset {
                if diverged.contains(&c) {
                    reps.push((c, None));
                    continue;
                }
                let ((((coarse, fine), chains), streams), iterations) = healthy.next().ok_or_else(|| {
                    Error::CorruptCheckpoint { reason: "a part has fewer replicates than its subset".into() }
                })?;
                reps.push((c, Some(Replicate { coarse, fine, chains, streams, iterations })));
            }
        }
        let (settings, setup_cost, coupling, model) = head.ok_or(Error::NoSamples { reason: "no replicate" })?;
        reps.sort_by_key(|r| r.0);
        if reps.len() != settings.n_chains || reps.iter().enumerate().any(|(i, r)| r.0 != i) {
            return Err(Error::CorruptCheckpoint { reason: "the parts do not cover every replicate once".into() });
        }
        divergences.sort_by_key(|d: &Divergence| d.chain);
        RrParts {
            replicates: reps.into_iter().filter_map(|r| r.1).collect(),
            divergences,
            cost: cost + setup_cost,
            setup_cost,
            wall_time: wall,
            settings,
            coupling,
            model,
        }
        .into_output()
    }
}

/// Replicates go on from where they stopped; a run with diverged replicates cannot be resumed.
impl<S: Discretisation> Resumable for RrOutput<S> {
    fn resume<M: Model + ?Sized>(self, model: &M, observers: &[&dyn Observer]) -> Result<Self> {
        // Refused before anything is taken apart: the run comes back with the error.
        let n = self.chains.len();
        let checks = (|| {
            let settings = self.settings;
            settings.validate()?;
            check_len("model dimension (resumed run)", self.model.dim, model.dim())?;
            self.model.check(model)?;
            settings.check_memory(self.model.dim, 3)?;
            if !self.divergences.is_empty() {
                return Err(Error::invalid(
                    "divergences",
                    self.divergences.len(),
                    "a run with diverged replicates cannot be resumed",
                ));
            }
            if self.iterations.iter().any(|&k| k > settings.n_iter) {
                return Err(Error::invalid(
                    "n_iter",
                    settings.n_iter,
                    "is below the iterations a replicate has already done",
                ));
            }
            if self.streams.len() != n || self.iterations.len() != n {
                return Err(Error::CorruptCheckpoint { reason: "replicate records of different lengths".into() });
            }
            Ok(())
        })();
        if let Err(e) = checks {
            return Err(e.keeping(self));
        }
        let settings = self.settings;
        let d = model.dim();
        let fingerprint = self.model;
        let mut coarse = self.coarse.into_parts().into_iter();
        let mut fine = self.fine.into_parts().into_iter();
        let mut units = Vec::with_capacity(n);
        for (c, (((a, b), streams), k)) in self.chains.into_iter().zip(self.streams).zip(self.iterations).enumerate() {
            let [noise_a, rng_a, noise_b, rng_b] = streams;
            let rec_a = Recorder::from_part(&settings, d, 1, a.gradient().is_some(), coarse.next())?;
            let rec_b = Recorder::from_part(&settings, d, 2, b.gradient().is_some(), fine.next())?;
            let mk = |sampler: S, noise, rng, recorder, fine| CoupledChain {
                z: SharedIncrements::new(sampler.increment_len(d)),
                sampler,
                noise,
                rng,
                recorder: Some(recorder),
                fine,
                iteration: k,
            };
            units.push(PairUnit {
                index: c,
                a: mk(a, noise_a, rng_a, rec_a, false),
                b: mk(b, noise_b, rng_b, rec_b, true),
                theta0: Vec::new(),
                started: true,
                parallel: settings.parallel,
                wall: Duration::ZERO,
            });
        }
        let start = Instant::now();
        let done = drive(model, units, &settings, observers, start)?;
        assemble(done, &settings, self.setup_cost, self.coupling, start.elapsed(), self.wall_time, fingerprint)
    }
}

/// One replicate that did not diverge: its two estimates, final states, streams and
/// iterations.
struct Replicate<S> {
    coarse: Estimate,
    fine: Estimate,
    chains: (S, S),
    streams: [ChainRng; 4],
    iterations: u64,
}

/// What every Richardson–Romberg output is built from.
struct RrParts<S> {
    replicates: Vec<Replicate<S>>,
    divergences: Vec<Divergence>,
    cost: Cost,
    setup_cost: Cost,
    wall_time: Duration,
    settings: RunSettings,
    coupling: NoiseCoupling,
    model: crate::run::checkpoint::ModelFingerprint,
}

impl<S> RrParts<S> {
    /// The output: replicates in index order, the extrapolated estimate `2π̂_{γ/2} − π̂_γ`
    /// (B carries weight +γ on each of its two draws per iteration, A carries −γ: total Σγ).
    /// Errors: the first divergence's error if no replicate is left.
    fn into_output(self) -> Result<RrOutput<S>> {
        if self.replicates.is_empty() {
            return Err(self
                .divergences
                .first()
                .map(Divergence::to_error)
                .unwrap_or(Error::NoSamples { reason: "no replicate" }));
        }
        let n = self.replicates.len();
        let (mut coarse, mut fine, mut chains, mut streams, mut iterations) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for r in self.replicates {
            coarse.push(r.coarse);
            fine.push(r.fine);
            chains.push(r.chains);
            streams.push(r.streams);
            iterations.push(r.iterations);
        }
        let coarse = Estimate::combine(coarse)?;
        let fine = Estimate::combine(fine)?;
        let estimate = Estimate::combine([fine.clone(), coarse.clone().scaled(-1.0)])?;
        Ok(RrOutput {
            estimate,
            coarse,
            fine,
            chains,
            cost: self.cost,
            setup_cost: self.setup_cost,
            wall_time: self.wall_time,
            settings: self.settings,
            iterations,
            divergences: self.divergences,
            streams,
            coupling: self.coupling,
            model: self.model,
        })
    }
}

fn assemble<S: Discretisation>(
    done: Vec<Finished<PairUnit<S>>>,
    settings: &RunSettings,
    setup_cost: Cost,
    coupling: NoiseCoupling,
    wall: Duration,
    wall_before: Duration,
    model: crate::run::checkpoint::ModelFingerprint,
) -> Result<RrOutput<S>> {
    let (mut replicates, mut divergences) = (Vec::new(), Vec::new());
    let mut cost = setup_cost;
    for f in done {
        let (u, div) = match f {
            Finished::Ran(u, _) => (u, None),
            Finished::Diverged(u, div, _) => (u, Some(div)),
            // `drive` returns a failed replicate as its error.
            Finished::Failed(_, e) => return Err(e),
        };
        cost += u.a.sampler.cost() + u.b.sampler.cost();
        let (ea, eb) = (u.a.recorder.map(Recorder::finish), u.b.recorder.map(Recorder::finish));
        match div {
            Some(mut div) => {
                div.draws.extend(ea.into_iter().chain(eb));
                divergences.push(div);
            }
            None => replicates.push(Replicate {
                coarse: ea.ok_or(Error::NotInitialised)?,
                fine: eb.ok_or(Error::NotInitialised)?,
                iterations: u.a.iteration.min(u.b.iteration),
                streams: [u.a.noise, u.a.rng, u.b.noise, u.b.rng],
                chains: (u.a.sampler, u.b.sampler),
            }),
        }
    }
    RrParts {
        replicates,
        divergences,
        cost,
        setup_cost,
        wall_time: wall_before + wall,
        settings: *settings,
        coupling,
        model,
    }
    .into_output()
}
