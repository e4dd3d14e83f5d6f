"""Each provider's own errors and answers, one request at a time, against its emulator (tests/emulators/):
what the model module waits after each retryable error, how it records each non-retryable one, and
the request adaptations each provider needs (config/paper.yaml's model strings throughout)."""

import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime

import pytest

from aura_eval.construct.common import rewrite_schema
from aura_eval.llm import Endpoint, Request
from aura_eval.llm.client import ModelClient
from aura_eval.llm.wire import is_retryable, litellm_module, retry_after_s, without_prefix_items
from tests import timing
from tests.emulators import EMULATORS
from tests.emulators.base import BAD_KEY, FATAL, REACT_TEXT

# every test runs litellm against the providers' emulators
pytestmark = pytest.mark.suite

KEY_ENV, CRED = "AURA_EMULATOR_CRED", "emu-cred-0c4f9e1a7b55"
MODELS = {"openai": ("openai/gpt-5.4", {"temperature": 0.0, "max_tokens": 1024}),
          "anthropic": ("anthropic/claude-opus-4-6", {"temperature": 0.0, "max_tokens": 1024}),
          "gemini": ("gemini/gemini-3.1-pro-preview", {"temperature": 0.0, "max_tokens": 1024}),
          "deepseek": ("deepseek/deepseek-v4-pro", {"temperature": 0.0, "max_tokens": 1024}),
          "openrouter": ("openrouter/qwen/qwen3-32b", {"max_tokens": 2048}),
          "vllm": ("hosted_vllm/RealSafe-R1-32B", {"max_tokens": 2048})}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 200}}, "required": ["answer"]}
# What a reader learns from each non-retryable error's recorded reason (litellm's class, then the provider's words).
# (OpenRouter answers an unknown model with 400: a BadRequestError.)
REASONS = {BAD_KEY: "AuthenticationError", "forbidden": "", "unknown_model": "", "invalid": "BadRequestError"}


@pytest.fixture(autouse=True)
def emulator_cred(monkeypatch):
    monkeypatch.setenv(KEY_ENV, CRED)


def ask(emulator, dialect, llm_settings, schema=SCHEMA, model=None, params=None):
    name, default_params = MODELS[dialect]
    endpoint = Endpoint(name=dialect, model=model or name, params=params or default_params,
                        api_base=emulator.api_base, api_key_env=KEY_ENV)
    request = Request(item_id="item-1", endpoint=endpoint, prompt_id="p_test", prompt_version=1, role="tester",
                      schema=schema, messages=[{"role": "system", "content": "Answer in JSON."},
                                               {"role": "user", "content": "question"}])
    (result,) = ModelClient(llm_settings, "t", progress=False).run([request])
    return result


@pytest.mark.serial
@pytest.mark.parametrize("dialect", sorted(EMULATORS))
def test_each_retryable_error_is_retried_after_the_wait_its_provider_asked(dialect, llm_settings):
    with EMULATORS[dialect]() as emulator:
        for kind in emulator.retryable:
            llm_settings["cache"] = llm_settings["cache"] + "x"  # a miss each time
            emulator.state.requests, emulator.state.sent, emulator.state.waits_asked = [], {}, []
            emulator.inject(kind, every=2, wait_s=0.3)  # the first request fails, its retry succeeds
            result = ask(emulator, dialect, llm_settings)
            asked = emulator.state.waits_asked
            check_retried(kind, result, emulator.state.sent, asked)


def check_retried(kind, result, sent, asked):
    assert (result.status, result.attempts, sent) == ("ok", 2, {kind: 1, "ok": 1}), kind
    assert result.parsed == {"answer": "stub rewrite of this text"}
    # result.wait_s is the wait the retry computed (tenacity's idle time), not a clock reading.
    if asked:  # the wait the provider asked for, to within the resolution its header is written in
        assert abs(result.wait_s - asked[0]) <= timing.HEADER_RESOLUTION_S, (kind, asked, result.wait_s)
    else:  # our own backoff: random exponential, at most backoff_s * 2 ** attempt for the first retry
        assert result.wait_s <= 2 * 0.01, (kind, result.wait_s)


