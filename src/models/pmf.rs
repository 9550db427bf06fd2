//! Bayesian probabilistic matrix factorisation (PMF) on sparse ratings.

use super::{row_dot, standard_normal};
use crate::error::{Error, Result, check_len, check_positive};
use crate::models::model::Model;
use crate::numeric::rng::stream;
use ndarray::ArrayView2;
use rand::RngExt;
use std::collections::BTreeMap;
use std::path::Path;

/// Observed entries `(user, item, rating)` of a ratings matrix, with dense 0-based indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratings {
    users: Vec<usize>,
    items: Vec<usize>,
    values: Vec<f64>,
    n_users: usize,
    n_items: usize,
}

impl Ratings {
    /// Ratings from parallel arrays of 0-based user indices, item indices and values, in a matrix
    /// of `n_users × n_items`.
    ///
    /// Errors: [`Error::DimensionMismatch`] for arrays of different lengths,
    /// [`Error::InvalidParameter`] for an index out of range or a non-finite rating.
    pub fn new(users: Vec<usize>, items: Vec<usize>, values: Vec<f64>, n_users: usize, n_items: usize) -> Result<Self> {
        check_len("items", users.len(), items.len())?;
        check_len("values", users.len(), values.len())?;
        if let Some(u) = users.iter().find(|&&u| u >= n_users) {
            return Err(Error::invalid("users", u, "user index must be below n_users"));
        }
        if let Some(i) = items.iter().find(|&&i| i >= n_items) {
            return Err(Error::invalid("items", i, "item index must be below n_items"));
        }
        crate::error::check_entries("values", &values, f64::is_finite, "ratings must be finite")?;
        Ok(Ratings { users, items, values, n_users, n_items })
    }

