"""A local stand-in for the providers' batch APIs on 127.0.0.1 (tests and benchmarks only).

It implements just enough of OpenAI's `/v1/files`, `/v1/batches`, `/v1/batches/{id}` and
`/v1/files/{id}/content`, of Anthropic's `/v1/messages/batches`, `/v1/messages/batches/{id}`
and `/v1/messages/batches/{id}/results`, and of Gemini's `/v1beta/models/{model}:batchGenerateContent`,
`/v1beta/batches` (list), `/v1beta/batches/{id}` (a long-running operation) and its results file
(`/v1beta/files/{id}:download`), for the openai, anthropic and google-genai SDKs. Scripted behaviour
(`BatchStubState`): a batch answers "in progress" to `polls_before_end` retrievals, then ends as
`end_state` ("completed", "expired", "cancelled" or "failed"; Anthropic's batches always end as
"ended", their unanswered items as expired or canceled; Gemini's as BATCH_STATE_SUCCEEDED,
_EXPIRED, _CANCELLED or _FAILED, with answers inline, with or without their metadata
(`gemini_metadata`), or in a results file (`gemini_results_file`)); only the first `answered`
requests sent in a batch are answered when it does not complete; a request whose last message
contains `fail_marker` is answered with a per-item error. Every submission is counted
(`submissions`).
"""

from __future__ import annotations

import json
import re
import threading
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler

from tests.stub_server import LocalServer

TOKENS_IN, TOKENS_OUT = 11, 5  # the usage every answer reports
REASONING = 2  # of TOKENS_OUT, the hidden reasoning (OpenAI's completion_tokens_details, Gemini's thoughtsTokenCount)
GEMINI_STATES = {"completed": "BATCH_STATE_SUCCEEDED", "expired": "BATCH_STATE_EXPIRED",
                 "cancelled": "BATCH_STATE_CANCELLED", "failed": "BATCH_STATE_FAILED"}


class BatchStubState:
    def __init__(self):
        self.lock = threading.Lock()
        self.polls_before_end = 1
        self.end_state = "completed"
        self.answered: int | None = None  # None: every request of an ended batch is answered
        self.fail_marker = "FAIL"
        self.content = '{"answer": "yes"}'
        # The rest of an answer (llm.shapes): OpenAI's message fields and finish reason; Anthropic's
        # thinking block, stop reason and refusal explanation (stop_details).
        self.reasoning: str | None = None
        self.refusal: str | None = None
        self.stop = "stop"  # OpenAI's finish reason; Anthropic's stop reason is `anthropic_stop`
        self.anthropic_stop = "end_turn"
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}  # id -> {"api", "requests", "polls", "state"}
        self.submissions: list[tuple[str, str, int]] = []  # (api, batch id, number of requests)
        self.retrievals: dict[str, int] = {}
        self.ids = 0
        self.refused_key = "\0"  # a key ending so is refused (401) on every retrieval
        self.keys_seen: set[str] = set()  # the keys sent (Authorization without "Bearer ", x-api-key, x-goog-api-key)
        self.gemini_results_file = False  # Gemini's answers in a results file instead of inline
        self.gemini_metadata = True  # False: inline answers without their request's metadata (seen from Google)
        self.echo = False  # answer {"answer": <the request's last text>} instead of `content`

    def new_id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}_{self.ids:04d}"

    def poll(self, batch_id: str) -> str:
        """The batch's state after one more retrieval."""
        batch = self.batches[batch_id]
        self.retrievals[batch_id] = self.retrievals.get(batch_id, 0) + 1
        if batch["state"] == "in_progress":
            batch["polls"] += 1
            if batch["polls"] > self.polls_before_end:
                batch["state"] = {"openai": self.end_state, "anthropic": "ended",
                                  "gemini": GEMINI_STATES.get(self.end_state)}[batch["api"]]
                batch["end"] = self.end_state
        return batch["state"]

    def outcome(self, batch: dict, index: int, last_text: str) -> str:
        """ok | failed | unanswered for the request at `index` of an ended batch."""
        if batch["end"] != "completed" and self.answered is not None and index >= self.answered:
            return "unanswered"
        return "failed" if self.fail_marker and self.fail_marker in last_text else "ok"


