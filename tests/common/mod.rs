//! Shared helpers of the statistical tests: exact stationary laws and Monte Carlo error.
#![allow(dead_code)]

use ndarray::{Array1, Array2};
use sgmcmc::{Estimate, LinearGaussian, Model};

/// Linear-Gaussian model with a correlated design: rows `a = (u, ρu + √(1−ρ²)v)`, `u, v ~ N(0,1)`.
pub fn correlated_model(n_data: usize, rho: f64, noise_var: f64, prior_var: f64, seed: u64) -> LinearGaussian {
    let base = LinearGaussian::synthetic(n_data, 2, noise_var, prior_var, seed).unwrap();
    let a = base.design();
    let design = Array2::from_shape_fn((n_data, 2), |(i, j)| {
        if j == 0 { a[[i, 0]] } else { rho * a[[i, 0]] + (1.0 - rho * rho).sqrt() * a[[i, 1]] }
    });
    let theta = Array1::from_vec(vec![0.7, -0.4]);
    let targets = design.dot(&theta) + Array1::from_vec(base.targets().to_vec()) - a.dot(base.true_theta().unwrap());
    LinearGaussian::new(&design, &targets, noise_var, prior_var).unwrap()
}

/// The minibatch-noise structure of the linear-Gaussian model, for the exact stationary laws.
///
/// With `gᵢ(θ) = N(Aᵢθ − bᵢ)` (`Aᵢ = aᵢaᵢᵀ/σx²`, `bᵢ = aᵢxᵢ/σx²`), a minibatch estimate is
/// `∇Ũ(θ) = ∇U(θ) + ξ` with `E[ξ | θ] = 0` and `Cov(ξ | θ) = (f/n) meanᵢ (Dᵢe + rᵢ)(Dᵢe + rᵢ)ᵀ`,
/// `e = θ − μ`, `Dᵢ = N Aᵢ − Σⱼ Aⱼ`, `rᵢ = Dᵢμ − (N bᵢ − Σⱼ bⱼ)`, and `f = 1` with replacement,
/// `f = (N − n)/(N − 1)` without (finite-population correction).
pub struct NoiseModel {
    pub h: Array2<f64>,
    pub mu: Array1<f64>,
    pub d_i: Vec<Array2<f64>>,
    pub r_i: Vec<Array1<f64>>,
    pub factor: f64,
}

impl NoiseModel {
    /// `batch_size = None` means the exact gradient (no minibatch noise).
    pub fn new(model: &LinearGaussian, batch_size: Option<(usize, bool)>) -> Self {
        Self::build(model, batch_size, None)
    }

    /// The control-variate estimator centred at `centre`: its noise is that of the plain
    /// minibatch estimator applied to `gᵢ(θ) − gᵢ(θ̂) = N Aᵢ (θ − θ̂)`, i.e. the same `Dᵢ` with
    /// `rᵢ = Dᵢ(μ − θ̂)`.
    pub fn control_variate(model: &LinearGaussian, batch_size: (usize, bool), centre: &Array1<f64>) -> Self {
        Self::build(model, Some(batch_size), Some(centre))
    }

    fn build(model: &LinearGaussian, batch_size: Option<(usize, bool)>, centre: Option<&Array1<f64>>) -> Self {
        let n = model.n_data();
        let d = model.dim();
        let s2 = model.noise_var();
        let a = model.design();
        let x = model.targets();
        let mu = model.posterior_mean().clone();
        let h = model.posterior_precision().clone();
        let (factor, with_noise) = match batch_size {
            None => (0.0, false),
            Some((b, true)) => (1.0 / b as f64, true),
            Some((b, false)) => ((n - b) as f64 / ((n - 1) as f64 * b as f64), true),
        };
        let mut d_i = Vec::new();
        let mut r_i = Vec::new();
        if with_noise {
            let mut sum_a = Array2::<f64>::zeros((d, d));
            let mut sum_b = Array1::<f64>::zeros(d);
            let ai: Vec<Array2<f64>> = (0..n)
                .map(|i| {
                    let r = a.row(i);
                    Array2::from_shape_fn((d, d), |(p, q)| r[p] * r[q] / s2)
                })
                .collect();
            let bi: Vec<Array1<f64>> = (0..n).map(|i| a.row(i).to_owned() * (x[i] / s2)).collect();
            for i in 0..n {
                sum_a += &ai[i];
                sum_b += &bi[i];
            }
            for i in 0..n {
                let di = &ai[i] * n as f64 - &sum_a;
                let ri = match centre {
                    Some(c) => di.dot(&(&mu - c)),
                    None => di.dot(&mu) - (&bi[i] * n as f64 - &sum_b),
                };
                d_i.push(di);
                r_i.push(ri);
            }
        }
        NoiseModel { h, mu, d_i, r_i, factor }
    }

