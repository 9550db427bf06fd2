//! The native part of the `sgmcmc` Python package (`sgmcmc._core`): the crate's models, its
//! `Sample` path and its errors, for the pure-Python layer in `pysrc/sgmcmc`.
//!
//! Built by maturin (`pip install ./python`); not part of the core crate's default build.

mod errors;
mod models;
mod run;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SgmcmcError", m.py().get_type::<errors::SgmcmcError>())?;
    m.add("SAMPLERS", run::SAMPLERS)?;
    m.add_class::<models::PyModel>()?;
    m.add_class::<run::Run>()?;
    m.add_class::<run::Fit>()?;
    m.add_function(wrap_pyfunction!(models::logistic_regression, m)?)?;
    m.add_function(wrap_pyfunction!(models::logistic_regression_synthetic, m)?)?;
    m.add_function(wrap_pyfunction!(models::linear_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(models::linear_gaussian_synthetic, m)?)?;
    m.add_function(wrap_pyfunction!(models::glm, m)?)?;
    m.add_function(wrap_pyfunction!(models::glm_columns, m)?)?;
    m.add_function(wrap_pyfunction!(models::glm_synthetic, m)?)?;
    m.add_function(wrap_pyfunction!(models::python_model, m)?)?;
    m.add_function(wrap_pyfunction!(models::compiled_model, m)?)?;
    m.add_function(wrap_pyfunction!(run::start_sample, m)?)?;
    m.add_function(wrap_pyfunction!(run::time_gradient, m)?)?;
    Ok(())
}
