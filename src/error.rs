//! The crate's error type.

/// Everything that can go wrong in `sgmcmc`.
///
/// Every variant names what was wrong (the parameter, the dimensions, the iteration), so a
/// caller can react programmatically and a person can read the message. No function of this
/// crate panics on user input; it returns one of these instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is outside its valid range (non-positive step size, friction outside (0, 1], …).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name, as spelled in its settings struct.
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// What the valid range is.
        reason: &'static str,
    },
    /// Two things that must have the same size do not.
    #[error("dimension mismatch for {what}: expected {expected}, got {got}")]
    DimensionMismatch {
        /// What was being matched (e.g. `"initial state"`, `"targets"`).
        what: &'static str,
        /// The size that was required.
        expected: usize,
        /// The size that was given.
        got: usize,
    },
    /// A model or data set with no data (N = 0) or no parameters (d = 0).
    #[error("empty input: {what}")]
    EmptyData {
        /// What was empty.
        what: &'static str,
    },
    /// A minibatch size of 0, or larger than the number of data items.
    #[error("invalid batch size {batch_size} for a data set of {n_data} items (must be in 1..=N)")]
    InvalidBatchSize {
        /// The requested minibatch size.
        batch_size: usize,
        /// The number of data items N of the model.
        n_data: usize,
    },
    /// A gradient estimate contained NaN or ±∞.
    #[error("non-finite gradient at iteration {iteration}")]
    NonFiniteGradient {
        /// The iteration (1-based; 0 means the initial state) at which it was computed.
        iteration: u64,
    },
    /// A non-finite gradient at a chain's start (or a point [`check_model`](crate::check_model)
    /// tried), located: the first coordinate that is NaN or ±∞ and whose gradient it is — the
    /// prior's, or one datum's (`grad_data_sum` on that item alone), so that the datum with a
    /// NaN or an overflow can be found. A divergence like [`Error::NonFiniteGradient`].
    #[error("non-finite gradient at iteration {iteration}: coordinate {coordinate} of {}", non_finite_source(*datum))]
    NonFiniteGradientAt {
        /// The iteration (0: the start).
        iteration: u64,
        /// The first non-finite coordinate (0-based).
        coordinate: usize,
        /// The datum (0-based index into the model's data) whose own gradient is non-finite;
        /// `None` if the prior's is.
        datum: Option<usize>,
    },
    /// A starting point given by the caller contained NaN or ±∞.
    #[error("non-finite starting point: {what} contains NaN or ±∞")]
    NonFiniteStart {
        /// Which starting point (e.g. `"theta0"`, `"centre"`).
        what: &'static str,
    },
    /// The draws a run would keep do not fit in the memory limit
    /// ([`RunSettings::memory_limit`](crate::RunSettings::memory_limit)); nothing was run.
    #[error(
        "the run would keep {needed} bytes of draws, above the memory limit of {limit} bytes: raise `thin`, use `Storage::Moments`, run fewer iterations or raise `memory_limit`"
    )]
    MemoryLimit {
        /// Bytes the run's storage would need (saturated at `u64::MAX`).
        needed: u64,
        /// The limit.
        limit: u64,
    },
    /// A table an estimator keeps (SAGA's per-datum gradients) does not fit: above the limit
    /// set on it, or the allocation itself failed. Nothing was allocated.
    #[error("{what} needs {needed} bytes: {}", limit.map_or_else(|| "the allocation failed".to_string(), |l| format!("above its memory limit of {l} bytes")))]
    OutOfMemory {
        /// What needed the memory.
        what: &'static str,
        /// The bytes it needs (saturated at `u64::MAX`).
        needed: u64,
        /// The limit it exceeded; `None` if the allocator refused.
        limit: Option<u64>,
    },
    /// Multilevel SGLD's level-0 paths have not relaxed: the mean of `g` at the end of the
    /// horizon differs from its mean at half the horizon by more than three standard errors, and
    /// the exponential extrapolation of `g(θ₀)`, `g(T/2)`, `g(T)` to the finest level's horizon
    /// leaves a bias above half the target RMSE (or shows no decay at all): the paths still
    /// depend on their starting point. [`MlSgld::run_adaptive`](crate::MlSgld::run_adaptive)
    /// doubles the horizon itself up to
    /// [`ADAPTIVE_HORIZON_DOUBLINGS`](crate::ADAPTIVE_HORIZON_DOUBLINGS) times before returning
    /// this (`horizon_time` is then the last horizon tried); the posterior's relaxation time
    /// (≈ 1/λ_min) is then far longer than the curvature at the mode says.
    #[error(
        "multilevel SGLD did not relax: over its horizon (time {horizon_time:.3e}) the level-0 mean of g still changed by {change:.3e} (standard error {standard_error:.2e}) between half and full horizon, an estimated remaining bias of {remaining_bias:.3e} (after the adaptive run's own doublings of the horizon); the horizon must exceed the relaxation time ≈ 1/λ_min"
    )]
    NotRelaxed {
        /// The level-0 horizon `m h₀`.
        horizon_time: f64,
        /// Mean of `g(end) − g(half)` over the level-0 paths.
        change: f64,
        /// Its standard error.
        standard_error: f64,
        /// The bias left at the finest level's horizon by an exponential extrapolation (∞ if no
        /// decay shows).
        remaining_bias: f64,
    },
    /// A model's gradient has the wrong sign: it returns `∇log p` where the crate asks for the
    /// gradient of the potential `∇U = −∇log p` (see [`Model`](crate::Model)). Found by
    /// [`check_model`](crate::check_model).
    #[error(
        "the model's {part} has the wrong sign ({evidence}); return the gradient of the potential U = −log p, i.e. negate it"
    )]
    GradientSign {
        /// Which method (`"grad_prior"`, `"grad_data_sum"`, or both together).
        part: &'static str,
        /// What was measured.
        evidence: String,
    },
    /// A model's gradient disagrees with finite differences of its potential (neither equal nor
    /// of opposite sign). Found by [`check_model`](crate::check_model).
    #[error(
        "the model's {part} disagrees with finite differences of its potential: directional derivative {analytic:.6e}, finite difference {finite_difference:.6e} (relative error {rel_error:.2e})"
    )]
    GradientMismatch {
        /// Which method (`"grad_prior"` or `"grad_data_sum"`).
        part: &'static str,
        /// The gradient's directional derivative.
        analytic: f64,
        /// The potential's central difference along the same direction.
        finite_difference: f64,
        /// Their relative difference.
        rel_error: f64,
    },
    /// The state ran away: its norm grew by more than the runaway factor
    /// ([`RunSettings::runaway_factor`](crate::RunSettings::runaway_factor)) over the largest
    /// norm of the first half of the chain so far.
    #[error(
        "the chain ran away at iteration {iteration}: ‖θ‖ = {norm:.3e}, up from at most {reference:.3e} in the first half of the run; {}",
        runaway_causes(*gradient_outward)
    )]
    Runaway {
        /// The iteration at which it was detected.
        iteration: u64,
        /// ‖θ‖ then.
        norm: f64,
        /// The largest ‖θ‖ over the first half of the chain (up to the last power of two below
        /// half the iteration).
        reference: f64,
        /// Whether the sampler's gradient at the runaway point pointed outwards (`θ·∇Ũ > 0`, as
        /// a correct `∇U` does far from the mode: the step is too large) or inwards (as `∇log p`
        /// does: a wrong sign); `None` if the sampler keeps no gradient.
        gradient_outward: Option<bool>,
    },
    /// The state contained NaN or ±∞ (the sampler diverged: usually the step size is too large).
    #[error("non-finite state at iteration {iteration} (step size too large?)")]
    NonFiniteState {
        /// The iteration (1-based; 0 means the initial state) after which it was found.
        iteration: u64,
    },
    /// A potential value was NaN (a +∞ potential is a valid zero density).
    #[error("non-finite potential at iteration {iteration}")]
    NonFinitePotential {
        /// The iteration (1-based; 0 means the initial state) at which it was computed.
        iteration: u64,
    },
    /// A model's gradient computation failed: an automatic-differentiation engine returned an
    /// error (shape mismatch, backend failure, ...) from a [`Model`](crate::Model) method.
    #[error("the model's `{method}` failed{}: {message}", at_iteration(*iteration))]
    ModelFailure {
        /// The [`Model`](crate::Model) method that failed.
        method: &'static str,
        /// The sampler's iteration when it failed (1-based; 0 is `init`), when a sampler
        /// called it; `None` when called outside a sampler step.
        iteration: Option<u64>,
        /// The engine's own message.
        message: String,
    },
    /// The sampler needs a method of [`Model`](crate::Model) that the model does not provide.
    #[error("the model does not implement `{method}`, which {needed_by} requires")]
    Unsupported {
        /// The missing [`Model`](crate::Model) method.
        method: &'static str,
        /// Who needed it.
        needed_by: &'static str,
    },
    /// A sampler was stepped before [`Sampler::init`](crate::Sampler::init) bound it to a model.
    #[error("the sampler was stepped before `init`")]
    NotInitialised,
    /// The requested output was not kept by the run (e.g. samples in streaming mode).
    #[error("not available: {what}")]
    NotStored {
        /// What was asked for.
        what: &'static str,
    },
    /// A run produced no sample to estimate from (e.g. burn-in ≥ number of iterations).
    #[error("no samples were recorded: {reason}")]
    NoSamples {
        /// Why none were recorded.
        reason: &'static str,
    },
    /// The weights of a (possibly signed) estimate sum to zero, so it cannot be normalised.
    #[error("the total weight of the samples is zero or not finite")]
    ZeroTotalWeight,
    /// A dense linear system was singular or a matrix that must be positive definite was not.
    #[error("linear algebra failure in {what}: {reason}")]
    LinearAlgebra {
        /// The computation that failed.
        what: &'static str,
        /// Why (e.g. "matrix not positive definite").
        reason: &'static str,
    },
    /// An iterative computation stopped before meeting its tolerance.
    #[error(
        "{what} did not converge in {iterations} iteration{} (residual {residual:e}){}",
        if *iterations == 1 { "" } else { "s" },
        not_converged_hint(what)
    )]
    NotConverged {
        /// The computation.
        what: &'static str,
        /// Iterations made.
        iterations: u64,
        /// The residual (e.g. gradient norm) where it stopped.
        residual: f64,
    },
    /// Too few samples for the requested estimate (e.g. ZV regression with more control variates
    /// than draws).
    #[error("too few samples: {needed} needed, {got} given")]
    TooFewSamples {
        /// The minimum number required.
        needed: usize,
        /// The number given.
        got: usize,
    },
    /// An adaptive computation stopped before meeting its target; what was achieved is reported.
    #[error(
        "{reason}: estimate {estimate} with estimated RMSE {estimated_rmse:e} after {datum_evaluations} datum evaluations"
    )]
    BudgetExhausted {
        /// Why it stopped.
        reason: &'static str,
        /// The estimate reached.
        estimate: f64,
        /// Its estimated root-mean-square error.
        estimated_rmse: f64,
        /// Work spent (datum gradients plus Hessian-vector products).
        datum_evaluations: u64,
    },
    /// A line of a data file could not be parsed.
    #[error("parse error on line {line}: {reason}")]
    Parse {
        /// The 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// A Zarr trace (feature `zarr`) with a chain not wholly written — its writer stopped (was
    /// killed, failed) before it wrote that chain's draws, which would read as NaN.
    #[error(
        "the Zarr trace {path} is incomplete: chain {chain} has {written} of {expected} draws written (the process writing it stopped before it finished); rewrite the trace"
    )]
    IncompleteTrace {
        /// The trace's directory.
        path: String,
        /// The first chain not wholly written.
        chain: usize,
        /// Its draws written (0: none, or not all of its chunks).
        written: u64,
        /// The trace's draws per chain.
        expected: u64,
    },
    /// A file could not be read or written.
    #[error("I/O error on {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The system's message.
        message: String,
    },
    /// A checkpoint file is not a valid checkpoint of this crate: truncated, altered (its
    /// checksum fails), not a checkpoint at all, or inconsistent with itself.
    #[error("corrupt checkpoint: {reason}")]
    CorruptCheckpoint {
        /// What is wrong.
        reason: String,
    },
    /// A valid checkpoint that does not fit what it is loaded as or resumed with: another format
    /// version, another kind of run, another sampler type, or another model (dimension, data size,
    /// data).
    #[error("checkpoint mismatch: {what} is {found}, expected {expected}")]
    CheckpointMismatch {
        /// What differs (`"format version"`, `"kind of run"`, `"sampler type"`, `"model dimension"`,
        /// `"model data size (number of data)"`, `"model data (fingerprint: …)"`).
        what: &'static str,
        /// What this build can load (or what the model passed to a resume has).
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// An error raised inside one path of one sample of a multilevel estimator.
    #[error("level {level}, sample {sample}, {path} path: {source}")]
    Sample {
        /// The level l.
        level: usize,
        /// The sample's index within its level.
        sample: u64,
        /// Which path: `"fine"`, `"coarse"` or `"coarse (antithetic)"`.
        path: &'static str,
        /// The error that path raised (its iteration inside).
        #[source]
        source: Box<Error>,
    },
    /// An error raised on this MPI rank (feature `mpi`): every other rank of the run returns
    /// [`RankFailure`](Error::RankFailure) naming this rank. A divergence of a sharded run
    /// (`distributed::run_sharded`) whose non-finite gradient came from
    /// one rank's shard is this variant on every rank, naming that rank, around the divergence
    /// ([`Error::NonFiniteGradient`] with its iteration: [`is_divergence`](Error::is_divergence)
    /// sees it).
    #[error("rank {rank}: {source}")]
    Rank {
        /// This process's rank.
        rank: usize,
        /// The error it raised.
        #[source]
        source: Box<Error>,
    },
    /// Another MPI rank of the run failed (feature `mpi`); what it reported. The failing rank
    /// itself returns [`Rank`](Error::Rank) with the typed error.
    #[error("rank {rank} failed{}{}: {message}", chain.map_or_else(String::new, |c| format!(" in chain {c}")), at_iteration(*iteration))]
    RankFailure {
        /// The rank that failed (the lowest, if several did).
        rank: usize,
        /// The chain it was running, if the failure was in a chain.
        chain: Option<usize>,
        /// The iteration, if the error names one.
        iteration: Option<u64>,
        /// Its error message.
        message: String,
    },
    /// A message between MPI ranks (feature `mpi`) could not be encoded on this rank or decoded
    /// from another: ranks built from different versions of the program, or a corrupted
    /// transfer.
    ///
    /// ```
    /// let e = sgmcmc::Error::Wire { rank: Some(2), what: "run outputs", reason: "unexpected end".into() };
    /// assert_eq!(e.to_string(), "MPI exchange of run outputs: cannot decode rank 2's message (unexpected end)");
    /// ```
    #[error("MPI exchange of {what}: cannot {} ({reason})", rank.map_or_else(|| "encode this rank's message".to_string(), |r| format!("decode rank {r}'s message")))]
    Wire {
        /// The rank whose message did not decode; `None` if this rank's did not encode.
        rank: Option<usize>,
        /// What was exchanged (`"chain outputs"`, `"set-ups"`, …).
        what: &'static str,
        /// The encoder's or decoder's message.
        reason: String,
    },
    /// User code (the model's methods, an observer) panicked inside a chain: the panic was
    /// caught at the chain's boundary, the other chains ran to their end, and what was drawn is
    /// kept ([`Error::Kept`] around the [`Error::Chain`] naming the chain, around this).
    #[error("a panic in {during} at iteration {iteration}: {message}")]
    Panic {
        /// Where: `"the chain's step (the model's code or the sampler's)"`, `"an observer"`, ….
        during: &'static str,
        /// The iteration being made (1-based; 0 is the chain's start).
        iteration: u64,
        /// The panic's message (its `&str` or `String` payload).
        message: String,
    },
    /// A run failed after it had drawn, or a [`Resume`](crate::Resume) was refused: the error,
    /// and the output as it stood — every chain's draws and report up to its failure (failed
    /// chains are recorded as [`Divergence`](crate::Divergence)s with their message), or the
    /// output handed to the refused `Resume`, unchanged. Its message is the error's own; take
    /// the output back with [`Error::into_output`] (or look at it with [`Error::output`]).
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// use sgmcmc::Resume;
    ///
    /// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 7)?;
    /// let other = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 8)?;
    /// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
    /// let settings = RunSettings { n_iter: 1_000, burn_in: 100, ..Default::default() };
    /// let out = Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(settings).run()?;
    /// // Resumed with another data set: refused, and the run comes back with the error.
    /// let e = Resume::new(&other, out).run().unwrap_err();
    /// assert!(matches!(e.root(), Error::CheckpointMismatch { .. }));
    /// let out: RunOutput<Sgld<Minibatch>> = e.into_output().expect("the run is kept");
    /// assert_eq!(out.chains[0].iterations, 1_000);
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    #[error("{source}")]
    Kept {
        /// The error.
        #[source]
        source: Box<Error>,
        /// The output as it stood.
        output: KeptOutput,
    },
    /// An error raised inside one chain of a multi-chain run.
    #[error("chain {chain}: {source}")]
    Chain {
        /// The index of the chain (0-based).
        chain: usize,
        /// The error that chain raised.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// For an error raised inside a chain of a run (or a path of a multilevel sample), the error
    /// itself; otherwise `self`.
    ///
    /// Convenient for matching: `err.root()` is the variant the sampler or model raised (also
    /// through [`Error::Kept`]).
    ///
    /// ```
    /// use sgmcmc::prelude::*;
    /// let model = LinearGaussian::synthetic(100, 2, 1.0, 10.0, 1)?;
    /// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(10))?;
    /// match Runner::new(&model, &sgld).start(&[0.0, 0.0]).run() {
    ///     // before: Err(Error::Chain { chain, source }) => …
    ///     Err(e) if e.is_divergence() => println!("chain {:?}: {}", e.chain(), e.root()),
    ///     Err(e) => return Err(e),
    ///     Ok(out) => println!("{}", out.estimate.mean()?[0]),
    /// }
    /// # Ok::<(), sgmcmc::Error>(())
    /// ```
    pub fn root(&self) -> &Error {
        match self {
            Error::Chain { source, .. }
            | Error::Sample { source, .. }
            | Error::Rank { source, .. }
            | Error::Kept { source, .. } => source.root(),
            other => other,
        }
    }

    /// Whether the error (looking through chain and rank wrappers) is a divergence of the
    /// chain — a non-finite state or gradient, or a runaway — rather than a failure of the
    /// settings, the model or the machine: what [`OnDivergence::Report`](crate::OnDivergence)
    /// turns into a report and what the tuners read as "this step is too large".
    ///
    /// ```
    /// use sgmcmc::Error;
    /// assert!(Error::NonFiniteState { iteration: 3 }.is_divergence());
    /// assert!(!Error::EmptyData { what: "no data" }.is_divergence());
    /// ```
    pub fn is_divergence(&self) -> bool {
        matches!(
            self.root(),
            Error::NonFiniteState { .. }
                | Error::NonFiniteGradient { .. }
                | Error::NonFiniteGradientAt { .. }
                | Error::Runaway { .. }
        )
    }

    /// Whether this is [`Error::Unsupported`] (a [`Model`](crate::Model) method the model does not
    /// provide), looking through chain and rank wrappers: what callers that can do without an
    /// optional method test.
    ///
    /// ```
    /// use sgmcmc::Error;
    /// let e = Error::Unsupported { method: "potential_prior", needed_by: "MALA" };
    /// assert!(e.is_unsupported());
    /// assert!(!Error::NotInitialised.is_unsupported());
    /// ```
    pub fn is_unsupported(&self) -> bool {
        matches!(self.root(), Error::Unsupported { .. })
    }

    /// An [`Error::Unsupported`] restated as needed by `who`; any other error unchanged.
    pub(crate) fn needed_by(self, who: &'static str) -> Self {
        match self {
            Error::Unsupported { method, .. } => Error::Unsupported { method, needed_by: who },
            e => e,
        }
    }

    /// The iteration the error names, if any (looking through chain and rank wrappers).
    pub fn iteration(&self) -> Option<u64> {
        match self.root() {
            Error::NonFiniteGradient { iteration }
            | Error::NonFiniteGradientAt { iteration, .. }
            | Error::NonFiniteState { iteration }
            | Error::NonFinitePotential { iteration }
            | Error::Runaway { iteration, .. }
            | Error::Panic { iteration, .. } => Some(*iteration),
            Error::ModelFailure { iteration, .. } | Error::RankFailure { iteration, .. } => *iteration,
            _ => None,
        }
    }

    /// The chain the error names, if any (looking through a rank wrapper).
    pub fn chain(&self) -> Option<usize> {
        match self {
            Error::Chain { chain, .. } => Some(*chain),
            Error::Rank { source, .. } | Error::Kept { source, .. } => source.chain(),
            Error::RankFailure { chain, .. } => *chain,
            _ => None,
        }
    }

    /// The output kept with the error ([`Error::Kept`], also inside chain and rank wrappers), if
    /// it is an `O` (a [`RunOutput`](crate::RunOutput) of the run's sampler, an
    /// [`RrOutput`](crate::RrOutput), …).
    pub fn output<O: 'static>(&self) -> Option<&O> {
        match self {
            Error::Kept { output, source } => output.0.downcast_ref::<O>().or_else(|| source.output()),
            Error::Chain { source, .. } | Error::Rank { source, .. } => source.output(),
            _ => None,
        }
    }

    /// The output kept with the error (see [`output`](Self::output)), taken back: moved out when
    /// this error holds the only reference to it, else cloned.
    pub fn into_output<O: Clone + Send + Sync + 'static>(self) -> Option<O> {
        match self {
            Error::Kept { output, source } => match std::sync::Arc::downcast::<O>(output.0) {
                Ok(arc) => Some(std::sync::Arc::try_unwrap(arc).unwrap_or_else(|a| (*a).clone())),
                Err(_) => source.into_output(),
            },
            Error::Chain { source, .. } | Error::Rank { source, .. } => source.into_output(),
            _ => None,
        }
    }

    /// `self` with `output` kept ([`Error::Kept`]).
    pub(crate) fn keeping<O: Send + Sync + 'static>(self, output: O) -> Self {
        Error::Kept { source: Box::new(self), output: KeptOutput(std::sync::Arc::new(output)) }
    }

    /// A [`ModelFailure`](Error::ModelFailure) raised outside a sampler step: what an adapter
    /// returns from a failing [`Model`](crate::Model) method.
    pub fn model_failure(method: &'static str, message: impl std::fmt::Display) -> Self {
        Error::ModelFailure { method, iteration: None, message: message.to_string() }
    }

    /// Stamps a [`ModelFailure`](Error::ModelFailure) or [`RankFailure`](Error::RankFailure)
    /// that carries no iteration (also inside [`Rank`](Error::Rank)) with `iteration`; other
    /// errors are returned unchanged.
    pub(crate) fn at_iteration(self, iteration: u64) -> Self {
        match self {
            Error::ModelFailure { method, iteration: None, message } => {
                Error::ModelFailure { method, iteration: Some(iteration), message }
            }
            Error::RankFailure { rank, chain, iteration: None, message } => {
                Error::RankFailure { rank, chain, iteration: Some(iteration), message }
            }
            Error::Rank { rank, source } => Error::Rank { rank, source: Box::new(source.at_iteration(iteration)) },
            other => other,
        }
    }

    pub(crate) fn invalid(name: &'static str, value: impl std::fmt::Display, reason: &'static str) -> Self {
        Error::InvalidParameter { name, value: value.to_string(), reason }
    }
}

