//! Three models of real data a user would write, on data sets the crate does not design its
//! method around (`data/README.md`): a negative-binomial count regression (the crate's `Glm` on
//! `data/rwm1984.csv`), a varying-intercept model with a positive group scale and noise scale
//! (Project STAR reading scores by school, `data/star.csv`), and a Student-t regression with
//! positive σ and ν (Spanish households' food budget shares, `data/budgetfood.csv`). The last
//! two are hand-written `Model`s on the constrained scale, wrapped in `Constrained` so that
//! `Sample` reports τ, σ and ν as the user reads them. Used by `examples/real_data.rs`.
#![allow(dead_code)]

use sgmcmc::ndarray::Array2;
use sgmcmc::{Constrained, Family, Glm, GlmSettings, Layout, Model, Result};

/// The count GLM: doctor visits in 1984 (German health registry, N = 3 874) on being out of work,
/// age, sex, marriage, children, household income, years of education and self-employment, as
/// measured; negative binomial with the GLM's default (rstanarm-style, autoscaled) priors, r on
/// the log scale.
pub fn rwm1984() -> Result<Constrained<Glm>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/rwm1984.csv");
    Glm::from_csv(Family::NegativeBinomial, path, "docvis", &GlmSettings::default())?.constrained()
}

/// The rows of a CSV file with a header, split at commas.
fn csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or("").split(',').map(|s| s.trim().to_string()).collect();
    let rows = lines.map(|l| l.split(',').map(|s| s.trim().to_string()).collect()).collect();
    (header, rows)
}

/// `(x − mean)/sd` of a column.
fn standardise(v: &mut [f64]) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let s = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    v.iter_mut().for_each(|x| *x = (*x - m) / s);
}

/// A varying-intercept (random-intercept) regression, non-centred:
/// `yᵢ = μ + xᵢᵀβ + τ z_{s(i)} + εᵢ`, `εᵢ ~ N(0, σ²)`, `z_s ~ N(0, 1)`; or centred:
/// `yᵢ = μ + xᵢᵀβ + a_{s(i)} + εᵢ`, `a_s ~ N(0, τ²)`; priors `μ ~ N(0, 5²)`, `β ~ N(0, 2.5²)`,
/// `τ, σ ~ half-normal(1)` (the response and the covariates standardised). Parameters on the
/// constrained scale: `[μ, β (p), z or a (S), τ, σ]`. The same posterior of μ, β, τ, σ either
/// way; with many data per group (73 pupils per school here) the centred form is the one whose
/// posterior is close to Gaussian (the non-centred `τ z_s` is pinned by the data: a banana).
#[derive(Debug, Clone)]
pub struct VaryingIntercept {
    y: Vec<f64>,
    x: Array2<f64>,
    group: Vec<usize>,
    groups: usize,
    centred: bool,
}

impl VaryingIntercept {
    fn p(&self) -> usize {
        self.x.ncols()
    }

    /// The residual `yᵢ − μ − xᵢᵀβ − τ z_{s(i)}` of datum i at θ.
    fn fit(&self, theta: &[f64], i: usize) -> f64 {
        let p = self.p();
        let (mu, beta) = (theta[0], &theta[1..1 + p]);
        let z = &theta[1 + p..1 + p + self.groups];
        let tau = theta[1 + p + self.groups];
        let xb: f64 = self.x.row(i).iter().zip(beta).map(|(a, b)| a * b).sum();
        let scale = if self.centred { 1.0 } else { tau };
        self.y[i] - mu - xb - scale * z[self.group[i]]
    }
}

