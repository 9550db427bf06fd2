//! Export of traces for Python (NumPy / ArviZ) and spreadsheets: `.npy` and CSV.
//!
//! Layout: `(chain, draw, dim)` for draws and gradients, `(chain, draw)` for weights and costs —
//! what ArviZ's `from_dict` expects. In Python:
//!
//! ```text
//! import numpy as np, arviz as az
//! idata = az.from_dict(posterior={"theta": np.load("draws.npy")})   # (chain, draw, dim)
//! ```
//!
#![doc = include_str!("../../docs/guide/zarr.md")]

use crate::error::{Error, Result};
use crate::trace::estimate::Estimate;
use ndarray::{Array2, Array3};
use std::io::Write;
use std::path::{Path, PathBuf};

#[cfg(feature = "zarr")]
pub use crate::trace::zarr::{Completeness, ZarrTrace, write_zarr, write_zarr_named};

/// The draws as a `(chain, draw, dim)` array. Errors: [`Error::NotStored`] for streaming-mode
/// parts, [`Error::DimensionMismatch`] for chains of different lengths, [`Error::NoSamples`].
pub fn draws_array(est: &Estimate) -> Result<Array3<f64>> {
    let p = est.equal_length_parts()?;
    Ok(Array3::from_shape_fn((p.len(), p[0].len(), est.dim()), |(c, k, j)| p[c].draws()[[k, j]]))
}

/// The stored gradient estimates as a `(chain, draw, dim)` array, if every chain has them.
pub fn gradients_array(est: &Estimate) -> Result<Array3<f64>> {
    let p = est.equal_length_parts()?;
    let g: Vec<_> = p
        .iter()
        .map(|s| s.gradients().ok_or(Error::NotStored { what: "gradients (run with Storage::SamplesAndGradients)" }))
        .collect::<Result<_>>()?;
    Ok(Array3::from_shape_fn((p.len(), p[0].len(), est.dim()), |(c, k, j)| g[c][[k, j]]))
}

/// The weights as a `(chain, draw)` array.
pub fn weights_array(est: &Estimate) -> Result<Array2<f64>> {
    let p = est.equal_length_parts()?;
    Ok(Array2::from_shape_fn((p.len(), p[0].len()), |(c, k)| p[c].weights()[k]))
}

/// The cumulative datum-gradient cost at each draw as a `(chain, draw)` array (0 where a part was
/// not recorded by a run).
pub fn costs_array(est: &Estimate) -> Result<Array2<u64>> {
    let p = est.equal_length_parts()?;
    Ok(Array2::from_shape_fn((p.len(), p[0].len()), |(c, k)| p[c].costs().map_or(0, |x| x[k])))
}

/// The step size at each draw ([`Samples::step_sizes`](crate::Samples::step_sizes)) as a
/// `(chain, draw)` array (NaN where a part has none).
pub fn step_sizes_array(est: &Estimate) -> Result<Array2<f64>> {
    let p = est.equal_length_parts()?;
    Ok(Array2::from_shape_fn((p.len(), p[0].len()), |(c, k)| p[c].step_sizes().map_or(f64::NAN, |x| x[k])))
}

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io { path: path.display().to_string(), message: e.to_string() }
}

/// Writes `draws.npy` (chain, draw, dim), `weights.npy`, `costs.npy` and `step_sizes.npy`
/// (chain, draw) and, if
/// stored, `gradients.npy` (chain, draw, dim) into `dir` (created if missing); returns the paths.
///
/// Errors: as [`draws_array`]; [`Error::Io`] if a file cannot be written.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{export};
///
/// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 3)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, n_chains: 2, ..Default::default() };
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run()?;
/// let dir = std::env::temp_dir().join("sgmcmc_write_npy_doc");
/// let files = export::write_npy(&dir, &out.estimate)?;
/// // In Python: draws = np.load(".../draws.npy"); az.from_dict(posterior={"theta": draws})
/// let back = export::read_npy3(&files[0])?;
/// assert_eq!(back.dim(), (2, 1_500, 2));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn write_npy(dir: impl AsRef<Path>, est: &Estimate) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut out = Vec::new();
    let path = dir.join("draws.npy");
    ndarray_npy::write_npy(&path, &draws_array(est)?).map_err(|e| io(&path, e))?;
    out.push(path);
    let path = dir.join("weights.npy");
    ndarray_npy::write_npy(&path, &weights_array(est)?).map_err(|e| io(&path, e))?;
    out.push(path);
    let path = dir.join("costs.npy");
    ndarray_npy::write_npy(&path, &costs_array(est)?).map_err(|e| io(&path, e))?;
    out.push(path);
    let path = dir.join("step_sizes.npy");
    ndarray_npy::write_npy(&path, &step_sizes_array(est)?).map_err(|e| io(&path, e))?;
    out.push(path);
    if let Ok(g) = gradients_array(est) {
        let path = dir.join("gradients.npy");
        ndarray_npy::write_npy(&path, &g).map_err(|e| io(&path, e))?;
        out.push(path);
    }
    Ok(out)
}

