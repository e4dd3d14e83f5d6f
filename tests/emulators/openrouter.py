"""OpenRouter's API (`POST /api/v1/chat/completions`, OpenAI-shaped), as its reference describes it.

Errors are `{"error": {"code", "message", "metadata"}}`. The HTTP status equals `error.code` only
when the request itself is refused (bad request, bad key, no credit, rate limit: 429 with
Retry-After in seconds); once a model has started on the request, a failure of the upstream
provider comes back as **HTTP 200** with that error body (`error_in_200`: code 502, "model is
down or returned an invalid response"). Reasoning comes in `message.reasoning`; the answer names
the upstream `provider` and `usage.cost`.
"""

from __future__ import annotations

from tests.emulators.base import BAD_KEY, FORBIDDEN, INVALID, UNKNOWN_MODEL, Emulator
from tests.emulators.openai_chat import RATE_LIMITED, OpenAIHandler

ERROR_IN_200, NO_PROVIDER = "error_in_200", "no_provider"


class OpenRouterHandler(OpenAIHandler):
    dialect = "openrouter"
    reasoning_field = "reasoning"

    def check(self, body):
        return None

    def error_body(self, status, kind, code, message):
        return {"error": {"code": status, "message": message, "metadata": {"provider_name": "Emulated"}}}

    def error(self, behaviour, status=None, message=None):
        wait = self.server.state.wait_s
        if behaviour == RATE_LIMITED:
            return (429, self.error_body(429, None, None, "Rate limit exceeded: free-models-per-min."),
                    {"Retry-After": f"{wait:g}"}, wait)
        if behaviour == ERROR_IN_200:
            return 200, self.error_body(502, None, None, "Provider returned error"), {}, None
        if behaviour == NO_PROVIDER:
            return 503, self.error_body(503, None, None, "No allowed providers are available for the "
                                        "selected model."), {}, None
        if behaviour == BAD_KEY:
            return 401, self.error_body(401, None, None, "No auth credentials found"), {}, None
        if behaviour == FORBIDDEN:
            return 403, self.error_body(403, None, None, "Your input was flagged by moderation."), {}, None
        if behaviour == UNKNOWN_MODEL:
            return status or 400, self.error_body(400, None, None, message or "The model is not a valid "
                                                  "model ID"), {}, None
        assert behaviour == INVALID, behaviour
        return status or 400, self.error_body(400, None, None, message or "Invalid request"), {}, None

    def answer(self, body, model, shape):
        reply = super().answer(body, model, shape)
        reply.update(provider="Emulated", id="gen-emulated")
        reply["usage"]["cost"] = 0.00001
        return reply


class OpenRouterEmulator(Emulator):
    handler = OpenRouterHandler
    base_path = "/api/v1"
    retryable = (RATE_LIMITED, ERROR_IN_200, NO_PROVIDER)
