//! The [`Glm`] model: its data, constructors (arrays, CSV, synthetic), potentials and gradients
//! per family.

use crate::error::{Error, Result, check_len};
use crate::models::glm::family::{Family, GlmSettings};
use crate::models::glm::special::poisson;
use crate::models::logistic::residual;
use crate::models::model::Model;
use crate::models::prior::Prior;
use crate::models::{BLOCK, Bits, DataScalar, Layout, Rows, row_dot, standard_normal};
use crate::numeric::prefetch::prefetch;
use crate::numeric::rng::stream;
use crate::numeric::special::{digamma, log_phi, mills, sigmoid, softplus, trigamma};
use ndarray::{Array1, Array2, AsArray, Ix2};
use rand::RngExt;

/// A Bayesian generalised linear model on dense features: linear (Gaussian, unknown σ),
/// logistic, probit, Poisson and negative binomial (unknown size r), with an intercept option,
/// offsets and weights.
///
/// θ = `(b₀, β₁ … β_p, aux)`: the intercept if [`GlmSettings::intercept`], the p coefficients,
/// and σ or r for the Gaussian and negative binomial families. Potentials:
/// `U₀ = Σⱼ Uⱼ(βⱼ) + U_b(b₀ + x̄ᵀβ) + U_aux(aux)` from the [`Prior`]s of [`GlmSettings`]
/// (up to their constants; `U_b(b₀)` without centring; read the defaults there: they are
/// weakly informative and scaled to the data, and `println!("{glm}")` prints the ones in use),
/// `Uᵢ = wᵢ · (−log p(yᵢ | ηᵢ, aux))` (full log densities, constants included). Gradients and Hessian-vector products are analytic; a minibatch
/// gradient processes rows in blocks of 16 with the same kernels as
/// [`LogisticRegression`](crate::LogisticRegression).
///
/// σ and r must stay positive: sample a family with one through [`Glm::constrained`] (a
/// [`Layout`] with `beta` real and `sigma` / `r` positive), which also names the summary rows.
/// The others are models on ℝᵈ as they are (`constrained` still names their rows).
///
/// The features are stored as `X`: f64 ([`new`](Self::new), [`from_csv`](Self::from_csv)), or
/// f32 ([`new_f32`](Glm::<f32>::new_f32), [`to_f32`](Self::to_f32)), which halves the memory a
/// minibatch gathers; parameters and arithmetic are f64 either way (see [`DataScalar`]).
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{Mala, MalaSettings};
/// use sgmcmc::{Family, Glm, GlmSettings};
///
/// let glm = Glm::synthetic(Family::Poisson, 2_000, 3, 1)?;
/// let model = glm.constrained()?; // names b0, beta[0..3]
/// let mala = Mala::new(MalaSettings::default())?;
/// let s = RunSettings { n_iter: 3_000, burn_in: 1_000, n_chains: 2, ..Default::default() };
/// let out = Runner::new(&model, &mala).start(&[0.0; 4]).settings(s).run()?;
/// println!("{}", model.summary_table(&out.estimate)?);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Glm<X: DataScalar = f64> {
    family: Family,
    rows: Rows<X>,
    y: Vec<f64>,
    /// `y` one bit per datum, for the 0/1 families (Logistic, Probit): the gradient's random
    /// reads of the responses then stay in the cache.
    y_bits: Option<Bits>,
    offset: Option<Vec<f64>>,
    weights: Option<Vec<f64>>,
    intercept: bool,
    /// The prior of each βⱼ, autoscaled.
    coef_priors: Vec<Prior>,
    /// The prior of the intercept (of `b₀ + x̄ᵀβ` with `xbar`), autoscaled.
    intercept_prior: Prior,
    /// The covariates' means, if the intercept's prior is centred.
    xbar: Option<Vec<f64>>,
    /// The prior of σ or r, autoscaled.
    aux_prior: Prior,
    /// `(ȳ, s_y)` if the priors were autoscaled (for printing).
    autoscaled: Option<(f64, f64)>,
    /// Column names (from a CSV header), for printing.
    column_names: Option<Vec<String>>,
    /// `lnΓ(yᵢ + 1)` (count families), for the potentials.
    log_fact: Vec<f64>,
    true_theta: Option<Vec<f64>>,
}

