"""Judge-reliability runs (paper F.2-F.5), each switched on in the config.

- five-judge validation panel on each evaluated model's calibration sample (F.2-F.3);
- repeated runs of each panel judge at temperature 0 on that sample (F.5): distinct
  calls through the cache's sample index;
- leave-one-vendor-out (F.4): for an evaluated model sharing a vendor with a panel
  judge, that judge is replaced by the replacement judge on a stratified sample.
One job per evaluated model for each; files under results/reliability/.
"""

from __future__ import annotations

import dataclasses
import sys

from aura_eval.dataset import stratified_sample
from aura_eval.judging import AXES, final_labels, items_by_id, judge_panel, judgeable, load_prompts
from aura_eval.jsonl import read_jsonl, write_jsonl
from aura_eval.llm import ModelClient, endpoint


def calibration_sample(rollouts: list[dict], items: dict, n: int, salt: str = "calibration") -> list[dict]:
    """n judgeable rollouts, spread evenly over domains, proportionally over dimensions."""
    rows = [{**r, "domain": items[r["item_id"]]["domain"], "dimension": items[r["item_id"]]["dimension"]}
            for r in judgeable(rollouts)]
    chosen = {r["item_id"] for r in stratified_sample(rows, n, "domain", "dimension", "item_id", salt)}
    return [r for r in rollouts if r["item_id"] in chosen]


def _endpoints(config, names):
    return {name: endpoint(config, name) for name in names}


def _label_rows(labels: list[dict], extra: dict) -> list[dict]:
    return [{**row, **extra} for row in labels]


def five_judge(rollouts, items, config, client) -> list[dict]:
    names = config["roles"]["validation_judges"]
    sample = calibration_sample(rollouts, items, config["reliability"]["calibration_items"])
    by_judge = judge_panel(sample, items, _endpoints(config, names), load_prompts(), client)
    labels = final_labels(sample, by_judge, rule="plurality")
    return _label_rows(labels, {"panel": "five_judge", "rule": "plurality"})


def repeats(rollouts, items, config, client) -> list[dict]:
    names = config["roles"]["judges"] if isinstance(config["roles"]["judges"], list) else [config["roles"]["judges"]]
    sample = calibration_sample(rollouts, items, config["reliability"]["calibration_items"])
    # Temperature 0 as in F.5; the sample index makes each run a distinct cached call.
    endpoints = {name: dataclasses.replace(ep, params={**ep.params, "temperature": 0.0})
                 for name, ep in _endpoints(config, names).items()}
    runs = [judge_panel(sample, items, endpoints, load_prompts(), client, sample=k)
            for k in range(config["reliability"]["repeats"])]
    rows = []
    for name in names:
        per_run = [{row["item_id"]: row for row in run[name]} for run in runs]
        for rollout in judgeable(sample):
            row = {"item_id": rollout["item_id"], "judge": name}
            for axis in AXES:
                labels = [run[rollout["item_id"]][axis]["label"] for run in per_run]
                row[axis] = {"labels": labels,
                             "consistent": None if all(lab is None for lab in labels)
                             else len(set(labels)) == 1 and labels[0] is not None}
            rows.append(row)
    return rows


def vendor_swap(rollouts, items, labels, config, agent, client) -> list[dict]:
    judges = config["roles"]["judges"]
    vendor = config["agents"][agent]["vendor"]
    replacement = config["roles"]["replacement_judge"]
    swapped = [replacement if config["models"][j].get("vendor") == vendor else j for j in judges]
    replaced = [j for j in judges if config["models"][j].get("vendor") == vendor]
    rows = [{**r, "pair_label": items[r["item_id"]]["pair_label"], "dimension": items[r["item_id"]]["dimension"]}
            for r in judgeable(rollouts)]
    chosen = {r["item_id"] for r in stratified_sample(rows, config["reliability"]["vendor_swap_items"],
                                                      "pair_label", "dimension", "item_id", "vendor-swap")}
    sample = [r for r in rollouts if r["item_id"] in chosen]
    # A judge may appear twice in the swapped panel (the replacement); keep one entry per position.
    endpoints = {f"{i}:{name}": endpoint(config, name) for i, name in enumerate(swapped)}
    new_labels = {row["item_id"]: row for row in final_labels(sample, judge_panel(
        sample, items, endpoints, load_prompts(), client))}
    original = {row["item_id"]: row for row in labels}
    return [{"item_id": r["item_id"], "agent": agent, "replaced_judges": replaced, "replacement": replacement,
             "original_safety": original[r["item_id"]]["action_safety"]["label"],
             "replaced_safety": new_labels[r["item_id"]]["action_safety"]["label"],
             "replaced_votes": new_labels[r["item_id"]]["action_safety"]["votes"]} for r in sample]


def run(kind, items_path, rollouts_path, labels_path, out_path, calls_path, config, agent, progress=True):
    items = items_by_id(items_path)
    rollouts = read_jsonl(rollouts_path)
    client = ModelClient(config["llm"], stage=f"reliability:{kind}:{agent}", progress=progress)
    if kind == "five_judge":
        rows = five_judge(rollouts, items, config, client)
    elif kind == "repeats":
        rows = repeats(rollouts, items, config, client)
    elif kind == "vendor_swap":
        rows = vendor_swap(rollouts, items, read_jsonl(labels_path), config, agent, client)
    else:
        raise ValueError(f"unknown reliability run {kind!r} (five_judge, repeats, vendor_swap)")
    write_jsonl(out_path, rows, key=("item_id", "judge") if kind == "repeats" else "item_id")
    client.write_call_log(calls_path)
    print(f"reliability {kind} for {agent}: {len(rows)} rows, calls made {client.calls_made}", file=sys.stderr)
