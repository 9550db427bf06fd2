//! The built-in models' data storage and row kernels: contiguous rows in f64 or f32
//! ([`DataScalar`]), the dot products and row sums of a minibatch gradient, and the blocked,
//! prefetching minibatch gather that [`LogisticRegression`](super::LogisticRegression),
//! [`LinearGaussian`](super::LinearGaussian) and [`Glm`](super::Glm) share.
//!
//! Whatever the storage type, every product and sum is computed in f64: an f32 entry is
//! converted exactly (every f32 is an f64), so a model on f32 data computes exactly what the same
//! model computes on those values stored as f64. Storing data in f32 only rounds the data, once.

use crate::error::{Error, Result};
use crate::numeric::prefetch::{LARGE_DATA_BYTES, PREFETCH_DISTANCE, huge_page_vec, prefetch, prefetch_row};
use ndarray::{Array2, AsArray, Ix2};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

/// The type a built-in model stores its data (design matrix) in: `f64` (the default) or `f32`.
///
/// Parameters, gradients and every sum stay f64: an f32 entry is widened exactly before it is
/// used, so f32 storage changes the data once (each entry rounded to 24 significant bits,
/// relative error ≤ 2⁻²⁴ ≈ 6e-8) and halves the bytes a minibatch gathers, and nothing else. A
/// model on f32 data gives exactly the gradients of the f64 model on the same (rounded) values.
/// Sealed: implemented for `f64` and `f32` only.
pub trait DataScalar:
    sealed::Sealed + Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + Into<f64> + 'static
{
    /// The value of this type nearest to `v` (round to nearest even; the identity for f64).
    fn from_f64(v: f64) -> Self;
}

impl DataScalar for f64 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl DataScalar for f32 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

/// Rows processed together by [`Rows::add_gradient_blocks`]: their dot products first, then
/// their coefficients (fixed-length loops over the block, which the compiler vectorises without
/// branches), then their contributions to the sum, in index order.
pub(crate) const BLOCK: usize = 16;

/// The alignment of the first row, in bytes: a cache line. A row then starts at the same
/// offset within a line as the same row of a line-aligned matrix, so it spans as few lines as
/// its length allows (⌈8d/64⌉ for d a multiple of 8, …): at d = 20 every f64 row (160 bytes)
/// spans three lines, where rows that start 16 bytes into a line (an ordinary allocation's
/// alignment) alternate between three and four. Each line is a cache miss in a gather of
/// rows not in cache (the prefetching row sum at N = 10⁶, d = 20, n = 1 000: 14.7–15.6 µs on
/// line-aligned rows, 18.4–19.1 µs from an ordinary allocation).
const ROW_ALIGN: usize = 64;

/// Row-major N × d data, stored contiguously for fast row gathers, the first row aligned to a
/// cache line ([`ROW_ALIGN`]): the values are `buf[start..start + n·d]`.
#[derive(Debug)]
pub(crate) struct Rows<X: DataScalar = f64> {
    buf: Vec<X>,
    start: usize,
    pub n: usize,
    pub d: usize,
}

impl<X: DataScalar> Clone for Rows<X> {
    /// A copy with its first row aligned again (a cloned `Vec` may start anywhere).
    fn clone(&self) -> Self {
        Rows::aligned(self.n, self.d, self.values().iter().copied())
    }
}

impl<X: DataScalar> Rows<X> {
    /// `n · d` values (row-major) in a buffer whose first value starts a cache line; huge pages
    /// advised for large data ([`huge_page_vec`]).
    fn aligned(n: usize, d: usize, values: impl Iterator<Item = X>) -> Self {
        let pad = ROW_ALIGN / size_of::<X>();
        let mut buf: Vec<X> = huge_page_vec(n * d + pad, std::iter::empty());
        // `align_offset` is exact at run time for a pointer aligned to its type (the buffer's
        // is); `min` only guards its documented right to answer "cannot" (`usize::MAX`).
        let start = buf.as_ptr().align_offset(ROW_ALIGN).min(pad);
        buf.resize(start, X::default());
        buf.extend(values);
        debug_assert_eq!(buf.len(), start + n * d);
        Rows { buf, start, n, d }
    }

    /// The values, row-major (N · d).
    #[inline(always)]
    pub fn values(&self) -> &[X] {
        &self.buf[self.start..]
    }

