"""Provider batch APIs for the models whose entry sets `batch: true`: OpenAI's Batch API,
Anthropic's Message Batches and Gemini's Batch Mode, at about half the price and within 24 hours
instead of seconds.

`ModelClient.run` hands a batch model's requests to a `BatchRun`: cache hits are answered at
once, replay mode raises on a miss as the live path does, and only the misses go out, as one
batch per (provider, model, endpoint) and size limit. The openai, anthropic and google-genai SDKs
are used directly: litellm's batch functions cover OpenAI only and add a layer between us and the
file and batch objects whose ids we keep.

Crash-safe: each batch's id, provider, model, state and times, and the keys it holds (the
custom_id of each request is its cache key) with their requests, are kept in the cache database
as soon as the provider names the batch. A rerun polls the batches that are still open instead
of submitting their keys again; a batch's results go into the response cache (`put_first`), so
replay answers them like any other call. A batch that ends (completed, expired, cancelled,
failed) is marked ingested; its unanswered keys are not cached, so a later run submits them anew.
Every key ends as a Result: per-item errors, unanswered items of an expired or cancelled batch,
a refused submission and a batch still open after `llm.batch_max_wait_s` are status "failed"
with the reason.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

from aura_eval.llm import pricing, stop
from aura_eval.llm.cache import cache_key
from aura_eval.llm.providers import BATCH_PROVIDERS
from aura_eval.llm.types import CALL_FIELDS, Endpoint, Request, Result, utc_now

# The providers' limits per batch (requests, bytes of requests), with a margin on the bytes.
# Gemini's inline requests must stay under 20 MB per batch (its docs); no count limit is documented.
MAX_REQUESTS = {"openai": 50_000, "anthropic": 100_000, "gemini": 100_000}
MAX_BYTES = {"openai": 190_000_000, "anthropic": 240_000_000, "gemini": 19_000_000}
# Anthropic requires max_tokens; litellm's default for Anthropic models when none is set.
ANTHROPIC_MAX_TOKENS = 4096


@dataclass
class Status:
    state: str  # the provider's status of the batch
    ended: bool  # no more answers will come
    progress: str  # e.g. "12/40 done, 1 failed"
    reason: str | None  # why items went unanswered (expired, cancelled, failed), where it says
    raw: object


def batch_price(endpoint: Endpoint) -> tuple[float, float] | None:
    """USD per input and per output token of a batch call (`pricing.per_token` with batch=True:
    litellm's cost map, else the model entry's `price`); None (unpriced, never $0) when neither prices it."""
    rates = pricing.per_token(endpoint.model, endpoint.price, batch=True)
    return None if rates is None else rates[:2]


def batch_cost(endpoint: Endpoint, tokens_in: int | None, tokens_out: int | None) -> float | None:
    """The batch price of one call in USD (`batch_price`); None when unpriced or without token counts."""
    return _cost(batch_price(endpoint), tokens_in, tokens_out)


def _cost(per: tuple[float, float] | None, tokens_in: int | None, tokens_out: int | None) -> float | None:
    if per is None or tokens_in is None or tokens_out is None:
        return None
    return tokens_in * per[0] + tokens_out * per[1]


def status_code_of(err: Exception) -> int | None:
    """The HTTP status of an SDK error (openai and anthropic: `status_code`; google-genai: `code`)."""
    code = getattr(err, "status_code", None) or getattr(err, "code", None)
    return code if isinstance(code, int) else None


def is_auth_error(err: Exception) -> bool:
    """A missing or refused key (never mended by waiting; the stage fails the job on it). Google
    answers a bad key with 400 API_KEY_INVALID, so its text counts too."""
    text = str(err).lower()
    return (status_code_of(err) in (401, 403) or "credentials" in text or "api_key" in text
            or "api key not valid" in text)


def _api_key(endpoint: Endpoint) -> str | None:
    """The key from the variable the entry names; None lets the SDK read its own variable."""
    return os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else None


class _OpenAI:
    """OpenAI's Batch API: a JSONL file of /v1/chat/completions bodies, a batch, its output and error files."""

    provider = "openai"
    url = "/v1/chat/completions"

    def __init__(self, endpoint: Endpoint, settings, litellm):  # settings: the job's CallSettings
        import openai

        self.litellm = litellm
        self.sdk_version = f"openai {openai.__version__}"
        self.api = openai.OpenAI(base_url=endpoint.api_base or None, api_key=_api_key(endpoint),
                                 timeout=float(settings.timeout_s), max_retries=int(settings.max_retries))

    def line(self, key: str, described: dict) -> tuple[dict | None, str | None]:
        """The request body litellm would send live: its mapping of the sampling parameters to the
        model's (e.g. max_tokens -> max_completion_tokens for the gpt-5 family)."""
        name = described["model"].split("/", 1)[1]
        params = {k: v for k, v in described["params"].items() if k != "mock_response"}
        if described["response_format"] is not None:
            params["response_format"] = described["response_format"]
        try:
            mapped = self.litellm().utils.get_optional_params(model=name, custom_llm_provider="openai", **params)
        except Exception as err:  # a parameter the model refuses, as the live call would
            return None, f"openai batch: {type(err).__name__}: {err}"[:1000]
        mapped.pop("stream", None)
        extra = mapped.pop("extra_body", None) or {}
        return {"custom_id": key, "method": "POST", "url": self.url,
                "body": {"model": name, "messages": described["messages"], **mapped, **extra}}, None

    def check(self) -> None:
        """Raise unless the batch API answers with this key (the preflight's cheapest call)."""
        self.api.batches.list(limit=1)

    def create(self, lines: list[dict]) -> tuple[str, str]:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
        upload = self.api.files.create(file=("requests.jsonl", data, "application/jsonl"), purpose="batch")
        batch = self.api.batches.create(input_file_id=upload.id, endpoint=self.url, completion_window="24h")
        return batch.id, batch.status

    def retrieve(self, batch_id: str) -> Status:
        batch = self.api.batches.retrieve(batch_id)
        counts = batch.request_counts
        progress = f"{counts.completed}/{counts.total} done, {counts.failed} failed" if counts else "no counts yet"
        reason = {"expired": "expired: the provider's 24 h window passed", "cancelled": "cancelled"}.get(batch.status)
        if batch.status == "failed":
            errors = [f"{e.code}: {e.message}" for e in ((batch.errors and batch.errors.data) or [])]
            reason = "failed: " + ("; ".join(errors) or "no reason given")
        return Status(batch.status, batch.status in ("completed", "expired", "cancelled", "failed"), progress,
                      reason, batch)

    def answers(self, status: Status, keys: list[str]):
        """(key, response record or None, error or None) for each line of the output and error files
        (`keys`, the batch's keys in submission order, are for providers that answer by position)."""
        for file_id in (status.raw.output_file_id, status.raw.error_file_id):
            if not file_id:
                continue
            for text in self.api.files.content(file_id).text.splitlines():
                try:
                    line = json.loads(text)
                except json.JSONDecodeError:
                    continue  # its key stays unanswered and is reported so
                response = line.get("response") or {}
                body = response.get("body") or {}
                if response.get("status_code") == 200 and not line.get("error") and body.get("choices"):
                    choice, usage = body["choices"][0], body.get("usage") or {}
                    yield line["custom_id"], {
                        "content": choice["message"].get("content"), "finish_reason": choice.get("finish_reason"),
                        "reasoning": choice["message"].get("reasoning_content"),
                        "refusal": choice["message"].get("refusal"),
                        "tokens_in": usage.get("prompt_tokens"), "tokens_out": usage.get("completion_tokens"),
                        "tokens_reasoning": (usage.get("completion_tokens_details") or {}).get("reasoning_tokens"),
                        "provenance": {"response_id": body.get("id"), "response_model": body.get("model"),
                                       "system_fingerprint": body.get("system_fingerprint")}}, None
                else:
                    error = line.get("error") or body.get("error") or {}
                    yield line["custom_id"], None, (f"status {response.get('status_code')}: "
                                                    f"{error.get('code') or error.get('type')}: {error.get('message')}")


