//! Traces in the Zarr v3 format, laid out as ArviZ InferenceData (feature `zarr`).

use crate::error::{Error, Result};
use crate::models::Layout;
use crate::trace::estimate::{Estimate, Samples};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zarrs::array::codec::GzipCodec;
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::GroupBuilder;
use zarrs::metadata_ext::group::consolidated_metadata::{ConsolidatedMetadata, ConsolidatedMetadataKind};

/// A posterior variable: columns `offset .. offset + len` of the draws, of shape `shape`.
#[derive(Debug)]
struct Var {
    array: Array<FilesystemStore>,
    offset: usize,
    len: usize,
    shape: Vec<usize>,
}

/// The root attribute listing the posterior variables in order (name and shape), which
/// [`ZarrTrace::open`] reads back.
const VARIABLES_ATTR: &str = "sgmcmc_variables";

/// The root attribute that says whether the trace was finished ([`ZarrTrace::finish`]): `false`
/// from creation until every chain is written and the writer said so.
const FINISHED_ATTR: &str = "sgmcmc_finished";

/// The array of the draws written per chain, `(chain)`, int64: 0 until the chain's chunks are
/// all written, then its number of draws (written last, so a chain whose mark is set is whole).
const WRITTEN_ARRAY: &str = "/sample_stats/draws_written";

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io { path: path.display().to_string(), message: e.to_string() }
}

/// The trace's posterior variables, one array `(chain, draw, shape…)` per named block of
/// `vars`, at consecutive offsets into θ.
fn posterior_vars(
    store: &Arc<FilesystemStore>,
    path: &Path,
    vars: &[(String, Vec<usize>)],
    (c, n): (u64, u64),
    gzip: &dyn Fn() -> Result<Arc<GzipCodec>>,
) -> Result<Vec<Var>> {
    let mut posterior = Vec::with_capacity(vars.len());
    let mut offset = 0;
    for (name, shape) in vars {
        let len: usize = shape.iter().product();
        let mut full = vec![c, n];
        full.extend(shape.iter().map(|&k| k as u64));
        let mut chunk = vec![1, n];
        chunk.extend(shape.iter().map(|&k| k as u64));
        let mut dims = vec!["chain".to_string(), "draw".to_string()];
        dims.extend((0..shape.len()).map(|i| format!("{name}_dim_{i}")));
        let array = ArrayBuilder::new(full, chunk, data_type::float64(), f64::NAN)
            .dimension_names(Some(dims))
            .bytes_to_bytes_codecs(vec![gzip()?])
            .build(store.clone(), &format!("/posterior/{name}"))
            .map_err(|e| io(path, e))?;
        array.store_metadata().map_err(|e| io(path, e))?;
        posterior.push(Var { array, offset, len, shape: shape.clone() });
        offset += len;
    }
    Ok(posterior)
}

/// Writes the trace's consolidated metadata (what xarray looks for first; every array exists
/// now, and writing chunks later does not change metadata), laid out as zarr-python writes it:
/// every node under its full path in the root's, each subgroup there with an empty inline one;
/// the subgroups' own files keep none (else a reader opening one directly sees no child).
fn consolidate(store: &Arc<FilesystemStore>, path: &Path) -> Result<()> {
    // Consolidated metadata (what xarray looks for first; every array exists now, and writing
    // chunks later does not change metadata), laid out as zarr-python writes it: every node
    // under its full path in the root's, each subgroup there with an empty inline one.
    for group in ["/posterior", "/sample_stats", "/"] {
        let mut g = zarrs::group::Group::open(store.clone(), group).map_err(|e| io(path, e))?;
        let metadata = if group == "/" {
            let node = zarrs::node::Node::open(store, group).map_err(|e| io(path, e))?;
            node.consolidate_metadata().unwrap_or_default()
        } else {
            Default::default()
        };
        g.set_consolidated_metadata(Some(ConsolidatedMetadata { metadata, kind: ConsolidatedMetadataKind::Inline }));
        g.store_metadata().map_err(|e| io(path, e))?;
    }
    sort_consolidated(path)?;
    // The subgroups' own files keep none (else a reader opening one directly sees no child).
    for group in ["/posterior", "/sample_stats"] {
        let mut g = zarrs::group::Group::open(store.clone(), group).map_err(|e| io(path, e))?;
        g.set_consolidated_metadata(None);
        g.store_metadata().map_err(|e| io(path, e))?;
    }
    Ok(())
}