    /// `factor · meanᵢ (Dᵢ Σ Dᵢᵀ + rᵢ rᵢᵀ)`: the stationary average of the gradient-noise
    /// covariance when the position covariance is Σ.
    pub fn noise_cov(&self, sigma: &Array2<f64>, include_r: bool) -> Array2<f64> {
        let d = self.mu.len();
        let mut acc = Array2::zeros((d, d));
        if self.d_i.is_empty() {
            return acc;
        }
        for (di, ri) in self.d_i.iter().zip(&self.r_i) {
            acc += &di.dot(sigma).dot(&di.t());
            if include_r {
                for p in 0..d {
                    for q in 0..d {
                        acc[[p, q]] += ri[p] * ri[q];
                    }
                }
            }
        }
        acc * (self.factor / self.d_i.len() as f64)
    }
}

/// Solves `X = T(X) + C` for a linear map T on m × m matrices, by vectorisation.
pub fn solve_fixed_point(m: usize, t: impl Fn(&Array2<f64>) -> Array2<f64>, c: &Array2<f64>) -> Array2<f64> {
    let k = m * m;
    let mut mat = Array2::<f64>::zeros((k, k));
    for col in 0..k {
        let mut e = Array2::zeros((m, m));
        e[[col / m, col % m]] = 1.0;
        let te = t(&e);
        for row in 0..k {
            mat[[row, col]] = e[[row / m, row % m]] - te[[row / m, row % m]];
        }
    }
    let rhs = Array1::from_iter(c.iter().copied());
    let x = crate::support::solve("fixed point", &mat, &rhs).unwrap();
    Array2::from_shape_fn((m, m), |(i, j)| x[i * m + j])
}

/// The exact stationary covariance of SGLD with constant step γ on the linear-Gaussian model:
/// `Σ = (I − γH)Σ(I − γH) + γ² noise_cov(Σ) + 2γI` (mean: exactly μ).
pub fn sgld_stationary_cov(nm: &NoiseModel, gamma: f64) -> Array2<f64> {
    let d = nm.mu.len();
    let f = Array2::<f64>::eye(d) - &nm.h * gamma;
    let c = nm.noise_cov(&Array2::zeros((d, d)), true) * gamma * gamma + Array2::<f64>::eye(d) * (2.0 * gamma);
    solve_fixed_point(d, |s| f.dot(s).dot(&f.t()) + nm.noise_cov(s, false) * (gamma * gamma), &c)
}

/// The exact stationary covariance of θ under SGHMC (β̂ = 0) with constant η and friction α:
/// state `x = (e, v)`, `x' = F x + [I; I](−ηξ + √(2αη) Z)`,
/// `F = [[I − ηH, (1−α)I], [−ηH, (1−α)I]]`. Returns the θ block.
pub fn sghmc_stationary_cov(nm: &NoiseModel, eta: f64, alpha: f64) -> Array2<f64> {
    let d = nm.mu.len();
    let m = 2 * d;
    let mut f = Array2::<f64>::zeros((m, m));
    for i in 0..d {
        for j in 0..d {
            let id = if i == j { 1.0 } else { 0.0 };
            f[[i, j]] = id - eta * nm.h[[i, j]];
            f[[i, d + j]] = (1.0 - alpha) * id;
            f[[d + i, j]] = -eta * nm.h[[i, j]];
            f[[d + i, d + j]] = (1.0 - alpha) * id;
        }
    }
    let spread = |q: &Array2<f64>| Array2::from_shape_fn((m, m), |(i, j)| q[[i % d, j % d]]);
    let c0 = nm.noise_cov(&Array2::zeros((d, d)), true) * (eta * eta) + Array2::<f64>::eye(d) * (2.0 * alpha * eta);
    let c = spread(&c0);
    let x = solve_fixed_point(
        m,
        |s| {
            let see = s.slice(ndarray::s![..d, ..d]).to_owned();
            f.dot(s).dot(&f.t()) + spread(&(nm.noise_cov(&see, false) * (eta * eta)))
        },
        &c,
    );
    x.slice(ndarray::s![..d, ..d]).to_owned()
}

