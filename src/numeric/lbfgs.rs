//! A limited-memory BFGS inverse-Hessian approximation that applies `H v` and a square root
//! `S z` (with `S Sᵀ = H`) without ever forming a D × D matrix.
//!
//! The recursions (two-loop, the direct BFGS products `B s` and the product form of `S`) are
//! written once, in [`PairRing`], over a [`PairSpace`]: where the vectors live and how their dot
//! products are summed. [`Lbfgs`] is the space of whole vectors in one process; matrix
//! factorisation (`crate::mf`) keeps each vector as slices on its workers and sums the dots
//! across them (over MPI ranks too), as nuts-rs does with its math backend.

use crate::error::{Result, check_len, check_positive};
use crate::numeric::linalg::dot;

/// The L-BFGS approximation `H` of an inverse Hessian, from pairs `(s, y)` (oldest first) and an
/// initial scale γ (`H⁰ = γ I`), following the BFGS recursion (Şimşekli et al. 2016, eq. 6)
///
/// `Hᵐ = (I − ρ s yᵀ) Hᵐ⁻¹ (I − ρ y sᵀ) + ρ s sᵀ`,  `ρ = 1/(sᵀy)`.
///
/// - [`apply_h`](Self::apply_h): `H v` by the two-loop recursion, O(MD).
/// - [`apply_s`](Self::apply_s): `S z` with `S Sᵀ = H`, by the product form of Brodie et al.
///   (eq. 11 of the HAMCMC paper, **with the sign of y corrected**: the paper's
///   `q = … Bs − y` does not give `S Sᵀ = H`):
///   `Sᵐ = (I − p qᵀ) Sᵐ⁻¹`, `S⁰ = √γ I`, `p = s/(sᵀy)`, `q = √(sᵀy / sᵀBᵐ⁻¹s) Bᵐ⁻¹s + y`,
///   with `Bᵐ⁻¹ = (Hᵐ⁻¹)⁻¹` applied to s through the direct BFGS recursion (compact form);
///   O(M²D) per update of the pairs, O(MD) per product.
///
/// A pair with `sᵀy ≤ 0` (possible with subsampled gradients) would make H indefinite: it is
/// **never used** — [`push`](Self::push) skips it, returns `false` and counts it in
/// [`n_skipped`](Self::n_skipped). Capacity is fixed at construction; pushing beyond it drops the
/// oldest pair. Buffers are allocated once, so pushing and applying allocate nothing.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(from = "LbfgsWire", into = "LbfgsWire")]
pub struct Lbfgs {
    gamma: f64,
    ring: PairRing,
    space: Dense,
}

