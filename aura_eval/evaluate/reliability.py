"""Judge-reliability runs (paper F.2-F.5), each switched on in the config.

- five-judge validation panel on each calibration agent's calibration sample (F.2-F.3);
- repeated runs of each panel judge at temperature 0 on that sample (F.5): distinct
  calls through the cache's sample index;
- leave-one-vendor-out (F.4): for an evaluated model sharing a vendor with a panel
  judge, that judge is replaced by the replacement judge on a stratified sample.
One job per agent for each: the first two for the agents `reliability.calibration_agents`
names (the paper's four), so an added agent leaves them as they are; the vendor swap for
every agent it applies to. The calibration agents' samples are drawn from disjoint shares of
the items (`calibration_share`), so the audit samples drawn from them are distinct scenarios,
as the paper's 84 action-safety samples are (F.1.1). Files under results/reliability/.
"""

from __future__ import annotations

import dataclasses

from aura_eval.evaluate.judging import final_labels, items_by_id, judge_panel, judge_panels, judgeable, load_prompts
from aura_eval.util.jsonl import read_jsonl
from aura_eval.llm.types import endpoints
from aura_eval.util.sampling import stratified_sample
from aura_eval.stage_runner import StageRun
from aura_eval.stage_registry import model_stage
from aura_eval.vocab import AXES, JUDGE_PROMPTS, RELIABILITY_KINDS, hash_rank


def calibration_share(items: dict, agents: list[str], agent: str) -> set[str]:
    """The item ids `agent` calibrates on: each item belongs to the one calibration agent that
    ranks first for it in a fixed hash order (rendezvous hashing), so no item is in two agents'
    shares, and an added agent takes items from the others without reshuffling the rest. An agent
    that is not a calibration agent gets every item."""
    if agent not in agents:
        return set(items)
    return {i for i in items if max(agents, key=lambda a: (hash_rank(f"{i}/{a}", "calibration-share"), a)) == agent}


def calibration_sample(rollouts: list[dict], items: dict, n: int, share: set[str] | None = None,
                       salt: str = "calibration") -> list[dict]:
    """n judgeable rollouts, spread evenly over domains, proportionally over dimensions, taken
    from the items of `share` (the agent's calibration share; None: every item). Only when the
    share has fewer than n judgeable rollouts is the sample topped up from the other items, which
    another calibration agent may also have: the agents' items are distinct where the pool allows."""
    rows = [{**r, "domain": items[r["item_id"]]["domain"], "dimension": items[r["item_id"]]["dimension"]}
            for r in judgeable(rollouts)]
    mine = [r for r in rows if share is None or r["item_id"] in share]
    chosen = {r["item_id"] for r in stratified_sample(mine, n, "domain", "dimension", "item_id", salt)}
    if len(chosen) < n:
        rest = [r for r in rows if r["item_id"] not in chosen]
        chosen |= {r["item_id"] for r in stratified_sample(rest, n - len(chosen), "domain", "dimension", "item_id",
                                                           salt)}
    return [r for r in rollouts if r["item_id"] in chosen]


def agent_sample(rollouts, items, settings: dict, agent: str) -> list[dict]:
    """The agent's calibration sample (the five-judge panel's and the repeats'): settings
    `calibration_items` and `calibration_agents`."""
    share = calibration_share(items, settings["calibration_agents"], agent)
    return calibration_sample(rollouts, items, settings["calibration_items"], share)


def _members(entries: list[dict]) -> dict:
    return {ep.name: ep for ep in endpoints(entries)}


def five_judge(rollouts, items, settings: dict, agent, stage) -> list[dict]:
    """settings: `panel` (the validation judges' model entries), `calibration_items`,
    `calibration_agents`. The panel labels by plurality, and its plurality action type is the one
    its safety judges see (one rule for both)."""
    sample = agent_sample(rollouts, items, settings, agent)
    by_judge = judge_panel(sample, items, _members(settings["panel"]), load_prompts(), stage, rule="plurality")
    labels = final_labels(sample, by_judge, rule="plurality")
    return [{**row, "panel": "five_judge", "rule": "plurality"} for row in labels]


