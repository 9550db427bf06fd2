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

const TAG_INIT: u64 = 0x3f_1417;
const TAG_NOISE: u64 = 0x3f_2017;
const TAG_SCHEDULE: u64 = 0x3f_5c4e;

/// Contiguous row and column ranges cutting an `I × J` matrix into B × B blocks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockPartition {
    rows: Vec<usize>,
    cols: Vec<usize>,
}

fn even_cuts(n: usize, b: usize) -> Vec<usize> {
    (0..=b).map(|k| k * n / b).collect()
}

impl BlockPartition {
    /// B row ranges and B column ranges of (nearly) equal sizes.
    ///
    /// Errors: [`Error::InvalidParameter`] for B = 0 or B above the number of rows or columns.
    pub fn even(n_rows: usize, n_cols: usize, blocks: usize) -> Result<Self> {
        if blocks == 0 || blocks > n_rows || blocks > n_cols {
            return Err(Error::invalid(
                "blocks",
                format!("{blocks} (a {n_rows} × {n_cols} matrix)"),
                "must be between 1 and the smaller of the numbers of rows and columns",
            ));
        }
        Ok(BlockPartition { rows: even_cuts(n_rows, blocks), cols: even_cuts(n_cols, blocks) })
    }

    /// The number of blocks B per dimension.
    pub fn blocks(&self) -> usize {
        self.rows.len() - 1
    }

    /// The number of rows I.
    pub fn n_rows(&self) -> usize {
        self.rows[self.blocks()]
    }

    /// The number of columns J.
    pub fn n_cols(&self) -> usize {
        self.cols[self.blocks()]
    }

    /// The rows of row block b.
    pub fn row_range(&self, b: usize) -> Range<usize> {
        self.rows[b]..self.rows[b + 1]
    }

    /// The columns of column block c.
    pub fn col_range(&self, c: usize) -> Range<usize> {
        self.cols[c]..self.cols[c + 1]
    }

    fn col_block_of(&self, j: usize) -> usize {
        self.cols.partition_point(|&c| c <= j) - 1
    }
}

/// The ratings of one block, with indices local to its row and column ranges.
#[derive(Debug, Clone, Default, PartialEq)]
struct Block {
    rows: Vec<u32>,
    cols: Vec<u32>,
    values: Vec<f64>,
}

/// The observed ratings of one row block, grouped by column block: what worker b holds.
#[derive(Debug, Clone, PartialEq)]
pub struct RowShard {
    partition: BlockPartition,
    block: usize,
    blocks: Vec<Block>,
}

impl RowShard {
    /// Row block `block` of `ratings` under `partition`: the ratings whose row falls in the
    /// block; the others are ignored, so a worker may pass the whole data set or only its rows.
    ///
    /// Errors: [`Error::InvalidParameter`] for a block out of range or ratings whose index space
    /// is not the partition's.
    pub fn new(partition: &BlockPartition, block: usize, ratings: &Ratings) -> Result<Self> {
        let nb = partition.blocks();
        if block >= nb {
            return Err(Error::invalid("block", format!("{block} of {nb}"), "must be below the number of blocks"));
        }
        if ratings.n_users() != partition.n_rows() || ratings.n_items() != partition.n_cols() {
            return Err(Error::invalid(
                "ratings",
                format!(
                    "{} × {} (partition: {} × {})",
                    ratings.n_users(),
                    ratings.n_items(),
                    partition.n_rows(),
                    partition.n_cols()
                ),
                "the ratings' matrix must be the partition's",
            ));
        }
        let rows = partition.row_range(block);
        let mut blocks = vec![Block::default(); nb];
        for k in 0..ratings.len() {
            let Some((i, j, x)) = ratings.get(k) else { break };
            if rows.contains(&i) {
                let c = partition.col_block_of(j);
                let blk = &mut blocks[c];
                blk.rows.push((i - rows.start) as u32);
                blk.cols.push((j - partition.cols[c]) as u32);
                blk.values.push(x);
            }
        }
        Ok(RowShard { partition: partition.clone(), block, blocks })
    }

    /// Every row block of `ratings`, in block order (for [`run_mf`]).
    pub fn split(partition: &BlockPartition, ratings: &Ratings) -> Result<Vec<RowShard>> {
        (0..partition.blocks()).map(|b| RowShard::new(partition, b, ratings)).collect()
    }

    /// The row block index b.
    pub fn block(&self) -> usize {
        self.block
    }

    /// The partition.
    pub fn partition(&self) -> &BlockPartition {
        &self.partition
    }

    /// The number of ratings held.
    pub fn len(&self) -> usize {
        self.blocks.iter().map(|b| b.values.len()).sum()
    }

    /// Whether no rating is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of ratings in block (b, c) for each column block c.
    pub fn block_sizes(&self) -> Vec<usize> {
        self.blocks.iter().map(|b| b.values.len()).collect()
    }
}

/// The model of [`mf`](self): rank K, variances and the offset m.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MfModel {
    /// The rank K ≥ 1.
    pub rank: usize,
    /// Noise variance σ_x².
    pub noise_var: f64,
    /// Prior variance σ_w² of W.
    pub prior_var_w: f64,
    /// Prior variance σ_h² of H.
    pub prior_var_h: f64,
    /// The offset m added to every prediction (e.g. the training mean; every worker must use the
    /// same value).
    pub offset: f64,
    /// The starting point: every entry of W and H drawn from `N(0, init_scale²)` (θ = 0 is a
    /// saddle point).
    pub init_scale: f64,
}