impl Lbfgs {
    /// An empty approximation (`H = γ I`) in dimension `dim` holding at most `capacity` pairs.
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) for γ not finite and
    /// positive; [`Error::OutOfMemory`](crate::Error::OutOfMemory) if the `(3·capacity + 2)·dim`
    /// numbers it keeps cannot be allocated; `dim` or `capacity` of 0 give
    /// [`Error::EmptyData`](crate::Error::EmptyData).
    pub fn new(dim: usize, capacity: usize, gamma: f64) -> Result<Self> {
        check_positive("initial_scale", gamma)?;
        if dim == 0 || capacity == 0 {
            return Err(crate::error::Error::EmptyData { what: "L-BFGS dimension and capacity must be >= 1" });
        }
        let len = capacity.checked_mul(3).and_then(|c| c.checked_add(2)).and_then(|c| c.checked_mul(dim));
        let needed = len.map_or(u64::MAX, |l| (l as u64).saturating_mul(8));
        let oom = || crate::error::Error::OutOfMemory {
            what: "the L-BFGS memory ((3·capacity + 2)·dim numbers)",
            needed,
            limit: None,
        };
        let len = len.ok_or_else(oom)?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(len).map_err(|_| oom())?;
        buf.resize(len, 0.0);
        Ok(Lbfgs { gamma, ring: PairRing::new(capacity), space: Dense { dim, capacity, buf } })
    }

    /// The number of pairs in use.
    pub fn len(&self) -> usize {
        self.ring.len
    }

    /// Pairs rejected because `sᵀy ≤ 0` (or not finite).
    pub fn n_skipped(&self) -> u64 {
        self.ring.skipped
    }

    /// Sets the initial scale γ (`H⁰ = γ I`) used from now on (L-BFGS optimisers rescale it
    /// at every iteration, e.g. to `sᵀy / yᵀy` of the newest pair).
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) for γ not finite and
    /// positive.
    pub fn set_initial_scale(&mut self, gamma: f64) -> Result<()> {
        check_positive("initial_scale", gamma)?;
        if gamma != self.gamma {
            self.gamma = gamma;
            self.ring.dirty = true;
        }
        Ok(())
    }

    /// The newest pair `(s, y)`, if any.
    pub fn newest(&self) -> Option<(&[f64], &[f64])> {
        (self.ring.len > 0).then(|| {
            let k = self.ring.slot(self.ring.len - 1);
            (self.space.get(self.space.s(k)), self.space.get(self.space.y(k)))
        })
    }

    /// Removes every pair.
    pub fn clear(&mut self) {
        self.ring.clear();
    }

    /// Removes the oldest pair, if any.
    pub fn pop_oldest(&mut self) {
        self.ring.pop_oldest();
    }

    /// Adds the pair `(s, y)` as the newest, dropping the oldest when full. Returns `false` (and
    /// counts it) if `sᵀy ≤ 0` or not finite: such a pair is not used.
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for wrong lengths.
    pub fn push(&mut self, s: &[f64], y: &[f64]) -> Result<bool> {
        check_len("L-BFGS pair s", self.space.dim, s.len())?;
        check_len("L-BFGS pair y", self.space.dim, y.len())?;
        Ok(match self.ring.admit(dot(s, y)) {
            Admitted::Skipped => false,
            Admitted::Stored { slot, .. } => {
                let (sv, yv) = (self.space.s(slot), self.space.y(slot));
                self.space.get_mut(sv).copy_from_slice(s);
                self.space.get_mut(yv).copy_from_slice(y);
                true
            }
        })
    }

    /// `out = H v` (two-loop recursion).
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for wrong lengths.
    pub fn apply_h(&mut self, v: &[f64], out: &mut [f64]) -> Result<()> {
        check_len("vector v", self.space.dim, v.len())?;
        check_len("output", self.space.dim, out.len())?;
        let (input, output) = (self.space.input(), self.space.output());
        self.space.get_mut(input).copy_from_slice(v);
        self.ring.apply_h(&mut self.space, input, output, self.gamma)?;
        out.copy_from_slice(self.space.get(output));
        Ok(())
    }

    /// `out = S z` with `S Sᵀ = H` (product form, oldest pair applied first).
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for wrong lengths.
    pub fn apply_s(&mut self, z: &[f64], out: &mut [f64]) -> Result<()> {
        check_len("vector z", self.space.dim, z.len())?;
        check_len("output", self.space.dim, out.len())?;
        let (input, output) = (self.space.input(), self.space.output());
        self.space.get_mut(input).copy_from_slice(z);
        self.ring.refresh(&mut self.space, self.gamma)?;
        self.ring.apply_s(&mut self.space, input, output, self.gamma)?;
        out.copy_from_slice(self.space.get(output));
        Ok(())
    }
}

/// `Lbfgs`'s serialised form: the fields of the format before the recursion moved into
/// [`PairRing`], in their order, so that checkpoints keep their bytes.
#[derive(serde::Serialize, serde::Deserialize)]
struct LbfgsWire {
    dim: usize,
    capacity: usize,
    gamma: f64,
    s: Vec<Vec<f64>>,
    y: Vec<Vec<f64>>,
    sy: Vec<f64>,
    bs: Vec<Vec<f64>>,
    sbs: Vec<f64>,
    head: usize,
    len: usize,
    alpha: Vec<f64>,
    skipped: u64,
    dirty: bool,
}

impl From<Lbfgs> for LbfgsWire {
    fn from(l: Lbfgs) -> Self {
        let (r, sp) = (l.ring, l.space);
        let vecs = |f: fn(&Dense, usize) -> usize| (0..sp.capacity).map(|k| sp.get(f(&sp, k)).to_vec()).collect();
        LbfgsWire {
            dim: sp.dim,
            capacity: r.capacity,
            gamma: l.gamma,
            s: vecs(<Dense as PairSpace>::s),
            y: vecs(<Dense as PairSpace>::y),
            sy: r.sy,
            bs: vecs(<Dense as PairSpace>::bs),
            sbs: r.sbs,
            head: r.head,
            len: r.len,
            alpha: r.alpha,
            skipped: r.skipped,
            dirty: r.dirty,
        }
    }
}

