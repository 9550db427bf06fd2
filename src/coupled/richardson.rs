//! Richardson–Romberg extrapolation over two coupled chains: SGRRLD and SGRRHMC.

use super::SharedIncrements;
use crate::cost::Cost;
use crate::error::{Error, Result, check_len};
use crate::gradient::Minibatch;
use crate::models::model::Model;
use crate::numeric::rng::{ChainRng, stream};
use crate::run::observe::Observer;
use crate::run::placement::{Distribute, Local};
use crate::run::runner::Runner;
use crate::run::{Divergence, Finished, Recorder, RunSettings, Unit, drive};
use crate::samplers::{Discretisation, Sghmc, Sgld};
use crate::trace::estimate::Estimate;
use ndarray::Array1;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How the Gaussian increments of the two chains are related.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NoiseCoupling {
    /// `Zᴬ_{k+1} = (Zᴮ_{2k+1} + Zᴮ_{2k+2}) / √2` (eq. 7): one Brownian path for both chains. The
    /// variance-optimal choice (Durmus et al. 2016, Theorem 1) and the default.
    #[default]
    Shared,
    /// Independent increments. Same bias, much larger variance: for comparisons only.
    Independent,
}

/// Richardson–Romberg extrapolation of a first-order discretisation `S` (SGLD → SGRRLD,
/// SGHMC → SGRRHMC), Durmus, Şimşekli, Moulines, Badeau & Richard (2016).
///
/// Two chains start from the same θ₀: chain A with time steps `h_k` (the sampler's schedule) and
/// chain B with `h_k/2`, two B steps per A step, so both reach the same time horizon. For SGLD:
///
/// - B: `θᴮ_{2k+1} = θᴮ_{2k} − (γ_{k+1}/2)∇Ũ(θᴮ_{2k}) + √γ_{k+1} Zᴮ_{2k+1}`,
///   `θᴮ_{2k+2} = θᴮ_{2k+1} − (γ_{k+1}/2)∇Ũ(θᴮ_{2k+1}) + √γ_{k+1} Zᴮ_{2k+2}` (the paper's eq. 5
///   evaluates the first gradient at θ_{2k+1}: a typo; it is θ_{2k});
/// - A: `θᴬ_{k+1} = θᴬ_k − γ_{k+1}∇Ũ(θᴬ_k) + √(2γ_{k+1}) Zᴬ_{k+1}`, `Zᴬ_{k+1} = (Zᴮ_{2k+1} + Zᴮ_{2k+2})/√2`;
///
/// every gradient from an independent minibatch of the same size (both chains are clones of one
/// sampler, so they share the estimator's law). The estimator (eq. 6) is the signed measure
///
/// `π̂ᴿ(f) = (Σ_k γ_{k+1})⁻¹ Σ_k γ_{k+1} [f(θᴮ_{2k−1}) + f(θᴮ_{2k}) − f(θᴬ_k)]`,
///
/// i.e. `2·π̂_{γ/2} − π̂_γ`, whose bias is O(γ²) where SGLD's is O(γ). Means and covariances of
/// the signed measure extrapolate the first and second moments, then combine them.
///
/// The two chains are independent given the noise: each replays the shared increments from its
/// own copy of one noise stream, so they run on two threads (rayon) with results bit-identical to
/// a serial run. Any gradient estimator works, so SGRRLD with control variates comes for free.
#[derive(Debug, Clone)]
pub struct RichardsonRomberg<S> {
    base: S,
    coupling: NoiseCoupling,
}

/// SGRRLD: Richardson–Romberg extrapolated SGLD.
pub type Sgrrld<E = Minibatch> = RichardsonRomberg<Sgld<E>>;
/// SGRRHMC: Richardson–Romberg extrapolated SGHMC (the momentum noise shared the same way).
pub type Sgrrhmc<E = Minibatch> = RichardsonRomberg<Sghmc<E>>;

