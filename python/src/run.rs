//! `sgmcmc.sample`: the crate's `Sample` path on a thread of its own, so that Python's main thread
//! stays free to show progress and to take Ctrl-C; the result as a `Fit`.

use crate::errors::{invalid, to_py};
use crate::models::{Dyn, PyModel, forward_model};
use numpy::{PyArray1, PyArray3, PyArrayMethods};
use pyo3::prelude::*;
use sgmcmc::observe::{Control, Observer, Progress};
use sgmcmc::{
    ControlVariate, CvSettings, Error, Layout, Mala, MalaSettings, Minibatch, ModeSettings, Model, Psgld,
    PsgldSettings, Sample, SamplePath, Sampled, Sghmc, SghmcSettings, Sgld, SgldSettings, Sgnht, SgnhtSettings,
};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The phases of a run, as `Run.progress()` reports them.
const SETUP: u8 = 0;
const CHAINS: u8 = 1;
const CHECKS: u8 = 2;

/// What the run's thread shares with Python's: the stop request, the phase, every chain's
/// iteration.
#[derive(Default)]
pub struct State {
    stop: AtomicBool,
    phase: AtomicU8,
    n_iter: AtomicU64,
    chains: Mutex<Vec<u64>>,
    finished: AtomicU64,
    /// The step-bias check's companion: iterations done and planned (0 planned before it starts).
    check_done: AtomicU64,
    check_n: AtomicU64,
}

/// The model as the run sees it: the user's, with a check of the stop request in every method
/// during the set-up (the mode search, the tuning), so that Ctrl-C ends it within one gradient;
/// in the chains and the step-bias check, the observer stops them and the draws are kept.
struct Guarded {
    inner: Arc<Dyn>,
    state: Arc<State>,
}

fn guard(g: &Guarded, method: &'static str) -> sgmcmc::Result<()> {
    if g.state.stop.load(Ordering::Relaxed) && g.state.phase.load(Ordering::Relaxed) == SETUP {
        return Err(Error::ModelFailure { method, iteration: None, message: "interrupted (KeyboardInterrupt)".into() });
    }
    Ok(())
}

forward_model!(Guarded, |s| s.inner, guard);

/// Watches the chains and the step-bias check: their progress for the bar, the stop request.
struct Watch {
    state: Arc<State>,
    interval: u64,
}

impl Watch {
    fn record(&self, p: &Progress<'_>) -> Control {
        if let Ok(mut c) = self.state.chains.lock() {
            if c.len() < p.n_chains {
                c.resize(p.n_chains, 0);
            }
            c[p.chain] = p.iteration;
        }
        self.state.n_iter.store(p.n_iter, Ordering::Relaxed);
        if self.state.stop.load(Ordering::Relaxed) { Control::Stop } else { Control::Continue }
    }
}

impl Observer for Watch {
    fn init(&self, p: &Progress<'_>) -> Control {
        self.state.phase.store(CHAINS, Ordering::Relaxed);
        self.state.check_n.store(0, Ordering::Relaxed);
        self.record(p)
    }
    fn observe(&self, p: &Progress<'_>) -> Control {
        self.record(p)
    }
    fn finish(&self, p: &Progress<'_>) {
        self.record(p);
        let done = self.state.finished.fetch_add(1, Ordering::Relaxed) + 1;
        if done >= p.n_chains as u64 {
            self.state.finished.store(0, Ordering::Relaxed);
            self.state.phase.store(CHECKS, Ordering::Relaxed);
        }
    }
    fn interval(&self) -> u64 {
        self.interval
    }
    fn observe_bias_check(&self, iteration: u64, n_iter: u64) -> Control {
        self.state.phase.store(CHECKS, Ordering::Relaxed);
        self.state.check_done.store(iteration, Ordering::Relaxed);
        self.state.check_n.store(n_iter, Ordering::Relaxed);
        if self.state.stop.load(Ordering::Relaxed) { Control::Stop } else { Control::Continue }
    }
}

/// The options of `sgmcmc.sample`, as Python passed them (a dict with every key).
#[derive(Clone, FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options {
    sampler: String,
    batch_size: Option<usize>,
    draws: Option<u64>,
    accuracy: Option<f64>,
    budget: Option<u64>,
    time_limit: Option<f64>,
    chains: usize,
    burn_in: Option<u64>,
    thin: u64,
    seed: u64,
    start: Option<Vec<f64>>,
    names: Option<Vec<String>>,
    /// The step-bias check's cost; None: the default (grown where its noise sets the bound).
    bias_check: Option<f64>,
    /// The check off (then `bias_check` is None).
    bias_check_off: bool,
    check_interval: u64,
}