class _Anthropic:
    """Anthropic's Message Batches: one request of Messages API params per custom_id."""

    provider = "anthropic"
    unsupported = ("seed", "presence_penalty", "frequency_penalty", "reasoning_effort")  # no Messages API field

    def __init__(self, endpoint: Endpoint, settings, litellm):  # settings: the job's CallSettings
        import anthropic

        self.sdk_version = f"anthropic {anthropic.__version__}"
        base = (endpoint.api_base or "").rstrip("/")
        base = base[:-3] if base.endswith("/v1") else base  # the SDK adds /v1 itself
        self.api = anthropic.Anthropic(base_url=base or None, api_key=_api_key(endpoint),
                                       timeout=float(settings.timeout_s), max_retries=int(settings.max_retries))

    def line(self, key: str, described: dict) -> tuple[dict | None, str | None]:
        params = described["params"]
        refused = [name for name in self.unsupported if name in params]
        if refused:
            return None, f"anthropic batch: the Messages API has no {', '.join(refused)} (remove from params)"
        system = "\n\n".join(m["content"] for m in described["messages"] if m["role"] == "system")
        body = {"model": described["model"].split("/", 1)[1],
                "messages": [m for m in described["messages"] if m["role"] != "system"],
                "max_tokens": params.get("max_tokens", ANTHROPIC_MAX_TOKENS)}
        if system:
            body["system"] = system
        for name in ("temperature", "top_p"):
            if name in params:
                body[name] = params[name]
        if "stop" in params:
            body["stop_sequences"] = params["stop"]
        # No JSON schema is sent: the prompts ask for JSON and the answer is parsed as on the live path.
        return {"custom_id": key, "params": body}, None

    def check(self) -> None:
        self.api.messages.batches.list(limit=1)

    def create(self, lines: list[dict]) -> tuple[str, str]:
        batch = self.api.messages.batches.create(requests=lines)
        return batch.id, batch.processing_status

    def retrieve(self, batch_id: str) -> Status:
        batch = self.api.messages.batches.retrieve(batch_id)
        c = batch.request_counts
        progress = (f"{c.succeeded + c.errored + c.canceled + c.expired}/"
                    f"{c.processing + c.succeeded + c.errored + c.canceled + c.expired} done, "
                    f"{c.errored} errored, {c.canceled} canceled, {c.expired} expired")
        return Status(batch.processing_status, batch.processing_status == "ended", progress, None, batch)

    def answers(self, status: Status, keys: list[str]):
        for item in self.api.messages.batches.results(status.raw.id):
            item = item.model_dump()
            result = item.get("result") or {}
            if result.get("type") == "succeeded":
                message = result["message"]
                usage = message.get("usage") or {}
                yield item["custom_id"], {
                    "content": "".join(b.get("text", "") for b in message.get("content") or []
                                       if b.get("type") == "text"),
                    # the provider's own stop reason (max_tokens, refusal): answers.read_answer knows both
                    "finish_reason": message.get("stop_reason"),
                    "reasoning": "".join(b.get("thinking", "") for b in message.get("content") or []
                                         if b.get("type") == "thinking") or None,
                    "refusal": (message.get("stop_details") or {}).get("explanation"),
                    "tokens_in": usage.get("input_tokens"),
                    "tokens_out": usage.get("output_tokens"),
                    "provenance": {"response_id": message.get("id"), "response_model": message.get("model"),
                                   "system_fingerprint": None}}, None
            elif result.get("type") == "errored":
                error = (result.get("error") or {}).get("error") or {}
                yield item["custom_id"], None, f"errored: {error.get('type')}: {error.get('message')}"
            else:  # canceled, expired
                yield item["custom_id"], None, f"{result.get('type')}: the batch ended before this request ran"