/// Rewrites the root's consolidated metadata with its keys in sorted order: zarr-python (3.1)
/// rebuilds the hierarchy from them with `itertools.groupby`, which needs the children of each
/// group to be contiguous (zarrs writes them in hash order).
fn sort_consolidated(path: &Path) -> Result<()> {
    let file = path.join("zarr.json");
    let text = std::fs::read_to_string(&file).map_err(|e| io(&file, e))?;
    let mut root: serde_json::Value = serde_json::from_str(&text).map_err(|e| io(&file, e))?;
    if let Some(serde_json::Value::Object(map)) =
        root.get_mut("consolidated_metadata").and_then(|c| c.get_mut("metadata"))
    {
        let mut entries: Vec<(String, serde_json::Value)> = std::mem::take(map).into_iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        map.extend(entries);
    }
    let text = serde_json::to_string_pretty(&root).map_err(|e| io(&file, e))?;
    std::fs::write(&file, text).map_err(|e| io(&file, e))
}

/// The current UTC time as ArviZ writes `created_at` (`2026-11-24T19:30:00.123456Z`).
fn utc_now_iso8601() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (secs, micros) = (now.as_secs(), now.subsec_micros());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z", rem / 3_600, rem % 3_600 / 60, rem % 60)
}

/// A Zarr store with the ArviZ InferenceData layout for the draws of `n_chains` chains of
/// `n_draws` draws in dimension d:
///
/// - group `posterior`: `theta` of dims `(chain, draw, theta_dim_0)`, float64 — or, for a
///   trace made by [`create_named`](Self::create_named) / [`write_zarr_named`], one variable
///   per block of a [`Layout`], with the block's name and shape (dims `chain, draw,
///   <name>_dim_0, …`), listed in order in the root attribute `sgmcmc_variables`;
/// - group `sample_stats`: `weight` (the sampler's weight of each draw, e.g. its step size),
///   `step_size` (the sampler's step size at each draw, [`Samples::step_sizes`]; NaN where not
///   recorded, e.g. for a sampler without a step) and `cost` (the cumulative datum-gradient
///   count at each draw, 0 if not recorded), dims `(chain, draw)`; `gradient`
///   `(chain, draw, theta_dim_0)` if the run stored gradients;
/// - coordinates `chain` and `draw` (0, 1, …) in both groups.
///
/// Every array is chunked **one chunk per chain** (gzip-compressed), so chains are written
/// independently — by different threads or MPI ranks — without conflicts: one process
/// [`create`](Self::create)s the layout, the others [`open`](Self::open) it, and each writes its
/// chains with [`write_chain`](Self::write_chain). In Python:
///
/// ```text
/// import xarray as xr, arviz as az
/// dt = xr.open_datatree("trace.zarr", engine="zarr")
/// az.summary(az.from_datatree(dt))  # ArviZ 0.23
/// az.summary(dt)                    # ArviZ 1.x (arviz_stats.summary)
/// ```
///
/// The root and both groups carry `created_at` (UTC, ISO 8601), `inference_library` and
/// `inference_library_version`, as ArviZ writes them.
///
/// **Completeness.** Unwritten chunks read as NaN, so a trace whose writer was killed would
/// look like a run with NaN chains. Each chain's last write is its mark in
/// `sample_stats/draws_written` (dims `(chain)`: its number of draws, 0 until it is whole), and
/// the root attribute `sgmcmc_finished` turns true when the writer [`finish`](Self::finish)es
/// ([`write_zarr`] does). [`read_chain`](Self::read_chain) refuses a chain not written
/// ([`Error::IncompleteTrace`]) and [`completeness`](Self::completeness) says what is there. In
/// Python, check before use:
///
/// ```text
/// def sgmcmc_complete(dt):  # dt = xr.open_datatree(path, engine="zarr")
///     n = dt["posterior"].sizes["draw"]
///     written = dt["sample_stats"]["draws_written"].values
///     return bool(dt.attrs.get("sgmcmc_finished", False)) and bool((written == n).all())
/// ```
#[derive(Debug)]
pub struct ZarrTrace {
    path: PathBuf,
    n_chains: usize,
    n_draws: usize,
    dim: usize,
    vars: Vec<Var>,
    weight: Array<FilesystemStore>,
    cost: Array<FilesystemStore>,
    step_size: Array<FilesystemStore>,
    gradient: Option<Array<FilesystemStore>>,
    /// The completeness mark per chain; `None` for a trace written before marks existed.
    written: Option<Array<FilesystemStore>>,
    store: Arc<FilesystemStore>,
}

