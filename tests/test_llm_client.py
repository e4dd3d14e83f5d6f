"""The model module: cache, retries, failures, parsing, replay, concurrency, secrets."""

import json
import multiprocessing
import os

import pytest

import aura_eval.simulator  # noqa: F401  (registers the aura_sim responder, as the stage runner does)
from aura_eval.llm import CacheMissError, Endpoint, Request, providers
from aura_eval.llm.client import ModelClient
from aura_eval.llm.cache import ResponseCache, cache_key
from aura_eval.util.prompts import Prompt

# every test runs the model client (litellm) against the stub server
pytestmark = pytest.mark.suite

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def make_requests(stub, n=1, model="openai/stub", sample=0, params=None, schema=SCHEMA):
    endpoint = Endpoint(name="stub", model=model, params=params or {"temperature": 0.0},
                        api_base=stub.api_base if stub else None)
    return [Request(item_id=f"item-{i:02d}", endpoint=endpoint, prompt_id="p_test", prompt_version=1,
                    role="tester", schema=schema, sample=sample,
                    messages=[{"role": "user", "content": f"question {i}"}]) for i in range(n)]


def test_uncached_then_cached_makes_no_second_call(stub, llm_settings):
    first = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 3))
    assert [r.status for r in first] == ["ok"] * 3
    assert [r.parsed for r in first] == [{"answer": "yes"}] * 3
    assert len(stub.state.requests) == 3
    again = ModelClient(llm_settings, "t", progress=False)
    second = again.run(make_requests(stub, 3))
    assert len(stub.state.requests) == 3 and again.calls_made == 0
    assert all(r.cache_hit for r in second)
    assert [r.content for r in second] == [r.content for r in first]


def test_key_covers_sampling_params_and_sample_index(stub, llm_settings):
    client = ModelClient(llm_settings, "t", progress=False)
    client.run(make_requests(stub, 1))
    client.run(make_requests(stub, 1, sample=1))
    client.run(make_requests(stub, 1, params={"temperature": 0.7}))
    client.run(make_requests(stub, 1, sample=1))  # a repeat: cached
    assert len(stub.state.requests) == 3
    base = {"model": "m", "messages": [], "params": {"temperature": 0}, "sample": 0}
    assert cache_key(base) != cache_key({**base, "sample": 1})
    assert cache_key(base) != cache_key({**base, "params": {"temperature": 0, "seed": 1}})


@pytest.mark.parametrize("behaviour", ["429", "500", "timeout"])
def test_retries_until_success(stub, llm_settings, behaviour):
    stub.state.script["stub"] = [behaviour, behaviour]
    stub.state.slow_s = 2.0
    llm_settings["timeout_s"] = 0.5
    client = ModelClient(llm_settings, "t", progress=False)
    (result,) = client.run(make_requests(stub, 1))
    assert result.status == "ok" and result.parsed == {"answer": "yes"}
    assert client.calls_made == 3


def test_exhausted_retries_are_recorded_and_the_batch_goes_on(stub, llm_settings, tmp_path):
    stub.state.script["bad"] = ["500"] * 10
    good = make_requests(stub, 2)
    bad = make_requests(stub, 1, model="openai/bad")
    client = ModelClient(llm_settings, "t", progress=False)
    results = client.run(good + bad)
    assert [r.status for r in results] == ["ok", "ok", "failed"]
    assert "InternalServerError" in results[2].error
    assert sum(1 for r in stub.state.requests if r["model"] == "bad") == 4  # 1 + max_retries
    client.write_call_log(tmp_path / "calls.jsonl")
    assert len((tmp_path / "calls.jsonl").read_text().splitlines()) == 3
    # A failure is not cached: a rerun tries again.
    stub.state.script["bad"] = []
    (retry,) = ModelClient(llm_settings, "t", progress=False).run(bad)
    assert retry.status == "ok" and not retry.cache_hit