/// The exact stationary covariance of full-gradient ULA on a Gaussian with precision P:
/// `(P (I − γP/2))⁻¹`.
pub fn ula_stationary_cov(p: &Array2<f64>, gamma: f64) -> Array2<f64> {
    let d = p.nrows();
    let m = p.dot(&(Array2::<f64>::eye(d) - p * (gamma / 2.0)));
    crate::support::spd_inverse("ULA", &((&m + &m.t()) * 0.5)).unwrap()
}

/// Per-chain statistics: the mean, and the second moment **about the exact mean `mu`** (so
/// that its expectation at stationarity is exactly the stationary covariance, with no
/// finite-chain bias from centring at the chain's own mean).
pub fn per_chain(est: &Estimate, mu: &Array1<f64>) -> (Vec<Array1<f64>>, Vec<Array2<f64>>) {
    let d = mu.len();
    (0..est.n_parts())
        .map(|c| {
            let p = est.part(c).unwrap();
            let cov =
                Array2::from_shape_fn((d, d), |(i, j)| p.expectation(|t| (t[i] - mu[i]) * (t[j] - mu[j])).unwrap());
            (p.mean().unwrap(), cov)
        })
        .unzip()
}

/// Grand mean and its standard error across independent replicates.
pub fn mean_se(xs: &[f64]) -> (f64, f64) {
    let r = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / r;
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (r - 1.0);
    (m, (v / r).sqrt())
}

/// Z-scores of replicate statistics (mean and each covariance entry) against targets.
/// Returns (label, estimate, target, se, z) rows.
pub fn z_scores(
    est: &Estimate,
    mean_target: &Array1<f64>,
    cov_target: &Array2<f64>,
) -> Vec<(String, f64, f64, f64, f64)> {
    let (means, covs) = per_chain(est, mean_target);
    let d = mean_target.len();
    let mut rows = Vec::new();
    for i in 0..d {
        let xs: Vec<f64> = means.iter().map(|m| m[i]).collect();
        let (m, se) = mean_se(&xs);
        rows.push((format!("mean[{i}]"), m, mean_target[i], se, (m - mean_target[i]) / se));
    }
    for i in 0..d {
        for j in i..d {
            let xs: Vec<f64> = covs.iter().map(|c| c[[i, j]]).collect();
            let (m, se) = mean_se(&xs);
            rows.push((format!("cov[{i},{j}]"), m, cov_target[[i, j]], se, (m - cov_target[[i, j]]) / se));
        }
    }
    rows
}

/// Asserts every |z| ≤ `limit`, printing the table.
pub fn assert_z(label: &str, rows: &[(String, f64, f64, f64, f64)], limit: f64) {
    eprintln!("{label}:");
    for (name, est, target, se, z) in rows {
        eprintln!("  {name:10} est {est:+.6e} target {target:+.6e} se {se:.2e} z {z:+.2}");
    }
    for (name, est, target, se, z) in rows {
        assert!(z.abs() <= limit, "{label}: {name} = {est:e} vs {target:e}: z = {z:.2} (se {se:.2e}) beyond {limit}");
    }
}

/// Central finite differences (step 1e-6) of `f` at `x`, coordinate by coordinate.
pub fn fd_gradient(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    let h = 1e-6;
    (0..x.len())
        .map(|j| {
            let (mut up, mut down) = (x.to_vec(), x.to_vec());
            up[j] += h;
            down[j] -= h;
            (f(&up) - f(&down)) / (2.0 * h)
        })
        .collect()
}

/// Largest absolute difference of `a` and `b`, relative to `max(1, max |b|)`.
pub fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    let s = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / s
}

/// Settings for `r` independent replicate chains (stored samples, run in parallel).
pub fn replicates(r: usize, n_iter: u64, burn_in: u64, thin: u64, seed: u64) -> sgmcmc::RunSettings {
    sgmcmc::RunSettings {
        n_iter,
        burn_in,
        thin,
        n_chains: r,
        seed,
        storage: sgmcmc::Storage::Samples,
        parallel: true,
        ..Default::default()
    }
}