/// How much of a [`ZarrTrace`] was written ([`ZarrTrace::completeness`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completeness {
    /// Draws written per chain: the trace's number of draws once the chain is whole, 0 for a
    /// chain not (or not wholly) written.
    pub draws_written: Vec<u64>,
    /// Whether the writer finished the trace ([`ZarrTrace::finish`]; [`write_zarr`] does).
    pub finished: bool,
}

impl Completeness {
    /// Whether every chain is whole and the trace was finished.
    pub fn is_complete(&self, n_draws: usize) -> bool {
        self.finished && self.draws_written.iter().all(|&k| k == n_draws as u64)
    }
}

impl ZarrTrace {
    /// Creates the store at `path` (a directory, created if missing; an existing trace there is
    /// replaced) and writes the metadata and the coordinates; the chains' data are written by
    /// [`write_chain`](Self::write_chain).
    ///
    /// Errors: [`Error::EmptyData`] for no chain, no draw or d = 0; [`Error::Io`] if the store
    /// cannot be written.
    pub fn create(
        path: impl AsRef<Path>,
        n_chains: usize,
        n_draws: usize,
        dim: usize,
        with_gradients: bool,
    ) -> Result<Self> {
        Self::create_vars(path.as_ref(), n_chains, n_draws, &[("theta".to_string(), vec![dim])], with_gradients)
    }

    /// As [`create`](Self::create), with one posterior variable per block of `layout` (named
    /// after it, of its shape, dims `chain, draw, <name>_dim_0, …`; a scalar block has dims
    /// `chain, draw`), for draws on the constrained scale ([`Layout::constrain_estimate`]);
    /// [`write_chain`](Self::write_chain) splits each draw into the blocks. No gradients (they
    /// are on the unconstrained scale).
    ///
    /// Errors: as [`Layout::validate`](crate::Layout::validate) and [`create`](Self::create).
    pub fn create_named(path: impl AsRef<Path>, n_chains: usize, n_draws: usize, layout: &Layout) -> Result<Self> {
        layout.validate()?;
        let vars: Vec<(String, Vec<usize>)> =
            layout.blocks().iter().map(|b| (b.name.clone(), b.shape.clone())).collect();
        Self::create_vars(path.as_ref(), n_chains, n_draws, &vars, false)
    }

