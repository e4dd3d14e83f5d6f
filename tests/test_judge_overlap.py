"""A judge panel in one job (the reliability runs) sends each phase's requests of every member
in one concurrent batch: the same rows and call log as judging member by member, in about a
third of the wall time for three judges."""

import pytest
import json
import time
import zlib

from aura_eval.evaluate.judging import (detection_type_rows, judge_panel, judge_panels, safety_rows, load_prompts,
                               panel_action_types)
from aura_eval.util.jsonl import read_jsonl
from aura_eval.llm import Endpoint
from aura_eval.stage_runner import StageRun
from tests import timing
from tests.stub_server import schema_instance

# panels through the model client (litellm) against a stub with latency
pytestmark = pytest.mark.suite

LATENCY_S = 1.0
# Fields that differ between two runs of the same calls (clock times, latencies).
VOLATILE = {"called_at", "first_latency_s", "latency_s"}


def varied_answer(body, headers=None) -> str:
    """A valid answer whose labels depend on the judge and the prompt, so judges disagree and
    the panel's action type (phase 2's input) is not the same everywhere."""
    schema = body["response_format"]["json_schema"]["schema"]
    answer = schema_instance(schema)
    seed = zlib.crc32((body["model"] + body["messages"][-1]["content"]).encode())
    for name, sub in schema.get("properties", {}).items():
        if "enum" in sub:
            answer[name] = sub["enum"][seed % len(sub["enum"])]
    return json.dumps(answer)


def _items_and_rollouts():
    items, rollouts = {}, []
    for i in range(5):
        item_id = f"s{i}.at_trigger.RS{i + 1}"
        items[item_id] = {"item_id": item_id, "reference_rationale": f"rationale {i}",
                          "steps": [{"role": "user", "content": f"please do task {i}"},
                                    {"role": "agent", "thought": "ok", "action": f"tool_{i}()"}]}
        rollouts.append({"item_id": item_id, "status": "ok", "thought": f"thinking {i}" if i != 3 else None,
                         "action": f"do_{i}()"})
    rollouts[4]["status"] = "failed"  # not judged: 4 judgeable rollouts, 3 of them with a thought
    return items, rollouts


def sequential_panel(rollouts, items, members, prompts, stage, sample=0):
    """The panel judge by judge (how judge_panel ran before): the reference."""
    phase1 = {name: detection_type_rows(rollouts, items, ep, prompts, stage, name, sample)
              for name, ep in members.items()}
    types = panel_action_types(phase1)
    return {name: safety_rows(phase1[name], types, rollouts, items, ep, prompts, stage, sample)
            for name, ep in members.items()}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _run(panel, stub, tmp_path, name):
    stub.state.max_in_flight = 0
    llm = {"cache": str(tmp_path / f"{name}.sqlite"), "concurrency": {"default": 64}, "max_retries": 1,
           "backoff_s": 0.01, "timeout_s": 30}
    members = {f"j{k}": Endpoint(name=f"j{k}", model=f"openai/judge{k}", params={"temperature": 0.0},
                                 api_base=stub.api_base) for k in range(3)}
    items, rollouts = _items_and_rollouts()
    start = time.perf_counter()
    with StageRun("reliability:five_judge:a", llm, tmp_path / f"{name}.jsonl", progress=False) as stage:
        rows = panel(rollouts, items, members, load_prompts(), stage)
    return rows, read_jsonl(tmp_path / f"{name}.jsonl"), time.perf_counter() - start, stub.state.max_in_flight


@pytest.mark.e2e  # a wall-time comparison of seconds: the slower tier (make test stays within 5 minutes)
@pytest.mark.serial
def test_panel_phases_overlap_across_judges_with_the_same_rows_and_call_log(stub, tmp_path):
    stub.state.latency_s = LATENCY_S
    stub.state.responder = varied_answer
    seq_rows, seq_calls, seq_s, seq_peak = _run(sequential_panel, stub, tmp_path, "sequential")
    rows, calls, wall_s, peak = _run(judge_panel, stub, tmp_path, "overlapped")
    # 4 judgeable rollouts: phase 1 sends 3 detection + 4 type requests per judge, phase 2 4 safety.
    assert len(stub.state.requests) == 2 * 3 * (7 + 4) and len(calls) == 33
    # Member by member, never more than one judge's batch in flight; overlapped, more (up to
    # 3 x 7: how many depends on how fast litellm sends them on this machine).
    assert seq_peak == 7 and 7 < peak <= 3 * 7
    assert _stable(rows) == _stable(seq_rows)
    assert _stable(calls) == _stable(seq_calls)
    labels = {row["action_type"]["label"] for judge_rows in rows.values() for row in judge_rows}
    assert len(labels) > 1  # the judges' answers differ, so the comparison means something
    assert {row["action_safety"]["given_action_type"] for row in rows["j0"]} > {None}  # phase 2 saw panel types
    # Sequential: 6 batches (3 judges x 2 phases) of one latency each; overlapped: 2 (measured here:
    # 11.7 s and 4.3 s). The same requests' CPU time is spent in both; overlapping removes 4 latencies.
    assert 6 * LATENCY_S <= seq_s and 2 * LATENCY_S <= wall_s
    assert seq_s - wall_s >= 4 * LATENCY_S - timing.WAKE_S


def test_repeated_panels_in_one_batch_per_phase_equal_panel_after_panel(stub, tmp_path):
    """The repeats run: every sample index's panel in the same two batches."""
    stub.state.responder = varied_answer
    samples = (0, 1, 2)

    def one_by_one(rollouts, items, members, prompts, stage):
        return [sequential_panel(rollouts, items, members, prompts, stage, k) for k in samples]

    def together(rollouts, items, members, prompts, stage):
        return judge_panels(rollouts, items, members, prompts, stage, samples)

    seq_rows, seq_calls, _, _ = _run(one_by_one, stub, tmp_path, "one_by_one")
    sent = len(stub.state.requests)
    rows, calls, _, _ = _run(together, stub, tmp_path, "together")
    assert sent == len(stub.state.requests) - sent == 3 * 33 and len(calls) == 3 * 33
    assert [r["j1"][0]["sample"] for r in rows] == [0, 1, 2]
    assert _stable(rows) == _stable(seq_rows) and _stable(calls) == _stable(seq_calls)