/// Reads a `(chain, draw, dim)` array written by [`write_npy`] (or by NumPy, float64).
pub fn read_npy3(path: impl AsRef<Path>) -> Result<Array3<f64>> {
    let path = path.as_ref();
    ndarray_npy::read_npy(path).map_err(|e| io(path, e))
}

/// Reads a `(chain, draw)` float64 array written by [`write_npy`].
pub fn read_npy2(path: impl AsRef<Path>) -> Result<Array2<f64>> {
    let path = path.as_ref();
    ndarray_npy::read_npy(path).map_err(|e| io(path, e))
}

/// Writes a long-format CSV: header `chain,draw,weight,cost,theta_0,…[,grad_0,…]`, one row per
/// draw, numbers printed in Rust's shortest round-trip form (so reading back is exact).
pub fn write_csv(path: impl AsRef<Path>, est: &Estimate) -> Result<()> {
    let names: Vec<String> = (0..est.dim()).map(|j| format!("theta_{j}")).collect();
    write_csv_inner(path.as_ref(), est, &names)
}

/// As [`write_csv`], with the draws' columns named `names` (one per coordinate, e.g.
/// [`Layout::names`](crate::Layout::names) for draws on a layout's constrained scale; a name
/// with a comma or a quote is quoted as RFC 4180 says).
///
/// Errors: [`Error::DimensionMismatch`] unless there is one name per coordinate; as
/// [`write_csv`].
pub fn write_csv_named<S: AsRef<str>>(path: impl AsRef<Path>, est: &Estimate, names: &[S]) -> Result<()> {
    crate::error::check_len("column names", est.dim(), names.len())?;
    let names: Vec<String> = names
        .iter()
        .map(|n| {
            let n = n.as_ref();
            if n.contains([',', '"', '\n']) { format!("\"{}\"", n.replace('"', "\"\"")) } else { n.to_string() }
        })
        .collect();
    write_csv_inner(path.as_ref(), est, &names)
}

fn write_csv_inner(path: &Path, est: &Estimate, names: &[String]) -> Result<()> {
    let p = est.equal_length_parts()?;
    let with_grad = p.iter().all(|s| s.gradients().is_some());
    let d = est.dim();
    let file = std::fs::File::create(path).map_err(|e| io(path, e))?;
    let mut w = std::io::BufWriter::new(file);
    let mut header = String::from("chain,draw,weight,cost");
    for name in names {
        header.push(',');
        header.push_str(name);
    }
    if with_grad {
        for j in 0..d {
            header.push_str(&format!(",grad_{j}"));
        }
    }
    writeln!(w, "{header}").map_err(|e| io(path, e))?;
    for (c, s) in p.iter().enumerate() {
        for k in 0..s.len() {
            let mut line = format!("{c},{k},{:?},{}", s.weights()[k], s.costs().map_or(0, |x| x[k]));
            for v in s.draws().row(k) {
                line.push_str(&format!(",{v:?}"));
            }
            if let Some(g) = s.gradients().filter(|_| with_grad) {
                for v in g.row(k) {
                    line.push_str(&format!(",{v:?}"));
                }
            }
            writeln!(w, "{line}").map_err(|e| io(path, e))?;
        }
    }
    w.flush().map_err(|e| io(path, e))
}
