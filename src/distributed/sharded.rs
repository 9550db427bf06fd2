//! A data set sharded over the ranks ([`Sharded`]) and the run that keeps every rank's chain
//! identical ([`run_sharded`]).

use crate::distributed::cluster::{Cluster, Ranks};
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::observe::Observer;
use crate::run::placement::{Failure, Placement, rank_error};
use crate::run::runner::Runner;
use crate::run::uncontained;
use crate::run::{RunOutput, RunSettings};
use crate::samplers::Sampler;
use std::cell::RefCell;
use std::sync::Mutex;
use std::thread::ThreadId;

thread_local! {
    /// Scratch of [`Sharded`]: local indices and the exchanged partial sums.
    static SCRATCH: RefCell<(Vec<usize>, Vec<f64>, Vec<f64>)> = const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// The model of a data set sharded over the ranks of a [`Cluster`]: rank r holds `local`, a
/// model of its own rows, which are rows `offset_r .. offset_r + N_r` of the whole data set
/// (shards in rank order). `n_data()` is the total N; the prior is evaluated on every rank
/// (it needs no data).
///
/// A data-sum call with global indices `idx` (the same on every rank: drawn from the shared
/// stream) makes each rank sum its own indices' terms, then every rank receives every rank's
/// partial sum and adds them **in rank order**: the result is the same on every rank and on
/// every run with the same number of ranks, and equal to the single-process sum up to the
/// order of the floating-point additions (about 1e-16 relative per call; a chain stays within
/// 1e-12 relative of the single-process chain over thousands of iterations, which
/// `tests/mpi.rs` checks). One collective of R·(d + 1) numbers per call: the extra number carries
/// a failure flag, so that a rank whose model fails makes every rank fail at the same call.
///
/// Every rank must make the same calls in the same order: run one chain at a time on each rank
/// ([`run_sharded`] does; `RunSettings::parallel` would interleave chains differently on
/// different ranks). Calls from a second thread are refused with an error (no collective), so a
/// misuse fails instead of deadlocking. The full gradient is one collective; SGLD-CV's centre is
/// one full gradient, then two collectives per step (do not ask it to cache per-datum
/// gradients: that is N collectives).
pub struct Sharded<M> {
    local: M,
    /// This process among the ranks (the size is the number of shards).
    ranks: Ranks,
    offsets: Vec<usize>,
    n_data: usize,
    dim: usize,
    thread: Mutex<Option<ThreadId>>,
    /// The first rank whose shard gave a non-finite partial gradient sum, since the last run
    /// ([`NO_RANK`] if none): [`run_sharded`] names it in the divergence the sum causes.
    non_finite_rank: std::sync::atomic::AtomicUsize,
}

/// No rank (see `Sharded::non_finite_rank`).
const NO_RANK: usize = usize::MAX;

impl<M> std::fmt::Debug for Sharded<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sharded {{ rank: {}, offsets: {:?}, n_data: {} }}", self.ranks.rank, self.offsets, self.n_data)
    }
}

impl<M: Model> Sharded<M> {
    /// Wraps this rank's shard. Every rank must call it (one collective).
    ///
    /// Errors, on **every** rank: [`Error::RankFailure`] / [`Error::Rank`] naming the first rank
    /// whose shard is empty ([`Error::EmptyData`]) or whose dimension differs from rank 0's
    /// ([`Error::DimensionMismatch`]).
    pub fn new(cluster: &Cluster, local: M) -> Result<Self> {
        let all = cluster.ranks().exchange((local.dim() as u64, local.n_data() as u64), "shard shapes")?;
        let d0 = all[0].0 as usize;
        let check = |d: usize, n: usize| -> Result<()> {
            if n == 0 {
                return Err(Error::EmptyData { what: "this rank's shard has no data" });
            }
            crate::error::check_len("shard dimension (vs rank 0)", d0, d)
        };
        let failures: Vec<(usize, Failure)> = all
            .iter()
            .enumerate()
            .filter_map(|(r, &(d, n))| check(d as usize, n as usize).err().map(|e| (r, Failure::of(&e))))
            .collect();
        let mine_err = check(local.dim(), local.n_data()).err();
        if let Some(e) = rank_error(&cluster.ranks(), mine_err, &failures) {
            return Err(e);
        }
        let mut offsets = Vec::with_capacity(cluster.size + 1);
        let mut acc = 0;
        for &(_, n) in &all {
            offsets.push(acc);
            acc += n as usize;
        }
        offsets.push(acc);
        Ok(Sharded {
            local,
            ranks: cluster.ranks(),
            offsets,
            n_data: acc,
            dim: d0,
            thread: Mutex::new(None),
            non_finite_rank: std::sync::atomic::AtomicUsize::new(NO_RANK),
        })
    }

    /// This rank's shard model.
    pub fn local(&self) -> &M {
        &self.local
    }