    fn create_vars(
        path: &Path,
        n_chains: usize,
        n_draws: usize,
        vars: &[(String, Vec<usize>)],
        with_gradients: bool,
    ) -> Result<Self> {
        let dim: usize = vars.iter().map(|(_, shape)| shape.iter().product::<usize>()).sum();
        if n_chains == 0 || n_draws == 0 || dim == 0 {
            return Err(Error::EmptyData { what: "a Zarr trace needs at least one chain, one draw and one dimension" });
        }
        if path.join("zarr.json").exists() {
            std::fs::remove_dir_all(path).map_err(|e| io(path, e))?;
        }
        std::fs::create_dir_all(path).map_err(|e| io(path, e))?;
        let store = Arc::new(FilesystemStore::new(path).map_err(|e| io(path, e))?);
        let mut root = GroupBuilder::new().build(store.clone(), "/").map_err(|e| io(path, e))?;
        let created_at = utc_now_iso8601();
        let attrs = root.attributes_mut();
        attrs.insert("inference_library".into(), "sgmcmc".into());
        attrs.insert("inference_library_version".into(), env!("CARGO_PKG_VERSION").into());
        attrs.insert("created_at".into(), created_at.clone().into());
        let listed: Vec<serde_json::Value> =
            vars.iter().map(|(name, shape)| serde_json::json!({ "name": name, "shape": shape })).collect();
        attrs.insert(VARIABLES_ATTR.into(), serde_json::Value::Array(listed));
        attrs.insert(FINISHED_ATTR.into(), false.into());
        root.store_metadata().map_err(|e| io(path, e))?;
        let (c, n, d) = (n_chains as u64, n_draws as u64, dim as u64);
        for group in ["posterior", "sample_stats"] {
            let mut g = GroupBuilder::new().build(store.clone(), &format!("/{group}")).map_err(|e| io(path, e))?;
            let attrs = g.attributes_mut();
            attrs.insert("inference_library".into(), "sgmcmc".into());
            attrs.insert("inference_library_version".into(), env!("CARGO_PKG_VERSION").into());
            attrs.insert("created_at".into(), created_at.clone().into());
            g.store_metadata().map_err(|e| io(path, e))?;
            for (name, len) in [("chain", c), ("draw", n)] {
                let a = ArrayBuilder::new(vec![len], vec![len], data_type::int64(), 0i64)
                    .dimension_names(Some([name]))
                    .build(store.clone(), &format!("/{group}/{name}"))
                    .map_err(|e| io(path, e))?;
                a.store_metadata().map_err(|e| io(path, e))?;
                let values: Vec<i64> = (0..len as i64).collect();
                a.store_chunk(&[0], &values).map_err(|e| io(path, e))?;
            }
        }
        let gzip = || -> Result<Arc<GzipCodec>> { Ok(Arc::new(GzipCodec::new(1).map_err(|e| io(path, e))?)) };
        let f64_3 = |name: &str| -> Result<Array<FilesystemStore>> {
            let a = ArrayBuilder::new(vec![c, n, d], vec![1, n, d], data_type::float64(), f64::NAN)
                .dimension_names(Some(["chain", "draw", "theta_dim_0"]))
                .bytes_to_bytes_codecs(vec![gzip()?])
                .build(store.clone(), name)
                .map_err(|e| io(path, e))?;
            a.store_metadata().map_err(|e| io(path, e))?;
            Ok(a)
        };
        let posterior = posterior_vars(&store, path, vars, (c, n), &gzip)?;
        let gradient = if with_gradients { Some(f64_3("/sample_stats/gradient")?) } else { None };
        let weight = ArrayBuilder::new(vec![c, n], vec![1, n], data_type::float64(), f64::NAN)
            .dimension_names(Some(["chain", "draw"]))
            .bytes_to_bytes_codecs(vec![gzip()?])
            .build(store.clone(), "/sample_stats/weight")
            .map_err(|e| io(path, e))?;
        weight.store_metadata().map_err(|e| io(path, e))?;
        let cost = ArrayBuilder::new(vec![c, n], vec![1, n], data_type::uint64(), 0u64)
            .dimension_names(Some(["chain", "draw"]))
            .bytes_to_bytes_codecs(vec![gzip()?])
            .build(store.clone(), "/sample_stats/cost")
            .map_err(|e| io(path, e))?;
        cost.store_metadata().map_err(|e| io(path, e))?;
        let step_size = ArrayBuilder::new(vec![c, n], vec![1, n], data_type::float64(), f64::NAN)
            .dimension_names(Some(["chain", "draw"]))
            .bytes_to_bytes_codecs(vec![gzip()?])
            .build(store.clone(), "/sample_stats/step_size")
            .map_err(|e| io(path, e))?;
        step_size.store_metadata().map_err(|e| io(path, e))?;
        let written = ArrayBuilder::new(vec![c], vec![1], data_type::int64(), 0i64)
            .dimension_names(Some(["chain"]))
            .build(store.clone(), WRITTEN_ARRAY)
            .map_err(|e| io(path, e))?;
        written.store_metadata().map_err(|e| io(path, e))?;
        consolidate(&store, path)?;
        Ok(ZarrTrace {
            path: path.to_path_buf(),
            n_chains,
            n_draws,
            dim,
            vars: posterior,
            weight,
            cost,
            step_size,
            gradient,
            written: Some(written),
            store,
        })
    }

