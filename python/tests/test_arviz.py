"""The ArviZ round trip: to_arviz() on the installed ArviZ line (0.x: InferenceData; 1.x:
DataTree), its groups, dims and attributes, and ArviZ's ESS and R-hat against the crate's."""

import numpy as np
import pytest

import sgmcmc

try:  # ArviZ 1.x: its components (arviz_base: data, arviz_stats: diagnostics)
    import arviz_base
    import arviz_stats

    LINE, VERSION = 1, arviz_base.__version__
except ImportError:  # ArviZ 0.x
    az = pytest.importorskip("arviz")
    LINE, VERSION = int(az.__version__.split(".")[0]), az.__version__


def fit_glm():
    model = sgmcmc.Glm.synthetic("negative_binomial", 2_000, 3, seed=2)
    return sgmcmc.sample(model, "sgld-cv", draws=2_000, chains=4, seed=1, show=False)


def test_round_trip_groups_dims_attrs_and_diagnostics():
    fit = fit_glm()
    data = fit.to_arviz()
    if LINE >= 1:
        assert type(data).__name__ == "DataTree"
        post = data["posterior"].to_dataset()
        stats = data["sample_stats"].to_dataset()
    else:
        assert type(data).__name__ == "InferenceData"
        post, stats = data.posterior, data.sample_stats
    # Variables by block of the layout, named dims, the quantities as coordinates.
    assert set(post.data_vars) == {"b0", "beta", "r"}
    assert post["beta"].dims == ("chain", "draw", "beta_dim_0")
    assert list(post["beta"].coords["beta_dim_0"].values) == ["beta[0]", "beta[1]", "beta[2]"]
    assert post["beta"].shape == (4, 2_000, 3)
    assert np.array_equal(post["beta"].values, fit.draws[:, :, 1:4])
    assert np.all(post["r"].values > 0)
    assert "step_size" in stats and stats["step_size"].shape == (4, 2_000)
    attrs = post.attrs
    assert attrs["sgmcmc_converged"] in (0, 1) and attrs["sgmcmc_stated_bound"] == pytest.approx(fit.stated_bound)
    assert attrs["sgmcmc_tuner_reason"] == fit.info["tuner_reason"]
    # ArviZ's bulk ESS and rank-normalised split R-hat against the crate's table.
    if LINE >= 1:
        ess = arviz_stats.ess(data, method="bulk")
        rhat = arviz_stats.rhat(data)
        # A DataTree of the posterior group's values.
        ess = ess.to_dataset() if hasattr(ess, "to_dataset") else ess
        rhat = rhat.to_dataset() if hasattr(rhat, "to_dataset") else rhat
    else:
        ess = az.ess(data, method="bulk")
        rhat = az.rhat(data)
    ours = {row["name"]: row for row in fit.table()}
    worst_ess, worst_rhat = 0.0, 0.0
    for var in ("b0", "beta", "r"):
        e = np.atleast_1d(np.asarray(ess[var].values))
        r = np.atleast_1d(np.asarray(rhat[var].values))
        names = [var] if var != "beta" else [f"beta[{j}]" for j in range(3)]
        for k, name in enumerate(names):
            worst_ess = max(worst_ess, abs(e[k] / ours[name]["ess_bulk"] - 1))
            worst_rhat = max(worst_rhat, abs(r[k] - ours[name]["r_hat"]))
    print(f"ArviZ {VERSION} ({'1.x components' if LINE >= 1 else '0.x'}): ESS bulk relative difference {worst_ess:.2e}, R-hat difference {worst_rhat:.2e}")
    assert worst_ess < 1e-6 and worst_rhat < 1e-9