    /// The global row range of this rank's shard.
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.offsets[self.ranks.rank]..self.offsets[self.ranks.rank + 1]
    }

    /// Refuses calls from a thread other than the first caller's (see the type's docs).
    fn check_thread(&self) -> Result<()> {
        let me = std::thread::current().id();
        let mut t = self.thread.lock().map_err(|_| Error::model_failure("Sharded", "poisoned lock"))?;
        match *t {
            None => {
                *t = Some(me);
                Ok(())
            }
            Some(id) if id == me => Ok(()),
            Some(_) => Err(Error::model_failure(
                "Sharded",
                "called from a second thread: run one chain at a time on each rank (run_sharded, or RunSettings::parallel = false)",
            )),
        }
    }

    /// Sums `len` numbers over ranks in rank order. `local` computes this rank's part into its
    /// buffer. A rank whose part fails — its model's error — is flagged to every rank in the same
    /// collective; the flagged ranks' messages then travel in a second collective (only on
    /// failure), so that every rank returns an error naming the first failing rank with its own
    /// message: [`Error::Rank`] there, [`Error::RankFailure`] elsewhere. A non-finite partial sum
    /// (with `finite`) is not a model failure but a divergence: it is flagged apart, summed in
    /// (so that every rank's runner sees the same non-finite gradient and raises
    /// [`Error::NonFiniteGradient`] with its iteration), and the first such rank is remembered
    /// for [`run_sharded`] to name.
    fn reduce(
        &self,
        out: &mut [f64],
        local: impl FnOnce(&[usize], &mut [f64]) -> Result<()>,
        idx: &[usize],
        finite: bool,
    ) -> Result<()> {
        self.check_thread()?;
        let len = out.len();
        let rows = self.rows();
        SCRATCH.with(|cell| {
            let mut guard = cell.borrow_mut();
            let (local_idx, part, all) = &mut *guard;
            local_idx.clear();
            local_idx.extend(idx.iter().filter(|i| rows.contains(i)).map(|i| i - rows.start));
            part.clear();
            part.resize(len + 1, 0.0);
            let mine = if local_idx.is_empty() { Ok(()) } else { local(local_idx, &mut part[..len]) };
            if mine.is_err() {
                part[len] = 1.0;
            } else if finite && !crate::error::all_finite(&part[..len]) {
                part[len] = 2.0;
            }
            all.clear();
            all.resize(self.ranks.size * (len + 1), 0.0);
            self.ranks.gather_f64(&part[..], &mut all[..])?;
            let flagged: Vec<usize> =
                all.chunks_exact(len + 1).enumerate().filter(|(_, c)| c[len] == 1.0).map(|(r, _)| r).collect();
            if let Some((r, _)) = all.chunks_exact(len + 1).enumerate().find(|(_, c)| c[len] == 2.0) {
                let _ = self.non_finite_rank.compare_exchange(
                    NO_RANK,
                    r,
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            if flagged.is_empty() {
                out.fill(0.0);
                for c in all.chunks_exact(len + 1) {
                    for (o, v) in out.iter_mut().zip(&c[..len]) {
                        *o += v;
                    }
                }
                return Ok(());
            }
            // Every rank saw the same flags, so every rank makes this second collective.
            let mine_err = mine.err();
            let ranks = self.ranks;
            let message = mine_err.as_ref().map(Error::to_string).unwrap_or_default();
            let mut messages = ranks.exchange(message, "shard gradient failures")?;
            let failed: Vec<(usize, Failure)> = flagged
                .into_iter()
                .map(|r| (r, Failure { chain: None, iteration: None, message: std::mem::take(&mut messages[r]) }))
                .collect();
            Err(rank_error(&ranks, mine_err, &failed).unwrap_or(Error::NotInitialised))
        })
    }
}

impl<M: Model> Model for Sharded<M> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn n_data(&self) -> usize {
        self.n_data
    }

    // Every method runs with panics uncontained: a panic on one rank must abort the job (the
    // other ranks wait for this one in the step's collective), not unwind into the chain.
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        uncontained(|| self.local.grad_prior(theta, out))
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        uncontained(|| self.reduce(out, |li, buf| self.local.grad_data_sum(theta, li, buf), idx, true))
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        uncontained(|| self.local.potential_prior(theta))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let mut out = [0.0];
        let r = uncontained(|| {
            self.reduce(
                &mut out,
                |li, buf| {
                    buf[0] =
                        self.local.potential_data_sum(theta, li).map_err(|e| e.needed_by("a sharded potential"))?;
                    Ok(())
                },
                idx,
                false,
            )
        });
        r.map(|()| out[0])
    }

    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        uncontained(|| self.local.hvp_prior(theta, v, out))
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        uncontained(|| self.reduce(out, |li, buf| self.local.hvp_data_sum(theta, v, li, buf), idx, true))
    }

    fn output_layout(&self) -> Option<&crate::models::Layout> {
        self.local.output_layout()
    }

    fn parameter_names(&self) -> Option<Vec<String>> {
        self.local.parameter_names()
    }
}

/// Runs `sampler` on a [`Sharded`] model: the same run on every rank (same sampler, starting
/// points and settings; chains one at a time, whatever `settings.parallel`), so that every rank
/// holds the same chains. Returns the same output on every rank.
///
/// The model check at the start ([`RunSettings::check_model`]) runs on every rank alike.
pub fn run_sharded<M, S, I>(
    model: &Sharded<M>,
    sampler: &S,
    inits: &[I],
    settings: &RunSettings,
    observers: &[&dyn Observer],
) -> Result<RunOutput<S>>
where
    M: Model,
    S: Sampler,
    I: AsRef<[f64]>,
{
    let settings = RunSettings { parallel: false, ..*settings };
    model.non_finite_rank.store(NO_RANK, std::sync::atomic::Ordering::Relaxed);
    Runner::new(model, sampler).starts(inits).settings(settings).observers(observers).run().map_err(|e| {
        // A divergence whose non-finite gradient came from a shard names that shard's rank (the
        // same on every rank: each saw the same flags).
        match model.non_finite_rank.load(std::sync::atomic::Ordering::Relaxed) {
            r if r != NO_RANK && e.is_divergence() => Error::Rank { rank: r, source: Box::new(e) },
            _ => e,
        }
    })
}
