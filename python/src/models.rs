//! The models a Python user builds: the crate's built-in ones from NumPy arrays, a Python object
//! called once per gradient, and compiled functions (numba `cfunc`s) called through pointers; all
//! behind one `Model` class that holds an `Arc<dyn Model>`.

use crate::errors::{invalid, to_py};
use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyAny;
use sgmcmc::ndarray::Array1;
use sgmcmc::{Constrained, Error, Family, Glm, GlmSettings, Layout, LinearGaussian, LogisticRegression, Model, Prior};
use sgmcmc::{Temperature, Tempered};
use std::sync::Arc;

/// A model shared between Python and the run's threads.
pub type Dyn = dyn Model + Send + Sync;

/// A model for `sgmcmc.sample`: the crate's `Model` behind a shared pointer.
#[pyclass(frozen, name = "Model", module = "sgmcmc._core")]
pub struct PyModel {
    pub inner: Arc<Dyn>,
    /// What the model is, for `repr` (the built-in models print their priors).
    pub description: String,
    /// The names `sample` reports under when the user gives none and the layout's would say
    /// less (a constrained `Glm` from a data frame: its columns, not `beta[j]`).
    pub report_names: Option<Vec<String>>,
}

#[pymethods]
impl PyModel {
    /// The number of parameters d (on the sampler's, unconstrained, scale).
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// The number of data N.
    #[getter]
    fn n_data(&self) -> usize {
        self.inner.n_data()
    }

    /// The names of the reported quantities (the layout's blocks for a constrained model, a
    /// data frame's columns for a `Glm` made from one), or None.
    #[getter]
    fn names(&self) -> Option<Vec<String>> {
        if let Some(n) = &self.report_names {
            return Some(n.clone());
        }
        match self.inner.output_layout() {
            Some(l) => Some(l.names()),
            None => self.inner.parameter_names(),
        }
    }

    /// The blocks of a constrained model's layout: `[(name, shape, constraint), ...]`, or None.
    #[getter]
    fn blocks(&self) -> Option<Vec<(String, Vec<usize>, String)>> {
        self.inner.output_layout().map(|l| {
            l.blocks().iter().map(|b| (b.name.clone(), b.shape.clone(), format!("{:?}", b.constraint))).collect()
        })
    }

    /// `∇U₀(θ)`, the prior potential's gradient.
    fn grad_prior<'py>(&self, py: Python<'py>, theta: Vec<f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let mut out = vec![0.0; self.inner.dim()];
        check_theta(self.inner.as_ref(), &theta)?;
        self.inner.grad_prior(&theta, &mut out).map_err(|e| to_py(py, &e))?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// `Σ_{i ∈ idx} ∇Uᵢ(θ)`.
    fn grad_data_sum<'py>(
        &self,
        py: Python<'py>,
        theta: Vec<f64>,
        idx: Vec<usize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        check_theta(self.inner.as_ref(), &theta)?;
        check_idx(self.inner.as_ref(), &idx)?;
        let mut out = vec![0.0; self.inner.dim()];
        self.inner.grad_data_sum(&theta, &idx, &mut out).map_err(|e| to_py(py, &e))?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// `U(θ)` over all the data (prior and likelihood), where the model provides potentials.
    fn potential(&self, py: Python<'_>, theta: Vec<f64>) -> PyResult<f64> {
        check_theta(self.inner.as_ref(), &theta)?;
        let all: Vec<usize> = (0..self.inner.n_data()).collect();
        let u = self.inner.potential_prior(&theta).and_then(|u0| Ok(u0 + self.inner.potential_data_sum(&theta, &all)?));
        u.map_err(|e| to_py(py, &e))
    }

