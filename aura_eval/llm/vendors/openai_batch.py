"""OpenAI's Batch API (the openai SDK, imported when an adapter is made); the request bodies are
litellm's mapping of the sampling parameters, as the live call sends them."""

from __future__ import annotations

import json

from aura_eval.llm.types import Endpoint
from aura_eval.llm.vendors.base import Status, api_key
from aura_eval.llm.wire import litellm_module


class OpenAIBatch:
    """OpenAI's Batch API: a JSONL file of /v1/chat/completions bodies, a batch, its output and error files."""

    provider = "openai"
    max_requests, max_bytes = 50_000, 190_000_000
    url = "/v1/chat/completions"

    def __init__(self, endpoint: Endpoint, settings):  # settings: the job's CallSettings
        import openai

        self.sdk_version = f"openai {openai.__version__}"
        self.api = openai.OpenAI(base_url=endpoint.api_base or None, api_key=api_key(endpoint),
                                 timeout=float(settings.timeout_s), max_retries=int(settings.max_retries))

    def line(self, key: str, described: dict) -> tuple[dict | None, str | None]:
        """The request body litellm would send live: its mapping of the sampling parameters to the
        model's (e.g. max_tokens -> max_completion_tokens for the gpt-5 family)."""
        name = described["model"].split("/", 1)[1]
        params = {k: v for k, v in described["params"].items() if k != "mock_response"}
        if described["response_format"] is not None:
            params["response_format"] = described["response_format"]
        try:
            mapped = litellm_module().utils.get_optional_params(model=name, custom_llm_provider="openai", **params)
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
