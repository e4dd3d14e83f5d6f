"""What every provider emulator shares: the scripted behaviours, the counts, the HTTP plumbing.

An emulator is a `LocalServer` (tests/stub_server.py) whose handler speaks one provider's wire
format. Per request it takes one behaviour:
- from `state.script[model]` (a list, consumed one per request), else
- every `state.every`-th request (counted over the server from the first) takes the next of
  `state.injected` in turn (the provider's own retryable errors, say), else
- `state.default` ("ok").

A behaviour is a name the dialect knows (`"ok"`, its retryable errors, `"bad_key"`,
`"forbidden"`, `"unknown_model"`, `"invalid"`) or a dict that shapes an ok answer:
`{"content": ..., "finish_reason": ..., "reasoning": ...}` (each optional; `finish_reason` takes
our names: stop, length, refusal, and each dialect writes its own, e.g. Gemini's MAX_TOKENS or
SAFETY). Whatever the behaviour, a request the real API would refuse (a parameter its reference
rejects) is refused first, in the provider's own error shape: a test then sees what the real
provider would have said.

Counts (`state.counts()`): requests, answers by outcome, errors sent by behaviour, and the waits
each error asked for (seconds, as the provider put them in its headers or body).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

from tests.stub_server import STUB_TEXT, LocalServer, schema_instance

OK = "ok"
# Non-retryable errors every dialect answers in its own shape.
BAD_KEY, FORBIDDEN, UNKNOWN_MODEL, INVALID = "bad_key", "forbidden", "unknown_model", "invalid"
FATAL = (BAD_KEY, FORBIDDEN, UNKNOWN_MODEL, INVALID)
# Property values that make an answer usable by the stage that asks (the tagger's indices must
# name a user step and the agent step after it; every R-Judge trajectory starts user, agent).
ANSWER_VALUES = {"risk_trigger": 0, "execution_point": 1}
REACT_TEXT = "[Agent_Thought]: emulated thought\n[Agent_Action]: emulated action"


def instance(schema):
    """What a model held to `schema` by constrained decoding writes (stub_server.schema_instance,
    plus JSON Schema's boolean schemas: an array whose `items` is false can only be empty), with
    ANSWER_VALUES for the properties they name. An array whose items are `anyOf` alternatives gets
    one item of each, in order (a model following an order stated in the description)."""
    if isinstance(schema, bool):
        return STUB_TEXT if schema else None
    if schema.get("type") == "array" and "prefixItems" not in schema:
        items = schema.get("items", {"type": "string"})
        if items is False:
            return []
        return [instance(alt) for alt in items["anyOf"]] if isinstance(items, dict) and "anyOf" in items \
            else [instance(items)]
    if schema.get("type") == "object" or "properties" in schema:
        return {name: ANSWER_VALUES.get(name, instance(sub)) for name, sub in schema.get("properties", {}).items()}
    if "prefixItems" in schema:
        return [instance(sub) for sub in schema["prefixItems"]]
    return schema_instance(schema)


def answer_text(schema: dict | None) -> str:
    """A valid answer: an instance of the request's JSON schema, or a ReAct step when none is sent."""
    return REACT_TEXT if schema is None else json.dumps(instance(schema))


class EmulatorState:
    def __init__(self):
        self.lock = threading.Lock()
        self.script: dict[str, list] = {}
        self.default = OK
        self.injected: list = []  # the behaviours every `every`-th request takes, in turn
        self.every = 0
        self.wait_s = 1.0  # the wait a retryable error asks for
        self.requests: list[dict] = []  # {"path", "model", "body", "headers", "behaviour"}
        self.sent: dict[str, int] = {}  # behaviour -> times answered with it (refusals under their reason)
        self.waits_asked: list[float] = []
        self.last_error = None  # the body of the last error sent

    def next_behaviour(self, model: str):
        with self.lock:
            queue = self.script.get(model)
            if queue:
                return queue.pop(0)
            if self.injected and self.every and len(self.requests) % self.every == 0:
                return self.injected[len(self.requests) // self.every % len(self.injected)]
            return self.default

    def record(self, entry: dict) -> None:
        with self.lock:
            self.requests.append(entry)

    def count(self, outcome: str, wait_s: float | None = None) -> None:
        with self.lock:
            self.sent[outcome] = self.sent.get(outcome, 0) + 1
            if wait_s is not None:
                self.waits_asked.append(wait_s)

    def counts(self) -> dict:
        with self.lock:
            return {"requests": len(self.requests), "sent": dict(sorted(self.sent.items())),
                    "waits_asked_s": round(sum(self.waits_asked), 3), "waits_asked": len(self.waits_asked)}


class Refusal(Exception):
    """A request the provider refuses as it stands (its reference says so): (status, behaviour name, message)."""

    def __init__(self, status: int, name: str, message: str):
        super().__init__(message)
        self.status, self.name, self.message = status, name, message


class EmulatorHandler(BaseHTTPRequestHandler):
    """The HTTP side. A dialect sets `paths` and implements `model_of`, `key_of`, `check`,
    `error` and `answer`."""

    protocol_version = "HTTP/1.1"
    dialect = "base"
    paths: tuple[str, ...] = ()  # path suffixes it serves ("{model}" stands for the model name)

    def log_message(self, *args):  # keep test output quiet
        pass

    # -- what a dialect implements ----------------------------------------------------------------
    def model_of(self, body: dict) -> str:
        return body.get("model", "")

    def key_of(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else None

    def check(self, body: dict) -> None:
        """Raise Refusal for a request the real API refuses."""

    def error(self, behaviour: str, status: int | None = None, message: str | None = None):
        """(status, body dict, headers, wait asked or None) of an error behaviour."""
        raise NotImplementedError

    def answer(self, body: dict, model: str, shape: dict) -> dict:
        """The provider's success body for `shape` (content, finish_reason, reasoning)."""
        raise NotImplementedError

    # -- plumbing ---------------------------------------------------------------------------------
    def send_json(self, status: int, body, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def serves(self) -> bool:
        path = self.path.split("?", 1)[0]
        return any(path.endswith(p.split("{model}")[-1]) for p in self.paths)

    def do_POST(self):
        try:
            self._handle()
        except Exception as err:  # an emulator bug: counted and named, never a silent disconnect
            self.server.state.count(f"emulator error: {type(err).__name__}: {err}")
            raise

    def _handle(self):
        state: EmulatorState = self.server.state
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.loads(raw or b"{}")
        model = self.model_of(body)
        entry = {"path": self.path, "model": model, "body": body, "headers": dict(self.headers)}
        behaviour = state.next_behaviour(model)
        state.record(entry | {"behaviour": behaviour})
        if not self.serves():
            state.count("wrong_path")
            return self.send_json(*self.error(UNKNOWN_MODEL, 404, f"no route for {self.path}")[:3])
        if behaviour == BAD_KEY or not self.key_of():
            return self._error(BAD_KEY)
        if behaviour in FATAL:
            return self._error(behaviour)
        try:
            self.check(body)
        except Refusal as refusal:
            state.count(f"refused: {refusal.message}")
            return self.send_json(*self.error(INVALID, refusal.status, refusal.message)[:3])
        if isinstance(behaviour, dict) or behaviour == OK:
            shape = behaviour if isinstance(behaviour, dict) else {}
            state.count(OK if not shape else "shaped")
            return self.send_json(200, self.answer(body, model, shape))
        return self._error(behaviour)

    def _error(self, behaviour: str) -> None:
        status, body, headers, wait = self.error(behaviour)
        self.server.state.count(behaviour, wait)
        self.server.state.last_error = body
        self.send_json(status, body, headers)


class Emulator(LocalServer):
    """`with <Dialect>Emulator() as emulator:` one provider's API on 127.0.0.1; `api_base` is what a
    model entry's `api_base` must say for litellm to reach it (`base_path` after the address)."""

    state_class = EmulatorState
    base_path = "/v1"

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{self.base_path}"

    retryable: tuple[str, ...] = ()  # the dialect's retryable errors

    def inject(self, behaviours, every: int, wait_s: float = 1.0) -> None:
        """Every `every`-th request gets the next of `behaviours` (a name or a list of names), each
        asking for `wait_s` where the provider asks for a wait."""
        names = [behaviours] if isinstance(behaviours, str) else list(behaviours)
        self.state.injected, self.state.every, self.state.wait_s = names, every, wait_s