    /// The same model with its likelihood at temperature `likelihood` and its prior at `prior`
    /// (`U_T = U₀ / prior + Σ Uᵢ / likelihood`); `tempered(t)` is the posterior at T = t.
    #[pyo3(signature = (likelihood, prior=None))]
    fn tempered(&self, py: Python<'_>, likelihood: f64, prior: Option<f64>) -> PyResult<PyModel> {
        let t = match prior {
            Some(p) => Temperature::new(likelihood, p),
            None => Temperature::posterior(likelihood),
        };
        let m = Tempered::new(Shared(self.inner.clone()), t).map_err(|e| to_py(py, &e))?;
        Ok(PyModel {
            inner: Arc::new(m),
            report_names: None,
            description: format!("{} at temperature {t:?}", self.description),
        })
    }

    /// The same model with named, constrained parameter blocks: `blocks` is a list of
    /// `(name, shape, constraint)` with constraint one of "real", "positive",
    /// ("interval", lower, upper), "simplex", "ordered", "cholesky_corr"; the model's own
    /// gradients are on the constrained scale θ, the sampler runs on the unconstrained φ, and
    /// draws are reported on θ.
    fn constrained(&self, py: Python<'_>, blocks: Vec<(String, Vec<usize>, Bound<'_, PyAny>)>) -> PyResult<PyModel> {
        let mut layout = Layout::new();
        for (name, shape, c) in &blocks {
            layout = if let Ok(kind) = c.extract::<String>() {
                match kind.as_str() {
                    "real" => layout.real(name, shape),
                    "positive" => layout.positive(name, shape),
                    "simplex" => layout.simplex(name, shape.iter().product()),
                    "ordered" => layout.ordered(name, shape.iter().product()),
                    "cholesky_corr" => layout.cholesky_corr(name, shape.first().copied().unwrap_or(0)),
                    other => {
                        return Err(to_py(
                            py,
                            &invalid(
                                "constraint",
                                other,
                                "one of real, positive, (interval, lower, upper), simplex, ordered, cholesky_corr",
                            ),
                        ));
                    }
                }
            } else if let Ok((kind, lower, upper)) = c.extract::<(String, f64, f64)>() {
                if kind != "interval" {
                    return Err(to_py(
                        py,
                        &invalid("constraint", kind, "a tuple constraint is (interval, lower, upper)"),
                    ));
                }
                layout.interval(name, shape, lower, upper)
            } else {
                return Err(to_py(py, &invalid("constraint", c.to_string(), "a string or (interval, lower, upper)")));
            };
        }
        let m = Constrained::new(Shared(self.inner.clone()), layout).map_err(|e| to_py(py, &e))?;
        Ok(PyModel {
            inner: Arc::new(m),
            report_names: None,
            description: format!("{} (constrained)", self.description),
        })
    }

    fn __repr__(&self) -> String {
        self.description.clone()
    }
}

fn check_theta(m: &Dyn, theta: &[f64]) -> PyResult<()> {
    if theta.len() == m.dim() {
        return Ok(());
    }
    let e = Error::DimensionMismatch { what: "theta", expected: m.dim(), got: theta.len() };
    Python::attach(|py| Err(to_py(py, &e)))
}

pub(crate) fn check_idx(m: &Dyn, idx: &[usize]) -> PyResult<()> {
    match idx.iter().find(|&&i| i >= m.n_data()) {
        Some(i) => {
            Python::attach(|py| Err(to_py(py, &invalid("idx", *i, "every index must be below the model's n_data"))))
        }
        None => Ok(()),
    }
}

/// A shared model as a `Model` (for the wrappers: tempering, constraints).
pub struct Shared(pub Arc<Dyn>);

