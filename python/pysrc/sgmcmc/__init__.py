"""sgmcmc: stochastic-gradient MCMC with a tuned, checked default path, from Python.

The sampler core is the Rust crate `sgmcmc`; this package builds its models from NumPy arrays,
pandas data frames, Python objects or numba-compiled functions, runs its ``Sample`` path (mode,
whitening, the step tuned for the run, dispersed chains, a step-bias check, a verdict with the
accuracy it states) and returns the draws as NumPy arrays or ArviZ data.

>>> import sgmcmc
>>> model = sgmcmc.LogisticRegression.synthetic(n_data=10_000, dim=5, seed=1)
>>> fit = sgmcmc.sample(model, sampler="sgld-cv", chains=4, seed=1, draws=2_000, show=False)
>>> fit.draws.shape
(4, 2000, 5)
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from . import _core
from ._core import SgmcmcError, Model
from ._fit import Fit
from ._numba import NumbaModel

__all__ = [
    "sample",
    "Fit",
    "Model",
    "SgmcmcError",
    "LogisticRegression",
    "LinearGaussian",
    "Glm",
    "PythonModel",
    "NumbaModel",
    "SAMPLERS",
]

__version__ = "0.1.0"

#: The samplers :func:`sample` knows, by name.
SAMPLERS = tuple(s.strip() for s in _core.SAMPLERS.split(","))


def _features(x: Any) -> np.ndarray:
    """A 2-D float64 or float32 array, viewed without a copy where it already is one."""
    a = np.asarray(x)
    if a.dtype not in (np.float64, np.float32):
        a = a.astype(np.float64)
    if a.ndim != 2:
        raise SgmcmcError(f"features must be a 2-D array (N x d), got shape {a.shape}")
    return a


def _vector(y: Any, name: str = "y") -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(y, dtype=np.float64))
    if a.ndim != 1:
        raise SgmcmcError(f"{name} must be a 1-D array, got shape {a.shape}")
    return a


class LogisticRegression:
    """Bayesian logistic regression: labels y in {0, 1}, features X (N x d; add a column of ones
    for an intercept), prior N(0, prior_var I). X may be float64 or float32 (stored as given,
    copied once into the model)."""

    def __new__(cls, X: Any, y: Any, prior_var: float = 10.0) -> Model:  # type: ignore[misc]
        return _core.logistic_regression(_features(X), _vector(y), float(prior_var))

    @staticmethod
    def synthetic(n_data: int, dim: int, prior_var: float = 10.0, seed: int = 0) -> Model:
        """The crate's synthetic data set (the Rust quickstart's model with its seed)."""
        return _core.logistic_regression_synthetic(int(n_data), int(dim), float(prior_var), int(seed))


class LinearGaussian:
    """Bayesian linear regression with known noise variance: y = X theta + N(0, noise_var),
    prior N(0, prior_var I). Its posterior is Gaussian in closed form."""

    def __new__(cls, X: Any, y: Any, noise_var: float = 1.0, prior_var: float = 10.0) -> Model:  # type: ignore[misc]
        return _core.linear_gaussian(_features(X), _vector(y), float(noise_var), float(prior_var))

    @staticmethod
    def synthetic(n_data: int, dim: int, noise_var: float = 1.0, prior_var: float = 10.0, seed: int = 0):
        """``(model, posterior_mean, posterior_covariance)`` of the crate's synthetic data set."""
        m, mean, cov = _core.linear_gaussian_synthetic(int(n_data), int(dim), float(noise_var), float(prior_var), int(seed))
        return m, np.asarray(mean), np.asarray(cov)


_GLM_DEFAULTS = dict(
    intercept=True,
    prior=None,
    prior_intercept=None,
    prior_aux=None,
    coefficient_priors=None,
    autoscale=True,
    centred_intercept=True,
    offset=None,
    weights=None,
)


