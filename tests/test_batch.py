"""Batch mode (aura_eval.llm.batch) against the local batch stub of both providers (tests/batch_stub.py)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from aura_eval.llm import CacheMissError, Endpoint, Request
from aura_eval.llm.batch import batch_cost
from aura_eval.llm.client import ModelClient
from aura_eval.workflow.config import ConfigError, check_config
from tests import timing
from tests.batch_stub import REASONING, TOKENS_IN, TOKENS_OUT, BatchStub

# every test runs the model client (litellm) against the batch stub
pytestmark = pytest.mark.suite

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
KEY_ENV = "AURA_BATCH_STUB_CRED"
MODELS = {"openai": "openai/stub-batch", "anthropic": "anthropic/stub-batch", "gemini": "gemini/stub-batch"}
PROVIDERS = list(MODELS)
ENDED = {"openai": "completed", "anthropic": "ended", "gemini": "JOB_STATE_SUCCEEDED"}  # a batch's last state
SDK = {"openai": "openai", "anthropic": "anthropic", "gemini": "google-genai"}


@pytest.fixture
def batch_stub(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "stub-credential-0123456789")
    with BatchStub() as server:
        yield server


@pytest.fixture
def settings(llm_settings):
    return {**llm_settings, "batch_poll_s": 0.05, "batch_max_wait_s": 30}


def batch_requests(stub, provider, n, texts=None, price=None, model=None, params=None):
    endpoint = Endpoint(name=f"{provider}-batch", model=model or MODELS[provider],
                        params=params or {"temperature": 0.0, "max_tokens": 64}, api_base=stub.api_base,
                        api_key_env=KEY_ENV, batch=True,
                        price=price if price is not None else {"input_per_mtok": 2.0, "output_per_mtok": 8.0})
    texts = texts or [f"question {i}" for i in range(n)]
    return [Request(item_id=f"item-{i:02d}", endpoint=endpoint, prompt_id="p_test", prompt_version=3,
                    role="tester", schema=SCHEMA, messages=[{"role": "system", "content": "be brief"},
                                                            {"role": "user", "content": text}])
            for i, text in enumerate(texts)]


def batches_table(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT batch_id, provider, model, state, n_requests, ingested_at IS NOT NULL"
                          " FROM batches ORDER BY batch_id").fetchall()


# Half the entry's price (2 and 8 USD per million tokens) for 11 tokens in and 5 out.
HALF_PRICE = (TOKENS_IN * 2.0 + TOKENS_OUT * 8.0) / 2e6


@pytest.mark.parametrize("provider", PROVIDERS)
def test_submit_poll_complete_and_replay(batch_stub, settings, provider):
    batch_stub.state.polls_before_end = 2
    client = ModelClient(settings, "t", progress=False)
    results = client.run(batch_requests(batch_stub, provider, 5))
    assert [r.status for r in results] == ["ok"] * 5
    assert [r.parsed for r in results] == [{"answer": "yes"}] * 5
    assert len(batch_stub.state.submissions) == 1 and batch_stub.state.submissions[0][2] == 5
    (batch_id,) = batch_stub.state.batches
    # Two polls in progress, the third ended (Anthropic's SDK retrieves once more for the results_url).
    polls = 3 + (provider == "anthropic")
    assert batch_stub.state.retrievals[batch_id] == polls
    assert client.calls_made == 5 and [r.attempts for r in results] == [1] * 5
    assert [(r.tokens_in, r.tokens_out) for r in results] == [(TOKENS_IN, TOKENS_OUT)] * 5
    # the reasoning tokens apart where the vendor's batch result says them (Anthropic's does not)
    assert {r.tokens_reasoning for r in results} == {None if provider == "anthropic" else REASONING}
    assert [r.cost_usd for r in results] == [pytest.approx(HALF_PRICE)] * 5
    call = results[0].call
    assert call["params"] == {"max_tokens": 64, "temperature": 0.0} and call["litellm_version"] is None
    assert call["response_id"] == {"openai": f"chatcmpl-{batch_id}-0", "anthropic": f"msg_{batch_id}_0",
                                   "gemini": f"resp-{results[0].key[:12]}"}[provider]
    assert call["called_at"].endswith("Z") and call["response_model"] == "stub-batch"
    record = client.cache.get(results[0].key)
    assert record["provenance"]["batch_id"] == batch_id
    assert record["provenance"]["sdk_version"].startswith(SDK[provider] + " ")
    assert record["provenance"]["prompt"] == "p_test" and record["provenance"]["prompt_version"] == 3
    assert batches_table(settings["cache"]) == [(batch_id, provider, MODELS[provider], ENDED[provider], 5, 1)]
    assert "stub-credential-0123456789" not in json.dumps(record)

    replay = ModelClient({**settings, "replay": True}, "t", progress=False)
    again = replay.run(batch_requests(batch_stub, provider, 5))
    assert replay.calls_made == 0 and len(batch_stub.state.submissions) == 1
    assert batch_stub.state.retrievals[batch_id] == polls
    assert all(r.cache_hit for r in again)
    assert [r.provenance() for r in again] == [r.provenance() for r in results]
    with pytest.raises(CacheMissError):
        replay.run(batch_requests(batch_stub, provider, 1, texts=["never asked"]))
    assert len(batch_stub.state.submissions) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_hits_answered_first_and_only_misses_batched(batch_stub, settings, provider):
    ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, provider, 3))
    client = ModelClient(settings, "t", progress=False)
    texts = [f"question {i}" for i in range(3)] + ["new one", "new one"]  # a repeat is sent once
    results = client.run(batch_requests(batch_stub, provider, 5, texts=texts))
    assert [r.status for r in results] == ["ok"] * 5
    assert [r.cache_hit for r in results] == [True, True, True, False, True]
    assert [n for _, _, n in batch_stub.state.submissions] == [3, 1]
    assert client.calls_made == 1


def test_requests_beyond_the_provider_limit_go_in_several_batches(batch_stub, settings, monkeypatch):
    from aura_eval.llm.vendors.openai_batch import OpenAIBatch

    monkeypatch.setattr(OpenAIBatch, "max_requests", 2)
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, "openai", 5))
    assert [r.status for r in results] == ["ok"] * 5
    assert [n for _, _, n in batch_stub.state.submissions] == [2, 2, 1]
    assert [row[4:] for row in batches_table(settings["cache"])] == [(2, 1), (2, 1), (1, 1)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_partial_failure_is_recorded_and_resubmitted_by_a_rerun(batch_stub, settings, provider):
    texts = ["fine 0", "FAIL 1", "fine 2", "FAIL 3"]
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, provider, 4, texts=texts))
    assert [r.status for r in results] == ["ok", "failed", "ok", "failed"]
    expected = {"openai": "status 400: stub_refusal: stub refuses this request",
                "anthropic": "errored: invalid_request_error: stub refuses this request",
                "gemini": "error 400: stub refuses this request"}[provider]
    batch_id = batch_stub.state.submissions[0][1]
    assert results[1].error == f"batch {batch_id}: {expected}"
    with sqlite3.connect(settings["cache"]) as db:
        assert db.execute("SELECT COUNT(*) FROM misses WHERE reason = 'failed'").fetchone() == (2,)
        assert db.execute("SELECT outcome, COUNT(*) FROM batch_keys GROUP BY outcome ORDER BY outcome"
                          ).fetchall() == [("failed", 2), ("ok", 2)]
    batch_stub.state.fail_marker = None  # the provider answers them now
    client = ModelClient(settings, "t", progress=False)
    again = client.run(batch_requests(batch_stub, provider, 4, texts=texts))
    assert [r.status for r in again] == ["ok"] * 4
    assert [n for _, _, n in batch_stub.state.submissions] == [4, 2] and client.calls_made == 2


@pytest.mark.parametrize("provider, end, reason", [
    ("openai", "expired", "This request could not be executed before the completion window expired."),
    ("openai", "cancelled", ": cancelled"),
    ("openai", "failed", ": failed: no reason given"),
    ("anthropic", "expired", "expired: the batch ended before this request ran"),
    ("anthropic", "cancelled", "canceled: the batch ended before this request ran"),
    ("gemini", "expired", ": expired: the batch did not finish within the provider's window"),
    ("gemini", "cancelled", ": cancelled"),
    ("gemini", "failed", ": failed: no reason given"),
])
def test_expired_or_cancelled_batch_records_unanswered_items(batch_stub, settings, provider, end, reason):
    batch_stub.state.end_state, batch_stub.state.answered = end, 2
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, provider, 5))
    # The stub answers the first two requests it was sent (Gemini's go in key order).
    keys = [r.key for r in results]
    sent_first = sorted(keys)[:2] if provider == "gemini" else keys[:2]
    assert [r.status for r in results] == ["ok" if k in sent_first else "failed" for k in keys]
    batch_id = batch_stub.state.submissions[0][1]
    unanswered = [r for r in results if r.key not in sent_first]
    assert len(unanswered) == 3 and all(r.error.startswith(f"batch {batch_id}: ") for r in unanswered)
    assert all(r.error.endswith(reason) for r in unanswered)
    # The unanswered three are not cached: the next run sends them again, in a new batch.
    batch_stub.state.end_state = "completed"
    again = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, provider, 5))
    assert [r.status for r in again] == ["ok"] * 5
    assert [n for _, _, n in batch_stub.state.submissions] == [5, 3]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_wait_then_rerun_resumes_the_same_batch(batch_stub, settings, provider):
    batch_stub.state.polls_before_end = 10**6
    short = {**settings, "batch_max_wait_s": 0.3}
    results = ModelClient(short, "t", progress=False).run(batch_requests(batch_stub, provider, 3))
    (batch_id,) = batch_stub.state.batches
    assert [r.status for r in results] == ["failed"] * 3
    running = "JOB_STATE_RUNNING" if provider == "gemini" else "in_progress"
    assert results[0].error.startswith(f"batch {batch_id} still {running} after waiting ")
    assert results[0].error.endswith("s (llm.batch_max_wait_s); a rerun resumes polling it")
    polls = batch_stub.state.retrievals[batch_id]
    assert polls >= 2
    batch_stub.state.polls_before_end = polls  # the next retrieval finds it ended
    client = ModelClient(settings, "t", progress=False)
    again = client.run(batch_requests(batch_stub, provider, 3))
    assert [r.status for r in again] == ["ok"] * 3
    assert len(batch_stub.state.submissions) == 1 and client.calls_made == 0
    assert [r.attempts for r in again] == [0] * 3  # answered by the first job's submission
    assert batch_stub.state.retrievals[batch_id] == polls + 1 + (provider == "anthropic")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_unknown_to_the_provider_is_resubmitted(batch_stub, settings, provider):
    batch_stub.state.polls_before_end = 10**6
    ModelClient({**settings, "batch_max_wait_s": 0.1}, "t", progress=False).run(batch_requests(batch_stub, provider, 2))
    (lost,) = batch_stub.state.batches
    del batch_stub.state.batches[lost]  # deleted at the provider (or another account's)
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, provider, 2))
    assert [r.status for r in results] == ["failed"] * 2
    error = "ClientError: 404" if provider == "gemini" else "NotFoundError: "
    assert results[0].error.startswith(f"batch {lost}: not found at the provider ({error}")
    batch_stub.state.polls_before_end = 0
    client = ModelClient(settings, "t", progress=False)
    assert [r.status for r in client.run(batch_requests(batch_stub, provider, 2))] == ["ok"] * 2
    assert len(batch_stub.state.submissions) == 2 and client.calls_made == 2
    assert [row[3] for row in batches_table(settings["cache"])] == ["not_found", ENDED[provider]]


@pytest.mark.serial
@pytest.mark.parametrize("provider", ["openai", "gemini"])  # Google refuses a key with 400, not 401
def test_refused_key_while_polling_stops_waiting_and_keeps_the_batch(batch_stub, settings, monkeypatch, provider):
    batch_stub.state.polls_before_end = 10**6
    ModelClient({**settings, "batch_max_wait_s": 0.1}, "t", progress=False).run(batch_requests(batch_stub, provider, 2))
    (batch_id,) = batch_stub.state.batches
    monkeypatch.setenv(KEY_ENV, "a-revoked-credential")
    batch_stub.state.refused_key = "revoked-credential"
    start = time.monotonic()
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, provider, 2))
    # The first refused poll ends the wait: one poll and the SDK's few requests, never the 30 s of
    # llm.batch_max_wait_s (the slack stays far below it, so a wait that ran on would fail).
    assert time.monotonic() - start < settings["batch_poll_s"] + timing.CALLS_S < settings["batch_max_wait_s"]
    assert [r.status for r in results] == ["failed"] * 2
    error = "ClientError: 400" if provider == "gemini" else "AuthenticationError: "
    assert results[0].error.startswith(f"batch {batch_id} polling refused ({error}")
    assert [r.auth_error for r in results] == [True, True]  # the stage fails the job on it
    assert "revoked-credential" not in results[0].error
    running = "JOB_STATE_RUNNING" if provider == "gemini" else "in_progress"
    assert batches_table(settings["cache"])[0][3:] == (running, 2, 0)  # still open: a rerun resumes it


KILLED_JOB = """
import sys
from aura_eval.llm.client import ModelClient
from tests.test_batch import batch_requests