impl Glm<f64> {
    /// The model of `family` for features X (N × p; no column of ones: set
    /// `settings.intercept`) and responses y (N).
    ///
    /// Errors: [`Error::EmptyData`]; [`Error::DimensionMismatch`] for y, offsets or weights of
    /// another length; [`Error::InvalidParameter`] for non-finite features, offsets or
    /// responses, responses outside the family's support (`"y"`), weights that are not finite
    /// and > 0, or a prior whose numbers are not valid or that is exponential on a coefficient
    /// (named `prior`, `prior_intercept`, `coefficient_priors[j]`, `prior_aux`);
    /// [`Error::DimensionMismatch`] for `coefficient_priors` of another length than p.
    pub fn new<'a>(
        family: Family,
        features: impl AsArray<'a, f64, Ix2>,
        y: &Array1<f64>,
        settings: &GlmSettings,
    ) -> Result<Self> {
        Self::from_rows(family, Rows::from_array(features, "features")?, y, settings)
    }

    /// The model from named feature columns, one slice of N values per column (a data frame's
    /// columns, as the Python package passes them: the features are copied once, into the
    /// model's rows) and responses y (N). The summary rows are named after the columns, as
    /// [`from_csv`](Self::from_csv) names them.
    ///
    /// ```
    /// use sgmcmc::{Family, Glm, GlmSettings, Model};
    /// use sgmcmc::ndarray::Array1;
    ///
    /// let age = [23.0, 35.0, 41.0, 52.0, 60.0, 29.0];
    /// let dose = [1.0, 0.5, 2.0, 1.5, 0.0, 1.0];
    /// let y = Array1::from(vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0]);
    /// let glm = Glm::from_columns(Family::Logistic, &[("age", &age[..]), ("dose", &dose[..])], &y, &GlmSettings::default())?;
    /// assert_eq!(glm.parameter_names().unwrap()[1..], ["age", "dose"]);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    ///
    /// Errors: [`Error::InvalidParameter`] (`"columns"`) for two columns of the same name or
    /// columns of different lengths; as [`new`](Self::new).
    pub fn from_columns<S: AsRef<str>>(
        family: Family,
        columns: &[(S, &[f64])],
        y: &Array1<f64>,
        settings: &GlmSettings,
    ) -> Result<Self> {
        for (j, (h, _)) in columns.iter().enumerate() {
            if let Some(first) = columns[..j].iter().position(|(g, _)| g.as_ref() == h.as_ref()) {
                return Err(Error::invalid(
                    "columns",
                    format!("column `{}` (columns {first} and {j}, 0-based)", h.as_ref()),
                    "two columns have the same name",
                ));
            }
        }
        let slices: Vec<&[f64]> = columns.iter().map(|(_, c)| *c).collect();
        let mut glm = Self::from_rows(family, Rows::from_columns(&slices, "columns")?, y, settings)?;
        glm.column_names = Some(columns.iter().map(|(h, _)| h.as_ref().to_string()).collect());
        Ok(glm)
    }

    /// The model from a CSV file with a header line: the column named `response` is y, every
    /// other column a feature (numbers only, comma-separated, no quoting).
    ///
    /// Errors: [`Error::Io`] if the file cannot be read; [`Error::InvalidParameter`] (`"csv"`)
    /// naming the line and column of a field that is not a number, a row of another length, or
    /// a missing response column; as [`new`](Self::new).
    ///
    /// A logistic regression from a CSV file on the trustworthy path (the crate's
    /// `data/wdbc.csv`: 569 breast-cancer aspirates, 30 features as measured; see the
    /// `csv_logistic` example for the run to convergence, 100 000 × 4 draws, and the same draws
    /// from the seven calls by hand):
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::{GlmSettings};
    /// use sgmcmc::Family;
    ///
    /// let model = Glm::from_csv(Family::Logistic, "data/wdbc.csv", "benign", &GlmSettings::default())?;
    /// println!("{model}"); // the priors in use, named after the columns
    /// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(28))?;
    /// let fit = Sample::new(&model, sgld).draws(2_000).chains(4).seed(7).run()?;
    /// println!("{fit}"); // the step, the verdict with the step's bias, the summary table
    /// assert_eq!(fit.table.names[1], "radius_mean");
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn from_csv(
        family: Family,
        path: impl AsRef<std::path::Path>,
        response: &str,
        settings: &GlmSettings,
    ) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
        // Line numbers as an editor shows them (blank lines counted, skipped).
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let header: Vec<&str> = lines.next().map_or("", |(_, l)| l).split(',').map(str::trim).collect();
        for (j, h) in header.iter().enumerate() {
            if let Some(first) = header[..j].iter().position(|g| g == h) {
                return Err(Error::invalid(
                    "csv",
                    format!("column `{h}` (columns {} and {})", first + 1, j + 1),
                    "two columns of the header have the same name",
                ));
            }
        }
        let col = header
            .iter()
            .position(|h| *h == response)
            .ok_or_else(|| Error::invalid("csv", response, "no column of that name in the header"))?;
        let (mut xs, mut ys, mut n) = (Vec::new(), Vec::new(), 0);
        for (k, line) in lines {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != header.len() {
                return Err(Error::invalid("csv", format!("line {}", k + 1), "a row has another number of fields"));
            }
            for (j, f) in fields.iter().enumerate() {
                let v: f64 = f.parse().map_err(|_| {
                    Error::invalid("csv", format!("line {}, column `{}`: {f:?}", k + 1, header[j]), "not a number")
                })?;
                if !v.is_finite() {
                    return Err(Error::invalid(
                        "csv",
                        format!("line {}, column `{}`: {f:?}", k + 1, header[j]),
                        "not a finite number (NaN or ±∞): drop or impute the row",
                    ));
                }
                if j == col { ys.push(v) } else { xs.push(v) }
            }
            n += 1;
        }
        let p = header.len() - 1;
        // A constant covariate is the intercept again: its coefficient is identified by the prior
        // alone. Refused by name.
        if n > 1 {
            for (jx, name) in header.iter().filter(|h| **h != response).enumerate() {
                let first = xs[jx];
                if (1..n).all(|i| xs[i * p + jx] == first) {
                    return Err(Error::invalid(
                        "csv",
                        format!("column `{name}` = {first} in every row"),
                        "a constant covariate duplicates the intercept (its coefficient would be set by the prior alone): drop the column",
                    ));
                }
            }
        }
        let p = header.len() - 1;
        let x = Array2::from_shape_vec((n, p), xs).map_err(|_| Error::EmptyData { what: "no data rows in the CSV" })?;
        let mut glm = Self::new(family, &x, &Array1::from_vec(ys), settings)?;
        glm.column_names =
            Some(header.iter().enumerate().filter(|&(j, _)| j != col).map(|(_, h)| h.to_string()).collect());
        Ok(glm)
    }

    /// A synthetic data set from a seeded generator: features `N(0, 1)`, intercept 0.5,
    /// coefficients `N(0, 0.25/p)`, σ = 0.8 (Gaussian) or r = 3 (negative binomial), responses
    /// drawn from the family; no offsets or weights. [`true_theta`](Self::true_theta) keeps θ.
    pub fn synthetic(family: Family, n_data: usize, p: usize, seed: u64) -> Result<Self> {
        if p == 0 {
            return Err(Error::EmptyData { what: "no columns (p = 0)" });
        }
        crate::models::check_synthetic_size(n_data, p)?;
        let mut rng = stream(seed, &[0x61_6d]);
        let beta: Vec<f64> = (0..p).map(|_| (0.25 / p as f64).sqrt() * standard_normal(&mut rng)).collect();
        let x = Array2::from_shape_fn((n_data, p), |_| standard_normal(&mut rng));
        let aux = if family == Family::Gaussian { 0.8 } else { 3.0 };
        let y = Array1::from_shape_fn(n_data, |i| {
            let eta = 0.5 + x.row(i).iter().zip(&beta).map(|(a, b)| a * b).sum::<f64>();
            match family {
                Family::Gaussian => eta + aux * standard_normal(&mut rng),
                Family::Logistic => f64::from(u8::from(rng.random::<f64>() < sigmoid(eta))),
                Family::Probit => f64::from(u8::from(eta + standard_normal(&mut rng) > 0.0)),
                Family::Poisson => poisson(eta.exp(), &mut rng),
                Family::NegativeBinomial => {
                    use rand_distr::Distribution;
                    let lam = rand_distr::Gamma::new(aux, eta.exp() / aux).map_or(0.0, |g| g.sample(&mut rng));
                    poisson(lam, &mut rng)
                }
            }
        });
        let mut m = Self::new(family, &x, &y, &GlmSettings::default())?;
        let mut theta = vec![0.5];
        theta.extend(beta);
        if family.has_aux() {
            theta.push(aux);
        }
        m.true_theta = Some(theta);
        Ok(m)
    }

    /// The same model with its features stored in f32 (each rounded to the nearest f32, relative
    /// error ≤ 2⁻²⁴): half the memory, and half the bytes a minibatch gathers. Priors (already
    /// scaled to the f64 data), responses, offsets and weights are kept as they are; the
    /// gradients are those of the model on the rounded features, computed in f64 (see
    /// [`DataScalar`]).
    ///
    /// Errors: [`Error::InvalidParameter`] (`"features"`) if a feature is beyond f32's range.
    pub fn to_f32(&self) -> Result<Glm<f32>> {
        Ok(Glm {
            family: self.family,
            rows: self.rows.convert("features")?,
            y: self.y.clone(),
            y_bits: self.y_bits.clone(),
            offset: self.offset.clone(),
            weights: self.weights.clone(),
            intercept: self.intercept,
            coef_priors: self.coef_priors.clone(),
            intercept_prior: self.intercept_prior,
            xbar: self.xbar.clone(),
            aux_prior: self.aux_prior,
            autoscaled: self.autoscaled,
            column_names: self.column_names.clone(),
            log_fact: self.log_fact.clone(),
            true_theta: self.true_theta.clone(),
        })
    }
}