    /// Copies a design matrix (any layout) into contiguous rows; checks it is non-empty and
    /// finite.
    pub fn from_array<'a>(a: impl AsArray<'a, X, Ix2>, what: &'static str) -> Result<Self>
    where
        X: 'a,
    {
        let a = a.into();
        let (n, d) = a.dim();
        if n == 0 {
            return Err(Error::EmptyData { what: "no data rows (N = 0)" });
        }
        if d == 0 {
            return Err(Error::EmptyData { what: "no columns (d = 0)" });
        }
        if let Some(((i, j), x)) = a.indexed_iter().find(|(_, x)| !(**x).into().is_finite()) {
            let x: f64 = (*x).into();
            return Err(Error::invalid(
                what,
                format!("{x} at row {i}, column {j} (0-based)"),
                "every entry must be finite",
            ));
        }
        Ok(Rows::aligned(n, d, a.iter().copied()))
    }

    /// Copies columns (each of the same length N, one per feature: a data frame's) into
    /// contiguous rows; checks them as [`from_array`](Self::from_array) does, naming the column.
    pub fn from_columns(columns: &[&[X]], what: &'static str) -> Result<Self> {
        let d = columns.len();
        if d == 0 {
            return Err(Error::EmptyData { what: "no columns (d = 0)" });
        }
        let n = columns[0].len();
        if n == 0 {
            return Err(Error::EmptyData { what: "no data rows (N = 0)" });
        }
        for (j, c) in columns.iter().enumerate() {
            crate::error::check_len(what, n, c.len()).map_err(|_| {
                Error::invalid(
                    what,
                    format!("column {j} (0-based) has {} rows", c.len()),
                    "every column must have the first's length",
                )
            })?;
            if let Some((i, x)) = c.iter().enumerate().find(|(_, x)| !(**x).into().is_finite()) {
                let x: f64 = (*x).into();
                return Err(Error::invalid(
                    what,
                    format!("{x} at row {i}, column {j} (0-based)"),
                    "every entry must be finite",
                ));
            }
        }
        Ok(Rows::aligned(n, d, (0..n).flat_map(|i| columns.iter().map(move |c| c[i]))))
    }

    /// The same rows stored as `Y` (each entry rounded to the nearest `Y`).
    ///
    /// Errors: [`Error::InvalidParameter`] naming `what` if an entry overflows `Y` (an f64
    /// beyond f32's range, about 3.4e38).
    pub fn convert<Y: DataScalar>(&self, what: &'static str) -> Result<Rows<Y>> {
        let rows = Rows::aligned(self.n, self.d, self.values().iter().map(|&x| Y::from_f64(x.into())));
        if let Some(k) = rows.values().iter().position(|y| !(*y).into().is_finite()) {
            let x: f64 = self.values()[k].into();
            return Err(Error::invalid(what, x, "beyond the range of the storage type"));
        }
        Ok(rows)
    }

    #[inline(always)]
    pub fn row(&self, i: usize) -> &[X] {
        let at = self.start + i * self.d;
        &self.buf[at..at + self.d]
    }

