"""The three-axis judge panel (paper §5, Tables 5-7, F).

Each judge labels each rollout independently: detection D0-D3 from the thought
alone, action type A0-A5 from the action, then action safety (Safe/Unsafe) from
the action, the panel's action type (by the rule that labels the panel: the three-judge
panel's majority, the five-judge validation panel's plurality) and the reference risk rationale.
Per axis, a majority of the panel gives the final label; without one the item is
unresolved: kept and counted, left out of headline numbers.

Jobs: phase 1 (detection and type) and phase 2 (safety, which needs every judge's
type) run once per evaluated run × judge; labels once per run.
"""

from __future__ import annotations

from aura_eval.util.jsonl import read_jsonl, write_jsonl
from aura_eval.llm.types import Endpoint, Request, endpoints
from aura_eval.panel import answer, ballot, tally
from aura_eval.util.prompts import load_prompt
from aura_eval.evaluate.rollout import render_context
from aura_eval.stage_runner import StageRun
from aura_eval.stage_registry import model_stage
from aura_eval.util.stats import vote
from aura_eval.workflow.config import as_list
from aura_eval.vocab import AXES, JUDGE_PROMPTS, LABEL_FIELDS

NO_TYPE = "(the judge panel did not agree on a type)"


def _request(axis, rollout, item, endpoint: Endpoint, prompt, sample, action_type=None) -> Request:
    values = {"context": render_context(item)}
    if axis == "detection":
        values["thought"] = rollout["thought"]
    else:
        values["action"] = rollout["action"]
    if axis == "action_safety":
        values.update(rationale=item["reference_rationale"] or "(none given)", action_type=action_type or NO_TYPE)
    return Request(item_id=rollout["item_id"], endpoint=endpoint, messages=prompt.messages(**values),
                   prompt_id=prompt.id, prompt_version=prompt.version, role=f"judge:{axis}",
                   schema=prompt.schema, sample=sample)


def _verdict(axis, result) -> dict:
    return {"label": ballot(result, LABEL_FIELDS[axis]), "reason": answer(result).get("reason"),
            **result.provenance()}


def _not_applicable(why: str) -> dict:
    return {"label": None, "status": "not_applicable", "reason": why}


def judgeable(rollouts: list[dict]) -> list[dict]:
    """Rollouts the judges see: those that split into an action (and thought, for ReAct)."""
    return [r for r in rollouts if r["status"] == "ok"]


def _phase1_requests(rollouts, items, endpoint, prompts, sample) -> list[Request]:
    """One judge's phase-1 requests: detection (rollouts with a thought), then action type."""
    rollouts = judgeable(rollouts)
    requests = [_request("detection", r, items[r["item_id"]], endpoint, prompts["detection"], sample)
                for r in rollouts if r["thought"]]
    return requests + [_request("action_type", r, items[r["item_id"]], endpoint, prompts["action_type"], sample)
                       for r in rollouts]


def _phase1_rows(rollouts, results, judge, sample) -> list[dict]:
    """One judge's phase-1 rows from the results of its `_phase1_requests`, in that order."""
    rollouts = judgeable(rollouts)
    n_thought = sum(1 for r in rollouts if r["thought"])
    detection = {res.request.item_id: _verdict("detection", res) for res in results[:n_thought]}
    types = {res.request.item_id: _verdict("action_type", res) for res in results[n_thought:]}
    return [{"item_id": r["item_id"], "judge": judge, "sample": sample,
             "detection": detection.get(r["item_id"], _not_applicable("no thought in this format")),
             "action_type": types[r["item_id"]]} for r in rollouts]


def detection_type_rows(rollouts, items, endpoint, prompts, stage, judge, sample=0) -> list[dict]:
    """Phase 1 for one judge: detection (ReAct rollouts only) and action type."""
    results = stage.results(_phase1_requests(rollouts, items, endpoint, prompts, sample))
    return _phase1_rows(rollouts, results, judge, sample)


def panel_action_types(phase1_by_judge: dict[str, list[dict]], rule: str = "majority") -> dict[str, str | None]:
    """The panel's action type of every item under `rule`, the rule that labels the panel's items
    (None where it gives none): the safety judges see the type the panel records."""
    votes: dict[str, list] = {}
    for rows in phase1_by_judge.values():
        for row in rows:
            votes.setdefault(row["item_id"], []).append(row["action_type"]["label"])
    return {item_id: vote(labels, rule) for item_id, labels in votes.items()}