impl Glm<f32> {
    /// The model of `family` for features X stored in f32 (N × p) and responses y (N):
    /// [`new`](Glm::new) for data that are f32 already (its priors are scaled to the f32
    /// values). The gradients are exactly those of the f64 model on the same values (see
    /// [`DataScalar`]).
    ///
    /// Errors: as [`new`](Glm::new).
    pub fn new_f32<'a>(
        family: Family,
        features: impl AsArray<'a, f32, Ix2>,
        y: &Array1<f64>,
        settings: &GlmSettings,
    ) -> Result<Self> {
        Self::from_rows(family, Rows::from_array(features, "features")?, y, settings)
    }
}

impl<X: DataScalar> Glm<X> {
    /// The model on rows already stored (see [`new`](Glm::new)).
    fn from_rows(family: Family, rows: Rows<X>, y: &Array1<f64>, settings: &GlmSettings) -> Result<Self> {
        check_len("responses y", rows.n, y.len())?;
        let support = |v: f64| match family {
            Family::Gaussian => v.is_finite(),
            Family::Logistic | Family::Probit => v == 0.0 || v == 1.0,
            Family::Poisson | Family::NegativeBinomial => v >= 0.0 && v.fract() == 0.0 && v.is_finite(),
        };
        crate::error::check_entries("y", y, support, "outside the family's support (0/1, counts, or finite)")?;
        let offset = match &settings.offset {
            Some(o) => {
                check_len("offsets", rows.n, o.len())?;
                crate::error::check_entries("offset", o.iter(), f64::is_finite, "every offset must be finite")?;
                Some(o.to_vec())
            }
            None => None,
        };
        let weights = match &settings.weights {
            Some(w) => {
                check_len("weights", rows.n, w.len())?;
                crate::error::check_entries(
                    "weights",
                    w.iter(),
                    |v| v.is_finite() && v > 0.0,
                    "every weight must be finite and > 0",
                )?;
                Some(w.to_vec())
            }
            None => None,
        };
        let p = rows.d;
        let stated: Vec<Prior> = match &settings.coefficient_priors {
            Some(v) => {
                check_len("coefficient_priors", p, v.len())?;
                for (j, pr) in v.iter().enumerate() {
                    pr.validate("coefficient_priors", Some(j), false)?;
                }
                v.clone()
            }
            None => {
                settings.prior.validate("prior", None, false)?;
                vec![settings.prior; p]
            }
        };
        settings.prior_intercept.validate("prior_intercept", None, false)?;
        settings.prior_aux.validate("prior_aux", None, true)?;
        let n = rows.n as f64;
        let col_mean = |j: usize| (0..rows.n).map(|i| rows.at(i, j)).sum::<f64>() / n;
        let sd = |xs: &mut dyn Iterator<Item = f64>, mean: f64| {
            let ss: f64 = xs.map(|v| (v - mean) * (v - mean)).sum();
            if rows.n > 1 { (ss / (n - 1.0)).sqrt() } else { 0.0 }
        };
        let xbar: Vec<f64> = (0..p).map(col_mean).collect();
        let gaussian = family == Family::Gaussian;
        let (ybar, sy) = if gaussian {
            let m = y.sum() / n;
            let s = sd(&mut y.iter().copied(), m);
            (m, if s > 0.0 && s.is_finite() { s } else { 1.0 })
        } else {
            (0.0, 1.0)
        };
        let (coef_priors, intercept_prior, aux_prior, autoscaled) = if settings.autoscale {
            let coef = stated
                .iter()
                .enumerate()
                .map(|(j, pr)| {
                    let sx = sd(&mut (0..rows.n).map(|i| rows.at(i, j)), xbar[j]);
                    pr.rescaled(0.0, sy / if sx > 0.0 && sx.is_finite() { sx } else { 1.0 })
                })
                .collect();
            let aux = if gaussian { settings.prior_aux.rescaled(0.0, sy) } else { settings.prior_aux };
            (coef, settings.prior_intercept.rescaled(ybar, sy), aux, Some((ybar, sy)))
        } else {
            (stated, settings.prior_intercept, settings.prior_aux, None)
        };
        let log_fact = match family {
            Family::Poisson | Family::NegativeBinomial => y.iter().map(|&v| libm::lgamma(v + 1.0)).collect(),
            _ => Vec::new(),
        };
        let y = y.to_vec();
        let y_bits = matches!(family, Family::Logistic | Family::Probit).then(|| Bits::from_labels(&y));
        Ok(Glm {
            family,
            rows,
            y,
            y_bits,
            offset,
            weights,
            intercept: settings.intercept,
            coef_priors,
            intercept_prior,
            xbar: (settings.intercept && settings.centred_intercept).then_some(xbar),
            aux_prior,
            autoscaled,
            column_names: None,
            log_fact,
            true_theta: None,
        })
    }

