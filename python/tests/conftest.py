"""Shared fixtures: the Rust side of the bit-identity test, run once per session."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def parity_dir(tmp_path_factory):
    """The folder where the Rust example `python_parity` wrote its draws: run from the binary in
    $SGMCMC_PARITY_BIN (CI builds it beside the README's tests), else with cargo."""
    out = tmp_path_factory.mktemp("parity")
    binary = os.environ.get("SGMCMC_PARITY_BIN")
    if binary:
        cmd = [binary, str(out)]
    elif shutil.which("cargo") and (REPO / "Cargo.toml").exists():
        cmd = ["cargo", "run", "--quiet", "--release", "--example", "python_parity", "--", str(out)]
    else:
        pytest.skip("needs the Rust example python_parity (set SGMCMC_PARITY_BIN or run from a checkout with cargo)")
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return out
