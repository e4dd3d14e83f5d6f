"""Rollouts, judges and voting (paper §5, F)."""

import pytest

from aura_eval.evaluate import rollout
from aura_eval import vocab
from aura_eval.construct.release import instruction
from aura_eval.evaluate.action_only import subset_items
from aura_eval.evaluate.judging import final_labels, panel_action_types
from aura_eval.llm import Endpoint
from aura_eval.util.prompts import load_prompt
from aura_eval.construct.seeds import load_seeds
from aura_eval.util.stats import consensus, vote

SENTINELS = ("RATIONALE-SENTINEL", "SKETCH-SENTINEL", "EVIDENCE-SENTINEL", "EXPLANATION-SENTINEL", "No-Safe-Path", "Safe-Path", "NSP", "RS5", "pair_label",
             "reference_rationale")


@pytest.fixture(scope="module")
def fixture_items(rjudge_dir):
    """Every seed's full trajectory as an item, its construction fields set to sentinels."""
    items = []
    for seed in load_seeds(rjudge_dir):
        items.append({"item_id": f"{seed['seed_id']}.at_trigger.RS5", "seed_id": seed["seed_id"],
                      "domain": seed["domain"], "decision_point": "at_trigger", "dimension": "RS5",
                      "pair_label": "NSP", "pair_id": "NSP-pair", "counterpart_id": None, "profile": seed["profile"],
                      "instruction": instruction(seed["steps"]), "steps": seed["steps"],
                      "reference_rationale": "RATIONALE-SENTINEL", "evidence": "EVIDENCE-SENTINEL",
                      "safe_action_sketches": ["SKETCH-SENTINEL"], "unsafe_explanation": "EXPLANATION-SENTINEL",
                      "provenance": {"prefix_id": f"{seed['seed_id']}.at_trigger"}})
    return items


@pytest.mark.parametrize("prompt_id", sorted(set(vocab.AGENT_PROMPTS.values())))
def test_agent_prompt_never_contains_construction_fields(fixture_items, prompt_id):
    prompt = load_prompt(prompt_id)
    endpoint = Endpoint(name="a", model="openai/x")
    requests = [rollout.rollout_request(item, endpoint, prompt, "a") for item in fixture_items]
    assert len(requests) == 157
    for item, request in zip(fixture_items, requests):
        text = "\n".join(m["content"] for m in request.messages)
        for sentinel in SENTINELS:
            if sentinel not in item["profile"] + str(item["steps"]):
                assert sentinel not in text, (item["item_id"], sentinel)
        # ...and the whole prefix is there, text kept exactly.
        for step in item["steps"]:
            for field in ("content", "thought", "action"):
                if step.get(field):
                    assert step[field] in text


@pytest.mark.parametrize("text, fmt, expected", [
    ("[Agent_Thought]: check first\n[Agent_Action]: ListFiles: {}", "react", ("check first", "ListFiles: {}", None)),
    ("Agent Thought: x\nAgent_Action: y", "react", ("x", "y", None)),
    ("[Agent_Action]: Delete: {}", "action_only", (None, "Delete: {}", None)),
    ("[Agent_Action]: Delete: {}", "react", (None, None, "no [Agent_Thought] marker before the action")),
    ("I will delete it.", "react", (None, None, "no [Agent_Action] marker")),
    ("[Agent_Thought]: hmm\n[Agent_Action]:   ", "react", (None, None, "empty action")),
    ("", "react", (None, None, "empty output")),
])
def test_split_output(text, fmt, expected):
    assert rollout.split_output(text, fmt) == expected


def test_run_names_round_trip():
    assert vocab.parse_run(vocab.run_name("gpt-5.4", "action_only")) == ("gpt-5.4", "action_only")
    assert vocab.parse_run("gpt-5.4") == ("gpt-5.4", "react")


@pytest.mark.parametrize("labels, rule, expected", [
    (["A0", "A0", "A3"], "majority", "A0"),
    (["A0", "A3", "A4"], "majority", None),
    (["A0", None, None], "majority", None),          # unparseable votes still count as judges
    (["A0", "A0", None], "majority", "A0"),
    (["Safe", "Unsafe"], "majority", None),
    (["D1", "D1", "D2", "D3", "D0"], "plurality", "D1"),
    (["D1", "D1", "D2", "D2", "D0"], "plurality", None),
    (["D1", "D1", "D2", "D2", "D2"], "majority", "D2"),
    ([None, None, None], "majority", None),
    ([], "plurality", None),
])
def test_vote(labels, rule, expected):
    assert vote(labels, rule) == expected