def repeats(rollouts, items, settings: dict, agent, stage) -> list[dict]:
    """settings: `panel` (the panel judges' model entries), `calibration_items`, `calibration_agents`,
    `repeats`."""
    sample = agent_sample(rollouts, items, settings, agent)
    # Temperature 0 as in F.5; the sample index makes each run a distinct cached call.
    members = {name: dataclasses.replace(ep, params={**ep.params, "temperature": 0.0})
               for name, ep in _members(settings["panel"]).items()}
    runs = judge_panels(sample, items, members, load_prompts(), stage, samples=range(settings["repeats"]))
    rows = []
    for name in members:
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


def vendor_swap(rollouts, items, labels, settings: dict, agent, stage) -> list[dict]:
    """settings: `panel` (the panel judges' model entries, with their vendors), `replacement`
    (the replacement judge's entry), `agent_vendor`, `items` (the sample size)."""
    panel, (replacement,) = settings["panel"], settings["replacement"]
    same_vendor = [e["name"] for e in panel if e.get("vendor") == settings["agent_vendor"]]
    swapped = [replacement if e["name"] in same_vendor else e for e in panel]
    rows = [{**r, "pair_label": items[r["item_id"]]["pair_label"], "dimension": items[r["item_id"]]["dimension"]}
            for r in judgeable(rollouts)]
    chosen = {r["item_id"] for r in stratified_sample(rows, settings["items"], "pair_label", "dimension", "item_id",
                                                      "vendor-swap")}
    sample = [r for r in rollouts if r["item_id"] in chosen]
    # A judge may appear twice in the swapped panel (the replacement); keep one entry per position.
    members = {f"{i}:{ep.name}": ep for i, ep in enumerate(endpoints(swapped))}
    new_labels = {row["item_id"]: row for row in final_labels(sample, judge_panel(
        sample, items, members, load_prompts(), stage))}
    original = {row["item_id"]: row for row in labels}
    return [{"item_id": r["item_id"], "agent": agent, "replaced_judges": same_vendor,
             "replacement": replacement["name"],
             "original_safety": original[r["item_id"]]["action_safety"]["label"],
             "replaced_safety": new_labels[r["item_id"]]["action_safety"]["label"],
             "replaced_votes": new_labels[r["item_id"]]["action_safety"]["votes"]} for r in sample]


def reliability(kind, items_path, rollouts_path, labels_path, out_path, calls_path, llm, settings: dict, agent,
        threads=None, progress=True) -> dict:
    """reliability stage for one agent: `settings` holds exactly what the kind uses (see each)."""
    items = items_by_id(items_path)
    rollouts = read_jsonl(rollouts_path)
    with StageRun(f"reliability:{kind}:{agent}", llm, calls_path, threads, progress) as stage:
        if kind == "five_judge":
            rows = five_judge(rollouts, items, settings, agent, stage)
        elif kind == "repeats":
            rows = repeats(rollouts, items, settings, agent, stage)
        elif kind == "vendor_swap":
            rows = vendor_swap(rollouts, items, read_jsonl(labels_path), settings, agent, stage)
        else:
            raise ValueError(f"unknown reliability run {kind!r} (five_judge, repeats, vendor_swap)")
        stage.write(out_path, rows, ("item_id", "judge") if kind == "repeats" else "item_id")
    return {"rows": len(rows)}


# Its requests depend on samples drawn inside the job, so the forecast estimates them (requests=None).
model_stage(rule="reliability", role="judges", prompts=tuple(JUDGE_PROMPTS.values()), wildcards=("kind", "agent"),
            units="each sampled calibration item of an agent, per panel member and axis",
            output="results/reliability/{kind}/{agent}.jsonl", calls="results/calls/reliability/{kind}/{agent}.jsonl",
            groups=tuple(f"reliability:{kind}" for kind in RELIABILITY_KINDS), output_tokens=150)
