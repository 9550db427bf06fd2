//! Checkpoints: a run saved to a file and resumed later, bit-identically.
//!
//! # File format (version 6)
//!
//! | bytes | content |
//! |---|---|
//! | 0–7 | the magic `SGMCMCCK` |
//! | 8–11 | the format version, a little-endian `u32` (6; 5 is read too, see below; older versions are refused with [`Error::CheckpointMismatch`]: 4 before Langevin samplers could carry a [`GradientNoise`](crate::GradientNoise), 1 before Langevin samplers could carry a [`Whitening`](crate::Whitening), 2 before runs remembered their model's data size and fingerprint, 3 before stored draws carried their step sizes; any other value is [`Error::CorruptCheckpoint`]) |
//! | 12–(end − 4) | a [postcard](https://docs.rs/postcard) encoding (wire format v1) of the header, then of the body |
//! | last 4 | the CRC-32 (iSCSI/Castagnoli polynomial) of bytes 8–(end − 4), little-endian: the version is covered, so a corrupted version byte is [`Error::CorruptCheckpoint`], not an "older format" |
//!
//! Format 5 is format 6 with the checksum over bytes 12–(end − 4) only (the version not
//! covered); its files load unchanged.
//!
//! The header holds the kind of run (`"run"`, `"richardson-romberg"`, `"multilevel"`), the
//! sampler's Rust type name and the crate version that wrote the file. The body is the run's
//! output ([`RunOutput`](crate::RunOutput), [`RrOutput`](crate::RrOutput),
//! [`MlmcCheckpoint`](crate::MlmcCheckpoint)) with every sampler state, estimator state, random
//! generator, the draws so far and the cost, serialised with serde.
//!
//! Loading checks, in order: the magic and the version
//! ([`Error::CorruptCheckpoint`], [`Error::CheckpointMismatch`]), the checksum (a truncated or
//! altered file is [`Error::CorruptCheckpoint`]), then the kind of run and the sampler type
//! ([`Error::CheckpointMismatch`]). Nothing in a file can make loading panic.
//!
//! Resuming ([`Resume`](crate::run::runner::Resume),
//! [`MlSgld::advance_fixed`](crate::MlSgld::advance_fixed)) checks the model passed against the
//! one the run was made with — its dimension, its number of data and a fingerprint of its data
//! and prior (two weighted sums of the gradients of its first, middle and last datum and of its
//! prior at a fixed point) — and returns [`Error::CheckpointMismatch`] naming what differs, before any step is taken.
//!
//! Saving is safe against crashes and concurrent saves: each save writes a temporary file of its
//! own (`<file>.<pid>.<n>.tmp`), flushes it to disk, renames it over the target and flushes the
//! directory, so the target always holds a complete checkpoint (the previous one or the new
//! one). Two saves to one path at once both succeed (the last rename wins). A temporary left by a
//! process killed mid-write is never read; it is removed by the next save to or load of that path
//! (Linux), and [`clean_temporaries`] removes those of every file in a directory. The sampler type
//! is compared by its Rust type name, which is stable for one build of a program (a file
//! written by a program built with another compiler may be refused: say so when sharing files).
//!
//! Size: the draws kept so far plus every chain's state; an estimator that shares a large
//! centre between chains (a [`ControlVariate`](crate::ControlVariate) with cached centre
//! gradients) is written once per chain.

use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

const MAGIC: &[u8; 8] = b"SGMCMCCK";

/// The checkpoint format version this build writes and reads.
pub const CHECKPOINT_VERSION: u32 = 6;

const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    kind: String,
    sampler: String,
    crate_version: String,
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io { path: path.display().to_string(), message: e.to_string() }
}