impl<S: Discretisation> RichardsonRomberg<S> {
    /// Extrapolation of `base` (whose schedule gives chain A's steps) with shared increments.
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::RichardsonRomberg;
    ///
    /// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
    /// // SGRRLD: SGLD at γ and γ/2 with shared noise, extrapolated to 2π̂_{γ/2} − π̂_γ.
    /// let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?);
    /// let out = Runner::new(&model, &rr).start(&[0.0, 0.0]).settings(RunSettings { n_iter: 3_000, burn_in: 500, ..Default::default() }).run()?;
    /// assert_eq!(out.estimate.mean()?.len(), 2);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn new(base: S) -> Self {
        RichardsonRomberg { base, coupling: NoiseCoupling::Shared }
    }

    /// The same with the given coupling (use [`NoiseCoupling::Independent`] only to compare).
    pub fn with_coupling(base: S, coupling: NoiseCoupling) -> Self {
        RichardsonRomberg { base, coupling }
    }

    /// The underlying one-step method.
    pub fn base(&self) -> &S {
        &self.base
    }

    /// The noise coupling.
    pub fn coupling(&self) -> NoiseCoupling {
        self.coupling
    }
}

/// The result of a [`Runner`](crate::run::runner::Runner) of Richardson–Romberg replicates; also
/// its checkpoint ([`save`](Self::save), [`load`](Self::load),
/// [`Resume`](crate::run::runner::Resume)).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RrOutput<S> {
    /// The extrapolated (signed) estimate `2·π̂_{γ/2} − π̂_γ`, pooled over replicates.
    pub estimate: Estimate,
    /// Chain A alone (step γ): plain SGLD / SGHMC at step γ.
    pub coarse: Estimate,
    /// Chain B alone (step γ/2).
    pub fine: Estimate,
    /// Final states `(A, B)` of each replicate that did not diverge.
    pub chains: Vec<(S, S)>,
    /// Total cost (three minibatch gradients per iteration per replicate, plus setup once).
    pub cost: Cost,
    /// The one-off setup cost included in `cost`.
    pub setup_cost: Cost,
    /// Wall time of the whole run (summed over resumptions).
    pub wall_time: Duration,
    /// The settings of the run.
    pub settings: RunSettings,
    /// Iterations (of chain A) each replicate did, in replicate order.
    pub iterations: Vec<u64>,
    /// Replicates that diverged, under [`OnDivergence::Report`](crate::OnDivergence::Report).
    pub divergences: Vec<Divergence>,
    /// Per replicate: the generators where they stopped (to resume).
    streams: Vec<[ChainRng; 4]>,
    coupling: NoiseCoupling,
    model: crate::run::checkpoint::ModelFingerprint,
}

impl<S: Discretisation + serde::Serialize + serde::de::DeserializeOwned> RrOutput<S> {
    /// Saves the Richardson–Romberg run to `path` (see [`RunOutput::save`](crate::RunOutput::save)).
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::run::checkpoint::save(path.as_ref(), "richardson-romberg", std::any::type_name::<S>(), self)
    }

    /// Loads a Richardson–Romberg run saved by [`save`](Self::save) with the same sampler type.
    ///
    /// Errors: as [`RunOutput::load`](crate::RunOutput::load).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        crate::run::checkpoint::load(path.as_ref(), "richardson-romberg", std::any::type_name::<S>())
    }
}

impl<S> RrOutput<S> {
    /// The extrapolated estimate of replicate `c` alone.
    ///
    /// Errors: [`Error::NoSamples`] if `c` is out of range.
    pub fn replicate(&self, c: usize) -> Result<Estimate> {
        let none = || Error::NoSamples { reason: "no such replicate" };
        let fine = self.fine.part(c).ok_or_else(none)?;
        let coarse = self.coarse.part(c).ok_or_else(none)?;
        Estimate::combine([fine, coarse.scaled(-1.0)])
    }

    /// The discretisation-bias estimate of the mean, `mean(B) − mean(A)` ≈ `(π_{γ/2} − π_γ)(θ)`,
    /// which is about minus half of plain SGLD's bias at step γ.
    pub fn bias_estimate_mean(&self) -> Result<Array1<f64>> {
        Ok(self.fine.mean()? - self.coarse.mean()?)
    }

    /// Whether every replicate that did not diverge did all `settings.n_iter` iterations.
    pub fn is_complete(&self) -> bool {
        self.iterations.iter().all(|&k| k >= self.settings.n_iter)
    }