impl Options {
    /// None: the default; Some(None): off; Some(Some(c)): at cost `c`.
    fn bias_check(&self) -> Option<Option<f64>> {
        if self.bias_check_off { Some(None) } else { self.bias_check.map(Some) }
    }
}

/// One row of the summary table.
#[derive(Clone)]
pub struct Row {
    name: String,
    mean: f64,
    sd: f64,
    mcse_mean: f64,
    mcse_sd: f64,
    ess_bulk: f64,
    ess_tail: f64,
    rhat: f64,
    bias_mean: Option<f64>,
}

/// What a run made, without its sampler's type.
pub struct FitData {
    names: Vec<String>,
    /// Kept draws per chain (the fewest over the chains: a stopped run's chains are cut to it).
    n_draws: usize,
    chains: usize,
    /// Reported scale (θ), chain-major: chains × n_draws × names.len().
    draws: Vec<f64>,
    /// The sampler's coordinates (φ), chain-major: chains × n_draws × dim.
    raw: Vec<f64>,
    dim: usize,
    /// The step of each kept draw (chains × n_draws), where the sampler reports one.
    step_sizes: Option<Vec<f64>>,
    summary: String,
    converged: bool,
    stated_bound: f64,
    error_bound: f64,
    bias_bound: Option<f64>,
    max_rhat: f64,
    min_ess_bulk: f64,
    step_size: f64,
    reason: String,
    preconditioning: String,
    target: Option<(f64, bool, Option<String>)>,
    stopped: bool,
    rows: Vec<Row>,
    datum_gradients: u64,
    tuning_datum_gradients: u64,
    wall_seconds: f64,
    tuning_seconds: f64,
    iterations_per_second: f64,
    burn_in: u64,
    thin: u64,
    seed: u64,
    sampler: String,
}

fn collect<S>(fit: &Sampled<S>, layout: Option<&Layout>, o: &Options) -> sgmcmc::Result<FitData> {
    let est = fit.estimate();
    // The chains that kept a draw (a stopped run's later chains may not have started), cut to
    // the shortest, as the verdict judged them.
    let parts: Vec<_> = (0..est.n_parts()).filter_map(|i| est.samples(i)).filter(|s| !s.is_empty()).collect();
    let chains = parts.len();
    let n_draws = parts.iter().map(|p| p.draws().nrows()).min().unwrap_or(0);
    let step_sizes = parts
        .iter()
        .map(|p| p.step_sizes().map(|h| h.iter().take(n_draws).copied().collect::<Vec<f64>>()))
        .collect::<Option<Vec<_>>>()
        .map(|v| v.concat());
    let dim = est.dim();
    let mut raw = Vec::with_capacity(chains * n_draws * dim);
    for p in &parts {
        raw.extend(p.draws().rows().into_iter().take(n_draws).flat_map(|r| r.to_vec()));
    }
    let names = fit.table.names.clone();
    let width = names.len();
    let draws = match layout {
        Some(l) => {
            let mut theta = vec![0.0; l.dim()];
            let mut out = Vec::with_capacity(chains * n_draws * width);
            for phi in raw.chunks(dim) {
                l.constrain(phi, &mut theta)?;
                out.extend_from_slice(&theta);
            }
            out
        }
        None => raw.clone(),
    };
    let c = &fit.convergence;
    let rows = names
        .iter()
        .zip(&fit.table.rows)
        .map(|(n, r)| Row {
            name: n.clone(),
            mean: r.mean,
            sd: r.sd,
            mcse_mean: r.mcse_mean,
            mcse_sd: r.mcse_sd,
            ess_bulk: r.ess_bulk,
            ess_tail: r.ess_tail,
            rhat: r.rhat,
            bias_mean: r.bias_mean,
        })
        .collect();
    let bias_cost = fit.bias.as_ref().map_or(0, |b| b.cost.datum_gradients);
    Ok(FitData {
        names,
        n_draws,
        chains,
        draws,
        raw,
        dim,
        step_sizes,
        summary: format!("{fit}"),
        converged: c.converged,
        stated_bound: c.stated_bound(),
        error_bound: c.error_bound,
        bias_bound: c.bias_bound,
        max_rhat: c.max_rhat,
        min_ess_bulk: c.min_ess_bulk,
        step_size: fit.tuned.step_size,
        reason: fit.tuned.reason.clone(),
        preconditioning: fit.tuned.preconditioning.clone(),
        target: fit.target.as_ref().map(|t| (t.accuracy, t.reached, t.why.clone())),
        stopped: fit.stopped,
        rows,
        datum_gradients: fit.tuned.cost.datum_gradients + fit.output.cost.datum_gradients + bias_cost,
        tuning_datum_gradients: fit.tuned.cost.datum_gradients,
        wall_seconds: fit.tuned.wall_time.as_secs_f64() + fit.output.wall_time.as_secs_f64(),
        tuning_seconds: fit.tuned.wall_time.as_secs_f64(),
        iterations_per_second: fit.output.iterations_per_second(),
        burn_in: fit.settings.burn_in,
        thin: fit.settings.thin.max(1),
        seed: o.seed,
        sampler: o.sampler.clone(),
    })
}

