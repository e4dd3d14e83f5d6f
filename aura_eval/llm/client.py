"""Run batches of model requests through litellm, with cache, retries and a call log.

Every outcome is a `Result`; nothing raises except a cache miss in replay mode:
- status "ok": the response parsed as JSON and matched the prompt's schema;
- status "unparseable": a response came back but did not parse or match (kept raw);
- status "failed": no response after all retries (the error is kept).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the price map

import jsonschema  # noqa: E402
import litellm  # noqa: E402
from tqdm import tqdm  # noqa: E402

from aura_eval.jsonl import write_jsonl  # noqa: E402
from aura_eval.llm import local  # noqa: E402
from aura_eval.llm.cache import ResponseCache, cache_key  # noqa: E402

litellm.telemetry = False
litellm.suppress_debug_info = True
local.register()

RETRYABLE = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.BadGatewayError,
)
# Sampling parameters an endpoint may set; all of them enter the cache key.
SAMPLING_PARAMS = ("temperature", "top_p", "max_tokens", "seed", "stop", "presence_penalty",
                   "frequency_penalty", "reasoning_effort",
                   "mock_response")  # litellm's canned answer, for tests and dry runs


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

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "default"


def endpoint(config: dict, name: str) -> Endpoint:
    """The endpoint of the model entry `name` under the config's `models`."""
    if name not in config.get("models", {}):
        raise KeyError(f"config: model {name!r} is not under 'models'")
    spec = config["models"][name]
    unknown = set(spec.get("params", {})) - set(SAMPLING_PARAMS)
    if unknown:
        raise KeyError(f"config: model {name!r} has unknown params {sorted(unknown)} "
                       f"(allowed: {', '.join(SAMPLING_PARAMS)})")
    return Endpoint(name=name, model=spec["model"], params=dict(spec.get("params", {})),
                    api_base=spec.get("api_base"), api_key_env=spec.get("api_key_env"),
                    structured_output=spec.get("structured_output", True))


def endpoints_for_role(config: dict, role: str) -> list[Endpoint]:
    """The endpoint(s) a config role names: one model or a panel (a list)."""
    roles = config.get("roles", {})
    if role not in roles:
        raise KeyError(f"config: role {role!r} is not set (roles set: {', '.join(sorted(roles))})")
    names = roles[role] if isinstance(roles[role], list) else [roles[role]]
    return [endpoint(config, name) for name in names]


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


@dataclass
class Result:
    request: Request
    status: str  # ok | unparseable | failed
    content: str | None = None
    parsed: dict | None = None
    error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    cache_hit: bool = False
    key: str = ""

    def provenance(self) -> dict:
        """The fields every output row carries about the call that produced it."""
        r = self.request
        return {"prompt": r.prompt_id, "prompt_version": r.prompt_version, "role": r.role,
                "endpoint": r.endpoint.name, "model": r.endpoint.model, "sample": r.sample,
                "status": self.status, "raw_response": self.content, "error": self.error}


def _secrets() -> list[tuple[str, str]]:
    return [(name, value) for name, value in os.environ.items()
            if len(value) >= 8 and re.search(r"(KEY|TOKEN|SECRET|PASSWORD)", name.upper())]


def scrub_secrets(text: str | None) -> str | None:
    """Replace the value of any secret-looking environment variable in `text` by its name."""
    if not text:
        return text
    for name, value in _secrets():
        if value in text:
            text = text.replace(value, f"<{name}>")
    return text


_validators: dict[str, jsonschema.protocols.Validator] = {}


def _validator(schema: dict):
    key = json.dumps(schema, sort_keys=True)
    if key not in _validators:
        _validators[key] = jsonschema.validators.validator_for(schema)(schema)
    return _validators[key]


def parse_json(content: str | None, schema: dict | None) -> tuple[dict | None, str | None]:
    """(object, None) when content is JSON matching schema, else (None, reason)."""
    if content is None:
        return None, "empty response"
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text, strict=False)  # tolerate raw newlines inside strings
    except json.JSONDecodeError as err:
        return None, f"invalid JSON: {err.msg} at char {err.pos}"
    if schema is not None:
        error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(obj))
        if error is not None:
            return None, f"schema mismatch: {error.message[:300]}"
    return obj, None


