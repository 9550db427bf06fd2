//! Where the units of a batch run: this process ([`Local`]) or the ranks of an MPI job
//! (`distributed::Ranks`, feature `mpi`) — the one seam between single-process and
//! distributed runs.
//!
//! A *unit* is what a batch is made of and what carries its own random stream: a chain, a
//! Richardson–Romberg replicate pair, a multilevel sample, a chain's Zarr chunk. A placement
//! says which units run here ([`Placement::runs_here`], the one rule `i mod R = rank`) and
//! exchanges structured values between the processes ([`Placement::exchange`]: encode,
//! all-gather, decode). On top of the two, written once for every kind of unit:
//! [`distribute`] (run the units placed here, exchange the outputs or failures, merge),
//! [`agree`] (every process learns whether a local step failed anywhere) and [`rank_error`]
//! (the failing rank's typed error there, [`Error::RankFailure`] elsewhere).
//!
//! Per-iteration numeric collectives — the partial sums of a sharded model's gradient, matrix
//! factorisation's partial dot products and its H-block ring shifts — are not units, but they
//! cross processes through the same seam: [`Placement::gather_f64`] and
//! [`Placement::shift_f64`] move `f64` slices with no encoding and no allocation (they run
//! every iteration). Every MPI call of the crate's runs is in `distributed::Ranks`' impl of
//! this trait.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Where the units of a batch run (see the [module docs](self)).
pub(crate) trait Placement {
    /// This process's index among [`size`](Self::size) (0 in a single process).
    fn rank(&self) -> usize;

    /// The number of processes R.
    fn size(&self) -> usize;

    /// Whether failures are reported as rank errors ([`Error::Rank`] on the failing process,
    /// [`Error::RankFailure`] elsewhere); a single process returns its own errors unwrapped.
    fn over_ranks(&self) -> bool;

    /// Every process's `mine`, in process order.
    ///
    /// Errors: [`Error::Wire`] if a value does not encode or decode (naming the rank).
    fn exchange<T: Serialize + DeserializeOwned>(&self, mine: T, what: &'static str) -> Result<Vec<T>>;

    /// Every process's `local` (the same length everywhere), in process order, into `all`
    /// (`size × local.len()` numbers). Allocates nothing.
    ///
    /// Errors: [`Error::DimensionMismatch`] if `all` has the wrong length.
    fn gather_f64(&self, local: &[f64], all: &mut [f64]) -> Result<()>;

    /// The ring shift by δ: this process sends `send` to process `rank − δ` and receives into
    /// `recv` the numbers process `rank + δ` sends (mod `size`; `recv` has the length the sender
    /// sends). With δ ≡ 0, `recv` becomes a copy of `send`.
    ///
    /// Errors: [`Error::DimensionMismatch`] for δ ≡ 0 with `recv` and `send` of different lengths.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn shift_f64(&self, delta: usize, send: &[f64], recv: &mut [f64]) -> Result<()>;

    /// Whether unit `i` of a batch (counted from the batch's start) runs here: `i mod R = rank`.
    fn runs_here(&self, i: u64) -> bool {
        i % self.size() as u64 == self.rank() as u64
    }
}

/// Every unit in this process (threads as the settings say): the placement of a
/// [`Runner`](crate::run::runner::Runner) unless [`on`](crate::run::runner::Runner::on) says
/// otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Placement for Local {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn over_ranks(&self) -> bool {
        false
    }

    fn exchange<T: Serialize + DeserializeOwned>(&self, mine: T, _what: &'static str) -> Result<Vec<T>> {
        Ok(vec![mine])
    }

    fn gather_f64(&self, local: &[f64], all: &mut [f64]) -> Result<()> {
        crate::error::check_len("gathered numbers", local.len(), all.len())?;
        all.copy_from_slice(local);
        Ok(())
    }

    fn shift_f64(&self, _delta: usize, send: &[f64], recv: &mut [f64]) -> Result<()> {
        crate::error::check_len("shifted numbers", send.len(), recv.len())?;
        recv.copy_from_slice(send);
        Ok(())
    }
}

