//! Beyond one machine, through MPI (feature `mpi`): chains, coupled pieces and data spread over
//! ranks.
//!
//! Start the program with `mpirun -np R` (or `srun`); a program started without them runs as
//! one rank. Create one [`Cluster`] at the start of `main` (it initialises MPI and finalises it
//! when dropped), then:
//!
//! - [`Runner`]`::on(&cluster).run()`: the run the same builder makes with `run()`, chain c on
//!   rank `c mod R`; **every rank** returns the whole run's output, whose draws and pooled estimate are
//!   **bit-identical** to the single-process run's whatever R (chain c's stream is
//!   `(seed, [c])` wherever it runs).
//! - [`Sharded`]: each rank holds a shard of the data (its own [`Model`] on its rows); the
//!   wrapper is the model of the whole data set, whose minibatch gradient sums each rank's part
//!   of the global minibatch. Run the *same* sampler and seed on every rank with
//!   [`run_sharded`]: the minibatch indices and the Gaussian noise come from the shared stream,
//!   so θ stays identical on all ranks; one exchange of d + 1 numbers per gradient.
//!
//! - the same `.on(&cluster)` for a [`RichardsonRomberg`]: replicates (coupled pairs) over ranks,
//!   bit-identical to its `run()`.
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
//! **Panics.** A panic in a chain's user code (the model's methods, an observer) on its own
//! thread is caught at the chain's boundary, as in one process: it becomes [`Error::Panic`] in
//! that chain, and every rank returns the error naming the rank, the chain and the iteration
//! (once the ranks exchange their outputs at the end of the run). Any other panic cannot be
//! exchanged like an error (the panicking rank leaves the collective sequence), so
//! [`Cluster::init`] installs a panic hook: a panic anywhere else — in a sharded run, whose
//! steps are collective, or on a thread the model spawned itself — prints
//! `sgmcmc::distributed: rank r of R panicked …` with the panic's own message, then calls
//! `MPI_Abort` (exit code [`PANIC_EXIT_CODE`]), which ends every rank of the job at once
//! (`scripts/test-mpi` checks both, on 2 and 4 ranks). Should the hook be replaced after
//! `init`, dropping the [`Cluster`] while unwinding aborts the job too.
//!
#![doc = include_str!("../../docs/guide/cluster.md")]

#[cfg(doc)]
use crate::coupled::richardson::RichardsonRomberg;
#[cfg(doc)]
use crate::error::Error;
#[cfg(doc)]
use crate::models::model::Model;
#[cfg(doc)]
use crate::run::runner::Runner;
#[cfg(doc)]
use crate::samplers::Sampler;

/// The `mpi` crate (rsmpi) this module is built on.
pub use mpi;

mod cluster;
mod mf_ranks;
mod runs;
mod sharded;

pub use cluster::{Cluster, PANIC_EXIT_CODE};
pub use mf_ranks::run_mf_mpi;
#[cfg(feature = "zarr")]
pub use runs::write_zarr_mpi;
pub use sharded::{Sharded, run_sharded};
