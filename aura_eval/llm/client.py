"""Run batches of model requests through litellm, with cache, retries and a call log.

Every outcome is a `Result`; nothing raises except a cache miss in replay mode:
- status "ok": the response parsed as JSON and matched the prompt's schema;
- status "unparseable": a response came back but did not parse or match (kept raw);
- status "failed": no response after all retries (the error is kept).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the price map

import litellm  # noqa: E402
from tqdm import tqdm  # noqa: E402

from aura_eval.jsonl import write_jsonl  # noqa: E402
from aura_eval.llm import local  # noqa: E402
from aura_eval.llm.cache import ResponseCache, cache_key  # noqa: E402
from aura_eval.llm.types import CacheMissError, Request, Result, parse_json  # noqa: E402

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
