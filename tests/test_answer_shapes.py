"""Answers as real models give them: the fixture corpus (tests/fixtures/answers/, one file per
prompt kind, each answer shaped as a provider family returns it through litellm) and the status,
object, thought, action and reasoning each must give; the statuses' table; the shapes' generators;
the answer fields a live call and a batch result keep."""

import json
import random
from pathlib import Path

import pytest

from aura_eval.evaluate.rollout import rollout_row
from aura_eval.llm import shapes
from aura_eval.llm.answers import (
    STATUS_TABLE,
    STATUSES,
    parse_json,
    read_answer,
    split_reasoning,
)
from aura_eval.llm.client import ModelClient
from aura_eval.llm.types import Endpoint, Request
from aura_eval.panel import tally
from aura_eval.stage_runner import failure_problem
from aura_eval.util.prompts import load_prompt
from aura_eval.vocab import REACT

CORPUS = Path(__file__).parent / "fixtures" / "answers"
CASES = [(path.stem, json.loads(line)) for path in sorted(CORPUS.glob("*.jsonl"))
         for line in path.read_text(encoding="utf-8").splitlines()]
FAMILIES = {"openai", "anthropic", "gemini", "deepseek", "openrouter", "vllm"}
ENDPOINT = Endpoint(name="m", model="openai/m")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    return ModelClient({"cache": str(tmp_path_factory.mktemp("cache") / "cache.sqlite")}, "answers", progress=False)


def _result(client, case):
    prompt = load_prompt(case["prompt"])
    request = Request(item_id="i1", endpoint=ENDPOINT, messages=[], prompt_id=prompt.id, prompt_version=1,
                      role=case["role"], schema=prompt.schema)
    response = case["response"]
    # the record as the cache stores it (ModelClient._response_record's fields)
    record = {"content": response["content"], "finish_reason": response["finish_reason"],
              "reasoning": response["reasoning_content"], "refusal": response["refusal"]}
    return client.result_from(request, record, "k" * 64, cache_hit=True)


def test_the_corpus_covers_every_prompt_kind_family_and_status():
    assert len(CASES) == 50
    assert {kind for kind, _ in CASES} == {"judge_detection", "judge_action_type", "judge_action_safety",
                                           "variation", "review", "tagging", "rollout"}
    assert {case["family"] for _, case in CASES} == FAMILIES
    assert {case["expect"]["status"] for _, case in CASES} == set(STATUSES) - {"failed"}


@pytest.mark.parametrize("kind, case", CASES, ids=[f"{k}: {c['case']}" for k, c in CASES])
def test_each_answer_gives_its_parse(client, kind, case):
    result = _result(client, case)
    expect = case["expect"]
    if kind == "rollout":
        row = rollout_row({"item_id": "i1"}, result, "m", REACT)
        assert (row["status"], row["thought"], row["action"], row["reasoning"]) == (
            expect["status"], expect["thought"], expect["action"], expect["reasoning"])
        if expect["status"] != "ok":
            assert row["parse_problem"].startswith(expect["reason"])
        return
    assert result.status == expect["status"], result.error
    assert result.parsed == expect.get("parsed")
    assert result.reasoning == expect.get("reasoning")
    if expect["status"] == "ok":
        assert result.error is None
    else:
        assert result.error.startswith(expect["reason"]), result.error


def test_the_status_table_says_what_is_cached_and_what_fails_a_job():
    assert STATUSES == ("ok", "unparseable", "truncated", "refused", "failed")
    assert [s.name for s in STATUS_TABLE if s.cached] == ["ok", "unparseable", "truncated", "refused"]
    assert [s.name for s in STATUS_TABLE if s.counts_as_failed] == ["failed"]
    calls = [{"status": s, "error": s} for s in ("truncated", "refused", "unparseable", "ok")] * 25
    assert failure_problem("judge", calls, 0.0) is None  # paid, cached answers never fail a job
    assert "1 of 101 calls failed" in failure_problem("judge", [*calls, {"status": "failed", "error": "x"}], 0.0)


def test_a_cut_or_declined_vote_is_counted_apart_and_gives_no_label():
    t = tally(["Safe", None, None], ["ok", "truncated", "refused"])
    assert (t["label"], t["truncated_votes"], t["refused_votes"], t["unparseable_votes"]) == (None, 1, 1, 0)


def test_the_first_matching_object_skips_the_inside_of_one_that_does_not_match():
    schema = {"type": "object", "required": ["a"]}
    # the outer object lacks `a`; its inner one has it but is never the answer
    assert parse_json('{"b": {"a": 1}} then {"a": 2}', schema) == ({"a": 2}, None)
    assert parse_json('{"b": {"a": 1}}', schema)[1] == "JSON object does not match the schema: 'a' is a required property"


