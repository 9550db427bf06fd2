//! A model on a subset of its data, scaled to the whole (`U₀ + (N/m) Σ_{i∈S} Uᵢ`): the tuner's
//! warm start for the mode search on large data sets.

use crate::error::Result;
use crate::models::model::Model;

/// `model` with its data sum taken over the data `rows` (m of the N) and scaled by `N/m`; its
/// data are indexed `0..m`.
pub(crate) struct Subset<'a, M: ?Sized> {
    model: &'a M,
    rows: Vec<usize>,
    scale: f64,
}

impl<'a, M: Model + ?Sized> Subset<'a, M> {
    /// The subset `rows` (each `< N`, not empty) of `model`'s data.
    pub(crate) fn new(model: &'a M, rows: Vec<usize>) -> Self {
        let scale = model.n_data() as f64 / rows.len().max(1) as f64;
        Subset { model, rows, scale }
    }

    /// The model's indices of the subset's data `idx` (the rows themselves for all of them, in
    /// order, as a full pass asks for).
    fn mapped<'b>(&'b self, idx: &'b [usize], buf: &'b mut Vec<usize>) -> &'b [usize] {
        let m = self.rows.len();
        if idx.len() == m
            && idx.first() == Some(&0)
            && idx.last() == Some(&(m - 1))
            && idx.windows(2).all(|w| w[1] == w[0] + 1)
        {
            return &self.rows;
        }
        buf.clear();
        buf.extend(idx.iter().map(|&i| self.rows[i]));
        buf
    }
}

impl<M: Model + ?Sized> Model for Subset<'_, M> {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn n_data(&self) -> usize {
        self.rows.len()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.model.grad_prior(theta, out)
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let mut buf = Vec::new();
        self.model.grad_data_sum(theta, self.mapped(idx, &mut buf), out)?;
        out.iter_mut().for_each(|o| *o *= self.scale);
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        self.model.potential_prior(theta)
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let mut buf = Vec::new();
        Ok(self.scale * self.model.potential_data_sum(theta, self.mapped(idx, &mut buf))?)
    }

    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.model.hvp_prior(theta, v, out)
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let mut buf = Vec::new();
        self.model.hvp_data_sum(theta, v, self.mapped(idx, &mut buf), out)?;
        out.iter_mut().for_each(|o| *o *= self.scale);
        Ok(())
    }
}
