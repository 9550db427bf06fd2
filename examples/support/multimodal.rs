//! Multimodal targets with known mode weights, as finite sums that a minibatch sees noisily:
//! the tests and examples of replica exchange and contour SGLD.
//!
//! - [`NoisyMixture`]: a Gaussian mixture `π(x) = Σ_k w_k N(x; m_k, s_k² I)` in d dimensions,
//!   written as `U = Σᵢ Uᵢ` with `Uᵢ(x) = U(x)/N + aᵢ·x + bᵢ`, `Σᵢ aᵢ = 0`, `Σᵢ bᵢ = 0` (flat
//!   prior): the full sums are the mixture exactly, while a minibatch's energy and gradient
//!   carry the noise of a sample of the `aᵢ, bᵢ` (gradient noise `(N/n)Σ_S aᵢ`, energy noise
//!   `(N/n)Σ_S (aᵢ·x + bᵢ)`). The reSGLD paper's simulation, `0.4 N(−4, 0.7²) + 0.6 N(3, 0.5²)`
//!   with noisy energies and gradients, is [`NoisyMixture::resgld_paper`].
//! - [`MeanMixture`]: the data model of the contour SGLD demonstrations (Dubey et al.; BlackJAX):
//!   `xᵢ ~ ½N(μ, σ²) + ½N(γ − μ, σ²)`, μ = −5, γ = 20, σ = 5, N = 1 000, whose posterior for μ
//!   (prior symmetric about γ/2) has two mirror-image modes near −5 and 25, weight ½ each
//!   exactly.
#![allow(dead_code)]

use sgmcmc::{Model, Result, RunSettings, Storage};

/// The 40 independent runs of a mode-weight table as one run's chains (one seeded stream each,
/// draws stored, in parallel), the first tenth of each discarded.
pub fn forty_runs(n_iter: u64, seed: u64) -> RunSettings {
    RunSettings {
        n_iter,
        burn_in: n_iter / 10,
        n_chains: 40,
        seed,
        storage: Storage::Samples,
        parallel: true,
        ..Default::default()
    }
}

/// `log Σ exp(v)`.
fn log_sum_exp(v: &[f64]) -> f64 {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// The standard normal CDF (via erfc).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// A uniform in [0, 1) from a 64-bit LCG state (the data sets' own reproducible noise).
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*state >> 11) as f64) / (1u64 << 53) as f64
}

/// A standard normal (Box–Muller) from the LCG.
fn normal(state: &mut u64) -> f64 {
    let (u, v) = (uniform(state).max(1e-300), uniform(state));
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `n` normals of standard deviation `sd`, centred to sum to exactly zero.
fn zero_sum(n: usize, sd: f64, state: &mut u64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|_| sd * normal(state)).collect();
    let mean = v.iter().sum::<f64>() / n as f64;
    v.iter_mut().for_each(|x| *x -= mean);
    v
}

/// A Gaussian mixture as a noisy finite sum (see the module's docs).
#[derive(Debug, Clone)]
pub struct NoisyMixture {
    /// Mixture weights (summing to 1).
    pub weights: Vec<f64>,
    /// Component means, each of length d.
    pub means: Vec<Vec<f64>>,
    /// Component standard deviations (isotropic).
    pub sds: Vec<f64>,
    dim: usize,
    /// Row i: `aᵢ` (length d), zero-sum over i.
    a: Vec<f64>,
    /// `bᵢ`, zero-sum over i.
    b: Vec<f64>,
}

impl NoisyMixture {
    /// The mixture with N data whose zero-sum noise terms have standard deviations `a_sd`
    /// (each coordinate of `aᵢ`) and `b_sd`; `seed` draws them.
    pub fn new(
        weights: &[f64],
        means: &[Vec<f64>],
        sds: &[f64],
        n_data: usize,
        a_sd: f64,
        b_sd: f64,
        seed: u64,
    ) -> Self {
        let dim = means[0].len();
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x0005_DEEC_E66D;
        let cols: Vec<Vec<f64>> = (0..dim).map(|_| zero_sum(n_data, a_sd, &mut state)).collect();
        let a = (0..n_data * dim).map(|k| cols[k % dim][k / dim]).collect();
        let b = zero_sum(n_data, b_sd, &mut state);
        NoisyMixture { weights: weights.to_vec(), means: means.to_vec(), sds: sds.to_vec(), dim, a, b }
    }

