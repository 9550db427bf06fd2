//! The crate's errors as Python exceptions: one class, `sgmcmc.SgmcmcError`, whose `variant`
//! attribute names the crate's `Error` variant (`"InvalidParameter"`, `"DimensionMismatch"`, …),
//! with the crate's message, and `chain` / `iteration` where the error names them.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use sgmcmc::Error;

create_exception!(
    _core,
    SgmcmcError,
    PyException,
    "An error of the sgmcmc crate: `variant` names it (the Rust `sgmcmc::Error` variant), the message is the crate's; `chain` and `iteration` are set where the error names them (else None)."
);

/// The name of an error's variant (the root's, for an error inside a chain): the first word of
/// its `Debug` form, which is the variant's name for every variant.
pub fn variant(e: &Error) -> String {
    let d = format!("{:?}", e.root());
    d.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The error as a `SgmcmcError` with its `variant`, `chain` and `iteration` attributes.
pub fn to_py(py: Python<'_>, e: &Error) -> PyErr {
    let err = SgmcmcError::new_err(e.to_string());
    let value = err.value(py);
    let iteration = match e.root() {
        Error::NonFiniteGradient { iteration, .. } | Error::NonFiniteState { iteration, .. } => Some(*iteration),
        Error::NonFinitePotential { iteration } | Error::Panic { iteration, .. } => Some(*iteration),
        Error::ModelFailure { iteration, .. } => *iteration,
        _ => None,
    };
    let _ = value.setattr("variant", variant(e));
    let _ = value.setattr("chain", e.chain());
    let _ = value.setattr("iteration", iteration);
    err
}

/// An [`Error::InvalidParameter`] for a setting passed from Python.
pub fn invalid(name: &'static str, value: impl std::fmt::Display, reason: &'static str) -> Error {
    Error::InvalidParameter { name, value: value.to_string(), reason }
}