/// Forwards every method of [`Model`] to `$inner`, after `$guard(method)?` (so that optional
/// methods keep the inner model's implementation, not the trait's defaults).
macro_rules! forward_model {
    ($ty:ty, |$s:ident| $inner:expr, $guard:expr) => {
        impl Model for $ty {
            fn dim(&self) -> usize {
                let $s = self;
                $inner.dim()
            }
            fn n_data(&self) -> usize {
                let $s = self;
                $inner.n_data()
            }
            fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
                let $s = self;
                $guard($s, "grad_prior")?;
                $inner.grad_prior(theta, out)
            }
            fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
                let $s = self;
                $guard($s, "grad_data_sum")?;
                $inner.grad_data_sum(theta, idx, out)
            }
            fn potential_prior(&self, theta: &[f64]) -> sgmcmc::Result<f64> {
                let $s = self;
                $guard($s, "potential_prior")?;
                $inner.potential_prior(theta)
            }
            fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> sgmcmc::Result<f64> {
                let $s = self;
                $guard($s, "potential_data_sum")?;
                $inner.potential_data_sum(theta, idx)
            }
            fn potential_and_grad_data_sum(
                &self,
                theta: &[f64],
                idx: &[usize],
                out: &mut [f64],
            ) -> sgmcmc::Result<f64> {
                let $s = self;
                $guard($s, "potential_and_grad_data_sum")?;
                $inner.potential_and_grad_data_sum(theta, idx, out)
            }
            fn hvp_prior(&self, theta: &[f64], v: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
                let $s = self;
                $guard($s, "hvp_prior")?;
                $inner.hvp_prior(theta, v, out)
            }
            fn hvp_data_sum(&self, theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
                let $s = self;
                $guard($s, "hvp_data_sum")?;
                $inner.hvp_data_sum(theta, v, idx, out)
            }
            fn output_layout(&self) -> Option<&Layout> {
                let $s = self;
                $inner.output_layout()
            }
            fn parameter_names(&self) -> Option<Vec<String>> {
                let $s = self;
                $inner.parameter_names()
            }
        }
    };
}
pub(crate) use forward_model;

forward_model!(Shared, |s| s.0, |_: &Shared, _: &str| -> sgmcmc::Result<()> { Ok(()) });

// ---- Built-in models from arrays. ---------------------------------------------------------------

/// Features as f64 or f32, viewed in place (copied once, into the model's rows).
#[derive(FromPyObject)]
pub enum Features<'py> {
    F64(PyReadonlyArray2<'py, f64>),
    F32(PyReadonlyArray2<'py, f32>),
}

fn built<M: Model + Send + Sync + 'static>(
    py: Python<'_>,
    m: sgmcmc::Result<M>,
    description: String,
) -> PyResult<PyModel> {
    let m = m.map_err(|e| to_py(py, &e))?;
    Ok(PyModel { inner: Arc::new(m), description, report_names: None })
}

fn vector(y: PyReadonlyArray1<'_, f64>) -> Array1<f64> {
    y.as_array().to_owned()
}

/// `LogisticRegression(X, y, prior_var)`: the built-in Bayesian logistic regression.
#[pyfunction]
pub fn logistic_regression(
    py: Python<'_>,
    x: Features<'_>,
    y: PyReadonlyArray1<'_, f64>,
    prior_var: f64,
) -> PyResult<PyModel> {
    let y = vector(y);
    let description = format!("LogisticRegression(N = {}, prior N(0, {prior_var} I))", y.len());
    match x {
        Features::F64(x) => built(
            py,
            {
                let xv = x.as_array();
                py.detach(|| LogisticRegression::new(xv, &y, prior_var))
            },
            description,
        ),
        Features::F32(x) => built(
            py,
            {
                let xv = x.as_array();
                py.detach(|| LogisticRegression::new_f32(xv, &y, prior_var))
            },
            description,
        ),
    }
}

/// The crate's synthetic logistic regression (the quickstart's model).
#[pyfunction]
pub fn logistic_regression_synthetic(
    py: Python<'_>,
    n_data: usize,
    dim: usize,
    prior_var: f64,
    seed: u64,
) -> PyResult<PyModel> {
    let m = py.detach(|| LogisticRegression::synthetic(n_data, dim, prior_var, seed));
    built(
        py,
        m,
        format!("LogisticRegression.synthetic(N = {n_data}, d = {dim}, prior N(0, {prior_var} I), seed {seed})"),
    )
}

