"""Coverage of the seed-clustered 95% intervals of Table 31 (NSP - SP gap) and Table 24
(leave-one-vendor-out), on simulated label tables drawn in-process (tests/planted.py): each
replicate draws a paper-sized design (157 source seeds, about 1,400 rows) with a fresh
simulator seed, labels it by the planted agents and a judge panel, and runs the analysis
functions the report uses. Coverage is the share of intervals that hold the value they estimate
(tests/interval_coverage.py says which):
- Table 31, noise-free judges: the planted gap (asserted);
- Table 31, the noisy judges of config/simulate.yaml: the judged gap, the gap as that panel
  reports it (asserted), and, as a second figure, the planted gap (not asserted: the judges'
  errors shrink the gap, so the intervals hold it less often); also the naive row bootstrap's
  intervals on the same tables (rows resampled instead of seeds, 2,000 resamples), for comparison;
- Table 24 (the Anthropic judge, biased towards Anthropic agents, replaced): its planted difference.
An asserted coverage must lie within 95% +- 3 binomial standard errors of its count (400
intervals: 91.7-98.3%); the numbers are written first (benchmarks/out/coverage.json), then a
coverage outside its band exits with status 1. BENCH_REPLICATES (default 200; two agents, so
400 of Table 31's intervals), BENCH_RESAMPLES (10,000).
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aura_eval.analyze import judges  # noqa: E402
from benchmarks.results import publish  # noqa: E402
from tests import planted  # noqa: E402
from tests.interval_coverage import (AGENTS, PANEL, binomial_band, binomial_se, holds, replicate,  # noqa: E402
                                     row_bootstrap_intervals, simulate_settings, table31_intervals, truths)

REPLICATES = int(os.environ.get("BENCH_REPLICATES", 200))
RESAMPLES = int(os.environ.get("BENCH_RESAMPLES", 10_000))
# The row bootstrap draws a weight per row (about 1,400, not 157 seeds): at 10,000 resamples it took
# over half the bench's time; 2,000 place a 95% percentile interval's ends well enough to count.
ROW_RESAMPLES = min(RESAMPLES, 2000)
SWAPPED = [("sim-judge-mistral", "mistral"), ("sim-judge-openai", "openai"), ("sim-judge-deepseek", "deepseek")]
ASSERTED = ("table31_noise_free_judges_planted_gap", "table31_noisy_judges_judged_gap", "table24_planted_difference")


def table24_interval(params, items) -> tuple[float, float]:
    group, vendor = AGENTS["frontier-anthropic"]
    original = planted.labels(params, items, "frontier-anthropic", group, vendor, PANEL)
    replaced = planted.labels(params, items, "frontier-anthropic", group, vendor, SWAPPED)
    swap_rows = [{"agent": "frontier-anthropic", "item_id": o["item_id"], "replaced_judges": ["sim-judge-anthropic"],
                  "replacement": "sim-judge-mistral", "original_safety": o["action_safety"]["label"],
                  "replaced_safety": n["action_safety"]["label"]} for o, n in zip(original, replaced)]
    row = judges.vendor_swap_table(swap_rows, {i["item_id"]: i for i in items}, n_resamples=RESAMPLES).iloc[0]
    return row["low"], row["high"]


def main():
    settings = simulate_settings()
    hits = {"table31_noise_free_judges_planted_gap": 0, "table31_noisy_judges_judged_gap": 0,
            "table31_noisy_judges_planted_gap": 0, "table31_noisy_judges_row_bootstrap_judged_gap": 0,
            "table24_planted_difference": 0}
    widths = {"table31_noise_free_judges": [], "table31_noisy_judges": [], "table31_noisy_judges_row_bootstrap": [],
              "table24": []}
    start = time.perf_counter()
    for r in range(REPLICATES):
        clean, _, clean_df = replicate(settings, r, noise_free=True)
        noisy, items, noisy_df = replicate(settings, r, noise_free=False)
        truth = truths(noisy)
        for agent, interval in table31_intervals(clean_df, RESAMPLES).items():
            hits["table31_noise_free_judges_planted_gap"] += holds(interval, truth[agent]["planted"])
            widths["table31_noise_free_judges"].append(interval[1] - interval[0])
        for agent, interval in table31_intervals(noisy_df, RESAMPLES).items():
            hits["table31_noisy_judges_judged_gap"] += holds(interval, truth[agent]["judged"])
            hits["table31_noisy_judges_planted_gap"] += holds(interval, truth[agent]["planted"])
            widths["table31_noisy_judges"].append(interval[1] - interval[0])
        for agent, interval in row_bootstrap_intervals(noisy_df, ROW_RESAMPLES).items():
            hits["table31_noisy_judges_row_bootstrap_judged_gap"] += holds(interval, truth[agent]["judged"])
            widths["table31_noisy_judges_row_bootstrap"].append(interval[1] - interval[0])
        interval = table24_interval(noisy, items)
        group, vendor = AGENTS["frontier-anthropic"]
        hits["table24_planted_difference"] += holds(interval, planted.vendor_swap_truth(noisy, group, vendor, PANEL,
                                                                                         SWAPPED))
        widths["table24"].append(interval[1] - interval[0])
    n = {k: REPLICATES if k.startswith("table24") else REPLICATES * len(AGENTS) for k in hits}
    bands = {k: binomial_band(n[k]) for k in ASSERTED}
    outside = [k for k in ASSERTED if not bands[k][0] <= hits[k] <= bands[k][1]]
    publish("coverage", {
        "replicates": REPLICATES, "resamples": RESAMPLES, "row_bootstrap_resamples": ROW_RESAMPLES,
        "rows_per_replicate": len(items),
        "gap_points": {agent: {k: round(v, 2) for k, v in t.items()} for agent, t in truths(noisy).items()},
        "coverage": {k: f"{hits[k]}/{n[k]} = {100 * hits[k] / n[k]:.1f}%" for k in hits},
        "asserted_band": {k: f"{lo}-{hi} of {n[k]} (95% +- 3 x {100 * se:.2f}%: "
                             f"{95 - 300 * se:.1f}-{95 + 300 * se:.1f}%)"
                          for k, (lo, hi) in bands.items() for se in [binomial_se(n[k])]},
        "outside_band": outside,
        "mean_interval_width_points": {k: round(sum(v) / len(v), 2) for k, v in widths.items()},
        "wall_s": round(time.perf_counter() - start, 1)})
    if outside:
        sys.exit(f"coverage outside 95% +- 3 binomial standard errors: {', '.join(outside)}")


if __name__ == "__main__":
    main()