class Stub:
    api_base = sys.argv[1]

ModelClient({"cache": sys.argv[2], "replay": False, "concurrency": {"default": 8}, "max_retries": 0,
             "backoff_s": 0.01, "timeout_s": 5, "batch_poll_s": 0.05}, "t", progress=False).run(
    batch_requests(Stub, sys.argv[3], 4))
"""


@pytest.mark.e2e  # a killed process per provider (8-16 s each): the slower tier
@pytest.mark.parametrize("provider", PROVIDERS)
def test_killed_job_resumes_polling_and_submits_nothing_new(batch_stub, settings, provider, tmp_path):
    batch_stub.state.polls_before_end = 10**6
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    job = subprocess.Popen([sys.executable, "-c", KILLED_JOB, batch_stub.api_base, settings["cache"], provider],
                           env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while sum(batch_stub.state.retrievals.values()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)  # killed mid-poll, as a scheduler or a power cut would
    job.wait()
    (batch_id,) = batch_stub.state.batches
    assert batch_stub.state.retrievals[batch_id] >= 2 and len(batch_stub.state.submissions) == 1
    running = "JOB_STATE_RUNNING" if provider == "gemini" else "in_progress"
    assert batches_table(settings["cache"])[0][:5] == (batch_id, provider, MODELS[provider], running, 4)
    batch_stub.state.polls_before_end = 0  # it has ended by the time the rerun polls
    client = ModelClient(settings, "t", progress=False)
    results = client.run(batch_requests(batch_stub, provider, 4))
    assert [r.status for r in results] == ["ok"] * 4
    assert len(batch_stub.state.submissions) == 1 and client.calls_made == 0
    assert {client.cache.get(r.key)["provenance"]["batch_id"] for r in results} == {batch_id}


def test_exception_after_submission_then_rerun_polls_the_same_batch(batch_stub, settings, monkeypatch):
    from aura_eval.llm import batch

    def crash(self):
        raise KeyboardInterrupt("job killed after submission")

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(batch.BatchRun, "wait", crash)
        ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, "openai", 3))
    client = ModelClient(settings, "t", progress=False)
    assert [r.status for r in client.run(batch_requests(batch_stub, "openai", 3))] == ["ok"] * 3
    assert len(batch_stub.state.submissions) == 1 and client.calls_made == 0


def test_live_and_batch_models_in_one_run(batch_stub, stub, settings):
    live = Endpoint(name="live", model="openai/stub-live", params={"temperature": 0.0}, api_base=stub.api_base)
    requests = batch_requests(batch_stub, "openai", 2) + [
        Request(item_id="live-0", endpoint=live, prompt_id="p_test", prompt_version=1, role="tester", schema=SCHEMA,
                messages=[{"role": "user", "content": "live question"}])]
    results = ModelClient(settings, "t", progress=False).run(requests)
    assert [r.status for r in results] == ["ok"] * 3
    assert len(stub.state.requests) == 1 and [n for _, _, n in batch_stub.state.submissions] == [2]


def test_openai_bodies_map_params_as_litellm_does(batch_stub, settings):
    requests = batch_requests(batch_stub, "openai", 1, model="openai/gpt-5.2", params={"max_tokens": 64})
    (result,) = ModelClient(settings, "t", progress=False).run(requests)
    ((line,),) = [b["requests"] for b in batch_stub.state.batches.values()]
    assert line["custom_id"] == result.key and line["url"] == "/v1/chat/completions"
    assert line["body"] == {"model": "gpt-5.2", "messages": requests[0].messages, "max_completion_tokens": 64,
                            "response_format": {"type": "json_schema", "json_schema": {
                                "name": "p_test", "schema": SCHEMA, "strict": False}}}
    # litellm's map prices gpt-5.2's batch calls at 0.875 and 7 USD per million tokens.
    assert result.cost_usd == pytest.approx((TOKENS_IN * 0.875 + TOKENS_OUT * 7.0) / 1e6)


def test_anthropic_requests_carry_messages_api_params(batch_stub, settings):
    requests = batch_requests(batch_stub, "anthropic", 1, params={"temperature": 0.0, "stop": ["END"]})
    (result,) = ModelClient(settings, "t", progress=False).run(requests)
    ((line,),) = [b["requests"] for b in batch_stub.state.batches.values()]
    assert line == {"custom_id": result.key, "params": {
        "model": "stub-batch", "system": "be brief", "messages": [{"role": "user", "content": "question 0"}],
        "max_tokens": 4096, "temperature": 0.0, "stop_sequences": ["END"]}}
    assert batch_stub.state.keys_seen == {"stub-credential-0123456789"}, batch_stub.state.keys_seen


def test_gemini_requests_carry_generate_content_params(batch_stub, settings):
    params = {"temperature": 0.0, "max_tokens": 64, "stop": ["END"], "seed": 7}
    requests = batch_requests(batch_stub, "gemini", 1, params=params)
    (result,) = ModelClient(settings, "t", progress=False).run(requests)
    ((line,),) = [b["requests"] for b in batch_stub.state.batches.values()]
    assert line == {"metadata": {"key": result.key}, "request": {
        "contents": [{"role": "user", "parts": [{"text": "question 0"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "be brief"}]},
        "generationConfig": {"temperature": 0.0, "maxOutputTokens": 64, "stopSequences": ["END"], "seed": 7,
                             "responseMimeType": "application/json", "responseJsonSchema": SCHEMA}}}
    assert [b["model"] for b in batch_stub.state.batches.values()] == ["models/stub-batch"]
    assert batch_stub.state.keys_seen == {"stub-credential-0123456789"}, batch_stub.state.keys_seen
    # The stub reports 3 candidate and 2 thinking tokens: both are billed as output.
    assert (result.tokens_in, result.tokens_out, result.call["response_model"]) == (TOKENS_IN, TOKENS_OUT, "stub-batch")
    assert result.tokens_reasoning == REASONING


def test_gemini_answers_from_a_results_file(batch_stub, settings):
    batch_stub.state.gemini_results_file = True
    texts = ["fine 0", "FAIL 1", "fine 2"]
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, "gemini", 3, texts=texts))
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert [r.parsed for r in results] == [{"answer": "yes"}, None, {"answer": "yes"}]
    assert results[1].error == f"batch {batch_stub.state.submissions[0][1]}: error 400: stub refuses this request"
    assert [r.cost_usd for r in results] == [pytest.approx(HALF_PRICE), None, pytest.approx(HALF_PRICE)]


def test_gemini_answers_without_metadata_are_matched_by_position(batch_stub, settings):
    """Google returns inline answers in the order of the requests and has been seen to drop their
    metadata: each answer then belongs to the key at its position (the requests go in key order)."""
    batch_stub.state.gemini_metadata, batch_stub.state.echo = False, True
    texts = [f"question {i}" for i in range(6)] + ["FAIL 6"]
    results = ModelClient(settings, "t", progress=False).run(batch_requests(batch_stub, "gemini", 7, texts=texts))
    assert [r.parsed for r in results[:6]] == [{"answer": t} for t in texts[:6]]
    assert results[6].status == "failed" and results[6].error.endswith("error 400: stub refuses this request")
    ((first, *rest),) = [b["requests"] for b in batch_stub.state.batches.values()]
    keys = [line["metadata"]["key"] for line in (first, *rest)]
    assert keys == sorted(keys)


def test_gemini_refuses_reasoning_effort_before_sending(batch_stub, settings):
    requests = batch_requests(batch_stub, "gemini", 2, params={"reasoning_effort": "low"})
    results = ModelClient(settings, "t", progress=False).run(requests)
    refused = "gemini batch: GenerateContent has no reasoning_effort (remove from params)"
    assert [r.error for r in results] == [refused] * 2
    assert batch_stub.state.submissions == []


def test_refused_submission_and_unsupported_params_are_failed_results(batch_stub, settings):
    requests = batch_requests(batch_stub, "anthropic", 2, params={"temperature": 0.0, "seed": 3})
    results = ModelClient(settings, "t", progress=False).run(requests)
    assert [r.status for r in results] == ["failed"] * 2
    assert results[0].error == "anthropic batch: the Messages API has no seed (remove from params)"
    assert batch_stub.state.submissions == []
    gone = batch_requests(batch_stub, "openai", 2)
    for r in gone:
        object.__setattr__(r.endpoint, "api_base", batch_stub.api_base.replace("/v1", "/missing"))
    settings["max_retries"] = 0
    results = ModelClient(settings, "t", progress=False).run(gone)
    assert [r.status for r in results] == ["failed"] * 2
    assert results[0].error.startswith("batch submission: NotFoundError: ")


def test_batch_cost_prices():
    def endpoint(model, price=None):
        return Endpoint(name="m", model=model, batch=True, price=price)

    # litellm's map has batch prices for gpt-4o-mini: 0.075 and 0.30 USD per million tokens.
    assert batch_cost(endpoint("openai/gpt-4o-mini"), 1_000_000, 1_000_000) == pytest.approx(0.375)
    # gpt-4 has no batch price in the map: half its 30 and 60 USD per million tokens.
    assert batch_cost(endpoint("openai/gpt-4"), 1_000_000, 1_000_000) == pytest.approx(45.0)
    # The map wins over the entry; the entry's batch price, else half its price, where the map has none.
    assert batch_cost(endpoint("openai/gpt-4o-mini", {"batch_input_per_mtok": 9, "batch_output_per_mtok": 9}),
                      1_000_000, 1_000_000) == pytest.approx(0.375)
    assert batch_cost(endpoint("openai/unmapped", {"batch_input_per_mtok": 1.0, "batch_output_per_mtok": 3.0,
                                                    "input_per_mtok": 5, "output_per_mtok": 5}),
                      2_000_000, 1_000_000) == pytest.approx(5.0)
    assert batch_cost(endpoint("openai/unmapped", {"input_per_mtok": 2.0, "output_per_mtok": 8.0}),
                      1_000_000, 1_000_000) == pytest.approx(5.0)
    assert batch_cost(endpoint("openai/unmapped"), 10, 10) is None  # unpriced, never $0
    # Gemini: the map's batch price of gemini-3.1-pro-preview (1 and 6 USD per million), half its standard one.
    assert batch_cost(endpoint("gemini/gemini-3.1-pro-preview"), 1_000_000, 1_000_000) == pytest.approx(7.0)


def test_batch_on_a_provider_without_batch_api_is_a_config_error():
    config = {"models": {"ds": {"model": "deepseek/deepseek-v4-pro", "batch": True},
                         "gpt": {"model": "openai/gpt-5.2", "batch": True},
                         "gem": {"model": "gemini/gemini-3.1-pro", "batch": True}}}
    with pytest.raises(ConfigError, match=r"model 'ds' \(deepseek/deepseek-v4-pro\) has batch: true"):
        check_config(config)
    check_config({"models": {"gpt": config["models"]["gpt"], "gem": config["models"]["gem"]}})


@pytest.mark.e2e  # a workflow run (18 s): the slower tier, so `make test` keeps its 5 minutes
def test_workflow_tags_through_a_batch(batch_stub, tmp_path, monkeypatch):
    """The tag_steps job with a `batch: true` tagger: one batch, the rows from it, and a forced
    rerun answered from the cache without a new submission."""
    import yaml

    from aura_eval.util.jsonl import read_jsonl
    from tests.workflow import STUB_KEY_ENV, scratch_copy, snakemake, suite_config

    monkeypatch.setenv(STUB_KEY_ENV, "stub-credential-for-construction")  # the config's other stub models
    batch_stub.state.content = '{"risk_trigger": 0, "execution_point": 1, "reason": "batched"}'
    work = scratch_copy(tmp_path)
    path = suite_config(work, "mock.yaml")
    config = yaml.safe_load(path.read_text())
    config["models"]["tagger"] = {"model": "openai/stub-tagger", "vendor": "stubvendor", "batch": True,
                                  "api_base": batch_stub.api_base, "api_key_env": KEY_ENV,
                                  "params": {"temperature": 0.0}}
    config["llm"] |= {"batch_poll_s": 0.1, "batch_max_wait_s": 60}
    path.write_text(yaml.safe_dump(config))
    snakemake(work, "results/prefixes/tags.jsonl", "--configfile", str(path))
    tags = read_jsonl(work / "results/prefixes/tags.jsonl")
    assert len(tags) == 4 and all(t["valid"] and t["reason"] == "batched" for t in tags)
    assert [n for _, _, n in batch_stub.state.submissions] == [4]
    (batch_id,) = batch_stub.state.batches
    calls = read_jsonl(work / "results/calls/tag_steps.jsonl")
    assert [c["status"] for c in calls] == ["ok"] * 4 and {c["attempts"] for c in calls} == {1}
    assert batches_table(work / "cache/mock.sqlite") == [(batch_id, "openai", "openai/stub-tagger", "completed", 4, 1)]
    assert "batch " + batch_id in (work / "logs/tag_steps.log").read_text()
    snakemake(work, "results/prefixes/tags.jsonl", "--forcerun", "tag_steps", "--configfile", str(path))
    assert len(batch_stub.state.submissions) == 1
    assert read_jsonl(work / "results/prefixes/tags.jsonl") == tags


def test_the_budget_covers_batch_requests(batch_stub, settings):
    """llm.budget_usd as for live calls: each request reserves its most cost at the batch price before
    the batch is sent, the refused ones fail with the budget's reason, the rest settle at their cost."""
    from aura_eval.llm.budget import estimate_usd
    from aura_eval.llm.client import litellm_module

    requests = batch_requests(batch_stub, "openai", 5)
    estimate = estimate_usd(requests[0].endpoint, litellm_module().token_counter(
        model=requests[0].endpoint.model, messages=requests[0].messages))
    assert estimate == pytest.approx(20 / 2e6 + 64 * 8.0 / 2e6, rel=0.5)  # batch price: half the entry's
    client = ModelClient({**settings, "budget_usd": 2.5 * estimate}, "t", progress=False)
    results = client.run(requests)
    assert [r.status for r in results] == ["ok", "ok", "failed", "failed", "failed"]
    assert results[2].error.startswith(f"budget of ${2.5 * estimate:.4f} reached: spent $")
    assert len(batch_stub.state.submissions) == 1 and batch_stub.state.submissions[0][2] == 2
    with sqlite3.connect(settings["cache"]) as db:
        count, total, settled = db.execute("SELECT COUNT(*), SUM(cost_usd), SUM(settled) FROM spend").fetchone()
    assert (count, settled) == (2, 2) and total == pytest.approx(2 * HALF_PRICE)


