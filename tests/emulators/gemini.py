"""Gemini generateContent (`POST /v1beta/models/{model}:generateContent`), as Google's API
reference describes it.

The key comes in `x-goog-api-key` (or `?key=`). Errors are a google.rpc.Status:
`{"error": {"code", "message", "status", "details": [...]}}`. A quota or rate limit is 429
`RESOURCE_EXHAUSTED` whose details hold a `google.rpc.RetryInfo` with `retryDelay` ("1s"): the
wait is in the body, not in a header. 503 `UNAVAILABLE` (model overloaded) and 500 `INTERNAL` send
no wait. A bad key is 400 `INVALID_ARGUMENT` with reason API_KEY_INVALID; an unknown model 404
`NOT_FOUND`. Answers: `candidates[0].content.parts` (a part with `thought: true` is the model's
thinking), `finishReason` STOP, MAX_TOKENS or SAFETY, and `usageMetadata`.
"""

from __future__ import annotations

import re

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

RATE_LIMITED, UNAVAILABLE, INTERNAL = "rate_limited", "unavailable", "internal"
FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "refusal": "SAFETY"}
GENERATION_FIELDS = {"temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences", "seed",
                     "presencePenalty", "frequencyPenalty", "responseMimeType", "responseSchema",
                     "responseJsonSchema", "thinkingConfig", "responseLogprobs", "logprobs"}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class GeminiHandler(EmulatorHandler):
    dialect = "gemini"
    paths = (":generateContent",)

    def model_of(self, body):
        match = re.search(r"/models/([^/:?]+):", self.path)
        return match.group(1) if match else ""

    def key_of(self):
        query = re.search(r"[?&]key=([^&]+)", self.path)
        return self.headers.get("x-goog-api-key") or (query.group(1) if query else None)

    def check(self, body):
        config = body.get("generationConfig") or body.get("generation_config") or {}
        unknown = sorted(k for k in config if camel(k) not in GENERATION_FIELDS)
        if unknown:
            raise Refusal(400, INVALID, f'Invalid JSON payload received. Unknown name "{unknown[0]}" at '
                          "'generation_config': Cannot find field.")
        keys = {camel(k) for k in config}
        if {"responseSchema", "responseJsonSchema"} <= keys:
            raise Refusal(400, INVALID, "responseSchema and responseJsonSchema cannot both be set")
        if keys & {"responseSchema", "responseJsonSchema"} and config.get(
                "response_mime_type", config.get("responseMimeType")) != "application/json":
            raise Refusal(400, INVALID, "response_mime_type must be application/json with a response schema")

    def error(self, behaviour, status=None, message=None):
        wait = self.server.state.wait_s

        def body(code, rpc_status, text, details=()):
            return {"error": {"code": code, "message": text, "status": rpc_status, "details": list(details)}}

        if behaviour == RATE_LIMITED:
            details = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}]},
                       {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait:g}s"}]
            return 429, body(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your "
                             "plan and billing details.", details), {}, wait
        if behaviour == UNAVAILABLE:
            return 503, body(503, "UNAVAILABLE", "The model is overloaded. Please try again later."), {}, None
        if behaviour == INTERNAL:
            return 500, body(500, "INTERNAL", "An internal error has occurred."), {}, None
        if behaviour == BAD_KEY:
            return 400, body(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                 "domain": "googleapis.com"}]), {}, None
        if behaviour == FORBIDDEN:
            return 403, body(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."), {}, None
        if behaviour == UNKNOWN_MODEL:
            return status or 404, body(404, "NOT_FOUND", message or "models/unknown is not found for API version "
                                       "v1beta, or is not supported for generateContent."), {}, None
        assert behaviour == INVALID, behaviour
        return status or 400, body(400, "INVALID_ARGUMENT", message or "Request contains an invalid "
                                   "argument."), {}, None

    def answer(self, body, model, shape):
        config = body.get("generationConfig") or {}
        schema = config.get("response_json_schema") or config.get("responseJsonSchema") or config.get(
            "response_schema") or config.get("responseSchema")
        finish = FINISH.get(shape.get("finish_reason", "stop"), shape.get("finish_reason"))
        parts = []
        if shape.get("reasoning"):
            parts.append({"text": shape["reasoning"], "thought": True})
        candidate = {"index": 0, "finishReason": finish}
        if finish != "SAFETY" or "content" in shape:
            parts.append({"text": shape.get("content", answer_text(schema))})
            candidate["content"] = {"role": "model", "parts": parts}
        if finish == "SAFETY":
            candidate["safetyRatings"] = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                                           "blocked": True}]
        return {"candidates": [candidate],
                "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 10, "totalTokenCount": 30},
                "modelVersion": model, "responseId": "emulated"}


class GeminiEmulator(Emulator):
    handler = GeminiHandler
    base_path = "/v1beta"
    retryable = (RATE_LIMITED, UNAVAILABLE, INTERNAL)
