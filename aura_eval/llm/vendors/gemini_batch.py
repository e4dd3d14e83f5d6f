"""Gemini's Batch Mode on the Gemini Developer API (google-genai, imported when an adapter is made)."""

from __future__ import annotations

import json

from aura_eval.llm.types import Endpoint
from aura_eval.llm.vendors.base import Status, api_key


class GeminiBatch:
    """Gemini's Batch Mode (Gemini Developer API): one batch of inline GenerateContent requests,
    each carrying its cache key in `metadata.key`; the answers come back inline, or in a results
    file (JSONL lines with `key`) that the Files API downloads."""

    provider = "gemini"
    # Gemini's inline requests must stay under 20 MB per batch (its docs); no count limit is documented.
    max_requests, max_bytes = 100_000, 19_000_000

    def __init__(self, endpoint: Endpoint, settings):  # settings: the job's CallSettings
        from google import genai
        from google.genai import types

        self.sdk_version = f"google-genai {genai.__version__}"
        base = (endpoint.api_base or "").rstrip("/")
        for version in ("/v1beta", "/v1"):  # the SDK adds the API version itself
            base = base.removesuffix(version)
        options = types.HttpOptions(base_url=base or None, api_version="v1beta",
                                    timeout=int(float(settings.timeout_s) * 1000),  # milliseconds
                                    retry_options=types.HttpRetryOptions(attempts=int(settings.max_retries) + 1))
        self.api = genai.Client(api_key=api_key(endpoint), http_options=options)

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
