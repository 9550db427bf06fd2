//! The transforms' arithmetic, written once for plain numbers and for the forward-mode duals
//! that give their exact Hessian-vector products: the simplex's stick-breaking and the Cholesky
//! factor of a correlation matrix, forward and backward.

use crate::numeric::special::sigmoid as logistic;
use crate::numeric::special::softplus;
use std::cell::RefCell;

/// The scalars the stick-breaking and partial-correlation transforms are written on: `f64`, and
/// [`Fd`] (a value with one directional derivative) for their second derivatives. On `f64` every
/// operation is the plain one, in the same order as before these transforms were generic.
pub(super) trait Scalar:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    fn c(x: f64) -> Self;
    fn ln(self) -> Self;
    fn tanh(self) -> Self;
    fn sqrt(self) -> Self;
    fn max0(self) -> Self;
    fn logistic(self) -> Self;
    fn softplus(self) -> Self;
}

impl Scalar for f64 {
    #[inline(always)]
    fn c(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn max0(self) -> Self {
        self.max(0.0)
    }
    #[inline(always)]
    fn logistic(self) -> Self {
        logistic(self)
    }
    #[inline(always)]
    fn softplus(self) -> Self {
        softplus(self)
    }
}

/// `v + d ε` (ε² = 0): a value and its derivative along one direction.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Fd {
    pub(super) v: f64,
    pub(super) d: f64,
}

impl Fd {
    #[inline]
    fn chain(self, v: f64, dv: f64) -> Self {
        Fd { v, d: self.d * dv }
    }
}

impl std::ops::Add for Fd {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Fd { v: self.v + o.v, d: self.d + o.d }
    }
}
impl std::ops::Sub for Fd {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Fd { v: self.v - o.v, d: self.d - o.d }
    }
}
impl std::ops::Mul for Fd {
    type Output = Self;
    fn mul(self, o: Self) -> Self {
        Fd { v: self.v * o.v, d: self.d * o.v + self.v * o.d }
    }
}
impl std::ops::Div for Fd {
    type Output = Self;
    fn div(self, o: Self) -> Self {
        let q = self.v / o.v;
        Fd { v: q, d: (self.d - q * o.d) / o.v }
    }
}
impl std::ops::Neg for Fd {
    type Output = Self;
    fn neg(self) -> Self {
        Fd { v: -self.v, d: -self.d }
    }
}

impl Scalar for Fd {
    fn c(x: f64) -> Self {
        Fd { v: x, d: 0.0 }
    }
    fn ln(self) -> Self {
        self.chain(self.v.ln(), 1.0 / self.v)
    }
    fn tanh(self) -> Self {
        let t = self.v.tanh();
        self.chain(t, 1.0 - t * t)
    }
    fn sqrt(self) -> Self {
        let r = self.v.sqrt();
        self.chain(r, 0.5 / r)
    }
    fn max0(self) -> Self {
        if self.v > 0.0 { self } else { Fd::c(0.0) }
    }
    fn logistic(self) -> Self {
        let z = logistic(self.v);
        self.chain(z, z * (1.0 - z))
    }
    fn softplus(self) -> Self {
        self.chain(softplus(self.v), logistic(self.v))
    }
}

/// Stick-breaking, `θ = T(φ)` for one simplex block of K = `t.len()` components, adding the
/// block's log-Jacobian to `lj` term by term.
pub(super) fn simplex_forward<T: Scalar>(p: &[T], t: &mut [T], lj: &mut T) {
    let k = t.len();
    let mut r = T::c(1.0);
    for j in 0..k - 1 {
        let y = p[j] - T::c(((k - j - 1) as f64).ln());
        let z = y.logistic();
        t[j] = r * z;
        *lj = *lj + (-(-y).softplus() - y.softplus() + r.ln());
        r = r - t[j];
    }
    t[k - 1] = r;
}

