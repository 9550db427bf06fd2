//! Distributed matrix factorisation over ranks ([`run_mf_mpi`]): the MPI fabric of the mf engine.

use crate::distributed::cluster::{Cluster, Ranks};
use crate::error::{Error, Result};
use crate::run::placement::{Failure, Placement, rank_error};
use serde::{Deserialize, Serialize};

/// One worker per rank: worker b of a block-scheduled matrix factorisation on rank b, its
/// collectives those of the ranks' [`Placement`].
struct MpiFabric {
    ranks: Ranks,
    recv: Vec<f64>,
}

impl crate::mf::Fabric for MpiFabric {
    fn local(&self) -> std::ops::Range<usize> {
        self.ranks.rank..self.ranks.rank + 1
    }

    fn gather(&mut self, local: &[f64], all: &mut [f64]) -> Result<()> {
        self.ranks.gather_f64(local, all)
    }

    fn shift(&mut self, from: usize, to: usize, sections: &mut [Vec<f64>], lens: &[usize]) -> Result<()> {
        let nb = self.ranks.size;
        let delta = (to + nb - from) % nb;
        if delta == 0 {
            return Ok(());
        }
        let (b, send) = (self.ranks.rank, &mut sections[0]);
        // This rank's new H part is (b + to) mod B; every moving vector carries its section.
        let n_vec = send.len() / lens[(b + from) % nb].max(1);
        let len = n_vec * lens[(b + to) % nb];
        self.recv.clear();
        self.recv.resize(len, 0.0);
        self.ranks.shift_f64(delta, &send[..], &mut self.recv[..])?;
        std::mem::swap(send, &mut self.recv);
        Ok(())
    }
}

/// The block-scheduled matrix factorisation of [`mf`](crate::mf) with worker b on rank b (B =
/// the number of ranks): DSGLD, pSGLD or HAMCMC as in the HAMCMC paper's §4.3. Each rank passes
/// its own row block of the training ratings (and of the test ratings); H blocks travel between
/// neighbouring ranks, HAMCMC's dot products are all-gathers of one number per rank summed in
/// rank order. The chain is **bit-identical** to [`mf::run_mf`](crate::mf::run_mf) with the
/// same B, shards and seed, and every rank returns the same [`MfOutput`](crate::mf::MfOutput)
/// (its wall times are its own).
///
/// Errors, on **every** rank (the ranks compare their set-ups first): a shard whose block is
/// not the rank, a partition of another number of blocks than ranks or different across ranks,
/// different settings, an empty row block → [`Error::Rank`] on the culprit and
/// [`Error::RankFailure`] elsewhere; a non-finite gradient or state during the run likewise,
/// with the iteration.
pub fn run_mf_mpi(
    cluster: &Cluster,
    shard: &crate::mf::RowShard,
    test: Option<&crate::mf::RowShard>,
    model: &crate::mf::MfModel,
    update: &crate::mf::MfUpdate,
    run: &crate::mf::MfRunSettings,
) -> Result<crate::mf::MfOutput> {
    use crate::mf::Engine;
    let (me, size) = (cluster.rank, cluster.size);
    let tests: Vec<&crate::mf::RowShard> = if run.eval_every > 0 { test.into_iter().collect() } else { Vec::new() };
    // Every rank's set-up, checked on every rank alike (so that all agree on the outcome).
    #[derive(Serialize, Deserialize, PartialEq)]
    struct Setup {
        partition: crate::mf::BlockPartition,
        block: usize,
        sizes: Vec<usize>,
        test: Option<(crate::mf::BlockPartition, usize, usize)>,
        model: crate::mf::MfModel,
        update: crate::mf::MfUpdate,
        run: crate::mf::MfRunSettings,
    }
    let mine = Setup {
        partition: shard.partition().clone(),
        block: shard.block(),
        sizes: shard.block_sizes(),
        test: tests.first().map(|t| (t.partition().clone(), t.block(), t.len())),
        model: *model,
        update: *update,
        run: *run,
    };
    let setups: Vec<Setup> = cluster.ranks().exchange(mine, "matrix-factorisation set-ups")?;
    let check = |r: usize, s: &Setup| -> Result<()> {
        s.model.validate()?;
        s.update.validate()?;
        if s.partition.blocks() != size {
            return Err(Error::invalid(
                "shard",
                format!("{} blocks on {size} ranks", s.partition.blocks()),
                "the partition needs one block per rank",
            ));
        }
        if s.block != r {
            return Err(Error::invalid(
                "shard",
                format!("row block {} on rank {r}", s.block),
                "rank b must hold row block b",
            ));
        }
        let first = &setups[0];
        if (&s.partition, &s.model, &s.update, &s.run) != (&first.partition, &first.model, &first.update, &first.run) {
            return Err(Error::invalid(
                "settings",
                format!("rank {r}"),
                "every rank must pass rank 0's partition and settings",
            ));
        }
        if s.sizes.iter().sum::<usize>() == 0 {
            return Err(Error::invalid(
                "shards",
                format!("row block {r}"),
                "every row block needs at least one training rating",
            ));
        }
        match &s.test {
            None if s.run.eval_every > 0 => {
                Err(Error::invalid("test", format!("rank {r}"), "eval_every > 0 needs every rank's test shard"))
            }
            Some((p, b, _)) if *p != s.partition || *b != r => Err(Error::invalid(
                "test",
                format!("rank {r}"),
                "the test shard must be row block b of the same partition",
            )),
            _ => Ok(()),
        }
    };
    let failures: Vec<(usize, Failure)> =
        setups.iter().enumerate().filter_map(|(r, s)| check(r, s).err().map(|e| (r, Failure::of(&e)))).collect();
    if let Some(e) = rank_error(&cluster.ranks(), check(me, &setups[me]).err(), &failures) {
        return Err(e);
    }
    let sizes: Vec<usize> = setups.iter().flat_map(|s| s.sizes.iter().copied()).collect();
    let n_test = setups.iter().map(|s| s.test.as_ref().map_or(0, |t| t.2)).sum();
    let fabric = MpiFabric { ranks: cluster.ranks(), recv: Vec::new() };
    Engine::new(fabric, vec![shard], tests, model, update, run, &sizes, n_test)?.run()
}