/// The `Sample` builder with the options, observed by `watch`.
fn go<'m, S>(model: &'m Guarded, sampler: S, o: &Options, watch: &'m Watch) -> sgmcmc::Result<FitData>
where
    S: SamplePath<Guarded, Output = Sampled<S>>,
{
    let mut b = Sample::new(model, sampler).chains(o.chains).seed(o.seed).thin(o.thin).observer(watch);
    if let Some(d) = o.draws {
        b = b.draws(d);
    }
    if let Some(a) = o.accuracy {
        b = b.accuracy(a);
    }
    if let Some(x) = o.budget {
        b = b.budget(x);
    }
    if let Some(t) = o.time_limit {
        b = b.time_limit(Duration::from_secs_f64(t.max(0.0)));
    }
    if let Some(x) = o.burn_in {
        b = b.burn_in(x);
    }
    if let Some(s) = &o.start {
        b = b.start(s);
    }
    if let Some(n) = &o.names {
        b = b.names(n);
    }
    if let Some(c) = o.bias_check() {
        b = b.bias_check(c);
    }
    let fit = b.run()?;
    collect(&fit, model.output_layout(), o)
}

/// The samplers `sgmcmc.sample` knows, by name.
pub const SAMPLERS: &str = "auto, sgld, sgld-cv, sghmc, sghmc-cv, sgnht, sgnht-cv, psgld, psgld-cv, mala";
const SAMPLER_LIST: &str = "one of auto, sgld, sgld-cv, sghmc, sghmc-cv, sgnht, sgnht-cv, psgld, psgld-cv, mala";

fn dispatch(model: &Guarded, o: &Options, watch: &Watch) -> sgmcmc::Result<FitData> {
    let n = model.n_data();
    let batch = o.batch_size.unwrap_or(100.min(n.max(1)));
    let cv = || -> sgmcmc::Result<ControlVariate> {
        let theta0 = o.start.clone().unwrap_or_else(|| vec![0.0; model.dim()]);
        ControlVariate::at_mode(
            model,
            &theta0,
            &ModeSettings::default(),
            CvSettings { batch_size: batch, ..Default::default() },
        )
    };
    let mb = || Minibatch::new(batch);
    match o.sampler.as_str() {
        "auto" => go(model, Sgld::auto(), o, watch),
        "sgld" => go(model, Sgld::new(SgldSettings::default(), mb())?, o, watch),
        "sgld-cv" => go(model, Sgld::new(SgldSettings::default(), cv()?)?, o, watch),
        "sghmc" => go(model, Sghmc::new(SghmcSettings::default(), mb())?, o, watch),
        "sghmc-cv" => go(model, Sghmc::new(SghmcSettings::default(), cv()?)?, o, watch),
        "sgnht" => go(model, Sgnht::new(SgnhtSettings::default(), mb())?, o, watch),
        "sgnht-cv" => go(model, Sgnht::new(SgnhtSettings::default(), cv()?)?, o, watch),
        "psgld" => go(model, Psgld::new(PsgldSettings::default(), mb())?, o, watch),
        "psgld-cv" => go(model, Psgld::new(PsgldSettings::default(), cv()?)?, o, watch),
        "mala" => go(model, Mala::new(MalaSettings::default())?, o, watch),
        other => Err(invalid("sampler", other, SAMPLER_LIST)),
    }
}