impl MfModel {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.terms().map(|_| ())
    }

    /// The model of [`Pmf`](crate::Pmf) `pmf` (its rank, variances and offset, the training
    /// mean), started from `N(0, init_scale²)`: the block sampler then targets `pmf`'s
    /// posterior, with the same gradient terms.
    pub fn from_pmf(pmf: &crate::models::Pmf, init_scale: f64) -> Self {
        let t = pmf.terms();
        MfModel {
            rank: t.k,
            noise_var: t.vars[0],
            prior_var_w: t.vars[1],
            prior_var_h: t.vars[2],
            offset: t.offset,
            init_scale,
        }
    }

    /// Pmf's terms of these constants (after checking every field).
    fn terms(&self) -> Result<PmfTerms> {
        let terms = PmfTerms::new(self.rank, self.noise_var, self.prior_var_w, self.prior_var_h, self.offset)?;
        check_positive("init_scale", self.init_scale)?;
        if !self.offset.is_finite() {
            return Err(Error::invalid("offset", self.offset, "must be finite"));
        }
        Ok(terms)
    }
}

/// The update of a block-scheduled chain.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum MfUpdate {
    /// SGLD: DSGLD.
    Sgld(SgldSettings),
    /// pSGLD (RMSprop preconditioner), as [`Psgld`](crate::Psgld).
    Psgld(PsgldSettings),
    /// HAMCMC, as [`Hamcmc`](crate::Hamcmc) (the paper's distributed runs use M = 2).
    Hamcmc(HamcmcSettings),
}

impl MfUpdate {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        match self {
            MfUpdate::Sgld(s) => s.validate(),
            MfUpdate::Psgld(s) => s.validate(),
            MfUpdate::Hamcmc(s) => s.validate(),
        }
    }

    /// A short name: `"DSGLD"`, `"pSGLD"` or `"HAMCMC"`.
    pub fn name(&self) -> &'static str {
        match self {
            MfUpdate::Sgld(_) => "DSGLD",
            MfUpdate::Psgld(_) => "pSGLD",
            MfUpdate::Hamcmc(_) => "HAMCMC",
        }
    }
}

/// Length and evaluation of a block-scheduled run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MfRunSettings {
    /// Iterations (after HAMCMC's warm-up).
    pub n_iter: u64,
    /// Iterations before the predictive mean starts averaging.
    pub burn_in: u64,
    /// Evaluate the test RMSE every this many iterations (and at the last one); the predictive
    /// mean averages the samples at these iterations after burn-in. 0: never (no test set needed).
    pub eval_every: u64,
    /// The master seed.
    pub seed: u64,
}

impl Default for MfRunSettings {
    fn default() -> Self {
        MfRunSettings { n_iter: 1_000, burn_in: 100, eval_every: 10, seed: crate::numeric::rng::DEFAULT_SEED }
    }
}

/// One evaluation of the test RMSE.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MfTracePoint {
    /// The iteration.
    pub iteration: u64,
    /// Sampling wall time so far on this process, in seconds (evaluations excluded).
    pub seconds: f64,
    /// RMSE of the current sample's predictions.
    pub rmse_sample: f64,
    /// RMSE of the predictive mean (the average of the predictions of the evaluated samples after
    /// burn-in), once there is one.
    pub rmse_mean: Option<f64>,
}

/// The result of a block-scheduled run (the same on every worker).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct MfOutput {
    /// The last W (I × K).
    pub w: Array2<f64>,
    /// The last H (J × K).
    pub h: Array2<f64>,
    /// The test RMSE at every evaluation.
    pub trace: Vec<MfTracePoint>,
    /// How often each diagonal was picked.
    pub diagonal_counts: Vec<u64>,
    /// HAMCMC pairs not used because `sᵀy ≤ 0` (0 for the other updates).
    pub skipped_pairs: u64,
    /// Sampling wall time on this process, in seconds (evaluations excluded).
    pub seconds: f64,
}

impl MfOutput {
    /// The last RMSE of the predictive mean (or of the sample, if no mean was formed).
    pub fn final_rmse(&self) -> Option<f64> {
        self.trace.last().map(|p| p.rmse_mean.unwrap_or(p.rmse_sample))
    }
}

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
    blocks: usize,
    spare: Vec<Vec<f64>>,
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

/// Status codes a worker reports at the end of each iteration.
const OK: f64 = 0.0;
const BAD_GRADIENT: f64 = 1.0;
const BAD_STATE: f64 = 2.0;

fn all_finite(v: &[f64]) -> bool {
    v.iter().all(|x| x.is_finite())
}

/// One worker: its W rows and the H block it holds, each quantity one vector `[W_b | H_c]`.
struct Worker {
    b: usize,
    /// Length of the W section.
    lw: usize,
    /// The H part held (its column block).
    c: usize,
    x: Vec<f64>,
    /// pSGLD's RMSprop average.
    v: Vec<f64>,
    /// HAMCMC: past samples (warm-up path, then the ring θ_{t−M} … θ_{t−1}), pairs by slot.
    hist: Vec<Vec<f64>>,
    ps: Vec<Vec<f64>>,
    py: Vec<Vec<f64>>,
    pbs: Vec<Vec<f64>>,
    // Scratch (not moved).
    grad: Vec<f64>,
    g_old: Vec<f64>,
    step: Vec<f64>,
    noise: Vec<f64>,
    sz: Vec<f64>,
    tmp: Vec<f64>,
    status: f64,
}