    /// The parameter a synthetic data set was drawn from.
    pub fn true_theta(&self) -> Option<&[f64]> {
        self.true_theta.as_deref()
    }

    /// The family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The layout of θ: `b0` (if an intercept), `beta` (p of them), and `sigma` or `r` (positive).
    pub fn layout(&self) -> Layout {
        let mut l = Layout::new();
        if self.intercept {
            l = l.real("b0", &[]);
        }
        l = l.real("beta", &[self.rows.d]);
        if self.family.has_aux() {
            l = l.positive(self.family.aux_name(), &[]);
        }
        l
    }

    /// The model under its [`layout`](Self::layout): σ / r sampled on the log scale, summary
    /// rows named.
    pub fn constrained(self) -> Result<crate::models::Constrained<Glm<X>>> {
        let layout = self.layout();
        crate::models::Constrained::new(self, layout)
    }

    /// The priors in use, one per coordinate of θ in order, after
    /// [`autoscale`](GlmSettings::autoscale), each with its coordinate's name (`b0` — read
    /// `b0 + x̄ᵀβ` when the intercept's prior is centred —, `beta[j]`, `sigma` or `r`).
    pub fn priors(&self) -> Vec<(String, Prior)> {
        let mut out = Vec::with_capacity(self.dim());
        if self.intercept {
            out.push(("b0".to_string(), self.intercept_prior));
        }
        out.extend(self.coef_priors.iter().enumerate().map(|(j, pr)| (format!("beta[{j}]"), *pr)));
        if self.family.has_aux() {
            out.push((self.family.aux_name().to_string(), self.aux_prior));
        }
        out
    }

