//! Beyond one machine, through MPI (feature `mpi`): chains, coupled pieces and data spread over
//! ranks.
//!
//! Start the program with `mpirun -np R` (or `srun`); a program started without them runs as
//! one rank. Create one [`Cluster`] at the start of `main` (it initialises MPI and finalises it
//! when dropped), then:
//!
//! - [`Runner`]`::run_on(&cluster)`: the run the same builder makes with `run()`, chain c on
//!   rank `c mod R`; **every rank** returns the whole run's output, whose draws and pooled estimate are
//!   **bit-identical** to the single-process run's whatever R (chain c's stream is
//!   `(seed, [c])` wherever it runs).
//! - [`Sharded`]: each rank holds a shard of the data (its own [`Model`] on its rows); the
//!   wrapper is the model of the whole data set, whose minibatch gradient sums each rank's part
//!   of the global minibatch. Run the *same* sampler and seed on every rank with
//!   [`run_sharded`]: the minibatch indices and the Gaussian noise come from the shared stream,
//!   so θ stays identical on all ranks; one exchange of d + 1 numbers per gradient.
//!
//! - the same `run_on` for a [`RichardsonRomberg`]: replicates (coupled pairs) over ranks,
//!   bit-identical to its `run()`. (`run_chains_mpi` and `run_rr_mpi` are the deprecated forms.)
//! - [`MlSgld::run_fixed_mpi`](crate::MlSgld::run_fixed_mpi) /
//!   [`run_adaptive_mpi`](crate::MlSgld::run_adaptive_mpi): multilevel (ML-SGLD) samples over
//!   ranks, bit-identical to [`MlSgld::run_fixed`](crate::MlSgld::run_fixed) /
//!   [`run_adaptive`](crate::MlSgld::run_adaptive).
//! - [`run_mf_mpi`]: the distributed matrix factorisation of the HAMCMC paper (§4.3; DSGLD's
//!   block schedule with SGLD, pSGLD or HAMCMC), rank b holding row block b, bit-identical to
//!   [`mf::run_mf`](crate::mf::run_mf).
//! - `write_zarr_mpi` (with feature `zarr`): a run's trace written by all ranks, one chunk per
//!   chain, in the ArviZ layout of [`export::write_zarr`](crate::trace::export).
//!
//! Errors never hang: a rank that fails makes every rank return an error naming it
//! ([`Error::Rank`] on the failing rank, with its typed error; [`Error::RankFailure`] on the
//! others), as the ranks exchange their status at each collective step. Mismatched shards are
//! errors on every rank at construction.
//!
//! **Panics abort the job.** A panic cannot be exchanged like an error (the panicking rank
//! leaves the collective sequence), so [`Cluster::init`] installs a panic hook: a panic on any
//! thread of any rank prints `sgmcmc::distributed: rank r of R panicked …` with the panic's own
//! message, then calls `MPI_Abort` (exit code [`PANIC_EXIT_CODE`]), which ends every rank of the
//! job at once (`tests/mpi.rs` checks: within seconds, on 2 and 4 ranks, for a model panicking
//! in a chain over ranks and in a sharded run). A `catch_unwind` cannot keep an MPI job alive
//! after a panic. Should the hook be replaced after `init`, dropping the [`Cluster`] while
//! unwinding aborts the job too. (A single-process run has no such hook: a panic in one chain
//! propagates to the caller of `Runner::run` once the other chains have finished.)
//!
#![doc = include_str!("../docs/guide/cluster.md")]

use crate::coupled::richardson::{RichardsonRomberg, RrOutput, run_rr_chains_on};
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::observe::Observer;
#[cfg(feature = "zarr")]
use crate::run::placement::agree;
use crate::run::placement::{Failure, Placement, distribute, rank_error};
use crate::run::runner::Runner;
use crate::run::{RunOutput, RunSettings, run_chains_on};
use crate::samplers::{Discretisation, Sampler};
use mpi::Count;
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::cell::RefCell;
use std::sync::Mutex;
use std::thread::ThreadId;

/// The `mpi` crate (rsmpi) this module is built on.
pub use mpi;

/// The exit code of an MPI job aborted by a panic (as Rust's own for a panicking process).
pub const PANIC_EXIT_CODE: i32 = 101;

/// The MPI world of this process: initialises MPI on creation and finalises it when dropped.
/// Create exactly one, in `main`, before anything else uses MPI.
///
/// A panic anywhere in the process after `init` aborts the whole job (see the
/// [module docs](self)); dropping the `Cluster` during a panic's unwinding does too.
pub struct Cluster {
    _universe: mpi::environment::Universe,
    rank: usize,
    size: usize,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cluster {{ rank: {}, size: {} }}", self.rank, self.size)
    }
}

