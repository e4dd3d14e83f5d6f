"""Anthropic's Message Batches (the anthropic SDK, imported when an adapter is made)."""

from __future__ import annotations

from aura_eval.llm.types import Endpoint
from aura_eval.llm.vendors.base import Status, api_key

# Anthropic requires max_tokens; litellm's default for Anthropic models when none is set.
ANTHROPIC_MAX_TOKENS = 4096


class AnthropicBatch:
    """Anthropic's Message Batches: one request of Messages API params per custom_id."""

    provider = "anthropic"
    max_requests, max_bytes = 100_000, 240_000_000
    unsupported = ("seed", "presence_penalty", "frequency_penalty", "reasoning_effort")  # no Messages API field

    def __init__(self, endpoint: Endpoint, settings):  # settings: the job's CallSettings
        import anthropic

        self.sdk_version = f"anthropic {anthropic.__version__}"
        base = (endpoint.api_base or "").rstrip("/")
        base = base[:-3] if base.endswith("/v1") else base  # the SDK adds /v1 itself
        self.api = anthropic.Anthropic(base_url=base or None, api_key=api_key(endpoint),
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
