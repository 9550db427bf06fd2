//! [`run_mf`]: one process's run of distributed matrix factorisation, after checking that every
//! shard uses the same partition.

use crate::error::{Error, Result};
use crate::mf::engine::Engine;
use crate::mf::fabric::LocalFabric;
use crate::mf::partition::RowShard;
use crate::mf::settings::{MfModel, MfOutput, MfRunSettings, MfUpdate};

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