/// `LinearGaussian(X, y, noise_var, prior_var)`: Bayesian linear regression with known noise.
#[pyfunction]
pub fn linear_gaussian(
    py: Python<'_>,
    x: Features<'_>,
    y: PyReadonlyArray1<'_, f64>,
    noise_var: f64,
    prior_var: f64,
) -> PyResult<PyModel> {
    let y = vector(y);
    let description = format!("LinearGaussian(N = {}, noise var {noise_var}, prior N(0, {prior_var} I))", y.len());
    match x {
        Features::F64(x) => built(
            py,
            {
                let xv = x.as_array();
                py.detach(|| LinearGaussian::new(xv, &y, noise_var, prior_var))
            },
            description,
        ),
        Features::F32(x) => built(
            py,
            {
                let xv = x.as_array();
                py.detach(|| LinearGaussian::new_f32(xv, &y, noise_var, prior_var))
            },
            description,
        ),
    }
}

/// A synthetic model with its exact posterior mean and covariance (rows).
type Synthetic<'py> = (PyModel, Bound<'py, PyArray1<f64>>, Vec<Vec<f64>>);

/// The crate's synthetic linear-Gaussian model, with its exact posterior mean and covariance.
#[pyfunction]
pub fn linear_gaussian_synthetic<'py>(
    py: Python<'py>,
    n_data: usize,
    dim: usize,
    noise_var: f64,
    prior_var: f64,
    seed: u64,
) -> PyResult<Synthetic<'py>> {
    let m =
        py.detach(|| LinearGaussian::synthetic(n_data, dim, noise_var, prior_var, seed)).map_err(|e| to_py(py, &e))?;
    let mean = PyArray1::from_vec(py, m.posterior_mean().to_vec());
    let cov = m.posterior_covariance().rows().into_iter().map(|r| r.to_vec()).collect();
    let description = format!("LinearGaussian.synthetic(N = {n_data}, d = {dim}, seed {seed})");
    Ok((PyModel { inner: Arc::new(m), description, report_names: None }, mean, cov))
}

/// A prior from Python: `("normal", loc, scale)`, `("student_t", df, loc, scale)`,
/// `("cauchy", loc, scale)`, `("half_normal", scale)`, `("half_cauchy", scale)`,
/// `("exponential", rate)`, `"flat"`.
fn prior(py: Python<'_>, name: &'static str, p: &Bound<'_, PyAny>) -> PyResult<Prior> {
    let bad = |why: &'static str| to_py(py, &invalid(name, p.to_string(), why));
    if let Ok(s) = p.extract::<String>() {
        return if s == "flat" {
            Ok(Prior::flat())
        } else {
            Err(bad("a prior is \"flat\" or a tuple (family, numbers...)"))
        };
    }
    let t: Vec<Bound<'_, PyAny>> = p.extract().map_err(|_| bad("a prior is a tuple (family, numbers...)"))?;
    let kind: String = t.first().ok_or_else(|| bad("empty tuple"))?.extract().map_err(|_| bad("the family first"))?;
    let nums: Vec<f64> = t[1..]
        .iter()
        .map(|v| v.extract::<f64>())
        .collect::<PyResult<_>>()
        .map_err(|_| bad("numbers after the family"))?;
    let want = |k: usize| {
        if nums.len() == k {
            Ok(())
        } else {
            Err(bad(
                "normal and cauchy take 2 numbers (location, scale), student_t 3 (df, location, scale), half_normal, half_cauchy and exponential 1",
            ))
        }
    };
    Ok(match kind.as_str() {
        "normal" => want(2).map(|_| Prior::normal(nums[0], nums[1]))?,
        "student_t" => want(3).map(|_| Prior::student_t(nums[0], nums[1], nums[2]))?,
        "cauchy" => want(2).map(|_| Prior::cauchy(nums[0], nums[1]))?,
        "half_normal" => want(1).map(|_| Prior::half_normal(nums[0]))?,
        "half_cauchy" => want(1).map(|_| Prior::half_cauchy(nums[0]))?,
        "exponential" => want(1).map(|_| Prior::exponential(nums[0]))?,
        _ => return Err(bad("normal, student_t, cauchy, half_normal, half_cauchy, exponential or flat")),
    })
}