/// Wraps a model and changes what it reports: the model-check tests' wrong models.
pub struct Altered<'a, M> {
    pub inner: &'a M,
    /// Multiplies every gradient (−1: the wrong sign; 2: a plain bug).
    pub factor: f64,
    /// Whether potentials are passed through.
    pub potentials: bool,
}

/// The error of a model method that is not provided.
fn unsupported(method: &'static str) -> sgmcmc::Error {
    sgmcmc::Error::Unsupported { method, needed_by: "a potential" }
}

impl<M: Model> Model for Altered<'_, M> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn n_data(&self) -> usize {
        self.inner.n_data()
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        self.inner.grad_prior(theta, out)?;
        out.iter_mut().for_each(|g| *g *= self.factor);
        Ok(())
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        self.inner.grad_data_sum(theta, idx, out)?;
        out.iter_mut().for_each(|g| *g *= self.factor);
        Ok(())
    }
    fn potential_prior(&self, theta: &[f64]) -> sgmcmc::Result<f64> {
        if self.potentials { self.inner.potential_prior(theta) } else { Err(unsupported("potential_prior")) }
    }
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> sgmcmc::Result<f64> {
        if self.potentials { self.inner.potential_data_sum(theta, idx) } else { Err(unsupported("potential_data_sum")) }
    }
}

/// The exact stationary covariance of whitened SGLD (`θ = μ + T φ`, `T Tᵀ = Σ`) with constant
/// step γ whose injected noise is `√(2γ) T S z`, `S Sᵀ = inj` (in φ), on the linear-Gaussian
/// model: `X = F X Fᵀ + γ² Σ noise_cov(X) Σ + 2γ T inj Tᵀ`, `F = I − γ Σ H` (mean: exactly μ).
pub fn whitened_sgld_stationary_cov(nm: &NoiseModel, t: &Array2<f64>, inj: &Array2<f64>, gamma: f64) -> Array2<f64> {
    let d = nm.mu.len();
    let sigma = t.dot(&t.t());
    let f = Array2::<f64>::eye(d) - sigma.dot(&nm.h) * gamma;
    let c = sigma.dot(&nm.noise_cov(&Array2::zeros((d, d)), true)).dot(&sigma) * (gamma * gamma)
        + t.dot(inj).dot(&t.t()) * (2.0 * gamma);
    solve_fixed_point(
        d,
        |s| f.dot(s).dot(&f.t()) + sigma.dot(&nm.noise_cov(s, false)).dot(&sigma) * (gamma * gamma),
        &c,
    )
}

/// The 2d × 2d block matrix `[[a, b], [c, e]]`.
fn blocks(a: &Array2<f64>, b: &Array2<f64>, c: &Array2<f64>, e: &Array2<f64>) -> Array2<f64> {
    let d = a.nrows();
    Array2::from_shape_fn((2 * d, 2 * d), |(i, j)| match (i < d, j < d) {
        (true, true) => a[[i, j]],
        (true, false) => b[[i, j - d]],
        (false, true) => c[[i - d, j]],
        (false, false) => e[[i - d, j - d]],
    })
}

/// One step of a kinetic Langevin scheme on the linear-Gaussian model, on the state
/// `x = (θ − μ, v)`: `x' = F x + G ξ + w`, ξ the gradient noise at the state's position, w ~ N(0, W).
pub struct KineticStep {
    pub f: Array2<f64>,
    pub g: Array2<f64>,
    pub w: Array2<f64>,
}

impl KineticStep {
    /// BAOAB as the crate runs it (one kick of h at the state's position, then A O A):
    /// `F = A O A B`, `G = A O A [0; −hI]`, `w = A [0; √(1 − e^{−2γh}) Z]`.
    pub fn baoab(p: &Array2<f64>, h: f64, gamma: f64) -> Self {
        let d = p.nrows();
        let (i, z) = (Array2::<f64>::eye(d), Array2::<f64>::zeros((d, d)));
        let b = blocks(&i, &z, &(p * -h), &i);
        let a = blocks(&i, &(&i * (h / 2.0)), &z, &i);
        let c = (-gamma * h).exp();
        let o = blocks(&i, &z, &z, &(&i * c));
        let aoa = a.dot(&o).dot(&a);
        let kick = blocks(&z, &z, &(&i * -h), &z);
        let s = (1.0 - c * c).sqrt();
        let noise = a.dot(&blocks(&z, &z, &(&i * s), &z));
        KineticStep {
            f: aoa.dot(&b),
            g: aoa.dot(&kick).slice(ndarray::s![.., ..d]).to_owned(),
            w: noise.dot(&noise.t()),
        }
    }

