"""litellm's wire: how a request goes out and how its answer and errors read. The completion
arguments and the response format (which enter the cache key: `describe`), the retry rules and the
waits a provider asks (Retry-After and its kin), secrets scrubbed from what is kept, the preflight's
probe and the response record a call stores. litellm itself is imported on the first request that
needs it (`litellm_module`), never by importing this module."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from email.utils import parsedate_to_datetime

import tenacity

from aura_eval.llm import auth, local, pricing, providers
from aura_eval.llm.types import Request

_litellm = None
_litellm_version = None


def litellm_version() -> str | None:
    """The installed litellm's version (from its metadata: no import)."""
    global _litellm_version
    if _litellm_version is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _litellm_version = version("litellm")
        except PackageNotFoundError:
            _litellm_version = ""
    return _litellm_version or None


def litellm_module():
    """litellm, imported on the first request that needs it (seconds of CPU and some 200 MB,
    which a job whose models are all simulated never pays), with the embedded model's provider
    and the registered responders' litellm hooks (the simulator's)."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the price map
        # nor of Anthropic's beta-header table, which litellm otherwise fetches (5 s timeout) on the
        # first Anthropic call of every job: the installed copy is the one its version was tested with
        os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        local.register(litellm)
        providers.litellm_loaded(litellm)
        _litellm = litellm
    return _litellm


def _retryable_errors(lit) -> tuple:
    return (lit.RateLimitError, lit.InternalServerError, lit.ServiceUnavailableError, lit.Timeout,
            lit.APIConnectionError, lit.BadGatewayError)


# Header values a provider's error text may quote: `Authorization: Bearer ...`, `x-api-key: ...`.
_HEADER_VALUE = re.compile(r"(?i)\b(authorization|x-api-key|api-key)(['\"]?\s*[:=]\s*['\"]?)(bearer\s+)?"
                           r"[^\s'\",};)]+")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")


def is_auth_error(err: Exception) -> bool:
    """A live call's missing or refused key (`auth.by_litellm_class_or_text`)."""
    return auth.by_litellm_class_or_text(err, litellm_module())

def is_retryable(err: BaseException) -> bool:
    lit = litellm_module()
    return (isinstance(err, _retryable_errors(lit)) or _is_retryable_api_error(lit, err)) and not is_auth_error(err)


def _is_retryable_api_error(lit, err: BaseException) -> bool:
    """An error litellm could not class by its HTTP status but that carries a retryable code: OpenRouter
    answers HTTP 200 with `{"error": {"code": 502, ...}}` when the upstream model fails after it took
    the request, which litellm raises as a plain APIError with `status_code` 502."""
    return (type(err) is lit.APIError and isinstance(getattr(err, "status_code", None), int)
            and (err.status_code in (408, 429) or err.status_code >= 500))


def _secrets(names=()) -> list[tuple[str, str]]:
    """(name, value) of every variable named in `names` (the key variables the models name)
    and of every variable whose name looks secret."""
    found = {name: os.environ[name] for name in names if os.environ.get(name)}
    found |= {name: value for name, value in os.environ.items()
              if re.search(r"(KEY|TOKEN|SECRET|PASSWORD)", name.upper())}
    return sorted(((n, v) for n, v in found.items() if len(v) >= 8), key=lambda nv: -len(nv[1]))


def scrub_secrets(text: str | None, names=()) -> str | None:
    """`text` with every secret value replaced by its variable's name, and every
    Authorization / x-api-key / bearer value replaced by a mark."""
    if not text:
        return text
    for name, value in _secrets(names):
        if value in text:
            text = text.replace(value, f"<{name}>")
    text = _HEADER_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}<redacted>", text)
    return _BEARER.sub("Bearer <redacted>", text)


# OpenAI's reset headers are durations (`1s`, `6m0s`, `20ms`).
_OPENAI_RESETS = ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
# Anthropic's are RFC 3339 times (`2026-12-04T15:23:02Z`), one per limit, each beside its `-remaining`.
_ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
# Gemini puts the wait in the error body: a google.rpc.RetryInfo detail, `"retryDelay": "7s"` (a
# protobuf Duration); litellm keeps the body in the exception's text.
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def _seconds_until(value: str) -> float | None:
    """Seconds from now to an RFC 3339 time, None when `value` is not one."""
    try:
        return max(0.0, datetime.fromisoformat(value.strip()).timestamp() - time.time())
    except ValueError:
        return None


def _anthropic_reset_s(headers) -> float | None:
    """The wait Anthropic's `anthropic-ratelimit-*-reset` times ask: the latest reset of the limits
    at 0 remaining (of all limits, when none says so)."""
    resets = {limit: headers.get(f"anthropic-ratelimit-{limit}-reset") for limit in _ANTHROPIC_LIMITS}
    resets = {limit: value for limit, value in resets.items() if value}
    spent = [limit for limit in resets if headers.get(f"anthropic-ratelimit-{limit}-remaining") == "0"]
    waits = [w for limit in (spent or resets) if (w := _seconds_until(resets[limit])) is not None]
    return max(waits) if waits else None