def _last_text(messages: list[dict]) -> str:
    content = messages[-1]["content"] if messages else ""
    return content if isinstance(content, str) else json.dumps(content)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, payload, content_type="application/json"):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _note_key(self):
        for name in ("Authorization", "x-api-key", "x-goog-api-key"):
            if self.headers.get(name):
                self.server.state.keys_seen.add(self.headers[name].removeprefix("Bearer "))

    def do_POST(self):
        state: BatchStubState = self.server.state
        self._note_key()
        raw = self._body()
        with state.lock:
            if self.path == "/v1/files":
                return self._send(200, self._upload(state, raw))
            if self.path == "/v1/batches":
                return self._openai_create(state, json.loads(raw))
            if self.path == "/v1/messages/batches":
                return self._anthropic_create(state, json.loads(raw))
            if m := re.fullmatch(r"/v1beta/models/([^/:]+):batchGenerateContent", self.path):
                return self._gemini_create(state, m.group(1), json.loads(raw))
        self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_GET(self):
        state: BatchStubState = self.server.state
        self._note_key()
        with state.lock:
            if self.headers.get("x-goog-api-key", "").endswith(state.refused_key):  # Google's answer to a bad key
                return self._send(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                                  "API key not valid. Please pass a valid API key."}})
            if self.headers.get("Authorization", self.headers.get("x-api-key", "")).endswith(state.refused_key):
                return self._send(401, {"type": "error", "error": {"type": "authentication_error",
                                                                   "message": "invalid x-api-key"}})
            if self._gemini_get(state):
                return None
            if self.path.partition("?")[0] in ("/v1/batches", "/v1/messages/batches"):  # a list (the preflight's)
                return self._send(200, {"object": "list", "data": [], "has_more": False, "first_id": None,
                                        "last_id": None})
            m = re.fullmatch(r"/v1/(?:messages/)?batches/([^/?]+)(?:/results)?", self.path)
            if m and m.group(1) not in state.batches:
                return self._send(404, {"type": "error", "error": {"type": "not_found_error",
                                                                   "message": f"no batch {m.group(1)}"}})
            if m := re.fullmatch(r"/v1/files/([^/]+)/content", self.path):
                return self._send(200, state.files[m.group(1)], "application/octet-stream")
            if m := re.fullmatch(r"/v1/batches/([^/?]+)", self.path):
                state.poll(m.group(1))
                return self._send(200, self._openai_batch(state, m.group(1)))
            if m := re.fullmatch(r"/v1/messages/batches/([^/?]+)/results", self.path):
                return self._send(200, self._anthropic_results(state, m.group(1)), "application/binary")
            if m := re.fullmatch(r"/v1/messages/batches/([^/?]+)", self.path):
                state.poll(m.group(1))
                return self._send(200, self._anthropic_batch(state, m.group(1)))
        self._send(404, {"error": {"message": f"no route {self.path}"}})

    # -- OpenAI ------------------------------------------------------------------
    def _upload(self, state, raw: bytes) -> dict:
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + raw)
        data = next(part.get_payload(decode=True) for part in message.iter_parts()
                    if part.get_param("name", header="content-disposition") == "file")
        file_id = state.new_id("file")
        state.files[file_id] = data
        return {"id": file_id, "object": "file", "bytes": len(data), "created_at": 0, "filename": "requests.jsonl",
                "purpose": "batch", "status": "processed"}

    def _openai_create(self, state, body: dict):
        lines = [json.loads(line) for line in state.files[body["input_file_id"]].decode().splitlines() if line]
        batch_id = state.new_id("batch")
        state.batches[batch_id] = {"api": "openai", "requests": lines, "polls": 0, "state": "in_progress",
                                   "input_file_id": body["input_file_id"]}
        state.submissions.append(("openai", batch_id, len(lines)))
        self._send(200, self._openai_batch(state, batch_id))

    def _openai_batch(self, state, batch_id: str) -> dict:
        batch = state.batches[batch_id]
        ended = batch["state"] != "in_progress"
        if ended and "output_file_id" not in batch:
            self._openai_files(state, batch_id, batch)
        counts = batch.get("counts", {"completed": 0, "failed": 0})
        return {"id": batch_id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": batch["input_file_id"], "completion_window": "24h", "status": batch["state"],
                "output_file_id": batch.get("output_file_id"), "error_file_id": batch.get("error_file_id"),
                "created_at": 0, "request_counts": {"total": len(batch["requests"]), **counts}}

    def _openai_files(self, state, batch_id, batch):
        output, errors = [], []
        for i, line in enumerate(batch["requests"]):
            body = line["body"]
            outcome = state.outcome(batch, i, _last_text(body["messages"]))
            if outcome == "ok":
                output.append({"id": f"batch_req_{i}", "custom_id": line["custom_id"], "error": None, "response": {
                    "status_code": 200, "request_id": f"req_{i}", "body": {
                        "id": f"chatcmpl-{batch_id}-{i}", "object": "chat.completion", "created": 0,
                        "model": body["model"], "system_fingerprint": "fp_stub",
                        "choices": [{"index": 0, "finish_reason": state.stop, "message": {
                            "role": "assistant", "content": state.content,
                            **({"reasoning_content": state.reasoning} if state.reasoning else {}),
                            **({"refusal": state.refusal} if state.refusal else {})}}],
                        "usage": {"prompt_tokens": TOKENS_IN, "completion_tokens": TOKENS_OUT,
                                  "total_tokens": TOKENS_IN + TOKENS_OUT,
                                  "completion_tokens_details": {"reasoning_tokens": REASONING}}}}})
            elif outcome == "failed":
                errors.append({"id": f"batch_req_{i}", "custom_id": line["custom_id"], "error": None, "response": {
                    "status_code": 400, "request_id": f"req_{i}", "body": {"error": {
                        "message": "stub refuses this request", "type": "invalid_request_error",
                        "code": "stub_refusal"}}}})
            elif batch["end"] == "expired":  # OpenAI lists the requests an expiry left undone
                errors.append({"id": f"batch_req_{i}", "custom_id": line["custom_id"], "response": None, "error": {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired."}})
        batch["counts"] = {"completed": len(output), "failed": len(errors)}
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                file_id = state.new_id("file")
                state.files[file_id] = "".join(json.dumps(line) + "\n" for line in lines).encode()
                batch[name] = file_id
            else:
                batch[name] = None

    # -- Anthropic ---------------------------------------------------------------
    def _anthropic_create(self, state, body: dict):
        batch_id = state.new_id("msgbatch")
        state.batches[batch_id] = {"api": "anthropic", "requests": body["requests"], "polls": 0,
                                   "state": "in_progress"}
        state.submissions.append(("anthropic", batch_id, len(body["requests"])))
        self._send(200, self._anthropic_batch(state, batch_id))

    def _anthropic_batch(self, state, batch_id: str) -> dict:
        batch = state.batches[batch_id]
        ended = batch["state"] == "ended"
        counts = {"processing": 0 if ended else len(batch["requests"]), "succeeded": 0, "errored": 0,
                  "canceled": 0, "expired": 0}
        if ended:
            for kind in self._anthropic_outcomes(state, batch):
                counts[kind] += 1
        return {"id": batch_id, "type": "message_batch", "processing_status": batch["state"],
                "request_counts": counts, "created_at": "2026-01-01T00:00:00Z",
                "expires_at": "2026-01-02T00:00:00Z", "ended_at": "2026-01-01T01:00:00Z" if ended else None,
                "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"http://{self.headers['Host']}/v1/messages/batches/{batch_id}/results" if ended
                else None}

    @staticmethod
    def _anthropic_outcomes(state, batch) -> list[str]:
        kinds = {"ok": "succeeded", "failed": "errored",
                 "unanswered": "canceled" if batch["end"] == "cancelled" else "expired"}
        return [kinds[state.outcome(batch, i, _last_text(r["params"]["messages"]))]
                for i, r in enumerate(batch["requests"])]

    def _anthropic_results(self, state, batch_id: str) -> bytes:
        batch = state.batches[batch_id]
        lines = []
        for i, (request, kind) in enumerate(zip(batch["requests"], self._anthropic_outcomes(state, batch))):
            if kind == "succeeded":
                result = {"type": "succeeded", "message": {
                    "id": f"msg_{batch_id}_{i}", "type": "message", "role": "assistant",
                    "model": request["params"]["model"],
                    "content": [*([{"type": "thinking", "thinking": state.reasoning, "signature": "s"}]
                                  if state.reasoning else []), {"type": "text", "text": state.content}],
                    "stop_reason": state.anthropic_stop, "stop_sequence": None,
                    **({"stop_details": {"explanation": state.refusal}} if state.refusal else {}),
                    "usage": {"input_tokens": TOKENS_IN, "output_tokens": TOKENS_OUT}}}
            elif kind == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": "stub refuses this request"}}}
            else:
                result = {"type": kind}
            lines.append({"custom_id": request["custom_id"], "result": result})
        return "".join(json.dumps(line) + "\n" for line in lines).encode()


    # -- Gemini ------------------------------------------------------------------
    def _gemini_create(self, state, model: str, body: dict):
        requests = body["batch"]["inputConfig"]["requests"]["requests"]
        batch_id = "batches/" + state.new_id("gembatch")
        state.batches[batch_id] = {"api": "gemini", "requests": requests, "polls": 0, "state": "in_progress",
                                   "model": f"models/{model}"}
        state.submissions.append(("gemini", batch_id, len(requests)))
        self._send(200, self._gemini_operation(state, batch_id))

    def _gemini_get(self, state) -> bool:
        """Answer a GET of Gemini's API; False for another provider's path."""
        path = self.path.partition("?")[0]
        if path == "/v1beta/batches":
            self._send(200, {"operations": [self._gemini_operation(state, b) for b in state.batches
                                            if state.batches[b]["api"] == "gemini"][:1]})
        elif m := re.fullmatch(r"/v1beta/(files/[^/:]+):download", path):  # with alt=media: the file's bytes
            self._send(200, state.files[m.group(1)], "application/octet-stream")
        elif m := re.fullmatch(r"/v1beta/(batches/[^/]+)", path):
            if m.group(1) not in state.batches:
                self._send(404, {"error": {"code": 404, "status": "NOT_FOUND",
                                           "message": f"Batch {m.group(1)} not found."}})
            else:
                state.poll(m.group(1))
                self._send(200, self._gemini_operation(state, m.group(1)))
        else:
            return False
        return True

    def _gemini_operation(self, state, batch_id: str) -> dict:
        """The batch as Google returns it: a long-running operation whose metadata is the batch."""
        batch = state.batches[batch_id]
        ended = batch["state"] != "in_progress"
        shown = batch["state"] if ended else "BATCH_STATE_RUNNING" if batch["polls"] else "BATCH_STATE_PENDING"
        metadata = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
                    "name": batch_id, "model": batch["model"], "state": shown,
                    "createTime": "2026-01-01T00:00:00Z", "updateTime": "2026-01-01T01:00:00Z",
                    "batchStats": {"requestCount": str(len(batch["requests"]))}}
        if ended:
            answers = []
            for i, request in enumerate(batch["requests"]):
                text = request["request"]["contents"][-1]["parts"][0]["text"]
                outcome = state.outcome(batch, i, text)
                key = (request.get("metadata") or {}).get("key")
                content = json.dumps({"answer": text}) if state.echo else state.content
                if outcome == "ok":
                    answers.append({"response": {
                        "candidates": [{"content": {"role": "model", "parts": [{"text": content}]},
                                        "finishReason": "STOP", "index": 0}],
                        "usageMetadata": {"promptTokenCount": TOKENS_IN, "candidatesTokenCount": TOKENS_OUT - REASONING,
                                          "thoughtsTokenCount": REASONING, "totalTokenCount": TOKENS_IN + TOKENS_OUT},
                        "modelVersion": batch["model"].removeprefix("models/"), "responseId": f"resp-{key[:12]}"},
                        "metadata": {"key": key}})
                elif outcome == "failed":
                    answers.append({"error": {"code": 400, "message": "stub refuses this request"},
                                    "metadata": {"key": key}})
            if state.gemini_results_file:
                file_id = batch.setdefault("file", "files/" + state.new_id("results"))
                state.files[file_id] = "".join(json.dumps({"key": a.pop("metadata")["key"], **a}) + "\n"
                                               for a in answers).encode()
                metadata["output"] = {"responsesFile": file_id}
            else:
                if not state.gemini_metadata:
                    for answer in answers:
                        answer.pop("metadata")
                metadata["output"] = {"inlinedResponses": {"inlinedResponses": answers}}
        return {"name": batch_id, "metadata": metadata, "done": ended}


class BatchStub(LocalServer):
    """`with BatchStub() as stub:` serves both APIs; `stub.api_base` is OpenAI-style (…/v1)."""

    state_class, handler = BatchStubState, _Handler


def serve_in_subprocess(port_queue, polls_before_end: int = 1) -> None:
    """Target for multiprocessing: serve until killed (benchmarks keep its CPU apart)."""
    server = BatchStub()
    server.state.polls_before_end = polls_before_end
    port_queue.put(server.httpd.server_address[1])
    server.httpd.serve_forever()
