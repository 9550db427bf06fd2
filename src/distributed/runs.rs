//! Runs over ranks: multilevel samples and Zarr traces written by every rank. (Chains and
//! Richardson–Romberg replicates go over ranks through the runner's placement:
//! `Runner::on(&cluster)`, the [`Distribute`](crate::runner::Distribute) of `&Cluster`.)

use crate::distributed::cluster::Cluster;
use crate::error::Result;
use crate::models::model::Model;
use crate::run::placement::Placement;
#[cfg(feature = "zarr")]
use crate::run::placement::agree;

impl<S: crate::samplers::SubsampledDiscretisation> crate::coupled::mlsgld::MlSgld<S> {
    /// [`run_fixed`](crate::MlSgld::run_fixed) with each level's samples spread over the ranks of
    /// `cluster` (sample i on rank `i mod R`, a rank's samples in parallel as the settings say);
    /// the samples are exchanged and folded in index order on every rank, so **every rank**
    /// returns a result bit-identical to the single-process `run_fixed` (estimate, variances,
    /// costs, kept points). Every rank must call it with the same arguments.
    ///
    /// Errors: as `run_fixed`, on every rank: the rank whose sample failed first (in index
    /// order) returns [`Error::Rank`](crate::Error::Rank) around its error, the others [`Error::RankFailure`](crate::Error::RankFailure) naming
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

/// Writes the chains of `est` (e.g. the output of `Runner::on(&cluster).run()`, the same on every rank)
/// to the Zarr store at `path` in the ArviZ InferenceData layout of
/// [`ZarrTrace`](crate::trace::export::ZarrTrace), the ranks sharing the work without conflicts: rank 0
/// creates the layout, then chain c is written by rank `c mod R` (one chunk per chain). `path`
/// must be on a file system every rank sees (on one machine, any directory). Feature `zarr`
/// with `mpi`.
///
/// Errors: as [`write_zarr`](crate::trace::export::write_zarr), on every rank ([`Error::Rank`](crate::Error::Rank) on the
/// rank that failed, [`Error::RankFailure`](crate::Error::RankFailure) elsewhere).
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
