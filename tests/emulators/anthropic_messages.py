"""Anthropic Messages (`POST /v1/messages`), as Anthropic's API reference describes it.

The key comes in `x-api-key`, the version in `anthropic-version`. Errors are
`{"type": "error", "error": {"type", "message"}, "request_id"}`: 429 `rate_limit_error` with
`retry-after` (seconds) and the `anthropic-ratelimit-*-reset` headers, which are RFC 3339 *times*;
`rate_limited_reset_only` sends the reset time alone (as an SDK that only reads it would see);
529 `overloaded_error` and 500 `api_error` send no wait. Refused (400): a request without
`anthropic-version` or `max_tokens`, `temperature` outside [0, 1], and an `output_format` schema
using what structured outputs do not support (numeric and string-length constraints, array
bounds beyond minItems 0/1, an object without `additionalProperties: false`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

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

RATE_LIMITED, RESET_ONLY, OVERLOADED, API_ERROR = "rate_limited", "rate_limited_reset_only", "overloaded", "api_error"
STOP = {"stop": "end_turn", "length": "max_tokens", "refusal": "refusal"}
UNSUPPORTED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
               "maxItems")


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def schema_problem(schema, where="output_format.schema") -> str | None:
    """What Anthropic's structured outputs refuse in a schema, or None."""
    if isinstance(schema, list):
        return next((p for s in schema if (p := schema_problem(s, where))), None)
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    for name in UNSUPPORTED:
        if name in schema:
            return f"{where}: For '{kind}' type, property '{name}' is not supported"
    if schema.get("minItems", 0) > 1:
        return f"{where}: For 'array' type, 'minItems' values other than 0 or 1 are not supported"
    if kind == "object" and schema.get("additionalProperties") is not False:
        return f"{where}: For 'object' type, 'additionalProperties' must be explicitly set to false"
    return next((p for key, sub in schema.items() if key != "enum"
                 and (p := schema_problem(list(sub.values()) if key == "properties" else sub, where))), None)


class AnthropicHandler(EmulatorHandler):
    dialect = "anthropic"
    paths = ("/v1/messages",)

    def key_of(self):
        return self.headers.get("x-api-key")

    def check(self, body):
        if not self.headers.get("anthropic-version"):
            raise Refusal(400, INVALID, "anthropic-version: header is required")
        if "max_tokens" not in body:
            raise Refusal(400, INVALID, "max_tokens: Field required")
        if not 0 <= body.get("temperature", 1) <= 1:
            raise Refusal(400, INVALID, "temperature: range: 0..1")
        fmt = body.get("output_format")
        if fmt and (problem := schema_problem(fmt.get("schema"))):
            raise Refusal(400, INVALID, problem)

    def error(self, behaviour, status=None, message=None):
        wait = self.server.state.wait_s

        def body(kind, text):
            return {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_emulated"}

        if behaviour in (RATE_LIMITED, RESET_ONLY):
            # Resets at a whole second, as the header has no fractions: the wait it means is up to 1 s more.
            reset = rfc3339(int(time.time() + wait) + 1)
            headers = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                       "anthropic-ratelimit-requests-reset": reset}
            if behaviour == RATE_LIMITED:
                headers["retry-after"] = f"{wait:g}"
            asked = wait if behaviour == RATE_LIMITED else datetime.fromisoformat(reset).timestamp() - time.time()
            return 429, body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate "
                             "limit"), headers, round(asked, 3)
        if behaviour == OVERLOADED:
            return 529, body("overloaded_error", "Overloaded"), {}, None
        if behaviour == API_ERROR:
            return 500, body("api_error", "Internal server error"), {}, None
        if behaviour == BAD_KEY:
            return 401, body("authentication_error", "invalid x-api-key"), {}, None
        if behaviour == FORBIDDEN:
            return 403, body("permission_error", "Your API key does not have permission to use the specified "
                             "resource."), {}, None
        if behaviour == UNKNOWN_MODEL:
            return status or 404, body("not_found_error", message or "model: not found"), {}, None
        assert behaviour == INVALID, behaviour
        return status or 400, body("invalid_request_error", message or "messages: Field required"), {}, None

    def answer(self, body, model, shape):
        schema = (body.get("output_format") or {}).get("schema")
        content = []
        if shape.get("reasoning"):
            content.append({"type": "thinking", "thinking": shape["reasoning"], "signature": "emulated"})
        content.append({"type": "text", "text": shape.get("content", answer_text(schema))})
        return {"id": "msg_emulated", "type": "message", "role": "assistant", "model": model, "content": content,
                "stop_reason": STOP.get(shape.get("finish_reason", "stop"), shape.get("finish_reason")),
                "stop_sequence": None, "usage": {"input_tokens": 20, "output_tokens": 10}}


class AnthropicEmulator(Emulator):
    handler = AnthropicHandler
    base_path = ""
    retryable = (RATE_LIMITED, RESET_ONLY, OVERLOADED, API_ERROR)