fn family(py: Python<'_>, f: &str) -> PyResult<Family> {
    Ok(match f {
        "gaussian" => Family::Gaussian,
        "logistic" => Family::Logistic,
        "probit" => Family::Probit,
        "poisson" => Family::Poisson,
        "negative_binomial" => Family::NegativeBinomial,
        _ => {
            return Err(to_py(
                py,
                &invalid("family", f, "one of gaussian, logistic, probit, poisson, negative_binomial"),
            ));
        }
    })
}

/// The GLM's keyword options, as the Python layer passes them (a dict with every key; `None`
/// keeps the crate's default).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct GlmOptions<'py> {
    intercept: bool,
    prior: Bound<'py, PyAny>,
    prior_intercept: Bound<'py, PyAny>,
    prior_aux: Bound<'py, PyAny>,
    coefficient_priors: Option<Vec<Bound<'py, PyAny>>>,
    autoscale: bool,
    centred_intercept: bool,
    offset: Option<PyReadonlyArray1<'py, f64>>,
    weights: Option<PyReadonlyArray1<'py, f64>>,
}

impl GlmOptions<'_> {
    /// The crate's settings.
    #[allow(clippy::field_reassign_with_default)]
    fn settings(self, py: Python<'_>) -> PyResult<GlmSettings> {
        let mut s = GlmSettings::default();
        s.intercept = self.intercept;
        if !self.prior.is_none() {
            s.prior = prior(py, "prior", &self.prior)?;
        }
        if !self.prior_intercept.is_none() {
            s.prior_intercept = prior(py, "prior_intercept", &self.prior_intercept)?;
        }
        if !self.prior_aux.is_none() {
            s.prior_aux = prior(py, "prior_aux", &self.prior_aux)?;
        }
        if let Some(c) = self.coefficient_priors {
            s.coefficient_priors = Some(c.iter().map(|p| prior(py, "coefficient_priors", p)).collect::<PyResult<_>>()?);
        }
        s.autoscale = self.autoscale;
        s.centred_intercept = self.centred_intercept;
        s.offset = self.offset.map(vector);
        s.weights = self.weights.map(vector);
        Ok(s)
    }
}

