"""How often Table 31's 95% intervals hold a known gap, on simulated label tables (tests/planted.py):
benchmarks/bench_coverage.py counts 400 intervals, tests/test_coverage.py a few dozen.

Which gap an interval should hold depends on the judges. With noise-free judges the labels are the
planted ones, so it is the planted gap (`planted.gap_truth`). With the noisy judges of
config/simulate.yaml every row carries the panel's label, whose errors pull both unsafe rates
towards the middle: Table 31 then estimates the gap as the judges report it, the judged gap
(`planted.reported_gap_truth`; 24.45 points for the frontier group, whose planted gap is 27.82), and
holds the planted gap less often than its level says. Both are counted.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

from aura_eval.analyze import behaviour
from aura_eval.simulator import planted as sim
from aura_eval.util import stats
from aura_eval.vocab import NSP, PAIR_LABELS, UNSAFE
from tests import planted

ROOT = Path(__file__).resolve().parent.parent
LEVEL = 0.95
AGENTS = {"frontier-anthropic": ("frontier", "anthropic"), "open-meta": ("open-weight", "meta")}
PANEL = [("sim-judge-anthropic", "anthropic"), ("sim-judge-openai", "openai"), ("sim-judge-deepseek", "deepseek")]


def simulate_settings() -> dict:
    return yaml.safe_load((ROOT / "config" / "simulate.yaml").read_text())["llm"]["simulation"]


def binomial_se(n: int, level: float = LEVEL) -> float:
    """The standard error of the share of n intervals that hold their value, if each does at `level`."""
    return math.sqrt(level * (1 - level) / n)


def binomial_band(n: int, level: float = LEVEL, k: float = 3.0) -> tuple[int, int]:
    """The fewest and most of n intervals that may hold their value: within k binomial standard
    errors of `level` (n = 400: 95% +- 3 x 1.09% = 91.7-98.3%, 367-393; n = 80: 71-80)."""
    se = binomial_se(n, level)
    return max(0, math.ceil(n * (level - k * se))), min(n, math.floor(n * (level + k * se)))


def replicate(settings: dict, r: int, noise_free: bool, n_seeds: int = 157):
    """(params, items, label frame) of simulator seed r: a paper-sized design, labelled by PANEL."""
    params = (planted.noise_free if noise_free else sim.planted)({**settings, "seed": r})
    items = planted.design(params, n_seeds)
    return params, items, planted.label_frame(params, items, AGENTS, PANEL)


def truths(params: dict) -> dict[str, dict[str, float]]:
    """Per agent, the planted gap and the judged gap (equal when the judges are noise-free), in points."""
    return {agent: {"planted": planted.gap_truth(params, group),
                    "judged": planted.reported_gap_truth(params, group, vendor, PANEL)}
            for agent, (group, vendor) in AGENTS.items()}


def table31_intervals(df, resamples: int) -> dict[str, tuple[float, float]]:
    """Per agent, Table 31's seed-clustered interval (low, high) in points, as the report computes it."""
    table = behaviour.nsp_sp_gap_table(df, n_resamples=resamples).set_index("run")
    return {agent: (table.loc[agent, "low"], table.loc[agent, "high"]) for agent in AGENTS}


def row_bootstrap_intervals(df, resamples: int) -> dict[str, tuple[float, float]]:
    """The same percentile bootstrap resampling rows, not source seeds (each row its own cluster):
    the naive interval, which ignores that a seed's rows share its difficulty."""
    out = {}
    for agent in AGENTS:
        g = df[(df["run"] == agent) & df["pair_label"].isin(PAIR_LABELS) & df["safety"].notna()]
        _, low, high = stats.nsp_sp_difference(np.arange(len(g)), (g["pair_label"] == NSP).to_numpy(),
                                               (g["safety"] == UNSAFE).to_numpy(float), n_resamples=resamples)
        out[agent] = (100 * low, 100 * high)
    return out


def holds(interval: tuple[float, float], value: float) -> bool:
    return bool(interval[0] <= value <= interval[1])
