//! A first-order vector dual number on a plain array: the scalar [`ForwardAd`](super::ForwardAd)
//! evaluates a density on for gradients.
//!
//! num-dual's `DualSVec64<N>` keeps its derivative as an `Option` of a heap-free nalgebra vector
//! (so that a constant carries none) and goes through nalgebra's generic storage for every
//! operation. `GradDual<N>` is `re`, `[f64; N]` and a flag saying whether the derivative is
//! nonzero: the same numbers by the same rules (every value and derivative is computed by
//! num-dual's scalar `Dual64`, by num-dual's formulas, or by the sum, product and quotient
//! rules), with plain loops the compiler unrolls and vectorises, and constants (the coordinates
//! outside a pass's chunk, data) still cost a scalar operation only, as with num-dual's `None`.
//! It implements num-dual's [`DualNum`], so a [`DualDensity`](super::DualDensity) written for
//! num-dual runs on it unchanged. Measured in `benches/adapters.rs` against num-dual's type.

use num_dual::{Dual64, DualNum, DualStruct, Mappable};
use num_traits::{FromPrimitive, Inv, Num, One, Signed, Zero};
use std::fmt;
use std::iter::{Product, Sum};
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign};

/// `re + Σₖ eps[k] εₖ` with `εⱼεₖ = 0`: a value and its gradient in N directions.
///
/// Invariant: `eps` is all zeros when `active` is false (a constant). Operations skip the
/// derivative of constants, so that, as in num-dual, `f(c)` of a constant c has derivative 0 even
/// where `f′(c)` is infinite (`sqrt(0)`, `ln(0)`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct GradDual<const N: usize> {
    pub(crate) re: f64,
    pub(crate) eps: [f64; N],
    active: bool,
}

impl<const N: usize> GradDual<N> {
    /// A constant.
    #[inline(always)]
    pub(crate) const fn constant(re: f64) -> Self {
        GradDual { re, eps: [0.0; N], active: false }
    }

    /// The variable of direction `k`: `re + ε_k`.
    #[inline]
    pub(crate) fn variable(re: f64, k: usize) -> Self {
        let mut eps = [0.0; N];
        eps[k] = 1.0;
        GradDual { re, eps, active: true }
    }

    /// `f(self)` from `f(re)` and `f'(re)`.
    #[inline(always)]
    fn chain(self, f0: f64, f1: f64) -> Self {
        if !self.active {
            return Self::constant(f0);
        }
        let mut eps = self.eps;
        for e in &mut eps {
            *e *= f1;
        }
        GradDual { re: f0, eps, active: true }
    }

    /// `f(self)` for a function num-dual's scalar `Dual64` knows: the same value and derivative.
    #[inline(always)]
    fn via(self, f: impl FnOnce(Dual64) -> Dual64) -> Self {
        let d = f(Dual64::new(self.re, 1.0));
        self.chain(d.re, d.eps)
    }

    /// `a·self + b·other` in the derivative, `re` given.
    #[inline(always)]
    fn combine(re: f64, a: f64, x: &Self, b: f64, y: &Self) -> Self {
        match (x.active, y.active) {
            (true, true) => {
                let mut eps = [0.0; N];
                for ((e, xe), ye) in eps.iter_mut().zip(&x.eps).zip(&y.eps) {
                    *e = a * xe + b * ye;
                }
                GradDual { re, eps, active: true }
            }
            (true, false) => x.chain(re, a),
            (false, true) => y.chain(re, b),
            (false, false) => Self::constant(re),
        }
    }
}

// ---- arithmetic with Self ----

impl<const N: usize> Add<&GradDual<N>> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn add(mut self, o: &Self) -> Self {
        self += *o;
        self
    }
}

impl<const N: usize> Sub<&GradDual<N>> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn sub(mut self, o: &Self) -> Self {
        self -= *o;
        self
    }
}