    /// Whether the replicates of the **extrapolated** estimate mixed, and its Monte Carlo error:
    /// per replicate and kept iteration t the extrapolated draw
    /// `z_t = (w_B b_{2t} + w_B b_{2t+1} − w_A a_t) / w_t` (B's two draws and A's one, with their
    /// weights; for a constant step `b_{2t} + b_{2t+1} − a_t`) is one step of a Markov chain (the
    /// coupled pair) whose weighted mean is the extrapolated mean, so its split-R̂, ESS and
    /// MCSE over the replicates are those of [`estimate`](Self::estimate)'s means; the MCSE of
    /// each extrapolated sd is that of the same combination of squared deviations (delta method).
    /// [`Convergence::error_bound`](crate::diagnostics::Convergence::error_bound) is then the
    /// run's own accuracy claim. The fine or coarse chains alone
    /// ([`diagnostics::convergence`](crate::diagnostics::convergence) of [`fine`](Self::fine)) do
    /// not measure the extrapolation's larger variance.
    ///
    /// Errors: as [`summary_table`](Self::summary_table).
    pub fn convergence(&self) -> Result<crate::trace::diagnostics::Convergence> {
        Ok(crate::trace::diagnostics::convergence_of(&self.extrapolated_rows()?, self.fine.n_parts()))
    }

    /// The summary table of the extrapolated estimate (what
    /// [`diagnostics::summary_table`](crate::diagnostics::summary_table) gives for a plain run;
    /// it cannot take [`estimate`](Self::estimate), whose parts have different lengths): mean
    /// and sd of the signed measure; MCSE, ESS and R̂ of the extrapolated draws per replicate
    /// (see [`convergence`](Self::convergence)); the 5/50/95 % quantiles and the interval from
    /// the signed measure's distribution function `F(x) = (Σ_B w 1[b ≤ x] − Σ_A w 1[a ≤ x]) / Σ w`
    /// (made non-decreasing by its running maximum), in [`Convention::ArviZ1`]: the 89 %
    /// equal-tailed interval (`eti89_lb`, `eti89_ub`). A signed measure has no HDI: the rows'
    /// `hdi` holds the 94 % equal-tailed interval. Rows failing R̂ ≤ 1.01 or ESS ≥ 400 are
    /// marked `*` as usual.
    ///
    /// Errors: [`Error::NotStored`] for a run that kept only running moments,
    /// [`Error::DimensionMismatch`] if a replicate's chain B did not keep two draws per draw of
    /// A, and as [`diagnostics::summary_of_weighted_draws`](crate::diagnostics::summary_of_weighted_draws).
    ///
    /// [`Convention::ArviZ1`]: crate::diagnostics::Convention::ArviZ1
    pub fn summary_table(&self) -> Result<crate::trace::diagnostics::SummaryTable> {
        let rows = self.extrapolated_rows()?;
        crate::trace::diagnostics::SummaryTable::new((0..rows.len()).map(|j| format!("θ[{j}]")).collect(), rows)
    }

    /// One [`Summary`](crate::diagnostics::Summary) per coordinate of the extrapolated estimate.
    fn extrapolated_rows(&self) -> Result<Vec<crate::trace::diagnostics::Summary>> {
        extrapolated_rows(&self.coarse, &self.fine)
    }
}

