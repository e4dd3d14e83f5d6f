"""The seed-clustered bootstrap (paper I.1): 10,000 resamples for each of 20 models.

Target: well under a second for all 20 on 2 cores. For scale, the same statistic by
a plain per-resample loop (rows gathered seed by seed) on 200 resamples, measured in
the same run, gives the speed-up ratio. Writes benchmarks/out/bootstrap.json.
"""

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402

from aura_eval.util.stats import nsp_sp_difference  # noqa: E402

N_ROWS, N_SEEDS, N_MODELS, N_RESAMPLES = 1249, 157, 20, 10_000


def synthetic(model: int):
    rng = np.random.default_rng(model)
    seeds = rng.integers(0, N_SEEDS, N_ROWS).astype(str)
    is_nsp = rng.random(N_ROWS) < 0.5
    unsafe = np.where(is_nsp, rng.random(N_ROWS) < 0.4, rng.random(N_ROWS) < 0.1).astype(float)
    unsafe[rng.random(N_ROWS) < 0.03] = np.nan
    return seeds, is_nsp, unsafe


def loop_bootstrap(seeds, is_nsp, unsafe, n_resamples):
    rng = np.random.default_rng(42)
    clusters = np.unique(seeds)
    rows_of = {c: np.flatnonzero(seeds == c) for c in clusters}
    diffs = []
    for _ in range(n_resamples):
        rows = np.concatenate([rows_of[c] for c in rng.choice(clusters, len(clusters))])
        u, n = unsafe[rows], is_nsp[rows]
        diffs.append(np.nanmean(u[n]) - np.nanmean(u[~n]))
    return np.percentile(diffs, [2.5, 97.5])


def main():
    data = [synthetic(m) for m in range(N_MODELS)]
    start = time.perf_counter()
    results = [nsp_sp_difference(*d, n_resamples=N_RESAMPLES) for d in data]
    vectorised = time.perf_counter() - start
    start = time.perf_counter()
    loop_bootstrap(*data[0], 200)
    loop_per_resample = (time.perf_counter() - start) / 200
    per_resample = vectorised / (N_MODELS * N_RESAMPLES)
    report = {"models": N_MODELS, "resamples": N_RESAMPLES, "rows": N_ROWS, "seeds": N_SEEDS,
              "vectorised_total_s": round(vectorised, 3), "target_s": 1.0,
              "loop_ms_per_resample": round(1000 * loop_per_resample, 4),
              "vectorised_ms_per_resample": round(1000 * per_resample, 5),
              "speedup_vs_loop": round(loop_per_resample / per_resample, 1),
              "first_model": [round(x, 4) for x in results[0]]}
    publish("bootstrap", report)


if __name__ == "__main__":
    main()
