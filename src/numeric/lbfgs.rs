//! A limited-memory BFGS inverse-Hessian approximation that applies `H v` and a square root
//! `S z` (with `S Sᵀ = H`) without ever forming a D × D matrix.

use crate::error::{Result, check_len, check_positive};

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
pub struct Lbfgs {
    dim: usize,
    capacity: usize,
    gamma: f64,
    /// Ring storage of pairs, `len` valid, oldest at `head`.
    s: Vec<Vec<f64>>,
    y: Vec<Vec<f64>>,
    /// Per pair (in age order, index j): `sᵀy`, `B^{j−1}s_j` and `s_jᵀB^{j−1}s_j`.
    sy: Vec<f64>,
    bs: Vec<Vec<f64>>,
    sbs: Vec<f64>,
    head: usize,
    len: usize,
    alpha: Vec<f64>,
    skipped: u64,
    dirty: bool,
}

impl Lbfgs {
    /// An empty approximation (`H = γ I`) in dimension `dim` holding at most `capacity` pairs.
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) for γ not finite and
    /// positive; `dim` or `capacity` of 0 give [`Error::EmptyData`](crate::Error::EmptyData).
    pub fn new(dim: usize, capacity: usize, gamma: f64) -> Result<Self> {
        check_positive("initial_scale", gamma)?;
        if dim == 0 || capacity == 0 {
            return Err(crate::Error::EmptyData { what: "L-BFGS dimension and capacity must be >= 1" });
        }
        Ok(Lbfgs {
            dim,
            capacity,
            gamma,
            s: vec![vec![0.0; dim]; capacity],
            y: vec![vec![0.0; dim]; capacity],
            sy: vec![0.0; capacity],
            bs: vec![vec![0.0; dim]; capacity],
            sbs: vec![0.0; capacity],
            head: 0,
            len: 0,
            alpha: vec![0.0; capacity],
            skipped: 0,
            dirty: false,
        })
    }

    /// The number of pairs in use.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no pair is in use (`H = γ I`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pairs rejected because `sᵀy ≤ 0` (or not finite).
    pub fn n_skipped(&self) -> u64 {
        self.skipped
    }

    /// The initial scale γ.
    pub fn initial_scale(&self) -> f64 {
        self.gamma
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
            self.dirty = true;
        }
        Ok(())
    }

    /// The newest pair `(s, y)`, if any.
    pub fn newest(&self) -> Option<(&[f64], &[f64])> {
        (self.len > 0).then(|| {
            let k = self.slot(self.len - 1);
            (self.s[k].as_slice(), self.y[k].as_slice())
        })
    }

    /// Removes every pair.
    pub fn clear(&mut self) {
        self.len = 0;
        self.head = 0;
        self.dirty = false;
    }

    /// Removes the oldest pair, if any.
    pub fn pop_oldest(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.capacity;
            self.len -= 1;
            self.dirty = true;
        }
    }

    #[inline]
    fn slot(&self, j: usize) -> usize {
        (self.head + j) % self.capacity
    }

    /// Adds the pair `(s, y)` as the newest, dropping the oldest when full. Returns `false` (and
    /// counts it) if `sᵀy ≤ 0` or not finite: such a pair is not used.
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for wrong lengths.
    pub fn push(&mut self, s: &[f64], y: &[f64]) -> Result<bool> {
        check_len("L-BFGS pair s", self.dim, s.len())?;
        check_len("L-BFGS pair y", self.dim, y.len())?;
        let sy: f64 = s.iter().zip(y).map(|(a, b)| a * b).sum();
        if !(sy > 0.0 && sy.is_finite()) {
            self.skipped += 1;
            return Ok(false);
        }
        if self.len == self.capacity {
            self.pop_oldest();
        }
        let k = self.slot(self.len);
        self.s[k].copy_from_slice(s);
        self.y[k].copy_from_slice(y);
        self.sy[k] = sy;
        self.len += 1;
        self.dirty = true;
        Ok(true)
    }

    /// Recomputes `B^{j−1} s_j` for every pair (needed by `apply_s`), O(M²D).
    fn refresh(&mut self) {
        if !self.dirty {
            return;
        }
        let inv_gamma = 1.0 / self.gamma;
        for j in 0..self.len {
            let kj = self.slot(j);
            // B^{j−1} s_j = s_j/γ − Σ_{i<j} [b_i (b_iᵀ s_j)/a_i − y_i (y_iᵀ s_j)/(y_iᵀ s_i)].
            let mut b = std::mem::take(&mut self.bs[kj]);
            for (bv, sv) in b.iter_mut().zip(&self.s[kj]) {
                *bv = sv * inv_gamma;
            }
            for i in 0..j {
                let ki = self.slot(i);
                let c1 = dotp(&self.bs[ki], &self.s[kj]) / self.sbs[ki];
                let c2 = dotp(&self.y[ki], &self.s[kj]) / self.sy[ki];
                for ((bv, bi), yi) in b.iter_mut().zip(&self.bs[ki]).zip(&self.y[ki]) {
                    *bv += c2 * yi - c1 * bi;
                }
            }
            self.sbs[kj] = dotp(&self.s[kj], &b);
            self.bs[kj] = b;
        }
        self.dirty = false;
    }

    /// `out = H v` (two-loop recursion).
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for wrong lengths.
    pub fn apply_h(&mut self, v: &[f64], out: &mut [f64]) -> Result<()> {
        check_len("vector v", self.dim, v.len())?;
        check_len("output", self.dim, out.len())?;
        out.copy_from_slice(v);
        for j in (0..self.len).rev() {
            let k = self.slot(j);
            let a = dotp(&self.s[k], out) / self.sy[k];
            self.alpha[j] = a;
            for (o, yv) in out.iter_mut().zip(&self.y[k]) {
                *o -= a * yv;
            }
        }
        out.iter_mut().for_each(|o| *o *= self.gamma);
        for j in 0..self.len {
            let k = self.slot(j);
            let b = dotp(&self.y[k], out) / self.sy[k];
            let c = self.alpha[j] - b;
            for (o, sv) in out.iter_mut().zip(&self.s[k]) {
                *o += c * sv;
            }
        }
        Ok(())
    }

    /// `out = S z` with `S Sᵀ = H` (product form, oldest pair applied first).
    ///
    /// Errors: [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for wrong lengths.
    pub fn apply_s(&mut self, z: &[f64], out: &mut [f64]) -> Result<()> {
        check_len("vector z", self.dim, z.len())?;
        check_len("output", self.dim, out.len())?;
        self.refresh();
        let sg = self.gamma.sqrt();
        for (o, zv) in out.iter_mut().zip(z) {
            *o = sg * zv;
        }
        for j in 0..self.len {
            let k = self.slot(j);
            // q = √(sᵀy / sᵀBs) Bs + y; p = s/(sᵀy); out ← out − p (qᵀ out).
            let c = (self.sy[k] / self.sbs[k]).sqrt();
            let qx = c * dotp(&self.bs[k], out) + dotp(&self.y[k], out);
            let f = qx / self.sy[k];
            for (o, sv) in out.iter_mut().zip(&self.s[k]) {
                *o -= f * sv;
            }
        }
        Ok(())
    }
}

#[inline]
fn dotp(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