/// A run in progress: `wait` for it (the GIL released), read its `progress`, `stop` it, take its
/// `result`.
#[pyclass(module = "sgmcmc._core")]
pub struct Run {
    state: Arc<State>,
    rx: Mutex<Option<Receiver<sgmcmc::Result<FitData>>>>,
    result: Mutex<Option<sgmcmc::Result<FitData>>>,
}

#[pymethods]
impl Run {
    /// Waits up to `timeout` seconds (the GIL released) and tells whether the run has ended.
    fn wait(&self, py: Python<'_>, timeout: f64) -> bool {
        if self.result.lock().is_ok_and(|r| r.is_some()) {
            return true;
        }
        let Ok(mut rx) = self.rx.lock() else { return true };
        let Some(r) = rx.take() else { return true };
        let (r, got) = py.detach(move || {
            let got = r.recv_timeout(Duration::from_secs_f64(timeout.max(0.0)));
            (r, got)
        });
        let got = match got {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => {
                *rx = Some(r);
                return false;
            }
            Err(RecvTimeoutError::Disconnected) => Err(Error::Panic {
                during: "the run's thread (ended without a result)",
                iteration: 0,
                message: "no result".into(),
            }),
        };
        *rx = None;
        if let Ok(mut slot) = self.result.lock() {
            *slot = Some(got);
        }
        true
    }

    /// Asks the run to stop: chains stop at their next check (every `check_interval` iterations)
    /// and keep their draws; the step-bias check stops likewise (skipped, the draws kept); the
    /// set-up stops at the next gradient (an error: there is nothing drawn to keep).
    fn stop(&self) {
        self.state.stop.store(true, Ordering::Relaxed);
    }

    /// `(phase, iterations done, iterations planned)`: phase "setup" (mode, tuning), "chains"
    /// (summed over the chains), or "checks" (the step-bias check's companion, once it reports;
    /// the chains' figures before).
    fn progress(&self) -> (String, u64, u64) {
        let phase = match self.state.phase.load(Ordering::Relaxed) {
            SETUP => "setup",
            CHAINS => "chains",
            CHECKS => "checks",
            _ => "done",
        };
        let check_n = self.state.check_n.load(Ordering::Relaxed);
        let (done, n) = match self.state.chains.lock() {
            _ if phase == "checks" && check_n > 0 => (self.state.check_done.load(Ordering::Relaxed), check_n),
            Ok(c) => (c.iter().sum(), self.state.n_iter.load(Ordering::Relaxed) * c.len() as u64),
            Err(_) => (0, 0),
        };
        (phase.to_string(), done, n)
    }

    /// Whether a stop was asked.
    #[getter]
    fn stop_requested(&self) -> bool {
        self.state.stop.load(Ordering::Relaxed)
    }

    /// The result (once `wait` said the run ended): a `Fit`, or the crate's error raised.
    fn result(&self, py: Python<'_>) -> PyResult<Fit> {
        let taken = self.result.lock().ok().and_then(|mut r| r.take());
        match taken {
            Some(Ok(data)) => Ok(Fit { data: Arc::new(data) }),
            Some(Err(e)) => Err(to_py(py, &e)),
            None => Err(to_py(py, &invalid("result", "not ready", "call wait() until it returns True, once"))),
        }
    }
}

/// Starts `sgmcmc.sample`'s run on a thread of its own.
#[pyfunction]
pub fn start_sample(model: &PyModel, options: Options) -> Run {
    let o = Options { check_interval: options.check_interval.max(1), ..options };
    let state = Arc::new(State::default());
    let (tx, rx) = channel();
    let guarded = Guarded { inner: model.inner.clone(), state: state.clone() };
    let watch = Watch { state: state.clone(), interval: o.check_interval };
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(&guarded, &o, &watch)))
            .unwrap_or_else(|p| {
                let message = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(Error::Panic { during: "sgmcmc.sample (outside the chains)", iteration: 0, message })
            });
        let _ = tx.send(r);
    });
    Run { state, rx: Mutex::new(Some(rx)), result: Mutex::new(None) }
}

/// The result of `sgmcmc.sample` (the Rust side; `sgmcmc.Fit` wraps it).
#[pyclass(frozen, module = "sgmcmc._core")]
pub struct Fit {
    data: Arc<FitData>,
}

#[pymethods]
impl Fit {
    /// The draws on the reported scale: chains × draws × quantities.
    fn draws<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray3<f64>>> {
        let d = &self.data;
        let a = PyArray1::from_slice(py, &d.draws);
        a.reshape([d.chains, d.n_draws, d.names.len()])
    }

