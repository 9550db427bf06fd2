//! Reverse-mode automatic differentiation with candle: [`CandleModel`].

use super::Prior;
use crate::error::{Error, Result, check_len};
use crate::models::model::Model;
use candle_core::{DType, Device, Tensor, Var};

/// The closure of a [`CandleModel`]: the minibatch's summed negative log-likelihood (a scalar
/// tensor) from the parameter blocks and the minibatch's rows of each data tensor.
pub type NllFn = dyn Fn(&[Tensor], &[Tensor]) -> candle_core::Result<Tensor> + Send + Sync;

/// A [`Model`] from a candle computation: gradients by candle's reverse-mode autograd.
///
/// The user supplies
/// - the shapes of the parameter blocks (θ is their concatenation, each block row-major, so
///   `dim()` is the sum of their element counts);
/// - the data as tensors whose first dimension indexes the N items (features, labels, ...; any
///   dtype, e.g. `f32` features and `u32` labels);
/// - a closure `nll(params, batch)` returning the **summed** negative log-likelihood of the rows
///   in `batch` (a scalar tensor), where `params[b]` has the shape of block b and `batch[t]` holds
///   the minibatch's rows of data tensor t;
/// - a closed-form [`Prior`] on θ (added in `f64`).
///
/// A gradient on the index multiset `idx` gathers its rows (`index_select`, so a repeated index
/// counts as often as it appears), runs the closure and the backward pass, and writes the flat
/// gradient. Parameters are `f64` by default; [`with_dtype`](Self::with_dtype)`(DType::F32)` runs
/// the network in `f32` (the sampler's state stays `f64`; gradients are rounded to `f32`).
///
/// Errors from candle (a shape mismatch in the closure, a non-scalar loss, ...) come back through
/// [`Model::grad_data_sum`] as [`Error::ModelFailure`] with candle's message, which the
/// sampler stamps with the iteration: never a panic inside a step. Each call allocates (tensors
/// are built per call), unlike the crate's hand-written models.
///
/// # Threads
///
/// candle's CPU matrix products use `RAYON_NUM_THREADS` threads (default: the physical cores).
/// For many chains in parallel (the [`Runner`](crate::run::runner::Runner)), either set
/// `RAYON_NUM_THREADS=1` in the environment and run chains one after another, or leave it and
/// let rayon's work stealing share the cores between chains and products; do not run more chains
/// than cores with `RAYON_NUM_THREADS` > 1 (oversubscription). Results do not depend on the number
/// of threads except through the order of floating-point sums inside candle's products.
///
/// ```
/// # #[cfg(feature = "candle")] {
/// use sgmcmc::ad::{CandleModel, Prior, candle_core::{Device, Tensor}};
/// use sgmcmc::Model;
///
/// // y ~ N(μ, 1): one block of shape [1]; data: a column of 4 observations.
/// let y = Tensor::new(&[[1.0f64], [2.0], [3.0], [2.0]], &Device::Cpu).unwrap();
/// let model = CandleModel::new(&[vec![1]], vec![y], Prior::Gaussian { sd: 10.0 }, |p, batch| {
///     (batch[0].broadcast_sub(&p[0])?.sqr()?.sum_all()? * 0.5)
/// })?;
/// let mut g = [0.0];
/// model.grad_data_sum(&[0.0], &[0, 1, 2, 3], &mut g)?;
/// assert_eq!(g[0], -8.0);
/// # }
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub struct CandleModel {
    shapes: Vec<Vec<usize>>,
    sizes: Vec<usize>,
    data: Vec<Tensor>,
    n_data: usize,
    dim: usize,
    dtype: DType,
    device: Device,
    prior: Prior,
    nll: Box<NllFn>,
}

impl std::fmt::Debug for CandleModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleModel")
            .field("shapes", &self.shapes)
            .field("n_data", &self.n_data)
            .field("dtype", &self.dtype)
            .field("prior", &self.prior)
            .finish_non_exhaustive()
    }
}

/// candle's error as [`Error::ModelFailure`], without the backtrace candle attaches when
/// `RUST_BACKTRACE` is set (the message alone names the failing operation).
fn failure(method: &'static str) -> impl Fn(candle_core::Error) -> Error {
    move |mut e| {
        while let candle_core::Error::WithBacktrace { inner, .. } = e {
            e = *inner;
        }
        Error::model_failure(method, e)
    }
}

impl CandleModel {
    /// The model of `nll` on `data` with parameter blocks of the given `shapes` and `prior`, on
    /// the CPU, parameters in `f64`.
    ///
    /// Errors: [`Error::EmptyData`] for no block, an empty block, no data tensor or N = 0;
    /// [`Error::DimensionMismatch`] if the data tensors disagree on N (their first dimension) or
    /// one is a scalar; [`Error::InvalidParameter`] for an invalid prior or N ≥ 2³².
    pub fn new<F>(shapes: &[Vec<usize>], data: Vec<Tensor>, prior: Prior, nll: F) -> Result<Self>
    where
        F: Fn(&[Tensor], &[Tensor]) -> candle_core::Result<Tensor> + Send + Sync + 'static,
    {
        prior.validate()?;
        if shapes.is_empty() {
            return Err(Error::EmptyData { what: "no parameter block" });
        }
        let sizes: Vec<usize> = shapes.iter().map(|s| s.iter().product()).collect();
        if sizes.contains(&0) {
            return Err(Error::EmptyData { what: "a parameter block has no element" });
        }
        let first = data.first().ok_or(Error::EmptyData { what: "no data tensor" })?;
        let n_data = *first.dims().first().ok_or(Error::DimensionMismatch {
            what: "rank of data tensor 0 (must be ≥ 1)",
            expected: 1,
            got: 0,
        })?;
        if n_data == 0 {
            return Err(Error::EmptyData { what: "model has no data (N = 0)" });
        }
        if u32::try_from(n_data).is_err() {
            return Err(Error::invalid("N", n_data, "must be below 2^32 (candle indexes rows with u32)"));
        }
        for t in &data {
            let n = t.dims().first().copied().unwrap_or(0);
            check_len("first dimension (N) of a data tensor", n_data, n)?;
        }
        Ok(CandleModel {
            dim: sizes.iter().sum(),
            shapes: shapes.to_vec(),
            sizes,
            data,
            n_data,
            dtype: DType::F64,
            device: Device::Cpu,
            prior,
            nll: Box::new(nll),
        })
    }