/// Encodes `body` as a checkpoint of `kind` with sampler type `sampler`.
pub(crate) fn encode<T: Serialize>(kind: &str, sampler: &str, body: &T) -> Result<Vec<u8>> {
    let header = Header {
        kind: kind.to_string(),
        sampler: sampler.to_string(),
        crate_version: env!("CARGO_PKG_VERSION").into(),
    };
    let encode_err = |e: postcard::Error| Error::CorruptCheckpoint { reason: format!("cannot encode: {e}") };
    let mut bytes = Vec::new();
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
    let bytes = postcard::to_extend(&header, bytes).map_err(encode_err)?;
    let mut bytes = postcard::to_extend(body, bytes).map_err(encode_err)?;
    let crc = CRC.checksum(&bytes[8..]);
    bytes.extend_from_slice(&crc.to_le_bytes());
    Ok(bytes)
}

/// Decodes a checkpoint of `kind` with sampler type `sampler`.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], kind: &str, sampler: &str) -> Result<T> {
    let corrupt = |reason: &str| Error::CorruptCheckpoint { reason: reason.into() };
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        return Err(corrupt("not an sgmcmc checkpoint (no magic bytes)"));
    }
    if bytes.len() < 16 {
        return Err(corrupt("truncated (shorter than the fixed header)"));
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&bytes[8..12]);
    let version = u32::from_le_bytes(v);
    let end = bytes.len() - 4;
    v.copy_from_slice(&bytes[end..]);
    let stored = u32::from_le_bytes(v);
    // Format 6's checksum covers the version; formats 1–5's began after it.
    let checked = |from: usize| CRC.checksum(&bytes[from..end]) == stored;
    let altered = || corrupt("checksum mismatch (the file was altered or truncated)");
    match version {
        CHECKPOINT_VERSION => {
            if !checked(8) {
                return Err(altered());
            }
        }
        // Format 5 has the same header and body; only its checksum began after the version.
        5 => {
            if !checked(12) {
                return Err(altered());
            }
        }
        1..=4 => {
            if !checked(12) {
                return Err(altered());
            }
            return Err(Error::CheckpointMismatch {
                what: "format version",
                expected: format!("{CHECKPOINT_VERSION} (or 5)"),
                found: format!("{version} (an older format of this crate, which this build no longer reads)"),
            });
        }
        _ => {
            return Err(corrupt(&format!(
                "format version {version} is not a format of this crate (it writes format {CHECKPOINT_VERSION} and reads 5 \
                 and {CHECKPOINT_VERSION}): the version bytes are corrupt, or the file is not an sgmcmc checkpoint"
            )));
        }
    }
    let payload = &bytes[12..end];
    let (header, rest): (Header, &[u8]) =
        postcard::take_from_bytes(payload).map_err(|e| corrupt(&format!("undecodable header ({e})")))?;
    if header.kind != kind {
        return Err(Error::CheckpointMismatch { what: "kind of run", expected: kind.into(), found: header.kind });
    }
    if header.sampler != sampler {
        return Err(Error::CheckpointMismatch {
            what: "sampler type",
            expected: sampler.into(),
            found: header.sampler,
        });
    }
    let (body, rest): (T, &[u8]) = postcard::take_from_bytes(rest)
        .map_err(|e| corrupt(&format!("undecodable body ({e}), written by sgmcmc {}", header.crate_version)))?;
    if !rest.is_empty() {
        return Err(corrupt("trailing bytes after the body"));
    }
    Ok(body)
}

/// Writes a checkpoint file safely: to a temporary file of its own beside `path`
/// (`<name>.<pid>.<n>.tmp`, unique per process and per save, so concurrent saves to one path
/// never share it), flushed to disk (`fsync`), then renamed over `path` and the directory
/// flushed, so that a crash or a power loss at any moment leaves under `path` either the previous
/// checkpoint or the new one, never a partial or empty file. Concurrent saves to one path all
/// succeed; the last rename wins. Temporaries left by a process that was killed while writing
/// are removed by the next save to the same path (on Linux, where a dead process can be told
/// from a live one; elsewhere they are ignored, and loading never reads them).
pub(crate) fn save<T: Serialize>(path: &Path, kind: &str, sampler: &str, body: &T) -> Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let bytes = encode(kind, sampler, body)?;
    let name = path.file_name().ok_or_else(|| Error::Io {
        path: path.display().to_string(),
        message: "a checkpoint path must name a file".into(),
    })?;
    let pid = std::process::id();
    let mut tmp_name = name.to_owned();
    tmp_name.push(format!(".{pid}.{}.tmp", SAVES.fetch_add(1, Ordering::Relaxed)));
    let tmp = path.with_file_name(&tmp_name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&tmp, e));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(path, e));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // Flushing the directory makes the rename durable; not every platform can open one.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    remove_stale_temporaries(dir, name);
    Ok(())
}

