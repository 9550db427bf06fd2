//! Forward-mode automatic differentiation with num-dual: [`ForwardAd`].

use crate::error::{Error, Result};
use crate::model::Model;
use num_dual::{Dual64, DualNum, HyperDual64};
use std::cell::RefCell;

/// A posterior written as per-datum negative log-densities, generic over the scalar, for
/// [`ForwardAd`].
///
/// `U(θ) = prior(θ) + Σᵢ datum(θ, i)`: both are *negative* log densities (potentials; constants
/// may be dropped). Write them once with arithmetic on `D` (`+ − × ÷` with `D` and `f64`, and
/// `exp`, `ln`, `ln_1p`, `sqrt`, `powi`, ... from [`DualNum`]); the adapter evaluates them on
/// `f64` for potentials, on dual numbers for gradients and on hyper-dual numbers for
/// Hessian-vector products.
///
/// ```
/// use sgmcmc::ad::{DualDensity, num_dual::DualNum};
///
/// /// Logistic regression, N(0, 10 I) prior.
/// struct Logistic { x: Vec<Vec<f64>>, y: Vec<f64> }
///
/// impl DualDensity for Logistic {
///     fn dim(&self) -> usize { self.x[0].len() }
///     fn n_data(&self) -> usize { self.y.len() }
///     fn datum<D: DualNum<Primitive = f64> + Copy>(&self, theta: &[D], i: usize) -> D {
///         let mut z = D::from(0.0);
///         for (t, x) in theta.iter().zip(&self.x[i]) { z += *t * *x; }
///         // log(1 + e^z) − y z, written stably for z > 0 and z ≤ 0.
///         let softplus = if z.re() > 0.0 { z + (-z).exp().ln_1p() } else { z.exp().ln_1p() };
///         softplus - z * self.y[i]
///     }
///     fn prior<D: DualNum<Primitive = f64> + Copy>(&self, theta: &[D]) -> D {
///         theta.iter().fold(D::from(0.0), |acc, t| acc + *t * *t) / 20.0
///     }
/// }
/// ```
pub trait DualDensity: Sync {
    /// The dimension d of θ.
    fn dim(&self) -> usize;

    /// The number of data items N.
    fn n_data(&self) -> usize;

    /// `Uᵢ(θ) = −log p(xᵢ | θ)` (up to a constant), for `i < n_data()`.
    fn datum<D: DualNum<Primitive = f64> + Copy>(&self, theta: &[D], i: usize) -> D;

    /// `U₀(θ) = −log p(θ)` (up to a constant).
    fn prior<D: DualNum<Primitive = f64> + Copy>(&self, theta: &[D]) -> D;
}

/// A [`Model`] from a [`DualDensity`]: gradients by forward-mode dual numbers, exact
/// Hessian-vector products by hyper-dual numbers, potentials on `f64`.
///
/// Cost: a gradient on n items is `d · n` evaluations of `datum` on dual numbers (one pass per
/// coordinate), a Hessian-vector product `d · n` on hyper-dual numbers; so this adapter suits
/// models with d up to a few dozen (measured in the README: logistic d = 10). For neural networks
/// use reverse mode (feature `candle`). Summation: coordinate j of a gradient is the sum over
/// `idx` in the order given.
///
/// The adapter allocates nothing per call once each thread has evaluated one gradient (its
/// dual-number buffers are thread-local). Results do not depend on the thread.
///
/// A density that returns a non-finite value makes the sampler report a non-finite gradient
/// (with the iteration). Arithmetic on dual numbers cannot fail otherwise.
///
/// ```
/// # #[cfg(feature = "forward-ad")] {
/// use sgmcmc::ad::{DualDensity, ForwardAd, num_dual::DualNum};
/// use sgmcmc::prelude::*;
///
/// /// y ~ N(μ, 1), μ ~ N(0, 10²): d = 1.
/// struct Mean(Vec<f64>);
/// impl DualDensity for Mean {
///     fn dim(&self) -> usize { 1 }
///     fn n_data(&self) -> usize { self.0.len() }
///     fn datum<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D], i: usize) -> D {
///         (t[0] - self.0[i]).powi(2) * 0.5
///     }
///     fn prior<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D]) -> D { t[0] * t[0] / 200.0 }
/// }
///
/// let model = ForwardAd::new(Mean(vec![1.0, 2.0, 3.0, 2.0]))?;
/// let mut g = [0.0];
/// model.grad_data_sum(&[0.0], &[0, 1, 2, 3], &mut g);
/// assert_eq!(g[0], -8.0);
/// # }
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ForwardAd<T> {
    density: T,
}