def _phase2_requests(phase1_rows, panel_types, rollouts, items, endpoint, prompts, sample) -> list[Request]:
    by_id = {r["item_id"]: r for r in rollouts}
    return [_request("action_safety", by_id[row["item_id"]], items[row["item_id"]], endpoint,
                     prompts["action_safety"], sample, action_type=panel_types.get(row["item_id"]))
            for row in phase1_rows]


def _phase2_rows(phase1_rows, panel_types, results) -> list[dict]:
    out = []
    for row, result in zip(phase1_rows, results):
        verdict = _verdict("action_safety", result)
        verdict["given_action_type"] = panel_types.get(row["item_id"])
        out.append({**row, "action_safety": verdict})
    return out


def safety_rows(phase1_rows, panel_types, rollouts, items, endpoint, prompts, stage, sample=0) -> list[dict]:
    """Phase 2 for one judge: action safety; returns the judge's rows with all three axes."""
    results = stage.results(_phase2_requests(phase1_rows, panel_types, rollouts, items, endpoint, prompts, sample))
    return _phase2_rows(phase1_rows, panel_types, results)


def _batch(stage, asked: dict) -> dict:
    """Every list of requests in `asked` sent as one batch; the results split back per key."""
    results = stage.results([r for requests in asked.values() for r in requests])
    out, start = {}, 0
    for key, requests in asked.items():
        out[key], start = results[start:start + len(requests)], start + len(requests)
    return out


def panel_steps(rollouts, items, members: dict[str, Endpoint], prompts, samples=(0,), rule: str = "majority"):
    """Both phases of a whole panel as a generator, so that any caller can send the requests (the
    model module's batch, or inspect_ai's model roles): it yields `{(member, sample): requests}`
    and is sent `{(member, sample): results}` in the same order, once per phase; it returns
    `{member: rows}` per sample. The safety judges see the panel's action type under `rule`."""
    runs = [(name, sample) for sample in samples for name in members]
    asked = {(name, k): _phase1_requests(rollouts, items, members[name], prompts, k) for name, k in runs}
    answers = yield asked
    phase1 = {(name, k): _phase1_rows(rollouts, answers[(name, k)], name, k) for name, k in runs}
    types = {k: panel_action_types({name: phase1[(name, k)] for name in members}, rule) for k in samples}
    asked = {(name, k): _phase2_requests(phase1[(name, k)], types[k], rollouts, items, members[name], prompts, k)
             for name, k in runs}
    answers = yield asked
    return [{name: _phase2_rows(phase1[(name, k)], types[k], answers[(name, k)]) for name in members}
            for k in samples]


def judge_panels(rollouts, items, members: dict[str, Endpoint], prompts, stage, samples=(0,),
                 rule: str = "majority") -> list[dict]:
    """Both phases for a whole panel in one job, once per sample index (the reliability runs; the
    repeats ask several): `{member: rows}` per sample (`panel_steps`). Each phase sends every
    member's requests of every sample in one batch, so judges on different providers overlap; the
    rows and the call log are those of judging sample by sample, member by member (a request two
    members share is sent once)."""
    steps = panel_steps(rollouts, items, members, prompts, samples, rule)
    asked = next(steps)
    while True:
        try:
            asked = steps.send(_batch(stage, asked))
        except StopIteration as done:
            return done.value


def judge_panel(rollouts, items, members: dict[str, Endpoint], prompts, stage, sample=0, rule="majority") -> dict:
    """`judge_panels` for one sample index: `{member: rows}`."""
    (rows,) = judge_panels(rollouts, items, members, prompts, stage, (sample,), rule)
    return rows


def final_labels(rollouts: list[dict], rows_by_judge: dict[str, list[dict]], rule: str = "majority") -> list[dict]:
    """Per rollout: each axis's votes (judge order), final label and consensus stratum, both under
    `rule` (`panel.tally`)."""
    judges = sorted(rows_by_judge)
    index = {(judge, row["item_id"]): row for judge in judges for row in rows_by_judge[judge]}
    labels = []
    for rollout in rollouts:
        row = {"item_id": rollout["item_id"], "agent": rollout["agent"], "format": rollout["format"],
               "rollout_status": rollout["status"], "judges": judges}
        for axis in AXES:
            verdicts = [index.get((judge, rollout["item_id"]), {}).get(axis) for judge in judges]
            applicable = rollout["status"] == "ok" and all(v and v["status"] != "not_applicable" for v in verdicts)
            votes = [v["label"] for v in verdicts] if applicable else []
            row[axis] = tally(votes, [v["status"] for v in verdicts] if applicable else [], rule)
        labels.append(row)
    return labels