/// What an [`Error::Kept`] holds: a run's output (any type), shared. Two are equal when they
/// are the same value (not a deep comparison); `Debug` names the type.
#[derive(Clone)]
pub struct KeptOutput(std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl KeptOutput {
    /// Whether it holds an `O`.
    pub fn is<O: 'static>(&self) -> bool {
        self.0.is::<O>()
    }
}

impl std::fmt::Debug for KeptOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeptOutput(..)")
    }
}

impl PartialEq for KeptOutput {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

fn runaway_causes(gradient_outward: Option<bool>) -> &'static str {
    match gradient_outward {
        Some(true) => {
            "the gradient there points outwards, as a correct ∇U does far from the mode: most likely the step size is too \
             large (lower it); less likely a wrong gradient sign (it must be ∇U = −∇log p, see check_model)"
        }
        Some(false) => {
            "the gradient there points back inwards, as ∇log p does: most likely the gradient has the wrong sign (it must \
             be ∇U = −∇log p, see check_model); less likely the step size is too large (lower it)"
        }
        None => {
            "either the step size is too large (lower it) or the gradient has the wrong sign (it must be ∇U = −∇log p, see check_model)"
        }
    }
}

/// What the mode search's [`Error::NotConverged`] names.
pub(crate) const MODE_SEARCH: &str = "the mode search (L-BFGS, then Newton up to ModeSettings::newton_max_dim)";