def _glm_options(kw: dict) -> dict:
    unknown = set(kw) - set(_GLM_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown Glm option(s): {', '.join(sorted(unknown))}")
    o = dict(_GLM_DEFAULTS, **kw)
    for k in ("offset", "weights"):
        if o[k] is not None:
            o[k] = _vector(o[k], k)
    return o


class Glm:
    """A Bayesian generalised linear model (the crate's ``Glm``): family "gaussian" (unknown
    sigma), "logistic", "probit", "poisson" or "negative_binomial" (unknown size r), with an
    intercept, offsets, weights and weakly informative priors scaled to the data (rstanarm's).
    sigma and r are sampled on the log scale (the model's layout) and reported on theirs.

    Priors are tuples: ``("normal", loc, scale)``, ``("student_t", df, loc, scale)``,
    ``("cauchy", loc, scale)``, ``("half_normal", scale)``, ``("half_cauchy", scale)``,
    ``("exponential", rate)`` or ``"flat"``; None keeps the crate's default.
    """

    def __new__(cls, X: Any, y: Any, family: str = "gaussian", **options: Any) -> Model:  # type: ignore[misc]
        o = _glm_options(options)
        return _core.glm(_features(X), _vector(y), family, o)

    @staticmethod
    def from_dataframe(df: Any, response: str, columns: Optional[Sequence[str]] = None,
                       family: str = "gaussian", **options: Any) -> Model:
        """The model of ``response`` on ``columns`` (default: every other column) of a pandas
        DataFrame; the summary rows are named after the columns. Each float64 column is viewed
        in place and copied once, into the model's rows (other dtypes are converted one column at
        a time)."""
        if columns is None:
            columns = [c for c in df.columns if c != response]
        columns = [str(c) for c in columns]
        if response not in df.columns:
            raise SgmcmcError(f"no column named {response!r} in the data frame")
        cols = [np.ascontiguousarray(df[c].to_numpy(dtype=np.float64, copy=False)) for c in columns]
        y = _vector(df[response].to_numpy(dtype=np.float64), "response")
        o = _glm_options(options)
        return _core.glm_columns(columns, cols, y, family, o)

    @staticmethod
    def synthetic(family: str, n_data: int, p: int, seed: int = 0) -> Model:
        """The crate's synthetic GLM data set."""
        return _core.glm_synthetic(family, int(n_data), int(p), int(seed))


class PythonModel:
    """The user's model as a Python object, called once per gradient with NumPy arrays (the
    simple, slow path; see :class:`NumbaModel` for one with no Python per step).

    The object has ``dim`` and ``n_data`` and the methods ``grad_prior(theta) -> array(dim)``
    and ``grad_data_sum(theta, idx) -> array(dim)`` (the gradient of the potential
    ``U = -log prior - sum log likelihood``: of the prior's part, and summed over the data items
    ``idx``, an int array); optionally ``potential_prior(theta)`` and
    ``potential_data_sum(theta, idx)`` (floats)."""

    def __new__(cls, obj: Any) -> Model:  # type: ignore[misc]
        for m in ("grad_prior", "grad_data_sum"):
            if not callable(getattr(obj, m, None)):
                raise SgmcmcError(f"a PythonModel needs a method {m}")
        potentials = callable(getattr(obj, "potential_prior", None)) and callable(getattr(obj, "potential_data_sum", None))
        return _core.python_model(obj, int(obj.dim), int(obj.n_data), bool(potentials))


def _show_progress(progress: Optional[bool]) -> bool:
    if progress is not None:
        return bool(progress)
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Bar:
    """A progress bar: tqdm's (tqdm.auto: the notebook widget in Jupyter) where installed, else a
    line on stderr."""

    def __init__(self) -> None:
        self.tqdm = None
        self.last = ""
        try:
            from tqdm.auto import tqdm  # type: ignore

            self.tqdm = tqdm(total=1, unit="it", desc="setup", leave=True)
        except Exception:  # pragma: no cover - tqdm absent
            self.tqdm = None

    def update(self, phase: str, done: int, total: int) -> None:
        if self.tqdm is not None:
            if total and self.tqdm.total != total:
                self.tqdm.total = total
            self.tqdm.set_description(phase, refresh=False)
            self.tqdm.n = done
            self.tqdm.refresh()
            return
        pct = 100.0 * done / total if total else 0.0
        width = 30
        filled = int(width * done / total) if total else 0
        line = f"\r{phase:>6} [{'#' * filled}{' ' * (width - filled)}] {pct:5.1f}% {done}/{total}"
        if line != self.last:
            sys.stderr.write(line)
            sys.stderr.flush()
            self.last = line

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()
        elif self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()


def sample(
    model: Model,
    sampler: str = "auto",
    *,
    draws: Optional[int] = None,
    accuracy: Optional[float] = None,
    chains: int = 4,
    seed: int = 0,
    batch_size: Optional[int] = None,
    burn_in: Optional[int] = None,
    thin: int = 1,
    budget: Optional[int] = None,
    time_limit: Optional[float] = None,
    start: Optional[Sequence[float]] = None,
    names: Optional[Sequence[str]] = None,
    bias_check: Any = "auto",
    progress: Optional[bool] = None,
    show: bool = True,
    check_interval: int = 100,
) -> Fit:
    """Tunes, runs, checks and judges: the Rust ``Sample`` path, with the same draws.

    Parameters
    ----------
    model: a model of this package (``LogisticRegression``, ``Glm``, ``PythonModel``, ...).
    sampler: one of :data:`SAMPLERS`: "auto" (SGLD with the gradient estimator and minibatch the
        tuner chooses), "sgld", "sghmc", "sgnht", "psgld" (plain minibatches), their "-cv"
        forms (control variates at the mode), or "mala" (the exact reference).
    draws: a fixed run of this many kept draws per chain; default: aim at ``accuracy``.
    accuracy: every mean within ``accuracy`` posterior sds and every sd within
        ``accuracy x 100 %`` (Monte Carlo error and step bias together); default 0.1 when
        ``draws`` is not given.
    chains: chains, run in parallel (the GIL released).
    seed: the seed of the starts and the run.
    batch_size: the minibatch size n (default min(100, N); "auto" chooses its own).
    burn_in: iterations dropped per chain (default max(1000, draws/10)).
    thin, budget (datum gradients), time_limit (seconds), start (where the mode search starts),
    names (of the reported quantities): as the Rust builder's.
    bias_check: "auto" (the default: a companion at half the step, a quarter of the run's cost,
        grown where its noise sets the bound), a float (its cost relative to the run) or None
        (off: the bound is the Monte Carlo error alone).
    progress: show a progress bar (default: when stderr is a terminal or in a notebook).
    show: print the verdict and summary table (the text the Rust path prints).
    check_interval: iterations between a chain's (and the step-bias check's) checks of Ctrl-C and
        the progress bar.

    Ctrl-C stops the run within about a second: in the chains, they keep what they drew; in the
    step-bias check that follows them, every draw is kept; either way the Fit returned says
    ``interrupted`` (its verdict without the step-bias check). During the set-up (mode, tuning),
    with nothing drawn yet, it raises ``KeyboardInterrupt``.

    Raises :class:`SgmcmcError` (``.variant`` names the crate's error) for invalid settings or a
    failed run.
    """
    if not isinstance(model, Model):
        raise SgmcmcError(f"model must be an sgmcmc model (LogisticRegression, Glm, PythonModel, ...), got {type(model).__name__}")
    if draws is not None and accuracy is not None:
        raise SgmcmcError("give draws (a fixed run) or accuracy (a target), not both")
    if bias_check == "auto":
        bias_cost, bias_off = None, False
    elif bias_check is None:
        bias_cost, bias_off = None, True
    else:
        bias_cost, bias_off = float(bias_check), False
    if names is None:
        names = model.names
    run = _core.start_sample(model, {
        "sampler": str(sampler),
        "batch_size": None if batch_size is None else int(batch_size),
        "draws": None if draws is None else int(draws),
        "accuracy": None if accuracy is None else float(accuracy),
        "budget": None if budget is None else int(budget),
        "time_limit": None if time_limit is None else float(time_limit),
        "chains": int(chains),
        "burn_in": None if burn_in is None else int(burn_in),
        "thin": int(thin),
        "seed": int(seed),
        "start": None if start is None else [float(v) for v in start],
        "names": None if names is None else [str(n) for n in names],
        "bias_check": bias_cost,
        "bias_check_off": bias_off,
        "check_interval": int(check_interval),
    })
    bar = _Bar() if _show_progress(progress) else None
    interrupted = False
    try:
        try:
            while not run.wait(0.1):
                if bar is not None:
                    bar.update(*run.progress())
        except KeyboardInterrupt:
            interrupted = True
            run.stop()
            while not run.wait(0.1):
                pass
    finally:
        if bar is not None:
            bar.update(*run.progress())
            bar.close()
    try:
        core = run.result()
    except SgmcmcError as e:
        if interrupted:
            raise KeyboardInterrupt("sgmcmc.sample was interrupted before its chains kept a draw") from e
        raise
    fit = Fit(core, model, interrupted=interrupted)
    if fit.interrupted:
        warnings.warn(
            f"sgmcmc.sample interrupted: {fit.draws.shape[1]} kept draws per chain; the step-bias check was skipped",
            RuntimeWarning,
            stacklevel=2,
        )
    if show:
        print(fit)
    return fit