impl From<LbfgsWire> for Lbfgs {
    fn from(w: LbfgsWire) -> Self {
        let (dim, capacity) = (w.dim, w.capacity);
        let mut buf = Vec::with_capacity((3 * capacity + 2) * dim);
        for v in w.s.iter().chain(&w.y).chain(&w.bs) {
            buf.extend_from_slice(v);
        }
        buf.resize((3 * capacity + 2) * dim, 0.0);
        let ring = PairRing {
            capacity,
            head: w.head,
            len: w.len,
            sy: w.sy,
            sbs: w.sbs,
            alpha: w.alpha,
            skipped: w.skipped,
            dirty: w.dirty,
        };
        Lbfgs { gamma: w.gamma, ring, space: Dense { dim, capacity, buf } }
    }
}

/// Where the vectors of an L-BFGS memory live and how their dot products are summed. A vector
/// is named by a handle ([`V`](Self::V)); the space holds the pairs `s`, `y`, `B s` by ring slot
/// and whatever input and output vectors its caller names. Every operation is elementwise except
/// [`dots`](Self::dots), which returns whole-vector sums (reduced across workers where the
/// vectors are split), `N` at once so that a split space exchanges once.
pub(crate) trait PairSpace {
    /// A handle naming one vector of the space.
    type V: Copy;
    /// The pair's `s` in ring slot `slot`.
    fn s(&self, slot: usize) -> Self::V;
    /// The pair's `y` in ring slot `slot`.
    fn y(&self, slot: usize) -> Self::V;
    /// `B^{j−1} s_j` of the pair in ring slot `slot`.
    fn bs(&self, slot: usize) -> Self::V;
    /// `N` dot products `aᵀb`.
    fn dots<const N: usize>(&mut self, pairs: [(Self::V, Self::V); N]) -> Result<[f64; N]>;
    /// `dst = a · src` (`dst` ≠ `src`).
    fn set_scaled(&mut self, dst: Self::V, a: f64, src: Self::V);
    /// `dst *= a`.
    fn rescale(&mut self, dst: Self::V, a: f64);
    /// `dst += a · x` (`dst` ≠ `x`).
    fn axpy(&mut self, dst: Self::V, a: f64, x: Self::V);
    /// `dst += a · x − b · z` (`dst` differs from both).
    fn axpbz(&mut self, dst: Self::V, a: f64, x: Self::V, b: f64, z: Self::V);
}

/// The outcome of offering a pair to a [`PairRing`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Admitted {
    /// `sᵀy ≤ 0` or not finite: not used (counted).
    Skipped,
    /// Stored in ring slot `slot` (the caller copies `s` and `y` there); the oldest pair was
    /// dropped to make room if `dropped_oldest`.
    Stored { slot: usize, dropped_oldest: bool },
}

/// The scalar state of an L-BFGS memory and its recursions, over any [`PairSpace`]: a ring of at
/// most `capacity` pairs (oldest at `head`), per slot `sᵀy` and `sᵀBs`, the two-loop
/// coefficients, and whether `B s` must be recomputed.
#[derive(Debug, Clone)]
pub(crate) struct PairRing {
    capacity: usize,
    head: usize,
    len: usize,
    sy: Vec<f64>,
    sbs: Vec<f64>,
    alpha: Vec<f64>,
    skipped: u64,
    dirty: bool,
}

/// A ring of no slot that allocates nothing: a placeholder while a ring is taken out of its
/// owner (`std::mem::take`) to run a recursion over that owner as the space.
impl Default for PairRing {
    fn default() -> Self {
        PairRing {
            capacity: 0,
            head: 0,
            len: 0,
            sy: Vec::new(),
            sbs: Vec::new(),
            alpha: Vec::new(),
            skipped: 0,
            dirty: false,
        }
    }
}

impl PairRing {
    /// An empty ring of `capacity` ≥ 1 slots.
    pub(crate) fn new(capacity: usize) -> Self {
        PairRing {
            capacity,
            head: 0,
            len: 0,
            sy: vec![0.0; capacity],
            sbs: vec![0.0; capacity],
            alpha: vec![0.0; capacity],
            skipped: 0,
            dirty: false,
        }
    }

    /// Pairs in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Pairs rejected because `sᵀy ≤ 0` (or not finite).
    pub(crate) fn n_skipped(&self) -> u64 {
        self.skipped
    }

