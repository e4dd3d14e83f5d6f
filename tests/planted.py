"""Simulated label tables drawn in-process (no workflow), and the planted truth they estimate.

A design is a benchmark-shaped set of items (seeds, prefixes, dimensions, NSP/SP pairs)
drawn at the construction shares of aura_eval.simulator.planted; labels are the simulator's agents'
planted labels as a panel of simulated judges reports them. The truth functions give the
expected value of a table's cell over random source seeds, so an interval's coverage can
be counted (benchmarks/bench_coverage.py) and a table's estimate tested (tests/test_simulation.py).
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pandas as pd

from aura_eval.analyze.frame import frame
from aura_eval.simulator import planted as sim
from aura_eval.util.stats import vote
from aura_eval.vocab import NSP, OPPOSITE, ORIGINAL, SP, VARIED_DIMENSIONS, counterpart_item_id, item_id, pair_id

DOMAIN = "Application"
PRE_EXECUTION_SHARE = 54 / 157  # the paper's prefixes (C.2)


def design(params: dict, n_seeds: int = 157, pair_share: float = 0.5) -> list[dict]:
    """Items of `n_seeds` source seeds: each seed has an at-trigger prefix (and a pre-execution
    one at the paper's share); each prefix its original and each varied dimension at
    `relevance_share × review keep`; each item a pair label (SP at `safe_path_share`) and, at
    `pair_share`, a counterpart of the opposite label. Draws keyed by params["seed"]."""
    c, seed = params["construction"], params["seed"]
    keep = variation_share(params)
    items = []
    for s in range(n_seeds):
        seed_id = f"app-{seed}-{s:03d}"
        points = ["at_trigger"] + (["pre_execution"] if sim.uniform(seed, "pre", seed_id) < PRE_EXECUTION_SHARE else [])
        for point in points:
            prefix = f"{seed_id}.{point}"
            dims = [ORIGINAL] + [d for d in VARIED_DIMENSIONS if sim.uniform(seed, "var", prefix, d) < keep]
            for dim in dims:
                iid = item_id(prefix, dim)
                label = SP if sim.uniform(seed, "sp", iid) < c["safe_path_share"] else NSP
                paired = sim.uniform(seed, "pair", iid) < pair_share
                base = {"seed_id": seed_id, "domain": DOMAIN, "dimension": dim, "decision_point": point,
                        "provenance": {"prefix_id": prefix}}
                items.append({**base, "item_id": iid, "pair_label": label,
                              "pair_id": pair_id(iid) if paired else None,
                              "counterpart_id": counterpart_item_id(iid) if paired else None})
                if paired:
                    items.append({**base, "item_id": counterpart_item_id(iid), "pair_label": OPPOSITE[label],
                                  "pair_id": pair_id(iid), "counterpart_id": iid})
    return items


def variation_share(params: dict) -> float:
    return params["construction"]["relevance_share"] * 0.7


def panel_label(params: dict, judges: list[tuple[str, str]], axis: str, truth: str, agent_vendor: str,
                key: str) -> str | None:
    votes = [sim.judge_vote(params, name, axis, truth, agent_vendor, key, vendor=vendor) for name, vendor in judges]
    return vote(votes, "majority")


def labels(params: dict, items: list[dict], agent: str, group: str, vendor: str, judges: list[tuple[str, str]],
           fmt: str = "react") -> list[dict]:
    """One run's label rows (the shape of results/labels/<run>.jsonl) from the panel's votes."""
    rows = []
    for item in items:
        truth = sim.agent_truth(params, agent, item["item_id"], group, item["pair_label"], item["dimension"], fmt)
        key = f"{agent}/{fmt}/{item['item_id']}"
        row = {"item_id": item["item_id"], "agent": agent, "format": fmt, "rollout_status": "ok"}
        for axis in ("detection", "action_type", "action_safety"):
            row[axis] = {"label": panel_label(params, judges, axis, truth[axis], vendor, key)}
        rows.append(row)
    return rows


def label_frame(params: dict, items: list[dict], agents: dict[str, tuple[str, str]],
                judges: list[tuple[str, str]]) -> pd.DataFrame:
    """analysis.frame of every agent's ReAct run: agents maps name -> (group, vendor)."""
    runs = {name: labels(params, items, name, group, vendor, judges) for name, (group, vendor) in agents.items()}
    return frame(runs, {i["item_id"]: i for i in items}, {n: {"group": g} for n, (g, _) in agents.items()})


# -- the planted truth ------------------------------------------------------------------------

def dimension_weights(params: dict) -> dict[str, float]:
    """Expected share of each dimension among a pair label's rows (the same for NSP and SP)."""
    r = variation_share(params)
    total = 1 + r * len(VARIED_DIMENSIONS)
    return {ORIGINAL: 1 / total, **{d: r / total for d in VARIED_DIMENSIONS}}


def unsafe_rate_truth(params: dict, group: str, pair_label: str) -> float:
    """Expected unsafe rate of a group over a pair label's rows (the rate Tables 31 and 33 estimate)."""
    return sum(w * sim.expected_unsafe(params, group, pair_label, dim)
               for dim, w in dimension_weights(params).items())


def gap_truth(params: dict, group: str) -> float:
    """Table 31's NSP - SP difference, in points."""
    return 100 * (unsafe_rate_truth(params, group, NSP) - unsafe_rate_truth(params, group, SP))


def _reported_safe(params, judges, agent_vendor, truth: str) -> float:
    """P(the panel's majority says Safe | planted truth), by enumerating the judges' votes."""
    probs = []
    for name, vendor in judges:
        spec = sim.judge_params(params, name)
        says_safe = {seen: sim.vote_distribution(spec, "action_safety", seen)[0] for seen in ("Safe", "Unsafe")}
        bias = spec["own_vendor_bias"] if truth == "Unsafe" and vendor and vendor == agent_vendor else 0.0
        seen_safe = 1.0 if truth == "Safe" else bias  # P(the judge sees Safe)
        probs.append(seen_safe * says_safe["Safe"] + (1 - seen_safe) * says_safe["Unsafe"])
    total = 0.0
    for says in product((True, False), repeat=len(probs)):
        if sum(says) > len(probs) / 2:
            total += float(np.prod([p if s else 1 - p for p, s in zip(probs, says)]))
    return total


def vendor_swap_truth(params: dict, group: str, agent_vendor: str, panel, swapped, pair_share: float = 0.5) -> float:
    """Table 24's difference (Safe rate under `panel` minus under `swapped`), in points,
    over all of a group's rows (NSP and SP at their expected shares in `design`)."""
    s = params["construction"]["safe_path_share"]
    nsp_share = (1 - s + pair_share * s) / (1 + pair_share)  # a counterpart has the opposite label
    p_unsafe = nsp_share * unsafe_rate_truth(params, group, NSP) + s * unsafe_rate_truth(params, group, SP)
    diff = 0.0
    for truth, weight in (("Unsafe", p_unsafe), ("Safe", 1 - p_unsafe)):
        diff += weight * (_reported_safe(params, panel, agent_vendor, truth)
                          - _reported_safe(params, swapped, agent_vendor, truth))
    return 100 * diff


def noise_free(settings: dict | None = None) -> dict:
    """Planted parameters whose judges always report the planted label (no bias, no noise)."""
    params = sim.planted(settings)
    perfect = {"accuracy": {"detection": 1.0, "action_type": 1.0, "action_safety": 1.0}, "confusion": {},
               "own_vendor_bias": 0.0, "repeat_noise": 0.0}
    params["judge_default"] = perfect
    params["judges"] = {name: perfect for name in params["judges"]}
    return params


def reported_gap_truth(params: dict, group: str, agent_vendor: str, judges) -> float:
    """Table 31's difference as the panel reports it (its errors attenuate the planted gap), in points."""
    says_unsafe = {truth: 1 - _reported_safe(params, judges, agent_vendor, truth) for truth in ("Unsafe", "Safe")}

    def reported(label):
        p = unsafe_rate_truth(params, group, label)
        return p * says_unsafe["Unsafe"] + (1 - p) * says_unsafe["Safe"]
    return 100 * (reported(NSP) - reported(SP))
