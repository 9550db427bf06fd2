//! Variance-reduced gradient estimators: SVRG and SAGA (Dubey et al., NeurIPS 2016).

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::gradient::{GradientEstimator, Subsample, SubsampledEstimator};
use crate::models::model::{Model, check_shape};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The SVRG estimator (stochastic variance-reduced gradient; SVRG-LD with SGLD):
///
/// `∇Ũ(θ) = ∇U₀(θ) + Σᵢ₌₁ᴺ ∇Uᵢ(θ̃) + (N/n) Σ_{i∈S} (∇Uᵢ(θ) − ∇Uᵢ(θ̃))`,
///
/// a control variate whose centre θ̃ (the *snapshot*) is the chain's own position, refreshed
/// every `epoch` estimates: the first estimate after a refresh is due takes θ̃ = θ and computes
/// the full data gradient there. Unbiased for `∇U(θ)` whatever θ̃.
///
/// Cost (counted): N datum gradients per refresh (in [`cost`](GradientEstimator::cost), not the
/// setup: it recurs), plus 2n per estimate. Memory: 2d numbers (θ̃ and its full gradient), per
/// chain. Unlike [`ControlVariate`](crate::ControlVariate), no optimisation is needed first; the
/// variance is small while θ stays near θ̃ (at stationarity, within a posterior sd), so the
/// epoch should be short enough that the chain does not travel far within one: Dubey et al. use
/// an epoch of about N/n (one pass over the data), the default here.
///
/// Reference: K. A. Dubey, S. J. Reddi, S. A. Williamson, B. Póczos, A. J. Smola, E. P. Xing,
/// *Variance reduction in stochastic gradient Langevin dynamics*, NeurIPS 2016 (SVRG-LD).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Svrg {
    sub: Subsample,
    epoch: Option<u64>,
    epoch_len: u64,
    /// Estimates since the last refresh.
    since: u64,
    snapshot: Vec<f64>,
    snapshot_grad: Vec<f64>,
    buf: Vec<f64>,
    prior: Vec<f64>,
    count: u64,
    refreshes: u64,
    all: Vec<usize>,
}

impl Svrg {
    /// Minibatches of `batch_size` drawn with replacement; epoch `⌈N / n⌉` estimates.
    pub fn new(batch_size: usize) -> Self {
        Svrg {
            sub: Subsample::new(batch_size, true),
            epoch: None,
            epoch_len: 0,
            since: 0,
            snapshot: Vec::new(),
            snapshot_grad: Vec::new(),
            buf: Vec::new(),
            prior: Vec::new(),
            count: 0,
            refreshes: 0,
            all: Vec::new(),
        }
    }

    /// The snapshot is refreshed every `epoch` estimates (≥ 1).
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = Some(epoch);
        self
    }

    /// Minibatches drawn without replacement.
    pub fn without_replacement(mut self) -> Self {
        self.sub = Subsample::new(self.sub.batch_size(), false);
        self
    }

    /// The number of snapshot refreshes so far (each cost N datum gradients).
    pub fn refreshes(&self) -> u64 {
        self.refreshes
    }

    /// The current snapshot θ̃ (empty before the first estimate).
    pub fn snapshot(&self) -> &[f64] {
        &self.snapshot
    }
}

impl GradientEstimator for Svrg {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        check_shape(model)?;
        let (n, d) = (model.n_data(), model.dim());
        self.sub.prepare(n)?;
        self.epoch_len = match self.epoch {
            Some(0) => return Err(Error::invalid("epoch", 0, "must be >= 1")),
            Some(e) => e,
            None => (n as u64).div_ceil(self.sub.batch_size() as u64),
        };
        if self.snapshot.len() != d || self.all.len() != n {
            self.snapshot.clear();
            self.since = 0;
            self.all = crate::error::all_indices(n)?;
        }
        self.snapshot_grad.resize(d, 0.0);
        self.buf.resize(d, 0.0);
        self.prior.resize(d, 0.0);
        Ok(())
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.sub.draw(rng);
        self.since += 1;
    }

    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let sub = std::mem::take(&mut self.sub);
        let r = self.eval_idx(model, theta, sub.indices(), sub.scale(), out);
        self.sub = sub;
        r
    }

    fn n_datum_gradients(&self) -> u64 {
        self.count
    }
}

