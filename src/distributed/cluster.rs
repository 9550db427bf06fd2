//! The MPI world ([`Cluster`]) and the placement over its ranks: every MPI call of the crate's runs.

use crate::error::{Error, Result};
use crate::run::placement::{Placement, distribute};
use mpi::Count;
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::{Serialize, de::DeserializeOwned};

/// The exit code of an MPI job aborted by a panic (as Rust's own for a panicking process).
pub const PANIC_EXIT_CODE: i32 = 101;

/// The MPI world of this process: initialises MPI on creation and finalises it when dropped.
/// Create exactly one, in `main`, before anything else uses MPI.
///
/// A panic after `init` outside a chain's boundary aborts the whole job (see the
/// [module docs](crate::distributed)); dropping the `Cluster` during a panic's unwinding does too.
pub struct Cluster {
    _universe: mpi::environment::Universe,
    pub(super) rank: usize,
    pub(super) size: usize,
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
            if crate::run::panic_is_contained() {
                // Inside a chain's boundary: the panic unwinds to it and becomes a typed error
                // that every rank reports, as any chain error.
                previous(info);
                return;
            }
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
    pub(super) rank: usize,
    pub(super) size: usize,
}

impl Cluster {
    /// This job's ranks as a placement.
    pub(crate) fn ranks(&self) -> Ranks {
        Ranks { rank: self.rank, size: self.size }
    }
}

impl crate::run::placement::sealed::Sealed for &Cluster {}

/// The ranks of the job: unit c on rank `c mod R`, the outputs exchanged so that every rank
/// returns the whole run (`Runner::new(..).on(&cluster).run()`).
impl<T: Serialize + DeserializeOwned> crate::run::placement::Distribute<T> for &Cluster {
    fn distribute(
        &self,
        n: usize,
        run: impl FnOnce(&[usize]) -> Result<T>,
        merge: impl FnOnce(Vec<(Vec<usize>, T)>) -> Result<T>,
    ) -> Result<T> {
        distribute(&self.ranks(), n, run, merge)
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
