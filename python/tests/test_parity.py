"""Bit-identity: sgmcmc.sample's draws and printed summary are the Rust path's, for the same
model, settings and seed (the Rust side is examples/python_parity.rs)."""

import numpy as np
import pandas as pd

import sgmcmc


def checksum(a):
    """The example's checksum: sum_k bits(x_k) * (k + 1), wrapping, row-major."""
    bits = np.ascontiguousarray(a, dtype=np.float64).reshape(-1).view(np.uint64)
    with np.errstate(over="ignore"):
        return int(np.sum(bits * np.arange(1, bits.size + 1, dtype=np.uint64), dtype=np.uint64))


def same(fit, parity_dir, case):
    raw = fit.raw_draws
    chains, n, d, every, want = (int(v) for v in (parity_dir / f"{case}_checksum.txt").read_text().split())
    assert raw.shape == (chains, n, d)
    rust = np.load(parity_dir / f"{case}_draws.npy")
    kept = raw[:, ::every, :]
    assert kept.shape == rust.shape
    # Bit for bit: the same float64 patterns, every draw (the checksum) and the saved subset.
    assert np.array_equal(kept.view(np.uint64), rust.view(np.uint64))
    assert checksum(raw) == want
    assert fit.summary == (parity_dir / f"{case}_summary.txt").read_text()
    print(f"{case}: {chains} chains x {n} draws x {d}: bit-identical (checksum {want})")


def test_quickstart_sgld_cv(parity_dir):
    model = sgmcmc.LogisticRegression.synthetic(100_000, 10, prior_var=10.0, seed=2026)
    names = [f"beta[{j}]" for j in range(10)]
    fit = sgmcmc.sample(model, "sgld-cv", draws=4_000, chains=4, burn_in=1_000, seed=7, batch_size=100,
                        names=names, show=False)
    same(fit, parity_dir, "quickstart")


def test_glm_gaussian_from_numpy_accuracy_target(parity_dir):
    x, y = np.load(parity_dir / "glm_x.npy"), np.load(parity_dir / "glm_y.npy")
    model = sgmcmc.Glm(x, y, family="gaussian")
    fit = sgmcmc.sample(model, "sgld", accuracy=0.5, chains=4, seed=3, batch_size=100, show=False)
    same(fit, parity_dir, "glm_gaussian")
    # sigma is reported on its own (positive) scale: exp of the sampler's (to rounding: libm vs NumPy).
    assert np.allclose(fit.draws[..., -1], np.exp(fit.raw_draws[..., -1]), rtol=1e-15, atol=0)


def test_glm_gaussian_from_dataframe_names_rows(parity_dir):
    x, y = np.load(parity_dir / "glm_x.npy"), np.load(parity_dir / "glm_y.npy")
    df = pd.DataFrame({f"x{j}": x[:, j] for j in range(x.shape[1])})
    df["y"] = y
    model = sgmcmc.Glm.from_dataframe(df, response="y", family="gaussian")
    fit = sgmcmc.sample(model, "sgld", accuracy=0.5, chains=4, seed=3, batch_size=100, show=False)
    assert fit.names == ["b0", "x0", "x1", "x2", "x3", "sigma"]
    # The same draws as from the array (and so as Rust's); only the rows' names differ.
    raw = fit.raw_draws
    chains, n, d, every, want = (int(v) for v in (parity_dir / "glm_gaussian_checksum.txt").read_text().split())
    assert checksum(raw) == want


def test_glm_logistic_f32_sghmc_cv(parity_dir):
    x, y = np.load(parity_dir / "logit_x.npy"), np.load(parity_dir / "logit_y.npy")
    assert x.dtype == np.float32
    model = sgmcmc.Glm(x, y, family="logistic")
    fit = sgmcmc.sample(model, "sghmc-cv", draws=3_000, chains=3, burn_in=1_000, seed=5, batch_size=50, show=False)
    same(fit, parity_dir, "glm_logistic_f32")