fn not_converged_hint(what: &str) -> &'static str {
    if what == MODE_SEARCH {
        ": raise ModeSettings::max_iter (or newton_max_iter) or loosen decrement_tol; if it stopped within a few \
         iterations, check the model with check_model (a gradient of the wrong sign, ∇log p for ∇U, looks like this)"
    } else {
        ""
    }
}

fn non_finite_source(datum: Option<usize>) -> String {
    match datum {
        Some(i) => format!("datum {i}'s gradient (grad_data_sum on item {i} alone): check that datum's values"),
        None => "the prior's gradient (grad_prior)".to_string(),
    }
}

fn at_iteration(iteration: Option<u64>) -> String {
    iteration.map_or_else(String::new, |k| format!(" at iteration {k}"))
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checks that `x` is finite and strictly positive.
pub(crate) fn check_positive(name: &'static str, x: f64) -> Result<()> {
    if x.is_finite() && x > 0.0 { Ok(()) } else { Err(Error::invalid(name, x, "must be finite and > 0")) }
}

/// Checks that `x` is finite and non-negative.
pub(crate) fn check_non_negative(name: &'static str, x: f64) -> Result<()> {
    if x.is_finite() && x >= 0.0 { Ok(()) } else { Err(Error::invalid(name, x, "must be finite and >= 0")) }
}

/// Checks that a slice has length `expected`.
pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got { Ok(()) } else { Err(Error::DimensionMismatch { what, expected, got }) }
}

