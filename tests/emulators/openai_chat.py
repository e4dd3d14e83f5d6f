"""OpenAI chat completions (`POST /v1/chat/completions`), as OpenAI's API reference describes it.

Errors: `{"error": {"message", "type", "param", "code"}}`. A rate limit is 429 with the
`x-ratelimit-*` headers (`x-ratelimit-reset-requests: "1s"`: a duration, not a time); 500 and 503
(`overloaded`) send no wait. The gpt-5 family's rules: reasoning models refuse `max_tokens`
(they take `max_completion_tokens`) and any `temperature` but 1 unless the reasoning effort is
"none" (gpt-5.1 and later default to "none"; gpt-5, -mini, -nano to "medium").

The other OpenAI-shaped dialects (DeepSeek, OpenRouter, vLLM) subclass `OpenAIHandler`.
"""

from __future__ import annotations

import re
import time

from tests.emulators.base import (
    BAD_KEY,
    FORBIDDEN,
    INVALID,
    UNKNOWN_MODEL,
    Emulator,
    EmulatorHandler,
    Refusal,
    answer_text,
)

RATE_LIMITED, SERVER_ERROR, OVERLOADED = "rate_limited", "server_error", "overloaded"
FINISH = {"stop": "stop", "length": "length", "refusal": "content_filter"}


def openai_schema(body: dict) -> dict | None:
    """The JSON schema of an OpenAI-style `response_format`, if it sends one."""
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None


def gpt5_default_effort(model: str) -> str | None:
    """None for a model outside the gpt-5 reasoning family, else its default reasoning effort."""
    match = re.match(r"gpt-5(?:\.(\d+))?", model)
    if not match or "chat" in model:
        return None
    return "none" if match.group(1) else "medium"


class OpenAIHandler(EmulatorHandler):
    dialect = "openai"
    paths = ("/chat/completions",)
    reasoning_field: str | None = None  # where the dialect puts a reasoning text (None: it sends none)

    def check(self, body: dict) -> None:
        model = body.get("model", "")
        effort = gpt5_default_effort(model)
        if effort is None:
            return
        if "max_tokens" in body:
            raise Refusal(400, "unsupported_parameter", "Unsupported parameter: 'max_tokens' is not supported "
                          "with this model. Use 'max_completion_tokens' instead.")
        effort = body.get("reasoning_effort", effort)
        if "temperature" in body and body["temperature"] != 1 and effort != "none":
            raise Refusal(400, "unsupported_value", f"Unsupported value: 'temperature' does not support "
                          f"{body['temperature']} with this model. Only the default (1) value is supported.")

    def error_body(self, status: int, kind: str, code, message: str) -> dict:
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def error(self, behaviour, status=None, message=None):
        wait = self.server.state.wait_s
        if behaviour == RATE_LIMITED:
            return (429, self.error_body(429, "requests", "rate_limit_exceeded",
                                         "Rate limit reached for requests. Please try again in 1s."),
                    {"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0",
                     "x-ratelimit-reset-requests": f"{wait:g}s"}, wait)
        if behaviour == SERVER_ERROR:
            return 500, self.error_body(500, "server_error", None, "The server had an error while processing "
                                        "your request. Sorry about that!"), {}, None
        if behaviour == OVERLOADED:
            return 503, self.error_body(503, "server_error", None, "The engine is currently overloaded, "
                                        "please try again later."), {}, None
        if behaviour == BAD_KEY:
            return 401, self.error_body(401, "invalid_request_error", "invalid_api_key",
                                        "Incorrect API key provided. You can find your API key at your "
                                        "provider's dashboard."), {}, None
        if behaviour == FORBIDDEN:
            return 403, self.error_body(403, "invalid_request_error", "unsupported_country_region_territory",
                                        "Country, region, or territory not supported"), {}, None
        if behaviour == UNKNOWN_MODEL:
            return (status or 404, self.error_body(404, "invalid_request_error", "model_not_found",
                                                   message or "The model does not exist or you do not have "
                                                   "access to it."), {}, None)
        assert behaviour == INVALID, behaviour
        return (status or 400, self.error_body(400, "invalid_request_error", "invalid_value",
                                               message or "Invalid value for 'messages'."), {}, None)

    def answer(self, body, model, shape):
        content = shape.get("content", answer_text(openai_schema(body)))
        message = {"role": "assistant", "content": content}
        if self.reasoning_field and shape.get("reasoning"):
            message[self.reasoning_field] = shape["reasoning"]
        return {"id": "chatcmpl-emulated", "object": "chat.completion", "created": int(time.time()),
                "model": model, "system_fingerprint": "fp_emulated",
                "choices": [{"index": 0, "message": message,
                             "finish_reason": FINISH.get(shape.get("finish_reason", "stop"),
                                                         shape.get("finish_reason"))}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}


class OpenAIEmulator(Emulator):
    handler = OpenAIHandler
    retryable = (RATE_LIMITED, SERVER_ERROR, OVERLOADED)
