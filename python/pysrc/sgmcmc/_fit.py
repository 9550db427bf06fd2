"""The result of :func:`sgmcmc.sample`: draws as NumPy arrays, the verdict, ArviZ data."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np


class Fit:
    """What :func:`sgmcmc.sample` made: the draws, the summary table, the verdict with the
    accuracy it states, the tuner's record.

    ``print(fit)`` shows the text the Rust path prints (target, step, verdict, table).
    """

    def __init__(self, core: Any, model: Any, interrupted: bool = False) -> None:
        self._core = core
        self._model = model
        self._info: Dict[str, Any] = dict(core.info())
        #: Whether Ctrl-C stopped the run, in its chains (they keep what they drew) or in its
        #: step-bias check (every draw kept): the check is then skipped. False when the run had
        #: ended before the stop reached it (nothing was cut).
        self.interrupted = bool(interrupted) and bool(self._info.get("stopped", True))
        self._draws: Optional[np.ndarray] = None

    # --- draws -------------------------------------------------------------------------------
    @property
    def draws(self) -> np.ndarray:
        """The kept draws on the reported scale (constrained parameters on theirs):
        ``chains x draws x quantities`` (float64)."""
        if self._draws is None:
            self._draws = np.asarray(self._core.draws())
        return self._draws

    @property
    def raw_draws(self) -> np.ndarray:
        """The draws on the sampler's coordinates (unconstrained): ``chains x draws x dim``."""
        return np.asarray(self._core.raw_draws())

    @property
    def names(self) -> List[str]:
        """The reported quantities' names (the table's rows)."""
        return list(self._core.names)

    # --- the verdict -------------------------------------------------------------------------
    @property
    def summary(self) -> str:
        """The Rust path's text: target, step, verdict and summary table."""
        return self._core.summary

    @property
    def converged(self) -> bool:
        """Whether every quantity passed R-hat and ESS (the verdict)."""
        return bool(self._info["converged"])

    @property
    def stated_bound(self) -> float:
        """The accuracy the run states (sds for means, fraction for sds; the step's bias included
        where the check ran)."""
        return float(self._info["stated_bound"])

    @property
    def info(self) -> Dict[str, Any]:
        """The verdict and the run's record: converged, stated_bound, error_bound, bias_bound,
        max_rhat, min_ess_bulk, step_size, tuner_reason, preconditioning, target_accuracy,
        target_reached, target_why, stopped, datum_gradients, wall_seconds, ..."""
        return dict(self._info)

    def table(self) -> List[Dict[str, Any]]:
        """The summary table as a list of dicts (one per quantity); ``pandas.DataFrame(fit.table())``
        for a frame."""
        keys = ("name", "mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat", "bias_mean")
        return [dict(zip(keys, row)) for row in self._core.table()]

    def __str__(self) -> str:
        head = "INTERRUPTED (Ctrl-C): verdict on the draws kept, step-bias check skipped\n" if self.interrupted else ""
        return head + self.summary

    def __repr__(self) -> str:
        i = self._info
        return (f"<sgmcmc.Fit {i['sampler']}: {i['chains']} chains x {i['draws']} draws, "
                f"{'converged' if i['converged'] else 'NOT CONVERGED'}, stated bound {i['stated_bound']:.3g}>")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(str(self))

    # --- ArviZ -------------------------------------------------------------------------------
    def _variables(self):
        """Posterior variables by block (a constrained model's layout), else one per quantity
        group: ``{name: (array chains x draws x *shape, dims, coords)}``."""
        draws = self.draws
        names = self.names
        blocks = self._model.blocks
        out = {}
        coords: Dict[str, List[str]] = {}
        if blocks:
            j = 0
            for name, shape, _constraint in blocks:
                size = int(np.prod(shape)) if shape else 1
                arr = draws[:, :, j:j + size].reshape(draws.shape[:2] + tuple(shape))
                dims = [f"{name}_dim_{k}" for k in range(len(shape))]
                if len(shape) == 1:
                    coords[dims[0]] = names[j:j + size]
                out[name] = (arr, dims)
                j += size
            return out, coords
        # No layout: one variable "theta" with the quantities as its coordinate.
        coords["theta_dim_0"] = names
        out["theta"] = (draws, ["theta_dim_0"])
        return out, coords

    def _attrs(self) -> Dict[str, Any]:
        i = self._info
        attrs = {
            "sgmcmc_sampler": i["sampler"],
            "sgmcmc_converged": int(bool(i["converged"])),
            "sgmcmc_stated_bound": float(i["stated_bound"]),
            "sgmcmc_error_bound": float(i["error_bound"]),
            "sgmcmc_tuner_reason": i["tuner_reason"],
            "sgmcmc_preconditioning": i["preconditioning"],
            "sgmcmc_step_size": float(i["step_size"]),
            "sgmcmc_interrupted": int(self.interrupted),
            "sgmcmc_seed": int(i["seed"]),
        }
        if i["bias_bound"] is not None:
            attrs["sgmcmc_bias_bound"] = float(i["bias_bound"])
        if i["target_accuracy"] is not None:
            attrs["sgmcmc_target_accuracy"] = float(i["target_accuracy"])
            attrs["sgmcmc_target_reached"] = int(bool(i["target_reached"]))
        if i["target_why"]:
            attrs["sgmcmc_target_why"] = i["target_why"]
        return attrs

    def to_arviz(self) -> Any:
        """The run as ArviZ data: ``InferenceData`` on ArviZ 0.x, the ``DataTree`` of ArviZ 1.x.

        Groups: ``posterior`` (a variable per block of a constrained model's layout, dims and
        coordinates named after it and its quantities; else one ``theta``), ``sample_stats``
        (``step_size`` per draw). The verdict, the stated bound and the tuner's reason are
        attributes (``sgmcmc_converged``, ``sgmcmc_stated_bound``, ``sgmcmc_tuner_reason``, ...).
        The burn-in is not kept by the run, so there is no warm-up group.
        """
        variables, coords = self._variables()
        posterior = {k: v[0] for k, v in variables.items()}
        dims = {k: v[1] for k, v in variables.items()}
        chains, n = self.draws.shape[:2]
        h = self._core.step_sizes()
        stats = {"step_size": np.asarray(h) if h is not None else np.full((chains, n), float(self._info["step_size"]))}
        attrs = self._attrs()
        try:
            import arviz_base  # ArviZ 1.x

            tree = arviz_base.from_dict(
                {"posterior": posterior, "sample_stats": stats}, coords=coords, dims=dims,
            )
            for group in ("posterior", "sample_stats"):
                tree[group].attrs.update(attrs)
            tree.attrs.update(attrs)
            return tree
        except ImportError:
            pass
        try:
            import arviz as az
        except ImportError as e:
            raise ImportError("Fit.to_arviz needs ArviZ: pip install arviz (0.x) or arviz-base (1.x)") from e

        idata = az.from_dict(posterior=posterior, sample_stats=stats, coords=coords, dims=dims)
        for group in idata.groups():
            idata[group].attrs.update(attrs)
        return idata
