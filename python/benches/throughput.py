"""Chains in parallel from Python: iterations per second of 1, 2 and 4 chains of SGLD on a
logistic regression (N = 50 000, d = 10, minibatches of 500), the run's own figure
(RunOutput::iterations_per_second; the best of three), measured side by side in one process. The GIL is released
while the chains run, so 4 chains on 2 cores should give about twice one chain's throughput.

Run: python benches/throughput.py   (ends with RESULT {json})
"""

import json
import os

import sgmcmc


def main():
    m = sgmcmc.LogisticRegression.synthetic(50_000, 10, 10.0, 2)
    rate = {}
    for chains in (1, 2, 4):
        # The best of three runs (the machine's other load only slows a run down).
        rate[chains] = max(
            sgmcmc.sample(m, "sgld", draws=40_000, chains=chains, seed=1, batch_size=500, bias_check=None,
                          show=False).info["iterations_per_second"]
            for _ in range(3)
        )
        print(f"{chains} chain(s): {rate[chains]:.4g} iterations/s")
    cores = len(os.sched_getaffinity(0))
    ratio = rate[4] / rate[1]
    print(f"4 chains / 1 chain = {ratio:.2f} on {cores} cores (target >= 1.7 on 2)")
    print("RESULT " + json.dumps({"cores": cores, "one_chain": rate[1], "four_chains": rate[4], "ratio": ratio}))


if __name__ == "__main__":
    main()
