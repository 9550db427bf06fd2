//! Forward-mode automatic differentiation with num-dual: [`ForwardAd`].

use super::grad_dual::GradDual;
use crate::error::{Error, Result};
use crate::models::model::Model;
use num_dual::{DualNum, HyperDual64};
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
/// **Mark `datum` `#[inline(always)]`** (as below). A gradient needs only the derivative parts
/// of each datum's dual number; once `datum` is inlined into the adapter's loop the compiler
/// drops the work that only the value needs — in a GLM, the `log1p` of the softplus, whose
/// derivative `1/(1 + x)` does not use it. Measured on the d = 10 logistic regression of
/// `benches/adapters.rs` (minibatch of 100): 3.2 µs with the attribute, 4.2 µs without (the
/// hand-written gradient: 1.13 µs). `#[inline]` alone is not enough: the compiler declines.
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
///     #[inline(always)]
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
/// Cost: a gradient on n items is `p · n` evaluations of `datum` on vector dual numbers
/// (statically sized: a value and `[f64; C]`, the crate's own implementation of num-dual's
/// [`DualNum`], faster than num-dual's `DualSVec64<C>` with the same values), `p = ⌈d/16⌉`
/// passes of `C = ⌈d/p⌉`
/// coordinates each: one pass up to d = 16, then balanced chunks (the chunked forward mode of
/// ForwardDiff.jl; widths of at most 16 measured fastest over the bench's cases, see the README). So the cost grows as d² per
/// datum: measured against hand-written gradients and candle in the README (logistic d = 10 to
/// 300, an MLP of 1 101 parameters) — forward mode is the faster adapter up to d ≈ 30–50 on a
/// GLM; for larger models and neural networks use reverse mode (feature `candle`). A
/// Hessian-vector product is `d · n` evaluations on hyper-dual numbers. Summation: coordinate j
/// of a gradient is the sum over `idx` in the order given.
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
/// model.grad_data_sum(&[0.0], &[0, 1, 2, 3], &mut g)?;
/// assert_eq!(g[0], -8.0);
/// # }
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ForwardAd<T> {
    density: T,
}

thread_local! {
    static HYPER: RefCell<Vec<HyperDual64>> = const { RefCell::new(Vec::new()) };
}

/// What a gradient differentiates: the prior's potential or a minibatch's summed potential.
#[derive(Clone, Copy)]
enum Term<'a> {
    Prior,
    Data(&'a [usize]),
}

impl Term<'_> {
    /// The derivative parts of the term on `C`-wide duals `x`, data summed in the order of `idx`.
    /// Each datum's value is zeroed before it is summed: the value is then dead as soon as
    /// `datum` returns, and where the compiler inlines `datum` here it drops what only the value
    /// needs (the `log1p` of a softplus's value; see [`DualDensity`]).
    #[inline(always)]
    fn gradient<T: DualDensity, const C: usize>(self, density: &T, x: &[GradDual<C>]) -> [f64; C] {
        match self {
            Term::Prior => density.prior(x).eps,
            Term::Data(idx) => {
                let Some((&first, rest)) = idx.split_first() else { return [0.0; C] };
                let mut s = density.datum(x, first);
                s.re = 0.0;
                for &i in rest {
                    let mut r = density.datum(x, i);
                    r.re = 0.0;
                    s += r;
                }
                s.eps
            }
        }
    }
}

/// The widest vector dual: a gradient in dimension d takes `⌈d / MAX_CHUNK⌉` passes of
/// `C = ⌈d / passes⌉`-wide dual numbers (balanced chunks). Measured in `benches/adapters.rs`
/// with the crate's dual: at most 16 beat at most 10 on every case (d = 30 to 300, MLP) and at
/// most 32 lost at d = 30 (one pass of 30: 24.2 against 18.2 µs) while winning above d = 100.
const MAX_CHUNK: usize = 16;

macro_rules! chunk_buffers {
    ($($name:ident: $c:literal),*) => {
        thread_local! {
            $(static $name: RefCell<Vec<GradDual<$c>>> = const { RefCell::new(Vec::new()) };)*
        }
    };
}
chunk_buffers!(C1: 1, C2: 2, C3: 3, C4: 4, C5: 5, C6: 6, C7: 7, C8: 8, C9: 9, C10: 10, C11: 11, C12: 12, C13: 13, C14: 14, C15: 15, C16: 16);

/// The gradient of `term` in chunks of `C` coordinates: one pass of `C`-wide vector duals per
/// chunk (the other coordinates are constants, which carry no derivative).
#[inline(always)]
fn chunked_gradient<T: DualDensity, const C: usize>(
    key: &'static std::thread::LocalKey<RefCell<Vec<GradDual<C>>>>,
    density: &T,
    theta: &[f64],
    out: &mut [f64],
    term: Term<'_>,
) {
    with_buffer(key, |buf| {
        buf.clear();
        buf.extend(theta.iter().map(|&t| GradDual::<C>::constant(t)));
        let d = theta.len();
        let mut start = 0;
        while start < d {
            let end = (start + C).min(d);
            for (k, j) in (start..end).enumerate() {
                buf[j] = GradDual::<C>::variable(theta[j], k);
            }
            let eps = term.gradient(density, buf);
            out[start..end].copy_from_slice(&eps[..end - start]);
            for j in start..end {
                buf[j] = GradDual::<C>::constant(theta[j]);
            }
            start = end;
        }
    });
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

    /// The gradient of `term`: one pass of vector duals as wide as d up to d = 16, else
    /// balanced chunks of at most 16 coordinates.
    #[inline]
    fn dual_gradient(&self, theta: &[f64], out: &mut [f64], term: Term<'_>) {
        let d = theta.len();
        let passes = d.div_ceil(MAX_CHUNK).max(1);
        let f = &self.density;
        match d.div_ceil(passes) {
            0 | 1 => chunked_gradient::<T, 1>(&C1, f, theta, out, term),
            2 => chunked_gradient::<T, 2>(&C2, f, theta, out, term),
            3 => chunked_gradient::<T, 3>(&C3, f, theta, out, term),
            4 => chunked_gradient::<T, 4>(&C4, f, theta, out, term),
            5 => chunked_gradient::<T, 5>(&C5, f, theta, out, term),
            6 => chunked_gradient::<T, 6>(&C6, f, theta, out, term),
            7 => chunked_gradient::<T, 7>(&C7, f, theta, out, term),
            8 => chunked_gradient::<T, 8>(&C8, f, theta, out, term),
            9 => chunked_gradient::<T, 9>(&C9, f, theta, out, term),
            10 => chunked_gradient::<T, 10>(&C10, f, theta, out, term),
            11 => chunked_gradient::<T, 11>(&C11, f, theta, out, term),
            12 => chunked_gradient::<T, 12>(&C12, f, theta, out, term),
            13 => chunked_gradient::<T, 13>(&C13, f, theta, out, term),
            14 => chunked_gradient::<T, 14>(&C14, f, theta, out, term),
            15 => chunked_gradient::<T, 15>(&C15, f, theta, out, term),
            _ => chunked_gradient::<T, 16>(&C16, f, theta, out, term),
        }
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

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.dual_gradient(theta, out, Term::Prior);
        Ok(())
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.dual_gradient(theta, out, Term::Data(idx));
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        Ok(self.density.prior(theta))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        Ok(idx.iter().fold(0.0, |s, &i| s + self.density.datum(theta, i)))
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