    /// The slot of the j-th pair in age order (0 = oldest).
    #[inline]
    pub(crate) fn slot(&self, j: usize) -> usize {
        (self.head + j) % self.capacity
    }

    /// Removes every pair.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.head = 0;
        self.dirty = false;
    }

    /// Removes the oldest pair, if any.
    pub(crate) fn pop_oldest(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.capacity;
            self.len -= 1;
            self.dirty = true;
        }
    }

    /// Offers a pair with `sᵀy = sy`: skipped (and counted) unless positive and finite;
    /// otherwise stored as the newest, dropping the oldest when full.
    pub(crate) fn admit(&mut self, sy: f64) -> Admitted {
        if !(sy > 0.0 && sy.is_finite()) {
            self.skipped += 1;
            return Admitted::Skipped;
        }
        let dropped_oldest = self.len == self.capacity;
        if dropped_oldest {
            self.pop_oldest();
        }
        let slot = self.slot(self.len);
        self.sy[slot] = sy;
        self.len += 1;
        self.dirty = true;
        Admitted::Stored { slot, dropped_oldest }
    }

    /// `out = H v` by the two-loop recursion (`H⁰ = γ I`).
    pub(crate) fn apply_h<S: PairSpace>(&mut self, sp: &mut S, v: S::V, out: S::V, gamma: f64) -> Result<()> {
        sp.set_scaled(out, 1.0, v);
        for j in (0..self.len).rev() {
            let k = self.slot(j);
            let [d] = sp.dots([(sp.s(k), out)])?;
            let a = d / self.sy[k];
            self.alpha[j] = a;
            sp.axpy(out, -a, sp.y(k));
        }
        sp.rescale(out, gamma);
        for j in 0..self.len {
            let k = self.slot(j);
            let [d] = sp.dots([(sp.y(k), out)])?;
            let c = self.alpha[j] - d / self.sy[k];
            sp.axpy(out, c, sp.s(k));
        }
        Ok(())
    }

    /// Recomputes `B^{j−1} s_j` for every pair if the pairs or γ changed (needed by
    /// [`apply_s`](Self::apply_s)), O(M²D):
    /// `B^{j−1} s_j = s_j/γ − Σ_{i<j} [b_i (b_iᵀ s_j)/a_i − y_i (y_iᵀ s_j)/(y_iᵀ s_i)]`.
    pub(crate) fn refresh<S: PairSpace>(&mut self, sp: &mut S, gamma: f64) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let inv_gamma = 1.0 / gamma;
        for j in 0..self.len {
            let kj = self.slot(j);
            sp.set_scaled(sp.bs(kj), inv_gamma, sp.s(kj));
            for i in 0..j {
                let ki = self.slot(i);
                let [d1, d2] = sp.dots([(sp.bs(ki), sp.s(kj)), (sp.y(ki), sp.s(kj))])?;
                let (c1, c2) = (d1 / self.sbs[ki], d2 / self.sy[ki]);
                sp.axpbz(sp.bs(kj), c2, sp.y(ki), c1, sp.bs(ki));
            }
            let [sbs] = sp.dots([(sp.s(kj), sp.bs(kj))])?;
            self.sbs[kj] = sbs;
        }
        self.dirty = false;
        Ok(())
    }

    /// `out = S z` with `S Sᵀ = H`, product form, oldest pair first; needs
    /// [`refresh`](Self::refresh) first.
    pub(crate) fn apply_s<S: PairSpace>(&mut self, sp: &mut S, z: S::V, out: S::V, gamma: f64) -> Result<()> {
        sp.set_scaled(out, gamma.sqrt(), z);
        for j in 0..self.len {
            let k = self.slot(j);
            // q = √(sᵀy / sᵀBs) Bs + y; p = s/(sᵀy); out ← out − p (qᵀ out).
            let c = (self.sy[k] / self.sbs[k]).sqrt();
            let [d1, d2] = sp.dots([(sp.bs(k), out), (sp.y(k), out)])?;
            let f = (c * d1 + d2) / self.sy[k];
            sp.axpy(out, -f, sp.s(k));
        }
        Ok(())
    }
}

/// Whole vectors in one process, the space of an [`Lbfgs`]: one buffer of `3·capacity + 2`
/// vectors of `dim` numbers — `s` by slot, `y` by slot, `B^{j−1} s_j` by slot, then the input
/// and the output of a product; a handle is a vector's index.
#[derive(Debug, Clone)]
struct Dense {
    dim: usize,
    capacity: usize,
    buf: Vec<f64>,
}