/// Where the units of a [`Runner`](crate::run::runner::Runner) run, for an output of type `T`:
/// [`Local`] (this process, any output) or, with feature `mpi`, `&Cluster` (unit c on rank
/// `c mod R`, the outputs exchanged, so they must be serialisable). Sealed: the crate's
/// placements are the only ones. The runner is written once over it, single-process and MPI.
pub trait Distribute<T>: sealed::Sealed {
    /// Runs the units placed here with `run` (which gets their indices, increasing) and, over
    /// ranks, merges every process's output with `merge` (see the module's `distribute`).
    #[doc(hidden)]
    fn distribute(
        &self,
        n: usize,
        run: impl FnOnce(&[usize]) -> Result<T>,
        merge: impl FnOnce(Vec<(Vec<usize>, T)>) -> Result<T>,
    ) -> Result<T>;
}

/// Seals [`Distribute`].
pub(crate) mod sealed {
    /// Implemented by the crate's placements only.
    pub trait Sealed {}
    impl Sealed for super::Local {}
}

impl<T> Distribute<T> for Local {
    fn distribute(
        &self,
        n: usize,
        run: impl FnOnce(&[usize]) -> Result<T>,
        _merge: impl FnOnce(Vec<(Vec<usize>, T)>) -> Result<T>,
    ) -> Result<T> {
        let units: Vec<usize> = (0..n).collect();
        run(&units)
    }
}

/// What a process reports of a failure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) chain: Option<usize>,
    pub(crate) iteration: Option<u64>,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn of(e: &Error) -> Self {
        Failure { chain: e.chain(), iteration: e.iteration(), message: e.to_string() }
    }
}

/// The error of a batch some process failed: `failures` are `(rank, failure)` in rank order,
/// `mine` this process's own error. Over ranks: the first failing rank's typed error (wrapped in
/// [`Error::Rank`]) on that rank, an [`Error::RankFailure`] naming it elsewhere; in one process:
/// its own error as is. `None` if nothing failed.
pub(crate) fn rank_error<P: Placement + ?Sized>(
    p: &P,
    mine: Option<Error>,
    failures: &[(usize, Failure)],
) -> Option<Error> {
    if !p.over_ranks() {
        return mine;
    }
    let (rank, f) = failures.first()?;
    Some(match mine {
        Some(e) if *rank == p.rank() => Error::Rank { rank: *rank, source: Box::new(e) },
        _ => Error::RankFailure { rank: *rank, chain: f.chain, iteration: f.iteration, message: f.message.clone() },
    })
}

/// One process's part of a distributed batch.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
#[derive(Serialize, Deserialize)]
#[serde(bound(serialize = "T: Serialize", deserialize = "T: DeserializeOwned"))]
struct RankReport<T> {
    units: Vec<usize>,
    output: Option<T>,
    failure: Option<Failure>,
}

/// Runs the units of `0..n` placed here with `run` (which gets their indices, increasing),
/// exchanges every process's output (or failure) and merges them with `merge` (parts with
/// their units, in rank order) on every process — the [`Distribute`] of the ranks (a single
/// process uses [`Local`]'s, which runs every unit and needs no serialisable output).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn distribute<P: Placement + ?Sized, T: Serialize + DeserializeOwned>(
    p: &P,
    n: usize,
    run: impl FnOnce(&[usize]) -> Result<T>,
    merge: impl FnOnce(Vec<(Vec<usize>, T)>) -> Result<T>,
) -> Result<T> {
    let units: Vec<usize> = (0..n).filter(|&c| p.runs_here(c as u64)).collect();
    let (output, mine) = if units.is_empty() {
        (None, None)
    } else {
        match run(&units) {
            Ok(out) => (Some(out), None),
            Err(e) => (None, Some(e)),
        }
    };
    let report = RankReport { units, output, failure: mine.as_ref().map(Failure::of) };
    let all: Vec<RankReport<T>> = p.exchange(report, "run outputs")?;
    let mut parts = Vec::with_capacity(all.len());
    let mut failures = Vec::new();
    for (rank, r) in all.into_iter().enumerate() {
        if let Some(f) = r.failure {
            failures.push((rank, f));
        } else if let Some(out) = r.output {
            parts.push((r.units, out));
        }
    }
    if let Some(e) = rank_error(p, mine, &failures) {
        return Err(e);
    }
    merge(parts)
}