/// `o = J_Tᵀ g − jac ∇ log|J|` for one simplex block (θ = `t` given).
pub(super) fn simplex_backward<T: Scalar>(p: &[T], t: &[T], gb: &[f64], jac: f64, o: &mut [T]) {
    // Reverse pass through the stick-breaking: r̄ is the adjoint of the remaining stick r_k.
    // Forward: x_k = r_{k−1} z_k, r_k = r_{k−1}(1 − z_k).
    let k = t.len();
    let (one, jac) = (T::c(1.0), T::c(jac));
    let mut rbar = T::c(gb[k - 1]);
    // r_{k−1} for k = K − 1 … 1, recovered backwards: r_{K−1} = θ_K, r_{k−1} = r_k + θ_k.
    let mut r_after = t[k - 1];
    for j in (0..k - 1).rev() {
        let r_before = r_after + t[j];
        let y = p[j] - T::c(((k - j - 1) as f64).ln());
        let z = y.logistic();
        // d/dz of [log z + log(1 − z)] = 1/z − 1/(1 − z); d/dr of log r = 1/r.
        // ȳ = z̄ z(1 − z) with z̄ = (g − r̄) r − jac (1 − 2z)/(z(1 − z)).
        let g = T::c(gb[j]);
        o[j] = (g - rbar) * r_before * z * (one - z) - jac * (one - T::c(2.0) * z);
        rbar = g * z + rbar * (one - z) - jac / r_before;
        r_after = r_before;
    }
}

/// The Cholesky factor of a K × K correlation matrix (row-major in `t`) from its canonical
/// partial correlations `tanh(p)`, adding the log-Jacobian to `lj` term by term.
pub(super) fn cholesky_forward<T: Scalar>(k: usize, p: &[T], t: &mut [T], lj: &mut T) {
    let (zero, one) = (T::c(0.0), T::c(1.0));
    t.fill(zero);
    t[0] = one;
    let mut at = 0;
    for i in 1..k {
        let mut ss = zero;
        for j in 0..i {
            let z = p[at].tanh();
            let w = (one - ss).sqrt();
            let l = z * w;
            t[i * k + j] = l;
            // log(1 − tanh²y) = 2 (log 2 − y − softplus(−2y)), stable for any y.
            *lj = *lj + (T::c(2.0) * (T::c(std::f64::consts::LN_2) - p[at] - (T::c(-2.0) * p[at]).softplus()) + w.ln());
            ss = ss + l * l;
            at += 1;
        }
        t[i * k + i] = (one - ss).max0().sqrt();
    }
}

/// `o = J_Tᵀ g − jac ∇ log|J|` for one Cholesky-correlation block (θ = `t` given).
pub(super) fn cholesky_backward<T: Scalar>(k: usize, p: &[T], t: &[T], gb: &[f64], jac: f64, o: &mut [T]) {
    // Row by row, in reverse: s_j = Σ_{k<j} L_ik², w_j = √(1 − s_j), L_ij = z_ij w_j,
    // L_ii = √(1 − s_i); s̄ is the adjoint of s.
    let (one, two) = (T::c(1.0), T::c(2.0));
    let mut at = 0;
    for i in 1..k {
        let row = &t[i * k..(i + 1) * k];
        let mut sbar = T::c(-gb[i * k + i]) / (two * row[i]);
        let mut s_after = row[..i].iter().fold(T::c(0.0), |acc, &x| acc + x * x);
        for j in (0..i).rev() {
            let l = row[j];
            let s_before = s_after - l * l;
            let w = (one - s_before).sqrt();
            let z = p[at + j].tanh();
            let lbar = T::c(gb[i * k + j]) + two * l * sbar;
            o[at + j] = lbar * w * (one - z * z) + T::c(2.0 * jac) * z;
            sbar = sbar + (-lbar * z / (two * w) + T::c(jac) / (two * (one - s_before)));
            s_after = s_before;
        }
        at += i;
    }
}

thread_local! {
    /// θ, ∇_θ, and two more buffers for Hessian-vector products.
    static SCRATCH: RefCell<[Vec<f64>; 4]> = const { RefCell::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()]) };
}

thread_local! {
    /// Dual numbers for the second derivatives of simplex and Cholesky-correlation blocks.
    static DUALS: RefCell<Vec<Fd>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's [`Fd`] buffer resized to `len` (a fresh one if it is in use).
pub(super) fn with_duals<R>(len: usize, f: impl FnOnce(&mut [Fd]) -> R) -> R {
    DUALS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.resize(len, Fd::default());
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![Fd::default(); len]),
    })
}

/// Runs `f` with this thread's scratch buffers resized to `(d, d, d, d)` (fresh ones if they
/// are in use: a model nested in another).
pub(super) fn with_scratch<R>(d: usize, f: impl FnOnce(&mut [Vec<f64>; 4]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut bufs) => {
            for b in bufs.iter_mut() {
                b.resize(d, 0.0);
            }
            f(&mut bufs)
        }
        Err(_) => f(&mut [vec![0.0; d], vec![0.0; d], vec![0.0; d], vec![0.0; d]]),
    })
}