    /// The intercept the intercept's prior is on: `b₀ + x̄ᵀβ` if centred, else b₀.
    fn intercept_at_means(&self, theta: &[f64]) -> f64 {
        match &self.xbar {
            Some(xbar) => theta[0] + row_dot(xbar, &theta[1..1 + self.rows.d]),
            None => theta[0],
        }
    }

    fn n_coef(&self) -> usize {
        self.rows.d + usize::from(self.intercept)
    }

    fn aux(&self, theta: &[f64]) -> f64 {
        if self.family.has_aux() { theta[self.n_coef()] } else { 0.0 }
    }

    fn beta<'a>(&self, theta: &'a [f64]) -> &'a [f64] {
        let b = usize::from(self.intercept);
        &theta[b..b + self.rows.d]
    }

    fn eta_shift(&self, theta: &[f64], i: usize) -> f64 {
        let b0 = if self.intercept { theta[0] } else { 0.0 };
        b0 + self.offset.as_ref().map_or(0.0, |o| o[i])
    }

    fn weight(&self, i: usize) -> f64 {
        self.weights.as_ref().map_or(1.0, |w| w[i])
    }

    /// `(dU/dη, dU/daux)` of datum i at η (unweighted).
    #[inline(always)]
    fn d1(&self, eta: f64, y: f64, aux: f64) -> (f64, f64) {
        match self.family {
            Family::Gaussian => {
                let (r, s2) = (y - eta, aux * aux);
                (-r / s2, 1.0 / aux - r * r / (s2 * aux))
            }
            Family::Logistic => (residual(eta, y), 0.0),
            Family::Probit => {
                let q = 2.0 * y - 1.0;
                (-q * mills(q * eta), 0.0)
            }
            Family::Poisson => (eta.exp() - y, 0.0),
            Family::NegativeBinomial => {
                let (mu, r) = (eta.exp(), aux);
                let d_eta = (r + y) * mu / (r + mu) - y;
                let d_r = -(digamma(y + r) - digamma(r) + r.ln() + 1.0 - (r + mu).ln() - (r + y) / (r + mu));
                (d_eta, d_r)
            }
        }
    }

    /// `(d²U/dη², d²U/dη daux, d²U/daux²)` of datum i (unweighted).
    fn d2(&self, eta: f64, y: f64, aux: f64) -> (f64, f64, f64) {
        match self.family {
            Family::Gaussian => {
                let (r, s2) = (y - eta, aux * aux);
                (1.0 / s2, 2.0 * r / (s2 * aux), -1.0 / s2 + 3.0 * r * r / (s2 * s2))
            }
            Family::Logistic => {
                let p = sigmoid(eta);
                (p * (1.0 - p), 0.0, 0.0)
            }
            Family::Probit => {
                let q = 2.0 * y - 1.0;
                let l = mills(q * eta);
                (l * (q * eta + l), 0.0, 0.0)
            }
            Family::Poisson => (eta.exp(), 0.0, 0.0),
            Family::NegativeBinomial => {
                let (mu, r) = (eta.exp(), aux);
                let rm = r + mu;
                let h_ee = (r + y) * mu * r / (rm * rm);
                let h_er = mu * (mu - y) / (rm * rm);
                let h_rr = -(trigamma(y + r) - trigamma(r) + 1.0 / r - 1.0 / rm - (mu - y) / (rm * rm));
                (h_ee, h_er, h_rr)
            }
        }
    }

    /// `Uᵢ` (unweighted).
    fn potential(&self, eta: f64, i: usize, aux: f64) -> f64 {
        let y = self.y[i];
        match self.family {
            Family::Gaussian => {
                let r = y - eta;
                r * r / (2.0 * aux * aux) + aux.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln()
            }
            Family::Logistic => softplus(eta) - y * eta,
            Family::Probit => -log_phi((2.0 * y - 1.0) * eta),
            Family::Poisson => eta.exp() - y * eta + self.log_fact[i],
            Family::NegativeBinomial => {
                let (mu, r) = (eta.exp(), aux);
                -(libm::lgamma(y + r) - libm::lgamma(r) - self.log_fact[i] + r * r.ln() - (r + y) * (r + mu).ln()
                    + y * eta)
            }
        }
    }

    /// `out += ∇ of the block sums`, by [`Rows::add_gradient_blocks`] (η sixteen rows at a time,
    /// the per-datum derivatives, then the rows), the intercept's and σ/r's derivatives added
    /// after each block.
    fn add_gradient(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) {
        let beta = self.beta(theta);
        let aux = self.aux(theta);
        let b = usize::from(self.intercept);
        let p = self.rows.d;
        let (mut d_b0, mut d_aux) = (0.0, 0.0);
        // What the coefficients read of each datum, prefetched with its row: the response (its
        // bit copy for the 0/1 families), the offset and the weight.
        let side = |i: usize| {
            match &self.y_bits {
                Some(bits) => bits.prefetch(i),
                None => prefetch(&self.y[i]),
            }
            if let Some(o) = &self.offset {
                prefetch(&o[i]);
            }
            if let Some(w) = &self.weights {
                prefetch(&w[i]);
            }
        };
        self.rows.add_gradient_blocks(beta, idx, &mut out[b..b + p], side, |block, z| {
            let last = block[block.len() - 1];
            let y = match &self.y_bits {
                Some(bits) => {
                    let mut y = [bits.get(last); BLOCK];
                    for (yk, &i) in y.iter_mut().zip(block) {
                        *yk = bits.get(i);
                    }
                    y
                }
                None => {
                    let mut y = [self.y[last]; BLOCK];
                    for (yk, &i) in y.iter_mut().zip(block) {
                        *yk = self.y[i];
                    }
                    y
                }
            };
            if self.intercept || self.offset.is_some() {
                for (zk, &i) in z.iter_mut().zip(block) {
                    *zk += self.eta_shift(theta, i);
                }
            }
            let mut block_aux = 0.0;
            match self.family {
                // Fixed-length loops over the whole (padded) block, which the compiler
                // vectorises; the padding is zeroed by the caller.
                Family::Logistic => {
                    for (zk, &yk) in z.iter_mut().zip(&y) {
                        *zk = residual(*zk, yk);
                    }
                }
                Family::Poisson => {
                    for (zk, &yk) in z.iter_mut().zip(&y) {
                        *zk = zk.exp() - yk;
                    }
                }
                _ => {
                    for (k, &i) in block.iter().enumerate() {
                        let (g, ga) = self.d1(z[k], y[k], aux);
                        z[k] = g;
                        block_aux += self.weight(i) * ga;
                    }
                }
            }
            if let Some(w) = &self.weights {
                for (zk, &i) in z.iter_mut().zip(block) {
                    *zk *= w[i];
                }
            }
            // Summed per block, then over blocks: the order of the code before the blocks
            // were shared with LogisticRegression (its draws are unchanged).
            if self.intercept {
                d_b0 += z[..block.len()].iter().sum::<f64>();
            }
            d_aux += block_aux;
        });
        if self.intercept {
            out[0] += d_b0;
        }
        if self.family.has_aux() {
            out[b + p] += d_aux;
        }
    }
}