impl<const N: usize> Mul<&GradDual<N>> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn mul(self, o: &Self) -> Self {
        Self::combine(self.re * o.re, o.re, &self, self.re, o)
    }
}

impl<const N: usize> Div<&GradDual<N>> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn div(self, o: &Self) -> Self {
        // (a/b)' = (a' b − b' a) / b², in num-dual's order of operations.
        let inv = o.re.recip();
        let re = self.re * inv;
        let mut eps = [0.0; N];
        match (self.active, o.active) {
            (false, false) => return Self::constant(re),
            (true, false) => {
                for (e, ae) in eps.iter_mut().zip(&self.eps) {
                    *e = ae * o.re * inv * inv;
                }
            }
            (false, true) => {
                for (e, be) in eps.iter_mut().zip(&o.eps) {
                    *e = -(be * self.re) * inv * inv;
                }
            }
            (true, true) => {
                for ((e, ae), be) in eps.iter_mut().zip(&self.eps).zip(&o.eps) {
                    *e = (ae * o.re - be * self.re) * inv * inv;
                }
            }
        }
        GradDual { re, eps, active: true }
    }
}

impl<const N: usize> Rem<&GradDual<N>> for GradDual<N> {
    type Output = Self;
    /// `a mod b = a − trunc(a/b) b`: derivative `a' − trunc(a/b) b'`.
    #[inline]
    fn rem(self, o: &Self) -> Self {
        let q = (self.re / o.re).trunc();
        Self::combine(self.re % o.re, 1.0, &self, -q, o)
    }
}

macro_rules! by_value {
    ($($trait:ident $method:ident),*) => {$(
        impl<const N: usize> $trait for GradDual<N> {
            type Output = Self;
            #[inline(always)]
            fn $method(self, o: Self) -> Self {
                $trait::<&Self>::$method(self, &o)
            }
        }
    )*};
}
by_value!(Add add, Sub sub, Mul mul, Div div, Rem rem);

impl<const N: usize> AddAssign for GradDual<N> {
    #[inline(always)]
    fn add_assign(&mut self, o: Self) {
        self.re += o.re;
        if o.active {
            if self.active {
                for (e, oe) in self.eps.iter_mut().zip(&o.eps) {
                    *e += oe;
                }
            } else {
                self.eps = o.eps;
                self.active = true;
            }
        }
    }
}

impl<const N: usize> SubAssign for GradDual<N> {
    #[inline(always)]
    fn sub_assign(&mut self, o: Self) {
        self.re -= o.re;
        if o.active {
            if self.active {
                for (e, oe) in self.eps.iter_mut().zip(&o.eps) {
                    *e -= oe;
                }
            } else {
                for (e, oe) in self.eps.iter_mut().zip(&o.eps) {
                    *e = -oe;
                }
                self.active = true;
            }
        }
    }
}

macro_rules! assign_by_op {
    ($($trait:ident $method:ident $op:ident $opm:ident),*) => {$(
        impl<const N: usize> $trait for GradDual<N> {
            #[inline(always)]
            fn $method(&mut self, o: Self) {
                *self = $op::$opm(*self, &o);
            }
        }
    )*};
}
assign_by_op!(MulAssign mul_assign Mul mul, DivAssign div_assign Div div, RemAssign rem_assign Rem rem);

impl<const N: usize> Neg for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        self.chain(-self.re, -1.0)
    }
}

// ---- arithmetic with f64 ----

impl<const N: usize> Add<f64> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn add(mut self, o: f64) -> Self {
        self.re += o;
        self
    }
}

impl<const N: usize> Sub<f64> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn sub(mut self, o: f64) -> Self {
        self.re -= o;
        self
    }
}

impl<const N: usize> Mul<f64> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn mul(self, o: f64) -> Self {
        self.chain(self.re * o, o)
    }
}

