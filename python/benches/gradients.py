"""Per-gradient cost on a logistic regression (d = 10, n = 100 data, the gradient over all 100):
the crate's built-in model, the same model as numba-compiled functions (NumbaModel, called
through function pointers), and as a Python object (PythonModel, NumPy per call). Each is timed
by the Rust core calling the model's grad_data_sum in a loop (the GIL released, as in a run), in
one process, side by side. The Python callable comes in two forms: vectorised NumPy (one
fancy-index and two matrix products per call: the best case for Python, its cost mostly the
per-call overhead) and the per-datum loop a user first writes. Prints the figures and ends with RESULT {json}.

Run: python benches/gradients.py
"""

import json
import sys
import time

import math

import numba
import numpy as np

import sgmcmc

D, N, PRIOR_VAR = 10, 100, 10.0


def data(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, D))
    theta = rng.normal(0, 2 / np.sqrt(D), D)
    y = (rng.random(N) < 1 / (1 + np.exp(-x @ theta))).astype(np.float64)
    return x, y


# The user's numba code, with numba's options for speed (fastmath lets LLVM reorder the sums).
@numba.njit(fastmath=True, error_model="numpy")
def grad_prior(theta, out):
    for j in range(theta.shape[0]):
        out[j] = theta[j] / PRIOR_VAR


@numba.njit(fastmath=True, error_model="numpy")
def grad_data_sum(theta, idx, out, x, y):
    d = theta.shape[0]
    for k in range(idx.shape[0]):
        i = idx[k]
        eta = 0.0
        for j in range(d):
            eta += x[i, j] * theta[j]
        r = 1.0 / (1.0 + math.exp(-eta)) - y[i]
        for j in range(d):
            out[j] += r * x[i, j]


class PyLogisticLoop:
    """The same model as a Python user first writes it: a loop over the minibatch."""

    def __init__(self, x, y):
        self.x, self.y, self.dim, self.n_data = x, y, x.shape[1], x.shape[0]

    def grad_prior(self, theta):
        return theta / PRIOR_VAR

    def grad_data_sum(self, theta, idx):
        g = np.zeros(self.dim)
        for i in idx:
            xi = self.x[i]
            g += (1.0 / (1.0 + math.exp(-float(xi @ theta))) - self.y[i]) * xi
        return g


class PyLogistic:
    def __init__(self, x, y):
        self.x, self.y, self.dim, self.n_data = x, y, x.shape[1], x.shape[0]

    def grad_prior(self, theta):
        return theta / PRIOR_VAR

    def grad_data_sum(self, theta, idx):
        xi = self.x[idx]
        r = 1.0 / (1.0 + np.exp(-(xi @ theta))) - self.y[idx]
        return xi.T @ r


def main():
    x, y = data()
    models = {
        "rust": sgmcmc.LogisticRegression(x, y, prior_var=PRIOR_VAR),
        "numba": sgmcmc.NumbaModel(D, N, grad_prior, grad_data_sum, x=x, y=y),
        "python": sgmcmc.PythonModel(PyLogistic(x, y)),
        "python_loop": sgmcmc.PythonModel(PyLogisticLoop(x, y)),
    }
    theta = np.linspace(-0.5, 0.5, D)
    idx = np.arange(N)
    g = {k: m.grad_data_sum(theta, idx) for k, m in models.items()}
    for k in ("numba", "python", "python_loop"):
        assert np.allclose(g[k], g["rust"], rtol=1e-12, atol=1e-12), (k, g[k], g["rust"])
    reps = {"rust": 200_000, "numba": 200_000, "python": 20_000, "python_loop": 1_000}
    secs = {}
    for k, m in models.items():
        best = min(sgmcmc._core.time_gradient(m, list(theta), list(idx), reps[k]) for _ in range(3))
        secs[k] = best
    r_numba = secs["numba"] / secs["rust"]
    speedup = secs["python"] / secs["numba"]
    speedup_loop = secs["python_loop"] / secs["numba"]
    for k in models:
        print(f"{k:>11}: {secs[k] * 1e6:9.3f} us per gradient (d = {D}, n = {N})")
    print(f"numba / rust = {r_numba:.2f} (target <= 2); python / numba = {speedup:.1f} for the vectorised "
          f"NumPy callable, {speedup_loop:.0f} for the per-datum loop (target >= 10)")
    print("RESULT " + json.dumps({
        "rust_us": secs["rust"] * 1e6, "numba_us": secs["numba"] * 1e6, "python_us": secs["python"] * 1e6,
        "python_loop_us": secs["python_loop"] * 1e6,
        "numba_over_rust": r_numba, "python_over_numba": speedup, "python_loop_over_numba": speedup_loop,
        "meets_targets": bool(r_numba <= 2.0 and speedup >= 10.0),
        "meets_targets_with_loop": bool(r_numba <= 2.0 and speedup_loop >= 10.0),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