impl Cluster {
    /// Initialises MPI (thread level "serialized": MPI calls from any thread, one at a time).
    ///
    /// Errors: [`Error::InvalidParameter`] if MPI was already initialised in this process (a
    /// second `Cluster`), or the library cannot give serialized thread support.
    pub fn init() -> Result<Self> {
        let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| Error::invalid("Cluster", "init", "MPI is already initialised in this process"))?;
        if level < mpi::Threading::Serialized {
            return Err(Error::invalid("Cluster", format!("{level:?}"), "the MPI library lacks serialized threading"));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // One write of the whole line: `eprintln!` writes its pieces one by one to the
            // unbuffered stderr, and other ranks' output can land between them (seen: "rank "
            // and "3 of 4 panicked" split by another rank's line).
            let line = format!(
                "sgmcmc::distributed: rank {rank} of {size} panicked; aborting every rank of the MPI job (exit code {PANIC_EXIT_CODE}). The panic:\n"
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            previous(info);
            SimpleCommunicator::world().abort(PANIC_EXIT_CODE);
        }));
        Ok(Cluster { rank, size, _universe: universe })
    }

    /// This process's rank, 0-based.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks R.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits until every rank gets here.
    pub fn barrier(&self) {
        world().barrier();
    }
}

impl Drop for Cluster {
    /// Aborts the job if the process is unwinding from a panic (the hook of [`Cluster::init`]
    /// normally has already); finalises MPI otherwise.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "sgmcmc::distributed: rank {} of {} is unwinding from a panic; aborting every rank of the MPI job",
                self.rank, self.size
            );
            world().abort(PANIC_EXIT_CODE);
        }
    }
}

/// The world communicator (a handle to `MPI_COMM_WORLD`, made on demand so that the types that
/// use it stay `Send + Sync`).
fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

/// Every rank's bytes, in rank order (two collectives: the lengths, then the bytes).
fn all_gather_bytes(mine: &[u8]) -> Result<Vec<Vec<u8>>> {
    let w = world();
    let size = w.size() as usize;
    let len = Count::try_from(mine.len())
        .map_err(|_| Error::invalid("message", mine.len(), "above 2^31 bytes: too large for one MPI message"))?;
    let mut counts = vec![0 as Count; size];
    w.all_gather_into(&len, &mut counts[..]);
    let displs: Vec<Count> = counts.iter().scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c))).collect();
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let mut buf = vec![0u8; total];
    {
        let mut partition = PartitionMut::new(&mut buf[..], counts.clone(), &displs[..]);
        w.all_gather_varcount_into(mine, &mut partition);
    }
    Ok(counts.iter().zip(&displs).map(|(&c, &d)| buf[d as usize..(d + c) as usize].to_vec()).collect())
}

/// The ranks of an MPI job as a [`Placement`]: unit i on rank `i mod R`; values exchanged by
/// encoding (postcard), one all-gather of the bytes, decoding — the one exchange of structured
/// values between ranks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranks {
    rank: usize,
    size: usize,
}

impl Cluster {
    /// This job's ranks as a placement.
    pub(crate) fn ranks(&self) -> Ranks {
        Ranks { rank: self.rank, size: self.size }
    }
}

impl<T: Serialize + DeserializeOwned> crate::run::placement::Distribute<T> for Ranks {
    fn distribute(
        &self,
        n: usize,
        run: impl FnOnce(&[usize]) -> Result<T>,
        merge: impl FnOnce(Vec<(Vec<usize>, T)>) -> Result<T>,
    ) -> Result<T> {
        distribute(self, n, run, merge)
    }
}

impl Placement for Ranks {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn over_ranks(&self) -> bool {
        true
    }

    fn gather_f64(&self, local: &[f64], all: &mut [f64]) -> Result<()> {
        crate::error::check_len("gathered numbers", self.size * local.len(), all.len())?;
        world().all_gather_into(local, all);
        Ok(())
    }

    fn shift_f64(&self, delta: usize, send: &[f64], recv: &mut [f64]) -> Result<()> {
        let delta = delta % self.size;
        if delta == 0 {
            crate::error::check_len("shifted numbers", send.len(), recv.len())?;
            recv.copy_from_slice(send);
            return Ok(());
        }
        let w = world();
        let dest = w.process_at_rank(((self.rank + self.size - delta) % self.size) as i32);
        let src = w.process_at_rank(((self.rank + delta) % self.size) as i32);
        mpi::point_to_point::send_receive_into(send, &dest, recv, &src);
        Ok(())
    }

    fn exchange<T: Serialize + DeserializeOwned>(&self, mine: T, what: &'static str) -> Result<Vec<T>> {
        let bytes = postcard::to_stdvec(&mine).map_err(|e| Error::Wire { rank: None, what, reason: e.to_string() })?;
        all_gather_bytes(&bytes)?
            .iter()
            .enumerate()
            .map(|(rank, b)| {
                postcard::from_bytes(b).map_err(|e| Error::Wire { rank: Some(rank), what, reason: e.to_string() })
            })
            .collect()
    }
}

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

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.local.grad_prior(theta, out)
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.reduce(out, |li, buf| self.local.grad_data_sum(theta, li, buf), idx, true)
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        self.local.potential_prior(theta)
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let mut out = [0.0];
        let r = self.reduce(
            &mut out,
            |li, buf| {
                buf[0] = self.local.potential_data_sum(theta, li).map_err(|e| e.needed_by("a sharded potential"))?;
                Ok(())
            },
            idx,
            false,
        );
        r.map(|()| out[0])
    }

    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.local.hvp_prior(theta, v, out)
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.reduce(out, |li, buf| self.local.hvp_data_sum(theta, v, li, buf), idx, true)
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
    agree(&ranks, written)
}