impl<const N: usize> Div<f64> for GradDual<N> {
    type Output = Self;
    #[inline(always)]
    fn div(self, o: f64) -> Self {
        // num-dual divides the derivative by the same f64 (not a multiplication by 1/o): kept so.
        if !self.active {
            return Self::constant(self.re / o);
        }
        let mut eps = self.eps;
        for e in &mut eps {
            *e /= o;
        }
        GradDual { re: self.re / o, eps, active: true }
    }
}

impl<const N: usize> Rem<f64> for GradDual<N> {
    type Output = Self;
    /// `a mod c` for a constant c: derivative a'.
    #[inline]
    fn rem(mut self, o: f64) -> Self {
        self.re %= o;
        self
    }
}

macro_rules! assign_f64 {
    ($($trait:ident $method:ident $op:ident $opm:ident),*) => {$(
        impl<const N: usize> $trait<f64> for GradDual<N> {
            #[inline(always)]
            fn $method(&mut self, o: f64) {
                *self = $op::<f64>::$opm(*self, o);
            }
        }
    )*};
}
assign_f64!(
    AddAssign add_assign Add add,
    SubAssign sub_assign Sub sub,
    MulAssign mul_assign Mul mul,
    DivAssign div_assign Div div,
    RemAssign rem_assign Rem rem
);

// ---- num-traits ----

impl<const N: usize> Zero for GradDual<N> {
    #[inline]
    fn zero() -> Self {
        Self::constant(0.0)
    }
    #[inline]
    fn is_zero(&self) -> bool {
        self.re == 0.0
    }
}

impl<const N: usize> One for GradDual<N> {
    #[inline]
    fn one() -> Self {
        Self::constant(1.0)
    }
}

impl<const N: usize> PartialEq for GradDual<N> {
    /// On the real part (as num-dual: code on duals takes the branches code on reals takes).
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        self.re == o.re
    }
}

impl<const N: usize> PartialEq<f64> for GradDual<N> {
    #[inline]
    fn eq(&self, o: &f64) -> bool {
        self.re == *o
    }
}

impl<const N: usize> PartialOrd for GradDual<N> {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        self.re.partial_cmp(&o.re)
    }
}

impl<const N: usize> PartialOrd<f64> for GradDual<N> {
    #[inline]
    fn partial_cmp(&self, o: &f64) -> Option<std::cmp::Ordering> {
        self.re.partial_cmp(o)
    }
}

impl<const N: usize> Num for GradDual<N> {
    type FromStrRadixErr = <f64 as Num>::FromStrRadixErr;
    fn from_str_radix(s: &str, radix: u32) -> Result<Self, Self::FromStrRadixErr> {
        f64::from_str_radix(s, radix).map(Self::constant)
    }
}

impl<const N: usize> Signed for GradDual<N> {
    #[inline]
    fn abs(&self) -> Self {
        if self.re.is_sign_negative() { -*self } else { *self }
    }
    #[inline]
    fn abs_sub(&self, o: &Self) -> Self {
        if self.re > o.re { *self - *o } else { Self::zero() }
    }
    #[inline]
    fn signum(&self) -> Self {
        Self::constant(if self.re > 0.0 {
            1.0
        } else if self.re < 0.0 {
            -1.0
        } else {
            0.0
        })
    }
    #[inline]
    fn is_positive(&self) -> bool {
        self.re > 0.0
    }
    #[inline]
    fn is_negative(&self) -> bool {
        self.re < 0.0
    }
}

impl<const N: usize> Inv for GradDual<N> {
    type Output = Self;
    #[inline]
    fn inv(self) -> Self {
        self.recip()
    }
}

impl<const N: usize> Sum for GradDual<N> {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::zero(), |a, b| a + b)
    }
}

impl<const N: usize> Product for GradDual<N> {
    fn product<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::one(), |a, b| a * b)
    }
}

impl<const N: usize> FromPrimitive for GradDual<N> {
    fn from_i64(n: i64) -> Option<Self> {
        f64::from_i64(n).map(Self::constant)
    }
    fn from_u64(n: u64) -> Option<Self> {
        f64::from_u64(n).map(Self::constant)
    }
    fn from_f64(n: f64) -> Option<Self> {
        Some(Self::constant(n))
    }
}

