//! Runs over ranks: chains and Richardson–Romberg replicates (`Runner::run_on`), multilevel
//! samples, Zarr traces written by every rank, and the deprecated functions.

use super::*;

/// [`run_chains`](crate::run_chains) with the chains spread over the ranks of `cluster`: chain
/// c runs on rank `c mod R` (a rank's chains in parallel as `settings.parallel` says); the
/// outputs are exchanged so that **every rank** returns the whole run, chains in chain order.
/// Draws, pooled estimate, costs and chain reports are bit-identical to the single-process
/// [`run_chains`](crate::run_chains) with the same arguments (the wall time is the longest
/// rank's). Every rank must call it with the same arguments.
///
/// Errors: as `run_chains`, on every rank: the failing rank returns [`Error::Rank`] around its
/// error, the others [`Error::RankFailure`] naming it (its chain and iteration); no rank hangs.
/// [`Error::InvalidParameter`] if a rank's output exceeds 2³¹ bytes (one MPI message).
///
/// Needs the sampler serialisable (every built-in sampler is: it travels with its chain's
/// report, as in a checkpoint).
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, sampler).starts(inits).settings(*settings).observers(observers).run_on(cluster)`"
)]
pub fn run_chains_mpi<M, S, I>(
    cluster: &Cluster,
    model: &M,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>>
where
    M: Model + ?Sized,
    S: Sampler + Serialize + DeserializeOwned,
    I: AsRef<[f64]>,
{
    run_chains_on(&cluster.ranks(), model, sampler, inits, settings, observers)
}

/// [`run_rr`](crate::run_rr) with the replicates (coupled pairs) spread over the ranks:
/// replicate c on rank `c mod R`; every rank returns the whole run, whose extrapolated, coarse
/// and fine estimates are **bit-identical** to the single-process `run_rr`'s (replicate c's
/// streams are `(seed, [c, ·])` wherever it runs). Errors as [`run_chains_mpi`].
#[deprecated(
    since = "0.2.0",
    note = "use `Runner::new(model, rr).start(theta0).settings(*settings).observers(observers).run_on(cluster)`"
)]
pub fn run_rr_mpi<M, S>(
    cluster: &Cluster,
    model: &M,
    rr: &RichardsonRomberg<S>,
    theta0: &[f64],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RrOutput<S>>
where
    M: Model + ?Sized,
    S: Discretisation + Serialize + DeserializeOwned,
{
    run_rr_chains_on(&cluster.ranks(), model, rr, &vec![theta0; settings.n_chains], settings, observers)
}

impl<M, S> crate::run::runner::Runner<'_, M, S>
where
    M: Model + ?Sized,
    S: Sampler + Serialize + DeserializeOwned,
{
    /// [`run`](crate::Runner::run) with the chains spread over the ranks of `cluster`: chain c
    /// runs on rank `c mod R` (a rank's chains in parallel as `settings.parallel` says); the
    /// outputs are exchanged so that **every rank** returns the whole run, chains in chain order.
    /// Draws, pooled estimate, costs and chain reports are bit-identical to the single-process
    /// run with the same builder (the wall time is the longest rank's). Every rank must build
    /// the same run.
    ///
    /// Errors: as `run`, on every rank: the failing rank returns [`Error::Rank`] around its
    /// error, the others [`Error::RankFailure`] naming it (its chain and iteration); no rank
    /// hangs. [`Error::InvalidParameter`] if a rank's output exceeds 2³¹ bytes (one MPI message).
    ///
    /// Needs the sampler serialisable (every built-in sampler is: it travels with its chain's
    /// report, as in a checkpoint).
    pub fn run_on(self, cluster: &Cluster) -> Result<RunOutput<S>> {
        let starts = self.chain_starts()?;
        let (model, sampler, settings, observers) = self.parts();
        run_chains_on(&cluster.ranks(), model, sampler, &starts, settings, observers)
    }
}

impl<M, S> crate::run::runner::Runner<'_, M, RichardsonRomberg<S>>
where
    M: Model + ?Sized,
    S: Discretisation + Serialize + DeserializeOwned,
{
    /// [`run`](crate::Runner::run) of Richardson–Romberg replicates spread over the ranks:
    /// replicate c on rank `c mod R`; every rank returns the whole run, whose extrapolated,
    /// coarse and fine estimates are **bit-identical** to the single-process run's (replicate
    /// c's streams are `(seed, [c, ·])` wherever it runs). Errors as for chains.
    pub fn run_on(self, cluster: &Cluster) -> Result<RrOutput<S>> {
        let starts = self.chain_starts()?;
        let (model, rr, settings, observers) = self.parts();
        run_rr_chains_on(&cluster.ranks(), model, rr, &starts, settings, observers)
    }
}

impl<S: crate::samplers::SubsampledDiscretisation> crate::coupled::mlsgld::MlSgld<S> {
    /// [`run_fixed`](crate::MlSgld::run_fixed) with each level's samples spread over the ranks of
    /// `cluster` (sample i on rank `i mod R`, a rank's samples in parallel as the settings say);
    /// the samples are exchanged and folded in index order on every rank, so **every rank**
    /// returns a result bit-identical to the single-process `run_fixed` (estimate, variances,
    /// costs, kept points). Every rank must call it with the same arguments.
    ///
    /// Errors: as `run_fixed`, on every rank: the rank whose sample failed first (in index
    /// order) returns [`Error::Rank`] around its error, the others [`Error::RankFailure`] naming
    /// it.
    pub fn run_fixed_mpi<M, G>(
        &self,
        cluster: &Cluster,
        model: &M,
        g: &G,
        samples: &[usize],
    ) -> Result<crate::coupled::mlsgld::MlmcResult>
    where
        M: Model + ?Sized,
        G: Fn(&[f64]) -> f64 + Sync,
    {
        self.run_fixed_on(&cluster.ranks(), model, g, samples)
    }

    /// [`run_adaptive`](crate::MlSgld::run_adaptive) with each batch of samples spread over the
    /// ranks as in [`run_fixed_mpi`](Self::run_fixed_mpi): every rank sees the same statistics,
    /// so every rank makes the same choices of levels and sample counts and returns the result
    /// of the single-process run, bit for bit.
    ///
    /// Errors: as `run_adaptive` and [`run_fixed_mpi`](Self::run_fixed_mpi).
    pub fn run_adaptive_mpi<M, G>(
        &self,
        cluster: &Cluster,
        model: &M,
        g: &G,
        target: &crate::coupled::mlsgld::AdaptiveSettings,
    ) -> Result<crate::coupled::mlsgld::MlmcResult>
    where
        M: Model + ?Sized,
        G: Fn(&[f64]) -> f64 + Sync,
    {
        self.run_adaptive_on(&cluster.ranks(), model, g, target)
    }
}

/// The former name of [`MlSgld::run_fixed_mpi`](crate::MlSgld::run_fixed_mpi) (renamed so that
/// it pairs with [`MlSgld::run_fixed`](crate::MlSgld::run_fixed)); same result.
#[deprecated(since = "0.2.0", note = "use the method `ml.run_fixed_mpi(cluster, model, g, samples)`")]
pub fn run_mlsgld_mpi<M, S, G>(
    cluster: &Cluster,
    ml: &crate::coupled::mlsgld::MlSgld<S>,
    model: &M,
    g: &G,
    samples: &[usize],
) -> Result<crate::coupled::mlsgld::MlmcResult>
where
    M: Model + ?Sized,
    S: crate::samplers::SubsampledDiscretisation,
    G: Fn(&[f64]) -> f64 + Sync,
{
    ml.run_fixed_mpi(cluster, model, g, samples)
}

/// The former name of [`MlSgld::run_adaptive_mpi`](crate::MlSgld::run_adaptive_mpi); same
/// result.
#[deprecated(since = "0.2.0", note = "use the method `ml.run_adaptive_mpi(cluster, model, g, target)`")]
pub fn run_mlsgld_adaptive_mpi<M, S, G>(
    cluster: &Cluster,
    ml: &crate::coupled::mlsgld::MlSgld<S>,
    model: &M,
    g: &G,
    target: &crate::coupled::mlsgld::AdaptiveSettings,
) -> Result<crate::coupled::mlsgld::MlmcResult>
where
    M: Model + ?Sized,
    S: crate::samplers::SubsampledDiscretisation,
    G: Fn(&[f64]) -> f64 + Sync,
{
    ml.run_adaptive_mpi(cluster, model, g, target)
}

/// Writes the chains of `est` (e.g. the output of `Runner::run_on`, the same on every rank)
/// to the Zarr store at `path` in the ArviZ InferenceData layout of
/// [`ZarrTrace`](crate::trace::export::ZarrTrace), the ranks sharing the work without conflicts: rank 0
/// creates the layout, then chain c is written by rank `c mod R` (one chunk per chain). `path`
/// must be on a file system every rank sees (on one machine, any directory). Feature `zarr`
/// with `mpi`.
///
/// Errors: as [`write_zarr`](crate::trace::export::write_zarr), on every rank ([`Error::Rank`] on the
/// rank that failed, [`Error::RankFailure`] elsewhere).
#[cfg(feature = "zarr")]
pub fn write_zarr_mpi(
    cluster: &Cluster,
    path: impl AsRef<std::path::Path>,
    est: &crate::trace::estimate::Estimate,
) -> Result<()> {
    use crate::trace::export::ZarrTrace;
    let path = path.as_ref();
    let ranks = cluster.ranks();
    let parts = agree(&ranks, est.equal_length_parts())?;
    let with_gradients = parts.iter().all(|s| s.gradients().is_some());
    let created = if cluster.rank == 0 {
        ZarrTrace::create(path, parts.len(), parts[0].len(), est.dim(), with_gradients).map(|_| ())
    } else {
        Ok(())
    };
    agree(&ranks, created)?;
    let written = ZarrTrace::open(path).and_then(|trace| {
        parts
            .iter()
            .enumerate()
            .filter(|&(c, _)| ranks.runs_here(c as u64))
            .try_for_each(|(c, s)| trace.write_chain(c, s))
    });
    agree(&ranks, written)?;
    // Every rank has written its chains: rank 0 marks the trace finished.
    let finished = if cluster.rank == 0 { ZarrTrace::open(path).and_then(|t| t.finish()) } else { Ok(()) };
    agree(&ranks, finished)
}