class _Gemini:
    """Gemini's Batch Mode (Gemini Developer API): one batch of inline GenerateContent requests,
    each carrying its cache key in `metadata.key`; the answers come back inline, or in a results
    file (JSONL lines with `key`) that the Files API downloads."""

    provider = "gemini"

    def __init__(self, endpoint: Endpoint, settings, litellm):  # settings: the job's CallSettings
        from google import genai
        from google.genai import types

        self.sdk_version = f"google-genai {genai.__version__}"
        base = (endpoint.api_base or "").rstrip("/")
        for version in ("/v1beta", "/v1"):  # the SDK adds the API version itself
            base = base.removesuffix(version)
        options = types.HttpOptions(base_url=base or None, api_version="v1beta",
                                    timeout=int(float(settings.timeout_s) * 1000),  # milliseconds
                                    retry_options=types.HttpRetryOptions(attempts=int(settings.max_retries) + 1))
        self.api = genai.Client(api_key=_api_key(endpoint), http_options=options)

    def line(self, key: str, described: dict) -> tuple[dict | None, str | None]:
        params = described["params"]
        if "reasoning_effort" in params:
            return None, "gemini batch: GenerateContent has no reasoning_effort (remove from params)"
        config = {GEMINI_FIELDS[name]: value for name, value in params.items() if name in GEMINI_FIELDS}
        if isinstance(config.get("stop_sequences"), str):
            config["stop_sequences"] = [config["stop_sequences"]]
        system = "\n\n".join(m["content"] for m in described["messages"] if m["role"] == "system")
        if system:
            config["system_instruction"] = system
        response_format = described["response_format"] or {}
        if response_format.get("type") in ("json_schema", "json_object"):
            config["response_mime_type"] = "application/json"
        if response_format.get("type") == "json_schema":
            config["response_json_schema"] = response_format["json_schema"]["schema"]
        contents = [{"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                    for m in described["messages"] if m["role"] != "system"]
        # "model" names the batch's model (one per batch: BatchRun groups by model); create() takes it out.
        return {"model": described["model"].split("/", 1)[1], "contents": contents, "config": config,
                "metadata": {"key": key}}, None

    def check(self) -> None:
        next(iter(self.api.batches.list(config={"page_size": 1})), None)

    def create(self, lines: list[dict]) -> tuple[str, str]:
        # In key order: Google returns inline answers in the order of the requests, and has been seen
        # to drop their metadata, so `answers` can tell an answer's key by its position.
        requests = sorted(({k: v for k, v in line.items() if k != "model"} for line in lines),
                          key=lambda line: line["metadata"]["key"])
        job = self.api.batches.create(model=lines[0]["model"], src=requests)
        return job.name, _state(job)

    def retrieve(self, batch_id: str) -> Status:
        job = self.api.batches.get(name=batch_id)
        state = _state(job)
        reason = {"JOB_STATE_EXPIRED": "expired: the batch did not finish within the provider's window",
                  "JOB_STATE_CANCELLED": "cancelled"}.get(state)
        if state == "JOB_STATE_FAILED":
            reason = "failed: " + ((job.error and job.error.message) or "no reason given")
        return Status(state, state in GEMINI_ENDED, state.removeprefix("JOB_STATE_").lower(), reason, job)

    def answers(self, status: Status, keys: list[str]):
        dest = status.raw.dest
        if dest is None:
            return
        if dest.inlined_responses:
            items = [item.model_dump(mode="json", by_alias=True, exclude_none=True)
                     for item in dest.inlined_responses]
            if len(items) == len(keys):  # answers without their metadata: the key of their position
                for item, key in zip(items, keys):
                    item.setdefault("metadata", {}).setdefault("key", key)
        elif dest.file_name:
            items = []
            for text in self.api.files.download(file=dest.file_name).decode("utf-8").splitlines():
                try:
                    items.append(json.loads(text))
                except json.JSONDecodeError:
                    continue  # its key stays unanswered and is reported so
        else:
            return
        from litellm.litellm_core_utils.core_helpers import map_finish_reason

        for item in items:
            key = item.get("key") or (item.get("metadata") or {}).get("key")
            if key is None:
                continue
            response, error = item.get("response") or {}, item.get("error")
            candidates = response.get("candidates") or []
            if error or not candidates:
                error = error or {"message": f"no candidate (prompt feedback: {response.get('promptFeedback')})"}
                yield key, None, f"error {error.get('code')}: {error.get('message')}"
                continue
            usage = response.get("usageMetadata") or {}
            parts = (candidates[0].get("content") or {}).get("parts") or []
            finish = candidates[0].get("finishReason")
            out = usage.get("candidatesTokenCount")
            # Thinking tokens are billed as output, as litellm counts them on the live path.
            tokens_out = None if out is None and "thoughtsTokenCount" not in usage else (
                (out or 0) + (usage.get("thoughtsTokenCount") or 0))
            yield key, {
                "content": "".join(p.get("text", "") for p in parts if not p.get("thought")),
                # thought summaries (parts marked `thought`), kept apart like litellm's reasoning_content
                "reasoning": "".join(p.get("text", "") for p in parts if p.get("thought")) or None,
                "refusal": None,  # Gemini has no refusal field: a block is its finish reason (SAFETY, ...)
                "finish_reason": map_finish_reason(finish) if finish else None,
                "tokens_in": usage.get("promptTokenCount"), "tokens_out": tokens_out,
                "tokens_reasoning": usage.get("thoughtsTokenCount"),
                "provenance": {"response_id": response.get("responseId"),
                               "response_model": response.get("modelVersion"), "system_fingerprint": None}}, None


def _state(job) -> str:
    state = job.state
    return getattr(state, "value", state) or "JOB_STATE_UNSPECIFIED"


GEMINI_ENDED = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"})
# generationConfig's name for each sampling parameter; reasoning_effort has no field of the same meaning.
GEMINI_FIELDS = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_output_tokens", "seed": "seed",
                 "stop": "stop_sequences", "presence_penalty": "presence_penalty",
                 "frequency_penalty": "frequency_penalty"}
ADAPTERS = {"openai": _OpenAI, "anthropic": _Anthropic, "gemini": _Gemini}


def _chunks(lines: list[tuple[str, dict]], max_requests: int, max_bytes: int):
    """Consecutive runs of (key, line) within the provider's count and size limits."""
    chunk, size = [], 0
    for key, line in lines:
        n = len(json.dumps(line, ensure_ascii=False).encode("utf-8")) + 1
        if chunk and (len(chunk) >= max_requests or size + n > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append((key, line))
        size += n
    if chunk:
        yield chunk


class BatchRun:
    """One job's batch requests: `submit()` answers the hits and sends (or resumes) the misses,
    `wait()` polls until every key is answered, failed, or the wait runs out, and returns the
    Results in the order of the requests."""

    def __init__(self, client, requests: list[Request], litellm):
        self.client = client
        self.litellm = litellm  # returns the litellm module, imported on first use (its cost map, its params)
        self.requests = requests
        self.results: list[Result | None] = [None] * len(requests)
        self.waiting: dict[str, list[int]] = {}  # key -> indices of the requests it answers
        self.batch_of: dict[str, str] = {}  # key -> the batch that holds it
        self.submitted: set[str] = set()  # keys this job submitted (the others were resumed)
        self.adapters: dict[tuple, object] = {}
        self.adapter_of: dict[str, object] = {}  # batch id -> adapter
        self.endpoint_of: dict[str, Endpoint] = {}  # batch id -> the endpoint of this job's keys in it
        self.holds: dict[str, int] = {}  # key -> its reservation under llm.budget_usd (budget.py), settled on ingest
        self.poll_s = float(client.call.batch_poll_s)
        self.max_wait_s = float(client.call.batch_max_wait_s)

    def _say(self, text: str) -> None:
        print(f"[{self.client.stage}] {text}", file=sys.stderr, flush=True)

    def _adapter(self, endpoint: Endpoint):
        ident = (endpoint.provider, endpoint.api_base, endpoint.api_key_env)
        if ident not in self.adapters:
            self.adapters[ident] = ADAPTERS[endpoint.provider](endpoint, self.client.call, self.litellm)
        return self.adapters[ident]

    def submit(self) -> None:
        c = self.client
        c.check_stop()  # after Ctrl-C nothing is submitted (before any budget is reserved)
        described_of = {}
        for i, req in enumerate(self.requests):
            if req.endpoint.provider not in ADAPTERS:
                raise ValueError(f"model {req.endpoint.name!r} ({req.endpoint.model}) has batch: true, but only "
                                 f"{', '.join(BATCH_PROVIDERS)} models have a batch API here")
            described = c.describe(req)
            key = cache_key(described)
            if key in self.waiting:
                self.waiting[key].append(i)
                continue
            cached = c.cached(key)
            if cached is not None:
                self.results[i] = c.result_from(req, cached, key, cache_hit=True)
                self.results[i].latency_s = 0.0
                continue
            if c.replay:
                c.raise_replay_miss(req, described, key)
            self.waiting[key] = [i]
            described_of[key] = described
        for key, batch_id in c.cache.open_batches(self.waiting).items():
            endpoint = self.requests[self.waiting[key][0]].endpoint
            try:
                self.adapter_of.setdefault(batch_id, self._adapter(endpoint))
            except Exception as err:  # e.g. no key for the SDK: recorded; the batch stays open for a rerun
                self._fail(key, c.scrub(f"batch client for {endpoint.model}: {type(err).__name__}: {err}")[:1000],
                           auth=is_auth_error(err))
                continue
            self.batch_of[key] = batch_id
            self.endpoint_of.setdefault(batch_id, endpoint)
        if self.batch_of:
            self._say(f"resuming {len(set(self.batch_of.values()))} open batch(es) holding "
                      f"{len(self.batch_of)} of this job's requests")
        groups: dict[tuple, list[str]] = {}
        for key in self.waiting:
            if key not in self.batch_of:
                ep = self.requests[self.waiting[key][0]].endpoint
                groups.setdefault((ep.provider, ep.model, ep.api_base, ep.api_key_env), []).append(key)
        for (provider, model, _, _), keys in groups.items():
            self._submit_group(provider, model, keys, described_of)

    def _submit_group(self, provider: str, model: str, keys: list[str], described_of: dict) -> None:
        c = self.client
        endpoint = self.requests[self.waiting[keys[0]][0]].endpoint
        try:
            adapter = self._adapter(endpoint)
        except Exception as err:  # e.g. no key for the SDK: every request of the group fails, recorded
            for key in keys:
                self._fail(key, c.scrub(f"batch client for {model}: {type(err).__name__}: {err}")[:1000],
                           auth=is_auth_error(err))
            return
        lines = []
        for key in keys:
            line, refused = adapter.line(key, described_of[key])
            if not refused:  # the budget, as for a live call: reserve the most it can cost before sending
                hold, refused = c.reserve_budget(self.requests[self.waiting[key][0]], key)
                if hold is not None:
                    self.holds[key] = hold
            if refused:
                self._fail(key, refused)
            else:
                lines.append((key, line))
        for chunk in _chunks(lines, MAX_REQUESTS[provider], MAX_BYTES[provider]):
            submitted_at = utc_now()
            try:
                batch_id, state = adapter.create([line for _, line in chunk])
            except Exception as err:  # refused (bad request, auth, ...): recorded, a rerun tries again
                for key, _ in chunk:
                    self._settle(key, 0.0)
                    self._fail(key, c.scrub(f"batch submission: {type(err).__name__}: {err}")[:1000],
                               auth=is_auth_error(err))
                continue
            first = {key: self.requests[self.waiting[key][0]] for key, _ in chunk}
            c.cache.record_batch(batch_id, provider=provider, model=model, api_base=endpoint.api_base,
                                 endpoint=endpoint.name, state=state, submitted_at=submitted_at,
                                 items=[(key, described_of[key], first[key].prompt_id, first[key].prompt_version)
                                        for key, _ in chunk])
            c.calls_made += len(chunk)
            for key, _ in chunk:
                self.batch_of[key] = batch_id
                self.submitted.add(key)
            self.adapter_of[batch_id], self.endpoint_of[batch_id] = adapter, endpoint
            self._say(f"submitted batch {batch_id} ({model}, {len(chunk)} requests)")

    def _sleep_unless_stopped(self, open_ids: list[str]) -> None:
        """Sleep `poll_s` between polls, looking for the run's stop mark: on a stop the open batches
        stay open (recorded in the cache file), and the rerun polls them instead of resubmitting."""
        until = time.monotonic() + self.poll_s
        while time.monotonic() < until:
            why = stop.requested()
            if why is not None:
                raise stop.RunStopped(f"{self.client.stage}: stopped ({why}): batches {', '.join(open_ids)} left "
                                      f"open at the provider; a plain rerun polls them and submits nothing again")
            time.sleep(min(stop.POLL_S, max(0.0, until - time.monotonic())))

    def wait(self) -> list[Result]:
        start = time.monotonic()
        pending = set(self.batch_of.values())
        state: dict[str, str] = {}
        problem: dict[str, str] = {}  # batch id -> the last error polling it
        said: dict[str, tuple[str, float]] = {}  # batch id -> the progress last logged, and when
        while pending:
            for batch_id in sorted(pending):
                try:
                    status = self.adapter_of[batch_id].retrieve(batch_id)
                except Exception as err:
                    problem[batch_id] = self.client.scrub(f"{type(err).__name__}: {err}")[:500]
                    code = status_code_of(err)
                    if code == 404:  # the provider does not know it: ended, unanswered; a rerun resubmits
                        status = Status("not_found", True, "", f"not found at the provider ({problem[batch_id]})",
                                        None)
                    elif code in (401, 403) or is_auth_error(err):  # a refused key: stop; a rerun resumes it
                        self._say(f"batch {batch_id}: polling refused: {problem[batch_id]}")
                        self._give_up(batch_id, f"polling refused ({problem[batch_id]}); a rerun with a valid key "
                                                f"resumes polling it", auth=True)
                        pending.discard(batch_id)
                        continue
                    else:  # the SDK retried already; poll again next round
                        continue
                problem.pop(batch_id, None)
                state[batch_id] = status.state
                self.client.cache.update_batch(batch_id, state=status.state, polled_at=utc_now())
                if status.ended:
                    try:
                        self._ingest(batch_id, status, waited=time.monotonic() - start)
                    except Exception as err:  # results not readable yet: read them again next round
                        problem[batch_id] = self.client.scrub(f"reading results: {type(err).__name__}: {err}")[:500]
                        self._say(f"batch {batch_id}: {problem[batch_id]}")
                        continue
                    pending.discard(batch_id)
                elif said.get(batch_id, ("", 0.0))[0] != status.progress or time.monotonic() - said[batch_id][1] > 600:
                    said[batch_id] = (status.progress, time.monotonic())  # on progress, else every 10 min
                    self._say(f"batch {batch_id}: {status.state}, {status.progress}; waited "
                              f"{time.monotonic() - start:.0f} s of {self.max_wait_s:.0f} s")
            if not pending or time.monotonic() - start + self.poll_s > self.max_wait_s:
                break
            self._sleep_unless_stopped(sorted(pending))
        waited = time.monotonic() - start
        for batch_id in sorted(pending):
            why = f"still {state.get(batch_id, 'unknown')}" + (f" (last poll: {problem[batch_id]})"
                                                                 if batch_id in problem else "")
            self._say(f"batch {batch_id}: {why} after {waited:.0f} s (llm.batch_max_wait_s); a rerun resumes it")
            self._give_up(batch_id, f"{why} after waiting {waited:.0f} s (llm.batch_max_wait_s); a rerun resumes "
                                    f"polling it")
        for result in self.results:
            self.client.log_call(result)
        return list(self.results)

    def _give_up(self, batch_id: str, why: str, auth: bool = False) -> None:
        """This job's keys in a batch that stays open: failed Results, the batch kept for a rerun."""
        for key in [k for k, b in self.batch_of.items() if b == batch_id and self.waiting.get(k)]:
            self._fail(key, f"batch {batch_id} {why}", auth=auth)

    def _ingest(self, batch_id: str, status: Status, waited: float) -> None:
        """Cache every answer of an ended batch (other jobs' keys too), record each key's outcome,
        mark the batch ingested, and answer this job's keys."""
        c = self.client
        adapter = self.adapter_of[batch_id]
        row = c.cache.batch(batch_id)
        items = c.cache.batch_items(batch_id)
        latency = max(0.0, time.time() - _epoch(row["submitted_at"]))
        per_token = batch_price(self.endpoint_of[batch_id])  # once per batch
        outcomes: dict[str, tuple[str, str | None]] = {}
        stored_of: dict[str, dict] = {}
        for key, record, error in adapter.answers(status, sorted(items)) if status.raw is not None else ():
            if key not in items or key in outcomes:
                continue
            if record is None:
                outcomes[key] = ("failed", c.scrub(error)[:1000])
                continue
            item = items[key]
            for name in ("content", "reasoning", "refusal"):
                record[name] = c.scrub(record.get(name))
            record["cost_usd"] = _cost(per_token, record["tokens_in"], record["tokens_out"])
            record["latency_s"] = round(latency, 4)
            record["provenance"].update(litellm_version=None, sdk_version=adapter.sdk_version, batch_id=batch_id,
                                        prompt=item["prompt"], prompt_version=item["prompt_version"],
                                        params=item["request"]["params"], called_at=row["submitted_at"])
            stored_of[key] = c.cache.put_first(key, item["request"], record)
            outcomes[key] = ("ok", None)
        reason = status.reason or f"{status.state} without an answer"
        for key in items:
            outcomes.setdefault(key, ("failed", reason))
        for key, (outcome, _) in outcomes.items():
            self._settle(key, (stored_of[key].get("cost_usd") or 0.0) if outcome == "ok" else 0.0)
        c.cache.record_batch_outcomes(batch_id, outcomes)
        c.cache.update_batch(batch_id, state=status.state, polled_at=utc_now(), ingested_at=utc_now(),
                             reason=status.reason)
        failed = sum(1 for outcome, _ in outcomes.values() if outcome == "failed")
        self._say(f"batch {batch_id}: {status.state} after {waited:.0f} s here ({latency:.0f} s since submission), "
                  f"{len(outcomes) - failed} answered, {failed} failed")
        for key in [k for k, b in self.batch_of.items() if b == batch_id]:
            if key in stored_of:
                self._answer(key, stored_of[key])
            else:
                self._fail(key, f"batch {batch_id}: {outcomes[key][1]}")

    def _settle(self, key: str, cost: float) -> None:
        """Settle this job's reservation of `key` (if it made one) at the call's cost."""
        hold = self.holds.pop(key, None)
        if hold is not None:
            self.client.budget.settle(hold, cost)

    def _answer(self, key: str, stored: dict) -> None:
        c = self.client
        for n, i in enumerate(self.waiting.pop(key, [])):
            result = c.result_from(self.requests[i], stored, key, cache_hit=n > 0)  # repeats share the first answer
            # wait_s stays 0: it counts waits between attempts; the batch's wait is in latency_s and the log.
            result.attempts = int(key in self.submitted and n == 0)
            if n > 0:
                result.latency_s = 0.0
            self.results[i] = result

    def _fail(self, key: str, error: str, auth: bool = False) -> None:
        c = self.client
        for n, i in enumerate(self.waiting.pop(key, [])):
            req = self.requests[i]
            if n == 0:
                c.cache.record_miss(key, c.describe(req), prompt=req.prompt_id, stage=c.stage, item_id=req.item_id,
                                    reason="failed")
            self.results[i] = Result(request=req, status="failed", error=error, key=key, latency_s=0.0,
                                     attempts=int(key in self.submitted and n == 0), auth_error=auth,
                                     call={name: None for name in CALL_FIELDS} | {"params": c.params_of(req)})


def _epoch(utc: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(utc.replace("Z", "+00:00")).timestamp()
