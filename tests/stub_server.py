"""A small OpenAI-compatible chat server on 127.0.0.1 for the model-module tests.

Per model name, `script[model]` is a list of behaviours consumed one per request
(then `default`, a behaviour or a function returning one): "drop" (the connection closes unanswered), "ok", "429", "500", "timeout" (answers after `slow_s`),
"badjson" (a 200 whose content is not JSON), "garbled" (a body that is not JSON), "404" (a model the
provider does not know) and "400schema" (a JSON-schema response_format refused).
The 500 body echoes the Authorization header, and so may a responder, so a test can
check that a key never reaches a file. "401" answers as a provider refusing the key does.

`rate_limit(rpm, burst_s, per_model)` makes it a rate-limited provider: a token bucket (one per
model, or one for the server) refilling `rpm` a minute and holding `burst_s` seconds' worth;
a request that finds it empty is answered 429 with Retry-After (and retry-after-ms) at once and
counted in `rate_limited`. `GET /stats` returns the counts (for a server in another process).
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubState:
    def __init__(self):
        self.lock = threading.Lock()
        self.script: dict[str, list[str]] = {}
        self.default = "ok"
        self.content = '{"answer": "yes"}'
        self.responder = None  # (body, headers) -> content; when set, replaces `content`
        self.usage = None  # (body, answer) -> the reply's `usage` object; when unset, 11 in and 5 out
        self.latency_s = 0.0
        self.slow_s = 3.0
        self.retry_after_s: float | None = None  # a 429 sends Retry-After when set
        self.requests: list[dict] = []
        self.arrived: list[float] = []  # time.time() of each request's arrival
        self.in_flight = 0
        self.max_in_flight = 0
        self.rpm: float | None = None  # the server-side rate limit (see rate_limit)
        self.burst_s = 1.0
        self.per_model = False
        self.buckets: dict[str, list[float]] = {}  # bucket -> [tokens, last refill time]
        self.rate_limited = 0  # 429s answered by the rate limit
        self.accepted_at: list[float] = []  # when each request the rate limit let through arrived

    def rate_limit(self, rpm: float, burst_s: float = 1.0, per_model: bool = False) -> None:
        self.rpm, self.burst_s, self.per_model = rpm, burst_s, per_model

    def take(self, model: str) -> float | None:
        """None when the rate limit lets a request through now, else the seconds until it would."""
        if self.rpm is None:
            return None
        per_s, capacity = self.rpm / 60, max(1.0, self.rpm / 60 * self.burst_s)
        with self.lock:
            now = time.monotonic()
            bucket = self.buckets.setdefault(model if self.per_model else "", [capacity, now])
            bucket[0] = min(capacity, bucket[0] + (now - bucket[1]) * per_s)
            bucket[1] = now
            if bucket[0] >= 1:
                bucket[0] -= 1
                self.accepted_at.append(now)
                return None
            self.rate_limited += 1
            return (1 - bucket[0]) / per_s

    def stats(self) -> dict:
        with self.lock:
            accepted = sorted(self.accepted_at)
            return {"requests": len(self.requests), "rate_limited": self.rate_limited,
                    "max_in_flight": self.max_in_flight, "accepted": len(accepted),
                    "first_accepted": accepted[0] if accepted else None,
                    "last_accepted": accepted[-1] if accepted else None,
                    "accepted_per_s": _per_second(accepted)}

    def next_behaviour(self, model: str) -> str:
        with self.lock:
            queue = self.script.get(model)
            if queue:
                return queue.pop(0)
            return self.default() if callable(self.default) else self.default


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict | None = None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/stats"):
            return self._send(200, json.dumps(self.server.state.stats()).encode())
        return self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self):
        state: StubState = self.server.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with state.lock:
            state.requests.append(body)
            state.arrived.append(time.time())
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            self._answer(state, body)
        finally:
            with state.lock:
                state.in_flight -= 1

    def _answer(self, state, body):
        wait = state.take(body["model"])
        if wait is not None:
            return self._send(429, b'{"error": {"message": "rate limit reached", "type": "rate_limit"}}',
                              {"Retry-After": str(math.ceil(wait)), "retry-after-ms": str(math.ceil(wait * 1000))})
        behaviour = state.next_behaviour(body["model"])
        time.sleep(state.latency_s)
        if behaviour == "429":
            headers = {"Retry-After": str(state.retry_after_s)} if state.retry_after_s is not None else {}
            return self._send(429, b'{"error": {"message": "rate limited", "type": "rate_limit"}}', headers)
        if behaviour == "500":
            echo = self.headers.get("Authorization", "")
            return self._send(500, json.dumps({"error": {"message": f"server error (saw {echo})"}}).encode())
        if behaviour == "drop":  # the connection closes without an answer
            self.close_connection = True
            return None
        if behaviour == "401":
            return self._send(401, b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}')
        if behaviour == "404":  # as OpenAI answers a model it does not know
            return self._send(404, json.dumps({"error": {
                "message": f"The model `{body['model']}` does not exist or you do not have access to it.",
                "type": "invalid_request_error", "code": "model_not_found"}}).encode())
        if behaviour == "400schema":  # as a model without structured output refuses a JSON schema
            return self._send(400, b'{"error": {"message": "Invalid parameter: \'response_format\' of type '
                                   b'\'json_schema\' is not supported with this model.", "type": '
                                   b'"invalid_request_error", "param": "response_format"}}')
        if behaviour == "garbled":
            return self._send(200, b"{this is not json")
        if behaviour == "timeout":
            time.sleep(state.slow_s)
        content = "not json {" if behaviour == "badjson" else (
            state.responder(body, self.headers) if state.responder else state.content)
        # a dict is a whole answer (llm.shapes.record): its finish reason, reasoning_content, refusal
        answer = content if isinstance(content, dict) else {"content": content}
        message = {"role": "assistant", "content": answer["content"]}
        message |= {f: answer[f] for f in ("reasoning_content", "refusal") if answer.get(f) is not None}
        reply = {
            "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": answer.get("finish_reason", "stop"), "message": message}],
            "usage": state.usage(body, answer) if state.usage else {"prompt_tokens": 11, "completion_tokens": 5,
                                                                      "total_tokens": 16},
        }
        self._send(200, json.dumps(reply).encode())


def _per_second(times: list[float]) -> list[int]:
    """Counts of `times` (sorted) per second from the first."""
    if not times:
        return []
    counts = [0] * (int(times[-1] - times[0]) + 1)
    for t in times:
        counts[int(t - times[0])] += 1
    return counts


STUB_TEXT = "stub rewrite of this text"


def schema_instance(schema: dict):
    """A small valid instance of a JSON schema: first enum value, true, one array item,
    every property; enough for the schemas our prompts send."""
    if "anyOf" in schema:
        return schema_instance(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: schema_instance(sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        if "prefixItems" in schema:
            return [schema_instance(sub) for sub in schema["prefixItems"]]
        return [schema_instance(schema.get("items", {"type": "string"}))]
    return {"string": STUB_TEXT, "boolean": True, "integer": 0, "number": 0.0, "null": None}.get(kind, STUB_TEXT)


def schema_answer(body: dict, headers=None) -> str:
    """A responder: a valid answer to the request's JSON schema (a stand-in for a model)."""
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") or {"type": "object"}
    return json.dumps(schema_instance(schema))