/// Every process's outcome of a local step: `Ok` everywhere if every process succeeded, else
/// the first failing rank's error ([`rank_error`]).
#[cfg_attr(not(all(feature = "mpi", feature = "zarr")), allow(dead_code))]
pub(crate) fn agree<P: Placement + ?Sized, T>(p: &P, local: Result<T>) -> Result<T> {
    let failure = local.as_ref().err().map(Failure::of);
    let failures: Vec<(usize, Failure)> = p
        .exchange(failure, "step statuses")?
        .into_iter()
        .enumerate()
        .filter_map(|(rank, f)| f.map(|f| (rank, f)))
        .collect();
    match local {
        Ok(v) if failures.is_empty() => Ok(v),
        Ok(_) => Err(rank_error(p, None, &failures).unwrap_or(Error::NotInitialised)),
        Err(e) => Err(rank_error(p, Some(e), &failures).unwrap_or(Error::NotInitialised)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    /// A placement of `size` ranks as threads of one process: `exchange` encodes each rank's
    /// value (as the MPI placement does), all-gathers the bytes through shared slots between two
    /// barriers, and decodes them in rank order; `gather_f64` likewise. What `distribute` and
    /// `agree` do over ranks, tested without MPI.
    struct Threads {
        rank: usize,
        size: usize,
        slots: Arc<Mutex<Vec<Vec<u8>>>>,
        barrier: Arc<Barrier>,
    }

    impl Threads {
        fn all(size: usize) -> Vec<Threads> {
            let slots = Arc::new(Mutex::new(vec![Vec::new(); size]));
            let barrier = Arc::new(Barrier::new(size));
            (0..size).map(|rank| Threads { rank, size, slots: slots.clone(), barrier: barrier.clone() }).collect()
        }

        fn all_gather(&self, mine: Vec<u8>) -> Vec<Vec<u8>> {
            self.slots.lock().unwrap()[self.rank] = mine;
            self.barrier.wait();
            let all = self.slots.lock().unwrap().clone();
            self.barrier.wait();
            all
        }
    }

    impl Placement for Threads {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn over_ranks(&self) -> bool {
            true
        }
        fn exchange<T: Serialize + DeserializeOwned>(&self, mine: T, what: &'static str) -> Result<Vec<T>> {
            let bytes =
                postcard::to_allocvec(&mine).map_err(|e| Error::Wire { what, rank: None, reason: e.to_string() })?;
            self.all_gather(bytes)
                .iter()
                .enumerate()
                .map(|(rank, b)| {
                    postcard::from_bytes(b).map_err(|e| Error::Wire { what, rank: Some(rank), reason: e.to_string() })
                })
                .collect()
        }
        fn gather_f64(&self, local: &[f64], all: &mut [f64]) -> Result<()> {
            crate::error::check_len("gathered numbers", self.size * local.len(), all.len())?;
            let bytes = local.iter().flat_map(|x| x.to_le_bytes()).collect();
            for (out, b) in all.iter_mut().zip(self.all_gather(bytes).concat().chunks_exact(8)) {
                *out = f64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
            Ok(())
        }
        fn shift_f64(&self, _delta: usize, _send: &[f64], _recv: &mut [f64]) -> Result<()> {
            Err(Error::Unsupported { method: "shift_f64", needed_by: "the thread placement of the tests" })
        }
    }

    /// Runs `f` on every rank of a `size`-rank thread placement, returning each rank's result.
    fn on_ranks<T: Send>(size: usize, f: impl Fn(&Threads) -> T + Sync) -> Vec<T> {
        std::thread::scope(|s| {
            let handles: Vec<_> = Threads::all(size)
                .into_iter()
                .map(|p| {
                    let f = &f;
                    s.spawn(move || f(&p))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Unit i runs on rank `i mod R`, and every rank gets every unit's output, merged in unit
    /// order, whatever R (1 to 4 ranks, 7 units: some ranks run one unit more than others).
    #[test]
    fn distribute_runs_each_unit_once_and_every_rank_gets_all_outputs() {
        for size in 1..=4 {
            let results = on_ranks(size, |p| {
                distribute(
                    p,
                    7,
                    |units| {
                        assert!(units.iter().all(|&u| u % size == p.rank()), "rank {} ran {units:?}", p.rank());
                        Ok(units.iter().map(|&u| (u, (u * u) as f64)).collect::<Vec<_>>())
                    },
                    |parts| {
                        let mut all: Vec<(usize, f64)> = parts.into_iter().flat_map(|(_, out)| out).collect();
                        all.sort_by_key(|x| x.0);
                        Ok(all)
                    },
                )
                .unwrap()
            });
            let want: Vec<(usize, f64)> = (0..7).map(|u| (u, (u * u) as f64)).collect();
            for r in results {
                assert_eq!(r, want, "{size} ranks");
            }
        }
    }

    /// A unit that fails on one rank fails the run on every rank: its own rank gets its typed
    /// error wrapped in `Rank`, the others `RankFailure` naming that rank and the message.
    #[test]
    fn a_failure_on_one_rank_is_reported_on_every_rank() {
        let results = on_ranks(3, |p| {
            distribute(
                p,
                6,
                |units| {
                    if p.rank() == 1 {
                        Err(Error::invalid("step_size", -1.0, "must be positive"))
                    } else {
                        Ok(units.to_vec())
                    }
                },
                |parts| Ok(parts.into_iter().flat_map(|(u, _)| u).collect::<Vec<_>>()),
            )
        });
        for (rank, r) in results.into_iter().enumerate() {
            match (rank, r) {
                (1, Err(Error::Rank { rank: 1, source })) => {
                    assert!(matches!(*source, Error::InvalidParameter { name: "step_size", .. }))
                }
                (0 | 2, Err(Error::RankFailure { rank: 1, message, .. })) => assert!(message.contains("step_size")),
                (rank, other) => panic!("rank {rank}: {other:?}"),
            }
        }
    }

    /// `agree`: a local step's failure anywhere fails the step everywhere; all successes keep
    /// their values. `gather_f64` puts every rank's numbers in rank order.
    #[test]
    fn agree_and_gather_over_thread_ranks() {
        let ok = on_ranks(3, |p| agree(p, Ok(p.rank())).unwrap());
        assert_eq!(ok, [0, 1, 2]);
        let failed = on_ranks(3, |p| {
            let local = if p.rank() == 2 { Err(Error::invalid("chunk", 3.0, "write failed")) } else { Ok(p.rank()) };
            agree(p, local)
        });
        for (rank, r) in failed.into_iter().enumerate() {
            match r {
                Err(Error::Rank { rank: 2, .. }) => assert_eq!(rank, 2),
                Err(Error::RankFailure { rank: 2, .. }) => assert_ne!(rank, 2),
                other => panic!("rank {rank}: {other:?}"),
            }
        }
        let gathered = on_ranks(3, |p| {
            let mut all = vec![0.0; 6];
            p.gather_f64(&[p.rank() as f64, 10.0 * p.rank() as f64], &mut all).unwrap();
            all
        });
        for all in gathered {
            assert_eq!(all, [0.0, 0.0, 1.0, 10.0, 2.0, 20.0]);
        }
    }
}