fn glm_model<X: sgmcmc::DataScalar>(py: Python<'_>, glm: sgmcmc::Result<Glm<X>>) -> PyResult<PyModel>
where
    Glm<X>: Model + std::fmt::Display + Send + Sync + 'static,
{
    let glm = glm.map_err(|e| to_py(py, &e))?;
    let description = format!("{glm}");
    if !glm.family().has_aux() {
        // On ℝᵈ as it is: its rows are named by the model (a data frame's columns).
        return built(py, Ok(glm), description);
    }
    // σ or r positive through the layout; the rows keep the model's names (b0, the columns, σ).
    let report_names = glm.parameter_names();
    let m = built(py, glm.constrained(), description)?;
    Ok(PyModel { report_names, ..m })
}

/// `Glm(X, y, family, ...)`: the built-in GLM (σ or r positive through its layout).
#[pyfunction]
pub fn glm(
    py: Python<'_>,
    x: Features<'_>,
    y: PyReadonlyArray1<'_, f64>,
    family: &str,
    options: GlmOptions<'_>,
) -> PyResult<PyModel> {
    let f = self::family(py, family)?;
    let s = options.settings(py)?;
    let y = vector(y);
    match x {
        Features::F64(x) => glm_model(py, {
            let xv = x.as_array();
            py.detach(|| Glm::new(f, xv, &y, &s))
        }),
        Features::F32(x) => glm_model(py, {
            let xv = x.as_array();
            py.detach(|| Glm::new_f32(f, xv, &y, &s))
        }),
    }
}

/// `Glm` from named columns (a data frame's), each a 1-D float64 array viewed in place.
#[pyfunction]
pub fn glm_columns(
    py: Python<'_>,
    names: Vec<String>,
    columns: Vec<PyReadonlyArray1<'_, f64>>,
    y: PyReadonlyArray1<'_, f64>,
    family: &str,
    options: GlmOptions<'_>,
) -> PyResult<PyModel> {
    let f = self::family(py, family)?;
    let s = options.settings(py)?;
    let y = vector(y);
    if names.len() != columns.len() {
        return Err(to_py(py, &invalid("columns", columns.len(), "one name per column")));
    }
    let slices: Vec<&[f64]> = columns
        .iter()
        .map(|c| c.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|_| to_py(py, &invalid("columns", "a strided column", "every column must be contiguous")))?;
    let named: Vec<(&str, &[f64])> = names.iter().map(String::as_str).zip(slices).collect();
    glm_model(py, py.detach(|| Glm::from_columns(f, &named, &y, &s)))
}

/// The crate's synthetic GLM.
#[pyfunction]
pub fn glm_synthetic(py: Python<'_>, family: &str, n_data: usize, p: usize, seed: u64) -> PyResult<PyModel> {
    let f = self::family(py, family)?;
    glm_model(py, py.detach(|| Glm::synthetic(f, n_data, p, seed)))
}

// ---- The user's model as Python code. ------------------------------------------------------------

/// A Python object with `grad_prior(theta)` and `grad_data_sum(theta, idx)` (NumPy arrays in
/// and out), and optionally `potential_prior(theta)` and `potential_data_sum(theta, idx)`.
struct Callable {
    obj: Py<PyAny>,
    dim: usize,
    n_data: usize,
    potentials: bool,
}

fn failure(method: &'static str, e: PyErr) -> Error {
    Error::ModelFailure { method, iteration: None, message: format!("the Python model raised {e}") }
}

impl Callable {
    fn vector_call(
        &self,
        method: &'static str,
        theta: &[f64],
        idx: Option<&[usize]>,
        out: &mut [f64],
    ) -> sgmcmc::Result<()> {
        Python::attach(|py| {
            let th = PyArray1::from_slice(py, theta);
            let r = match idx {
                Some(idx) => self.obj.call_method1(py, method, (th, PyArray1::from_slice(py, idx))),
                None => self.obj.call_method1(py, method, (th,)),
            }
            .map_err(|e| failure(method, e))?;
            let wrong = |got: usize| Error::ModelFailure {
                method,
                iteration: None,
                message: format!("the Python model returned {got} numbers for a gradient of dimension {}", out.len()),
            };
            // A float64 NumPy array is read in place; anything else (a list, another dtype)
            // through Python's sequence protocol.
            if let Ok(a) = r.extract::<PyReadonlyArray1<'_, f64>>(py) {
                let a = a.as_array();
                if a.len() != out.len() {
                    return Err(wrong(a.len()));
                }
                for (o, v) in out.iter_mut().zip(a.iter()) {
                    *o = *v;
                }
                return Ok(());
            }
            let v: Vec<f64> = r.extract(py).map_err(|e| failure(method, e))?;
            if v.len() != out.len() {
                return Err(wrong(v.len()));
            }
            out.copy_from_slice(&v);
            Ok(())
        })
    }

    fn scalar_call(&self, method: &'static str, theta: &[f64], idx: Option<&[usize]>) -> sgmcmc::Result<f64> {
        if !self.potentials {
            return Err(Error::Unsupported { method, needed_by: "a potential" });
        }
        Python::attach(|py| {
            let th = PyArray1::from_slice(py, theta);
            let r = match idx {
                Some(idx) => self.obj.call_method1(py, method, (th, PyArray1::from_slice(py, idx))),
                None => self.obj.call_method1(py, method, (th,)),
            }
            .map_err(|e| failure(method, e))?;
            r.extract::<f64>(py).map_err(|e| failure(method, e))
        })
    }
}