impl<const N: usize> From<f64> for GradDual<N> {
    #[inline]
    fn from(re: f64) -> Self {
        Self::constant(re)
    }
}

impl<const N: usize> fmt::Display for GradDual<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.re)?;
        for (k, e) in self.eps.iter().enumerate() {
            write!(f, " + {e}ε{k}")?;
        }
        Ok(())
    }
}

// ---- num-dual ----

impl<const N: usize> DualStruct for GradDual<N> {
    type Real = f64;
    type Inner = f64;
    #[inline]
    fn re(&self) -> f64 {
        self.re
    }
    #[inline]
    fn from_inner(inner: &f64) -> Self {
        Self::constant(*inner)
    }
}

impl<const N: usize> Mappable<Self> for GradDual<N> {
    type Output<O> = O;
    #[inline]
    fn map_dual<G: Fn(Self) -> O, O>(self, g: G) -> O {
        g(self)
    }
}

macro_rules! through_dual64 {
    ($($f:ident),*) => {$(
        #[inline]
        fn $f(&self) -> Self {
            self.via(|d| d.$f())
        }
    )*};
}

impl<const N: usize> DualNum for GradDual<N> {
    type Primitive = f64;
    const NDERIV: usize = 1;
    type InnerDual = f64;

    #[inline]
    fn from_re(re: f64) -> Self {
        Self::constant(re)
    }

    #[inline]
    fn scale(self, factor: &f64) -> Self {
        self.chain(self.re * factor, *factor)
    }

    #[inline]
    fn powi(&self, n: i32) -> Self {
        self.via(|d| d.powi(n))
    }

    #[inline]
    fn powf(&self, n: f64) -> Self {
        self.via(|d| d.powf(n))
    }

    #[inline]
    fn log(&self, base: f64) -> Self {
        self.via(|d| d.log(base))
    }

    #[inline]
    fn sin_cos(&self) -> (Self, Self) {
        let (s, c) = self.re.sin_cos();
        (self.chain(s, c), self.chain(c, -s))
    }

    #[inline]
    fn atan2(&self, other: Self) -> Self {
        // d atan2(y, x) = (x dy − y dx) / (x² + y²).
        let (y, x) = (self.re, other.re);
        let r2 = x * x + y * y;
        Self::combine(y.atan2(x), x / r2, self, -y / r2, &other)
    }

    #[inline(always)]
    fn exp(&self) -> Self {
        let f = self.re.exp();
        self.chain(f, f)
    }

    #[inline(always)]
    fn ln_1p(&self) -> Self {
        self.chain(ln_1p_pure(self.re), (1.0 + self.re).recip())
    }

    #[inline(always)]
    fn ln(&self) -> Self {
        self.chain(self.re.ln(), self.re.recip())
    }

    through_dual64!(
        recip, sqrt, cbrt, exp2, exp_m1, log2, log10, sin, cos, tan, asin, acos, atan, sinh, cosh, tanh, asinh, acosh,
        atanh
    );

    // The spherical Bessel functions by num-dual's own formulas on the dual number (their
    // derivatives cancel; the same expression gives the same rounding).
    #[inline]
    fn sph_j0(&self) -> Self {
        if self.re.abs() < f64::EPSILON { Self::one() - *self * *self / 6.0 } else { self.sin() / *self }
    }

    #[inline]
    fn sph_j1(&self) -> Self {
        if self.re.abs() < f64::EPSILON {
            *self / 3.0
        } else {
            let (s, c) = self.sin_cos();
            (s - *self * c) / (*self * *self)
        }
    }

    #[inline]
    fn sph_j2(&self) -> Self {
        if self.re.abs() < f64::EPSILON {
            *self * *self / 15.0
        } else {
            let (s, c) = self.sin_cos();
            let s2 = *self * *self;
            ((s - *self * c) * 3.0 - s2 * s) / (s2 * *self)
        }
    }
}