impl Worker {
    fn len(&self) -> usize {
        self.x.len()
    }

    /// The vectors whose H sections move with the H block, in a fixed order.
    fn moving(&mut self) -> impl Iterator<Item = &mut Vec<f64>> {
        std::iter::once(&mut self.x)
            .chain(std::iter::once(&mut self.v).filter(|v| !v.is_empty()))
            .chain(self.hist.iter_mut())
            .chain(self.ps.iter_mut())
            .chain(self.py.iter_mut())
            .chain(self.pbs.iter_mut())
    }

    fn n_moving(&self) -> usize {
        1 + usize::from(!self.v.is_empty()) + self.hist.len() + self.ps.len() + self.py.len() + self.pbs.len()
    }

    /// Noise of iteration t: the W section from block b's stream, the H section from part c's.
    fn draw_noise(&mut self, seed: u64, nb: usize, t: u64) {
        let lw = self.lw;
        fill_standard_normal(&mut stream(seed, &[TAG_NOISE, self.b as u64, t]), &mut self.noise[..lw]);
        fill_standard_normal(&mut stream(seed, &[TAG_NOISE, (nb + self.c) as u64, t]), &mut self.noise[lw..]);
    }
}

/// `out = ∇Ũ(θ)` on block (b, c) of the diagonal (the W rows of block b, the first `lw`
/// entries, then the H rows of block c), the data terms scaled by `scale = N / |Ω|`: [`Pmf`]'s
/// prior and rating terms ([`PmfTerms`]).
///
/// [`Pmf`]: crate::Pmf
fn block_gradient(cs: &PmfTerms, blk: &Block, lw: usize, theta: &[f64], scale: f64, out: &mut [f64]) {
    cs.grad_prior(lw, theta, out);
    let k = cs.k;
    for ((&r, &j), &x) in blk.rows.iter().zip(&blk.cols).zip(&blk.values) {
        cs.add_rating(theta, r as usize * k, lw + j as usize * k, x, scale, out);
    }
}

/// HAMCMC's replicated state (the same on every worker): the L-BFGS pair ring (the crate's
/// one recursion, [`PairRing`], over the workers' split vectors), each pair's iteration, and
/// the history pointer. Empty (no slot) until HAMCMC's initialisation.
#[derive(Default)]
struct HamRing {
    pairs: PairRing,
    iter: std::collections::VecDeque<u64>,
    oldest: usize,
}

impl HamRing {
    fn pop_oldest(&mut self) {
        if self.pairs.len() > 0 {
            self.pairs.pop_oldest();
            self.iter.pop_front();
        }
    }
}

/// Names of the workers' vectors for the L-BFGS recursion (each a slice on every worker).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Wv {
    S(usize),
    Y(usize),
    Bs(usize),
    Step,
    GOld,
    Sz,
    Noise,
}

impl Worker {
    fn get(&self, v: Wv) -> &[f64] {
        match v {
            Wv::S(k) => &self.ps[k],
            Wv::Y(k) => &self.py[k],
            Wv::Bs(k) => &self.pbs[k],
            Wv::Step => &self.step,
            Wv::GOld => &self.g_old,
            Wv::Sz => &self.sz,
            Wv::Noise => &self.noise,
        }
    }

    fn get_mut(&mut self, v: Wv) -> &mut Vec<f64> {
        match v {
            Wv::S(k) => &mut self.ps[k],
            Wv::Y(k) => &mut self.py[k],
            Wv::Bs(k) => &mut self.pbs[k],
            Wv::Step => &mut self.step,
            Wv::GOld => &mut self.g_old,
            Wv::Sz => &mut self.sz,
            Wv::Noise => &mut self.noise,
        }
    }

    /// Runs `f` on `dst` (mutable) and the worker (shared; `dst` reads as empty there).
    fn with_dst(&mut self, dst: Wv, f: impl FnOnce(&mut [f64], &Self)) {
        let mut d = std::mem::take(self.get_mut(dst));
        f(&mut d, self);
        *self.get_mut(dst) = d;
    }
}

/// The workers' vectors as one L-BFGS space: elementwise operations on every local worker's
/// slice, dot products summed over all workers (in worker order) by the fabric.
impl<F: Fabric> PairSpace for Engine<'_, F> {
    type V = Wv;

    fn s(&self, slot: usize) -> Wv {
        Wv::S(slot)
    }

    fn y(&self, slot: usize) -> Wv {
        Wv::Y(slot)
    }

    fn bs(&self, slot: usize) -> Wv {
        Wv::Bs(slot)
    }

    fn dots<const N: usize>(&mut self, pairs: [(Wv, Wv); N]) -> Result<[f64; N]> {
        self.all_sum(|w, p: &mut [f64; N]| {
            for (o, (a, b)) in p.iter_mut().zip(pairs) {
                *o = dot(w.get(a), w.get(b));
            }
        })
    }

    fn set_scaled(&mut self, dst: Wv, a: f64, src: Wv) {
        debug_assert!(dst != src);
        for w in &mut self.workers {
            w.with_dst(dst, |d, w| {
                for (o, x) in d.iter_mut().zip(w.get(src)) {
                    *o = a * x;
                }
            });
        }
    }

    fn rescale(&mut self, dst: Wv, a: f64) {
        for w in &mut self.workers {
            w.get_mut(dst).iter_mut().for_each(|o| *o *= a);
        }
    }

    fn axpy(&mut self, dst: Wv, a: f64, x: Wv) {
        debug_assert!(dst != x);
        for w in &mut self.workers {
            w.with_dst(dst, |d, w| {
                for (o, v) in d.iter_mut().zip(w.get(x)) {
                    *o += a * v;
                }
            });
        }
    }

    fn axpbz(&mut self, dst: Wv, a: f64, x: Wv, b: f64, z: Wv) {
        debug_assert!(dst != x && dst != z);
        for w in &mut self.workers {
            w.with_dst(dst, |d, w| {
                for ((o, xv), zv) in d.iter_mut().zip(w.get(x)).zip(w.get(z)) {
                    *o += a * xv - b * zv;
                }
            });
        }
    }
}