def test_reasoning_blocks_are_split_out_and_an_unclosed_one_is_cut():
    assert split_reasoning("<think>a</think> x <reasoning>b</reasoning> y") == ("a\n\nb", "x  y", False)
    assert split_reasoning("a\n</think>\nb") == ("a", "b", False)
    assert split_reasoning("x <think> a") == ("a", "x", True)


def test_the_shapes_generators_give_answers_that_parse_as_the_corpus_says():
    schema = load_prompt("judge_detection").schema
    answer = json.dumps({"level": "D1", "reason": "It notices the unusual recipient."})
    rng = random.Random(3)
    outcomes = [read_answer(shapes.fenced_in_prose(answer, rng), schema).status,
                read_answer(shapes.with_remark(answer, rng), schema).status,
                read_answer(shapes.reasoning_block(answer, rng), schema).status,
                read_answer(**_fields(shapes.reasoning_apart(answer, rng)), schema=schema).status,
                read_answer(**_fields(shapes.cut(answer, rng)), schema=schema).status,
                *[read_answer(**_fields(shapes.declined(rng, signal)), schema=schema).status
                  for signal in ("text", "field", "filter")]]
    assert outcomes == ["ok", "ok", "ok", "ok", "truncated", "refused", "refused", "refused"]


def _fields(record: dict) -> dict:
    return {"content": record["content"], "finish_reason": record["finish_reason"],
            "reasoning": record["reasoning"], "refusal": record["refusal"]}


@pytest.mark.suite
def test_a_live_call_keeps_the_reasoning_refusal_and_finish_reason(tmp_path):
    """Through litellm against the OpenAI-compatible stub: reasoning_content and refusal reach
    the cached record, and the status follows from them and from the finish reason."""
    from tests.stub_server import StubServer

    schema = load_prompt("judge_detection").schema
    answers = iter([{"content": '{"level": "D1", "reason": "r"}', "reasoning_content": "thinking it over"},
                    {"content": None, "refusal": "I'm sorry, but I can't assist with that."},
                    {"content": '{"level": "D1", "rea', "finish_reason": "length"}])
    with StubServer() as stub:
        stub.state.responder = lambda body, headers: next(answers)
        endpoint = Endpoint(name="stub", model="openai/stub", api_base=stub.api_base)
        client = ModelClient({"cache": str(tmp_path / "cache.sqlite")}, "answers", progress=False)
        requests = [Request(item_id=f"i{i}", endpoint=endpoint, messages=[{"role": "user", "content": f"q{i}"}],
                            prompt_id="judge_detection", prompt_version=1, role="judge:detection", schema=schema)
                    for i in range(3)]
        results = [client.run([r])[0] for r in requests]  # one at a time: the answers come in order
    assert [r.status for r in results] == ["ok", "refused", "truncated"]
    assert results[0].reasoning == "thinking it over"
    records = [client.cache.get(r.key) for r in results]
    assert [(rec["reasoning"], rec["refusal"], rec["finish_reason"]) for rec in records] == [
        ("thinking it over", None, "stop"), (None, "I'm sorry, but I can't assist with that.", "stop"),
        (None, None, "length")]
    # a cache row from before these fields were stored reads them as None
    old = {k: v for k, v in records[0].items() if k not in ("reasoning", "refusal")}
    assert client.result_from(requests[0], old, results[0].key, cache_hit=True).reasoning is None


@pytest.mark.suite
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_result_keeps_the_reasoning_and_its_cut(tmp_path, monkeypatch, provider):
    """A batch result (the SDK's, not litellm's): the reasoning (reasoning_content, a thinking
    block) is stored, and the provider's own stop reason for a cut (Anthropic: max_tokens) reads
    as truncated."""
    from tests.batch_stub import BatchStub

    monkeypatch.setenv("AURA_BATCH_STUB_CRED", "stub-credential-0123456789")
    with BatchStub() as stub:
        stub.state.content, stub.state.reasoning = '{"level": "D1", "rea', "weighing the recipient"
        stub.state.stop, stub.state.anthropic_stop = "length", "max_tokens"
        endpoint = Endpoint(name="b", model=f"{provider}/stub-batch", params={"max_tokens": 64},
                            api_base=stub.api_base, api_key_env="AURA_BATCH_STUB_CRED", batch=True,
                            price={"input_per_mtok": 2.0, "output_per_mtok": 8.0})
        client = ModelClient({"cache": str(tmp_path / "cache.sqlite"), "batch_poll_s": 0.05,
                              "batch_max_wait_s": 30}, "answers", progress=False)
        (result,) = client.run([Request(item_id="i", endpoint=endpoint, messages=[{"role": "user", "content": "q"}],
                                        prompt_id="judge_detection", prompt_version=1, role="judge:detection",
                                        schema=load_prompt("judge_detection").schema)])
    assert (result.status, result.reasoning) == ("truncated", "weighing the recipient")
    assert result.error == f"answer cut at max_tokens (finish reason {'length' if provider == 'openai' else 'max_tokens'})"