impl Model for Callable {
    fn dim(&self) -> usize {
        self.dim
    }
    fn n_data(&self) -> usize {
        self.n_data
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        self.vector_call("grad_prior", theta, None, out)
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        self.vector_call("grad_data_sum", theta, Some(idx), out)
    }
    fn potential_prior(&self, theta: &[f64]) -> sgmcmc::Result<f64> {
        self.scalar_call("potential_prior", theta, None)
    }
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> sgmcmc::Result<f64> {
        self.scalar_call("potential_data_sum", theta, Some(idx))
    }
}

/// The user's model as a Python object (see `sgmcmc.PythonModel`).
#[pyfunction]
pub fn python_model(obj: Py<PyAny>, dim: usize, n_data: usize, potentials: bool) -> PyResult<PyModel> {
    let description = format!("PythonModel(d = {dim}, N = {n_data})");
    Ok(PyModel { inner: Arc::new(Callable { obj, dim, n_data, potentials }), description, report_names: None })
}

// ---- The user's model as compiled functions (numba cfuncs). -------------------------------------

/// `int32 grad_prior(const double* theta, int64 d, double* out)`.
type GradPrior = unsafe extern "C" fn(*const f64, i64, *mut f64) -> i32;
/// `int32 grad_data_sum(const double* theta, int64 d, const int64* idx, int64 n_idx, double* out,
/// const double* x, int64 n_rows, int64 n_cols, const double* y)`.
type GradData =
    unsafe extern "C" fn(*const f64, i64, *const i64, i64, *mut f64, *const f64, i64, i64, *const f64) -> i32;

/// Compiled functions and the data they read: numba `cfunc`s of the signatures above.
///
/// SAFETY (the audited island of this crate): the function pointers are the addresses of
/// compiled functions of those signatures (sgmcmc.NumbaModel compiles them from the user's njit
/// functions, and keeps them alive in `_keep`), which read `d` numbers at `theta`, `n_idx`
/// indices at `idx`, the data arrays within their shapes, and write `d` numbers at `out` (or one
/// for the potentials). The data arrays are C-contiguous float64 NumPy arrays kept alive by
/// `_keep` and never written: their pointers stay valid and the functions may run on several
/// threads at once (they are pure: numba cfuncs take no lock and hold no state).
struct Compiled {
    dim: usize,
    n_data: usize,
    grad_prior: GradPrior,
    grad_data: GradData,
    potential_prior: Option<GradPrior>,
    potential_data: Option<GradData>,
    x: *const f64,
    x_shape: (i64, i64),
    y: *const f64,
    _keep: Py<PyAny>,
}

// SAFETY: see `Compiled`: read-only data kept alive by `_keep`, and pure functions.
unsafe impl Send for Compiled {}
// SAFETY: as above.
unsafe impl Sync for Compiled {}

const _: () = assert!(std::mem::size_of::<usize>() == std::mem::size_of::<i64>(), "64-bit platforms only");

fn code(method: &'static str, rc: i32) -> sgmcmc::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::ModelFailure { method, iteration: None, message: format!("the compiled function returned {rc}") })
    }
}

