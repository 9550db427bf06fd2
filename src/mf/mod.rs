//! Block-partitioned Bayesian matrix factorisation sampled the DSGLD way (Ahn et al. 2015), with
//! SGLD, pSGLD or HAMCMC as the update: the distributed experiment of the HAMCMC paper (§4.3).
//!
//! The model is the one of [`Pmf`](crate::Pmf) (Salakhutdinov & Mnih 2008 with fixed variances):
//!
//! `W_{ik} ~ N(0, σ_w²)`, `H_{jk} ~ N(0, σ_h²)`, `X_{ij} | W, H ~ N(m + Σ_k W_{ik} H_{jk}, σ_x²)`
//!
//! on the observed entries (i, j) of an `I × J` matrix (rows i are the first index of
//! [`Ratings`](crate::Ratings), the "users"; columns j the second, the "items").
//!
//! **Blocks and schedule.** A [`BlockPartition`] cuts the rows and the columns into B contiguous
//! ranges each, so the matrix into B × B blocks. Diagonal s (s = 0 … B − 1) is the set of blocks
//! `(b, (b + s) mod B)`: B disjoint blocks that together touch every row and every column once.
//! Iteration t picks one diagonal Ω_t with probability `|Ω_s| / N` (N training ratings) from a
//! stream shared by all workers and uses the unbiased gradient
//!
//! `∇Ũ(θ) = ∇U₀(θ) + (N / |Ω_t|) Σ_{(i,j) ∈ Ω_t} ∇U_{ij}(θ)`,
//!
//! so every parameter is updated at every iteration. Worker b holds row block b of the data and
//! of W for the whole run, and the column block `(b + s) mod B` of H during an iteration on
//! diagonal s; between iterations the H blocks (with the sampler's per-coordinate state that goes
//! with them: pSGLD's average, HAMCMC's past samples and secant pairs) move from worker
//! `b + δ` to worker b, `δ = s_{t+1} − s_t mod B`. Nothing else moves, except for HAMCMC, whose
//! L-BFGS dot products (`sᵀy`, the two-loop recursion's, the product form's) are sums of one
//! partial dot product per worker (a reduce of a few numbers, as the paper describes).
//!
//! **Same chain, one process or many.** [`run_mf`] runs the B workers in one process;
//! `distributed::run_mf_mpi` (feature `mpi`) runs worker b on MPI rank b. Every worker draws its
//! noise from streams of (seed, block, iteration), the diagonal from the shared stream, and every
//! reduced quantity is summed over the workers in worker order, so the two give **bit-identical**
//! chains for the same B and seed (tested under `mpirun -np 2` and `-np 4`).
//!
//! **Updates** ([`MfUpdate`]), on the whole θ = (W, H) with the gradient above:
//! - SGLD (DSGLD): `θ ← θ − h ∇Ũ + √(2h) z`;
//! - pSGLD: `V ← βV + (1 − β)(∇Ũ/N)²`, `G = 1/(λ + √V)`, `θ ← θ − hG∇Ũ + √(2hG) z`;
//! - HAMCMC: the update of [`Hamcmc`](crate::Hamcmc) (steps from θ_{t−M}, L-BFGS with the M − 1
//!   newest pairs, both gradients of a pair on the same diagonal; 2M SGLD warm-up steps first).
//!
//! References: S. Ahn, A. Korattikara, N. Liu, S. Rajan, M. Welling, *Large-scale distributed
//! Bayesian matrix factorization using stochastic gradient MCMC*, KDD 2015; U. Şimşekli,
//! R. Badeau, A. T. Cemgil, G. Richard, *Stochastic quasi-Newton Langevin Monte Carlo*, ICML 2016,
//! §4.3.
//!
#![doc = include_str!("../../docs/guide/mf.md")]

mod partition;
pub use partition::{BlockPartition, RowShard};
mod settings;
pub use settings::{MfModel, MfOutput, MfRunSettings, MfTracePoint, MfUpdate};
mod fabric;
#[cfg(feature = "mpi")]
pub(crate) use fabric::Fabric;
mod engine;
mod worker;
#[cfg(feature = "mpi")]
pub(crate) use engine::Engine;
mod hamcmc;

mod run;
pub use run::run_mf;

#[cfg(test)]
mod tests;