    /// Opens a trace made by [`create`](Self::create) (e.g. on another MPI rank) to write chains.
    ///
    /// Errors: [`Error::Io`] if the store or its arrays cannot be read.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let store = Arc::new(FilesystemStore::new(path).map_err(|e| io(path, e))?);
        let open =
            |name: &str| Array::open(store.clone(), name).map_err(|e| io(&path.join(name.trim_start_matches('/')), e));
        let root = zarrs::group::Group::open(store.clone(), "/").map_err(|e| io(path, e))?;
        // The variables in order; a trace without the list (written before it existed) has one,
        // `theta`.
        let listed: Vec<(String, Vec<usize>)> = match root.attributes().get(VARIABLES_ATTR) {
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|v| {
                    let name = v.get("name").and_then(|n| n.as_str()).map(str::to_string);
                    let shape: Option<Vec<usize>> = v
                        .get("shape")
                        .and_then(|s| s.as_array())
                        .map(|s| s.iter().filter_map(|k| k.as_u64().map(|k| k as usize)).collect());
                    name.zip(shape).ok_or_else(|| Error::CorruptCheckpoint {
                        reason: format!("Zarr trace {}: unreadable `{VARIABLES_ATTR}` attribute", path.display()),
                    })
                })
                .collect::<Result<_>>()?,
            _ => {
                let theta = open("/posterior/theta")?;
                vec![("theta".to_string(), vec![theta.shape()[2] as usize])]
            }
        };
        let mut vars = Vec::with_capacity(listed.len());
        let mut offset = 0;
        for (name, shape) in listed {
            let len: usize = shape.iter().product();
            vars.push(Var { array: open(&format!("/posterior/{name}"))?, offset, len, shape });
            offset += len;
        }
        let first = vars[0].array.shape().to_vec();
        let gradient = if path.join("sample_stats/gradient/zarr.json").exists() {
            Some(open("/sample_stats/gradient")?)
        } else {
            None
        };
        Ok(ZarrTrace {
            path: path.to_path_buf(),
            n_chains: first[0] as usize,
            n_draws: first[1] as usize,
            dim: offset,
            weight: open("/sample_stats/weight")?,
            cost: open("/sample_stats/cost")?,
            step_size: open("/sample_stats/step_size")?,
            vars,
            gradient,
            written: if path.join(WRITTEN_ARRAY.trim_start_matches('/')).join("zarr.json").exists() {
                Some(open(WRITTEN_ARRAY)?)
            } else {
                None
            },
            store,
        })
    }

    /// How much of the trace was written: the draws per chain and whether it was finished. A
    /// trace whose writer was killed shows its unwritten chains at 0 and `finished: false`. A
    /// trace written before the marks existed reads as complete.
    ///
    /// Errors: [`Error::Io`].
    pub fn completeness(&self) -> Result<Completeness> {
        let Some(w) = &self.written else {
            return Ok(Completeness { draws_written: vec![self.n_draws as u64; self.n_chains], finished: true });
        };
        let mut draws_written = Vec::with_capacity(self.n_chains);
        for c in 0..self.n_chains as u64 {
            let v: Vec<i64> = w.retrieve_chunk::<Vec<i64>>(&[c]).map_err(|e| io(&self.path, e))?;
            draws_written.push(v.first().copied().unwrap_or(0).max(0) as u64);
        }
        let root = zarrs::group::Group::open(self.store.clone(), "/").map_err(|e| io(&self.path, e))?;
        let finished = root.attributes().get(FINISHED_ATTR).and_then(serde_json::Value::as_bool).unwrap_or(false);
        Ok(Completeness { draws_written, finished })
    }

    /// Marks the trace finished (the root attribute `sgmcmc_finished`), once every chain is
    /// written: what a reader checks to know the run that wrote it ended. [`write_zarr`] calls
    /// it; a writer of its own chains (over ranks: one process, after all have written) calls it
    /// last.
    ///
    /// Errors: [`Error::IncompleteTrace`] naming the first chain not written; [`Error::Io`].
    pub fn finish(&self) -> Result<()> {
        let done = self.completeness()?;
        if let Some((chain, &k)) = done.draws_written.iter().enumerate().find(|&(_, &k)| k != self.n_draws as u64) {
            return Err(self.incomplete(chain, k));
        }
        let mut root = zarrs::group::Group::open(self.store.clone(), "/").map_err(|e| io(&self.path, e))?;
        root.attributes_mut().insert(FINISHED_ATTR.into(), true.into());
        root.store_metadata().map_err(|e| io(&self.path, e))?;
        consolidate(&self.store, &self.path)
    }

    fn incomplete(&self, chain: usize, written: u64) -> Error {
        Error::IncompleteTrace { path: self.path.display().to_string(), chain, written, expected: self.n_draws as u64 }
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `(chains, draws, dim)`.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.n_chains, self.n_draws, self.dim)
    }

    /// Writes chain `chain`'s draws, weights, step sizes, costs (and gradients, if the trace has them): one
    /// chunk of each array, touched by no other chain.
    ///
    /// Errors: [`Error::InvalidParameter`] for a chain out of range; [`Error::DimensionMismatch`]
    /// for samples of another length or dimension; [`Error::NotStored`] if the trace expects
    /// gradients and the samples have none; [`Error::Io`] if a chunk cannot be written.
    pub fn write_chain(&self, chain: usize, samples: &Samples) -> Result<()> {
        if chain >= self.n_chains {
            return Err(Error::invalid("chain", chain, "must be below the trace's number of chains"));
        }
        crate::error::check_len("draws of the chain", self.n_draws, samples.len())?;
        crate::error::check_len("dimension of the draws", self.dim, samples.draws().ncols())?;
        let p = &self.path;
        let c = chain as u64;
        let draws = samples.draws();
        for v in &self.vars {
            let mut block: Vec<f64> = Vec::with_capacity(self.n_draws * v.len);
            for row in draws.outer_iter() {
                block.extend(row.iter().skip(v.offset).take(v.len));
            }
            let mut at = vec![c, 0];
            at.extend(std::iter::repeat_n(0, v.shape.len()));
            v.array.store_chunk(&at, &block).map_err(|e| io(p, e))?;
        }
        let w: Vec<f64> = samples.weights().to_vec();
        self.weight.store_chunk(&[c, 0], &w).map_err(|e| io(p, e))?;
        let costs: Vec<u64> = samples.costs().map_or_else(|| vec![0; self.n_draws], |x| x.to_vec());
        self.cost.store_chunk(&[c, 0], &costs).map_err(|e| io(p, e))?;
        let steps: Vec<f64> = samples.step_sizes().map_or_else(|| vec![f64::NAN; self.n_draws], |x| x.to_vec());
        self.step_size.store_chunk(&[c, 0], &steps).map_err(|e| io(p, e))?;
        if let Some(g) = &self.gradient {
            let grads = samples
                .gradients()
                .ok_or(Error::NotStored { what: "gradients (the trace was created with gradients)" })?
                .as_standard_layout()
                .into_owned();
            let flat = grads.as_slice().ok_or(Error::NotStored { what: "contiguous gradients" })?;
            g.store_chunk(&[c, 0, 0], flat).map_err(|e| io(p, e))?;
        }
        // Last: the chain's completeness mark.
        if let Some(w) = &self.written {
            w.store_chunk(&[c], &[self.n_draws as i64]).map_err(|e| io(p, e))?;
        }
        Ok(())
    }

    /// Reads chain `chain`'s draws back (`draws × dim`), e.g. to check a trace.
    ///
    /// Errors: [`Error::InvalidParameter`] for a chain out of range; [`Error::IncompleteTrace`]
    /// for a chain not (wholly) written — its draws would read as NaN; [`Error::Io`].
    pub fn read_chain(&self, chain: usize) -> Result<ndarray::Array2<f64>> {
        if chain >= self.n_chains {
            return Err(Error::invalid("chain", chain, "must be below the trace's number of chains"));
        }
        if let Some(w) = &self.written {
            let v: Vec<i64> = w.retrieve_chunk::<Vec<i64>>(&[chain as u64]).map_err(|e| io(&self.path, e))?;
            let k = v.first().copied().unwrap_or(0).max(0) as u64;
            if k != self.n_draws as u64 {
                return Err(self.incomplete(chain, k));
            }
        }
        let mut out = ndarray::Array2::zeros((self.n_draws, self.dim));
        for v in &self.vars {
            let mut at = vec![chain as u64, 0];
            at.extend(std::iter::repeat_n(0, v.shape.len()));
            let block: Vec<f64> = v.array.retrieve_chunk::<Vec<f64>>(&at).map_err(|e| io(&self.path, e))?;
            if block.len() != self.n_draws * v.len {
                return Err(Error::CorruptCheckpoint { reason: format!("chunk of chain {chain}: wrong size") });
            }
            for (k, row) in block.chunks(v.len.max(1)).enumerate() {
                out.row_mut(k).as_slice_mut().expect("row-major")[v.offset..v.offset + v.len].copy_from_slice(row);
            }
        }
        Ok(out)
    }
}

