//! The Python extension module `astrolabe._astrolabe` (feature `python`, built by maturin
//! from python/): one function that runs a command line exactly as the `astrolabe` binary
//! does and returns what it would print. The package (python/astrolabe/__init__.py) turns
//! keyword arguments into the same flags and parses the JSON; it has no logic of its own.

use crate::cli::{self, Cli};
use clap::Parser;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Runs `astrolabe ARGS...` and returns (output text, exit status). Bad input raises
/// `ValueError` with the command line's message; an internal error `RuntimeError`. A plan
/// that does not fit is not an error: its status is 3 and its output is returned.
#[pyfunction]
fn run(args: Vec<String>) -> PyResult<(String, u8)> {
    let argv = std::iter::once("astrolabe".to_string()).chain(args);
    let parsed = Cli::try_parse_from(argv).map_err(|e| PyValueError::new_err(e.to_string()))?;
    match cli::execute(&parsed, false) {
        Ok(out) => {
            if let Some(path) = &out.path {
                std::fs::write(path, &out.text)
                    .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
            }
            Ok((out.text, out.exit_code))
        }
        Err(e) if e.exit_code() == 2 => Err(PyValueError::new_err(e.to_string())),
        Err(e) => Err(PyRuntimeError::new_err(e.to_string())),
    }
}

/// The module.
#[pymodule]
fn _astrolabe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add("SCHEMA_VERSION", crate::report::SCHEMA_VERSION)?;
    Ok(())
}