    /// Parses whitespace-separated lines `user item rating [anything]` (MovieLens `u.data`
    /// format); blank lines and lines starting with `#` are skipped. User and item identifiers
    /// (any non-negative integers) are mapped to dense indices in increasing order of identifier.
    ///
    /// Errors: [`Error::Parse`] with the 1-based line number; [`Error::EmptyData`] if no rating.
    pub fn parse(text: &str) -> Result<Self> {
        let mut raw = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut f = line.split_whitespace();
            let parse_err = |what: &str| Error::Parse { line: k + 1, reason: format!("{what} in {line:?}") };
            let u: u64 = f.next().and_then(|x| x.parse().ok()).ok_or_else(|| parse_err("bad user id"))?;
            let i: u64 = f.next().and_then(|x| x.parse().ok()).ok_or_else(|| parse_err("bad item id"))?;
            let r: f64 = f.next().and_then(|x| x.parse().ok()).ok_or_else(|| parse_err("bad rating"))?;
            if !r.is_finite() {
                return Err(parse_err("non-finite rating"));
            }
            raw.push((u, i, r));
        }
        if raw.is_empty() {
            return Err(Error::EmptyData { what: "no ratings in the input" });
        }
        let index = |ids: &mut dyn Iterator<Item = u64>| -> BTreeMap<u64, usize> {
            let set: std::collections::BTreeSet<u64> = ids.collect();
            set.into_iter().enumerate().map(|(k, id)| (id, k)).collect()
        };
        let um = index(&mut raw.iter().map(|x| x.0));
        let im = index(&mut raw.iter().map(|x| x.1));
        let users = raw.iter().map(|x| um[&x.0]).collect();
        let items = raw.iter().map(|x| im[&x.1]).collect();
        let values = raw.iter().map(|x| x.2).collect();
        Ratings::new(users, items, values, um.len(), im.len())
    }

    /// Reads and [`parse`](Self::parse)s a ratings file.
    ///
    /// Errors: [`Error::Io`] if the file cannot be read, then as `parse`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text)
    }

    /// Synthetic ratings from a seeded generator: true factors `Wᵤ, Hᵢ ~ N(0, I_K / √K)` (so a
    /// true rating `WᵤᵀHᵢ` has unit variance), `n_ratings` distinct-at-random entries (drawn with
    /// replacement of positions), each `WᵤᵀHᵢ + 3 + N(0, noise_sd²)` (a centre of 3 mimics a
    /// 1–5 star scale).
    pub fn synthetic(
        n_users: usize,
        n_items: usize,
        rank: usize,
        n_ratings: usize,
        noise_sd: f64,
        seed: u64,
    ) -> Result<Self> {
        if n_users == 0 || n_items == 0 || rank == 0 {
            return Err(Error::EmptyData { what: "n_users, n_items and rank must be >= 1" });
        }
        crate::error::check_non_negative("noise_sd", noise_sd)?;
        crate::error::check_bytes(
            "the synthetic ratings ((n_users + n_items) × rank factors and n_ratings × 3 numbers)",
            (n_users as u128 + n_items as u128) * rank as u128 * 8 + n_ratings as u128 * 24,
            Some(crate::error::DEFAULT_MEMORY_LIMIT),
        )?;
        let mut rng = stream(seed, &[0x9_3f_u64]);
        let s = (rank as f64).powf(-0.25);
        let w: Vec<f64> = (0..n_users * rank).map(|_| s * standard_normal(&mut rng)).collect();
        let h: Vec<f64> = (0..n_items * rank).map(|_| s * standard_normal(&mut rng)).collect();
        let mut users = Vec::with_capacity(n_ratings);
        let mut items = Vec::with_capacity(n_ratings);
        let mut values = Vec::with_capacity(n_ratings);
        for _ in 0..n_ratings {
            let u = rng.random_range(0..n_users);
            let i = rng.random_range(0..n_items);
            let r = row_dot(&w[u * rank..(u + 1) * rank], &h[i * rank..(i + 1) * rank]) + 3.0;
            users.push(u);
            items.push(i);
            values.push(r + noise_sd * standard_normal(&mut rng));
        }
        Ratings::new(users, items, values, n_users, n_items)
    }

    /// Splits into (train, test) with each rating in test with probability `test_fraction`,
    /// from a seeded generator; both keep the full index space.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<(Ratings, Ratings)> {
        if !(0.0..1.0).contains(&test_fraction) {
            return Err(Error::invalid("test_fraction", test_fraction, "must be in [0, 1)"));
        }
        let mut rng = stream(seed, &[0x5_b117]);
        let (mut tr, mut te) = (Vec::new(), Vec::new());
        for k in 0..self.len() {
            if rng.random::<f64>() < test_fraction { te.push(k) } else { tr.push(k) }
        }
        let pick = |ks: &[usize]| Ratings {
            users: ks.iter().map(|&k| self.users[k]).collect(),
            items: ks.iter().map(|&k| self.items[k]).collect(),
            values: ks.iter().map(|&k| self.values[k]).collect(),
            n_users: self.n_users,
            n_items: self.n_items,
        };
        Ok((pick(&tr), pick(&te)))
    }

    /// The number of ratings.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there is no rating.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The number of users (rows).
    pub fn n_users(&self) -> usize {
        self.n_users
    }

    /// The number of items (columns).
    pub fn n_items(&self) -> usize {
        self.n_items
    }

    /// The mean rating.
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.len().max(1) as f64
    }

    /// Rating k as `(user, item, value)`.
    pub fn get(&self, k: usize) -> Option<(usize, usize, f64)> {
        Some((*self.users.get(k)?, self.items[k], self.values[k]))
    }
}

/// Bayesian probabilistic matrix factorisation (Durmus et al. 2016, §5.2; Salakhutdinov & Mnih
/// 2008 with fixed hyper-parameters):
///
/// `W_{up} ~ N(0, σ_w²)`, `H_{ip} ~ N(0, σ_h²)`, `X_{ui} | W, H ~ N(m + Σ_p W_{up} H_{ip}, σ_x²)`
///
/// for the observed entries (u, i); m is a fixed offset (the training mean by default, so the
/// factors model deviations from it). One datum is one observed rating, so minibatches are sets
/// of ratings. The parameter vector is θ = (vec(W), vec(H)), W row-major (n_users × K) followed by
/// H row-major (n_items × K): `d = (n_users + n_items) K`.
///
/// Potentials: `U₀ = ‖W‖²/(2σ_w²) + ‖H‖²/(2σ_h²)`, `U_{ui} = (X_{ui} − m − WᵤᵀHᵢ)² / (2σ_x²)`.
/// θ = 0 is a saddle point: start chains from [`random_start`](Self::random_start).
#[derive(Debug, Clone)]
pub struct Pmf {
    train: Ratings,
    terms: PmfTerms,
}