impl Svrg {
    /// The SVRG formula on the index multiset `idx` with scale `N/|idx|`; refreshes the snapshot
    /// at `theta` first when due.
    fn eval_idx<M: Model + ?Sized>(
        &mut self,
        model: &M,
        theta: &[f64],
        idx: &[usize],
        scale: f64,
        out: &mut [f64],
    ) -> Result<()> {
        if self.snapshot.is_empty() || self.since > self.epoch_len {
            self.snapshot.clear();
            self.snapshot.extend_from_slice(theta);
            model.grad_data_sum(theta, &self.all, &mut self.snapshot_grad)?;
            self.count += self.all.len() as u64;
            self.refreshes += 1;
            self.since = 1;
        }
        model.grad_data_sum(theta, idx, out)?;
        model.grad_data_sum(&self.snapshot, idx, &mut self.buf)?;
        model.grad_prior(theta, &mut self.prior)?;
        self.count += 2 * idx.len() as u64;
        for (((o, b), p), g) in out.iter_mut().zip(&self.buf).zip(&self.prior).zip(&self.snapshot_grad) {
            *o = p + g + scale * (*o - b);
        }
        Ok(())
    }
}

impl SubsampledEstimator for Svrg {
    fn batch_size(&self) -> usize {
        self.sub.batch_size()
    }

    /// Draws by the estimator's law; counts towards the epoch like [`resample`](GradientEstimator::resample).
    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.sub.draw_into(rng, out);
        self.since += 1;
    }

    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let scale = model.n_data() as f64 / idx.len() as f64;
        self.eval_idx(model, theta, idx, scale, out)
    }
}

/// The SAGA estimator (SAGA-LD with SGLD): a table `gᵢ` of the last gradient computed for each
/// datum, and its sum `G = Σᵢ gᵢ`;
///
/// `∇Ũ(θ) = ∇U₀(θ) + G + (N/n) Σ_{i∈S} (∇Uᵢ(θ) − gᵢ)`,
///
/// then `gᵢ ← ∇Uᵢ(θ)` for every i in the minibatch. Unbiased for `∇U(θ)` whatever the table.
/// The table is filled at the first estimate's position (N datum gradients, counted in
/// [`cost`](GradientEstimator::cost)).
///
/// Cost (counted): n datum gradients per estimate, computed one datum at a time (so a model's
/// per-call overhead is paid n times). **Memory: N × d numbers per chain** (8·N·d bytes), plus
/// (n + 2) d; [`table_bytes`](Self::table_bytes) gives it, [`with_memory_limit`](Self::with_memory_limit)
/// caps it, and an allocation the system refuses is [`Error::OutOfMemory`], not an abort. For
/// large N·d prefer [`Svrg`] (2d numbers) or [`ControlVariate`](crate::ControlVariate).
///
/// Reference: K. A. Dubey et al., *Variance reduction in stochastic gradient Langevin
/// dynamics*, NeurIPS 2016 (SAGA-LD); A. Defazio, F. Bach, S. Lacoste-Julien, *SAGA*, NeurIPS 2014.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saga {
    sub: Subsample,
    memory_limit: Option<u64>,
    table: Vec<f64>,
    sum: Vec<f64>,
    rows: Vec<f64>,
    prior: Vec<f64>,
    filled: bool,
    dim: usize,
    count: u64,
}

impl Saga {
    /// Minibatches of `batch_size` drawn with replacement; no memory limit beyond the system's.
    pub fn new(batch_size: usize) -> Self {
        Saga {
            sub: Subsample::new(batch_size, true),
            memory_limit: None,
            table: Vec::new(),
            sum: Vec::new(),
            rows: Vec::new(),
            prior: Vec::new(),
            filled: false,
            dim: 0,
            count: 0,
        }
    }

    /// Refuses (at `prepare`, i.e. a sampler's `init`) a table above `bytes`.
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// Minibatches drawn without replacement.
    pub fn without_replacement(mut self) -> Self {
        self.sub = Subsample::new(self.sub.batch_size(), false);
        self
    }

    /// The bytes of the gradient table for N items in dimension d (saturating).
    pub fn table_bytes(n_data: usize, dim: usize) -> u64 {
        (n_data as u64).saturating_mul(dim as u64).saturating_mul(8)
    }
}

