//! Checkpoints: a run saved to a file and resumed later, bit-identically.
//!
//! # File format (version 2)
//!
//! | bytes | content |
//! |---|---|
//! | 0–7 | the magic `SGMCMCCK` |
//! | 8–11 | the format version, a little-endian `u32` (2; version 1, before Langevin samplers could carry a [`Whitening`](crate::Whitening), is refused with [`Error::CheckpointMismatch`]) |
//! | 12–(end − 4) | a [postcard](https://docs.rs/postcard) encoding (wire format v1) of the header, then of the body |
//! | last 4 | the CRC-32 (iSCSI/Castagnoli polynomial) of bytes 12–(end − 4), little-endian |
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
//! ([`Error::CheckpointMismatch`]). Nothing in a file can make loading panic. The sampler type
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
pub const CHECKPOINT_VERSION: u32 = 2;

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
    let crc = CRC.checksum(&bytes[12..]);
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
    if version != CHECKPOINT_VERSION {
        return Err(Error::CheckpointMismatch {
            what: "format version",
            expected: CHECKPOINT_VERSION.to_string(),
            found: version.to_string(),
        });
    }
    let (payload, crc) = bytes[12..].split_at(bytes.len() - 16);
    v.copy_from_slice(crc);
    if CRC.checksum(payload) != u32::from_le_bytes(v) {
        return Err(corrupt("checksum mismatch (the file was altered or truncated)"));
    }
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

/// Writes a checkpoint file (to a temporary file first, then renamed, so that a crash while
/// writing never leaves a half-written checkpoint under `path`).
pub(crate) fn save<T: Serialize>(path: &Path, kind: &str, sampler: &str, body: &T) -> Result<()> {
    let bytes = encode(kind, sampler, body)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, &bytes).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

/// Reads a checkpoint file.
pub(crate) fn load<T: DeserializeOwned>(path: &Path, kind: &str, sampler: &str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| io(path, e))?;
    decode(&bytes, kind, sampler)
}

impl<S: crate::Sampler + Serialize + DeserializeOwned> crate::RunOutput<S> {
    /// Saves the run (every chain's sampler, estimator and generator state, the draws so far, the
    /// cost) to `path`, in the [checkpoint format](crate::checkpoint). [`resume`](crate::resume())
    /// a [`load`](Self::load)ed run to continue it bit-identically.
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save(path.as_ref(), "run", std::any::type_name::<S>(), self)
    }

    /// Loads a run saved by [`save`](Self::save) with the same sampler type.
    ///
    /// Errors: [`Error::Io`]; [`Error::CorruptCheckpoint`] (truncated, altered, not a
    /// checkpoint); [`Error::CheckpointMismatch`] (another format version, kind of run or sampler).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        load(path.as_ref(), "run", std::any::type_name::<S>())
    }
}

impl<S: crate::Discretisation + Serialize + DeserializeOwned> crate::RrOutput<S> {
    /// Saves the Richardson–Romberg run to `path` (see [`RunOutput::save`](crate::RunOutput::save)).
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save(path.as_ref(), "richardson-romberg", std::any::type_name::<S>(), self)
    }

    /// Loads a Richardson–Romberg run saved by [`save`](Self::save) with the same sampler type.
    ///
    /// Errors: as [`RunOutput::load`](crate::RunOutput::load).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        load(path.as_ref(), "richardson-romberg", std::any::type_name::<S>())
    }
}