/// A PMF potential's constants and the terms written once for [`Pmf`] and the distributed
/// block sampler of [`mf`](crate::mf) (whose [`MfModel`](crate::mf::MfModel) builds them):
/// the prediction `m + wᵀh`, the prior gradient and one rating's gradient. θ holds the rows
/// of W, then the rows of H, K entries each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PmfTerms {
    /// The rank K.
    pub(crate) k: usize,
    /// The offset m.
    pub(crate) offset: f64,
    /// σ_x², σ_w², σ_h² as given.
    pub(crate) vars: [f64; 3],
    /// 1/σ_x².
    pub(crate) inv_noise: f64,
    /// 1/σ_w².
    pub(crate) inv_prior_w: f64,
    /// 1/σ_h².
    pub(crate) inv_prior_h: f64,
}

impl PmfTerms {
    /// The terms of rank K, variances σ_x², σ_w², σ_h² and offset m (checked by
    /// [`check_pmf`]).
    pub(crate) fn new(rank: usize, noise_var: f64, prior_var_w: f64, prior_var_h: f64, offset: f64) -> Result<Self> {
        check_pmf(rank, noise_var, prior_var_w, prior_var_h)?;
        Ok(PmfTerms {
            k: rank,
            offset,
            vars: [noise_var, prior_var_w, prior_var_h],
            inv_noise: 1.0 / noise_var,
            inv_prior_w: 1.0 / prior_var_w,
            inv_prior_h: 1.0 / prior_var_h,
        })
    }

    /// The prediction `m + wᵀh`.
    #[inline(always)]
    pub(crate) fn predict(&self, w: &[f64], h: &[f64]) -> f64 {
        self.offset + row_dot(w, h)
    }

    /// `out = ∇U₀`: W's entries (the first `w_len` of θ) over σ_w², H's over σ_h².
    pub(crate) fn grad_prior(&self, w_len: usize, theta: &[f64], out: &mut [f64]) {
        for (o, t) in out[..w_len].iter_mut().zip(&theta[..w_len]) {
            *o = t * self.inv_prior_w;
        }
        for (o, t) in out[w_len..].iter_mut().zip(&theta[w_len..]) {
            *o = t * self.inv_prior_h;
        }
    }

    /// Adds `scale · ∇U_{ui}` of the rating `x` whose user row starts at `a` and item row at
    /// `b` in θ: `e = (m + WᵤᵀHᵢ − x) · scale/σ_x²`, `out_W += e Hᵢ`, `out_H += e Wᵤ`.
    #[inline(always)]
    pub(crate) fn add_rating(&self, theta: &[f64], a: usize, b: usize, x: f64, scale: f64, out: &mut [f64]) {
        let k = self.k;
        let e = (self.predict(&theta[a..a + k], &theta[b..b + k]) - x) * (scale * self.inv_noise);
        for p in 0..k {
            let (wp, hp) = (theta[a + p], theta[b + p]);
            out[a + p] += e * hp;
            out[b + p] += e * wp;
        }
    }
}

/// The checks of a PMF model's constants, shared by [`Pmf::new`] and the distributed
/// [`MfModel`](crate::mf::MfModel): rank ≥ 1 ([`Error::InvalidParameter`] `"rank"`) and positive
/// variances.
fn check_pmf(rank: usize, noise_var: f64, prior_var_w: f64, prior_var_h: f64) -> Result<()> {
    if rank == 0 {
        return Err(Error::invalid("rank", 0, "must be >= 1"));
    }
    check_positive("noise_var", noise_var)?;
    check_positive("prior_var_w", prior_var_w)?;
    check_positive("prior_var_h", prior_var_h)
}

impl Pmf {
    /// The model on training ratings with rank K, noise variance σ_x² and prior variances σ_w²,
    /// σ_h²; the offset m is the training mean.
    ///
    /// Errors: [`Error::EmptyData`] for no ratings, [`Error::InvalidParameter`] for K = 0
    /// (`"rank"`, as [`MfModel::validate`](crate::mf::MfModel::validate)) or non-positive
    /// variances.
    pub fn new(train: Ratings, rank: usize, noise_var: f64, prior_var_w: f64, prior_var_h: f64) -> Result<Self> {
        if train.is_empty() {
            return Err(Error::EmptyData { what: "no training ratings" });
        }
        let terms = PmfTerms::new(rank, noise_var, prior_var_w, prior_var_h, train.mean())?;
        Ok(Pmf { train, terms })
    }

    /// The rank K.
    pub fn rank(&self) -> usize {
        self.terms.k
    }

    /// The offset m added to every prediction.
    pub fn offset(&self) -> f64 {
        self.terms.offset
    }

    /// The noise variance σ_x².
    pub fn noise_var(&self) -> f64 {
        self.terms.vars[0]
    }

    /// The prior variance σ_w² of W.
    pub fn prior_var_w(&self) -> f64 {
        self.terms.vars[1]
    }