    /// The reSGLD paper's simulation: `0.4 N(−4, 0.7²) + 0.6 N(3, 0.5²)`, with N = 1 000 data
    /// whose noise terms make a minibatch of 100 see its energy with a standard deviation of
    /// about 2 (the paper's) and its gradient with about 0.3.
    pub fn resgld_paper(seed: u64) -> Self {
        NoisyMixture::new(&[0.4, 0.6], &[vec![-4.0], vec![3.0]], &[0.7, 0.5], 1_000, 0.003, 0.015, seed)
    }

    /// Four well separated modes in 2-D, at `(±4, ±4)`, with weights 0.1, 0.2, 0.3, 0.4 and
    /// standard deviations 0.5 to 0.8: between neighbours the potential rises by ≥ 12 above the
    /// modes, which plain SGLD does not cross in a run.
    pub fn four_modes(seed: u64) -> Self {
        let means = vec![vec![-4.0, -4.0], vec![4.0, -4.0], vec![-4.0, 4.0], vec![4.0, 4.0]];
        NoisyMixture::new(&[0.1, 0.2, 0.3, 0.4], &means, &[0.6, 0.5, 0.8, 0.7], 1_000, 0.003, 0.015, seed)
    }

    /// The mixture's potential `U(x) = −log π(x)` and, if `grad` is given, its gradient.
    pub fn potential(&self, x: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let d = self.dim as f64;
        let mut logs = [0.0f64; 8];
        let k = self.weights.len();
        assert!(k <= 8, "at most 8 components");
        for (c, l) in logs[..k].iter_mut().enumerate() {
            let s2 = self.sds[c] * self.sds[c];
            let r2: f64 = x.iter().zip(&self.means[c]).map(|(a, b)| (a - b).powi(2)).sum();
            *l = self.weights[c].ln() - 0.5 * d * (2.0 * std::f64::consts::PI * s2).ln() - 0.5 * r2 / s2;
        }
        let lse = log_sum_exp(&logs[..k]);
        if let Some(g) = grad {
            g.iter_mut().for_each(|v| *v = 0.0);
            for (c, l) in logs[..k].iter().enumerate() {
                let r = (l - lse).exp();
                let s2 = self.sds[c] * self.sds[c];
                for (j, gj) in g.iter_mut().enumerate() {
                    *gj += r * (x[j] - self.means[c][j]) / s2;
                }
            }
        }
        -lse
    }

    /// The index of the component whose mean is nearest `x`: the mode `x` is in.
    pub fn mode_of(&self, x: &[f64]) -> usize {
        let dist = |c: usize| x.iter().zip(&self.means[c]).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
        (0..self.weights.len()).min_by(|&p, &q| dist(p).total_cmp(&dist(q))).unwrap()
    }

    /// The exact probability of each mode's region (nearest mean) under π, in one dimension
    /// with two components; for well separated components, the weights plus a bound on what
    /// leaks across (`Σ_j w_j Φ(−δ/(2 s_j))`, δ the nearest distance between means).
    pub fn mode_weights(&self) -> (Vec<f64>, f64) {
        let k = self.weights.len();
        if self.dim == 1 && k == 2 {
            let (lo, hi) = if self.means[0][0] < self.means[1][0] { (0, 1) } else { (1, 0) };
            let t = 0.5 * (self.means[0][0] + self.means[1][0]);
            let below = |c: usize| normal_cdf((t - self.means[c][0]) / self.sds[c]);
            let p_lo = self.weights[lo] * below(lo) + self.weights[hi] * below(hi);
            let mut w = vec![0.0; 2];
            w[lo] = p_lo;
            w[hi] = 1.0 - p_lo;
            return (w, 0.0);
        }
        let mut delta = f64::INFINITY;
        for p in 0..k {
            for q in p + 1..k {
                let d: f64 = self.means[p].iter().zip(&self.means[q]).map(|(a, b)| (a - b).powi(2)).sum();
                delta = delta.min(d.sqrt());
            }
        }
        let leak = (0..k).map(|c| self.weights[c] * (k - 1) as f64 * normal_cdf(-delta / (2.0 * self.sds[c]))).sum();
        (self.weights.clone(), leak)
    }
}

impl Model for NoisyMixture {
    fn dim(&self) -> usize {
        self.dim
    }

    fn n_data(&self) -> usize {
        self.b.len()
    }

    /// A flat prior.
    fn grad_prior(&self, _theta: &[f64], out: &mut [f64]) -> Result<()> {
        out.iter_mut().for_each(|o| *o = 0.0);
        Ok(())
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.potential(theta, Some(out));
        let f = idx.len() as f64 / self.b.len() as f64;
        out.iter_mut().for_each(|o| *o *= f);
        for &i in idx {
            for (j, o) in out.iter_mut().enumerate() {
                *o += self.a[i * self.dim + j];
            }
        }
        Ok(())
    }