/// Removes `<name>.<pid>.<n>.tmp` files in `dir` left by processes that no longer run (Linux
/// only: a process is alive while `/proc/<pid>` exists). Best effort: errors are ignored.
fn remove_stale_temporaries(dir: &Path, name: &std::ffi::OsStr) {
    if let Some(name) = name.to_str() {
        let _ = stale_temporaries(dir, Some(name));
    }
}

/// Removes the temporary files that saves killed mid-write left in `dir` — `<file>.<pid>.<n>.tmp`
/// of processes that no longer run, for every checkpoint file — and returns how many it removed.
/// Saving removes those of the file it saves and loading those of the file it loads; call this
/// for the others (a directory of checkpoints from many runs). Linux only (elsewhere it removes
/// nothing: a process's liveness is read from `/proc`).
///
/// Errors: [`Error::Io`] if `dir` cannot be read.
pub fn clean_temporaries(dir: impl AsRef<Path>) -> Result<usize> {
    stale_temporaries(dir.as_ref(), None)
}

/// [`clean_temporaries`], for the checkpoint `name` only when given.
fn stale_temporaries(dir: &Path, name: Option<&str>) -> Result<usize> {
    if !cfg!(target_os = "linux") || !Path::new("/proc/self").exists() {
        return Ok(0);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        let Some(rest) = file.strip_suffix(".tmp") else { continue };
        // `<name>.<pid>.<n>`: the last two dot-separated fields are numbers.
        let mut parts = rest.rsplitn(3, '.');
        let (Some(n), Some(pid), Some(stem)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if name.is_some_and(|name| stem != name) {
            continue;
        }
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else { continue };
        if pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Reads a checkpoint file.
pub(crate) fn load<T: DeserializeOwned>(path: &Path, kind: &str, sampler: &str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| io(path, e))?;
    // Temporaries of this file that a killed save left behind.
    if let (Some(name), dir) = (path.file_name(), path.parent().filter(|p| !p.as_os_str().is_empty())) {
        remove_stale_temporaries(dir.unwrap_or(Path::new(".")), name);
    }
    decode(&bytes, kind, sampler)
}

/// What a checkpoint remembers of the model it was made with, so that resuming with another
/// model is a typed error ([`Error::CheckpointMismatch`]) instead of a wrong answer or a panic:
/// the dimension, the number of data, and a cheap fingerprint of the data and the prior — two
/// weighted sums of the gradients of three data (the first, the middle and the last) and of the
/// prior's gradient, at a fixed point.
///
/// The fingerprint costs three single-datum gradients and a prior gradient when a run is
/// assembled and as many when it is resumed (not counted in the run's cost). A model whose data
/// gradient fails at the fixed point is remembered by its dimension and data size alone; one
/// whose prior gradient fails, without the prior. Checkpoints written before the prior was
/// fingerprinted (same format version) are checked on their data alone.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ModelFingerprint {
    pub(crate) dim: usize,
    pub(crate) n_data: usize,
    /// (datum, Σ w_j g_j, Σ |g_j|) per fingerprinted datum; the prior's entry has datum
    /// [`PRIOR`].
    data: Vec<(usize, f64, f64)>,
}

/// The datum index that marks the prior's entry in a fingerprint.
const PRIOR: usize = usize::MAX;

/// Relative tolerance of the fingerprint comparison: a datum's gradient is computed by the same
/// code at the same point, so only a change of compiler or platform can move it, by rounding.
const FINGERPRINT_RTOL: f64 = 1e-9;

impl ModelFingerprint {
    /// A model described by its shape only (no data fingerprint).
    pub(crate) fn shape(dim: usize, n_data: usize) -> Self {
        ModelFingerprint { dim, n_data, data: Vec::new() }
    }

    /// The fingerprint of `model`.
    pub(crate) fn of<M: crate::models::model::Model + ?Sized>(model: &M) -> Self {
        let (d, n) = (model.dim(), model.n_data());
        let mut fp = ModelFingerprint::shape(d, n);
        if d == 0 || n == 0 {
            return fp;
        }
        let theta: Vec<f64> = (0..d).map(|j| 0.01 * (((j * 7 + 3) % 11) as f64 - 5.0)).collect();
        let mut g = vec![0.0; d];
        let mut idx = vec![0, n / 2, n - 1];
        idx.dedup();
        let sums = |g: &[f64]| {
            let weighted = g.iter().enumerate().map(|(j, v)| (1.0 + (j % 3) as f64) * v).sum::<f64>();
            (weighted, g.iter().map(|v| v.abs()).sum::<f64>())
        };
        for i in idx {
            g.iter_mut().for_each(|v| *v = 0.0);
            if model.grad_data_sum(&theta, &[i], &mut g).is_err() {
                return ModelFingerprint::shape(d, n);
            }
            let (weighted, size) = sums(&g);
            fp.data.push((i, weighted, size));
        }
        g.iter_mut().for_each(|v| *v = 0.0);
        if model.grad_prior(&theta, &mut g).is_ok() {
            let (weighted, size) = sums(&g);
            fp.data.push((PRIOR, weighted, size));
        }
        fp
    }

    /// Checks that `model` is the model this fingerprint was taken of.
    ///
    /// Errors: [`Error::CheckpointMismatch`] naming the dimension, the data size or the data.
    pub(crate) fn check<M: crate::models::model::Model + ?Sized>(&self, model: &M) -> Result<()> {
        let mismatch = |what, model: String, file: String| Error::CheckpointMismatch {
            what,
            expected: format!("{model} (the model passed to resume)"),
            found: format!("{file} in the checkpoint"),
        };
        if model.dim() != self.dim {
            return Err(mismatch("model dimension", model.dim().to_string(), self.dim.to_string()));
        }
        if model.n_data() != self.n_data {
            return Err(mismatch(
                "model data size (number of data)",
                model.n_data().to_string(),
                self.n_data.to_string(),
            ));
        }
        if self.data.is_empty() {
            return Ok(());
        }
        let now = ModelFingerprint::of(model);
        for &(i, w0, s0) in &self.data {
            let (what, whose) = if i == PRIOR {
                ("model prior (fingerprint: the prior's gradient at a fixed point differs)", "prior".to_string())
            } else {
                ("model data (fingerprint: a datum's gradient at a fixed point differs)", format!("datum {i}"))
            };
            let Some(&(_, w1, s1)) = now.data.iter().find(|e| e.0 == i) else {
                return Err(mismatch(
                    if i == PRIOR {
                        "model prior (the prior's gradient fails where it did not)"
                    } else {
                        "model data (the model's gradient fails where it did not)"
                    },
                    "an error".into(),
                    "a finite gradient".into(),
                ));
            };
            let close = |a: f64, b: f64| {
                (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= FINGERPRINT_RTOL * (s0.abs() + s1.abs())
            };
            if !close(w0, w1) || !close(s0, s1) {
                return Err(mismatch(
                    what,
                    format!("{whose}: weighted sum {w1:e}, size {s1:e}"),
                    format!("{whose}: weighted sum {w0:e}, size {s0:e}"),
                ));
            }
        }
        Ok(())
    }
}