def model_schema_answer(body: dict, headers=None) -> str:
    """A responder like schema_answer whose strings name the model (so models' answers differ)."""
    return schema_answer(body, headers).replace(STUB_TEXT, f"{STUB_TEXT} by {body['model']}")


class LocalServer:
    """`with <subclass>() as server:` serves `handler` on a free port of 127.0.0.1 in a thread, with
    `state` (a fresh `state_class()`) shared by its requests; `server.api_base` is OpenAI-style (…/v1)."""

    state_class: type = object
    handler: type = BaseHTTPRequestHandler

    def __init__(self):
        self.state = self.state_class()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        self.httpd.daemon_threads = True
        self.httpd.state = self.state
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class StubServer(LocalServer):
    """The OpenAI-compatible chat stub."""

    state_class, handler = StubState, _Handler


def serve_in_subprocess(latency_s: float, port_queue, rpm: float | None = None, burst_s: float = 1.0,
                        schema_answers: bool = False) -> None:
    """Target for multiprocessing: serve until killed (benchmarks keep its CPU apart), rate
    limited to `rpm` when given, answering each request's schema when `schema_answers`."""
    server = StubServer()
    server.state.latency_s = latency_s
    if rpm is not None:
        server.state.rate_limit(rpm, burst_s)
    if schema_answers:
        server.state.responder = model_schema_answer
    port_queue.put(server.httpd.server_address[1])
    server.httpd.serve_forever()