/// Project STAR's kindergarten reading scores (N = 5 748 pupils in 79 schools), standardised,
/// on class type (small, regular with aide; regular is the base), free lunch, sex, race (black,
/// other) and the teacher's years of experience (standardised), with a school intercept: `μ`,
/// `β` (6), `z` or `a` (79), `τ`, `σ` — d = 88; `centred` chooses the form.
pub fn star(centred: bool) -> Result<Constrained<VaryingIntercept>> {
    let (header, rows) = csv(include_str!("../../data/star.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).expect("a STAR column");
    let (read, class, exp, sex, lunch, race, school) =
        (col("treadssk"), col("classk"), col("totexpk"), col("sex"), col("freelunk"), col("race"), col("schidkn"));
    let mut ids: Vec<usize> = rows.iter().map(|r| r[school].parse().expect("a school id")).collect();
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    ids.iter_mut().for_each(|s| *s = distinct.binary_search(s).expect("listed"));
    let mut y: Vec<f64> = rows.iter().map(|r| r[read].parse().expect("a score")).collect();
    standardise(&mut y);
    let mut experience: Vec<f64> = rows.iter().map(|r| r[exp].parse().expect("years")).collect();
    standardise(&mut experience);
    let n = rows.len();
    let x = Array2::from_shape_fn((n, 6), |(i, j)| {
        let r = &rows[i];
        let flag = |b: bool| f64::from(u8::from(b));
        match j {
            0 => flag(r[class] == "small.class"),
            1 => flag(r[class] == "regular.with.aide"),
            2 => flag(r[lunch] == "yes"),
            3 => flag(r[sex] == "girl"),
            4 => flag(r[race] == "black"),
            _ => experience[i],
        }
    });
    // Race "other" is 27 pupils: folded into the base with white.
    let model = VaryingIntercept { y, x, group: ids, groups: distinct.len(), centred };
    let layout = Layout::new()
        .real("mu", &[])
        .real("beta", &[6])
        .real(if centred { "a" } else { "z" }, &[distinct.len()])
        .positive("tau", &[])
        .positive("sigma", &[]);
    Constrained::new(model, layout)
}

impl Model for VaryingIntercept {
    fn dim(&self) -> usize {
        1 + self.p() + self.groups + 2
    }

    fn n_data(&self) -> usize {
        self.y.len()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let p = self.p();
        out[0] = theta[0] / 25.0;
        for j in 0..p {
            out[1 + j] = theta[1 + j] / 6.25;
        }
        let k = 1 + p + self.groups;
        let tau = theta[k];
        if self.centred {
            let t2 = tau * tau;
            let mut ss = 0.0;
            for s in 0..self.groups {
                let a = theta[1 + p + s];
                out[1 + p + s] = a / t2;
                ss += a * a;
            }
            out[k] = tau - ss / (t2 * tau) + self.groups as f64 / tau;
        } else {
            for s in 0..self.groups {
                out[1 + p + s] = theta[1 + p + s];
            }
            out[k] = tau;
        }
        out[k + 1] = theta[k + 1];
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        let p = self.p();
        let k = 1 + p + self.groups;
        let beta: f64 = theta[1..1 + p].iter().map(|b| b * b).sum::<f64>() / 6.25;
        let z: f64 = theta[1 + p..k].iter().map(|z| z * z).sum();
        let tau = theta[k];
        let groups = if self.centred { z / (tau * tau) + 2.0 * self.groups as f64 * tau.ln() } else { z };
        Ok(0.5 * (theta[0] * theta[0] / 25.0 + beta + groups + tau * tau + theta[k + 1] * theta[k + 1]))
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        let p = self.p();
        let k = 1 + p + self.groups;
        let (tau, sigma) = (theta[k], theta[k + 1]);
        let s2 = sigma * sigma;
        for &i in idx {
            let e = self.fit(theta, i);
            let r = e / s2;
            let g = self.group[i];
            out[0] -= r;
            for (o, x) in out[1..1 + p].iter_mut().zip(self.x.row(i)) {
                *o -= r * x;
            }
            if self.centred {
                out[1 + p + g] -= r;
            } else {
                out[1 + p + g] -= r * tau;
                out[k] -= r * theta[1 + p + g];
            }
            out[k + 1] += 1.0 / sigma - e * e / (s2 * sigma);
        }
        Ok(())
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let k = 1 + self.p() + self.groups;
        let sigma = theta[k + 1];
        Ok(idx.iter().map(|&i| 0.5 * (self.fit(theta, i) / sigma).powi(2) + sigma.ln()).sum())
    }
}

/// A Student-t regression: `yᵢ = xᵢᵀb + σ εᵢ`, `εᵢ ~ t_ν`; priors `b ~ N(0, 1)` (covariates
/// standardised, the response a share in [0, 1]), `σ ~ half-normal(0.5)`, `ν ~ Gamma(2, 0.1)`
/// (Juárez & Steel 2010). Parameters on the constrained scale: `[b (p + 1), σ, ν]`.
#[derive(Debug, Clone)]
pub struct StudentT {
    y: Vec<f64>,
    x: Array2<f64>,
}

/// Spanish households' budget share of food in 1980 (N = 23 971 with every field present, of
/// 23 972) on an intercept, log total expenditure, the reference person's age, the household's
/// size, the town's size class (standardised) and a woman as reference person: `b` (6), `σ`, `ν`.
pub fn budget_food() -> Result<Constrained<StudentT>> {
    let (header, rows) = csv(include_str!("../../data/budgetfood.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).expect("a BudgetFood column");
    let rows: Vec<&Vec<String>> = rows.iter().filter(|r| r.iter().all(|v| v != "NA")).collect();
    let n = rows.len();
    let num = |r: &Vec<String>, c: usize| -> f64 { r[c].parse().expect("a number") };
    let y: Vec<f64> = rows.iter().map(|r| num(r, col("wfood"))).collect();
    let mut columns: Vec<Vec<f64>> = vec![
        rows.iter().map(|r| num(r, col("totexp")).ln()).collect(),
        rows.iter().map(|r| num(r, col("age"))).collect(),
        rows.iter().map(|r| num(r, col("size"))).collect(),
        rows.iter().map(|r| num(r, col("town"))).collect(),
    ];
    columns.iter_mut().for_each(|c| standardise(c));
    let woman: Vec<f64> = rows.iter().map(|r| f64::from(u8::from(r[col("sex")] == "woman"))).collect();
    let x = Array2::from_shape_fn((n, 6), |(i, j)| match j {
        0 => 1.0,
        5 => woman[i],
        _ => columns[j - 1][i],
    });
    let layout = Layout::new().real("b", &[6]).positive("sigma", &[]).positive("nu", &[]);
    Constrained::new(StudentT { y, x }, layout)
}

/// ψ(x), the digamma function, for x > 0: the recurrence up to x ≥ 6, then the asymptotic
/// series (error below 1e-12 there).
pub fn digamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 6.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    acc + x.ln() - 0.5 / x - f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (1.0 / 240.0 - f / 132.0))))
}