/// The model and the priors in use, as [`Glm::priors`], one per line: what a run of this
/// model assumes.
impl<X: DataScalar> std::fmt::Display for Glm<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, p) = (self.rows.n, self.rows.d);
        writeln!(
            f,
            "{:?} GLM: N = {n}, {p} covariates{}",
            self.family,
            if self.intercept { " and an intercept" } else { "" }
        )?;
        match self.autoscaled {
            Some((ybar, sy)) if self.family == Family::Gaussian => writeln!(
                f,
                "priors (weakly informative, scaled to the data: mean(y) = {ybar:.4}, sd(y) = {sy:.4}, sd of each covariate):"
            )?,
            Some(_) => writeln!(f, "priors (weakly informative, scaled to the sd of each covariate):")?,
            None => writeln!(f, "priors (as stated):")?,
        }
        for (name, pr) in self.priors() {
            let what = match name.as_str() {
                "b0" if self.xbar.is_some() => "b0 + mean(x)'beta (the intercept at the covariates' means)".to_string(),
                _ => match (name.strip_prefix("beta[").and_then(|r| r.strip_suffix(']')), &self.column_names) {
                    (Some(j), Some(cols)) => {
                        format!("{name} ({})", j.parse::<usize>().ok().and_then(|j| cols.get(j)).map_or("", |c| c))
                    }
                    _ => name.clone(),
                },
            };
            let half = matches!(name.as_str(), "sigma" | "r")
                && matches!(pr, Prior::Normal { location, .. } | Prior::StudentT { location, .. } if location == 0.0);
            writeln!(f, "  {what} ~ {}{pr}", if half { "half-" } else { "" })?;
        }
        Ok(())
    }
}

