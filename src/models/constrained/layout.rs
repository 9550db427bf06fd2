//! The [`Layout`] of named parameter blocks, each with its [`Constraint`] ([`Block`]), and the
//! maps between the constrained and the unconstrained scale.

use crate::error::{Error, Result, check_len};
use crate::models::constrained::transforms::{
    Fd, Scalar, cholesky_backward, cholesky_forward, simplex_backward, simplex_forward, with_duals,
};
use crate::numeric::special::sigmoid as logistic;
use crate::numeric::special::softplus;

/// The constraint of a parameter block, and the transform from ℝ that enforces it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Constraint {
    /// No constraint: `θ = φ`.
    Real,
    /// `θ > 0`: `θ = exp(φ)`, log-Jacobian `φ`.
    Positive,
    /// `lower < θ < upper`: `θ = lower + (upper − lower) · logistic(φ)`, log-Jacobian
    /// `log(upper − lower) + log s + log(1 − s)` with `s = logistic(φ)`.
    Interval {
        /// The lower bound (finite).
        lower: f64,
        /// The upper bound (finite, `> lower`).
        upper: f64,
    },
    /// A vector of K ≥ 2 positive components summing to 1, from K − 1 unconstrained numbers by
    /// Stan's stick-breaking: `z_k = logistic(φ_k − log(K − k))`, `θ_k = (1 − Σ_{j<k} θ_j) z_k`
    /// (k = 1 … K − 1), `θ_K = 1 − Σ_{j<K} θ_j`; log-Jacobian `Σ_k log(z_k (1 − z_k) r_{k−1})`,
    /// `r_{k−1} = 1 − Σ_{j<k} θ_j`. φ = 0 is the uniform vector.
    Simplex,
    /// An increasing vector: `θ_1 = φ_1`, `θ_k = θ_{k−1} + exp(φ_k)`; log-Jacobian `Σ_{k≥2} φ_k`.
    Ordered,
    /// The Cholesky factor L (K × K, lower triangular, positive diagonal, rows of unit norm) of
    /// a K × K correlation matrix `Ω = L Lᵀ`, from K(K − 1)/2 unconstrained numbers by Stan's
    /// canonical partial correlations: `z = tanh(φ)`, row by row `L_ij = z_ij √(1 − Σ_{k<j}
    /// L_ik²)`, `L_ii = √(1 − Σ_{k<i} L_ik²)`; log-Jacobian `Σ_{i>j} [log(1 − z_ij²) +
    /// ½ log(1 − Σ_{k<j} L_ik²)]`. The block holds all K² entries of L (zeros above the
    /// diagonal). With an LKJ(η) prior, write `U₀ = −Σ_{i≥1} (K − i − 3 + 2η) log L_ii` (0-based
    /// i), Stan's `lkj_corr_cholesky`.
    CholeskyCorr,
}

/// A named block of parameters: its shape (row-major; `[]` for a scalar) and constraint.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Block {
    /// The name, e.g. `"sigma"` (what summaries and traces call it).
    pub name: String,
    /// The shape on the constrained scale (`[]`: a scalar; `[K]` for a simplex or an ordered
    /// vector).
    pub shape: Vec<usize>,
    /// The constraint.
    pub constraint: Constraint,
}

impl Block {
    /// Numbers on the constrained scale.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the block holds no number (refused by [`Layout::validate`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Numbers on the unconstrained scale (one fewer than [`len`](Self::len) for a simplex).
    pub fn unconstrained_len(&self) -> usize {
        match self.constraint {
            Constraint::Simplex => self.len().saturating_sub(1),
            Constraint::CholeskyCorr => {
                let k = self.shape.first().copied().unwrap_or(0);
                k * k.saturating_sub(1) / 2
            }
            _ => self.len(),
        }
    }
}

/// The parameters of a model as named blocks with shapes and constraints, in order: the
/// constrained vector θ is the blocks' numbers one after the other (each block row-major), the
/// unconstrained vector φ likewise on the unconstrained scale.
///
/// Build it with the methods named after the constraints; [`Constrained::new`](crate::Constrained::new) validates it.
///
/// ```
/// use sgmcmc::{Constraint, Layout};
///
/// let layout = Layout::new()
///     .real("beta", &[3])
///     .positive("sigma", &[])
///     .simplex("weights", 4)
///     .interval("rho", &[], -1.0, 1.0);
/// assert_eq!(layout.dim(), 3 + 1 + 4 + 1);
/// assert_eq!(layout.unconstrained_dim(), 3 + 1 + 3 + 1);
/// assert_eq!(layout.names()[3], "sigma");
/// assert_eq!(layout.names()[4], "weights[0]");
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    blocks: Vec<Block>,
}