@pytest.mark.parametrize("dialect", sorted(EMULATORS))
def test_each_non_retryable_error_is_recorded_once_with_its_reason(dialect, llm_settings):
    with EMULATORS[dialect]() as emulator:
        for kind in FATAL:
            llm_settings["cache"] = llm_settings["cache"] + "x"
            emulator.state.default, emulator.state.sent = kind, {}
            check_refused(kind, ask(emulator, dialect, llm_settings), emulator.state)


def check_refused(kind, result, state):
    assert (result.status, result.attempts, state.sent) == ("failed", 1, {kind: 1}), kind
    error = state.last_error["error"]
    words = error["message"] if isinstance(error, dict) else error  # vLLM's 401: {"error": "Unauthorized"}
    # The reason names litellm's class of the error and quotes the provider's own words; never the key.
    assert result.error.startswith(REASONS[kind]) and words in result.error and CRED not in result.error, \
        result.error
    if kind != "forbidden":  # a 403 is the key's permission for some (Anthropic's permission_error)
        assert result.auth_error == (kind == BAD_KEY), kind


def post(url: str, body: dict, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_gpt5_family_refuses_max_tokens_and_a_temperature_while_reasoning():
    auth = {"Authorization": "Bearer x"}
    messages = [{"role": "user", "content": "q"}]
    with EMULATORS["openai"]() as emulator:
        url = emulator.api_base + "/chat/completions"
        status, body = post(url, {"model": "gpt-5.4", "messages": messages, "max_tokens": 10}, auth)
        assert status == 400 and body["error"]["param"] is None and "max_completion_tokens" in body["error"]["message"]
        # gpt-5 reasons by default: temperature 0 refused; gpt-5.4's default effort is "none": accepted.
        assert post(url, {"model": "gpt-5", "messages": messages, "temperature": 0}, auth)[0] == 400
        assert post(url, {"model": "gpt-5.4", "messages": messages, "temperature": 0}, auth)[0] == 200
        assert post(url, {"model": "gpt-5.4", "messages": messages, "temperature": 0,
                          "reasoning_effort": "high"}, auth)[0] == 400
        assert post(url, {"model": "gpt-4o", "messages": messages, "temperature": 0, "max_tokens": 5}, auth)[0] == 200


def test_litellm_sends_the_gpt5_family_what_it_accepts(llm_settings):
    with EMULATORS["openai"]() as emulator:
        assert ask(emulator, "openai", llm_settings).status == "ok"
        sent = emulator.state.requests[0]["body"]
    assert sent["max_completion_tokens"] == 1024 and "max_tokens" not in sent and sent["temperature"] == 0.0
    # Asked for a temperature gpt-5 refuses, litellm refuses before sending: recorded, with why.
    with EMULATORS["openai"]() as emulator:
        result = ask(emulator, "openai", llm_settings, model="openai/gpt-5", params={"temperature": 0.0})
        assert emulator.state.requests == []
    assert result.status == "failed" and "temperature" in result.error


def test_deepseek_gets_json_object_with_the_schema_in_the_prompt(llm_settings):
    with EMULATORS["deepseek"]() as emulator:
        status, body = post(emulator.api_base + "/chat/completions", {
            "model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "q"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}},
            {"Authorization": "Bearer x"})
        assert status == 400 and body["error"]["message"] == "This response_format type is unavailable now"
        result = ask(emulator, "deepseek", llm_settings)
        sent = emulator.state.requests[-1]["body"]
    assert result.status == "ok" and result.parsed == {"answer": "stub rewrite of this text"}
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["messages"][-1]["content"].endswith("JSON schema: " + json.dumps(SCHEMA, sort_keys=True))


def test_anthropic_gets_step_lists_it_can_fill(llm_settings):
    steps = [{"index": 0, "role": "user"}, {"index": 2, "role": "environment"}]
    schema = {"type": "object", "properties": {"steps": rewrite_schema(steps)}, "required": ["steps"]}
    assert without_prefix_items(schema)["properties"]["steps"]["items"] == {
        "anyOf": schema["properties"]["steps"]["prefixItems"]}
    with EMULATORS["anthropic"]() as emulator:
        result = ask(emulator, "anthropic", llm_settings, schema=schema)
        sent = emulator.state.requests[0]["body"]["output_format"]["schema"]
    # litellm would have kept `"items": false` beside prefixItems moved into the description: an empty list.
    assert sent["properties"]["steps"]["items"] is not False
    assert result.status == "ok" and [s["step"] for s in result.parsed["steps"]] == [0, 2]


@pytest.mark.parametrize("dialect", sorted(EMULATORS))
def test_each_dialect_answer_shape_reaches_litellm(dialect):
    """Thinking, a truncated answer and a refusal, each in the provider's own fields, as litellm reads them."""
    lit = litellm_module()
    name, _ = MODELS[dialect]
    with EMULATORS[dialect]() as emulator:
        emulator.state.script[name.split("/", 1)[1]] = [
            {"content": "partial", "finish_reason": "length", "reasoning": "thinking it over"},
            {"finish_reason": "refusal"}]
        answers = [lit.completion(model=name, messages=[{"role": "user", "content": "q"}], api_base=emulator.api_base,
                                  api_key="x", max_tokens=50, num_retries=0, max_retries=0) for _ in range(2)]
    truncated, refused = (a.choices[0] for a in answers)
    assert (truncated.finish_reason, truncated.message.content) == ("length", "partial")
    thinking = getattr(truncated.message, "reasoning_content", None)
    assert thinking == (None if dialect == "openai" else "thinking it over")
    assert refused.finish_reason == "content_filter"  # Anthropic's refusal, Gemini's SAFETY, OpenAI's own
    assert refused.message.content in (None, "", REACT_TEXT)


def test_retry_after_reads_each_provider_form():
    class Err(Exception):
        def __init__(self, headers=None, text=""):
            super().__init__(text)
            self.litellm_response_headers = headers

    def at(seconds: float) -> str:
        return datetime.fromtimestamp(time.time() + seconds, UTC).isoformat(timespec="milliseconds")

    assert retry_after_s(Err({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after_s(Err({"retry-after": "7"})) == 7.0
    assert retry_after_s(Err({"x-ratelimit-reset-requests": "6m0s"})) == 360.0
    assert retry_after_s(Err({"x-ratelimit-reset-tokens": "20ms"})) == 0.02
    # Anthropic: RFC 3339 times; the latest reset of the limits at 0 remaining.
    spent = {"anthropic-ratelimit-requests-reset": at(3), "anthropic-ratelimit-requests-remaining": "0",
             "anthropic-ratelimit-tokens-reset": at(30), "anthropic-ratelimit-tokens-remaining": "5000"}
    assert 2.9 <= retry_after_s(Err(spent)) <= 3.0
    spent["anthropic-ratelimit-tokens-remaining"] = "0"
    assert 29.9 <= retry_after_s(Err(spent)) <= 30.0
    assert retry_after_s(Err({"anthropic-ratelimit-requests-reset": at(-5)})) == 0.0  # already past
    z_form = datetime.fromtimestamp(int(time.time()) + 5, UTC).isoformat().replace("+00:00", "Z")
    assert 3.9 <= retry_after_s(Err({"anthropic-ratelimit-input-tokens-reset": z_form})) <= 5.0
    # Gemini: RetryInfo in the error body, which litellm keeps in the exception's text.
    gemini = ('GeminiException - {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [{"@type": '
              '"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12.5s"}]}}')
    assert retry_after_s(Err({}, gemini)) == 12.5
    assert retry_after_s(Err({"content-type": "application/json"}, "Overloaded")) is None


def test_openrouter_error_in_a_200_body_is_retried_by_its_code():
    lit = litellm_module()
    for code, retried in ((502, True), (429, True), (408, True), (400, False), (403, False)):
        err = lit.APIError(status_code=code, message="OpenrouterException - Provider returned error",
                           llm_provider="openrouter", model="qwen/qwen3-32b")
        assert is_retryable(err) == retried, code