def retry_after_s(err: BaseException) -> float | None:
    """The wait a refused request asks for, in the provider's own form: `retry-after-ms`;
    `Retry-After` (seconds or an HTTP date); OpenAI's reset durations (`x-ratelimit-reset-requests:
    1s`); Anthropic's reset times (`anthropic-ratelimit-requests-reset`, RFC 3339); Gemini's
    `RetryInfo.retryDelay` in the error body. None when it asks for none."""
    headers = getattr(err, "litellm_response_headers", None) or getattr(getattr(err, "response", None),
                                                                        "headers", None) or {}
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
            except (TypeError, ValueError):
                pass
    for name in _OPENAI_RESETS:
        value = headers.get(name)
        if value:
            parts = re.findall(r"([\d.]+)(ms|s|m|h)", value)
            if parts:
                scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
                return sum(float(n) * scale[u] for n, u in parts)
    reset = _anthropic_reset_s(headers)
    if reset is not None:
        return reset
    delay = _RETRY_DELAY.search(str(err))
    return float(delay.group(1)) if delay else None


def schema_in_prompt(messages: list[dict], schema: dict) -> list[dict]:
    """`messages` with the JSON schema appended to the last one, for a provider that takes no schema
    in `response_format` (providers.JSON_OBJECT_PROVIDERS): its JSON mode needs the word "json" in
    the prompt, and the schema there is what tells the model which object to write."""
    *head, last = messages
    note = ("\n\nAnswer with one JSON object that matches this JSON schema: "
            + json.dumps(schema, sort_keys=True))
    return [*head, {**last, "content": f"{last['content']}{note}"}]