/// The default memory limit of a run ([`RunSettings::memory_limit`](crate::RunSettings::memory_limit)) and of what the crate
/// allocates on a size the user gives without a limit of its own (synthetic data sets, the
/// tuned path's workspace): 8 GiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 8 << 30;

/// Errors with [`Error::OutOfMemory`] naming `what` if `needed` bytes exceed `limit` (none: no
/// check). Call it before allocating on a size the user gave.
pub(crate) fn check_bytes(what: &'static str, needed: u128, limit: Option<u64>) -> Result<()> {
    let needed = u64::try_from(needed).unwrap_or(u64::MAX);
    match limit {
        Some(limit) if needed > limit => Err(Error::OutOfMemory { what, needed, limit: Some(limit) }),
        _ => Ok(()),
    }
}

/// Errors with [`Error::InvalidParameter`] naming `what`, the first entry of `values` for which
/// `ok` fails and its index (0-based), and `reason`.
pub(crate) fn check_entries<'a>(
    what: &'static str,
    values: impl IntoIterator<Item = &'a f64>,
    ok: impl Fn(f64) -> bool,
    reason: &'static str,
) -> Result<()> {
    match values.into_iter().enumerate().find(|(_, v)| !ok(**v)) {
        Some((i, v)) => Err(Error::invalid(what, format!("{v} at index {i} (0-based)"), reason)),
        None => Ok(()),
    }
}

/// The indices `0..n` of every datum, for a full-data pass: checked against
/// [`DEFAULT_MEMORY_LIMIT`](crate::DEFAULT_MEMORY_LIMIT) and reserved without aborting (a model
/// may report a data size it does not hold in memory).
pub(crate) fn all_indices(n: usize) -> Result<Vec<usize>> {
    let what = "the indices of every datum (the model's n_data)";
    let needed = n as u128 * std::mem::size_of::<usize>() as u128;
    check_bytes(what, needed, Some(DEFAULT_MEMORY_LIMIT))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { what, needed: needed as u64, limit: None })?;
    v.extend(0..n);
    Ok(v)
}

/// Checks that every entry of `x` is finite.
pub(crate) fn all_finite(x: &[f64]) -> bool {
    // A sum of `x * 0` is NaN exactly when some entry is NaN or infinite; one branch-free pass.
    x.iter().fold(0.0, |acc, &v| acc + v * 0.0) == 0.0
}