    /// Entry `(i, j)` as f64.
    #[inline(always)]
    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.buf[self.start + i * self.d + j].into()
    }

    /// Whether prefetching rows ahead of use pays: for data sets above [`LARGE_DATA_BYTES`].
    #[inline(always)]
    pub fn worth_prefetching(&self) -> bool {
        self.n * self.d * size_of::<X>() > LARGE_DATA_BYTES
    }

    /// Prefetches row `i` and, by `side(i)`, what else the gradient reads of datum i.
    #[inline(always)]
    fn prefetch_datum(&self, i: usize, side: &impl Fn(usize)) {
        prefetch_row(self.row(i));
        side(i);
    }

    /// Prefetches the data of `idx[..PREFETCH_DISTANCE]`: what a loop that prefetches
    /// [`PREFETCH_DISTANCE`] rows ahead does before its first row.
    #[inline(always)]
    pub fn prefetch_first(&self, idx: &[usize], side: &impl Fn(usize)) {
        for &i in &idx[..idx.len().min(PREFETCH_DISTANCE)] {
            self.prefetch_datum(i, side);
        }
    }

    /// Prefetches the data of `idx[k + PREFETCH_DISTANCE]`, if there is one.
    #[inline(always)]
    pub fn prefetch_ahead(&self, idx: &[usize], k: usize, side: &impl Fn(usize)) {
        if let Some(&i) = idx.get(k + PREFETCH_DISTANCE) {
            self.prefetch_datum(i, side);
        }
    }

    /// `out += Σ_{k} c_k x_{idx_k}` where the coefficients come from the rows' dot products with
    /// `beta`: by blocks of [`BLOCK`] indices, `z_k = x_{idx_k}ᵀβ` (four rows at a time), then
    /// `coef(block, &mut z)` turns the block's z into its coefficients, then the rows are added
    /// to `out` four at a time, in index order (they are still in L1 cache), so the summation
    /// order depends on `idx` only. A block shorter than [`BLOCK`] is padded with copies of its
    /// last row: `coef` sees (and may ignore) z beyond `block.len()`, which is then set to zero
    /// (adding `+0.0` leaves every sum unchanged). On data larger than the L2 cache each row
    /// [`PREFETCH_DISTANCE`] ahead is prefetched as a row is used, and `side(i)` is called to
    /// prefetch what else `coef` reads of datum i (responses, offsets, weights: an f64 array of N
    /// entries is itself too large for the cache, and an unprefetched read of it is a cache miss
    /// per row, on the path from the dot product to the row's coefficient). Allocates nothing.
    ///
    /// **Compiled twice, picked at run time**: for the target's baseline (SSE2 on x86-64: two
    /// f64 lanes) and with AVX2 (four), used when the processor has it
    /// (`is_x86_feature_detected!`, cached by the standard library). Same results bit for bit:
    /// AVX2 changes the instructions, not the arithmetic (Rust neither reassociates floating-point
    /// operations nor fuses a multiply and an add unless asked; FMA is not enabled), so each
    /// operation is the same IEEE-754 operation on the same operands in the same order
    /// (`wide_vector_and_baseline_kernels_agree_bit_for_bit`; the value-stability pins, blessed
    /// on the baseline code, hold on the AVX2 path). The coefficient closure runs inside the
    /// AVX2 compilation too when the compiler inlines it (the built-in models' do).
    #[inline(always)]
    pub fn add_gradient_blocks(
        &self,
        beta: &[f64],
        idx: &[usize],
        out: &mut [f64],
        side: impl Fn(usize),
        coef: impl FnMut(&[usize], &mut [f64; BLOCK]),
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: calling a `#[target_feature(enable = "avx2")]` function is sound
                // exactly when the processor supports AVX2, checked on the line above.
                #[allow(unsafe_code)]
                return unsafe { self.gradient_blocks_avx2(beta, idx, out, side, coef) };
            }
        }
        self.gradient_blocks(beta, idx, out, side, coef)
    }

    /// [`gradient_blocks`](Self::gradient_blocks) compiled with AVX2: the same arithmetic in four
    /// f64 lanes instead of SSE2's two (see [`add_gradient_blocks`](Self::add_gradient_blocks)).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn gradient_blocks_avx2(
        &self,
        beta: &[f64],
        idx: &[usize],
        out: &mut [f64],
        side: impl Fn(usize),
        coef: impl FnMut(&[usize], &mut [f64; BLOCK]),
    ) {
        self.gradient_blocks(beta, idx, out, side, coef)
    }

    /// [`add_gradient_blocks`](Self::add_gradient_blocks), compiled for the caller's target
    /// features.
    #[inline(always)]
    fn gradient_blocks(
        &self,
        beta: &[f64],
        idx: &[usize],
        out: &mut [f64],
        side: impl Fn(usize),
        mut coef: impl FnMut(&[usize], &mut [f64; BLOCK]),
    ) {
        let prefetch = self.worth_prefetching();
        if prefetch {
            self.prefetch_first(idx, &side);
        }
        for (b, block) in idx.chunks(BLOCK).enumerate() {
            let quads = block.len().div_ceil(4);
            let last = block[block.len() - 1];
            let mut rows = [self.row(last); BLOCK];
            for (row, &i) in rows.iter_mut().zip(block) {
                *row = self.row(i);
            }
            let mut z = [0.0; BLOCK];
            for (q, (zq, rq)) in z.chunks_exact_mut(4).zip(rows.chunks_exact(4)).take(quads).enumerate() {
                if prefetch {
                    for k in 0..4 {
                        self.prefetch_ahead(idx, b * BLOCK + 4 * q + k, &side);
                    }
                }
                zq.copy_from_slice(&dot4(quad(rq), beta));
            }
            coef(block, &mut z);
            z[block.len()..].fill(0.0);
            for (zq, rq) in z.chunks_exact(4).zip(rows.chunks_exact(4)).take(quads) {
                axpy4(*quad(zq), *quad(rq), out);
            }
        }
    }

    /// `Aᵀ diag(w) A` (d × d), by row accumulation.
    pub fn weighted_gram(&self, w: impl Fn(usize) -> f64) -> Array2<f64> {
        let d = self.d;
        let mut g = vec![0.0; d * d];
        for i in 0..self.n {
            let r = self.row(i);
            let wi = w(i);
            for a in 0..d {
                let ra = wi * r[a].into();
                let out = &mut g[a * d..(a + 1) * d];
                for b in a..d {
                    out[b] += ra * r[b].into();
                }
            }
        }
        Array2::from_shape_fn((d, d), |(a, b)| if b >= a { g[a * d + b] } else { g[b * d + a] })
    }
}

