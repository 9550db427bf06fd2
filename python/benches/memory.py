"""Memory of a model built from arrays at N = 10^6, d = 20 (X: 160 MB of float64), for Glm(X)
from a float64 array, Glm(X) from float32 (half the storage), Glm.from_dataframe (each column
viewed in place) and LogisticRegression(X), each in a process of its own (Linux): the resident
memory just before building the model, the peak while building it (VmHWM, reset just before by
/proc/self/clear_refs) and the resident memory after. "peak copies" = (peak - before) / bytes of
X as stored; "kept copies" = (after - before) / the same.

Run: python benches/memory.py   (ends with RESULT {json})
"""

import json
import subprocess
import sys

N, D = 1_000_000, 20

CASE = r"""
import sys, numpy as np
import sgmcmc
N, D, case = %d, %d, sys.argv[1]
rng = np.random.default_rng(1)
X = rng.standard_normal((N, D))
y = (rng.random(N) < 0.5).astype(float)
if case == "dataframe":
    import pandas as pd
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(D)])
    df["y"] = y
    del X
if case == "f32":
    X = X.astype(np.float32)
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
if case == "dataframe":
    m = sgmcmc.Glm.from_dataframe(df, "y", family="logistic")
elif case == "logistic":
    m = sgmcmc.LogisticRegression(X, y)
else:
    m = sgmcmc.Glm(X, y, family="logistic")
peak, after = status("VmHWM"), status("VmRSS")
stored = N * D * (4 if case == "f32" else 8)
print(f"{before} {peak} {after} {stored}")
""" % (N, D)


def main():
    out = {}
    for case in ("f64", "f32", "dataframe", "logistic"):
        r = subprocess.run([sys.executable, "-c", CASE, case], check=True, capture_output=True, text=True)
        before, peak, after, stored = (int(v) for v in r.stdout.split())
        out[case] = {"before_mb": before / 1e6, "peak_mb": peak / 1e6, "after_mb": after / 1e6,
                     "stored_x_mb": stored / 1e6, "peak_copies": (peak - before) / stored,
                     "kept_copies": (after - before) / stored}
        print(f"{case:>10}: resident {before / 1e6:7.1f} MB, peak {peak / 1e6:7.1f} MB, after {after / 1e6:7.1f} MB; "
              f"X stored {stored / 1e6:6.1f} MB: {(peak - before) / stored:.2f} copies at the peak, "
              f"{(after - before) / stored:.2f} kept")
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