    /// The prior variance σ_h² of H.
    pub fn prior_var_h(&self) -> f64 {
        self.terms.vars[2]
    }

    /// The constants and terms shared with [`mf`](crate::mf).
    pub(crate) fn terms(&self) -> &PmfTerms {
        &self.terms
    }

    /// The training ratings.
    pub fn train(&self) -> &Ratings {
        &self.train
    }

    fn w_off(&self, u: usize) -> usize {
        u * self.terms.k
    }

    fn h_off(&self, i: usize) -> usize {
        (self.train.n_users + i) * self.terms.k
    }

    /// The predicted rating `m + WᵤᵀHᵢ` at θ.
    pub fn predict(&self, theta: &[f64], user: usize, item: usize) -> f64 {
        let k = self.terms.k;
        let (a, b) = (self.w_off(user), self.h_off(item));
        self.terms.predict(&theta[a..a + k], &theta[b..b + k])
    }

    /// A random starting point `θ ~ N(0, scale² I)` (θ = 0 is a saddle).
    pub fn random_start(&self, scale: f64, seed: u64) -> Vec<f64> {
        let mut rng = stream(seed, &[0x57a7]);
        (0..self.dim()).map(|_| scale * standard_normal(&mut rng)).collect()
    }

    fn check_test(&self, theta_len: usize, test: &Ratings) -> Result<()> {
        check_len("theta", self.dim(), theta_len)?;
        check_len("test n_users", self.train.n_users, test.n_users)?;
        check_len("test n_items", self.train.n_items, test.n_items)?;
        if test.is_empty() {
            return Err(Error::EmptyData { what: "no test ratings" });
        }
        Ok(())
    }

    /// Root-mean-square error of the predictions at θ on `test`.
    ///
    /// Errors: [`Error::DimensionMismatch`] if θ or the test index space do not match,
    /// [`Error::EmptyData`] for an empty test set.
    pub fn rmse(&self, theta: &[f64], test: &Ratings) -> Result<f64> {
        self.check_test(theta.len(), test)?;
        let se: f64 = (0..test.len())
            .map(|k| {
                let e = self.predict(theta, test.users[k], test.items[k]) - test.values[k];
                e * e
            })
            .sum();
        Ok((se / test.len() as f64).sqrt())
    }

    /// RMSE on `test` of the posterior-mean prediction: each rating predicted by the average of
    /// `m + WᵤᵀHᵢ` over the draws (rows of `draws`), the Bayesian predictive mean.
    pub fn rmse_of_mean_prediction(&self, draws: ArrayView2<'_, f64>, test: &Ratings) -> Result<f64> {
        self.check_test(draws.ncols(), test)?;
        if draws.nrows() == 0 {
            return Err(Error::NoSamples { reason: "no draws to average predictions over" });
        }
        let mut pred = vec![0.0; test.len()];
        for row in draws.outer_iter() {
            let t = row.as_slice().ok_or(Error::NotStored { what: "contiguous draws" })?;
            for (k, p) in pred.iter_mut().enumerate() {
                *p += self.predict(t, test.users[k], test.items[k]);
            }
        }
        let n = draws.nrows() as f64;
        let se: f64 = pred.iter().zip(&test.values).map(|(p, v)| (p / n - v).powi(2)).sum();
        Ok((se / test.len() as f64).sqrt())
    }
}

impl Model for Pmf {
    fn dim(&self) -> usize {
        (self.train.n_users + self.train.n_items) * self.terms.k
    }

    fn n_data(&self) -> usize {
        self.train.len()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.terms.grad_prior(self.train.n_users * self.terms.k, theta, out);
        Ok(())
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        for &r in idx {
            let (a, b) = (self.w_off(self.train.users[r]), self.h_off(self.train.items[r]));
            self.terms.add_rating(theta, a, b, self.train.values[r], 1.0, out);
        }
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        let split = self.train.n_users * self.terms.k;
        Ok(0.5 * self.terms.inv_prior_w * row_dot(&theta[..split], &theta[..split])
            + 0.5 * self.terms.inv_prior_h * row_dot(&theta[split..], &theta[split..]))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        Ok(idx
            .iter()
            .map(|&r| {
                let e = self.predict(theta, self.train.users[r], self.train.items[r]) - self.train.values[r];
                0.5 * self.terms.inv_noise * e * e
            })
            .sum())
    }