def without_prefix_items(schema):
    """`schema` with every `prefixItems` list (and its `"items": false`) turned into `items: {"anyOf":
    [...]}`, for a provider whose structured outputs take no prefixItems (providers.NO_PREFIX_ITEMS_PROVIDERS).
    Looser (any order, any count), which the stages' own checks catch: the gate and `assemble` read
    every rewrite list whatever the schema allowed."""
    if isinstance(schema, list):
        return [without_prefix_items(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: without_prefix_items(v) for k, v in schema.items() if k != "prefixItems"}
    if "prefixItems" in schema:
        out["items"] = {"anyOf": without_prefix_items(schema["prefixItems"])}
    return out


def response_format_of(endpoint, schema: dict | None, name: str) -> dict | None:
    """The response_format a request of `endpoint` asking for `schema` carries (None without a schema
    or where the entry sets `structured_output: false`), adapted to what the provider accepts: it enters
    the cache key (`describe`) as well as the request."""
    if schema is None or not endpoint.structured_output:
        return None
    if endpoint.provider in providers.JSON_OBJECT_PROVIDERS:
        # Sent as {"type": "json_object"} with the schema in the prompt (schema_in_prompt); kept
        # here so that the cache key covers the schema the prompt carries.
        return {"type": "json_object", "schema": schema}
    if endpoint.provider in providers.NO_PREFIX_ITEMS_PROVIDERS:
        schema = without_prefix_items(schema)
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def completion_kwargs(endpoint, messages: list[dict], response_format: dict | None, timeout_s: float,
                      environ=os.environ) -> dict:
    """The arguments of `litellm.acompletion`/`completion` for one request: the endpoint's model, params,
    address and key (read from the variable the entry names), the response format as the provider takes
    it, and no retries of litellm's own (the caller retries). The live calls and the preflight send
    through here, so both send what the provider accepts."""
    kwargs = dict(model=endpoint.model, messages=messages, **endpoint.params, timeout=float(timeout_s),
                  num_retries=0, max_retries=0)
    if endpoint.api_base:
        kwargs["api_base"] = endpoint.api_base
    if endpoint.api_key_env:
        kwargs["api_key"] = environ.get(endpoint.api_key_env, "")
    if response_format is not None and response_format["type"] == "json_object":
        kwargs.update(response_format={"type": "json_object"},
                      messages=schema_in_prompt(messages, response_format["schema"]))
    elif response_format is not None:
        kwargs["response_format"] = response_format
    return kwargs


def probe(endpoint, messages: list[dict], schema: dict | None, timeout_s: float, environ=os.environ):
    """One request outside the cache, the budget and the retries (the preflight's: its answer is not
    a research answer and must never be replayed as one); litellm's response, or its exception."""
    fmt = response_format_of(endpoint, schema, "preflight")
    return litellm_module().completion(**completion_kwargs(endpoint, messages, fmt, timeout_s, environ))


class RetryWait(tenacity.wait.wait_base):
    """The provider's Retry-After where it gives one, else exponential backoff with jitter
    (so parallel jobs do not retry in lockstep)."""

    def __init__(self, backoff_s: float):
        self.backoff = tenacity.wait_random_exponential(multiplier=backoff_s, max=60)

    def __call__(self, retry_state) -> float:
        asked = retry_after_s(retry_state.outcome.exception())
        return asked if asked is not None else self.backoff(retry_state)


class StopAfterWait(tenacity.stop.stop_base):
    """Stop when the next wait would take the request's total wait past `max_wait_s`."""

    def __init__(self, max_wait_s: float, wait: RetryWait):
        self.max_wait_s, self.wait = max_wait_s, wait

    def __call__(self, retry_state) -> bool:
        return retry_state.idle_for + self.wait(retry_state) > self.max_wait_s


def params_of(req: Request) -> dict:
    """The endpoint's sampling parameters, keys sorted: as the request's description holds them and
    as a result's `call["params"]` records them."""
    return {k: req.endpoint.params[k] for k in sorted(req.endpoint.params)}


def describe(req: Request) -> dict:
    """What the cache keys a request by (`cache_key(describe(req))`): model, api_base, messages,
    sorted params, the response_format sent and the sample index; for a responder provider also
    the item's facts (its answer reads them). Never the key, timeout or retry settings. A function,
    not a method, so that the forecast keys a run's requests as the client will (without litellm);
    `req.endpoint` must carry its model entry's facts (`settings.CallSettings.endpoint`)."""
    ep = req.endpoint
    described = {"model": ep.model, "api_base": ep.api_base, "messages": req.messages,
                 "params": params_of(req),
                 "response_format": response_format_of(ep, req.schema, req.prompt_id), "sample": req.sample}
    if ep.provider in providers.RESPONDER_PROVIDERS:  # the answer depends on the item's facts too
        described["facts"] = req.facts
    return described


def usage_reasoning(usage) -> int | None:
    """The hidden reasoning tokens a litellm usage reports apart (`completion_tokens_details.reasoning_tokens`;
    already counted in its completion tokens), or None where it does not say."""
    details = getattr(usage, "completion_tokens_details", None)
    value = details.get("reasoning_tokens") if isinstance(details, dict) else getattr(details, "reasoning_tokens", None)
    return value if isinstance(value, int) else None




def retrying(backoff_s: float, max_retries: int, max_wait_s: float) -> tenacity.AsyncRetrying:
    """The retry rules of one request: retried on rate limits, server errors, timeouts and dropped
    connections (`is_retryable`), never on a missing or refused key; waits what the provider asks
    (`retry_after_s`), else backs off exponentially with jitter; stops after `max_retries` retries or
    when the next wait would take the request past `max_wait_s` of waiting in all."""
    wait = RetryWait(float(backoff_s))
    return tenacity.AsyncRetrying(retry=tenacity.retry_if_exception(is_retryable), wait=wait, reraise=True,
                                  stop=tenacity.stop_after_attempt(int(max_retries) + 1)
                                  | StopAfterWait(float(max_wait_s), wait))


def response_record(req: Request, resp, latency: float, called_at: str, scrub) -> dict:
    """The record the cache stores of litellm's response `resp` to `req`: the answer's fields
    (`scrub`bed of secrets), tokens, cost (litellm's price, else the entry's; an in-process model's
    is 0), latency and the provenance of the call."""
    choice = resp.choices[0]
    usage = getattr(resp, "usage", None)
    cost = 0.0 if req.endpoint.provider in providers.IN_PROCESS_PROVIDERS else None
    if cost is None:
        try:
            cost = float(litellm_module().completion_cost(completion_response=resp))
        except Exception:  # price unknown to litellm: the model entry's `price`, if any
            usage_in, usage_out = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
            cost = pricing.cost_usd(req.endpoint, usage_in, usage_out)
    message = choice.message
    return {"content": scrub(message.content), "finish_reason": choice.finish_reason,
            # the reasoning a provider returns apart (litellm: reasoning_content, also from
            # Anthropic's thinking blocks) and OpenAI's refusal field (also Anthropic's refusal
            # explanation); a record from before these were stored reads them as None
            "reasoning": scrub(getattr(message, "reasoning_content", None) or None),
            "refusal": scrub(getattr(message, "refusal", None) or None),
            "tokens_in": getattr(usage, "prompt_tokens", None),
            "tokens_out": getattr(usage, "completion_tokens", None),
            "tokens_reasoning": usage_reasoning(usage),
            "cost_usd": cost, "latency_s": round(latency, 4),
            "provenance": {"response_id": getattr(resp, "id", None),
                           "system_fingerprint": getattr(resp, "system_fingerprint", None),
                           "response_model": getattr(resp, "model", None), "litellm_version": litellm_version(),
                           "prompt": req.prompt_id, "prompt_version": req.prompt_version,
                           "params": params_of(req), "called_at": called_at}}