impl<X: DataScalar> Model for Glm<X> {
    fn dim(&self) -> usize {
        self.n_coef() + usize::from(self.family.has_aux())
    }

    /// `b0` (if there is an intercept), each coefficient's CSV column name (`beta[j]` without a
    /// header) and `sigma` / `r`: the names of [`priors`](Glm::priors) with the columns'.
    fn parameter_names(&self) -> Option<Vec<String>> {
        let coef = |j: usize| match &self.column_names {
            Some(cols) => cols.get(j).cloned().unwrap_or_else(|| format!("beta[{j}]")),
            None => format!("beta[{j}]"),
        };
        let mut names = Vec::with_capacity(self.dim());
        if self.intercept {
            names.push("b0".to_string());
        }
        names.extend((0..self.rows.d).map(coef));
        if self.family.has_aux() {
            names.push(self.family.aux_name().to_string());
        }
        Some(names)
    }

    fn n_data(&self) -> usize {
        self.rows.n
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        let b = usize::from(self.intercept);
        let p = self.rows.d;
        for ((o, t), pr) in out[b..b + p].iter_mut().zip(&theta[b..b + p]).zip(&self.coef_priors) {
            *o = pr.gradient(*t);
        }
        if self.intercept {
            let g = self.intercept_prior.gradient(self.intercept_at_means(theta));
            out[0] = g;
            if let Some(xbar) = &self.xbar {
                crate::models::axpy(g, xbar, &mut out[1..1 + p]);
            }
        }
        if self.family.has_aux() {
            out[b + p] = self.aux_prior.gradient(theta[b + p]);
        }
        Ok(())
    }

