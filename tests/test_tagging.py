"""Tag checks and truncation (paper §4.2, H.1)."""

import jsonschema
import pytest

from aura_eval.llm import Endpoint, Result, Request
from aura_eval.util.prompts import load_prompt
from aura_eval.construct.tagging import check_tag, render_steps, tag_row, tag_schema, truncate

U, A, E = "user", "agent", "environment"


def make_seed(roles, contents=None):
    steps = []
    for i, role in enumerate(roles):
        if role == A:
            steps.append({"index": i, "turn": 0, "role": A, "thought": f"think {i}", "action": f"Tool{i}: {{}}"})
        else:
            text = (contents or {}).get(i, f"{role} text {i}")
            steps.append({"index": i, "turn": 0, "role": role, "content": text})
    return {"seed_id": "web-001", "domain": "Web", "label": "unsafe", "profile": "p", "risk_description": "r",
            "n_steps": len(steps), "steps": steps}


SEED = make_seed([U, A, E, A, E, A, E], contents={6: None})


@pytest.mark.parametrize("r, e, problem", [
    (0, 1, None), (2, 3, None), (4, 5, None),
    (1, 3, "is an agent step"),
    (6, None, "is an empty environment step"),
    (2, 1, "does not come after"),
    (2, 4, "is a environment step"),
    (0, None, "agent step 1 follows"),
    (9, 1, "is not a step"),
    (0, 12, "is not a step"),
    (None, 1, "is not a step"),
])
def test_check_tag(r, e, problem):
    result = check_tag(SEED, r, e)
    assert (result is None) if problem is None else (problem in result)


def test_e_may_be_none_only_when_no_agent_step_follows():
    seed = make_seed([U, A, E, U])
    assert check_tag(seed, 3, None) is None


def _tag(r, e):
    return {"valid": check_tag(SEED, r, e) is None, "risk_trigger": r, "execution_point": e}


def test_truncate_at_trigger_and_pre_execution():
    prefixes = truncate(SEED, _tag(0, 3))
    assert [p["decision_point"] for p in prefixes] == ["at_trigger", "pre_execution"]
    assert [p["prefix_id"] for p in prefixes] == ["web-001.at_trigger", "web-001.pre_execution"]
    assert [len(p["steps"]) for p in prefixes] == [1, 3]
    assert prefixes[1]["steps"] == SEED["steps"][:3]  # kept exactly


def test_no_pre_execution_prefix_when_it_equals_the_trigger():
    assert [p["decision_point"] for p in truncate(SEED, _tag(2, 3))] == ["at_trigger"]
    assert truncate(SEED, _tag(2, 1)) == []  # invalid tag: no prefix


def test_schema_allows_only_valid_tags():
    schema = tag_schema(load_prompt("p1_step_tagging"), SEED)
    jsonschema.validate({"risk_trigger": 0, "execution_point": 5, "reason": "x"}, schema)
    for bad in ({"risk_trigger": 2, "execution_point": 1, "reason": "x"},
                {"risk_trigger": 1, "execution_point": 3, "reason": "x"},
                {"risk_trigger": 6, "execution_point": None, "reason": "x"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_tag_row_records_unparseable_and_invalid():
    req = Request(item_id="web-001", endpoint=Endpoint("m", "aura_local/x"), messages=[], prompt_id="p1_step_tagging",
                  prompt_version=1, role="tagger")
    bad = tag_row(SEED, Result(request=req, status="unparseable", content="{oops", error="invalid JSON"))
    assert not bad["valid"] and bad["invalid_reason"] == "no tag: the response was unparseable"
    assert bad["raw_response"] == "{oops" and bad["prompt_version"] == 1
    wrong = tag_row(SEED, Result(request=req, status="ok", parsed={"risk_trigger": 2, "execution_point": 1,
                                                                      "reason": "x"}))
    assert not wrong["valid"] and "does not come after" in wrong["invalid_reason"]


def test_render_steps_numbers_every_step_and_keeps_text():
    text = render_steps(SEED["steps"])
    assert text.splitlines()[0] == "[0] USER: user text 0"
    assert "[3] AGENT ACTION: Tool3: {}" in text and "[6] ENVIRONMENT: (empty)" in text