def load_prompts() -> dict:
    return {axis: load_prompt(name) for axis, name in JUDGE_PROMPTS.items()}


def items_by_id(items_path) -> dict:
    return {item["item_id"]: item for item in read_jsonl(items_path)}


def judge_detection_type(items_path, rollouts_path, out_path, calls_path, llm, run, judge: list[dict], threads=None,
               progress=True) -> dict:
    """judge_detection_type stage: one judge (its model entry) on one run's rollouts."""
    (judge_endpoint,) = endpoints(judge)
    with StageRun(f"judge_detection_type:{run}:{judge_endpoint.name}", llm, calls_path, threads, progress) as stage:
        rows = detection_type_rows(read_jsonl(rollouts_path), items_by_id(items_path), judge_endpoint,
                                    load_prompts(), stage, judge_endpoint.name)
        stage.write(out_path, rows, "item_id")
    return {"rollouts judged": len(rows)}


def judge_safety(items_path, rollouts_path, phase1_paths: dict, out_path, calls_path, llm, run, judge: list[dict],
               threads=None, progress=True) -> dict:
    """judge_safety stage: one judge on one run, given every panel judge's action types."""
    phase1 = {path_judge: read_jsonl(path) for path_judge, path in phase1_paths.items()}
    (judge_endpoint,) = endpoints(judge)
    with StageRun(f"judge_safety:{run}:{judge_endpoint.name}", llm, calls_path, threads, progress) as stage:
        rows = safety_rows(phase1[judge_endpoint.name], panel_action_types(phase1), read_jsonl(rollouts_path),
                            items_by_id(items_path), judge_endpoint, load_prompts(), stage)
        stage.write(out_path, rows, "item_id")
    return {"rollouts judged": len(rows)}


def labels(rollouts_path, judgment_paths: dict, out_path) -> dict:
    rows = final_labels(read_jsonl(rollouts_path), {j: read_jsonl(p) for j, p in judgment_paths.items()})
    write_jsonl(out_path, rows, key="item_id")
    return {"rollouts": len(rows), "unresolved per axis": {axis: sum(r[axis]["label"] is None for r in rows)
                                                           for axis in AXES}}


# -- the registry entries (aura_eval.stage_registry) -------------------------------------------

def _judge_requests(axes: tuple[str, ...]):
    """The builder of one judge's requests on one run's judgeable rollouts, per axis (detection
    only where there is a thought). Safety carries the panel's action type: once every panel judge's
    phase 1 exists, the requests the job will send (the forecast keys them); before, as if the panel
    had agreed on A0 (the same prompt size)."""

    def requests(ctx) -> list[Request] | None:
        rollouts, dataset = ctx.read(f"results/rollouts/{ctx.job['run']}.jsonl"), ctx.read("dataset")
        if rollouts is None or dataset is None:
            return None
        items, prompts, (endpoint,) = {i["item_id"]: i for i in dataset}, load_prompts(), endpoints(ctx.models)
        if axes == ("action_safety",):
            phase1 = {j: ctx.read(f"results/judgments/{ctx.job['run']}/detection_type/{j}.jsonl")
                      for j in as_list(ctx.config["roles"]["judges"])}
            if all(rows is not None for rows in phase1.values()) and endpoint.name in phase1:
                return _phase2_requests(phase1[endpoint.name], panel_action_types(phase1), rollouts, items, endpoint,
                                        prompts, 0)
        extra = {"action_safety": {"action_type": "A0"}}
        return [_request(axis, r, items[r["item_id"]], endpoint, prompts[axis], 0, **extra.get(axis, {}))
                for axis in axes for r in judgeable(rollouts) if axis != "detection" or r["thought"]]

    return requests


model_stage(rule="judge_detection_type", role="judges", prompts=(JUDGE_PROMPTS["detection"], JUDGE_PROMPTS["action_type"]),
            wildcards=("run", "judge"), units="each judgeable rollout of a run, per judge: its detection and action type",
            output="results/judgments/{run}/detection_type/{judge}.jsonl",
            calls="results/calls/judge/{run}/detection_type/{judge}.jsonl", output_tokens=150,
            requests=_judge_requests(("detection", "action_type")))
model_stage(rule="judge_safety", role="judges", prompts=(JUDGE_PROMPTS["action_safety"],), wildcards=("run", "judge"),
            units="each judgeable rollout of a run, per judge: its action safety, given the panel's action type",
            output="results/judgments/{run}/{judge}.jsonl", calls="results/calls/judge/{run}/safety/{judge}.jsonl",
            output_tokens=150, requests=_judge_requests(("action_safety",)))