/// Writes every chain of `est` to a Zarr store at `path` in the ArviZ InferenceData layout (see
/// [`ZarrTrace`]); gradients too if every chain stored them. Returns the path.
///
/// Errors: as [`draws_array`](crate::trace::export::draws_array) (streaming-mode parts, chains of
/// different lengths, no chain); [`Error::Io`].
///
/// ```
/// use sgmcmc::export;
/// use sgmcmc::prelude::*;
///
/// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 3)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, n_chains: 2, ..Default::default() };
/// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run()?;
/// let path = std::env::temp_dir().join("sgmcmc_write_zarr_doc.zarr");
/// // In Python: az.from_datatree(xarray.open_datatree(path, engine="zarr"))
/// let trace = export::write_zarr(&path, &out.estimate)?;
/// assert_eq!(trace.shape(), (2, 1_500, 2));
/// assert_eq!(trace.read_chain(1)?, out.estimate.samples(1).unwrap().draws());
/// # std::fs::remove_dir_all(&path).ok();
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn write_zarr(path: impl AsRef<Path>, est: &Estimate) -> Result<ZarrTrace> {
    let parts = est.equal_length_parts()?;
    let with_gradients = parts.iter().all(|s| s.gradients().is_some());
    let trace = ZarrTrace::create(path, parts.len(), parts[0].len(), est.dim(), with_gradients)?;
    for (k, s) in parts.iter().enumerate() {
        trace.write_chain(k, s)?;
    }
    trace.finish()?;
    Ok(trace)
}

/// Writes the draws of `est`, on the constrained scale of `layout` (dimension
/// [`Layout::dim`]: map a run's draws with [`Layout::constrain_estimate`] first), with one
/// posterior variable per block, named and shaped as the block (see
/// [`ZarrTrace::create_named`]). ArviZ then shows `sigma`, `beta[0]`, … as it does for its own
/// traces. Returns the trace.
///
/// Errors: [`Error::DimensionMismatch`] if `est` is not in the layout's dimension; as
/// [`write_zarr`].
pub fn write_zarr_named(path: impl AsRef<Path>, est: &Estimate, layout: &Layout) -> Result<ZarrTrace> {
    crate::error::check_len("dimension of the draws (the layout's constrained dimension)", layout.dim(), est.dim())?;
    let parts = est.equal_length_parts()?;
    let trace = ZarrTrace::create_named(path, parts.len(), parts[0].len(), layout)?;
    for (k, s) in parts.iter().enumerate() {
        trace.write_chain(k, s)?;
    }
    trace.finish()?;
    Ok(trace)
}
