"""Models from arrays, Python objects and numba functions; a known posterior; constraints and
tempering."""

import math

import numpy as np
import pytest

import sgmcmc

numba = pytest.importorskip("numba")


def logistic_data(n=400, d=3, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    theta = np.array([0.8, -0.5, 0.3])[:d]
    y = (rng.random(n) < 1 / (1 + np.exp(-x @ theta))).astype(float)
    return x, y


class PyLogistic:
    def __init__(self, x, y, prior_var):
        self.x, self.y, self.v = x, y, prior_var
        self.dim, self.n_data = x.shape[1], x.shape[0]

    def grad_prior(self, theta):
        return theta / self.v

    def grad_data_sum(self, theta, idx):
        xi = self.x[idx]
        return xi.T @ (1 / (1 + np.exp(-(xi @ theta))) - self.y[idx])


def nb_grad_prior(theta, out):
    for j in range(theta.shape[0]):
        out[j] = theta[j] / 10.0


def nb_grad_data_sum(theta, idx, out, x, y):
    for k in range(idx.shape[0]):
        i = idx[k]
        eta = 0.0
        for j in range(theta.shape[0]):
            eta += x[i, j] * theta[j]
        r = 1.0 / (1.0 + math.exp(-eta)) - y[i]
        for j in range(theta.shape[0]):
            out[j] += r * x[i, j]


def test_three_kinds_of_model_give_the_same_gradient():
    x, y = logistic_data()
    rust = sgmcmc.LogisticRegression(x, y, prior_var=10.0)
    py = sgmcmc.PythonModel(PyLogistic(x, y, 10.0))
    nb = sgmcmc.NumbaModel(3, len(y), nb_grad_prior, nb_grad_data_sum, x=x, y=y)
    theta, idx = np.array([0.1, -0.2, 0.4]), np.array([0, 5, 5, 399, 17])
    for m in (py, nb):
        assert np.allclose(m.grad_data_sum(theta, idx), rust.grad_data_sum(theta, idx), rtol=1e-13, atol=1e-13)
        assert np.allclose(m.grad_prior(theta), rust.grad_prior(theta), rtol=1e-15)
    # f32 features: the f64 model on the same (rounded) values, exactly.
    x32 = x.astype(np.float32)
    a = sgmcmc.LogisticRegression(x32, y).grad_data_sum(theta, idx)
    b = sgmcmc.LogisticRegression(x32.astype(np.float64), y).grad_data_sum(theta, idx)
    assert np.array_equal(a, b)


def test_known_posterior_linear_gaussian_mala_and_sgld_cv():
    """The exact posterior N(mean, cov): MALA (exact, no step bias) within 4 Monte Carlo errors
    per coordinate, and SGLD-CV within the bound its verdict states."""
    model, mean, cov = sgmcmc.LinearGaussian.synthetic(2_000, 3, noise_var=1.0, prior_var=10.0, seed=4)
    sd = np.sqrt(np.diag(cov))
    fit = sgmcmc.sample(model, "mala", draws=4_000, chains=4, seed=11, show=False)
    assert fit.converged
    for row, m in zip(fit.table(), mean):
        assert abs(row["mean"] - m) <= 4 * row["mcse_mean"], (row, m)
    fit = sgmcmc.sample(model, "sgld-cv", chains=4, seed=12, show=False)
    assert fit.converged and fit.info["target_reached"]
    err = np.max(np.abs(fit.draws.mean(axis=(0, 1)) - mean) / sd)
    assert err <= fit.stated_bound, (err, fit.stated_bound)
    sd_err = np.max(np.abs(fit.draws.std(axis=(0, 1)) / sd - 1))
    assert sd_err <= fit.stated_bound, (sd_err, fit.stated_bound)


def test_python_and_numba_models_sample_the_built_in_posterior():
    x, y = logistic_data(n=300)
    rust = sgmcmc.sample(sgmcmc.LogisticRegression(x, y, prior_var=10.0), "sgld-cv", draws=3_000, seed=2,
                         batch_size=30, show=False)
    for m in (sgmcmc.PythonModel(PyLogistic(x, y, 10.0)),
              sgmcmc.NumbaModel(3, 300, nb_grad_prior, nb_grad_data_sum, x=x, y=y)):
        fit = sgmcmc.sample(m, "sgld-cv", draws=3_000, seed=2, batch_size=30, show=False)
        # The same algorithm on gradients equal to rounding: the same posterior within the
        # two runs' stated accuracies (sds of each coordinate).
        sd = fit.draws.std(axis=(0, 1))
        gap = np.max(np.abs(fit.draws.mean(axis=(0, 1)) - rust.draws.mean(axis=(0, 1))) / sd)
        assert gap <= fit.stated_bound + rust.stated_bound, (gap, fit.stated_bound)


def test_constrained_blocks_and_tempering():
    # A Python model of a positive scale: y_i ~ N(0, s^2), prior on s: exponential(1).
    rng = np.random.default_rng(3)
    data = rng.normal(0, 2.0, 500)

    class Scale:
        dim, n_data = 1, 500

        def grad_prior(self, th):
            return np.array([1.0])

        def grad_data_sum(self, th, idx):
            s = th[0]
            z = data[idx]
            return np.array([np.sum(1 / s - z**2 / s**3)])

    model = sgmcmc.PythonModel(Scale()).constrained([("s", [], "positive")])
    assert model.blocks == [("s", [], "Positive")] and model.names == ["s"]
    fit = sgmcmc.sample(model, "sgld", draws=2_000, seed=1, batch_size=50, show=False)
    assert fit.names == ["s"] and np.all(fit.draws > 0)
    assert abs(fit.draws.mean() - np.sqrt(np.mean(data**2))) < 0.15
    # Tempering at T = 4: the posterior's spread grows about 2x (the likelihood dominates).
    hot = sgmcmc.sample(model.tempered(4.0), "sgld", draws=2_000, seed=1, batch_size=50, show=False)
    ratio = hot.draws.std() / fit.draws.std()
    assert 1.5 < ratio < 2.6, ratio


def test_glm_families_priors_and_from_dataframe():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    n = 2_000
    df = pd.DataFrame({"age": rng.normal(40, 10, n), "dose": rng.normal(1, 0.3, n)})
    eta = -1 + 0.02 * (df["age"] - 40) + 0.5 * df["dose"]
    df["count"] = rng.poisson(np.exp(eta)).astype(float)
    df["yes"] = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    pois = sgmcmc.Glm.from_dataframe(df, "count", ["age", "dose"], family="poisson", prior=("normal", 0, 1))
    assert pois.names == ["b0", "age", "dose"]
    nb = sgmcmc.Glm.from_dataframe(df, "count", ["age", "dose"], family="negative_binomial")
    assert nb.names == ["b0", "age", "dose", "r"] and nb.blocks[-1] == ("r", [], "Positive")
    fit = sgmcmc.sample(sgmcmc.Glm.from_dataframe(df, "yes", family="probit"), "sgld-cv", draws=2_000,
                        seed=1, show=False)
    assert fit.names == ["b0", "age", "dose", "count"]
    with pytest.raises(sgmcmc.SgmcmcError) as e:
        sgmcmc.Glm(np.ones((3, 2)), np.array([0.0, 1.0, 2.0]), family="logistic")
    assert e.value.variant == "InvalidParameter"
