//! A constrained model's draws on its natural scale, named by block: the output side of
//! [`Layout`] and [`Constrained`] (which live with the models, below this layer).

use crate::error::{Error, Result, check_len};
use crate::models::constrained::{Constrained, Layout};
use crate::models::model::Model;
use crate::trace::estimate::Estimate;

impl Layout {
    /// The draws of `est` on the constrained scale (θ = T(φ) for every draw), with the same
    /// weights, costs and step sizes; gradients (which are on φ) are dropped.
    ///
    /// Errors: [`Error::DimensionMismatch`] if `est` is not in dimension
    /// [`unconstrained_dim`](Self::unconstrained_dim); [`Error::NotStored`] for a streaming
    /// (moments-only) part, whose draws are gone.
    pub fn constrain_estimate(&self, est: &Estimate) -> Result<Estimate> {
        check_len("dimension of the estimate", self.unconstrained_dim(), est.dim())?;
        let mut parts = Vec::with_capacity(est.n_parts());
        for c in 0..est.n_parts() {
            let s = est.samples(c).ok_or(Error::NotStored { what: "draws (a streaming run keeps only moments)" })?;
            parts.push(Estimate::from_samples(s.mapped(self.dim(), |phi, theta| self.forward(phi, theta, None))));
        }
        Estimate::combine(parts)
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