impl Layout {
    /// An empty layout.
    pub fn new() -> Self {
        Layout::default()
    }

    /// Adds a block (validated by [`validate`](Self::validate)).
    pub fn block(mut self, name: &str, shape: &[usize], constraint: Constraint) -> Self {
        self.blocks.push(Block { name: name.to_string(), shape: shape.to_vec(), constraint });
        self
    }

    /// Adds an unconstrained block.
    pub fn real(self, name: &str, shape: &[usize]) -> Self {
        self.block(name, shape, Constraint::Real)
    }

    /// Adds a positive block (log transform).
    pub fn positive(self, name: &str, shape: &[usize]) -> Self {
        self.block(name, shape, Constraint::Positive)
    }

    /// Adds a block bounded to `(lower, upper)` (logit transform).
    pub fn interval(self, name: &str, shape: &[usize], lower: f64, upper: f64) -> Self {
        self.block(name, shape, Constraint::Interval { lower, upper })
    }

    /// Adds a K-simplex (stick-breaking).
    pub fn simplex(self, name: &str, k: usize) -> Self {
        self.block(name, &[k], Constraint::Simplex)
    }

    /// Adds an increasing vector of length K.
    pub fn ordered(self, name: &str, k: usize) -> Self {
        self.block(name, &[k], Constraint::Ordered)
    }