    fn potential_prior(&self, _theta: &[f64]) -> Result<f64> {
        Ok(0.0)
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let mut u = self.potential(theta, None) * idx.len() as f64 / self.b.len() as f64;
        for &i in idx {
            u += self.b[i] + theta.iter().enumerate().map(|(j, t)| t * self.a[i * self.dim + j]).sum::<f64>();
        }
        Ok(u)
    }
}

/// The mean of a symmetric two-component mixture (see the module's docs): data
/// `xᵢ ~ ½N(μ₀, σ²) + ½N(γ − μ₀, σ²)`, model `Uᵢ(μ) = −log(½N(xᵢ; μ, σ²) + ½N(xᵢ; γ − μ, σ²))`,
/// prior `N(γ/2, s₀²)`. Swapping μ and γ − μ leaves likelihood and prior unchanged, so the
/// posterior weight of `μ < γ/2` is ½ exactly.
#[derive(Debug, Clone)]
pub struct MeanMixture {
    /// The data.
    pub x: Vec<f64>,
    /// γ.
    pub gamma: f64,
    /// σ.
    pub sigma: f64,
    /// The prior's standard deviation s₀.
    pub prior_sd: f64,
}

impl MeanMixture {
    /// The demonstration's data: μ₀ = −5, γ = 20, σ = 5, N = 1 000, prior sd 100.
    pub fn demo(seed: u64) -> Self {
        let (mu0, gamma, sigma, n) = (-5.0, 20.0, 5.0, 1_000);
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x1234_5678;
        let x = (0..n)
            .map(|_| {
                let centre = if uniform(&mut state) < 0.5 { mu0 } else { gamma - mu0 };
                centre + sigma * normal(&mut state)
            })
            .collect();
        MeanMixture { x, gamma, sigma, prior_sd: 100.0 }
    }

    /// The mirror point γ/2 that separates the two modes.
    pub fn midpoint(&self) -> f64 {
        0.5 * self.gamma
    }

    /// One datum's potential and its derivative in μ.
    #[inline]
    fn datum(&self, mu: f64, x: f64) -> (f64, f64) {
        let s2 = self.sigma * self.sigma;
        let (e1, e2) = ((x - mu) / self.sigma, (x - (self.gamma - mu)) / self.sigma);
        let (l1, l2) = (-0.5 * e1 * e1, -0.5 * e2 * e2);
        let m = l1.max(l2);
        let (p1, p2) = ((l1 - m).exp(), (l2 - m).exp());
        let lse = m + (p1 + p2).ln();
        let u = -(lse + (0.5f64).ln() - 0.5 * (2.0 * std::f64::consts::PI * s2).ln());
        // d/dμ of −log(...): responsibilities times the components' derivatives.
        let (r1, r2) = (p1 / (p1 + p2), p2 / (p1 + p2));
        let g = -(r1 * (x - mu) / s2 - r2 * (x - (self.gamma - mu)) / s2);
        (u, g)
    }

    /// The exact posterior density of μ on a grid (normalised numerically) and the weight of
    /// `μ < γ/2` from it: a check that the symmetry argument holds for these data.
    pub fn grid_weight(&self, lo: f64, hi: f64, points: usize) -> f64 {
        let h = (hi - lo) / points as f64;
        let us: Vec<f64> = (0..points)
            .map(|k| {
                let mu = lo + (k as f64 + 0.5) * h;
                let prior = 0.5 * ((mu - self.midpoint()) / self.prior_sd).powi(2);
                prior + self.x.iter().map(|&x| self.datum(mu, x).0).sum::<f64>()
            })
            .collect();
        let m = us.iter().copied().fold(f64::INFINITY, f64::min);
        let w: Vec<f64> = us.iter().map(|u| (m - u).exp()).collect();
        let below: f64 =
            w.iter().enumerate().filter(|(k, _)| lo + (*k as f64 + 0.5) * h < self.midpoint()).map(|(_, v)| v).sum();
        below / w.iter().sum::<f64>()
    }
}

impl Model for MeanMixture {
    fn dim(&self) -> usize {
        1
    }

    fn n_data(&self) -> usize {
        self.x.len()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        out[0] = (theta[0] - self.midpoint()) / (self.prior_sd * self.prior_sd);
        Ok(())
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out[0] = idx.iter().map(|&i| self.datum(theta[0], self.x[i]).1).sum();
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        Ok(0.5 * ((theta[0] - self.midpoint()) / self.prior_sd).powi(2))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        Ok(idx.iter().map(|&i| self.datum(theta[0], self.x[i]).0).sum())
    }
}