/// One chain of the block-scheduled sampler over a fabric.
pub(crate) struct Engine<'a, F: Fabric> {
    fabric: F,
    shards: Vec<&'a RowShard>,
    tests: Vec<&'a RowShard>,
    partition: BlockPartition,
    cs: PmfTerms,
    update: MfUpdate,
    run: MfRunSettings,
    workers: Vec<Worker>,
    /// Ratings per diagonal and in all.
    diag_sizes: Vec<usize>,
    n_train: usize,
    n_test: usize,
    sched: crate::numeric::rng::ChainRng,
    diag: usize,
    counts: Vec<u64>,
    ring: HamRing,
    // Exchange buffers.
    red_local: Vec<f64>,
    red_all: Vec<f64>,
    sections: Vec<Vec<f64>>,
    sec_lens: Vec<usize>,
    // Test predictions: running sums per local worker, per column block.
    pred_sum: Vec<Vec<Vec<f64>>>,
    n_avg: u64,
    h_all: Vec<f64>,
    h_stride: usize,
}

impl<'a, F: Fabric> Engine<'a, F> {
    /// Sets up the local workers. `shards`/`tests` are this process's workers' (in order);
    /// `sizes` is every worker's block sizes (B × B, row block major); `test_total` the number
    /// of test ratings of all workers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fabric: F,
        shards: Vec<&'a RowShard>,
        tests: Vec<&'a RowShard>,
        model: &MfModel,
        update: &MfUpdate,
        run: &MfRunSettings,
        sizes: &[usize],
        test_total: usize,
    ) -> Result<Self> {
        let partition = shards[0].partition.clone();
        let nb = partition.blocks();
        let diag_sizes: Vec<usize> = (0..nb).map(|s| (0..nb).map(|b| sizes[b * nb + (b + s) % nb]).sum()).collect();
        let n_train: usize = diag_sizes.iter().sum();
        let k = model.rank;
        let cs = model.terms()?;
        let local = fabric.local();
        let max_h = (0..nb).map(|c| partition.col_range(c).len()).max().unwrap_or(0) * k;
        let mut workers = Vec::with_capacity(local.len());
        for b in local.clone() {
            let lw = partition.row_range(b).len() * k;
            let lh = partition.col_range(b).len() * k;
            let cap = lw + max_h;
            let mut x = Vec::with_capacity(cap);
            x.resize(lw + lh, 0.0);
            fill_standard_normal(&mut stream(run.seed, &[TAG_INIT, b as u64]), &mut x[..lw]);
            fill_standard_normal(&mut stream(run.seed, &[TAG_INIT, (nb + b) as u64]), &mut x[lw..]);
            x.iter_mut().for_each(|v| *v *= model.init_scale);
            let scratch = || {
                let mut v = Vec::with_capacity(cap);
                v.resize(lw + lh, 0.0);
                v
            };
            let v = if matches!(update, MfUpdate::Psgld(_)) { scratch() } else { Vec::new() };
            workers.push(Worker {
                b,
                lw,
                c: b,
                x,
                v,
                hist: Vec::new(),
                ps: Vec::new(),
                py: Vec::new(),
                pbs: Vec::new(),
                grad: scratch(),
                g_old: scratch(),
                step: scratch(),
                noise: scratch(),
                sz: scratch(),
                tmp: scratch(),
                status: OK,
            });
        }
        let pred_sum = tests.iter().map(|t| t.blocks.iter().map(|blk| vec![0.0; blk.values.len()]).collect()).collect();
        let h_stride = max_h + 1;
        Ok(Engine {
            fabric,
            shards,
            tests,
            cs,
            update: *update,
            run: *run,
            workers,
            diag_sizes,
            n_train,
            n_test: test_total,
            sched: stream(run.seed, &[TAG_SCHEDULE]),
            diag: 0,
            counts: vec![0; nb],
            ring: HamRing::default(),
            red_local: Vec::new(),
            red_all: Vec::new(),
            sections: vec![Vec::with_capacity(0); local.len()],
            sec_lens: (0..nb).map(|c| partition.col_range(c).len() * k).collect(),
            pred_sum,
            n_avg: 0,
            h_all: vec![0.0; nb * h_stride],
            h_stride,
            partition,
        })
    }

    fn nb(&self) -> usize {
        self.partition.blocks()
    }

    /// Picks the next diagonal (∝ its size) and moves the H blocks to it.
    fn next_diagonal(&mut self) -> Result<()> {
        let u = self.sched.random::<f64>() * self.n_train as f64;
        let mut acc = 0.0;
        let mut s = self.nb() - 1;
        for (q, &n) in self.diag_sizes.iter().enumerate() {
            acc += n as f64;
            if u < acc && n > 0 {
                s = q;
                break;
            }
        }
        while self.diag_sizes[s] == 0 {
            s -= 1; // u rounded up to the total: the last non-empty diagonal
        }
        self.counts[s] += 1;
        if s != self.diag {
            self.move_h(s)?;
        }
        Ok(())
    }

    fn move_h(&mut self, to: usize) -> Result<()> {
        let nb = self.nb();
        for (w, sec) in self.workers.iter_mut().zip(self.sections.iter_mut()) {
            let lw = w.lw;
            sec.clear();
            for v in w.moving() {
                sec.extend_from_slice(&v[lw..]);
            }
        }
        self.fabric.shift(self.diag, to, &mut self.sections, &self.sec_lens)?;
        for (w, sec) in self.workers.iter_mut().zip(&self.sections) {
            let c = (w.b + to) % nb;
            let lh = self.sec_lens[c];
            let lw = w.lw;
            let n = w.n_moving();
            if sec.len() != n * lh {
                return Err(Error::DimensionMismatch { what: "received H block", expected: n * lh, got: sec.len() });
            }
            for (q, v) in w.moving().enumerate() {
                v.truncate(lw);
                v.extend_from_slice(&sec[q * lh..(q + 1) * lh]);
            }
            for v in [&mut w.grad, &mut w.g_old, &mut w.step, &mut w.noise, &mut w.sz, &mut w.tmp] {
                v.resize(lw + lh, 0.0);
            }
            w.c = c;
        }
        self.diag = to;
        Ok(())
    }

    fn scale(&self) -> f64 {
        self.n_train as f64 / self.diag_sizes[self.diag] as f64
    }

    /// Sums `n` per-worker partials (filled by `f` for each local worker) over all workers, in
    /// worker order; returns the first `n` entries of `red_all` summed (in `out`).
    fn all_sum<const N: usize>(&mut self, f: impl Fn(&Worker, &mut [f64; N])) -> Result<[f64; N]> {
        self.red_local.clear();
        for w in &self.workers {
            let mut p = [0.0; N];
            f(w, &mut p);
            self.red_local.extend_from_slice(&p);
        }
        self.red_all.resize(N * self.nb(), 0.0);
        self.fabric.gather(&self.red_local, &mut self.red_all)?;
        let mut out = [0.0; N];
        for chunk in self.red_all.chunks_exact(N) {
            for (o, v) in out.iter_mut().zip(chunk) {
                *o += v;
            }
        }
        Ok(out)
    }

    /// Exchanges the workers' status; the first failing worker's error on every worker.
    fn check_status(&mut self, iteration: u64) -> Result<()> {
        self.red_local.clear();
        self.red_local.extend(self.workers.iter().map(|w| w.status));
        self.red_all.resize(self.nb(), 0.0);
        self.fabric.gather(&self.red_local, &mut self.red_all)?;
        let Some((rank, &code)) = self.red_all.iter().enumerate().find(|(_, c)| **c != OK) else {
            return Ok(());
        };
        let source = if code == BAD_GRADIENT {
            Error::NonFiniteGradient { iteration }
        } else {
            Error::NonFiniteState { iteration }
        };
        Err(if self.fabric.local().contains(&rank) {
            Error::Rank { rank, source: Box::new(source) }
        } else {
            Error::RankFailure { rank, chain: None, iteration: Some(iteration), message: source.to_string() }
        })
    }

    /// Gradients at `x` (or at `hist[h]`) into `grad` (or `g_old`) for every local worker.
    fn gradients(&mut self, at_hist: Option<usize>, into_old: bool) {
        let scale = self.scale();
        for (w, sh) in self.workers.iter_mut().zip(&self.shards) {
            let blk = &sh.blocks[w.c];
            let theta = match at_hist {
                Some(h) => &w.hist[h],
                None => &w.x,
            };
            let out = if into_old { &mut w.g_old } else { &mut w.grad };
            block_gradient(&self.cs, blk, w.lw, theta, scale, out);
            if w.status == OK && !all_finite(out) {
                w.status = BAD_GRADIENT;
            }
        }
    }

    fn mark_state(&mut self) {
        for w in &mut self.workers {
            if w.status == OK && !all_finite(&w.x) {
                w.status = BAD_STATE;
            }
        }
    }

    fn draw_noise(&mut self, t: u64) {
        let (seed, nb) = (self.run.seed, self.nb());
        for w in &mut self.workers {
            w.draw_noise(seed, nb, t);
        }
    }

    /// One SGLD step of size h from `x` (noise index t).
    fn sgld_step(&mut self, h: f64, t: u64) -> Result<()> {
        self.next_diagonal()?;
        self.gradients(None, false);
        self.draw_noise(t);
        for w in &mut self.workers {
            sgld_update(&mut w.x, &w.grad, &w.noise, h);
        }
        self.mark_state();
        self.check_status(t)
    }

    fn psgld_step(&mut self, p: &PsgldSettings, t: u64) -> Result<()> {
        self.next_diagonal()?;
        self.gradients(None, false);
        self.draw_noise(t);
        let h = p.step_size.at(t);
        let n = self.n_train as f64;
        for w in &mut self.workers {
            rmsprop_update(&mut w.v, &w.grad, n, p.decay, t == 1);
            psgld_update(&mut w.x, &w.grad, &w.noise, &w.v, h, p.damping);
        }
        self.mark_state();
        self.check_status(t)
    }

    // ---- HAMCMC ----

    fn hamcmc_init(&mut self, hs: &HamcmcSettings) -> Result<()> {
        let m = hs.memory;
        let cap = m - 1;
        self.ring = HamRing { pairs: PairRing::new(cap), ..HamRing::default() };
        for w in &mut self.workers {
            let n = w.len();
            w.hist = vec![w.x.clone()];
            w.ps = vec![vec![0.0; n]; cap];
            w.py = vec![vec![0.0; n]; cap];
            w.pbs = vec![vec![0.0; n]; cap];
        }
        // 2M SGLD warm-up steps, noise indices 1 … 2M; the path θ₀ … θ_{2M} is kept.
        for t in 1..=(2 * m) as u64 {
            self.sgld_step(hs.warmup_step_size, t)?;
            for w in &mut self.workers {
                let x = w.x.clone();
                w.hist.push(x);
            }
        }
        // Pairs τ = M+2 … 2M, each on its own diagonal.
        for tau in (m + 2)..=(2 * m) {
            self.next_diagonal()?;
            self.gradients(Some(tau), false);
            self.gradients(Some(tau - m), true);
            self.push_pair(hs.trust_region, tau as u64, |w| (&w.hist[tau], &w.hist[tau - m]))?;
        }
        // History θ_{M+1} … θ_{2M}.
        for w in &mut self.workers {
            w.hist.drain(..=m);
        }
        self.ring.oldest = 0;
        Ok(())
    }

    /// s = new − old, y = grad − g_old + λ s; the pair is kept if sᵀy > 0.
    fn push_pair(
        &mut self,
        lambda: f64,
        tau: u64,
        new_old: impl for<'w> Fn(&'w Worker) -> (&'w Vec<f64>, &'w Vec<f64>),
    ) -> Result<()> {
        for w in &mut self.workers {
            let (mut s, mut y) = (std::mem::take(&mut w.step), std::mem::take(&mut w.tmp));
            {
                let (new, old) = new_old(w);
                for ((((sv, yv), n), o), (g, go)) in
                    s.iter_mut().zip(y.iter_mut()).zip(new.iter()).zip(old.iter()).zip(w.grad.iter().zip(&w.g_old))
                {
                    *sv = n - o;
                    *yv = g - go + lambda * *sv;
                }
            }
            if w.status == OK && !all_finite(&y) {
                w.status = BAD_GRADIENT;
            }
            w.step = s;
            w.tmp = y;
        }
        let [sy, bad] = self.all_sum(|w, p: &mut [f64; 2]| {
            p[0] = dot(&w.step, &w.tmp);
            p[1] = w.status;
        })?;
        if bad != 0.0 {
            return self.check_status(tau);
        }
        if let Admitted::Stored { slot: k, dropped_oldest } = self.ring.pairs.admit(sy) {
            if dropped_oldest {
                self.ring.iter.pop_front();
            }
            for w in &mut self.workers {
                w.ps[k].copy_from_slice(&w.step);
                w.py[k].copy_from_slice(&w.tmp);
            }
            self.ring.iter.push_back(tau);
        }
        Ok(())
    }

    /// `step = H g_old` (two-loop recursion) and `sz = S noise` (product form): the crate's one
    /// L-BFGS recursion ([`PairRing`]) on the workers' split vectors.
    fn apply_h_s(&mut self, gamma: f64) -> Result<()> {
        // The ring is taken out (leaving an empty one, no allocation) so that the engine itself
        // can be the space the recursion runs over.
        let mut pairs = std::mem::take(&mut self.ring.pairs);
        let r = pairs
            .apply_h(self, Wv::GOld, Wv::Step, gamma)
            .and_then(|()| pairs.refresh(self, gamma))
            .and_then(|()| pairs.apply_s(self, Wv::Noise, Wv::Sz, gamma));
        self.ring.pairs = pairs;
        r
    }

    fn hamcmc_step(&mut self, hs: &HamcmcSettings, k: u64) -> Result<()> {
        let m = hs.memory as u64;
        let t = k + 2 * m;
        let eps = hs.step_size.at(((k - 1) / m) * m + 1);
        while self.ring.iter.front().is_some_and(|&tau| tau + m < t + 1) {
            self.ring.pop_oldest();
        }
        self.next_diagonal()?;
        self.draw_noise(t);
        let old = self.ring.oldest;
        self.gradients(Some(old), true);
        self.apply_h_s(hs.initial_scale)?;
        for w in &mut self.workers {
            hamcmc_update(&mut w.x, &w.hist[old], &w.step, &w.sz, eps);
        }
        self.mark_state();
        self.gradients(None, false);
        // The pair's reduction carries every worker's status (state and both gradients).
        self.push_pair(hs.trust_region, t, |w| (&w.x, &w.hist[old]))?;
        for w in &mut self.workers {
            let (x, h) = (&w.x, &mut w.hist[old]);
            h.copy_from_slice(x);
        }
        self.ring.oldest = (old + 1) % self.workers.first().map_or(1, |w| w.hist.len());
        Ok(())
    }

    // ---- evaluation and output ----

    /// Test RMSE of the current sample and (after burn-in) of the running predictive mean.
    fn evaluate(&mut self, iteration: u64, seconds: f64) -> Result<MfTracePoint> {
        let (nb, k, stride) = (self.nb(), self.cs.k, self.h_stride);
        // Every worker's H section (padded to a common stride, part index first).
        self.red_local.clear();
        for w in &self.workers {
            self.red_local.push(w.c as f64);
            self.red_local.extend_from_slice(&w.x[w.lw..]);
            self.red_local.resize(self.red_local.len() + stride - 1 - (w.len() - w.lw), 0.0);
        }
        let mut h_all = std::mem::take(&mut self.h_all);
        let gathered = self.fabric.gather(&self.red_local, &mut h_all);
        let averaging = iteration > self.run.burn_in;
        if averaging {
            self.n_avg += 1;
        }
        let mut partial = Vec::with_capacity(2 * self.workers.len());
        if gathered.is_ok() {
            let mut offsets = vec![0usize; nb];
            for q in 0..nb {
                offsets[h_all[q * stride] as usize] = q * stride + 1;
            }
            for ((w, test), sums) in self.workers.iter().zip(&self.tests).zip(self.pred_sum.iter_mut()) {
                let (mut se, mut se_mean) = (0.0, 0.0);
                for (c, (blk, sum)) in test.blocks.iter().zip(sums.iter_mut()).enumerate() {
                    let hc = &h_all[offsets[c]..offsets[c] + self.sec_lens[c]];
                    for (((&r, &j), &x), s) in blk.rows.iter().zip(&blk.cols).zip(&blk.values).zip(sum.iter_mut()) {
                        let (a, h) = (r as usize * k, j as usize * k);
                        let p = self.cs.predict(&w.x[a..a + k], &hc[h..h + k]);
                        se += (p - x) * (p - x);
                        if averaging {
                            *s += p;
                            let pm = *s / self.n_avg as f64;
                            se_mean += (pm - x) * (pm - x);
                        }
                    }
                }
                partial.extend_from_slice(&[se, se_mean]);
            }
        }
        self.h_all = h_all;
        gathered?;
        let mut all = vec![0.0; 2 * nb];
        self.fabric.gather(&partial, &mut all)?;
        let (mut se, mut se_mean) = (0.0, 0.0);
        for ch in all.chunks_exact(2) {
            se += ch[0];
            se_mean += ch[1];
        }
        let n = self.n_test.max(1) as f64;
        Ok(MfTracePoint {
            iteration,
            seconds,
            rmse_sample: (se / n).sqrt(),
            rmse_mean: averaging.then(|| (se_mean / n).sqrt()),
        })
    }

    /// Every worker's section `[lo..hi]` of `x`, assembled into `rows × K` by block.
    fn assemble(&mut self, w_part: bool) -> Result<Array2<f64>> {
        let (nb, k) = (self.nb(), self.cs.k);
        let lens: Vec<usize> =
            (0..nb).map(|q| if w_part { self.partition.row_range(q).len() * k } else { self.sec_lens[q] }).collect();
        let stride = lens.iter().max().copied().unwrap_or(0) + 1;
        let mut local = Vec::with_capacity(stride * self.workers.len());
        for w in &self.workers {
            let (idx, sec) = if w_part { (w.b, &w.x[..w.lw]) } else { (w.c, &w.x[w.lw..]) };
            local.push(idx as f64);
            local.extend_from_slice(sec);
            local.resize(local.len() + stride - 1 - sec.len(), 0.0);
        }
        let mut all = vec![0.0; stride * nb];
        self.fabric.gather(&local, &mut all)?;
        let n = if w_part { self.partition.n_rows() } else { self.partition.n_cols() };
        let mut out = Array2::zeros((n, k));
        let flat = out.as_slice_mut().ok_or(Error::NotStored { what: "contiguous factor matrix" })?;
        for ch in all.chunks_exact(stride) {
            let q = ch[0] as usize;
            let start = if w_part { self.partition.row_range(q).start } else { self.partition.col_range(q).start } * k;
            flat[start..start + lens[q]].copy_from_slice(&ch[1..1 + lens[q]]);
        }
        Ok(out)
    }

    /// Runs the chain.
    pub(crate) fn run(mut self) -> Result<MfOutput> {
        let update = self.update;
        if let MfUpdate::Hamcmc(hs) = &update {
            self.hamcmc_init(hs)?;
        }
        let mut trace = Vec::new();
        let mut seconds = 0.0;
        let every = self.run.eval_every;
        for k in 1..=self.run.n_iter {
            let start = Instant::now();
            match &update {
                MfUpdate::Sgld(s) => self.sgld_step(s.step_size.at(k), k)?,
                MfUpdate::Psgld(p) => self.psgld_step(p, k)?,
                MfUpdate::Hamcmc(hs) => self.hamcmc_step(hs, k)?,
            }
            seconds += start.elapsed().as_secs_f64();
            if every > 0 && (k % every == 0 || k == self.run.n_iter) {
                trace.push(self.evaluate(k, seconds)?);
            }
        }
        let w = self.assemble(true)?;
        let h = self.assemble(false)?;
        Ok(MfOutput { w, h, trace, diagonal_counts: self.counts, skipped_pairs: self.ring.pairs.n_skipped(), seconds })
    }
}

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