    /// Adds the K × K Cholesky factor of a correlation matrix (K ≥ 2).
    pub fn cholesky_corr(self, name: &str, k: usize) -> Self {
        self.block(name, &[k, k], Constraint::CholeskyCorr)
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The dimension of θ (constrained scale).
    pub fn dim(&self) -> usize {
        self.blocks.iter().map(Block::len).sum()
    }

    /// The dimension of φ (unconstrained scale): what samplers see.
    pub fn unconstrained_dim(&self) -> usize {
        self.blocks.iter().map(Block::unconstrained_len).sum()
    }

    /// One name per number of θ: `name` for a scalar, `name[i]` for a vector, `name[i, j]` for
    /// a matrix (ArviZ's flattened names).
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.dim());
        for b in &self.blocks {
            if b.shape.is_empty() {
                out.push(b.name.clone());
                continue;
            }
            let mut index = vec![0usize; b.shape.len()];
            for _ in 0..b.len() {
                let idx: Vec<String> = index.iter().map(usize::to_string).collect();
                out.push(format!("{}[{}]", b.name, idx.join(", ")));
                for axis in (0..index.len()).rev() {
                    index[axis] += 1;
                    if index[axis] < b.shape[axis] {
                        break;
                    }
                    index[axis] = 0;
                }
            }
        }
        out
    }

    /// Checks the layout: at least one block; names non-empty and distinct; no empty block;
    /// finite bounds with `lower < upper`; simplexes of K ≥ 2 and ordered blocks one-dimensional.
    ///
    /// Errors: [`Error::InvalidParameter`] named `"layout"`, the value naming the block.
    pub fn validate(&self) -> Result<()> {
        if self.blocks.is_empty() {
            return Err(Error::invalid("layout", "no block", "a layout needs at least one block"));
        }
        for (i, b) in self.blocks.iter().enumerate() {
            let bad = |reason| Err(Error::invalid("layout", format!("block `{}`", b.name), reason));
            if b.name.is_empty() {
                return Err(Error::invalid("layout", format!("block {i}"), "a block needs a name"));
            }
            if self.blocks[..i].iter().any(|o| o.name == b.name) {
                return bad("two blocks have this name");
            }
            if b.is_empty() {
                return bad("the block has no number (a zero in its shape)");
            }
            match b.constraint {
                Constraint::Interval { lower, upper } if !(lower.is_finite() && upper.is_finite() && lower < upper) => {
                    return bad("an interval needs finite bounds with lower < upper");
                }
                Constraint::Simplex | Constraint::Ordered if b.shape.len() != 1 => {
                    return bad("simplex and ordered blocks are vectors (shape [K])");
                }
                Constraint::Simplex if b.len() < 2 => return bad("a simplex needs K >= 2 components"),
                Constraint::CholeskyCorr if b.shape.len() != 2 || b.shape[0] != b.shape[1] || b.shape[0] < 2 => {
                    return bad("a Cholesky factor of a correlation matrix is K x K with K >= 2");
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// θ from φ (`phi` of length [`unconstrained_dim`](Self::unconstrained_dim), `theta` of
    /// length [`dim`](Self::dim)).
    ///
    /// Errors: [`Error::DimensionMismatch`].
    pub fn constrain(&self, phi: &[f64], theta: &mut [f64]) -> Result<()> {
        check_len("unconstrained parameters", self.unconstrained_dim(), phi.len())?;
        check_len("constrained parameters", self.dim(), theta.len())?;
        self.forward(phi, theta, None);
        Ok(())
    }

    /// φ from θ, e.g. to start chains at a point given on the constrained scale.
    ///
    /// Errors: [`Error::DimensionMismatch`]; [`Error::InvalidParameter`] (`"theta"`) for a θ
    /// outside its block's constraint (not positive, outside the interval, not a simplex to
    /// 1e-9 with positive components, not increasing).
    pub fn unconstrain(&self, theta: &[f64], phi: &mut [f64]) -> Result<()> {
        check_len("constrained parameters", self.dim(), theta.len())?;
        check_len("unconstrained parameters", self.unconstrained_dim(), phi.len())?;
        let (mut a, mut b) = (0, 0);
        for blk in &self.blocks {
            let (n, m) = (blk.len(), blk.unconstrained_len());
            let (t, p) = (&theta[a..a + n], &mut phi[b..b + m]);
            let outside = |v: f64| Error::invalid("theta", v, "is outside its block's constraint");
            match blk.constraint {
                Constraint::Real => p.copy_from_slice(t),
                Constraint::Positive => {
                    for (pi, &ti) in p.iter_mut().zip(t) {
                        if !(ti > 0.0 && ti.is_finite()) {
                            return Err(outside(ti));
                        }
                        *pi = ti.ln();
                    }
                }
                Constraint::Interval { lower, upper } => {
                    for (pi, &ti) in p.iter_mut().zip(t) {
                        if !(ti > lower && ti < upper) {
                            return Err(outside(ti));
                        }
                        let s = (ti - lower) / (upper - lower);
                        *pi = s.ln() - (-s).ln_1p();
                    }
                }
                Constraint::Simplex => {
                    let total: f64 = t.iter().sum();
                    if let Some(&bad) = t.iter().find(|&&v| v.is_nan() || v <= 0.0) {
                        return Err(outside(bad));
                    }
                    if (total - 1.0).abs() > 1e-9 {
                        return Err(Error::invalid("theta", total, "a simplex block must sum to 1"));
                    }
                    let k = n;
                    let mut r = 1.0;
                    for (j, pj) in p.iter_mut().enumerate() {
                        let z = (t[j] / r).clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON);
                        *pj = z.ln() - (-z).ln_1p() + ((k - j - 1) as f64).ln();
                        r -= t[j];
                    }
                }
                Constraint::Ordered => {
                    p[0] = t[0];
                    for j in 1..n {
                        let gap = t[j] - t[j - 1];
                        if gap.is_nan() || gap <= 0.0 {
                            return Err(outside(t[j]));
                        }
                        p[j] = gap.ln();
                    }
                }
                Constraint::CholeskyCorr => {
                    let k = blk.shape[0];
                    let not_factor = |v: f64| {
                        Error::invalid(
                            "theta",
                            v,
                            "not the Cholesky factor of a correlation matrix (lower triangular, positive diagonal, unit rows)",
                        )
                    };
                    let mut at = 0;
                    for i in 0..k {
                        let row = &t[i * k..(i + 1) * k];
                        let norm: f64 = row[..=i].iter().map(|x| x * x).sum();
                        if row[i].is_nan() || row[i] <= 0.0 || (norm - 1.0).abs() > 1e-9 {
                            return Err(not_factor(row[i]));
                        }
                        if let Some(&u) = row[i + 1..].iter().find(|&&u| u != 0.0) {
                            return Err(not_factor(u));
                        }
                        let mut ss: f64 = 0.0;
                        for &lij in &row[..i] {
                            let z = (lij / (1.0 - ss).sqrt()).clamp(-1.0 + f64::EPSILON, 1.0 - f64::EPSILON);
                            p[at] = z.atanh();
                            ss += lij * lij;
                            at += 1;
                        }
                    }
                }
            }
            a += n;
            b += m;
        }
        Ok(())
    }

    /// θ = T(φ); with `log_jac`, also returns `log |det ∂θ/∂φ|` (for a simplex, of the map to
    /// its first K − 1 components).
    pub(crate) fn forward(&self, phi: &[f64], theta: &mut [f64], log_jac: Option<&mut f64>) {
        let (mut a, mut b) = (0, 0);
        let mut lj = 0.0;
        for blk in &self.blocks {
            let (n, m) = (blk.len(), blk.unconstrained_len());
            let (t, p) = (&mut theta[a..a + n], &phi[b..b + m]);
            match blk.constraint {
                Constraint::Real => t.copy_from_slice(p),
                Constraint::Positive => {
                    for (ti, &pi) in t.iter_mut().zip(p) {
                        *ti = pi.exp();
                        lj += pi;
                    }
                }
                Constraint::Interval { lower, upper } => {
                    let w = upper - lower;
                    for (ti, &pi) in t.iter_mut().zip(p) {
                        let s = logistic(pi);
                        *ti = lower + w * s;
                        // log s + log(1 − s) = −softplus(−φ) − softplus(φ), stable for large |φ|.
                        lj += w.ln() - softplus(-pi) - softplus(pi);
                    }
                }
                Constraint::Simplex => simplex_forward(p, t, &mut lj),
                Constraint::Ordered => {
                    t[0] = p[0];
                    for j in 1..n {
                        t[j] = t[j - 1] + p[j].exp();
                        lj += p[j];
                    }
                }
                Constraint::CholeskyCorr => cholesky_forward(blk.shape[0], p, t, &mut lj),
            }
            a += n;
            b += m;
        }
        if let Some(l) = log_jac {
            *l = lj;
        }
    }

    /// `out = J_Tᵀ g − jac · ∇_φ log|J|` at φ (θ = T(φ) given): the chain rule back to φ, with
    /// the log-Jacobian's gradient subtracted `jac` times (1 for the prior part, 0 for data).
    pub(super) fn backward(&self, phi: &[f64], theta: &[f64], g: &[f64], jac: f64, out: &mut [f64]) {
        let (mut a, mut b) = (0, 0);
        for blk in &self.blocks {
            let (n, m) = (blk.len(), blk.unconstrained_len());
            let (t, p, gb, o) = (&theta[a..a + n], &phi[b..b + m], &g[a..a + n], &mut out[b..b + m]);
            match blk.constraint {
                Constraint::Real => o.copy_from_slice(gb),
                Constraint::Positive => {
                    for ((oi, &ti), &gi) in o.iter_mut().zip(t).zip(gb) {
                        *oi = gi * ti - jac;
                    }
                }
                Constraint::Interval { lower, upper } => {
                    let w = upper - lower;
                    for ((oi, &pi), &gi) in o.iter_mut().zip(p).zip(gb) {
                        let s = logistic(pi);
                        *oi = gi * w * s * (1.0 - s) - jac * (1.0 - 2.0 * s);
                    }
                }
                Constraint::Simplex => simplex_backward(p, t, gb, jac, o),
                Constraint::Ordered => {
                    let mut tail = 0.0;
                    for j in (0..n).rev() {
                        tail += gb[j];
                        o[j] = if j == 0 { tail } else { tail * p[j].exp() - jac };
                    }
                }
                Constraint::CholeskyCorr => cholesky_backward(blk.shape[0], p, t, gb, jac, o),
            }
            a += n;
            b += m;
        }
    }

    /// `out = J_Tᵀ h + (Σ_k g_k ∇²T_k) v − jac · ∇² log|J| v`, where `h = H_θ (J_T v)`: by
    /// hand-derived second derivatives for the elementwise and ordered blocks, and for simplex
    /// and Cholesky-correlation blocks by their reverse pass evaluated on [`Fd`] numbers along
    /// v (forward over reverse: exact, no differences).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn backward_hvp(
        &self,
        phi: &[f64],
        theta: &[f64],
        g: &[f64],
        h: &[f64],
        v: &[f64],
        jac: f64,
        out: &mut [f64],
    ) {
        let (mut a, mut b) = (0, 0);
        for blk in &self.blocks {
            let (n, m) = (blk.len(), blk.unconstrained_len());
            let (p, vb, o) = (&phi[b..b + m], &v[b..b + m], &mut out[b..b + m]);
            let (t, gb, hb) = (&theta[a..a + n], &g[a..a + n], &h[a..a + n]);
            match blk.constraint {
                Constraint::Real => o.copy_from_slice(hb),
                Constraint::Positive => {
                    for j in 0..n {
                        let e = p[j].exp();
                        o[j] = e * hb[j] + gb[j] * e * vb[j];
                    }
                }
                Constraint::Interval { lower, upper } => {
                    let w = upper - lower;
                    for j in 0..n {
                        let s = logistic(p[j]);
                        let d1 = w * s * (1.0 - s);
                        let d2 = d1 * (1.0 - 2.0 * s);
                        o[j] = d1 * hb[j] + gb[j] * d2 * vb[j] + jac * 2.0 * s * (1.0 - s) * vb[j];
                    }
                }
                Constraint::Ordered => {
                    let (mut tail_h, mut tail_g) = (0.0, 0.0);
                    for j in (0..n).rev() {
                        tail_h += hb[j];
                        tail_g += gb[j];
                        o[j] = if j == 0 { tail_h } else { p[j].exp() * (tail_h + tail_g * vb[j]) };
                    }
                }
                Constraint::Simplex | Constraint::CholeskyCorr => {
                    let k = blk.shape[0];
                    let simplex = blk.constraint == Constraint::Simplex;
                    // J_Tᵀ h at φ.
                    if simplex {
                        simplex_backward(p, t, hb, 0.0, o);
                    } else {
                        cholesky_backward(k, p, t, hb, 0.0, o);
                    }
                    // The derivative along v of J_T(φ)ᵀ g − jac ∇ log|J|(φ), g held fixed.
                    with_duals(2 * m + n, |buf| {
                        let (pd, rest) = buf.split_at_mut(m);
                        let (td, od) = rest.split_at_mut(n);
                        for ((x, &pj), &vj) in pd.iter_mut().zip(p).zip(vb) {
                            *x = Fd { v: pj, d: vj };
                        }
                        let mut lj = Fd::c(0.0);
                        if simplex {
                            simplex_forward(pd, td, &mut lj);
                            simplex_backward(pd, td, gb, jac, od);
                        } else {
                            cholesky_forward(k, pd, td, &mut lj);
                            cholesky_backward(k, pd, td, gb, jac, od);
                        }
                        for (oj, x) in o.iter_mut().zip(od.iter()) {
                            *oj += x.d;
                        }
                    });
                }
            }
            a += n;
            b += m;
        }
    }

    /// `J_T v`.
    pub(super) fn jvp(&self, phi: &[f64], v: &[f64], out: &mut [f64]) {
        let (mut a, mut b) = (0, 0);
        for blk in &self.blocks {
            let (n, m) = (blk.len(), blk.unconstrained_len());
            let (p, vb, o) = (&phi[b..b + m], &v[b..b + m], &mut out[a..a + n]);
            match blk.constraint {
                Constraint::Real => o.copy_from_slice(vb),
                Constraint::Positive => {
                    for j in 0..n {
                        o[j] = p[j].exp() * vb[j];
                    }
                }
                Constraint::Interval { lower, upper } => {
                    for j in 0..n {
                        let s = logistic(p[j]);
                        o[j] = (upper - lower) * s * (1.0 - s) * vb[j];
                    }
                }
                Constraint::Ordered => {
                    let mut acc = vb[0];
                    o[0] = acc;
                    for j in 1..n {
                        acc += p[j].exp() * vb[j];
                        o[j] = acc;
                    }
                }
                Constraint::Simplex | Constraint::CholeskyCorr => with_duals(m + n, |buf| {
                    let (pd, td) = buf.split_at_mut(m);
                    for ((x, &pj), &vj) in pd.iter_mut().zip(p).zip(vb) {
                        *x = Fd { v: pj, d: vj };
                    }
                    let mut lj = Fd::c(0.0);
                    if blk.constraint == Constraint::Simplex {
                        simplex_forward(pd, td, &mut lj);
                    } else {
                        cholesky_forward(blk.shape[0], pd, td, &mut lj);
                    }
                    for (oj, x) in o.iter_mut().zip(td.iter()) {
                        *oj = x.d;
                    }
                }),
            }
            a += n;
            b += m;
        }
    }
}