impl Dense {
    fn input(&self) -> usize {
        3 * self.capacity
    }

    fn output(&self) -> usize {
        3 * self.capacity + 1
    }

    #[inline]
    fn get(&self, v: usize) -> &[f64] {
        &self.buf[v * self.dim..(v + 1) * self.dim]
    }

    #[inline]
    fn get_mut(&mut self, v: usize) -> &mut [f64] {
        &mut self.buf[v * self.dim..(v + 1) * self.dim]
    }

    /// Vector `dst` (mutable) and a reader of every other vector.
    #[inline]
    fn split<'s>(&'s mut self, dst: usize) -> (&'s mut [f64], impl Fn(usize) -> &'s [f64] + 's) {
        let d = self.dim;
        let (lo, rest) = self.buf.split_at_mut(dst * d);
        let (mid, hi) = rest.split_at_mut(d);
        let (lo, hi) = (&*lo, &*hi);
        let read = move |v: usize| {
            debug_assert!(v != dst, "a source is the destination");
            if v < dst { &lo[v * d..(v + 1) * d] } else { &hi[(v - dst - 1) * d..(v - dst) * d] }
        };
        (mid, read)
    }
}

impl PairSpace for Dense {
    type V = usize;

    fn s(&self, slot: usize) -> usize {
        slot
    }

    fn y(&self, slot: usize) -> usize {
        self.capacity + slot
    }

    fn bs(&self, slot: usize) -> usize {
        2 * self.capacity + slot
    }

    fn dots<const N: usize>(&mut self, pairs: [(usize, usize); N]) -> Result<[f64; N]> {
        Ok(pairs.map(|(a, b)| dot(self.get(a), self.get(b))))
    }

    fn set_scaled(&mut self, dst: usize, a: f64, src: usize) {
        let (d, read) = self.split(dst);
        for (o, x) in d.iter_mut().zip(read(src)) {
            *o = a * x;
        }
    }

    fn rescale(&mut self, dst: usize, a: f64) {
        self.get_mut(dst).iter_mut().for_each(|o| *o *= a);
    }

    fn axpy(&mut self, dst: usize, a: f64, x: usize) {
        let (d, read) = self.split(dst);
        for (o, v) in d.iter_mut().zip(read(x)) {
            *o += a * v;
        }
    }