/// The former name of [`run_mf`] (renamed so that it pairs with `distributed::run_mf_mpi`,
/// feature `mpi`); same arguments, same chain.
#[deprecated(since = "0.2.0", note = "renamed `run_mf` (pairs with `distributed::run_mf_mpi`)")]
pub fn simulate(
    shards: &[RowShard],
    tests: &[RowShard],
    model: &MfModel,
    update: &MfUpdate,
    run: &MfRunSettings,
) -> Result<MfOutput> {
    run_mf(shards, tests, model, update, run)
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
mod tests {
    use super::*;
    use crate::numeric::lbfgs::Lbfgs;

    /// With one block, MF's block gradient of `MfModel::from_pmf(pmf)` is `pmf`'s gradient of
    /// the potential over every rating (prior plus data, θ laid out as W then H in both).
    #[test]
    fn one_block_gradient_is_pmf_gradient() {
        use crate::models::model::Model;
        let r = Ratings::synthetic(7, 9, 3, 50, 0.5, 4).unwrap();
        let pmf = crate::models::Pmf::new(r.clone(), 5, 0.3, 2.0, 0.5).unwrap();
        let model = MfModel::from_pmf(&pmf, 0.1);
        assert_eq!((model.rank, model.noise_var, model.prior_var_w, model.prior_var_h), (5, 0.3, 2.0, 0.5));
        assert_eq!(model.offset, pmf.offset());
        let part = BlockPartition::even(7, 9, 1).unwrap();
        let shard = RowShard::new(&part, 0, &r).unwrap();
        let theta = pmf.random_start(0.7, 3);
        let mut mf = vec![0.0; theta.len()];
        block_gradient(&model.terms().unwrap(), &shard.blocks[0], 7 * 5, &theta, 1.0, &mut mf);
        let (mut prior, mut data) = (vec![0.0; theta.len()], vec![0.0; theta.len()]);
        pmf.grad_prior(&theta, &mut prior).unwrap();
        let all: Vec<usize> = (0..r.len()).collect();
        pmf.grad_data_sum(&theta, &all, &mut data).unwrap();
        for (j, (m, (p, d))) in mf.iter().zip(prior.iter().zip(&data)).enumerate() {
            let want = p + d;
            assert!((m - want).abs() <= 1e-12 * (1.0 + want.abs()), "coordinate {j}: MF {m} vs Pmf {want}");
        }
    }

    /// The reduced-dot L-BFGS of the workers equals [`Lbfgs`] on the concatenated vectors.
    #[test]
    fn worker_lbfgs_matches_dense_lbfgs() {
        let r = Ratings::synthetic(9, 7, 2, 40, 0.5, 1).unwrap();
        let part = BlockPartition::even(9, 7, 3).unwrap();
        let shards = RowShard::split(&part, &r).unwrap();
        let s: Vec<&RowShard> = shards.iter().collect();
        let sizes: Vec<usize> = s.iter().flat_map(|sh| sh.block_sizes()).collect();
        let model =
            MfModel { rank: 2, noise_var: 1.0, prior_var_w: 1.0, prior_var_h: 1.0, offset: 0.0, init_scale: 1.0 };
        let hs = HamcmcSettings { memory: 4, initial_scale: 0.7, ..Default::default() };
        let run = MfRunSettings { n_iter: 1, burn_in: 0, eval_every: 0, seed: 3 };
        let fabric = LocalFabric { blocks: 3, spare: Vec::new() };
        let mut e = Engine::new(fabric, s, Vec::new(), &model, &MfUpdate::Hamcmc(hs), &run, &sizes, 0).unwrap();
        e.hamcmc_init(&hs).unwrap();
        let d: usize = e.workers.iter().map(Worker::len).sum();
        let mut rng = stream(5, &[1]);
        let mut lb = Lbfgs::new(d, 3, 0.7).unwrap();
        // Three pairs (s, y = A s with A = diag(1 + i/d)) pushed to both.
        for tau in 0..3u64 {
            let mut sv = vec![0.0; d];
            fill_standard_normal(&mut rng, &mut sv);
            let yv: Vec<f64> = sv.iter().enumerate().map(|(i, v)| v * (1.0 + i as f64 / d as f64)).collect();
            lb.push(&sv, &yv).unwrap();
            let mut off = 0;
            for w in &mut e.workers {
                let n = w.len();
                w.x.copy_from_slice(&sv[off..off + n]);
                w.hist[0].fill(0.0);
                w.grad.copy_from_slice(&yv[off..off + n]);
                w.g_old.fill(0.0);
                off += n;
            }
            e.push_pair(0.0, 100 + tau, |w| (&w.x, &w.hist[0])).unwrap();
        }
        assert_eq!(e.ring.pairs.len(), 3);
        let (mut g, mut z) = (vec![0.0; d], vec![0.0; d]);
        fill_standard_normal(&mut rng, &mut g);
        fill_standard_normal(&mut rng, &mut z);
        let mut off = 0;
        for w in &mut e.workers {
            let n = w.len();
            w.g_old.copy_from_slice(&g[off..off + n]);
            w.noise.copy_from_slice(&z[off..off + n]);
            off += n;
        }
        e.apply_h_s(0.7).unwrap();
        let (mut hg, mut sz) = (vec![0.0; d], vec![0.0; d]);
        lb.apply_h(&g, &mut hg).unwrap();
        lb.apply_s(&z, &mut sz).unwrap();
        let step: Vec<f64> = e.workers.iter().flat_map(|w| w.step.clone()).collect();
        let szw: Vec<f64> = e.workers.iter().flat_map(|w| w.sz.clone()).collect();
        let err = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        assert!(err(&step, &hg) < 1e-12, "H g: {}", err(&step, &hg));
        assert!(err(&szw, &sz) < 1e-12, "S z: {}", err(&szw, &sz));
    }
}