    /// UBU as the crate runs it (from the gradient's position: kick h, then the exact flow U(h)):
    /// `F = U B`, `G = U [0; −hI]`, W the flow's increments' covariance (closed forms).
    pub fn ubu(p: &Array2<f64>, h: f64, gamma: f64) -> Self {
        let d = p.nrows();
        let (i, z) = (Array2::<f64>::eye(d), Array2::<f64>::zeros((d, d)));
        let b = blocks(&i, &z, &(p * -h), &i);
        let eta = (-gamma * h).exp();
        let u = blocks(&i, &(&i * ((1.0 - eta) / gamma)), &z, &(&i * eta));
        let kick = blocks(&z, &z, &(&i * -h), &z);
        let var_theta = (2.0 * gamma * h - 3.0 + 4.0 * eta - eta * eta) / (gamma * gamma);
        let cov = (1.0 - eta).powi(2) / gamma;
        KineticStep {
            f: u.dot(&b),
            g: u.dot(&kick).slice(ndarray::s![.., ..d]).to_owned(),
            w: blocks(&(&i * var_theta), &(&i * cov), &(&i * cov), &(&i * (1.0 - eta * eta))),
        }
    }

    /// SGHMC (the Euler-type update) with learning rate η = h² and friction α = γh, for
    /// comparison: `v' = (1 − α)v − η∇Ũ + √(2αη) Z`, `θ' = θ + v'`.
    pub fn sghmc(p: &Array2<f64>, h: f64, gamma: f64) -> Self {
        let d = p.nrows();
        let (i, z) = (Array2::<f64>::eye(d), Array2::<f64>::zeros((d, d)));
        let (eta, alpha) = (h * h, gamma * h);
        let f = blocks(&(&i - &(p * eta)), &(&i * (1.0 - alpha)), &(p * -eta), &(&i * (1.0 - alpha)));
        let g = blocks(&(&i * -eta), &z, &(&i * -eta), &z).slice(ndarray::s![.., ..d]).to_owned();
        let s2 = 2.0 * alpha * eta;
        KineticStep { f, g, w: blocks(&(&i * s2), &(&i * s2), &(&i * s2), &(&i * s2)) }
    }

    /// The exact stationary covariance of θ: `X = F X Fᵀ + G noise(X_θθ) Gᵀ + W` (mean exactly μ).
    pub fn stationary_cov(&self, nm: &NoiseModel) -> Array2<f64> {
        let d = nm.mu.len();
        let c = self.g.dot(&nm.noise_cov(&Array2::zeros((d, d)), true)).dot(&self.g.t()) + &self.w;
        let x = solve_fixed_point(
            2 * d,
            |s| {
                let see = s.slice(ndarray::s![..d, ..d]).to_owned();
                self.f.dot(s).dot(&self.f.t()) + self.g.dot(&nm.noise_cov(&see, false)).dot(&self.g.t())
            },
            &c,
        );
        x.slice(ndarray::s![..d, ..d]).to_owned()
    }
}

/// An epoch's phase maps `(F_p, g_p, W_p)`, p = 0..K.
type PhaseMaps = Vec<(Array2<f64>, Array1<f64>, Array2<f64>)>;