def test_batch_knows_every_batch_provider_and_uses_the_client_by_its_narrow_interface():
    """One adapter per batch provider, each behind `vendors.BatchAdapter`; `BatchRun` reads of the
    client only what `batch.BatchHost` declares (and `ModelClient` has all of it)."""
    import ast
    from pathlib import Path

    from aura_eval.llm import batch, providers
    from aura_eval.llm.vendors import BatchAdapter

    assert sorted(batch.ADAPTERS) == sorted(providers.BATCH_PROVIDERS)
    assert all(adapter.provider == name for name, adapter in batch.ADAPTERS.items())
    declared = {name for name in BatchAdapter.__dict__ if not name.startswith("_")} | set(
        BatchAdapter.__annotations__)
    assert all(declared <= set(dir(adapter)) | {"sdk_version"} for adapter in batch.ADAPTERS.values())
    tree = ast.parse(Path(batch.__file__).read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and (isinstance(node.value, ast.Name) and node.value.id in ("c", "client")
                 or isinstance(node.value, ast.Attribute) and node.value.attr == "client")}
    host = {name for name in batch.BatchHost.__dict__ if not name.startswith("_")} | set(
        batch.BatchHost.__annotations__)
    assert used and sorted(used - host) == []
    assert host <= set(dir(ModelClient)) | {"stage", "replay", "call", "cache"}