/// One [`Summary`](crate::diagnostics::Summary) per coordinate of the extrapolated estimate of a
/// Richardson–Romberg run's chains A (`coarse`) and B (`fine`), as [`RrOutput::summary_table`]
/// describes (also of their draws mapped alike, e.g. to a constrained scale).
pub(crate) fn extrapolated_rows(coarse: &Estimate, fine: &Estimate) -> Result<Vec<crate::trace::diagnostics::Summary>> {
    use crate::trace::diagnostics::{Convention, summary_of_weighted_draws};
    let m = fine.n_parts();
    check_len("replicates of chain A", m, coarse.n_parts())?;
    let stored = || Error::NotStored { what: "samples (the run kept only running moments)" };
    let mut pairs = Vec::with_capacity(m);
    for c in 0..m {
        let (b, a) = (fine.samples(c).ok_or_else(stored)?, coarse.samples(c).ok_or_else(stored)?);
        check_len("draws of chain B (two per draw of chain A)", 2 * a.draws().nrows(), b.draws().nrows())?;
        pairs.push((b, a));
    }
    let n = pairs.first().map_or(0, |(_, a)| a.draws().nrows());
    for (_, a) in &pairs {
        check_len("draws per replicate", n, a.draws().nrows())?;
    }
    let d = fine.dim();
    let w = ndarray::Array2::from_shape_fn((m, n), |(c, t)| {
        let (b, a) = &pairs[c];
        b.weights()[2 * t] + b.weights()[2 * t + 1] - a.weights()[t]
    });
    let extrapolated = |c: usize, t: usize, f: &dyn Fn(f64) -> f64, j: usize| {
        let (b, a) = &pairs[c];
        let (bw, aw) = (b.weights(), a.weights());
        let (bd, ad) = (b.draws(), a.draws());
        (bw[2 * t] * f(bd[[2 * t, j]]) + bw[2 * t + 1] * f(bd[[2 * t + 1, j]]) - aw[t] * f(ad[[t, j]])) / w[[c, t]]
    };
    let mut rows = Vec::with_capacity(d);
    let mut signed: Vec<(f64, f64)> = Vec::with_capacity(3 * m * n);
    for j in 0..d {
        let z = ndarray::Array2::from_shape_fn((m, n), |(c, t)| extrapolated(c, t, &|x| x, j));
        let mut row = summary_of_weighted_draws(z.view(), w.view())?;
        let mu = row.mean;
        let v = ndarray::Array2::from_shape_fn((m, n), |(c, t)| extrapolated(c, t, &|x| (x - mu) * (x - mu), j));
        let var = summary_of_weighted_draws(v.view(), w.view())?;
        let sd = var.mean.max(0.0).sqrt();
        row.sd = sd;
        row.mcse_sd = var.mcse_mean / (2.0 * sd);
        // Quantiles of the signed measure.
        signed.clear();
        for (b, a) in &pairs {
            signed.extend(b.draws().column(j).iter().zip(b.weights()).map(|(&x, &w)| (x, w)));
            signed.extend(a.draws().column(j).iter().zip(a.weights()).map(|(&x, &w)| (x, -w)));
        }
        let q = signed_quantiles(&mut signed, &[0.03, 0.05, 0.055, 0.5, 0.945, 0.95, 0.97]);
        row.hdi = (q[0], q[6]);
        row.q05 = q[1];
        row.interval = (q[2], q[4]);
        row.median = q[3];
        row.q95 = q[5];
        row.convention = Convention::ArviZ1;
        row.weighted = true;
        rows.push(row);
    }
    Ok(rows)
}