    fn axpbz(&mut self, dst: usize, a: f64, x: usize, b: f64, z: usize) {
        let (d, read) = self.split(dst);
        for ((o, xv), zv) in d.iter_mut().zip(read(x)).zip(read(z)) {
            *o += a * xv - b * zv;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The recursion against the dense BFGS update it stands for (moved from the integration
    //! tests when `Lbfgs` became internal; unchanged).
    use super::*;
    use crate::error::Error;
    use ndarray::{Array1, Array2};
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    fn dense_h(lb: &mut Lbfgs, d: usize) -> Array2<f64> {
        let mut h = Array2::zeros((d, d));
        let mut out = vec![0.0; d];
        for j in 0..d {
            let mut e = vec![0.0; d];
            e[j] = 1.0;
            lb.apply_h(&e, &mut out).unwrap();
            for i in 0..d {
                h[[i, j]] = out[i];
            }
        }
        h
    }

    fn dense_s(lb: &mut Lbfgs, d: usize) -> Array2<f64> {
        let mut s = Array2::zeros((d, d));
        let mut out = vec![0.0; d];
        for j in 0..d {
            let mut e = vec![0.0; d];
            e[j] = 1.0;
            lb.apply_s(&e, &mut out).unwrap();
            for i in 0..d {
                s[[i, j]] = out[i];
            }
        }
        s
    }

    /// The dense BFGS recursion (eq. 6): Hᵐ = (I − ρ s yᵀ) Hᵐ⁻¹ (I − ρ y sᵀ) + ρ s sᵀ.
    fn dense_bfgs(pairs: &[(Array1<f64>, Array1<f64>)], gamma: f64, d: usize) -> Array2<f64> {
        let id = Array2::<f64>::eye(d);
        let mut h = &id * gamma;
        for (s, y) in pairs {
            let rho = 1.0 / s.dot(y);
            let sy = outer(s, y) * rho;
            let ss = outer(s, s) * rho;
            let left = &id - &sy;
            h = left.dot(&h).dot(&left.t()) + ss;
        }
        h
    }

    fn outer(a: &Array1<f64>, b: &Array1<f64>) -> Array2<f64> {
        Array2::from_shape_fn((a.len(), b.len()), |(i, j)| a[i] * b[j])
    }

    fn random_pairs(d: usize, m: usize, seed: u64) -> Vec<(Array1<f64>, Array1<f64>)> {
        let mut rng = crate::numeric::rng::ChainRng::seed_from_u64(seed);
        let mut n = || -> f64 { StandardNormal.sample(&mut rng) };
        // A random SPD "Hessian" A = QQᵀ + I; pairs y = A s (+ small noise), so sᵀy > 0.
        let q = Array2::from_shape_fn((d, d), |_| n());
        let a = q.dot(&q.t()) + Array2::<f64>::eye(d);
        (0..m)
            .map(|_| {
                let s = Array1::from_shape_fn(d, |_| n());
                let y = a.dot(&s) + Array1::from_shape_fn(d, |_| 0.1 * n());
                (s, y)
            })
            .collect()
    }

    #[test]
    fn lbfgs_matches_dense_bfgs_and_its_square_root() {
        for (seed, (d, m)) in [(1u64, (5usize, 4usize)), (2, (5, 4)), (3, (8, 3)), (4, (3, 6))] {
            let pairs = random_pairs(d, m, seed);
            let gamma = 0.3;
            let mut lb = Lbfgs::new(d, m, gamma).unwrap();
            for (s, y) in &pairs {
                assert!(lb.push(s.as_slice().unwrap(), y.as_slice().unwrap()).unwrap());
            }
            let h = dense_h(&mut lb, d);
            let reference = dense_bfgs(&pairs, gamma, d);
            let scale = reference.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            let err_h = (&h - &reference).iter().fold(0.0f64, |a, x| a.max(x.abs())) / scale;
            let asym = (&h - &h.t()).iter().fold(0.0f64, |a, x| a.max(x.abs())) / scale;
            let eig = crate::numeric::linalg::symmetric_eigenvalues("H", &((&h + &h.t()) * 0.5)).unwrap();
            let s = dense_s(&mut lb, d);
            let err_s = (s.dot(&s.t()) - &h).iter().fold(0.0f64, |a, x| a.max(x.abs())) / scale;
            eprintln!(
                "d={d} M={m}: |H - BFGS| {err_h:.1e}, asym {asym:.1e}, min eig {:.3e}, |SSᵀ - H| {err_s:.1e}",
                eig[0]
            );
            assert!(err_h < 1e-12 && asym < 1e-12 && eig[0] > 0.0 && err_s < 1e-12);
        }
    }

    #[test]
    fn lbfgs_drops_oldest_and_skips_non_positive_pairs() {
        let d = 4;
        let pairs = random_pairs(d, 5, 9);
        let mut lb = Lbfgs::new(d, 3, 0.5).unwrap();
        for (s, y) in &pairs {
            lb.push(s.as_slice().unwrap(), y.as_slice().unwrap()).unwrap();
        }
        // Capacity 3: the last three pairs only.
        let h = dense_h(&mut lb, d);
        let reference = dense_bfgs(&pairs[2..], 0.5, d);
        assert!((&h - &reference).iter().all(|x| x.abs() < 1e-10));
        // A pair with sᵀy ≤ 0 is skipped and changes nothing.
        let s = vec![1.0, 0.0, 0.0, 0.0];
        let y = vec![-1.0, 0.5, 0.0, 0.0];
        assert!(!lb.push(&s, &y).unwrap());
        assert!(!lb.push(&s, &[0.0, 1.0, 0.0, 0.0]).unwrap());
        assert_eq!(lb.n_skipped(), 2);
        assert_eq!(lb.len(), 3);
        let h2 = dense_h(&mut lb, d);
        assert_eq!(h, h2);
        assert!(matches!(lb.push(&[1.0], &[1.0]), Err(Error::DimensionMismatch { .. })));
        assert!(Lbfgs::new(3, 2, 0.0).is_err());
        // A memory that cannot be addressed is an error, not an abort.
        assert!(matches!(Lbfgs::new(usize::MAX / 2, 2, 1.0), Err(Error::OutOfMemory { limit: None, .. })));
    }
}
