"""Models compiled by numba: no Python runs per gradient (the pattern of nutpie's numba models).

The user writes the prior's and the data's gradients as ``@numba.njit`` functions over NumPy
arrays; :class:`NumbaModel` compiles a C-callable wrapper (``numba.cfunc``) around each, and the
Rust core calls them through their addresses with the data arrays' pointers.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from . import _core


def _jit(f: Callable):
    """The function compiled by numba: as given if it is already (``@numba.njit`` with the
    user's options), else with ``njit(error_model="numpy")`` (floating-point division by zero
    gives inf/NaN, as NumPy's, without a check per division; the crate catches non-finite
    gradients)."""
    import numba
    from numba.core.registry import CPUDispatcher

    if isinstance(f, CPUDispatcher):
        return f
    return numba.njit(error_model="numpy")(f)


def _cfuncs(grad_prior: Callable, grad_data_sum: Callable,
            potential_prior: Optional[Callable], potential_data_sum: Optional[Callable]):
    import numba
    from numba import types

    f64p = types.CPointer(types.float64)
    i64p = types.CPointer(types.int64)
    prior_sig = types.int32(f64p, types.int64, f64p)
    data_sig = types.int32(f64p, types.int64, i64p, types.int64, f64p, f64p, types.int64, types.int64, f64p)
    gp, gd = _jit(grad_prior), _jit(grad_data_sum)

    @numba.cfunc(prior_sig, nopython=True)
    def c_grad_prior(theta_p, d, out_p):  # pragma: no cover - compiled
        theta = numba.carray(theta_p, (d,))
        out = numba.carray(out_p, (d,))
        out[:] = 0.0
        gp(theta, out)
        return 0

    @numba.cfunc(data_sig, nopython=True)
    def c_grad_data(theta_p, d, idx_p, n_idx, out_p, x_p, n_rows, n_cols, y_p):  # pragma: no cover
        theta = numba.carray(theta_p, (d,))
        idx = numba.carray(idx_p, (n_idx,))
        out = numba.carray(out_p, (d,))
        x = numba.carray(x_p, (n_rows, n_cols))
        y = numba.carray(y_p, (n_rows,))
        out[:] = 0.0
        gd(theta, idx, out, x, y)
        return 0

    funcs = [c_grad_prior, c_grad_data, None, None]
    if potential_prior is not None and potential_data_sum is not None:
        pp, pd = _jit(potential_prior), _jit(potential_data_sum)

        @numba.cfunc(prior_sig, nopython=True)
        def c_pot_prior(theta_p, d, out_p):  # pragma: no cover
            theta = numba.carray(theta_p, (d,))
            out = numba.carray(out_p, (1,))
            out[0] = pp(theta)
            return 0

        @numba.cfunc(data_sig, nopython=True)
        def c_pot_data(theta_p, d, idx_p, n_idx, out_p, x_p, n_rows, n_cols, y_p):  # pragma: no cover
            theta = numba.carray(theta_p, (d,))
            idx = numba.carray(idx_p, (n_idx,))
            out = numba.carray(out_p, (1,))
            x = numba.carray(x_p, (n_rows, n_cols))
            y = numba.carray(y_p, (n_rows,))
            out[0] = pd(theta, idx, x, y)
            return 0

        funcs[2], funcs[3] = c_pot_prior, c_pot_data
    return funcs


class NumbaModel:
    """The user's model as numba-compiled functions, called by the Rust core with no Python per
    step.

    ``grad_prior(theta, out)`` and ``grad_data_sum(theta, idx, out, x, y)`` write the gradient of
    the potential ``U = -log prior - sum log likelihood`` (of the prior's part; summed over the
    data items ``idx``) into ``out`` (zeroed before each call); ``x`` (N x k) and ``y`` (N) are the
    data arrays given here (float64; y may be omitted). Optional
    ``potential_prior(theta) -> float`` and ``potential_data_sum(theta, idx, x, y) -> float``.
    Plain Python functions are compiled with ``numba.njit(error_model="numpy")``; pass
    ``@numba.njit(...)`` functions to choose numba's options (``fastmath``, ...).

    The data are kept alive by the model and never written; the compiled functions run on the
    chains' threads at once, so they must not keep state.
    """

    def __new__(cls, dim: int, n_data: int, grad_prior: Callable, grad_data_sum: Callable,  # type: ignore[misc]
                x: Any = None, y: Any = None,
                potential_prior: Optional[Callable] = None, potential_data_sum: Optional[Callable] = None):
        x = np.zeros((int(n_data), 0)) if x is None else np.ascontiguousarray(np.asarray(x, dtype=np.float64))
        y = np.zeros(int(n_data)) if y is None else np.ascontiguousarray(np.asarray(y, dtype=np.float64))
        if x.ndim != 2 or x.shape[0] != int(n_data):
            raise _core.SgmcmcError(f"x must be a 2-D array with n_data = {n_data} rows, got shape {x.shape}")
        if y.ndim != 1 or y.shape[0] != int(n_data):
            raise _core.SgmcmcError(f"y must be a 1-D array of n_data = {n_data}, got shape {y.shape}")
        funcs = _cfuncs(grad_prior, grad_data_sum, potential_prior, potential_data_sum)
        keep = (funcs, x, y)
        addr = [None if f is None else int(f.address) for f in funcs]
        return _core.compiled_model(int(dim), int(n_data), addr[0], addr[1], addr[2], addr[3], x, y, keep)