def test_unparseable_response_is_counted_and_kept(stub, llm_settings):
    stub.state.script["stub"] = ["badjson"]
    (result,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    assert result.status == "unparseable"
    assert result.content == "not json {" and result.parsed is None
    assert result.error.startswith("no complete JSON object in the answer (Expecting property name")


def test_schema_mismatch_is_unparseable(stub, llm_settings):
    stub.state.content = '{"other": 1}'
    (result,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    assert result.status == "unparseable" and "does not match the schema" in result.error


def test_garbled_http_body_never_raises(stub, llm_settings):
    stub.state.script["stub"] = ["garbled"] * 10
    llm_settings["max_retries"] = 1
    (result,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    assert result.status in ("failed", "unparseable")
    assert result.parsed is None


def test_replay_serves_hits_and_refuses_misses(stub, llm_settings):
    ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    replay = {**llm_settings, "replay": True}
    (hit,) = ModelClient(replay, "t", progress=False).run(make_requests(stub, 1))
    assert hit.cache_hit and hit.status == "ok"
    with pytest.raises(CacheMissError, match="item-01"):
        ModelClient(replay, "t", progress=False).run(make_requests(stub, 2))
    assert len(stub.state.requests) == 1


def test_concurrency_limit_per_provider(stub, llm_settings):
    stub.state.latency_s = 0.05
    llm_settings["concurrency"] = {"default": 32, "openai": 4}
    ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 20))
    assert 2 <= stub.state.max_in_flight <= 4


def test_litellm_mock_response_takes_the_same_path(llm_settings):
    reqs = make_requests(None, 2, model="openai/gpt-4o",
                         params={"temperature": 0.0, "mock_response": '{"answer": "mocked"}'})
    client = ModelClient(llm_settings, "t", progress=False)
    results = client.run(reqs)
    assert [r.parsed for r in results] == [{"answer": "mocked"}] * 2
    assert all(r.cost_usd is not None for r in results)  # litellm knows gpt-4o's price
    assert all(c["tokens_out"] > 0 for c in client.calls)


def test_no_api_key_reaches_any_file(stub, llm_settings, tmp_path, monkeypatch):
    fake = "sk-test-FAKEKEY-0123456789abcdefghij"
    monkeypatch.setenv("OPENAI_API_KEY", fake)
    stub.state.script["bad"] = ["500"] * 10
    client = ModelClient(llm_settings, "t", progress=False)
    results = client.run(make_requests(stub, 2) + make_requests(stub, 1, model="openai/bad"))
    assert results[2].status == "failed" and "<OPENAI_API_KEY>" in results[2].error  # the stub echoed it
    client.write_call_log(tmp_path / "calls.jsonl")
    client.cache.close()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert fake.encode() not in path.read_bytes(), path


def _fill(path, start, n):
    cache = ResponseCache(path)
    for i in range(start, start + n):
        cache.put(f"key-{i}", {"model": "m"}, {"content": str(i)})
    cache.close()


def test_cache_is_safe_for_two_processes(tmp_path):
    path = tmp_path / "shared.sqlite"
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_fill, args=(path, start, 300)) for start in (0, 150)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    cache = ResponseCache(path)
    assert len(cache) == 450
    assert cache.get("key-449") == {"content": "449"} and cache.get("key-0") == {"content": "0"}


def test_prompt_values_are_never_template_source():
    prompt = Prompt(id="p", version=1, system="sys", user="Trajectory: $trajectory (profile $profile)", schema=None)
    tricky = "run {x} and {{ x }} then {% for i in y %} costs $5 ${HOME} $trajectory"
    messages = prompt.messages(trajectory=tricky, profile="{profile}")
    assert messages[1]["content"] == f"Trajectory: {tricky} (profile {{profile}})"
    with pytest.raises(KeyError, match="profile"):
        prompt.messages(trajectory="x")


def test_module_sets_offline_cost_map():
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


@pytest.mark.serial
def test_retry_after_is_honoured_and_counted(stub, llm_settings):
    stub.state.script["stub"] = ["429", "429"]
    stub.state.retry_after_s = 0.6
    llm_settings["backoff_s"] = 0.01  # without Retry-After the waits would be near zero
    client = ModelClient(llm_settings, "t", progress=False)
    (result,) = client.run(make_requests(stub, 1))
    assert result.status == "ok" and result.attempts == 3
    assert result.wait_s == pytest.approx(2 * 0.6)  # the computed waits: twice the asked 0.6 s, no backoff
    assert client.calls[0]["wait_s"] == result.wait_s and client.calls[0]["attempts"] == 3