impl StudentT {
    fn p(&self) -> usize {
        self.x.ncols()
    }

    fn residual(&self, theta: &[f64], i: usize) -> f64 {
        let b = &theta[..self.p()];
        self.y[i] - self.x.row(i).iter().zip(b).map(|(a, b)| a * b).sum::<f64>()
    }
}

impl Model for StudentT {
    fn dim(&self) -> usize {
        self.p() + 2
    }

    fn n_data(&self) -> usize {
        self.y.len()
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let p = self.p();
        out[..p].copy_from_slice(&theta[..p]);
        out[p] = theta[p] / 0.25;
        out[p + 1] = -1.0 / theta[p + 1] + 0.1;
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        let p = self.p();
        let b: f64 = theta[..p].iter().map(|b| b * b).sum();
        Ok(0.5 * b + 0.5 * theta[p] * theta[p] / 0.25 - theta[p + 1].ln() + 0.1 * theta[p + 1])
    }

    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        let p = self.p();
        let (sigma, nu) = (theta[p], theta[p + 1]);
        let common = -0.5 * digamma(0.5 * (nu + 1.0)) + 0.5 * digamma(0.5 * nu) + 0.5 / nu;
        for &i in idx {
            let r = self.residual(theta, i) / sigma;
            let q = nu + r * r;
            let w = (nu + 1.0) * r / (sigma * q);
            for (o, x) in out[..p].iter_mut().zip(self.x.row(i)) {
                *o -= w * x;
            }
            out[p] += 1.0 / sigma - (nu + 1.0) * r * r / (sigma * q);
            out[p + 1] += common + 0.5 * (r * r / nu).ln_1p() - (nu + 1.0) * r * r / (2.0 * nu * q);
        }
        Ok(())
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let p = self.p();
        let (sigma, nu) = (theta[p], theta[p + 1]);
        let constant =
            -libm::lgamma(0.5 * (nu + 1.0)) + libm::lgamma(0.5 * nu) + 0.5 * (nu * std::f64::consts::PI).ln();
        Ok(idx
            .iter()
            .map(|&i| {
                let r = self.residual(theta, i) / sigma;
                constant + sigma.ln() + 0.5 * (nu + 1.0) * (r * r / nu).ln_1p()
            })
            .sum())
    }
}