/// The `ps` quantiles (ascending) of the signed measure `points` (value, weight): the smallest
/// value where the running maximum of the normalised cumulative weight reaches p. Sorts `points`.
fn signed_quantiles(points: &mut [(f64, f64)], ps: &[f64]) -> Vec<f64> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = points.iter().map(|p| p.1).sum();
    let mut out = Vec::with_capacity(ps.len());
    let (mut cum, mut run_max, mut k) = (0.0, f64::NEG_INFINITY, 0);
    for &(x, w) in points.iter() {
        cum += w;
        run_max = run_max.max(cum / total);
        while k < ps.len() && run_max >= ps[k] {
            out.push(x);
            k += 1;
        }
    }
    while out.len() < ps.len() {
        out.push(points.last().map_or(f64::NAN, |p| p.0));
    }
    out
}

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
        self.z = SharedIncrements::new(model.dim());
        Ok(())
    }

    fn advance<M: Model + ?Sized>(&mut self, model: &M, to: u64, settings: &RunSettings) -> Result<()> {
        let rec = self.recorder.as_mut().ok_or(Error::NotInitialised)?;
        let (s, z) = (&mut self.sampler, &mut self.z);
        for k in self.iteration + 1..=to {
            z.draw(&mut self.noise);
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

/// Runs `settings.n_chains` independent replicates of the coupled pair, all started at `theta0`,
/// on the crate's runner.
///
/// `n_iter`, `burn_in` and `thin` count iterations of chain A (chain B does twice as many steps;
/// both of its draws in a kept iteration are kept). Replicate c uses the streams
/// `(seed, [c, 0])` for the shared increments and `(seed, [c, 1])`, `(seed, [c, 2])` for the
/// minibatches of A and B (and `(seed, [c, 3])` for A's increments under independent coupling).
/// With `parallel`, replicates and the two chains of each run on the rayon pool; the results are
/// the same either way.
///
/// Errors: as [`run`](crate::run()), each wrapped in [`Error::Chain`] with the replicate index.
#[deprecated(since = "0.2.0", note = "use `Runner::new(model, rr).start(theta0).settings(*settings).run()`")]
pub fn run_rr<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    rr: &RichardsonRomberg<S>,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<RrOutput<S>> {
    Runner::new(model, rr).start(theta0).settings(*settings).run()
}

/// As [`run_rr`], with observers (see [`observe`](crate::run::observe)), which see each replicate as
/// a chain (its cost is both chains'; its position chain B's) and may stop it: both chains of a
/// stopped replicate stop at the same iteration, keeping their draws; [`resume_rr`] goes on.
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, rr).start(theta0).settings(*settings).observers(observers).run()`"
)]
pub fn run_rr_observed<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    rr: &RichardsonRomberg<S>,
    theta0: &[f64],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RrOutput<S>> {
    run_rr_chains_on(&Local, model, rr, &vec![theta0; settings.n_chains], settings, observers)
}

/// As [`run_rr`], replicate c started at `starts[c]` (both chains of a pair start together),
/// one start per replicate (`settings.n_chains`): start them dispersed around the mode
/// ([`dispersed_starts`](crate::tune::dispersed_starts)) so that the split-R̂ of
/// [`RrOutput::convergence`] can see replicates that have not forgotten where they began —
/// replicates started at one point can agree with each other and all be wrong. With every start
/// equal to θ₀ the draws are [`run_rr`]'s, bit for bit.
///
/// Errors: [`Error::DimensionMismatch`] unless there is one start per replicate; as [`run_rr`].
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{tune::dispersed_starts};
/// use sgmcmc::RichardsonRomberg;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 1)?;
/// let mode = model.posterior_mean().to_vec();
/// let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100))?);
/// let starts = dispersed_starts(&model, &mode, 4, 2.0, 7)?;
/// let settings = RunSettings { n_iter: 5_000, burn_in: 1_000, n_chains: 4, ..Default::default() };
/// let out = Runner::new(&model, &rr).starts(&starts).settings(settings).run()?;
/// println!("{}", out.convergence()?);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[deprecated(since = "0.2.0", note = "use `Runner::new(model, rr).starts(starts).settings(*settings).run()`")]
pub fn run_rr_chains<M: Model + ?Sized, S: Discretisation, I: AsRef<[f64]>>(
    model: &M,
    rr: &RichardsonRomberg<S>,
    starts: &[I],
    settings: &RunSettings,
) -> Result<RrOutput<S>> {
    run_rr_chains_on(&Local, model, rr, starts, settings, &[])
}

/// [`run_rr_observed`] / [`run_rr_chains`] on a placement, one start per replicate: the
/// replicates placed here run, and over ranks every process gets the whole run
/// (`distributed::run_rr_mpi`). The one runner of replicates.
pub(crate) fn run_rr_chains_on<P, M, S, I>(
    p: &P,
    model: &M,
    rr: &RichardsonRomberg<S>,
    starts: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RrOutput<S>>
where
    P: Distribute<RrOutput<S>>,
    M: Model + ?Sized,
    S: Discretisation,
    I: AsRef<[f64]>,
{
    p.distribute(
        settings.n_chains,
        |units| run_rr_subset(model, rr, starts, settings, observers, units),
        merge_rr_subsets,
    )
}

/// The replicates `selected` (increasing indices below `n_chains`) of the run
/// [`run_rr_observed`] would make, with the same streams: the output holds only those
/// replicates, in that order. The MPI runner spreads replicates over ranks with it and merges
/// the outputs with [`merge_rr_subsets`].
pub(crate) fn run_rr_subset<M: Model + ?Sized, S: Discretisation, I: AsRef<[f64]>>(
    model: &M,
    rr: &RichardsonRomberg<S>,
    starts: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
    selected: &[usize],
) -> Result<RrOutput<S>> {
    settings.validate()?;
    check_len("number of starting points (n_chains)", settings.n_chains, starts.len())?;
    let d = model.dim();
    // Chain A keeps one draw per recorded iteration, chain B two.
    settings.check_memory(d, 3)?;
    let chain = |fine: bool, noise: ChainRng, rng: ChainRng| CoupledChain {
        sampler: rr.base.clone(),
        noise,
        rng,
        recorder: None,
        z: SharedIncrements::default(),
        fine,
        iteration: 0,
    };
    let units: Vec<PairUnit<S>> = selected
        .iter()
        .map(|&c| c as u64)
        .map(|c| {
            let noise_a = match rr.coupling {
                NoiseCoupling::Shared => stream(settings.seed, &[c, 0]),
                NoiseCoupling::Independent => stream(settings.seed, &[c, 3]),
            };
            PairUnit {
                index: c as usize,
                a: chain(false, noise_a, stream(settings.seed, &[c, 1])),
                b: chain(true, stream(settings.seed, &[c, 0]), stream(settings.seed, &[c, 2])),
                theta0: starts[c as usize].as_ref().to_vec(),
                started: false,
                parallel: settings.parallel,
                wall: Duration::ZERO,
            }
        })
        .collect();
    if settings.check_model {
        crate::run::check_starts(model, starts, selected)?;
    }
    let setup_cost = rr.base.setup_cost();
    let start = Instant::now();
    let done = drive(model, units, settings, observers, start)?;
    let wall = start.elapsed();
    let fingerprint = crate::run::checkpoint::ModelFingerprint::of(model);
    assemble(done, settings, setup_cost, rr.coupling, wall, Duration::ZERO, fingerprint)
}

/// Continues a stopped (or loaded) Richardson–Romberg run up to `out.settings.n_iter`; the
/// draws are bit-identical to an uninterrupted run's.
///
/// Errors: as [`resume`](crate::resume()).
#[deprecated(since = "0.2.0", note = "use `Resume::new(model, out).observers(observers).run()`")]
pub fn resume_rr<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    out: RrOutput<S>,
    observers: &[&dyn Observer],
) -> Result<RrOutput<S>> {
    resume_rr_inner(model, out, observers)
}

/// The body of [`Resume::run`](crate::run::runner::Resume::run) for replicates.
pub(crate) fn resume_rr_inner<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    out: RrOutput<S>,
    observers: &[&dyn Observer],
) -> Result<RrOutput<S>> {
    let settings = out.settings;
    settings.validate()?;
    check_len("model dimension (resumed run)", out.model.dim, model.dim())?;
    out.model.check(model)?;
    settings.check_memory(out.model.dim, 3)?;
    if !out.divergences.is_empty() {
        return Err(Error::invalid(
            "divergences",
            out.divergences.len(),
            "a run with diverged replicates cannot be resumed",
        ));
    }
    if out.iterations.iter().any(|&k| k > settings.n_iter) {
        return Err(Error::invalid("n_iter", settings.n_iter, "is below the iterations a replicate has already done"));
    }
    let n = out.chains.len();
    if out.streams.len() != n || out.iterations.len() != n {
        return Err(Error::CorruptCheckpoint { reason: "replicate records of different lengths".into() });
    }
    let d = model.dim();
    let fingerprint = out.model;
    let mut coarse = out.coarse.into_parts().into_iter();
    let mut fine = out.fine.into_parts().into_iter();
    let mut units = Vec::with_capacity(n);
    for (c, (((a, b), streams), k)) in out.chains.into_iter().zip(out.streams).zip(out.iterations).enumerate() {
        let [noise_a, rng_a, noise_b, rng_b] = streams;
        let rec_a = Recorder::from_part(&settings, d, 1, a.gradient().is_some(), coarse.next())?;
        let rec_b = Recorder::from_part(&settings, d, 2, b.gradient().is_some(), fine.next())?;
        let mk = |sampler: S, noise, rng, recorder, fine| CoupledChain {
            sampler,
            noise,
            rng,
            recorder: Some(recorder),
            z: SharedIncrements::new(d),
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
    assemble(done, &settings, out.setup_cost, out.coupling, start.elapsed(), out.wall_time, fingerprint)
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

/// Merges the outputs of [`run_rr_subset`] over disjoint subsets that together cover every
/// replicate into the output of the whole run, replicates in index order: the estimates are
/// built exactly as a single process builds them (bit-identical), costs summed (setup once),
/// the wall time the longest part's.
pub(crate) fn merge_rr_subsets<S>(parts: Vec<(Vec<usize>, RrOutput<S>)>) -> Result<RrOutput<S>> {
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
            Finished::Diverged(u, div) => (u, Some(div)),
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

/// What [`discretisation_bias`] found: the run of the sampler at its own step h (chain A of a
/// Richardson–Romberg pair), and per coordinate the estimated bias of its mean and sd with their
/// standard errors, next to the Monte Carlo error of its mean.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct BiasReport {
    /// The run's posterior means (chains at step h, pooled).
    pub mean: Vec<f64>,
    /// The run's posterior sds.
    pub sd: Vec<f64>,
    /// The Monte Carlo standard error of each mean (from the spread of the chain means).
    pub mcse_mean: Vec<f64>,
    /// The estimated bias of each mean, `2 (π̂_h − π̂_{h/2})`.
    pub bias_mean: Vec<f64>,
    /// Its standard error (from the spread over chains; NaN with one chain).
    pub bias_mean_se: Vec<f64>,
    /// The estimated bias of each sd, `2 (sd_h − sd_{h/2})`.
    pub bias_sd: Vec<f64>,
    /// Its standard error.
    pub bias_sd_se: Vec<f64>,
    /// The number of chain pairs.
    pub chains: usize,
    /// Everything spent: about three times a plain run (the companion makes two half steps per
    /// step).
    pub cost: Cost,
    /// Whether the run's chains (at step h) mixed, and their Monte Carlo error bound
    /// ([`diagnostics::convergence`](crate::diagnostics::convergence) of them).
    pub convergence: crate::trace::diagnostics::Convergence,
    /// The run's own accuracy claim with its step bias: the largest over coordinates of
    /// `max(z·MCSE_mean + |bias_mean|, z·MCSE_sd + |bias_sd|) / (sd − z·MCSE_sd − |bias_sd|)`
    /// (the MCSEs by ESS as in the summary table, z and the units as
    /// [`Convergence::error_bound`](crate::diagnostics::Convergence::error_bound), the bias
    /// estimates as point values; ∞ when the denominator is not positive): every mean within
    /// that many posterior sds and every sd within that fraction, with about 95 % probability if
    /// the first-order bias estimate holds.
    pub error_bound: f64,
}

impl BiasReport {
    /// Coordinates whose estimated bias of the mean or of the sd is both distinguishable from
    /// zero (above 3 standard errors) and above the mean's Monte Carlo error: where the step, not
    /// the run length, limits the accuracy.
    pub fn biased(&self) -> Vec<usize> {
        (0..self.mean.len())
            .filter(|&j| {
                let m = self.bias_mean[j].abs() > (3.0 * self.bias_mean_se[j]).max(self.mcse_mean[j]);
                let s = self.bias_sd[j].abs() > (3.0 * self.bias_sd_se[j]).max(self.mcse_mean[j]);
                m || s
            })
            .collect()
    }
}

impl std::fmt::Display for BiasReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>6} {:>12} {:>10} {:>10} {:>12} {:>10} {:>12} {:>10}",
            "", "mean", "mcse_mean", "sd", "bias_mean", "± se", "bias_sd", "± se"
        )?;
        let biased = self.biased();
        for j in 0..self.mean.len() {
            write!(
                f,
                "\nθ[{j:>3}] {:>12.4e} {:>10.2e} {:>10.3e} {:>12.2e} {:>10.2e} {:>12.2e} {:>10.2e}{}",
                self.mean[j],
                self.mcse_mean[j],
                self.sd[j],
                self.bias_mean[j],
                self.bias_mean_se[j],
                self.bias_sd[j],
                self.bias_sd_se[j],
                if biased.contains(&j) { " !" } else { "" }
            )?;
        }
        if !biased.is_empty() {
            write!(
                f,
                "\n! the estimated step bias is above 3 standard errors and the Monte Carlo error: a smaller step \
                 (or Richardson–Romberg) would be more accurate"
            )?;
        }
        write!(
            f,
            "\nthe run at step h: {}\nwith its step bias: means within ±{:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates)",
            self.convergence,
            self.error_bound,
            100.0 * self.error_bound,
            100.0 * crate::trace::diagnostics::BOUND_PROB
        )?;
        Ok(())
    }
}

/// Estimates the bias that the step size (discretisation and minibatch noise) leaves in a run of
/// `sampler`: each chain runs with a companion at half the step driven by the same Brownian path
/// and independent minibatches of the same size (a Richardson–Romberg pair, run by the [`Runner`](crate::run::runner::Runner)); to first
/// order in h, `π̂_h − π = 2 (π̂_h − π̂_{h/2})`, for the means and the sds, averaged over chains with
/// standard errors from their spread. The run itself (chains at step h) is reported alongside,
/// with the Monte Carlo error of its means, so that one table shows which error dominates. Needs
/// a constant step and at least 2 chains (`settings.n_chains`) for the standard errors. Costs
/// about three times the plain run.
///
/// Errors: as a Richardson–Romberg run; [`Error::NoSamples`] if a chain kept nothing.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::discretisation_bias;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 3)?;
/// let sgld = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(10))?;
/// let settings = RunSettings { n_iter: 20_000, burn_in: 1_000, n_chains: 4, ..Default::default() };
/// let report = discretisation_bias(&model, &sgld, &[0.0, 0.0], &settings)?;
/// println!("{report}");
/// assert_eq!(report.mean.len(), 2);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn discretisation_bias<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<BiasReport> {
    let out = Runner::new(model, &RichardsonRomberg::new(sampler.clone())).start(theta0).settings(*settings).run()?;
    let d = out.coarse.dim();
    let k = out.coarse.n_parts();
    let none = || Error::NoSamples { reason: "a chain kept no draw" };
    // Per chain: its means, and the bias estimates of the means and of the sds.
    type PerChain = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut per: Vec<PerChain> = Vec::with_capacity(k);
    for c in 0..k {
        let (a, b) = (out.coarse.part(c).ok_or_else(none)?, out.fine.part(c).ok_or_else(none)?);
        let (ma, va, mb, vb) = (a.mean()?, a.variance()?, b.mean()?, b.variance()?);
        let bias_m = (0..d).map(|j| 2.0 * (ma[j] - mb[j])).collect();
        let bias_s = (0..d).map(|j| 2.0 * (va[j].max(0.0).sqrt() - vb[j].max(0.0).sqrt())).collect();
        per.push((ma.to_vec(), bias_m, bias_s));
    }
    let kf = k as f64;
    let mean_se = |f: &dyn Fn(&PerChain) -> f64| -> (f64, f64) {
        let m = per.iter().map(f).sum::<f64>() / kf;
        let se = if k > 1 {
            (per.iter().map(|p| (f(p) - m).powi(2)).sum::<f64>() / (kf - 1.0) / kf).sqrt()
        } else {
            f64::NAN
        };
        (m, se)
    };
    let (mean, var) = (out.coarse.mean()?, out.coarse.variance()?);
    let rows = crate::trace::diagnostics::summary(&out.coarse)?;
    let convergence = crate::trace::diagnostics::convergence_of(&rows, k);
    let z = crate::trace::diagnostics::bound_z(d);
    let mut r = BiasReport {
        mean: mean.to_vec(),
        sd: var.iter().map(|v| v.max(0.0).sqrt()).collect(),
        mcse_mean: Vec::with_capacity(d),
        bias_mean: Vec::with_capacity(d),
        bias_mean_se: Vec::with_capacity(d),
        bias_sd: Vec::with_capacity(d),
        bias_sd_se: Vec::with_capacity(d),
        chains: k,
        cost: out.cost,
        convergence,
        error_bound: 0.0,
    };
    for (j, row) in rows.iter().enumerate() {
        r.mcse_mean.push(mean_se(&|p| p.0[j]).1);
        let (b, se) = mean_se(&|p| p.1[j]);
        r.bias_mean.push(b);
        r.bias_mean_se.push(se);
        let (b, se) = mean_se(&|p| p.2[j]);
        r.bias_sd.push(b);
        r.bias_sd_se.push(se);
        let a_m = z * row.mcse_mean + r.bias_mean[j].abs();
        let a_sd = z * row.mcse_sd + r.bias_sd[j].abs();
        let worst = crate::trace::diagnostics::relative_bound(a_m, a_sd, r.sd[j]);
        r.error_bound = crate::trace::diagnostics::nan_max(r.error_bound, worst);
    }
    Ok(r)
}
