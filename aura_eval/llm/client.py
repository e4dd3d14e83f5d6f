"""Run batches of model requests through litellm, with cache, retries and a call log; a model
whose entry sets `batch: true` goes through its provider's batch API instead (`llm.batch`).

Every outcome is a `Result`; nothing raises except a cache miss in replay mode, a stop
(`stop.RunStopped`: Ctrl-C, SIGTERM, the run's stop mark) and a cache file that cannot be used or
written (`cache.CacheError`, naming the file and the answers lost):
- status "ok": the response held a JSON object matching the prompt's schema (`answers.read_answer`);
- "unparseable", "truncated", "refused": an answer came back (paid, cached, kept raw) that holds no
  such object, was cut at max_tokens, or declined; the reason says which and why;
- status "failed": no response after all retries (the error is kept).
The statuses, and which are cached or count against llm.max_failed_share: `answers.STATUS_TABLE`.

Each answer is paid once: identical requests in a job share one call, and across processes on
one cache file a request claims a lease first (`cache.ResponseCache.claim`); a request another
live process is sending is waited for, never sent again.

Each result's `call` holds the provenance of the call that answered it (`types.CALL_FIELDS`):
stored in the cache record at the first call and read back from there on every hit, so the
call log and the rows are the same on a replay. Requests of a responder provider (the simulator,
`aura_sim`: `providers.register_responder`) are answered in-process by the registered function,
never cached: they carry their prompt and parameters only (no time, latency, response id or
litellm version).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import sys
import time

import tenacity
from tqdm import tqdm

from aura_eval.util.jsonl import write_jsonl
from aura_eval.llm import local, pricing, providers, stop
from aura_eval.llm import settings as call_settings
from aura_eval.llm.budget import Budget, estimate_usd, refusal_text
from aura_eval.llm.cache import CacheError, Owner, ResponseCache, cache_key, valid_unicode
from aura_eval.llm.ratelimit import Pacer, estimated_tokens
from aura_eval.llm.types import CALL_FIELDS, CacheMissError, Request, Result, read_result, utc_now

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


def call_of(record: dict) -> dict:
    """CALL_FIELDS of a cached response record (None where a row from before provenance lacks one)."""
    prov = record.get("provenance") or {}
    out = {name: prov.get(name) for name in CALL_FIELDS}
    out.update(tokens_in=record.get("tokens_in"), tokens_out=record.get("tokens_out"),
               cost_usd=record.get("cost_usd"), first_latency_s=record.get("latency_s"))
    return out


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


# Errors a retry cannot mend: a missing or refused key. litellm classes "Missing credentials"
# as a server error, so the text decides too.
_AUTH_TEXT = re.compile(r"missing credentials|api[_ ]key.*(not set|missing|invalid)|incorrect api key|unauthori[sz]ed",
                        re.I)
# Header values a provider's error text may quote: `Authorization: Bearer ...`, `x-api-key: ...`.
_HEADER_VALUE = re.compile(r"(?i)\b(authorization|x-api-key|api-key)(['\"]?\s*[:=]\s*['\"]?)(bearer\s+)?"
                           r"[^\s'\",};)]+")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")


def is_auth_error(err: Exception) -> bool:
    lit = litellm_module()
    return isinstance(err, (lit.AuthenticationError, lit.PermissionDeniedError)) or bool(_AUTH_TEXT.search(str(err)))


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
    from datetime import datetime

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
            from email.utils import parsedate_to_datetime

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
    the cache key (`ModelClient.describe`) as well as the request."""
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


class _Wait(tenacity.wait.wait_base):
    """The provider's Retry-After where it gives one, else exponential backoff with jitter
    (so parallel jobs do not retry in lockstep)."""

    def __init__(self, backoff_s: float):
        self.backoff = tenacity.wait_random_exponential(multiplier=backoff_s, max=60)

    def __call__(self, retry_state) -> float:
        asked = retry_after_s(retry_state.outcome.exception())
        return asked if asked is not None else self.backoff(retry_state)


