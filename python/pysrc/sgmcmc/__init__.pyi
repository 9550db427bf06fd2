"""Type stubs of the sgmcmc package (the native part is sgmcmc._core)."""

from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
SAMPLERS: Tuple[str, ...]

SamplerName = Literal["auto", "sgld", "sgld-cv", "sghmc", "sghmc-cv", "sgnht", "sgnht-cv", "psgld", "psgld-cv", "mala"]
Prior = Union[str, Tuple[Any, ...]]
Constraint = Union[Literal["real", "positive", "simplex", "ordered", "cholesky_corr"], Tuple[Literal["interval"], float, float]]

class SgmcmcError(Exception):
    """An error of the sgmcmc crate; ``variant`` names the Rust ``sgmcmc::Error`` variant."""

    variant: str
    chain: Optional[int]
    iteration: Optional[int]

class Model:
    """A model for :func:`sample` (the crate's ``Model`` behind a shared pointer)."""

    @property
    def dim(self) -> int: ...
    @property
    def n_data(self) -> int: ...
    @property
    def names(self) -> Optional[List[str]]: ...
    @property
    def blocks(self) -> Optional[List[Tuple[str, List[int], str]]]: ...
    def grad_prior(self, theta: Sequence[float]) -> npt.NDArray[np.float64]: ...
    def grad_data_sum(self, theta: Sequence[float], idx: Sequence[int]) -> npt.NDArray[np.float64]: ...
    def potential(self, theta: Sequence[float]) -> float: ...
    def tempered(self, likelihood: float, prior: Optional[float] = None) -> Model: ...
    def constrained(self, blocks: Sequence[Tuple[str, Sequence[int], Constraint]]) -> Model: ...

class LogisticRegression:
    def __new__(cls, X: npt.ArrayLike, y: npt.ArrayLike, prior_var: float = 10.0) -> Model: ...  # type: ignore[misc]
    @staticmethod
    def synthetic(n_data: int, dim: int, prior_var: float = 10.0, seed: int = 0) -> Model: ...

class LinearGaussian:
    def __new__(cls, X: npt.ArrayLike, y: npt.ArrayLike, noise_var: float = 1.0, prior_var: float = 10.0) -> Model: ...  # type: ignore[misc]
    @staticmethod
    def synthetic(
        n_data: int, dim: int, noise_var: float = 1.0, prior_var: float = 10.0, seed: int = 0
    ) -> Tuple[Model, npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...

class Glm:
    def __new__(  # type: ignore[misc]
        cls,
        X: npt.ArrayLike,
        y: npt.ArrayLike,
        family: Literal["gaussian", "logistic", "probit", "poisson", "negative_binomial"] = "gaussian",
        *,
        intercept: bool = True,
        prior: Optional[Prior] = None,
        prior_intercept: Optional[Prior] = None,
        prior_aux: Optional[Prior] = None,
        coefficient_priors: Optional[Sequence[Prior]] = None,
        autoscale: bool = True,
        centred_intercept: bool = True,
        offset: Optional[npt.ArrayLike] = None,
        weights: Optional[npt.ArrayLike] = None,
    ) -> Model: ...
    @staticmethod
    def from_dataframe(
        df: Any, response: str, columns: Optional[Sequence[str]] = None, family: str = "gaussian", **options: Any
    ) -> Model: ...
    @staticmethod
    def synthetic(family: str, n_data: int, p: int, seed: int = 0) -> Model: ...

class PythonModel:
    def __new__(cls, obj: Any) -> Model: ...  # type: ignore[misc]

class NumbaModel:
    def __new__(  # type: ignore[misc]
        cls,
        dim: int,
        n_data: int,
        grad_prior: Callable[..., Any],
        grad_data_sum: Callable[..., Any],
        x: Optional[npt.ArrayLike] = None,
        y: Optional[npt.ArrayLike] = None,
        potential_prior: Optional[Callable[..., Any]] = None,
        potential_data_sum: Optional[Callable[..., Any]] = None,
    ) -> Model: ...

class Fit:
    interrupted: bool
    @property
    def draws(self) -> npt.NDArray[np.float64]: ...
    @property
    def raw_draws(self) -> npt.NDArray[np.float64]: ...
    @property
    def names(self) -> List[str]: ...
    @property
    def summary(self) -> str: ...
    @property
    def converged(self) -> bool: ...
    @property
    def stated_bound(self) -> float: ...
    @property
    def info(self) -> Dict[str, Any]: ...
    def table(self) -> List[Dict[str, Any]]: ...
    def to_arviz(self) -> Any: ...

def sample(
    model: Model,
    sampler: SamplerName = "auto",
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
    bias_check: Union[Literal["auto"], float, None] = "auto",
    progress: Optional[bool] = None,
    show: bool = True,
    check_interval: int = 100,
) -> Fit: ...