def test_vote_rejects_unknown_rule():
    with pytest.raises(ValueError, match="majority"):
        vote(["A0"], "unanimity")


@pytest.mark.parametrize("labels, stratum", [
    (["Safe"] * 3, "unanimous"), (["Safe", "Safe", "Unsafe"], "majority"), (["Safe", "Safe", None], "majority"),
    (["A0", "A1", "A2"], "tied"), ([None] * 3, "tied"), (["D1", "D1", "D2", "D2", "D0"], "tied"),
])
def test_consensus(labels, stratum):
    assert consensus(labels) == stratum


def _row(item_id, det, typ, safe):
    verdict = lambda label: {"label": label, "status": "ok" if label else "unparseable"}  # noqa: E731
    return {"item_id": item_id, "detection": verdict(det), "action_type": verdict(typ),
            "action_safety": verdict(safe)}


def test_final_labels_with_ties_and_unparseable_votes():
    rollouts = [{"item_id": i, "agent": "m", "format": "react", "status": "ok"} for i in ("a", "b")]
    rollouts.append({"item_id": "c", "agent": "m", "format": "react", "status": "unparseable"})
    by_judge = {
        "j1": [_row("a", "D2", "A0", "Unsafe"), _row("b", "D0", "A1", "Safe")],
        "j2": [_row("a", "D2", "A0", "Unsafe"), _row("b", None, "A2", "Safe")],
        "j3": [_row("a", "D3", "A0", "Unsafe"), _row("b", "D1", "A3", None)],
    }
    assert panel_action_types(by_judge) == {"a": "A0", "b": None}
    a, b, c = final_labels(rollouts, by_judge)
    assert a["detection"] == {"label": "D2", "votes": ["D2", "D2", "D3"], "stratum": "majority",
                              "unparseable_votes": 0, "truncated_votes": 0, "refused_votes": 0, "failed_votes": 0}
    assert a["action_type"]["stratum"] == "unanimous" and a["action_safety"]["label"] == "Unsafe"
    assert b["detection"]["label"] is None and b["detection"]["unparseable_votes"] == 1
    assert b["action_type"] == {"label": None, "votes": ["A1", "A2", "A3"], "stratum": "tied",
                                "unparseable_votes": 0, "truncated_votes": 0, "refused_votes": 0, "failed_votes": 0}
    assert b["action_safety"]["label"] == "Safe" and b["action_safety"]["stratum"] == "majority"
    assert c["rollout_status"] == "unparseable" and c["action_safety"]["label"] is None


def test_a_failed_judge_call_is_not_an_unparseable_vote():
    rollouts = [{"item_id": "a", "agent": "m", "format": "react", "status": "ok"}]
    failed = {"label": None, "status": "failed"}
    by_judge = {"j1": [_row("a", "D2", "A0", "Safe")], "j2": [_row("a", "D2", "A0", "Safe")],
                "j3": [{**_row("a", "D2", "A0", "Safe"), "action_safety": failed}]}
    (a,) = final_labels(rollouts, by_judge)
    assert a["action_safety"] == {"label": "Safe", "votes": ["Safe", "Safe", None], "stratum": "majority",
                                  "unparseable_votes": 0, "truncated_votes": 0, "refused_votes": 0, "failed_votes": 1}


def test_action_only_subset_is_balanced_and_proportional():
    items = [{"item_id": f"{label}-{dim}-{i}", "pair_label": label, "dimension": dim}
             for label in ("NSP", "SP") for dim in ("original", "RS1", "RS2", "SD3")
             for i in range({"original": 40, "RS1": 20, "RS2": 20, "SD3": 20}[dim])]
    subset = subset_items(items, 150)
    assert len(subset) == 150
    assert sum(r["pair_label"] == "NSP" for r in subset) == 75
    nsp = [r for r in subset if r["pair_label"] == "NSP"]
    assert sum(r["dimension"] == "original" for r in nsp) in (30, 31)
    assert subset == subset_items(list(reversed(items)), 150)
