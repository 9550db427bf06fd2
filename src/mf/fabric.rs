//! Where the blocks live: the [`Fabric`] that moves H blocks and sums partial dot products
//! ([`LocalFabric`] in one process; MPI ranks in `distributed`).

use crate::error::Result;
use crate::run::placement::Placement;
use std::ops::Range;

/// What the workers of a run exchange: one implementation in one process (all B workers
/// here), one over MPI (one worker per rank). The chain depends only on these operations, which
/// is what makes the two bit-identical.
pub(crate) trait Fabric {
    /// The workers held by this process.
    fn local(&self) -> Range<usize>;
    /// Every worker's `n` numbers, in worker order: `local` holds this process's workers' (worker
    /// after worker), `all` receives B × n.
    fn gather(&mut self, local: &[f64], all: &mut [f64]) -> Result<()>;
    /// After an iteration on diagonal `from`, gives every worker the H section (with its state)
    /// of diagonal `to`: worker b receives worker `b + δ`'s, `δ = to − from mod B`. `sections`
    /// holds the local workers' outgoing sections; `lens[p]` is the length of part p's section.
    fn shift(&mut self, from: usize, to: usize, sections: &mut [Vec<f64>], lens: &[usize]) -> Result<()>;
}

/// All B workers in this process.
pub(crate) struct LocalFabric {
    pub(super) blocks: usize,
    pub(super) spare: Vec<Vec<f64>>,
}

impl Fabric for LocalFabric {
    fn local(&self) -> Range<usize> {
        0..self.blocks
    }

    fn gather(&mut self, local: &[f64], all: &mut [f64]) -> Result<()> {
        crate::run::placement::Local.gather_f64(local, all)
    }

    fn shift(&mut self, from: usize, to: usize, sections: &mut [Vec<f64>], _lens: &[usize]) -> Result<()> {
        let nb = self.blocks;
        let delta = (to + nb - from) % nb;
        self.spare.resize_with(nb, Vec::new);
        for b in 0..nb {
            std::mem::swap(&mut self.spare[b], &mut sections[(b + delta) % nb]);
        }
        for (s, t) in sections.iter_mut().zip(self.spare.iter_mut()) {
            std::mem::swap(s, t);
        }
        Ok(())
    }
}