impl GradientEstimator for Saga {
    fn prepare<M: Model + ?Sized>(&mut self, model: &M) -> Result<()> {
        check_shape(model)?;
        let (n, d) = (model.n_data(), model.dim());
        self.sub.prepare(n)?;
        let needed = Self::table_bytes(n, d);
        if let Some(limit) = self.memory_limit
            && needed > limit
        {
            return Err(Error::OutOfMemory { what: "SAGA's gradient table", needed, limit: Some(limit) });
        }
        let len = n.checked_mul(d).ok_or(Error::OutOfMemory { what: "SAGA's gradient table", needed, limit: None })?;
        if self.table.len() != len || self.dim != d {
            let mut table = Vec::new();
            table.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
                what: "SAGA's gradient table",
                needed,
                limit: None,
            })?;
            table.resize(len, 0.0);
            self.table = table;
            self.filled = false;
        }
        self.dim = d;
        self.sum.resize(d, 0.0);
        self.rows.resize(self.sub.batch_size() * d, 0.0);
        self.prior.resize(d, 0.0);
        Ok(())
    }

    #[inline]
    fn resample<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.sub.draw(rng);
    }

    fn eval<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let sub = std::mem::take(&mut self.sub);
        let r = self.eval_idx(model, theta, sub.indices(), sub.scale(), out);
        self.sub = sub;
        r
    }

    fn n_datum_gradients(&self) -> u64 {
        self.count
    }

    fn cost(&self) -> Cost {
        Cost::gradients(self.count)
    }
}

impl Saga {
    /// The SAGA formula on the index multiset `idx` with scale `N/|idx|`, then the table update.
    fn eval_idx<M: Model + ?Sized>(
        &mut self,
        model: &M,
        theta: &[f64],
        idx: &[usize],
        scale: f64,
        out: &mut [f64],
    ) -> Result<()> {
        let d = self.dim;
        if self.rows.len() < idx.len() * d {
            // A caller-chosen index set larger than the batch (coupled methods): grow once.
            self.rows.resize(idx.len() * d, 0.0);
        }
        if !self.filled {
            self.sum.fill(0.0);
            for (i, row) in self.table.chunks_exact_mut(d).enumerate() {
                model.grad_data_sum(theta, &[i], row)?;
                for (s, r) in self.sum.iter_mut().zip(row.iter()) {
                    *s += r;
                }
            }
            self.count += (self.table.len() / d) as u64;
            self.filled = true;
        }
        // out = Σ_S (∇Uᵢ(θ) − gᵢ) against the table as it stands; the fresh gradients are kept
        // in `rows` (n × d, allocated once) for the update.
        out.fill(0.0);
        for (&i, row) in idx.iter().zip(self.rows.chunks_exact_mut(d)) {
            model.grad_data_sum(theta, &[i], row)?;
            let g = &self.table[i * d..(i + 1) * d];
            for ((o, r), t) in out.iter_mut().zip(row.iter()).zip(g) {
                *o += r - t;
            }
        }
        self.count += idx.len() as u64;
        model.grad_prior(theta, &mut self.prior)?;
        for ((o, p), s) in out.iter_mut().zip(&self.prior).zip(&self.sum) {
            *o = p + s + scale * *o;
        }
        // The table and its sum: gᵢ ← ∇Uᵢ(θ) (a repeated index changes it once).
        for (&i, row) in idx.iter().zip(self.rows.chunks_exact(d)) {
            let g = &mut self.table[i * d..(i + 1) * d];
            for ((s, t), r) in self.sum.iter_mut().zip(g.iter_mut()).zip(row) {
                *s += r - *t;
                *t = *r;
            }
        }
        Ok(())
    }
}

impl SubsampledEstimator for Saga {
    fn batch_size(&self) -> usize {
        self.sub.batch_size()
    }

    fn draw_indices<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [usize]) {
        self.sub.draw_into(rng, out);
    }

    fn eval_on<M: Model + ?Sized>(&mut self, model: &M, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        let scale = model.n_data() as f64 / idx.len() as f64;
        self.eval_idx(model, theta, idx, scale, out)
    }
}