class _StopAfterWait(tenacity.stop.stop_base):
    """Stop when the next wait would take the request's total wait past `max_wait_s`."""

    def __init__(self, max_wait_s: float, wait: _Wait):
        self.max_wait_s, self.wait = max_wait_s, wait

    def __call__(self, retry_state) -> bool:
        return retry_state.idle_for + self.wait(retry_state) > self.max_wait_s


def describe(req: Request) -> dict:
    """What the cache keys a request by (`cache_key(describe(req))`): model, api_base, messages,
    sorted params, the response_format sent and the sample index; for a responder provider also
    the item's facts (its answer reads them). Never the key, timeout or retry settings. A function,
    not a method, so that the forecast keys a run's requests as the client will (without litellm);
    `req.endpoint` must carry its model entry's facts (`settings.CallSettings.endpoint`)."""
    ep = req.endpoint
    described = {"model": ep.model, "api_base": ep.api_base, "messages": req.messages,
                 "params": ModelClient.params_of(req),
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


class ModelClient:
    """Runs requests concurrently, reusing cached responses; one per stage job."""

    def __init__(self, llm_settings: dict, stage: str, progress: bool = True):
        self.settings = llm_settings
        self.call = call_settings.of(llm_settings)  # timeouts, retries, limits, ...: what changes no answer
        self.stage = stage
        self.replay = bool(llm_settings.get("replay", False))
        # A replay sends nothing, so it reads the cache read-only and writes nothing to it.
        self.cache = ResponseCache(llm_settings["cache"], self.call.cache_on_network_fs, readonly=self.replay)
        self.progress = progress
        self.calls: list[dict] = []
        self.calls_made = 0  # provider calls actually sent (retries included)
        self.key_names: set[str] = set()  # the key variables of the endpoints asked so far
        self._respond: dict = {}  # provider -> its registered responder's answer function for this job, or None
        self._said_damaged: set[str] = set()  # damaged cache rows already named in the job's log
        # Across runs sharing the cache file, one sender per request: this process's leases
        # (cache.claim), renewed while their requests are in flight.
        self.owner = Owner.this_process()
        self._leases: set[str] = set()
        self.lease_waits = 0  # requests answered by another process's call after waiting on its lease
        # Why this job stopped sending (a stop mark, a signal, a failed cache write), once it has.
        self._stopping: str | None = None
        self._write_failed: CacheError | None = None
        self.unstored = 0  # answers received that could not be stored (the failed write and after)
        self.invalid_unicode = 0  # characters of invalid Unicode replaced by U+FFFD in stored answers
        # None without llm.budget_usd, and in a replay (no call is sent, nothing is written)
        self.budget = None if self.replay else Budget.of(llm_settings["cache"], self.call.budget_usd)
        # The run's rate limits this job calls under (`rate_limits_paced`: {resource: per minute},
        # see aura_eval.llm.ratelimit): every call sent, retries included, waits for its turn in
        # the limit's bucket, which all jobs on this cache file share.
        self.pacer = Pacer(llm_settings.get("rate_limits_paced") or {}, llm_settings["cache"])

    # -- public ---------------------------------------------------------------
    def run(self, requests: list[Request]) -> list[Result]:
        """Results in the order of `requests`. Raises CacheMissError only in replay mode, and
        providers.NoResponderError for a request of a responder provider that nothing registered."""
        # the model entries' batch, price and key variable come with the call settings, not the request
        requests = [dataclasses.replace(r, endpoint=self.call.endpoint(r.endpoint)) for r in requests]
        if not self.replay:
            self.check_stop()  # a job started after Ctrl-C sends nothing
        self.key_names |= {r.endpoint.api_key_env for r in requests if r.endpoint.api_key_env}
        results: list[Result | None] = [None] * len(requests)
        remote, batched = [], []
        for i, req in enumerate(requests):
            respond = self._responder(req)
            if respond is not None:
                results[i] = self._answer_in_process(req, respond)
            else:
                (batched if req.endpoint.batch else remote).append(i)
        if batched:  # submitted first, so the provider works on them while the live calls run
            from aura_eval.llm.batch import BatchRun

            batch_run = BatchRun(self, [requests[i] for i in batched], litellm_module)
            batch_run.submit()
        if remote:
            # litellm is loaded only when a request must be sent, so a replay and a rerun that finds
            # every answer cached never pay its import (about 5 s of CPU); and it is loaded before any
            # lease is claimed: its seconds must not pass between a claim and its send.
            if not self.replay and any(self.cache.get(cache_key(self.describe(requests[i]))) is None for i in remote):
                litellm_module()
            for i, result in zip(remote, asyncio.run(self._run_all([requests[i] for i in remote]))):
                results[i] = result
        if batched:
            for i, result in zip(batched, batch_run.wait()):
                results[i] = result
        return results

    def write_call_log(self, path) -> None:
        write_jsonl(path, self.calls, key=("item_id", "endpoint", "sample", "prompt"))

    def scrub(self, text: str | None) -> str | None:
        return scrub_secrets(text, self.key_names)

    # -- for the batch path (batch.BatchRun): the steps a live call takes ------
    @staticmethod
    def params_of(req: Request) -> dict:
        """The endpoint's sampling parameters, keys sorted: as the request's description holds
        them and as a result's `call["params"]` records them."""
        return {k: req.endpoint.params[k] for k in sorted(req.endpoint.params)}

    def describe(self, req: Request) -> dict:
        """`describe(req)`: what the cache keys the request by."""
        return describe(req)

    def result_from(self, req: Request, response: dict, key: str, cache_hit: bool) -> Result:
        """The Result of a response record (as the cache stores it): its status, parsed object and
        reason from `answers.read_answer` (text, finish reason, refusal field, separate reasoning; a
        record from before those were stored reads them as None); tokens, cost and latency from the
        record, `call` from its provenance (`call_of`). Attempts and waits are left at 0: the caller
        sets them."""
        result = read_result(req, response["content"], response.get("finish_reason"), response.get("refusal"),
                             response.get("reasoning"), tokens_in=response.get("tokens_in"),
                             tokens_out=response.get("tokens_out"), tokens_reasoning=response.get("tokens_reasoning"),
                             cost_usd=response.get("cost_usd"),
                             latency_s=response.get("latency_s"), cache_hit=cache_hit, key=key, call=call_of(response))
        if result.parsed is not None:  # an escape such as "\ud800" inside the answer's JSON: never written as is
            result.parsed = valid_unicode(result.parsed)[0]
        return result

    def cached(self, key: str) -> dict | None:
        """The cache's record of `key`, or None; a row that fails its checksum is None too, and the
        job's log says so (once per key): the call is made again and its answer replaces the row."""
        record = self.cache.get(key)
        if record is None and key in self.cache.damaged and key not in self._said_damaged:
            self._said_damaged.add(key)
            print(f"{self.stage}: the cached answer {key[:16]} in {self.cache.path} is damaged "
                  f"({self.cache.damaged[key]}): not used" + ("" if self.replay else "; asked again, and "
                                                               "the new answer replaces it"), file=sys.stderr)
        return record

    def raise_replay_miss(self, req: Request, described: dict, key: str):
        """Raise CacheMissError naming the stage, item, endpoint, sample and key. A replay writes
        nothing to the cache, so the request's description goes to the job's log as one line
        (`replay miss: {json}`), where `cache explain` finds it. Never returns."""
        print("replay miss: " + json.dumps({"key": key, "stage": self.stage, "item_id": req.item_id,
                                            "prompt": req.prompt_id, "reason": "replay miss", "request": described},
                                           sort_keys=True, ensure_ascii=False), file=sys.stderr)
        why = "no cached response"
        if key in self.cache.damaged:
            why = (f"the cached response is damaged ({self.cache.damaged[key]}; run `python -m aura_eval cache "
                   f"repair {self.cache.path}`, then rerun without replay to ask it again)")
        raise CacheMissError(f"replay mode: {why} for stage {self.stage}, item "
                             f"{req.item_id}, endpoint {req.endpoint.name}, sample {req.sample} (key "
                             f"{key[:16]}; `python -m aura_eval cache explain {self.cache.path} {key[:16]}` "
                             f"names what differs from the nearest cached request)")

    def reserve_budget(self, req: Request, key: str) -> tuple[int | None, str | None]:
        """Reserve the most a call of `req` may cost under `llm.budget_usd` (budget.py), before
        it is sent: (reservation, None), to settle with `budget.settle` once its cost is known;
        (None, None) without a budget; (None, why) when the budget refuses it or the model has
        no price (the call must then not be sent)."""
        if self.budget is None:
            return None, None
        estimate = estimate_usd(req.endpoint, litellm_module().token_counter(model=req.endpoint.model,
                                                                               messages=req.messages))
        if estimate is None:
            return None, (f"budget set (llm.budget_usd) but model {req.endpoint.model!r} of endpoint "
                          f"{req.endpoint.name!r} has no price: add `price` to its entry under models")
        hold, spent = self.budget.reserve(key, self.stage, req.endpoint.model, estimate)
        return (hold, None) if hold is not None else (None, refusal_text(self.budget.budget, spent))

    def log_call(self, result: Result) -> None:
        """Append the result's row to this job's call log (`calls`, written by `write_call_log`):
        once per request, in the order the caller logs them."""
        r = result.request
        self.calls.append({
            "stage": self.stage, "item_id": r.item_id, "role": r.role, "endpoint": r.endpoint.name,
            "model": r.endpoint.model, "prompt": r.prompt_id, "prompt_version": r.prompt_version,
            "sample": r.sample, "key": result.key[:16], "cache_hit": result.cache_hit,
            "status": result.status, "tokens_in": result.tokens_in, "tokens_out": result.tokens_out,
            "tokens_reasoning": result.tokens_reasoning,
            "latency_s": None if result.latency_s is None else round(result.latency_s, 3),
            "attempts": result.attempts, "wait_s": result.wait_s, "auth_error": result.auth_error,
            "cost_usd": result.cost_usd, "error": result.error,
            # The first call's provenance, from the cache (stable on replay, unlike latency_s).
            **{name: result.call.get(name) for name in CALL_FIELDS if name not in ("tokens_in", "tokens_out",
                                                                                   "cost_usd")},
        })

    # -- internals ------------------------------------------------------------
    def _responder(self, req: Request):
        """The answer function of the request's provider for this job (its registered responder's,
        made once per client), or None where litellm answers (`providers.responder`)."""
        provider = req.endpoint.provider
        if provider not in self._respond:
            responder_for = providers.responder(provider, req.endpoint.model)
            self._respond[provider] = None if responder_for is None else responder_for(self.settings)
        return self._respond[provider]

    def _answer_in_process(self, req: Request, respond) -> Result:
        """A registered responder's answer, in-process and without the cache (recomputing it is
        cheaper than a lookup, and it is the same on every run; replay mode answers it too)."""
        key = cache_key(self.describe(req))
        start = time.perf_counter()
        # Not cached, so nothing of this call is stored: no time, latency or response id (they
        # would differ on every run); the prompt and parameters are the request's.
        call = {name: None for name in CALL_FIELDS} | {"params": self.params_of(req), "cost_usd": 0.0}
        self.calls_made += 1
        try:
            answer = respond(req)
        except providers.ResponderFailure as err:  # no answer: failed, like a call out of retries
            result = Result(request=req, status="failed", error=str(err), key=key, attempts=1, call=call,
                            latency_s=time.perf_counter() - start)
            self.log_call(result)
            return result
        record = answer if isinstance(answer, dict) else {"content": answer}
        # the usage the responder reports (the simulator's planted lengths), priced as the entry's
        # `price` prices them (a simulated model standing in for a priced one), else free
        cost = pricing.cost_usd(req.endpoint, record.get("tokens_in"), record.get("tokens_out"))
        call.update(cost_usd=0.0 if cost is None else cost, tokens_in=record.get("tokens_in"),
                    tokens_out=record.get("tokens_out"))
        result = self.result_from(req, {**record, "cost_usd": call["cost_usd"],
                                        "latency_s": time.perf_counter() - start}, key, cache_hit=False)
        result.attempts = 1
        result.call = call
        self.log_call(result)
        return result

    def _limit(self, provider: str) -> int:
        return self.call.concurrency_of(provider)

    async def _run_all(self, requests):
        semaphores: dict[str, asyncio.Semaphore] = {}
        first: dict[str, asyncio.Task] = {}  # cache key -> the task that answers it
        bar = tqdm(total=len(requests), desc=self.stage, file=sys.stderr, disable=not self.progress,
                   mininterval=2.0)

        async def send(req, described, key):
            provider = req.endpoint.provider
            sem = semaphores.setdefault(provider, asyncio.Semaphore(self._limit(provider)))
            async with sem:
                return await self._call(req, described, key)

        async def one(req):
            described = self.describe(req)
            key = cache_key(described)
            if key in first:  # the same request again in this job: one call, its answer shared
                answered = await first[key]
                result = self._shared(req, answered)
            else:
                first[key] = asyncio.ensure_future(send(req, described, key))
                result = await first[key]
            bar.update(1)
            return result

        tasks = [asyncio.ensure_future(one(r)) for r in requests]
        renewer = None if self.replay else self.cache.renewer(lambda: tuple(self._leases), self.owner)
        try:
            await self._until_done_or_stopped(tasks)
        finally:
            if renewer is not None:
                renewer.stop()
            bar.close()
        results = [task.result() for task in tasks]
        for result in results:
            self.log_call(result)
        return results

    async def _until_done_or_stopped(self, tasks: list) -> None:
        """Wait for every task, watching for a stop (the run's mark, a signal, a failed cache write).
        On a stop: nothing more is sent; the requests in flight get `stop.GRACE_S` to be answered and
        stored, the rest are cancelled (never retried); then RunStopped (or the write's CacheError)
        with what happened, and the job writes no output. Any other error propagates."""
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=stop.POLL_S, return_when=asyncio.FIRST_EXCEPTION)
            errors = [t.exception() for t in done if not t.cancelled() and t.exception() is not None]
            other = [e for e in errors if not isinstance(e, stop.RunStopped)
                     and not (isinstance(e, CacheError) and self._write_failed is not None)]
            if other:
                for task in pending:
                    task.cancel()
                raise other[0]
            if self._stopping is None and not self.replay:
                self._stopping = stop.requested() or ("a cache write failed" if self._write_failed else None) or (
                    str(errors[0]) if errors else None)
            if self._stopping is not None:
                break
        if not pending and self._stopping is None:
            return
        began = time.monotonic()
        if pending:
            _, pending = await asyncio.wait(pending, timeout=stop.GRACE_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        answered = sum(t.done() and not t.cancelled() and t.exception() is None for t in tasks)
        summary = (f"{answered} of {len(tasks)} requests answered (every answer received is in the cache"
                   f"{'' if not self.unstored else f' but {self.unstored}'}), {len(pending)} in flight cancelled "
                   f"after {time.monotonic() - began:.1f} s, the rest never sent; no output written")
        if self._write_failed is not None:
            raise CacheError(f"{self._write_failed} This job sent nothing more after the failed write: "
                             f"{self.unstored} answer(s) received could not be stored (paid, and asked again on the "
                             f"rerun); {summary}.", self.cache.path)
        raise stop.RunStopped(f"{self.stage}: stopped ({self._stopping}): {summary}. A plain rerun sends only "
                              f"what is not in the cache.")

    def check_stop(self) -> None:
        """Raise RunStopped (or the failed write's CacheError) once this job must send nothing more."""
        if self._write_failed is not None:
            raise self._write_failed
        why = self._stopping or stop.requested()
        if why is not None:
            self._stopping = self._stopping or why
            raise stop.RunStopped(f"{self.stage}: stopped ({why})")

    async def _wait_for_owner(self, key: str) -> tuple[dict | None, float]:
        """While another live process holds the lease on `key` (it is sending that request), wait:
        no budget, no rate-limit turn. (its stored answer or None once the lease is gone, the seconds
        waited). None: the owner failed or vanished, so this job sends the request itself."""
        waited, started = False, time.monotonic()
        while self.cache.holder(key, self.owner) is not None:
            waited = True
            if self._stopping or stop.requested():
                break
            await asyncio.sleep(0.2)
        if not waited:
            return None, 0.0
        return self.cached(key), round(time.monotonic() - started, 3)

    def _shared(self, req: Request, answered: Result) -> Result:
        if answered.status == "failed":
            return Result(request=req, status="failed", error=answered.error, key=answered.key, latency_s=0.0,
                          call=dict(answered.call))
        result = self.result_from(req, self.cache.get(answered.key) or {"content": answered.content},
                                  answered.key, cache_hit=True)
        result.latency_s = 0.0
        return result

    def _hit(self, req: Request, record: dict, key: str, waited_s: float = 0.0) -> Result:
        result = self.result_from(req, record, key, cache_hit=True)
        result.latency_s, result.wait_s = 0.0, waited_s
        return result

    async def _call(self, req: Request, described: dict, key: str) -> Result:
        cached = self.cached(key)
        if cached is not None:
            return self._hit(req, cached, key)
        if self.replay:  # a replay sends nothing, so it takes no lease
            self.raise_replay_miss(req, described, key)
        waited, tokens = 0.0, 0
        while True:
            self.check_stop()
            record, wait_s = await self._wait_for_owner(key)
            waited += wait_s
            if record is not None:  # another process's call answered it while this one waited
                self.lease_waits += 1
                return self._hit(req, record, key, waited)
            hold, refused = self.reserve_budget(req, key)
            if refused is not None:
                self.cache.record_miss(key, described, prompt=req.prompt_id, stage=self.stage, item_id=req.item_id,
                                       reason="budget")
                return Result(request=req, status="failed", error=refused, key=key, latency_s=0.0,
                              call={name: None for name in CALL_FIELDS} | {"params": self.params_of(req)})
            if self.pacer:  # before the clock starts: waiting for a turn is not latency
                tokens = estimated_tokens(req.messages, req.endpoint.params)
                await self.pacer.wait(req.endpoint.model, tokens)
            # The lease is claimed after the rate-limit turn, with the cache checked in the same transaction.
            state, record = self.cache.claim(key, self.owner)
            if state == "claimed":
                break
            if hold is not None:
                self.budget.settle(hold, 0.0)
            if state == "cached":
                self.lease_waits += 1
                return self._hit(req, record, key, waited)
        self._leases.add(key)
        try:
            return await self._send_and_store(req, described, key, hold, tokens)
        finally:
            self._leases.discard(key)
            if self._write_failed is None:
                self.cache.release(key, self.owner)  # a failed owner's waiters send it themselves

    async def _send_and_store(self, req: Request, described: dict, key: str, hold, tokens: int) -> Result:
        response, error, attempts = await self._with_retries(req, described, tokens)
        if hold is not None:
            self.budget.settle(hold, 0.0 if error is not None else response["cost_usd"])
        if error is not None:
            self.cache.record_miss(key, described, prompt=req.prompt_id, stage=self.stage, item_id=req.item_id,
                                   reason="failed")
            return Result(request=req, status="failed", error=error, key=key, latency_s=attempts["latency_s"],
                          attempts=attempts["n"], wait_s=attempts["wait_s"], auth_error=attempts["auth"],
                          call={name: None for name in CALL_FIELDS} | {"params": self.params_of(req),
                                                                      "litellm_version": litellm_version()})
        response, replaced = valid_unicode(response)
        if replaced:
            self.invalid_unicode += replaced
            response["invalid_unicode"] = replaced
            print(f"{self.stage}: the answer to {req.item_id} ({req.endpoint.name}) held {replaced} character(s) of "
                  f"invalid Unicode, stored as U+FFFD", file=sys.stderr)
        try:
            stored = self.cache.put_first(key, described, response)  # another job's first answer, if it won
        except CacheError as err:
            # The answer is paid but cannot be kept: send nothing more; the run loop stops the job.
            self.unstored += 1
            self._write_failed = self._write_failed or err
            self._stopping = self._stopping or "a cache write failed"
            raise
        result = self.result_from(req, stored, key, cache_hit=False)
        result.attempts, result.wait_s = attempts["n"], attempts["wait_s"]
        return result

    async def _with_retries(self, req, described, tokens: int = 0) -> tuple[dict | None, str | None, dict]:
        """(response record, None, attempts) or (None, error text, attempts) once retries are spent.

        Retries (tenacity) on rate limits, server errors, timeouts and dropped connections,
        never on a missing or refused key; waits what Retry-After asks, else backs off
        exponentially with jitter; stops after `llm.max_retries` retries or when the next wait
        would take the request past `llm.max_wait_s` of waiting in all."""
        kwargs = completion_kwargs(req.endpoint, req.messages, described["response_format"], self.call.timeout_s)
        wait = _Wait(float(self.call.backoff_s))
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(is_retryable), wait=wait, reraise=True,
            stop=tenacity.stop_after_attempt(int(self.call.max_retries) + 1)
            | _StopAfterWait(float(self.call.max_wait_s), wait))
        called_at, start = utc_now(), time.perf_counter()
        attempts = {"n": 0, "wait_s": 0.0, "auth": False, "latency_s": 0.0}
        try:
            async for attempt in retrying:
                with attempt:
                    if self.pacer and attempts["n"]:  # a retry is a call too: it waits for its turn
                        await self.pacer.wait(req.endpoint.model, tokens)
                    self.check_stop()  # before each send and each retry
                    attempts["n"] += 1
                    self.calls_made += 1
                    resp = await litellm_module().acompletion(**kwargs)
        except (stop.RunStopped, CacheError):
            raise
        except Exception as err:  # spent or not retryable (bad request, auth, ...): recorded, never raised
            attempts.update(wait_s=round(retrying.statistics.get("idle_for", 0.0), 3), auth=is_auth_error(err),
                            latency_s=time.perf_counter() - start)
            return None, self.scrub(f"{type(err).__name__}: {err}")[:1000], attempts
        latency = time.perf_counter() - start
        attempts.update(wait_s=round(retrying.statistics.get("idle_for", 0.0), 3), latency_s=latency)
        return self._response_record(req, resp, latency, called_at), None, attempts

    def _response_record(self, req, resp, latency, called_at) -> dict:
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
        return {"content": self.scrub(message.content), "finish_reason": choice.finish_reason,
                # the reasoning a provider returns apart (litellm: reasoning_content, also from
                # Anthropic's thinking blocks) and OpenAI's refusal field (also Anthropic's refusal
                # explanation); a record from before these were stored reads them as None
                "reasoning": self.scrub(getattr(message, "reasoning_content", None) or None),
                "refusal": self.scrub(getattr(message, "refusal", None) or None),
                "tokens_in": getattr(usage, "prompt_tokens", None),
                "tokens_out": getattr(usage, "completion_tokens", None),
                "tokens_reasoning": usage_reasoning(usage),
                "cost_usd": cost, "latency_s": round(latency, 4),
                "provenance": {"response_id": getattr(resp, "id", None),
                               "system_fingerprint": getattr(resp, "system_fingerprint", None),
                               "response_model": getattr(resp, "model", None), "litellm_version": litellm_version(),
                               "prompt": req.prompt_id, "prompt_version": req.prompt_version,
                               "params": self.params_of(req), "called_at": called_at}}
