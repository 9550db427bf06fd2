//! Block-partitioned Bayesian matrix factorisation sampled the DSGLD way (Ahn et al. 2015), with
//! SGLD, pSGLD or HAMCMC as the update: the distributed experiment of the HAMCMC paper (§4.3).
//!
//! The model is the one of [`Pmf`](crate::Pmf) (Salakhutdinov & Mnih 2008 with fixed variances):
//!
//! `W_{ik} ~ N(0, σ_w²)`, `H_{jk} ~ N(0, σ_h²)`, `X_{ij} | W, H ~ N(m + Σ_k W_{ik} H_{jk}, σ_x²)`
//!
//! on the observed entries (i, j) of an `I × J` matrix (rows i are the first index of
//! [`Ratings`], the "users"; columns j the second, the "items").
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
#![doc = include_str!("../docs/guide/mf.md")]

use crate::error::{Error, Result, check_positive};
use crate::models::PmfTerms;
use crate::models::Ratings;
use crate::numeric::lbfgs::{Admitted, PairRing, PairSpace};
use crate::numeric::linalg::dot;
use crate::numeric::rng::{fill_standard_normal, stream};
use crate::run::placement::Placement;
use crate::samplers::{
    HamcmcSettings, PsgldSettings, SgldSettings, hamcmc_update, psgld_update, rmsprop_update, sgld_update,
};
use ndarray::Array2;
use rand::RngExt;
use std::ops::Range;
use std::time::Instant;

mod partition;
pub use partition::*;
mod settings;
pub use settings::*;
mod fabric;
pub(crate) use fabric::*;
mod worker;
pub(crate) use worker::*;
mod engine;
pub(crate) use engine::*;
mod hamcmc;

/// Checks the settings and that every shard (and test shard) of a run uses the same partition.
fn check_shards(
    model: &MfModel,
    update: &MfUpdate,
    run: &MfRunSettings,
    shards: &[&RowShard],
    tests: &[&RowShard],
) -> Result<()> {
    model.validate()?;
    update.validate()?;
    let Some(first) = shards.first() else { return Err(Error::EmptyData { what: "no row shard" }) };
    for (q, s) in shards.iter().chain(tests).enumerate() {
        if s.partition != first.partition {
            return Err(Error::invalid("shards", q, "every shard (and test shard) must use the same partition"));
        }
    }
    if run.eval_every > 0 && tests.len() != shards.len() {
        return Err(Error::DimensionMismatch {
            what: "test shards (eval_every > 0)",
            expected: shards.len(),
            got: tests.len(),
        });
    }
    Ok(())
}

/// Runs the block-scheduled chain with all B workers in this process: the single-process
/// reference of the distributed run (bit-identical to it for the same B and seed) and a
/// fast DSGLD/pSGLD/HAMCMC sampler for matrix factorisation on one machine.
///
/// `shards[b]` is row block b of the training ratings (see [`RowShard::split`]); `tests` the
/// same for the test ratings (only used when `run.eval_every > 0`).
///
/// Errors: [`Error::InvalidParameter`] for invalid settings or shards not in block order or of
/// different partitions or a row block without training ratings; non-finite gradients or
/// states as [`Error::Rank`] naming the worker (the block b) around
/// [`NonFiniteGradient`](Error::NonFiniteGradient) / [`NonFiniteState`](Error::NonFiniteState)
/// with the iteration.
///
/// ```
/// use sgmcmc::mf::{run_mf, BlockPartition, MfModel, MfRunSettings, MfUpdate, RowShard};
/// use sgmcmc::{Ratings, SgldSettings};
///
/// let ratings = Ratings::synthetic(60, 80, 3, 1_500, 0.5, 1)?;
/// let (train, test) = ratings.split(0.1, 2)?;
/// let part = BlockPartition::even(60, 80, 3)?;
/// let model = MfModel { rank: 3, noise_var: 0.25, prior_var_w: 1.0, prior_var_h: 1.0, offset: train.mean(), init_scale: 0.1 };
/// let run = MfRunSettings { n_iter: 2_000, burn_in: 1_000, eval_every: 10, seed: 7 };
/// let out = run_mf(
///     &RowShard::split(&part, &train)?,
///     &RowShard::split(&part, &test)?,
///     &model,
///     &MfUpdate::Sgld(SgldSettings::constant(1e-3)),
///     &run,
/// )?;
/// // Predicting every rating by the mean has an RMSE of about 1.1 here; the posterior mean, 0.66.
/// assert!(out.final_rmse().unwrap() < 0.8);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn run_mf(
    shards: &[RowShard],
    tests: &[RowShard],
    model: &MfModel,
    update: &MfUpdate,
    run: &MfRunSettings,
) -> Result<MfOutput> {
    let s: Vec<&RowShard> = shards.iter().collect();
    let t: Vec<&RowShard> = if run.eval_every > 0 { tests.iter().collect() } else { Vec::new() };
    check_shards(model, update, run, &s, &t)?;
    let nb = s[0].partition.blocks();
    if s.len() != nb {
        return Err(Error::DimensionMismatch { what: "row shards (one per block)", expected: nb, got: s.len() });
    }
    for (b, sh) in s.iter().chain(&t).enumerate() {
        if sh.block != b % nb {
            return Err(Error::invalid(
                "shards",
                format!("row block {} at position {}", sh.block, b % nb),
                "shard b must be row block b",
            ));
        }
    }
    if let Some(sh) = s.iter().find(|sh| sh.is_empty()) {
        return Err(Error::invalid(
            "shards",
            format!("row block {}", sh.block),
            "every row block needs at least one training rating",
        ));
    }
    let sizes: Vec<usize> = s.iter().flat_map(|sh| sh.block_sizes()).collect();
    let test_total = t.iter().map(|sh| sh.len()).sum();
    let fabric = LocalFabric { blocks: nb, spare: Vec::new() };
    Engine::new(fabric, s, t, model, update, run, &sizes, test_total)?.run()
}

#[cfg(test)]
mod tests;