    /// Runs the network in `dtype` (`F64` or `F32`): the parameters, and every floating-point
    /// data tensor (converted once, here); integer tensors (labels) are kept.
    ///
    /// Errors: [`Error::InvalidParameter`] for another dtype; [`Error::ModelFailure`] if candle
    /// cannot convert a data tensor.
    pub fn with_dtype(mut self, dtype: DType) -> Result<Self> {
        if !matches!(dtype, DType::F64 | DType::F32) {
            return Err(Error::invalid("dtype", format!("{dtype:?}"), "must be F64 or F32"));
        }
        for t in &mut self.data {
            if t.dtype().is_float() && t.dtype() != dtype {
                *t = t.to_dtype(dtype).map_err(failure("with_dtype"))?;
            }
        }
        self.dtype = dtype;
        Ok(self)
    }

    /// The parameter blocks' shapes.
    pub fn shapes(&self) -> &[Vec<usize>] {
        &self.shapes
    }

    /// The prior.
    pub fn prior(&self) -> &Prior {
        &self.prior
    }

    /// The parameter blocks at θ as tensors (plain, or tracked variables for a gradient).
    fn blocks(&self, theta: &[f64], tracked: bool) -> candle_core::Result<(Vec<Tensor>, Vec<Var>)> {
        let mut params = Vec::with_capacity(self.shapes.len());
        let mut vars = Vec::new();
        let mut off = 0;
        for (shape, &size) in self.shapes.iter().zip(&self.sizes) {
            let t =
                Tensor::from_slice(&theta[off..off + size], shape.as_slice(), &self.device)?.to_dtype(self.dtype)?;
            off += size;
            if tracked {
                let v = Var::from_tensor(&t)?;
                params.push(v.as_tensor().clone());
                vars.push(v);
            } else {
                params.push(t);
            }
        }
        Ok((params, vars))
    }

    /// The minibatch's rows of every data tensor.
    fn batch(&self, idx: &[usize]) -> candle_core::Result<Vec<Tensor>> {
        let rows = Tensor::from_iter(idx.iter().map(|&i| i as u32), &self.device)?;
        self.data.iter().map(|t| t.index_select(&rows, 0)).collect()
    }

    /// The closure's loss, checked to be a scalar.
    fn loss(&self, params: &[Tensor], idx: &[usize]) -> candle_core::Result<Tensor> {
        let batch = self.batch(idx)?;
        let loss = (self.nll)(params, &batch)?;
        if loss.elem_count() != 1 {
            candle_core::bail!("the negative log-likelihood closure returned shape {:?}, not a scalar", loss.dims());
        }
        loss.flatten_all()?.get(0)
    }

    fn check(&self, what: &'static str, theta: &[f64], idx: &[usize], out: &[f64]) -> Result<()> {
        check_len(what, self.dim, theta.len())?;
        check_len("gradient buffer", self.dim, out.len())?;
        if let Some(&bad) = idx.iter().find(|&&i| i >= self.n_data) {
            return Err(Error::invalid("data index", bad, "must be below N"));
        }
        Ok(())
    }
}

impl Model for CandleModel {
    fn dim(&self) -> usize {
        self.dim
    }

    fn n_data(&self) -> usize {
        self.n_data
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.prior.eval(theta, out);
        Ok(())
    }

    /// [`Error::ModelFailure`] if candle fails.
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.check("theta", theta, idx, out)?;
        let mut run = || -> candle_core::Result<()> {
            let (params, vars) = self.blocks(theta, true)?;
            let loss = self.loss(&params, idx)?;
            let grads = loss.backward()?;
            let mut off = 0;
            for (v, &size) in vars.iter().zip(&self.sizes) {
                let dst = &mut out[off..off + size];
                match grads.get(v.as_tensor()) {
                    Some(g) => {
                        let g = g.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
                        dst.copy_from_slice(&g);
                    }
                    // A block the loss does not depend on.
                    None => dst.fill(0.0),
                }
                off += size;
            }
            Ok(())
        };
        run().map_err(failure("grad_data_sum"))
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        let mut scratch = vec![0.0; theta.len()];
        Ok(self.prior.eval(theta, &mut scratch))
    }

    /// [`Error::ModelFailure`] if candle fails.
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let run = || -> candle_core::Result<f64> {
            let (params, _) = self.blocks(theta, false)?;
            self.loss(&params, idx)?.to_dtype(DType::F64)?.to_scalar::<f64>()
        };
        run().map_err(failure("potential_data_sum"))
    }

    fn hvp_prior(&self, _theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.prior.hvp(v, out).ok_or(Error::Unsupported { method: "hvp_prior", needed_by: "a custom prior's Hessian" })
    }
}