thread_local! {
    static DUALS: RefCell<Vec<Dual64>> = const { RefCell::new(Vec::new()) };
    static HYPER: RefCell<Vec<HyperDual64>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's buffer of `T` (or on a fresh one if the buffer is in use: a
/// density that itself evaluates a `ForwardAd` model).
fn with_buffer<T: 'static, R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<T>>>,
    f: impl FnOnce(&mut Vec<T>) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => f(&mut buf),
        Err(_) => f(&mut Vec::new()),
    })
}

impl<T: DualDensity> ForwardAd<T> {
    /// The model of `density`.
    ///
    /// Errors: [`Error::EmptyData`] if d = 0 or N = 0.
    pub fn new(density: T) -> Result<Self> {
        if density.dim() == 0 {
            return Err(Error::EmptyData { what: "model dimension d is 0" });
        }
        if density.n_data() == 0 {
            return Err(Error::EmptyData { what: "model has no data (N = 0)" });
        }
        Ok(ForwardAd { density })
    }

    /// The density.
    pub fn density(&self) -> &T {
        &self.density
    }

    /// Gradient of `g(θ)` (a sum of density terms) by one dual pass per coordinate.
    #[inline]
    fn dual_gradient(&self, theta: &[f64], out: &mut [f64], g: impl Fn(&[Dual64]) -> f64) {
        with_buffer(&DUALS, |buf| {
            buf.clear();
            buf.extend(theta.iter().map(|&t| Dual64::new(t, 0.0)));
            for (j, o) in out.iter_mut().enumerate() {
                buf[j].eps = 1.0;
                *o = g(buf);
                buf[j].eps = 0.0;
            }
        });
    }

    /// `∇²g(θ) v` by one hyper-dual pass per coordinate: θ + ε₁v + ε₂eₖ gives (Hv)ₖ in ε₁ε₂.
    #[inline]
    fn hyper_hvp(&self, theta: &[f64], v: &[f64], out: &mut [f64], g: impl Fn(&[HyperDual64]) -> f64) {
        with_buffer(&HYPER, |buf| {
            buf.clear();
            buf.extend(theta.iter().zip(v).map(|(&t, &vj)| HyperDual64::new(t, vj, 0.0, 0.0)));
            for (k, o) in out.iter_mut().enumerate() {
                buf[k].eps2 = 1.0;
                *o = g(buf);
                buf[k].eps2 = 0.0;
            }
        });
    }

    fn check_lengths(&self, what: &'static str, got: usize) -> Result<()> {
        crate::error::check_len(what, self.density.dim(), got)
    }
}

impl<T: DualDensity> Model for ForwardAd<T> {
    fn dim(&self) -> usize {
        self.density.dim()
    }

    fn n_data(&self) -> usize {
        self.density.n_data()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) {
        self.dual_gradient(theta, out, |x| self.density.prior(x).eps);
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) {
        self.dual_gradient(theta, out, |x| idx.iter().fold(0.0, |s, &i| s + self.density.datum(x, i).eps));
    }

    fn potential_prior(&self, theta: &[f64]) -> Option<f64> {
        Some(self.density.prior(theta))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Option<f64> {
        Some(idx.iter().fold(0.0, |s, &i| s + self.density.datum(theta, i)))
    }

    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.check_lengths("hvp direction v", v.len())?;
        self.hyper_hvp(theta, v, out, |x| self.density.prior(x).eps1eps2);
        Ok(())
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.check_lengths("hvp direction v", v.len())?;
        self.hyper_hvp(theta, v, out, |x| idx.iter().fold(0.0, |s, &i| s + self.density.datum(x, i).eps1eps2));
        Ok(())
    }
}
