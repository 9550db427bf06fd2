//! A constrained model's draws on its natural scale, named by block: the output side of
//! [`Layout`] and [`Constrained`] (which live with the models, below this layer).

use crate::error::{Result, check_len};
use crate::models::constrained::{Constrained, Layout};
use crate::models::model::Model;
use crate::trace::estimate::Estimate;

impl Layout {
    /// The draws of `est` on the constrained scale (θ = T(φ) for every draw), with the same
    /// weights, costs and step sizes; gradients (which are on φ) are dropped.
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) if `est` is not in dimension
    /// [`unconstrained_dim`](Self::unconstrained_dim); [`Error::NotStored`](crate::Error::NotStored) for a streaming
    /// (moments-only) part, whose draws are gone.
    pub fn constrain_estimate(&self, est: &Estimate) -> Result<Estimate> {
        check_len("dimension of the estimate", self.unconstrained_dim(), est.dim())?;
        est.map_draws(self.dim(), |phi, theta| self.forward(phi, theta, None))
    }
}

impl<M: Model> Constrained<M> {
    /// The summary table of a run's draws on the constrained scale, one row per number named
    /// after its block (`sigma`, `beta[0]`, …), as
    /// [`diagnostics::summary_table`](crate::trace::diagnostics::summary_table).
    ///
    /// Errors: as [`Layout::constrain_estimate`] and `summary_table`.
    pub fn summary_table(&self, est: &Estimate) -> Result<crate::trace::diagnostics::SummaryTable> {
        let theta = self.layout().constrain_estimate(est)?;
        crate::trace::diagnostics::summary_table(&theta)?.with_names(&self.layout().names())
    }

    /// Whether a run's chains mixed, judged on the constrained scale: R̂, ESS and the Monte
    /// Carlo bound of the draws mapped to θ = T(φ) (the scale [`summary_table`](Self::summary_table)
    /// reports; a mean's error on log τ says little about τ's), the failed coordinates named
    /// after the blocks. ([`RunOutput::convergence`](crate::RunOutput::convergence) judges the
    /// draws on φ, as the sampler sees them; [`Sample`](crate::Sample) uses this scale and adds
    /// the step bias.)
    ///
    /// Errors: as [`Layout::constrain_estimate`] and
    /// [`diagnostics::convergence`](crate::trace::diagnostics::convergence).
    pub fn convergence(&self, est: &Estimate) -> Result<crate::trace::diagnostics::Convergence> {
        let theta = self.layout().constrain_estimate(est)?;
        Ok(crate::trace::diagnostics::convergence(&theta)?.named(&self.layout().names()))
    }

    /// Writes a run's draws (on φ) as CSV on the constrained scale, the columns named after
    /// the blocks ([`export::write_csv_named`](crate::trace::export::write_csv_named)).
    ///
    /// Errors: as [`Layout::constrain_estimate`] and `write_csv_named`.
    pub fn write_csv(&self, path: impl AsRef<std::path::Path>, est: &Estimate) -> Result<()> {
        let theta = self.layout().constrain_estimate(est)?;
        crate::trace::export::write_csv_named(path, &theta, &self.layout().names())
    }

    /// Writes a run's draws (on φ) as a Zarr trace on the constrained scale, one ArviZ
    /// variable per block with the block's name and shape
    /// ([`export::write_zarr_named`](crate::trace::export::write_zarr_named)); the unconstrained
    /// draws stay in `est` (write them with [`export::write_zarr`](crate::trace::export::write_zarr)).
    ///
    /// Errors: as [`Layout::constrain_estimate`] and `write_zarr_named`.
    #[cfg(feature = "zarr")]
    pub fn write_zarr(
        &self,
        path: impl AsRef<std::path::Path>,
        est: &Estimate,
    ) -> Result<crate::trace::export::ZarrTrace> {
        let theta = self.layout().constrain_estimate(est)?;
        crate::trace::export::write_zarr_named(path, &theta, self.layout())
    }
}