    fn hvp_prior(&self, _theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        self.grad_prior(v, out)
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        let k = self.terms.k;
        let s = self.terms.inv_noise;
        for &r in idx {
            let (a, b) = (self.w_off(self.train.users[r]), self.h_off(self.train.items[r]));
            let (w, h) = (&theta[a..a + k], &theta[b..b + k]);
            let (vw, vh) = (&v[a..a + k], &v[b..b + k]);
            let e = (self.terms.predict(w, h) - self.train.values[r]) * s;
            let c = (row_dot(h, vw) + row_dot(w, vh)) * s;
            for p in 0..k {
                out[a + p] += c * h[p] + e * vh[p];
                out[b + p] += c * w[p] + e * vw[p];
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        let r = Ratings::synthetic(5, 4, 2, 30, 0.3, 1).unwrap();
        let m = Pmf::new(r, 2, 0.5, 2.0, 3.0).unwrap();
        let theta = m.random_start(0.7, 2);
        let all: Vec<usize> = (0..m.n_data()).collect();
        let d = m.dim();
        let mut g = vec![0.0; d];
        m.grad_data_sum(&theta, &all, &mut g).unwrap();
        let mut gp = vec![0.0; d];
        m.grad_prior(&theta, &mut gp).unwrap();
        let u = |t: &[f64]| m.potential_data_sum(t, &all).unwrap() + m.potential_prior(t).unwrap();
        let h = 1e-6;
        for j in 0..d {
            let mut tp = theta.clone();
            let mut tm = theta.clone();
            tp[j] += h;
            tm[j] -= h;
            let fd = (u(&tp) - u(&tm)) / (2.0 * h);
            assert!((fd - g[j] - gp[j]).abs() < 1e-5 * (1.0 + fd.abs()), "grad {j}: {fd} vs {}", g[j] + gp[j]);
        }
        let v: Vec<f64> = (0..d).map(|j| ((j * 7) % 5) as f64 - 2.0).collect();
        let mut hv = vec![0.0; d];
        m.hvp_data_sum(&theta, &v, &all, &mut hv).unwrap();
        let tp: Vec<f64> = theta.iter().zip(&v).map(|(t, v)| t + h * v).collect();
        let tm: Vec<f64> = theta.iter().zip(&v).map(|(t, v)| t - h * v).collect();
        let (mut g1, mut g2) = (vec![0.0; d], vec![0.0; d]);
        m.grad_data_sum(&tp, &all, &mut g1).unwrap();
        m.grad_data_sum(&tm, &all, &mut g2).unwrap();
        for j in 0..d {
            let fd = (g1[j] - g2[j]) / (2.0 * h);
            assert!((fd - hv[j]).abs() < 1e-5 * (1.0 + fd.abs()), "hvp {j}: {fd} vs {}", hv[j]);
        }
    }

    #[test]
    fn parse_and_errors() {
        let r = Ratings::parse("# comment\n10 5 4 881250949\n\n3 5 2.5\n10 7 1 0\n").unwrap();
        assert_eq!((r.n_users(), r.n_items(), r.len()), (2, 2, 3));
        assert_eq!(r.get(0), Some((1, 0, 4.0)));
        assert_eq!(r.get(1), Some((0, 0, 2.5)));
        assert!(matches!(Ratings::parse("1 2 x\n"), Err(Error::Parse { line: 1, .. })));
        assert!(matches!(Ratings::parse("1 2 3\n4\n"), Err(Error::Parse { line: 2, .. })));
        assert!(matches!(Ratings::parse(""), Err(Error::EmptyData { .. })));
        assert!(matches!(Ratings::load("/nonexistent/u.data"), Err(Error::Io { .. })));
        assert!(matches!(
            Ratings::new(vec![0], vec![3], vec![1.0], 1, 3),
            Err(Error::InvalidParameter { name: "items", .. })
        ));
        let m = Pmf::new(r.clone(), 2, 1.0, 1.0, 1.0).unwrap();
        let theta = vec![0.0; m.dim()];
        // θ = 0 predicts the training mean everywhere.
        let rmse = m.rmse(&theta, &r).unwrap();
        let mean = r.mean();
        let expect = ((0..3).map(|k| (r.get(k).unwrap().2 - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        assert!((rmse - expect).abs() < 1e-12);
        assert!(matches!(m.rmse(&[0.0], &r), Err(Error::DimensionMismatch { .. })));
        assert!(matches!(Pmf::new(r, 0, 1.0, 1.0, 1.0), Err(Error::InvalidParameter { name: "rank", .. })));
    }
}