/// Labels that are each 0 or 1, one bit per datum (a copy of an f64 label vector kept for the
/// gradient's random reads): N/8 bytes, which stay in the L2 cache up to N ≈ 8·10⁶ (and are
/// prefetched with the rows beyond), where the f64 labels (8N bytes) would add a cache miss per
/// drawn row to the gather.
#[derive(Debug, Clone)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    /// The bits of `labels` (each 0.0 or 1.0, checked by the caller: anything else reads as 1).
    pub fn from_labels(labels: &[f64]) -> Self {
        let mut words = vec![0u64; labels.len().div_ceil(64)];
        for (i, &y) in labels.iter().enumerate() {
            if y != 0.0 {
                words[i / 64] |= 1 << (i % 64);
            }
        }
        Bits(words)
    }

    /// Prefetches the word holding label `i` (a no-op beyond the end).
    #[inline(always)]
    pub fn prefetch(&self, i: usize) {
        if let Some(w) = self.0.get(i / 64) {
            prefetch(w);
        }
    }

    /// Label `i` as f64 (0.0 or 1.0).
    #[inline(always)]
    pub fn get(&self, i: usize) -> f64 {
        ((self.0[i / 64] >> (i % 64)) & 1) as f64
    }
}

/// A chunk of exactly four as an array (the length is known at the call sites, so the check
/// compiles away).
#[inline(always)]
pub(crate) fn quad<T>(chunk: &[T]) -> &[T; 4] {
    chunk.try_into().expect("chunks of four")
}

/// A data row's dot product, with four accumulators (lets the compiler use SIMD; the order is
/// fixed, so the result is deterministic): the models' row kernel. Not
/// [`numeric::linalg::dot`](crate::numeric::linalg::dot), the sequential dot product of
/// parameter-space vectors: this summation order is part of every built-in model's gradients,
/// hence of their draws.
#[inline(always)]
pub(crate) fn row_dot<X: DataScalar>(a: &[X], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        acc[0] += x[0].into() * y[0];
        acc[1] += x[1].into() * y[1];
        acc[2] += x[2].into() * y[2];
        acc[3] += x[3].into() * y[3];
    }
    let mut tail = 0.0;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += (*x).into() * y;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The dot products of four vectors `x[r]` with `y`, computed together: one pass loads each
/// element of `y` once for the four rows and keeps eight independent accumulators (two per row,
/// even and odd positions) and four rows' memory loads in flight. Each result is
/// `(Σ even terms + Σ odd terms) + last term if the length is odd`, so it depends on the row
/// and `y` only, not on the other rows.
#[inline(always)]
pub(crate) fn dot4<X: DataScalar>(x: &[&[X]; 4], y: &[f64]) -> [f64; 4] {
    let n = x.iter().fold(y.len(), |n, r| n.min(r.len()));
    let mut cy = y[..n].chunks_exact(2);
    let mut cx = x.map(|r| r[..n].chunks_exact(2));
    let mut acc = [[0.0f64; 2]; 4];
    let [c0, c1, c2, c3] = &mut cx;
    for ((((yc, a), b), c), e) in (&mut cy).zip(c0).zip(c1).zip(c2).zip(c3) {
        for (acc, xc) in acc.iter_mut().zip([a, b, c, e]) {
            acc[0] += xc[0].into() * yc[0];
            acc[1] += xc[1].into() * yc[1];
        }
    }
    std::array::from_fn(|r| {
        let mut tail = 0.0;
        for (x, y) in cx[r].remainder().iter().zip(cy.remainder()) {
            tail += (*x).into() * y;
        }
        acc[r][0] + acc[r][1] + tail
    })
}

/// `out += c · x`.
#[inline(always)]
pub(crate) fn axpy<X: DataScalar>(c: f64, x: &[X], out: &mut [f64]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += c * (*v).into();
    }
}