/// The exact law of SGLD's draws (constant step γ, one draw per iteration) with minibatches of
/// n by epoch-wise random reshuffling on the linear-Gaussian model, by enumerating every
/// permutation of `0..N` (N ≤ 9): each epoch uses the K = ⌊N/n⌋ consecutive blocks of a
/// uniform permutation. A minibatch S makes the affine step `θ' = (I − γP_S)θ + γc_S + √(2γ)Z`
/// (`P_S = I/σθ² + (N/n)Σ_S aᵢaᵢᵀ/σx²`, `c_S = (N/n)Σ_S aᵢxᵢ/σx²`), so the state at an epoch's
/// start follows an i.i.d. random affine recursion whose stationary moments solve linear
/// equations, and the state p steps into an epoch is that start moved by the epoch's first p
/// blocks. Returns the mean and the covariance (about that mean) of the draws, every phase
/// p = 0..K−1 equally often.
pub fn reshuffled_sgld_law(model: &LinearGaussian, n: usize, gamma: f64) -> (Array1<f64>, Array2<f64>) {
    let (big_n, d) = (model.n_data(), model.dim());
    assert!(big_n <= 9, "enumerates N! permutations");
    let k = big_n / n;
    let a = model.design();
    let x = model.targets();
    let s2 = model.noise_var();
    let scale = big_n as f64 / n as f64;
    let step = |block: &[usize]| {
        let mut p = Array2::<f64>::eye(d) / model.prior_var();
        let mut c = Array1::<f64>::zeros(d);
        for &i in block {
            for r in 0..d {
                c[r] += scale * a[[i, r]] * x[i] / s2;
                for q in 0..d {
                    p[[r, q]] += scale * a[[i, r]] * a[[i, q]] / s2;
                }
            }
        }
        (Array2::<f64>::eye(d) - p * gamma, c * gamma)
    };
    // Every permutation (Heap's algorithm), and for each the phase maps θ_p = F_p θ_0 + g_p + w_p.
    let mut perm: Vec<usize> = (0..big_n).collect();
    let mut maps: Vec<PhaseMaps> = Vec::new();
    let mut add = |perm: &[usize]| {
        let mut phases = vec![(Array2::<f64>::eye(d), Array1::<f64>::zeros(d), Array2::<f64>::zeros((d, d)))];
        for b in 0..k {
            let (m, c) = step(&perm[b * n..(b + 1) * n]);
            let (f, g, w) = phases.last().unwrap();
            phases.push((m.dot(f), m.dot(g) + &c, m.dot(w).dot(&m.t()) + Array2::<f64>::eye(d) * (2.0 * gamma)));
        }
        maps.push(phases);
    };
    let mut c = vec![0usize; big_n];
    add(&perm);
    let mut i = 0;
    while i < big_n {
        if c[i] < i {
            if i % 2 == 0 {
                perm.swap(0, i)
            } else {
                perm.swap(c[i], i)
            }
            add(&perm);
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    let count = maps.len() as f64;
    let avg_mat = |f: &dyn Fn(&PhaseMaps) -> Array2<f64>| {
        maps.iter().map(f).fold(Array2::<f64>::zeros((d, d)), |s, m| s + m) / count
    };
    let avg_vec =
        |f: &dyn Fn(&PhaseMaps) -> Array1<f64>| maps.iter().map(f).fold(Array1::<f64>::zeros(d), |s, m| s + m) / count;
    // The epoch start: m₀ = E[F]m₀ + E[g], M₀ = E[F M₀ Fᵀ] + E[F m₀ gᵀ + g m₀ᵀ Fᵀ + g gᵀ + W].
    let ef = avg_mat(&|ph| ph[k].0.clone());
    let eg = avg_vec(&|ph| ph[k].1.clone());
    let lhs = Array2::<f64>::eye(d) - &ef;
    let m0 = crate::support::solve("epoch mean", &lhs, &eg).unwrap();
    let outer = |u: &Array1<f64>, v: &Array1<f64>| Array2::from_shape_fn((d, d), |(r, q)| u[r] * v[q]);
    let rest = |p: usize| {
        avg_mat(&|ph| {
            let (f, g, w) = &ph[p];
            let fm = f.dot(&m0);
            outer(&fm, g) + outer(g, &fm) + outer(g, g) + w
        })
    };
    let second0 = solve_fixed_point(d, |s| avg_mat(&|ph| ph[k].0.dot(s).dot(&ph[k].0.t())), &rest(k));
    let (mut mean, mut second) = (Array1::<f64>::zeros(d), Array2::<f64>::zeros((d, d)));
    for p in 0..k {
        mean += &(avg_mat(&|ph| ph[p].0.clone()).dot(&m0) + avg_vec(&|ph| ph[p].1.clone()));
        second += &(avg_mat(&|ph| ph[p].0.dot(&second0).dot(&ph[p].0.t())) + rest(p));
    }
    mean /= k as f64;
    second /= k as f64;
    let cov = &second - &outer(&mean, &mean);
    (mean, cov)
}
