"""vLLM's OpenAI-compatible server (`POST /v1/chat/completions`), as its documentation describes it.

Started with `--api-key`, it refuses any other key with 401 `{"error": "Unauthorized"}`. With a
reasoning parser (`--reasoning-parser deepseek_r1`), the model's thinking comes apart from the
answer in `message.reasoning_content`. An overloaded or restarting server answers 503 with no wait.
An unknown model is a 404 in OpenAI's error shape.
"""

from __future__ import annotations

from tests.emulators.base import BAD_KEY, Emulator
from tests.emulators.openai_chat import OVERLOADED, SERVER_ERROR, OpenAIHandler


class VLLMHandler(OpenAIHandler):
    dialect = "vllm"
    reasoning_field = "reasoning_content"

    def check(self, body):  # vLLM takes max_tokens and any temperature
        return None

    def error(self, behaviour, status=None, message=None):
        if behaviour == BAD_KEY:
            return 401, {"error": "Unauthorized"}, {}, None
        if behaviour == OVERLOADED:
            return 503, self.error_body(503, "ServiceUnavailableError", 503, "The server is overloaded; "
                                        "try again later."), {}, None
        return super().error(behaviour, status, message)


class VLLMEmulator(Emulator):
    handler = VLLMHandler
    retryable = (OVERLOADED, SERVER_ERROR)