    /// The draws on the sampler's coordinates (unconstrained φ): chains × draws × dim.
    fn raw_draws<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray3<f64>>> {
        let d = &self.data;
        let a = PyArray1::from_slice(py, &d.raw);
        a.reshape([d.chains, d.n_draws, d.dim])
    }

    /// The step of each kept draw (chains × draws), or None where the sampler reports none.
    fn step_sizes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, numpy::PyArray2<f64>>>> {
        let d = &self.data;
        match &d.step_sizes {
            Some(h) => Ok(Some(PyArray1::from_slice(py, h).reshape([d.chains, d.n_draws])?)),
            None => Ok(None),
        }
    }

    /// The text the Rust path prints: the target, the step, the verdict and the summary table.
    #[getter]
    fn summary(&self) -> String {
        self.data.summary.clone()
    }

    /// The reported quantities' names.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.data.names.clone()
    }

    /// The summary table's rows: `(name, mean, sd, mcse_mean, mcse_sd, ess_bulk, ess_tail, rhat,
    /// bias_mean)`.
    #[allow(clippy::type_complexity)]
    fn table(&self) -> Vec<(String, f64, f64, f64, f64, f64, f64, f64, Option<f64>)> {
        self.data
            .rows
            .iter()
            .map(|r| {
                (r.name.clone(), r.mean, r.sd, r.mcse_mean, r.mcse_sd, r.ess_bulk, r.ess_tail, r.rhat, r.bias_mean)
            })
            .collect()
    }

    /// The verdict and the run's record as a dict of plain values.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let d = &self.data;
        let m = pyo3::types::PyDict::new(py);
        m.set_item("converged", d.converged)?;
        m.set_item("stated_bound", d.stated_bound)?;
        m.set_item("error_bound", d.error_bound)?;
        m.set_item("bias_bound", d.bias_bound)?;
        m.set_item("max_rhat", d.max_rhat)?;
        m.set_item("min_ess_bulk", d.min_ess_bulk)?;
        m.set_item("step_size", d.step_size)?;
        m.set_item("tuner_reason", &d.reason)?;
        m.set_item("preconditioning", &d.preconditioning)?;
        m.set_item("target_accuracy", d.target.as_ref().map(|t| t.0))?;
        m.set_item("target_reached", d.target.as_ref().map(|t| t.1))?;
        m.set_item("target_why", d.target.as_ref().and_then(|t| t.2.clone()))?;
        m.set_item("stopped", d.stopped)?;
        m.set_item("datum_gradients", d.datum_gradients)?;
        m.set_item("tuning_datum_gradients", d.tuning_datum_gradients)?;
        m.set_item("wall_seconds", d.wall_seconds)?;
        m.set_item("tuning_seconds", d.tuning_seconds)?;
        m.set_item("iterations_per_second", d.iterations_per_second)?;
        m.set_item("burn_in", d.burn_in)?;
        m.set_item("thin", d.thin)?;
        m.set_item("seed", d.seed)?;
        m.set_item("sampler", &d.sampler)?;
        m.set_item("chains", d.chains)?;
        m.set_item("draws", d.n_draws)?;
        Ok(m)
    }
}

/// Seconds per call of the model's `grad_data_sum(theta, idx)`, over `reps` calls (the GIL
/// released, so that a Python model pays for taking it back, as in a run).
#[pyfunction]
pub fn time_gradient(py: Python<'_>, model: &PyModel, theta: Vec<f64>, idx: Vec<usize>, reps: usize) -> PyResult<f64> {
    let m = model.inner.clone();
    if theta.len() != m.dim() {
        return Err(to_py(py, &Error::DimensionMismatch { what: "theta", expected: m.dim(), got: theta.len() }));
    }
    crate::models::check_idx(m.as_ref(), &idx)?;
    let r = py.detach(move || -> sgmcmc::Result<f64> {
        let mut out = vec![0.0; m.dim()];
        m.grad_data_sum(&theta, &idx, &mut out)?;
        let t = std::time::Instant::now();
        for _ in 0..reps.max(1) {
            m.grad_data_sum(&theta, &idx, &mut out)?;
            std::hint::black_box(&mut out);
        }
        Ok(t.elapsed().as_secs_f64() / reps.max(1) as f64)
    });
    r.map_err(|e| to_py(py, &e))
}