/// `ln(1 + x)` to a few ulp, from the `ln` intrinsic (Goldberg 1991, "What every computer
/// scientist should know about floating-point arithmetic", theorem 4: `u = 1 ⊕ x`,
/// `ln(u) · x / (u ⊖ 1)` cancels the rounding of `u`).
///
/// Why not `f64::ln_1p`: it is a call into the C library that the compiler must keep even when
/// its value is dead, and in a gradient pass the value of the last `ln_1p` usually is (softplus
/// in a GLM's likelihood: only its derivative `1/(1 + x)` reaches the gradient). `ln` is an LLVM
/// intrinsic without side effects, so an unused value costs nothing.
#[inline(always)]
fn ln_1p_pure(x: f64) -> f64 {
    let u = 1.0 + x;
    if u == 1.0 {
        x
    } else if u.is_infinite() {
        u.ln()
    } else {
        u.ln() * (x / (u - 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_dual::DualSVec64;

    /// Every operation gives num-dual's `DualSVec64` value and derivative to 4 ulp (bit for bit
    /// where both compute the same expression). The spherical Bessel functions first went
    /// through `Dual64`'s scalar derivative and differed by 37 ulp and 1.5e-13 (their derivative
    /// cancels): they now use num-dual's formulas on the dual number.
    /// `ln_1p_pure` against the C library's `log1p` to 2 ulp, from 1e-300 to 1e300 on both
    /// sides of 0 and next to −1, and its special values.
    #[test]
    fn ln_1p_pure_is_log1p() {
        let mut worst: f64 = 0.0;
        let mut xs = vec![0.0, -0.0, -1.0, f64::INFINITY, f64::MAX, f64::MIN_POSITIVE, -0.5, -1.0 + 1e-16];
        for k in -600..=600 {
            let m = 10f64.powf(k as f64 / 2.0);
            for f in [1.0, 1.37, 2.9, 7.3] {
                xs.push(m * f);
                if m * f < 1.0 {
                    xs.push(-m * f);
                }
            }
        }
        for k in 1..=52 {
            xs.push(-1.0 + 2f64.powi(-k) * 1.3);
        }
        for &x in &xs {
            let (a, b) = (ln_1p_pure(x), x.ln_1p());
            if a == b {
                continue;
            }
            assert!(a.is_finite() && b.is_finite(), "x = {x:e}: {a} vs {b}");
            let ulps = (a - b).abs() / (f64::EPSILON * b.abs());
            worst = worst.max(ulps);
            assert!(ulps <= 2.0, "x = {x:e}: {a:e} vs {b:e} ({ulps:.2} ulp)");
        }
        assert!(ln_1p_pure(-1.5).is_nan() && ln_1p_pure(f64::NAN).is_nan());
        assert_eq!(ln_1p_pure(-1.0), f64::NEG_INFINITY);
        println!("worst {worst:.2} ulp over {} points", xs.len());
    }

    #[test]
    fn agrees_with_num_dual() {
        fn check<F: Fn(GradDual<3>) -> GradDual<3>, G: Fn(DualSVec64<3>) -> DualSVec64<3>>(
            name: &str,
            x: [f64; 3],
            f: F,
            g: G,
        ) {
            let a = f(GradDual::variable(x[0], 0) * GradDual::variable(x[1], 1) + GradDual::variable(x[2], 2));
            let b = g(DualSVec64::<3>::from_re(x[0]).derivative(0) * DualSVec64::<3>::from_re(x[1]).derivative(1)
                + DualSVec64::<3>::from_re(x[2]).derivative(2));
            let be = b.eps.0.map_or([0.0; 3], |v| [v[0], v[1], v[2]]);
            let close = |u: f64, v: f64| u == v || (u - v).abs() <= 4.0 * f64::EPSILON * u.abs().max(v.abs());
            assert!(close(a.re, b.re), "{name}: value {} vs {}", a.re, b.re);
            for (k, (u, v)) in a.eps.iter().zip(be).enumerate() {
                assert!(close(*u, v), "{name}: derivative {k}: {u} vs {v}");
            }
        }
        let x = [0.3, 0.7, 0.11];
        macro_rules! unary {
            ($($f:ident),*) => {$(
                check(stringify!($f), x, |u| u.$f(), |u| u.$f());
            )*};
        }
        unary!(
            recip, sqrt, cbrt, exp, exp2, exp_m1, ln, log2, log10, ln_1p, sin, cos, tan, asin, acos, atan, sinh, cosh,
            tanh, asinh, atanh, sph_j0, sph_j1, sph_j2
        );
        check("acosh", [1.5, 1.2, 0.3], |u| u.acosh(), |u| u.acosh());
        check("powi", x, |u| u.powi(3), |u| u.powi(3));
        check("powf", x, |u| u.powf(2.5), |u| u.powf(2.5));
        check("log", x, |u| u.log(3.0), |u| u.log(3.0));
        check("sin_cos.0", x, |u| u.sin_cos().0, |u| u.sin_cos().0);
        check("sin_cos.1", x, |u| u.sin_cos().1, |u| u.sin_cos().1);
        check("neg", x, |u| -u, |u| -u);
        check("scalar ops", x, |u| (u + 2.0) * 3.0 / 7.0 - 1.0, |u| (u + 2.0) * 3.0 / 7.0 - 1.0);
        check("mul", x, |u| u * u.sin(), |u| u * u.sin());
        check("div", x, |u| u.exp() / (u * 3.0 + 1.0), |u| u.exp() / (u * 3.0 + 1.0));
        check("atan2", x, |u| u.atan2(u.cos() - 0.5), |u| u.atan2(u.cos() - 0.5));
        check("abs", x, |u| (-u).abs(), |u| (-u).abs());
        check("scale", x, |u| u.scale(&2.5), |u| u.scale(&2.5));
    }

    /// Operations between a variable and a constant agree with num-dual (whose constants carry
    /// no derivative), and a function of a constant has derivative 0 even where f′ is infinite.
    #[test]
    fn constants_carry_no_derivative() {
        let z = GradDual::<2>::constant(0.0);
        for r in [z.sqrt(), z.ln(), z.recip(), z.cbrt(), z.powf(0.5)] {
            assert!(r.eps.iter().all(|&e| e == 0.0), "{r}");
        }
        let (x, c) = (GradDual::<2>::variable(0.7, 1), GradDual::<2>::constant(1.9));
        let (xn, cn) = (DualSVec64::<2>::from_re(0.7).derivative(1), DualSVec64::<2>::from_re(1.9));
        let pairs = [
            (x * c, xn * cn),
            (c * x, cn * xn),
            (x / c, xn / cn),
            (c / x, cn / xn),
            (c - x, cn - xn),
            (x - c, xn - cn),
            (c + x, cn + xn),
            (c.atan2(x), cn.atan2(xn)),
            ((c * c).sqrt() + x.exp(), (cn * cn).sqrt() + xn.exp()),
        ];
        for (k, (a, b)) in pairs.into_iter().enumerate() {
            let be = b.eps.0.map_or([0.0; 2], |v| [v[0], v[1]]);
            // To 4 ulp: atan2's derivative is (x dy − y dx)/(x² + y²) here (finite at x = 0),
            // num-dual's goes through atan(y/x) (1 ulp apart on this pair).
            let close = |u: f64, v: f64| u == v || (u - v).abs() <= 4.0 * f64::EPSILON * u.abs().max(v.abs());
            assert!(close(a.re, b.re) && close(a.eps[0], be[0]) && close(a.eps[1], be[1]), "pair {k}: {a} vs {b}");
        }
    }
}
