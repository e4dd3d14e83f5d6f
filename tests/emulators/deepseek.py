"""DeepSeek's API (`POST /chat/completions`, OpenAI-shaped), as its reference describes it.

It answers JSON only through `response_format: {"type": "json_object"}` and only when the prompt
says "json"; any other `response_format` type is refused (400). Errors carry no wait: 429 (rate
limit reached) and 503 (server overloaded) are retried on our own backoff. A reasoning model's
thinking comes in `message.reasoning_content`.
"""

from __future__ import annotations

import json

from tests.emulators.base import BAD_KEY, Emulator, Refusal, answer_text
from tests.emulators.openai_chat import OVERLOADED, RATE_LIMITED, OpenAIHandler


class DeepSeekHandler(OpenAIHandler):
    dialect = "deepseek"
    reasoning_field = "reasoning_content"

    def check(self, body):
        fmt = (body.get("response_format") or {}).get("type", "text")
        if fmt not in ("text", "json_object"):
            raise Refusal(400, "invalid_request_error", "This response_format type is unavailable now")
        if fmt == "json_object" and "json" not in json.dumps(body.get("messages", [])).lower():
            raise Refusal(400, "invalid_request_error", "Prompt must contain the word 'json' in some form to "
                          "use 'response_format' of type 'json_object'.")

    def error(self, behaviour, status=None, message=None):
        if behaviour == RATE_LIMITED:
            return 429, self.error_body(429, "rate_limit_error", None, "Rate Limit Reached"), {}, None
        if behaviour == OVERLOADED:
            return 503, self.error_body(503, "service_unavailable_error", None, "Server Overloaded"), {}, None
        if behaviour == BAD_KEY:
            return 401, self.error_body(401, "authentication_error", "invalid_request_error",
                                        "Authentication Fails, Your api key is invalid"), {}, None
        return super().error(behaviour, status, message)

    def answer(self, body, model, shape):
        reply = super().answer(body, model, shape)
        if "content" not in shape and (body.get("response_format") or {}).get("type") == "json_object":
            # json_object mode sends no schema: answer the one the prompt spells out after "Schema:".
            reply["choices"][0]["message"]["content"] = answer_text(prompt_schema(body))
        return reply


def prompt_schema(body: dict) -> dict:
    """The JSON schema a json_object request's prompt carries (the client appends it), else any object."""
    for message in reversed(body.get("messages", [])):
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        marker = text.rfind("JSON schema:")  # where wire.schema_in_prompt puts it
        if marker >= 0:
            try:
                return json.loads(text[marker + len("JSON schema:"):].strip())
            except ValueError:
                pass
    return {"type": "object"}


class DeepSeekEmulator(Emulator):
    handler = DeepSeekHandler
    base_path = ""
    retryable = (RATE_LIMITED, OVERLOADED)
