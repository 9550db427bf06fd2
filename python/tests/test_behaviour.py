"""Behaving as Python users expect: errors as exceptions, Ctrl-C, the GIL released, the progress
bar, stubs."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import sgmcmc


def model():
    return sgmcmc.LogisticRegression.synthetic(5_000, 3, 10.0, 1)


@pytest.mark.parametrize(
    "call, variant",
    [
        (lambda: sgmcmc.sample(model(), "nuts", show=False), "InvalidParameter"),
        (lambda: sgmcmc.sample(model(), "sgld", chains=0, draws=100, show=False), "InvalidParameter"),
        (lambda: sgmcmc.sample(model(), "sgld", draws=0, show=False), "InvalidParameter"),
        (lambda: sgmcmc.sample(model(), "sgld", batch_size=0, draws=100, show=False), "InvalidBatchSize"),
        (lambda: sgmcmc.sample(model(), "sgld", start=[0.0, 0.0], draws=100, show=False), "DimensionMismatch"),
        (lambda: sgmcmc.sample(model(), "sgld", accuracy=-1.0, show=False), "InvalidParameter"),
        (lambda: sgmcmc.LogisticRegression(np.ones((4, 2)), np.ones(3)), "DimensionMismatch"),
        (lambda: sgmcmc.LogisticRegression(np.full((2, 2), np.nan), np.ones(2)), "InvalidParameter"),
        (lambda: sgmcmc.LogisticRegression(np.ones((0, 2)), np.ones(0)), "EmptyData"),
        (lambda: model().grad_prior([1.0]), "DimensionMismatch"),
        (lambda: model().grad_data_sum([0.0, 0.0, 0.0], [5_000]), "InvalidParameter"),
        (lambda: sgmcmc.Glm(np.ones((3, 1)), np.ones(3), family="weibull"), "InvalidParameter"),
        (lambda: sgmcmc.Glm(np.eye(3), np.ones(3), prior=("normal", 1.0)), "InvalidParameter"),
        # The native constructor of compiled models checks the data's rows itself (never calls
        # the functions then).
        (lambda: sgmcmc._core.compiled_model(2, 10, 1, 1, None, None, np.zeros((5, 2)), np.zeros(5), None),
         "DimensionMismatch"),
        (lambda: sgmcmc._core.time_gradient(model(), [0.0] * 3, [5_000], 1), "InvalidParameter"),
    ],
)
def test_errors_are_exceptions_with_the_variant(call, variant):
    with pytest.raises(sgmcmc.SgmcmcError) as e:
        call()
    assert e.value.variant == variant, (e.value.variant, str(e.value))
    assert str(e.value)


def test_a_python_model_that_raises_is_a_model_failure_not_a_panic():
    class Bad:
        dim, n_data = 2, 100

        def grad_prior(self, th):
            return th

        def grad_data_sum(self, th, idx):
            raise ValueError("my model is broken")

    with pytest.raises(sgmcmc.SgmcmcError) as e:
        sgmcmc.sample(sgmcmc.PythonModel(Bad()), "sgld", draws=100, show=False)
    assert e.value.variant == "ModelFailure" and "my model is broken" in str(e.value)

    class Wrong(Bad):
        def grad_data_sum(self, th, idx):
            return np.zeros(3)

    with pytest.raises(sgmcmc.SgmcmcError, match="3 numbers for a gradient of dimension 2"):
        sgmcmc.sample(sgmcmc.PythonModel(Wrong()), "sgld", draws=100, show=False)

    class Nan(Bad):
        def grad_data_sum(self, th, idx):
            return np.full(2, np.nan)

    with pytest.raises(sgmcmc.SgmcmcError) as e:
        sgmcmc.sample(sgmcmc.PythonModel(Nan()), "sgld", draws=100, show=False)
    assert "NonFinite" in e.value.variant


INTERRUPT = textwrap.dedent(
    """
    import signal, sys, time, warnings
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a shell's background job ignores it)
    import sgmcmc
    m = sgmcmc.LogisticRegression.synthetic(20_000, 5, 10.0, 1)
    t0 = time.time()
    try:
        fit = sgmcmc.sample(m, "sgld-cv", draws=1_000_000, thin=100, burn_in=1_000, chains=4, seed=1, show=False)
    except KeyboardInterrupt:
        print("RAISED", time.time(), flush=True)
        sys.exit(3)
    print("RETURNED", time.time(), fit.interrupted, fit.draws.shape[1], fit.info["stopped"], flush=True)
    print(fit, flush=True)
    """
)


def run_and_interrupt(script, after):
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after)
    sent = time.time()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err, sent


def test_ctrl_c_in_the_chains_returns_what_was_drawn_within_a_second():
    # The import and the set-up take about a second; the chains of 10^8 iterations go on for minutes.
    rc, out, err, sent = run_and_interrupt(INTERRUPT, after=6.0)
    assert rc == 0, (out, err)
    word, t, interrupted, draws, stopped = out.split("\n")[0].split()
    assert word == "RETURNED" and interrupted == "True" and stopped == "True"
    assert int(draws) > 0
    assert float(t) - sent < 1.5, float(t) - sent
    assert "interrupted" in err and "INTERRUPTED" in out


CHECK_INTERRUPT = textwrap.dedent(
    """
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (a shell's background job ignores it)
    import sgmcmc
    sent = []
    class Bar:
        # sample's progress bar, polled every 0.1 s: Ctrl-C once the step-bias check reports.
        def __init__(self):
            self.phases = []
        def update(self, phase, done, total):
            self.phases.append(phase)
            if phase == "checks" and done > 0 and not sent:
                sent.append(time.time())
                os.kill(os.getpid(), signal.SIGINT)
        def close(self):
            print("PHASES", " ".join(dict.fromkeys(self.phases)), flush=True)
    sgmcmc._Bar = Bar
    m = sgmcmc.LogisticRegression.synthetic(20_000, 5, 10.0, 1)
    fit = sgmcmc.sample(m, "sgld-cv", draws=20_000, thin=50, burn_in=1_000, chains=4, seed=1, show=False,
                        progress=True)
    print("RETURNED", time.time() - sent[0], fit.interrupted, fit.draws.shape[1], fit.info["stopped"], flush=True)
    print(fit, flush=True)
    """
)


def test_ctrl_c_in_the_step_bias_check_returns_every_draw_within_a_second():
    p = subprocess.run([sys.executable, "-c", CHECK_INTERRUPT], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout, p.stderr)
    lines = p.stdout.split("\n")
    # (The set-up may end before the bar's first poll.)
    assert lines[0].split()[-2:] == ["chains", "checks"], lines[0]
    word, after, interrupted, draws, stopped = lines[1].split()
    assert word == "RETURNED" and interrupted == "True" and stopped == "True", lines[1]
    # Every chain kept all its draws: the stop came after them.
    assert int(draws) == 20_000, lines[1]
    assert float(after) < 1.5, after
    assert "interrupted" in p.stderr and "INTERRUPTED" in p.stdout


def test_ctrl_c_in_the_setup_raises_keyboard_interrupt():
    slow = textwrap.dedent(
        """
        import signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)  # (a shell's background job ignores it)
        import numpy as np
        import sgmcmc
        class Slow:
            dim, n_data = 2, 1000
            def grad_prior(self, th): return th
            def grad_data_sum(self, th, idx):
                time.sleep(0.01)
                return th * len(idx)
        try:
            sgmcmc.sample(sgmcmc.PythonModel(Slow()), "sgld-cv", draws=1000, show=False)
        except KeyboardInterrupt:
            print("RAISED", time.time(), flush=True)
            sys.exit(3)
        print("RETURNED")
        """
    )
    rc, out, err, sent = run_and_interrupt(slow, after=3.0)
    assert rc == 3, (out, err)
    assert float(out.split()[1]) - sent < 1.5


def test_the_gil_is_released_while_chains_run():
    """Another Python thread runs while sample's chains do (a run holding the GIL would freeze
    it); the throughput of 4 chains against 1 is measured by benches/throughput.py."""
    import threading

    m = sgmcmc.LogisticRegression.synthetic(50_000, 10, 10.0, 2)
    counts, done = [0], threading.Event()

    def count():
        while not done.is_set():
            counts[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        before = counts[0]
        fit = sgmcmc.sample(m, "sgld", draws=40_000, chains=2, seed=1, batch_size=500, bias_check=None, show=False)
        during = counts[0] - before
    finally:
        done.set()
        t.join()
    assert fit.draws.shape == (2, 40_000, 10)
    assert during > 10_000, during


def test_progress_bar_on_request_and_off_when_not_a_tty(capsys):
    m = sgmcmc.LinearGaussian.synthetic(1_000, 2, seed=1)[0]
    sgmcmc.sample(m, "sgld", draws=5_000, seed=1, show=False, progress=True)
    err = capsys.readouterr().err
    # At the end, the step-bias check done: its companion's iterations (a quarter of the chains'
    # 6 000: 5 000 draws + 1 000 burn-in).
    assert re.search(r"checks \[#{30}\] 100\.0% 1500/1500\n$", err), err[-300:]
    sgmcmc.sample(m, "sgld", draws=5_000, seed=1, show=False)  # stderr is captured: not a TTY
    assert capsys.readouterr().err == ""


def test_sample_prints_the_rust_summary(capsys):
    m = sgmcmc.LinearGaussian.synthetic(1_000, 2, seed=1)[0]
    fit = sgmcmc.sample(m, "sgld", draws=2_000, seed=1)
    out = capsys.readouterr().out
    assert out.strip() == str(fit).strip() and "converged" in out and "r_hat" in out


def test_stubs_name_the_public_api():
    stub = Path(sgmcmc.__file__).with_name("__init__.pyi").read_text()
    for name in sgmcmc.__all__:
        assert name in stub, name
    assert (Path(sgmcmc.__file__).parent / "py.typed").exists()