    /// By blocks of 16 rows, in index order (the order depends on `idx` only); on data larger
    /// than the L2 cache, rows are prefetched 16 ahead of use. Allocates nothing.
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        self.add_gradient(theta, idx, out);
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        let b = usize::from(self.intercept);
        let p = self.rows.d;
        let mut u: f64 = theta[b..b + p].iter().zip(&self.coef_priors).map(|(t, pr)| pr.potential(*t)).sum();
        if self.intercept {
            u += self.intercept_prior.potential(self.intercept_at_means(theta));
        }
        if self.family.has_aux() {
            u += self.aux_prior.potential(theta[b + p]);
        }
        Ok(u)
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        let (beta, aux) = (self.beta(theta), self.aux(theta));
        Ok(idx
            .iter()
            .map(|&i| {
                let eta = row_dot(self.rows.row(i), beta) + self.eta_shift(theta, i);
                self.weight(i) * self.potential(eta, i, aux)
            })
            .sum())
    }

    fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        let b = usize::from(self.intercept);
        let p = self.rows.d;
        for (((o, t), x), pr) in out[b..b + p].iter_mut().zip(&theta[b..b + p]).zip(&v[b..b + p]).zip(&self.coef_priors)
        {
            *o = pr.curvature(*t) * x;
        }
        if self.intercept {
            let c = self.intercept_prior.curvature(self.intercept_at_means(theta));
            match &self.xbar {
                Some(xbar) => {
                    let h = c * (v[0] + row_dot(xbar, &v[1..1 + p]));
                    out[0] = h;
                    crate::models::axpy(h, xbar, &mut out[1..1 + p]);
                }
                None => out[0] = c * v[0],
            }
        }
        if self.family.has_aux() {
            out[b + p] = self.aux_prior.curvature(theta[b + p]) * v[b + p];
        }
        Ok(())
    }

    fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        check_len("hvp direction v", self.dim(), v.len())?;
        out.fill(0.0);
        let (beta, aux) = (self.beta(theta), self.aux(theta));
        let b = usize::from(self.intercept);
        let p = self.rows.d;
        let vb0 = if self.intercept { v[0] } else { 0.0 };
        let va = if self.family.has_aux() { v[b + p] } else { 0.0 };
        for &i in idx {
            let x = self.rows.row(i);
            let eta = row_dot(x, beta) + self.eta_shift(theta, i);
            let (h_ee, h_ea, h_aa) = self.d2(eta, self.y[i], aux);
            let w = self.weight(i);
            let s = row_dot(x, &v[b..b + p]) + vb0;
            let c = w * (h_ee * s + h_ea * va);
            crate::models::axpy(c, x, &mut out[b..b + p]);
            if self.intercept {
                out[0] += c;
            }
            if self.family.has_aux() {
                out[b + p] += w * (h_ea * s + h_aa * va);
            }
        }
        Ok(())
    }
}