@pytest.mark.serial
def test_a_stop_leaves_open_batches_open_and_the_rerun_polls_them(batch_stub, settings, monkeypatch, tmp_path):
    """The run's stop mark while a batch is open: the job stops within a poll (not after
    batch_max_wait_s), the batch stays open in the cache file, and the rerun polls it, submitting
    nothing again."""
    from aura_eval.llm import stop

    mark = tmp_path / "aura-stop"
    monkeypatch.setenv(stop.ENV, str(mark))
    batch_stub.state.polls_before_end = 10_000
    settings = {**settings, "batch_poll_s": 5.0}
    requests = batch_requests(batch_stub, "openai", 3)
    client = ModelClient(settings, "t", progress=False)
    marked = []

    def set_mark_once_submitted():
        while not batch_stub.state.submissions:
            time.sleep(0.02)
        marked.append(time.monotonic())
        stop.write_mark("test")

    threading.Thread(target=set_mark_once_submitted, daemon=True).start()
    with pytest.raises(stop.RunStopped, match="left open at the provider"):
        client.run(requests)
    # The poll's sleep looks for the mark every stop.POLL_S: seen within one look, not after the 5 s poll.
    assert time.monotonic() - marked[0] < stop.POLL_S + timing.WAKE_S < settings["batch_poll_s"]
    assert [row[5] for row in batches_table(settings["cache"])] == [0]  # open, not ingested
    mark.unlink()
    batch_stub.state.polls_before_end = 0
    results = ModelClient({**settings, "batch_poll_s": 0.05}, "t", progress=False).run(requests)
    assert [r.status for r in results] == ["ok"] * 3 and len(batch_stub.state.submissions) == 1