impl Model for Compiled {
    fn dim(&self) -> usize {
        self.dim
    }
    fn n_data(&self) -> usize {
        self.n_data
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        debug_assert!(theta.len() == self.dim && out.len() == self.dim);
        // SAFETY: see `Compiled`; theta and out hold d numbers (the samplers' contract).
        code("grad_prior", unsafe { (self.grad_prior)(theta.as_ptr(), self.dim as i64, out.as_mut_ptr()) })
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        // SAFETY: see `Compiled`; usize and i64 have one size (asserted above) and the indices
        // are below n_data, so each is a valid non-negative i64.
        code("grad_data_sum", unsafe {
            (self.grad_data)(
                theta.as_ptr(),
                self.dim as i64,
                idx.as_ptr().cast::<i64>(),
                idx.len() as i64,
                out.as_mut_ptr(),
                self.x,
                self.x_shape.0,
                self.x_shape.1,
                self.y,
            )
        })
    }
    fn potential_prior(&self, theta: &[f64]) -> sgmcmc::Result<f64> {
        let Some(f) = self.potential_prior else {
            return Err(Error::Unsupported { method: "potential_prior", needed_by: "a potential" });
        };
        let mut u = 0.0;
        // SAFETY: see `Compiled`; the potential writes one number.
        code("potential_prior", unsafe { f(theta.as_ptr(), self.dim as i64, &mut u) })?;
        Ok(u)
    }
    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> sgmcmc::Result<f64> {
        let Some(f) = self.potential_data else {
            return Err(Error::Unsupported { method: "potential_data_sum", needed_by: "a potential" });
        };
        let mut u = 0.0;
        // SAFETY: as grad_data_sum; the potential writes one number.
        code("potential_data_sum", unsafe {
            f(
                theta.as_ptr(),
                self.dim as i64,
                idx.as_ptr().cast::<i64>(),
                idx.len() as i64,
                &mut u,
                self.x,
                self.x_shape.0,
                self.x_shape.1,
                self.y,
            )
        })?;
        Ok(u)
    }
}

/// A model of compiled functions (see `sgmcmc.NumbaModel`, which compiles them): addresses of
/// cfuncs, the data arrays they read (x: 2-D, y: 1-D, float64, C-contiguous) and an object that
/// keeps the functions and arrays alive.
#[pyfunction]
#[pyo3(signature = (dim, n_data, grad_prior, grad_data_sum, potential_prior, potential_data_sum, x, y, keep))]
#[allow(clippy::too_many_arguments)]
pub fn compiled_model(
    py: Python<'_>,
    dim: usize,
    n_data: usize,
    grad_prior: usize,
    grad_data_sum: usize,
    potential_prior: Option<usize>,
    potential_data_sum: Option<usize>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, f64>,
    keep: Py<PyAny>,
) -> PyResult<PyModel> {
    if grad_prior == 0 || grad_data_sum == 0 || potential_prior == Some(0) || potential_data_sum == Some(0) {
        return Err(to_py(py, &invalid("function address", 0, "a compiled function's address is not null")));
    }
    if !x.is_c_contiguous() || !y.is_c_contiguous() {
        return Err(to_py(py, &invalid("data", "a strided array", "x and y must be C-contiguous")));
    }
    let shape = x.shape();
    // The compiled functions read rows idx < n_data of x and entries of y: both must have them.
    if shape[0] != n_data || y.len() != n_data {
        return Err(to_py(
            py,
            &Error::DimensionMismatch {
                what: "data rows of x and y (n_data)",
                expected: n_data,
                got: if shape[0] != n_data { shape[0] } else { y.len() },
            },
        ));
    }
    let x_shape = (shape[0] as i64, shape[1] as i64);
    // SAFETY: the addresses are those of cfuncs of the signatures GradPrior and GradData, which
    // sgmcmc.NumbaModel compiled (or the user declared with those signatures); see `Compiled`.
    let (gp, gd, pp, pd) = unsafe {
        (
            std::mem::transmute::<usize, GradPrior>(grad_prior),
            std::mem::transmute::<usize, GradData>(grad_data_sum),
            potential_prior.map(|a| std::mem::transmute::<usize, GradPrior>(a)),
            potential_data_sum.map(|a| std::mem::transmute::<usize, GradData>(a)),
        )
    };
    let m = Compiled {
        dim,
        n_data,
        grad_prior: gp,
        grad_data: gd,
        potential_prior: pp,
        potential_data: pd,
        x: x.as_array().as_ptr(),
        x_shape,
        y: y.as_array().as_ptr(),
        _keep: keep,
    };
    Ok(PyModel { inner: Arc::new(m), report_names: None, description: format!("NumbaModel(d = {dim}, N = {n_data})") })
}