@pytest.mark.serial
def test_the_total_wait_per_request_is_capped(stub, llm_settings):
    stub.state.script["stub"] = ["429"] * 10
    stub.state.retry_after_s = 0.5
    llm_settings.update(max_retries=10, max_wait_s=1.2)
    (result,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    assert result.status == "failed" and "RateLimitError" in result.error
    assert result.attempts == 3 and result.wait_s == pytest.approx(2 * 0.5)  # a third wait would pass the cap


def test_a_refused_key_is_never_retried(stub, llm_settings):
    stub.state.script["stub"] = ["401"] * 5
    client = ModelClient(llm_settings, "t", progress=False)
    (result,) = client.run(make_requests(stub, 1))
    assert result.status == "failed" and result.auth_error and client.calls_made == 1


def test_identical_requests_in_one_batch_are_sent_once(stub, llm_settings):
    stub.state.latency_s = 0.1
    same = make_requests(stub, 1) * 3
    client = ModelClient(llm_settings, "t", progress=False)
    results = client.run(same)
    assert len(stub.state.requests) == 1 and client.calls_made == 1
    assert [r.parsed for r in results] == [{"answer": "yes"}] * 3
    assert [r.cache_hit for r in results].count(True) == 2


def test_the_value_of_a_named_key_variable_is_scrubbed(monkeypatch):
    from aura_eval.llm.wire import scrub_secrets

    monkeypatch.setenv("AURA_PLAIN_CRED", "value-0123456789")
    text = "got value-0123456789; Authorization: Bearer abcdefghijk123; x-api-key: zzzzzzzz99"
    assert scrub_secrets(text) == ("got value-0123456789; Authorization: Bearer <redacted>; "
                                   "x-api-key: <redacted>")
    assert scrub_secrets(text, {"AURA_PLAIN_CRED"}).startswith("got <AURA_PLAIN_CRED>;")


def test_provenance_is_stored_at_the_first_call_and_read_back_on_a_hit(stub, llm_settings, tmp_path):
    first_client = ModelClient(llm_settings, "t", progress=False)
    (first,) = first_client.run(make_requests(stub, 1))
    call = first.call
    assert call["response_id"] == "chatcmpl-stub" and call["response_model"] and call["litellm_version"]
    assert call["params"] == {"temperature": 0.0} and call["called_at"].endswith("Z")
    assert (call["tokens_in"], call["tokens_out"]) == (11, 5) and call["first_latency_s"] > 0
    record = ResponseCache(llm_settings["cache"]).get(first.key)
    assert record["provenance"]["prompt"] == "p_test" and record["provenance"]["prompt_version"] == 1
    replay = ModelClient({**llm_settings, "replay": True}, "t", progress=False)
    (hit,) = replay.run(make_requests(stub, 1))
    assert hit.cache_hit and hit.call == call and hit.provenance()["call"] == {"key": first.key[:16], **call}
    first_client.write_call_log(tmp_path / "a.jsonl")
    replay.write_call_log(tmp_path / "b.jsonl")
    from aura_eval.util.jsonl import read_jsonl
    (a,), (b,) = read_jsonl(tmp_path / "a.jsonl"), read_jsonl(tmp_path / "b.jsonl")
    volatile = {"latency_s", "cache_hit", "attempts", "wait_s"}
    assert {k: v for k, v in a.items() if k not in volatile} == {k: v for k, v in b.items() if k not in volatile}
    assert a["called_at"] == call["called_at"] and b["first_latency_s"] == call["first_latency_s"]


def test_a_cache_row_without_provenance_still_answers(stub, llm_settings):
    (req,) = make_requests(stub, 1)
    client = ModelClient(llm_settings, "t", progress=False)
    key = cache_key(client.describe(req))
    client.cache.put(key, client.describe(req), {"content": '{"answer": "old"}', "tokens_in": 3, "tokens_out": 1,
                                                  "cost_usd": None, "latency_s": 0.5})
    (hit,) = client.run([req])
    assert hit.cache_hit and hit.parsed == {"answer": "old"} and len(stub.state.requests) == 0
    assert hit.call["response_id"] is None and hit.call["called_at"] is None and hit.call["first_latency_s"] == 0.5
    assert client.calls[0]["response_id"] is None and client.calls[0]["tokens_in"] == 3


def test_a_replay_miss_and_a_failed_call_keep_their_description(stub, llm_settings, capsys):
    """A failed call's description goes to the cache's misses table; a replay writes nothing to the
    cache, so its miss's description goes to the job's log, where `cache explain` reads it."""
    stub.state.default = "401"
    (failed,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    assert failed.status == "failed" and failed.call["params"] == {"temperature": 0.0}
    capsys.readouterr()
    with pytest.raises(CacheMissError, match="cache explain"):
        ModelClient({**llm_settings, "replay": True}, "t", progress=False).run(make_requests(stub, 1, sample=2))
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("replay miss: ")]
    logged = json.loads(line[len("replay miss: "):])
    assert (logged["stage"], logged["item_id"], logged["prompt"], logged["request"]["sample"]) == ("t", "item-00",
                                                                                                   "p_test", 2)
    cache = ResponseCache(llm_settings["cache"])
    misses = cache._db.execute("SELECT reason, item_id, stage, prompt FROM misses ORDER BY reason").fetchall()
    assert misses == [("failed", "item-00", "t", "p_test")]
    assert len(cache) == 0


def test_simulated_calls_carry_only_what_every_run_shares(llm_settings):
    endpoint = Endpoint(name="j", model="aura_sim/judge", params={"temperature": 0.0})
    req = Request(item_id="a", endpoint=endpoint, messages=[{"role": "user", "content": "x"}],
                  prompt_id="judge_action_safety", prompt_version=1, role="judge", schema=None)
    client = ModelClient(llm_settings, "t", progress=False)
    (result,) = client.run([req])
    assert result.call["params"] == {"temperature": 0.0} and result.call["called_at"] is None
    assert result.call["first_latency_s"] is None and result.call["litellm_version"] is None
    assert client.calls[0]["prompt"] == "judge_action_safety" and client.calls[0]["response_id"] is None


def test_an_unregistered_responder_provider_fails_naming_it(llm_settings, monkeypatch):
    monkeypatch.setattr(providers, "_responders", {})
    req = Request(item_id="a", endpoint=Endpoint(name="j", model="aura_sim/judge"), prompt_id="judge_action_safety",
                  messages=[{"role": "user", "content": "x"}], prompt_version=1, role="judge", schema=None)
    with pytest.raises(providers.NoResponderError, match=r"provider 'aura_sim' \(model 'aura_sim/judge'\).*"
                                                         r"import aura_eval.simulator"):
        ModelClient(llm_settings, "t", progress=False).run([req])
    with pytest.raises(ValueError, match="not a responder provider"):
        providers.register_responder("openai", lambda settings: lambda request: "{}")


def test_a_registered_responder_answers_with_its_settings_made_once(llm_settings, monkeypatch):
    made = []

    def responder_for(settings):
        made.append(settings["cache"])
        return lambda request: f'{{"answer": "{request.item_id}"}}'

    monkeypatch.setattr(providers, "_responders", {})
    providers.register_responder(providers.SIM_PROVIDER, responder_for)
    requests = make_requests(None, 3, model="aura_sim/any")
    client = ModelClient(llm_settings, "t", progress=False)
    results = client.run(requests) + client.run(requests[:1])
    assert [r.parsed for r in results] == [{"answer": f"item-{i:02d}"} for i in (0, 1, 2, 0)]
    assert made == [llm_settings["cache"]] and not any(r.cache_hit for r in results) and len(client.cache) == 0


def test_a_responder_may_answer_with_a_record_or_fail_the_call(llm_settings, monkeypatch):
    """A responder's answer is its text or a response record (a cut, a refusal field); raising
    ResponderFailure is a call with no answer: `failed`, with the reason, in the call log."""
    def respond(request):
        if request.item_id == "item-00":
            return {"content": '{"answer": "cu', "finish_reason": "length"}
        if request.item_id == "item-01":
            raise providers.ResponderFailure("simulated outage")
        return {"content": None, "refusal": "I can't help with that."}

    monkeypatch.setattr(providers, "_responders", {})
    providers.register_responder(providers.SIM_PROVIDER, lambda settings: respond)
    client = ModelClient(llm_settings, "t", progress=False)
    results = client.run(make_requests(None, 3, model="aura_sim/any"))
    assert [r.status for r in results] == ["truncated", "failed", "refused"]
    assert results[1].error == "simulated outage" and results[1].parsed is None
    assert [c["status"] for c in client.calls] == ["truncated", "failed", "refused"]
    assert client.calls[1]["error"] == "simulated outage"


def test_hidden_reasoning_tokens_reach_the_call_log_apart_and_the_cache(stub, llm_settings, tmp_path):
    """OpenAI's usage: reasoning tokens are part of completion_tokens and said apart in
    completion_tokens_details; the call log keeps both, a cache hit reads them back."""
    stub.state.usage = lambda body, answer: {"prompt_tokens": 40, "completion_tokens": 700, "total_tokens": 740,
                                             "completion_tokens_details": {"reasoning_tokens": 640}}
    client = ModelClient(llm_settings, "t", progress=False)
    (result,) = client.run(make_requests(stub, 1))
    assert (result.tokens_in, result.tokens_out, result.tokens_reasoning) == (40, 700, 640)
    client.write_call_log(tmp_path / "calls.jsonl")
    (row,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert (row["tokens_out"], row["tokens_reasoning"]) == (700, 640)
    (hit,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1))
    assert hit.cache_hit and hit.tokens_reasoning == 640
    stub.state.usage = None  # a provider that says nothing apart: None, never 0
    (plain,) = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 1, sample=1))
    assert (plain.tokens_out, plain.tokens_reasoning) == (5, None)