/// `out += (c₀x₀ + c₁x₁) + (c₂x₂ + c₃x₃)`, elementwise in that order: four rows added in one
/// pass over `out`, which quarters the loads and stores of `out` and the length of the
/// dependency chain through each of its elements.
#[inline(always)]
pub(crate) fn axpy4<X: DataScalar>(c: [f64; 4], x: [&[X]; 4], out: &mut [f64]) {
    let n = x.iter().fold(out.len(), |n, r| n.min(r.len()));
    let [x0, x1, x2, x3] = x.map(|r| &r[..n]);
    for (j, o) in out[..n].iter_mut().enumerate() {
        *o += (c[0] * x0[j].into() + c[1] * x1[j].into()) + (c[2] * x2[j].into() + c[3] * x3[j].into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dot4` agrees with `dot` up to rounding and does not depend on the other rows; `axpy4`
    /// is four `axpy`s up to rounding.
    #[test]
    fn four_row_kernels_match_single_row_ones() {
        for n in 0..23 {
            let row = |r: usize| -> Vec<f64> { (0..n).map(|j| ((r * 31 + j * 7) % 13) as f64 / 3.0 - 2.0).collect() };
            let rows: Vec<Vec<f64>> = (0..4).map(row).collect();
            let y: Vec<f64> = (0..n).map(|j| 1.0 / (1.0 + j as f64)).collect();
            let x = [&rows[0][..], &rows[1][..], &rows[2][..], &rows[3][..]];
            let four = dot4(&x, &y);
            let swapped = dot4(&[x[3], x[0], x[0], x[2]], &y);
            assert_eq!([four[3], four[0], four[0], four[2]].map(f64::to_bits), swapped.map(f64::to_bits));
            for r in 0..4 {
                let exact: f64 = x[r].iter().zip(&y).map(|(a, b)| a * b).sum();
                assert!((four[r] - exact).abs() <= 1e-13 * (1.0 + exact.abs()), "n = {n}, row {r}");
                assert!((row_dot(x[r], &y) - exact).abs() <= 1e-13 * (1.0 + exact.abs()));
            }
            let c = [0.5, -1.25, 2.0, 0.125];
            let (mut a, mut b) = (y.clone(), y.clone());
            axpy4(c, x, &mut a);
            for r in 0..4 {
                axpy(c[r], x[r], &mut b);
            }
            for (a, b) in a.iter().zip(&b) {
                assert!((a - b).abs() <= 1e-14 * (1.0 + b.abs()));
            }
        }
    }

    /// On f32 rows every kernel gives, bit for bit, what it gives on the same values stored as
    /// f64 (the widening is exact and the arithmetic is the same).
    #[test]
    fn f32_kernels_equal_f64_kernels_on_the_same_values() {
        for n in 0..23 {
            let rows32: Vec<Vec<f32>> =
                (0..4).map(|r| (0..n).map(|j| ((r * 31 + j * 7) % 13) as f32 / 3.0 - 2.1).collect()).collect();
            let rows64: Vec<Vec<f64>> = rows32.iter().map(|r| r.iter().map(|&v| f64::from(v)).collect()).collect();
            let y: Vec<f64> = (0..n).map(|j| 1.0 / (1.0 + j as f64)).collect();
            let x32 = [&rows32[0][..], &rows32[1][..], &rows32[2][..], &rows32[3][..]];
            let x64 = [&rows64[0][..], &rows64[1][..], &rows64[2][..], &rows64[3][..]];
            assert_eq!(dot4(&x32, &y).map(f64::to_bits), dot4(&x64, &y).map(f64::to_bits));
            assert_eq!(row_dot(x32[1], &y).to_bits(), row_dot(x64[1], &y).to_bits());
            let c = [0.5, -1.25, 2.0, 0.125];
            let (mut a, mut b) = (y.clone(), y.clone());
            axpy4(c, x32, &mut a);
            axpy4(c, x64, &mut b);
            axpy(0.3, x32[2], &mut a);
            axpy(0.3, x64[2], &mut b);
            assert_eq!(a, b);
        }
    }

    /// The blocked gradient compiled with AVX2 gives, bit for bit, what the baseline (SSE2)
    /// compilation gives: f64 and f32 rows, dimensions around the kernels' lane counts, partial
    /// blocks, a nonlinear coefficient, small data and data large enough to be prefetched.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_vector_and_baseline_kernels_agree_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this processor: only the baseline kernels run here");
            return;
        }
        fn check<X: DataScalar>(rows: &Rows<X>) {
            let d = rows.d;
            let beta: Vec<f64> = (0..d).map(|j| (j as f64 * 0.37).sin() * 1.3).collect();
            let coef = |block: &[usize], z: &mut [f64; BLOCK]| {
                for (zk, &i) in z.iter_mut().zip(block) {
                    *zk = 1.0 / (1.0 + (-*zk).exp()) - (i % 2) as f64;
                }
            };
            for len in [1, 5, BLOCK, BLOCK + 3, 3 * BLOCK + 7, 500] {
                let idx: Vec<usize> = (0..len).map(|k| (k * 7919 + 13) % rows.n).collect();
                let (mut a, mut b) = (vec![0.25; d], vec![0.25; d]);
                rows.gradient_blocks(&beta, &idx, &mut a, |_| {}, coef);
                // SAFETY: AVX2 was detected above.
                #[allow(unsafe_code)]
                unsafe {
                    rows.gradient_blocks_avx2(&beta, &idx, &mut b, |_| {}, coef)
                };
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
                assert_eq!(bits(&a), bits(&b), "d = {d}, |S| = {len}, {}", std::any::type_name::<X>());
            }
        }
        for (n, d) in [(50, 1), (50, 3), (50, 4), (50, 7), (50, 8), (50, 20), (8_000, 21), (3_000, 100)] {
            let a = Array2::from_shape_fn((n, d), |(i, j)| ((i * 31 + j * 17) % 101) as f64 / 7.0 - 6.9);
            let rows = Rows::from_array(&a, "x").unwrap();
            check(&rows);
            check(&rows.convert::<f32>("x").unwrap());
        }
    }

    /// The first row starts a cache line whatever the allocator returned: after building,
    /// converting and cloning, for f64 and f32 and small and large (huge-page) data, and the
    /// values are the ones given, in order.
    #[test]
    fn rows_start_on_a_cache_line() {
        for (n, d) in [(1, 1), (3, 5), (7, 20), (20_000, 20)] {
            let a = Array2::from_shape_fn((n, d), |(i, j)| (i * d + j) as f64 * 0.5);
            let r = Rows::from_array(&a, "x").unwrap();
            let r32: Rows<f32> = r.convert("x").unwrap();
            let (c, c32) = (r.clone(), r32.clone());
            for (p, len) in [
                (r.values().as_ptr() as usize, r.values().len()),
                (c.values().as_ptr() as usize, c.values().len()),
                (r32.values().as_ptr() as usize, r32.values().len()),
                (c32.values().as_ptr() as usize, c32.values().len()),
            ] {
                assert_eq!(p % ROW_ALIGN, 0, "N = {n}, d = {d}");
                assert_eq!(len, n * d);
            }
            assert_eq!(r.values(), a.as_slice().unwrap());
            assert_eq!(c.values(), r.values());
            assert_eq!(c32.values(), r32.values());
            assert_eq!(r.row(n - 1), a.row(n - 1).as_slice().unwrap());
            assert_eq!(r.at(n - 1, d - 1), a[[n - 1, d - 1]]);
        }
    }

    /// The bit copy of 0/1 labels reads back every label, across word boundaries.
    #[test]
    fn label_bits_read_back() {
        for n in [0, 1, 63, 64, 65, 200] {
            let labels: Vec<f64> = (0..n).map(|i| ((i * 7 + i / 5) % 3 == 0) as u8 as f64).collect();
            let bits = Bits::from_labels(&labels);
            for (i, &y) in labels.iter().enumerate() {
                assert_eq!(bits.get(i), y, "n = {n}, i = {i}");
            }
        }
    }

    /// Conversion to f32 rounds to nearest and refuses entries beyond f32's range.
    #[test]
    fn convert_rounds_and_checks_range() {
        let a = Array2::from_shape_vec((2, 2), vec![0.1, -1.0 / 3.0, 1e30, 7.0]).unwrap();
        let r = Rows::from_array(&a, "x").unwrap();
        let r32: Rows<f32> = r.convert("x").unwrap();
        assert_eq!(r32.values(), [0.1f32, -1.0f32 / 3.0, 1e30f32, 7.0]);
        for (x, y) in r.values().iter().zip(r32.values()) {
            assert!((f64::from(*y) - x).abs() <= x.abs() * 2f64.powi(-24));
        }
        let big = Rows::from_array(&Array2::from_elem((1, 1), 1e39), "x").unwrap();
        assert!(matches!(big.convert::<f32>("x"), Err(Error::InvalidParameter { name: "x", .. })));
        let back: Rows<f64> = r32.convert("x").unwrap();
        assert_eq!(back.values()[0], f64::from(0.1f32));
    }
}
