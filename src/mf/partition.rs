//! The data's layout: the B × B block partition of the rating matrix and each rank's row shard.

use crate::error::{Error, Result};
use crate::models::Ratings;
use std::ops::Range;

pub(super) const TAG_INIT: u64 = 0x3f_1417;
pub(super) const TAG_NOISE: u64 = 0x3f_2017;
pub(super) const TAG_SCHEDULE: u64 = 0x3f_5c4e;

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
pub(super) struct Block {
    pub(super) rows: Vec<u32>,
    pub(super) cols: Vec<u32>,
    pub(super) values: Vec<f64>,
}

/// The observed ratings of one row block, grouped by column block: what worker b holds.
#[derive(Debug, Clone, PartialEq)]
pub struct RowShard {
    pub(super) partition: BlockPartition,
    pub(super) block: usize,
    pub(super) blocks: Vec<Block>,
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

    /// Every row block of `ratings`, in block order (for [`run_mf`](crate::mf::run_mf)).
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
