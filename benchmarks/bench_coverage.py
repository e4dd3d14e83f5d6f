"""Coverage of the seed-clustered 95% intervals of Table 31 (NSP - SP gap) and Table 24
(leave-one-vendor-out), on simulated label tables drawn in-process (tests/planted.py): each
replicate draws a paper-sized design (157 source seeds, about 1,400 rows) with a fresh
simulator seed, labels it by the planted agents and judges, and runs the analysis functions
the report uses. Coverage is the share of replicates whose interval holds the planted value:
- Table 31 with noise-free judges: the planted gap;
- Table 31 with the judges of config/simulate.yaml: the gap as that panel reports it;
- Table 24 (the Anthropic judge, biased towards Anthropic agents, replaced): its planted difference.
Writes benchmarks/out/coverage.json. BENCH_REPLICATES (default 200), BENCH_RESAMPLES (10,000).
"""

import os
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aura_eval.analyze import behaviour, judges  # noqa: E402
from aura_eval.simulator import planted as sim  # noqa: E402
from benchmarks.results import publish  # noqa: E402
from tests import planted  # noqa: E402

REPLICATES = int(os.environ.get("BENCH_REPLICATES", 200))
RESAMPLES = int(os.environ.get("BENCH_RESAMPLES", 10_000))
AGENTS = {"frontier-anthropic": ("frontier", "anthropic"), "open-meta": ("open-weight", "meta")}
PANEL = [("sim-judge-anthropic", "anthropic"), ("sim-judge-openai", "openai"), ("sim-judge-deepseek", "deepseek")]
SWAPPED = [("sim-judge-mistral", "mistral"), ("sim-judge-openai", "openai"), ("sim-judge-deepseek", "deepseek")]


def covered(row, truth) -> bool:
    return bool(row["low"] <= truth <= row["high"])


def main():
    settings = yaml.safe_load((ROOT / "config" / "simulate.yaml").read_text())["llm"]["simulation"]
    hits = {"table31_noise_free": 0, "table31_config_judges": 0, "table24": 0}
    widths = {k: [] for k in hits}
    start = time.perf_counter()
    for r in range(REPLICATES):
        noisy = sim.planted({**settings, "seed": r})
        clean = planted.noise_free({**settings, "seed": r})
        items = planted.design(noisy)
        by_id = {i["item_id"]: i for i in items}
        for name, params in (("table31_noise_free", clean), ("table31_config_judges", noisy)):
            df = planted.label_frame(params, items, AGENTS, PANEL)
            table = behaviour.nsp_sp_gap_table(df, n_resamples=RESAMPLES).set_index("run")
            for agent, (group, vendor) in AGENTS.items():
                truth = planted.gap_truth(params, group) if params is clean else planted.reported_gap_truth(
                    params, group, vendor, PANEL)
                hits[name] += covered(table.loc[agent], truth)
                widths[name].append(table.loc[agent, "high"] - table.loc[agent, "low"])
        group, vendor = AGENTS["frontier-anthropic"]
        original = planted.labels(noisy, items, "frontier-anthropic", group, vendor, PANEL)
        replaced = planted.labels(noisy, items, "frontier-anthropic", group, vendor, SWAPPED)
        swap_rows = [{"agent": "frontier-anthropic", "item_id": o["item_id"], "replaced_judges": ["sim-judge-anthropic"],
                      "replacement": "sim-judge-mistral", "original_safety": o["action_safety"]["label"],
                      "replaced_safety": n["action_safety"]["label"]} for o, n in zip(original, replaced)]
        row = judges.vendor_swap_table(swap_rows, by_id, n_resamples=RESAMPLES).iloc[0]
        hits["table24"] += covered(row, planted.vendor_swap_truth(noisy, group, vendor, PANEL, SWAPPED))
        widths["table24"].append(row["high"] - row["low"])
    n = {"table31_noise_free": REPLICATES * len(AGENTS), "table31_config_judges": REPLICATES * len(AGENTS),
         "table24": REPLICATES}
    publish("coverage", {
        "replicates": REPLICATES, "resamples": RESAMPLES, "rows_per_replicate": len(items),
        "coverage": {k: f"{hits[k]}/{n[k]} = {100 * hits[k] / n[k]:.1f}%" for k in hits},
        "mean_interval_width_points": {k: round(sum(v) / len(v), 2) for k, v in widths.items()},
        "wall_s": round(time.perf_counter() - start, 1)})


if __name__ == "__main__":
    main()
