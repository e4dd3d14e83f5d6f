"""What a model call is, without the machinery that makes it: endpoints, requests, results.

This module does not import litellm (6-7 s), so planning, analysis and the tests of
stage logic can build requests and read results for free; `aura_eval.llm.client` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from aura_eval.llm.answers import STATUSES, may_decline, parse_json, read_answer  # noqa: F401  (defined there)
from aura_eval.llm.providers import provider_of

# Sampling parameters an endpoint may set; all of them enter the cache key.
SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed", "stop", "presence_penalty",
                   "frequency_penalty", "reasoning_effort",
                   "mock_response")  # litellm's canned answer, for tests and dry runs
# What the model module records about the call that answered a request (`Result.call`, the call
# log, the rows' `call`): stored in the cache with the response at the first call, so a cache
# hit and a replay report the first call's values. A cache row written before provenance was
# recorded reads as None in every field it lacks.
CALL_FIELDS = ("response_id", "system_fingerprint", "response_model", "litellm_version", "params",
               "called_at", "first_latency_s", "tokens_in", "tokens_out", "cost_usd")


def utc_now() -> str:
    """The current UTC time, ISO 8601 with milliseconds and a Z."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CacheMissError(RuntimeError):
    """Replay mode met a request that the cache does not hold."""


@dataclass(frozen=True)
class Endpoint:
    """A named model endpoint from the config: a litellm model string and its parameters."""

    name: str
    model: str
    params: dict = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None  # the name of the variable holding the key, never the key
    structured_output: bool = True
    vendor: str | None = None  # the model entry's vendor (leave-one-vendor-out; the simulator's judges)
    batch: bool = False  # send misses through the provider's batch API (aura_eval.llm.batch)
    price: dict | None = None  # the model entry's `price` (USD per million tokens), where it gives one

    @property
    def provider(self) -> str:
        """The model string's provider (`providers.provider_of`)."""
        return provider_of(self.model)


def endpoint_from(name: str, spec: dict) -> Endpoint:
    """The endpoint of one model entry (`models.<name>` in the config)."""
    unknown = set(spec.get("params", {})) - set(SAMPLING_PARAMS)
    if unknown:
        raise KeyError(f"config: model {name!r} has unknown params {sorted(unknown)} "
                       f"(allowed: {', '.join(SAMPLING_PARAMS)})")
    return Endpoint(name=name, model=spec["model"], params=dict(spec.get("params", {})),
                    api_base=spec.get("api_base"), api_key_env=spec.get("api_key_env"),
                    structured_output=spec.get("structured_output", True), vendor=spec.get("vendor"),
                    batch=bool(spec.get("batch", False)), price=spec.get("price"))


def endpoints(entries: list[dict]) -> list[Endpoint]:
    """Endpoints from a rule's model entries: `[{"name": ..., **models.<name>}]`, in role order."""
    return [endpoint_from(e["name"], {k: v for k, v in e.items() if k != "name"}) for e in entries]


@dataclass
class Request:
    item_id: str
    endpoint: Endpoint
    messages: list[dict]
    prompt_id: str
    prompt_version: int
    role: str
    schema: dict | None = None
    sample: int = 0
    # What the stage knows of the unit it asks about (a rollout's pair label, dimension and agent
    # group; a rewrite's source steps): only the simulator (aura_sim) reads it, so that it answers
    # from the request's facts, never by parsing the rendered prompt; it is never sent to a provider
    # nor part of the cache key.
    facts: dict | None = None


@dataclass
class Result:
    request: Request
    status: str  # one of answers.STATUSES
    content: str | None = None
    parsed: dict | None = None
    error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    # of tokens_out, the hidden reasoning tokens where the provider reports them apart (None: not reported)
    tokens_reasoning: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    cache_hit: bool = False
    key: str = ""
    attempts: int = 0  # provider calls sent for it (0: answered from the cache)
    wait_s: float = 0.0  # time spent waiting between attempts (rate limits, backoff)
    auth_error: bool = False  # failed because the key is missing or refused
    call: dict = field(default_factory=dict)  # CALL_FIELDS of the first call (from the cache)
    reasoning: str | None = None  # inline reasoning blocks and the provider's separate reasoning, joined
    finish_reason: str | None = None  # as litellm gives it (a batch result: the provider's own)
    refusal: str | None = None  # the provider's refusal field (OpenAI's message.refusal), where it gave one

    def provenance(self) -> dict:
        """The fields every output row carries about the call that produced it. `call` holds
        the cache key's first 16 hex digits (as in the call log) and CALL_FIELDS, all read
        from the cache record, so a replay writes the same row."""
        r = self.request
        return {"prompt": r.prompt_id, "prompt_version": r.prompt_version, "role": r.role,
                "endpoint": r.endpoint.name, "model": r.endpoint.model, "sample": r.sample,
                "status": self.status, "raw_response": self.content, "error": self.error,
                "call": {"key": self.key[:16], **{name: self.call.get(name) for name in CALL_FIELDS}}}


def read_result(req: Request, content: str | None, finish_reason: str | None = None, refusal: str | None = None,
             reasoning: str | None = None, **fields) -> Result:
    """The Result of one response to `req`: status, parsed object and reason by `answers.read_answer`
    (a refusal in the text counts as one for every role but an agent's). The model module and the
    inspect_ai task (aura_eval.evaluate.inspect_task) both read answers through here; `fields` are
    the rest of Result's (tokens, cost, cache, call provenance)."""
    read = read_answer(content, req.schema, finish_reason, refusal, reasoning, text_refusals=may_decline(req.role))
    return Result(request=req, status=read.status, content=content, parsed=read.parsed, error=read.reason,
                  reasoning=read.reasoning, finish_reason=finish_reason, refusal=refusal, **fields)