class ModelClient:
    """Runs requests concurrently, reusing cached responses; one per stage job."""

    def __init__(self, llm_settings: dict, stage: str, progress: bool = True):
        self.settings = llm_settings
        self.stage = stage
        self.cache = ResponseCache(llm_settings["cache"])
        self.replay = bool(llm_settings.get("replay", False))
        self.progress = progress
        self.calls: list[dict] = []
        self.calls_made = 0  # provider calls actually sent (retries included)

    # -- public ---------------------------------------------------------------
    def run(self, requests: list[Request]) -> list[Result]:
        """Results in the order of `requests`. Raises CacheMissError only in replay mode."""
        return asyncio.run(self._run_all(requests))

    def write_call_log(self, path) -> None:
        write_jsonl(path, self.calls, key=("item_id", "endpoint", "sample", "prompt"))

    # -- internals ------------------------------------------------------------
    def _limit(self, provider: str) -> int:
        limits = self.settings.get("concurrency", {})
        return int(limits.get(provider, limits.get("default", 8)))

    async def _run_all(self, requests):
        semaphores: dict[str, asyncio.Semaphore] = {}
        bar = tqdm(total=len(requests), desc=self.stage, file=sys.stderr, disable=not self.progress,
                   mininterval=2.0)

        async def one(req):
            provider = req.endpoint.provider
            sem = semaphores.setdefault(provider, asyncio.Semaphore(self._limit(provider)))
            async with sem:
                result = await self._call(req)
            bar.update(1)
            return result

        try:
            results = await asyncio.gather(*(one(r) for r in requests))
        finally:
            bar.close()
        for result in results:
            self._log(result)
        return list(results)

    def _describe(self, req: Request) -> dict:
        ep = req.endpoint
        return {"model": ep.model, "api_base": ep.api_base, "messages": req.messages,
                "params": {k: ep.params[k] for k in sorted(ep.params)},
                "response_format": self._response_format(req), "sample": req.sample}

    def _response_format(self, req: Request):
        if req.schema is None or not req.endpoint.structured_output:
            return None
        return {"type": "json_schema",
                "json_schema": {"name": req.prompt_id, "schema": req.schema, "strict": False}}

    async def _call(self, req: Request) -> Result:
        described = self._describe(req)
        key = cache_key(described)
        cached = self.cache.get(key)
        if cached is not None:
            result = self._result(req, cached, key, cache_hit=True)
            result.latency_s = 0.0
            return result
        if self.replay:
            raise CacheMissError(f"replay mode: no cached response for stage {self.stage}, item "
                                 f"{req.item_id}, endpoint {req.endpoint.name}, sample {req.sample}")
        response, error, latency = await self._with_retries(req, described)
        if error is not None:
            return Result(request=req, status="failed", error=error, key=key, latency_s=latency)
        self.cache.put(key, described, response)
        return self._result(req, response, key, cache_hit=False)

    async def _with_retries(self, req, described) -> tuple[dict | None, str | None, float]:
        """(response record, None, latency) or (None, error text, latency) after the last retry."""
        max_retries = int(self.settings.get("max_retries", 5))
        backoff = float(self.settings.get("backoff_s", 1.0))
        kwargs = dict(model=req.endpoint.model, messages=req.messages, **req.endpoint.params,
                      timeout=float(self.settings.get("timeout_s", 120)), num_retries=0, max_retries=0)
        if req.endpoint.api_base:
            kwargs["api_base"] = req.endpoint.api_base
        if req.endpoint.api_key_env:
            kwargs["api_key"] = os.environ.get(req.endpoint.api_key_env, "")
        if described["response_format"] is not None:
            kwargs["response_format"] = described["response_format"]
        start = time.perf_counter()
        for attempt in range(max_retries + 1):
            self.calls_made += 1
            try:
                resp = await litellm.acompletion(**kwargs)
            except RETRYABLE as err:
                if attempt == max_retries:
                    return None, scrub_secrets(f"{type(err).__name__}: {err}")[:1000], time.perf_counter() - start
                # Exponential backoff with jitter so parallel jobs do not retry in lockstep.
                await asyncio.sleep(backoff * 2 ** attempt * (0.5 + random.random()))
                continue
            except Exception as err:  # not retryable (bad request, auth, ...): recorded, never raised
                return None, scrub_secrets(f"{type(err).__name__}: {err}")[:1000], time.perf_counter() - start
            latency = time.perf_counter() - start
            return self._response_record(req, resp, latency), None, latency

    def _response_record(self, req, resp, latency) -> dict:
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        cost = 0.0 if req.endpoint.provider == local.PROVIDER else None
        if cost is None:
            try:
                cost = float(litellm.completion_cost(completion_response=resp))
            except Exception:  # price unknown for this model
                cost = None
        return {"content": scrub_secrets(choice.message.content), "finish_reason": choice.finish_reason,
                "tokens_in": getattr(usage, "prompt_tokens", None),
                "tokens_out": getattr(usage, "completion_tokens", None),
                "cost_usd": cost, "latency_s": round(latency, 4)}

    def _result(self, req, response, key, cache_hit) -> Result:
        parsed, problem = parse_json(response["content"], req.schema) if req.schema is not None else (
            None, None)
        return Result(request=req, status="ok" if problem is None else "unparseable",
                      content=response["content"], parsed=parsed, error=problem,
                      tokens_in=response.get("tokens_in"), tokens_out=response.get("tokens_out"),
                      cost_usd=response.get("cost_usd"), latency_s=response.get("latency_s"),
                      cache_hit=cache_hit, key=key)

    def _log(self, result: Result) -> None:
        r = result.request
        self.calls.append({
            "stage": self.stage, "item_id": r.item_id, "role": r.role, "endpoint": r.endpoint.name,
            "model": r.endpoint.model, "prompt": r.prompt_id, "prompt_version": r.prompt_version,
            "sample": r.sample, "key": result.key[:16], "cache_hit": result.cache_hit,
            "status": result.status, "tokens_in": result.tokens_in, "tokens_out": result.tokens_out,
            "latency_s": None if result.latency_s is None else round(result.latency_s, 3),
            "cost_usd": result.cost_usd, "error": result.error,
        })
