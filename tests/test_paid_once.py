"""Each answer paid once, and a stop that stops the spending (the model module against the stub):
leases across processes sharing one cache file, a failed cache write, invalid Unicode, the stop mark
and a signal to a job."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aura_eval.llm import Endpoint, Request, stop
from aura_eval.llm.cache import LEASE_STALE_S, CacheError, Owner, ResponseCache, cache_key
from aura_eval.llm.client import ModelClient, litellm_module
from tests import timing
from tests.stub_server import StubServer
from tests.workflow import sigint_as_in_a_terminal

# the model client (litellm) against the stub, in one process or several
pytestmark = pytest.mark.suite

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def settings(cache, **extra) -> dict:
    return {"cache": str(cache), "replay": False, "concurrency": {"default": 8}, "max_retries": 2,
            "backoff_s": 0.1, "timeout_s": 30, "max_wait_s": 30, **extra}


def requests_for(api_base: str, n: int, prefix: str = "q") -> list[Request]:
    endpoint = Endpoint(name="stub", model="openai/stub", params={"temperature": 0.0}, api_base=api_base)
    return [Request(item_id=f"{prefix}{i:03d}", endpoint=endpoint, prompt_id="t", prompt_version=1, role="judge",
                    schema=SCHEMA, messages=[{"role": "user", "content": f"{prefix}{i}"}]) for i in range(n)]


# A job in its own process: the same requests through one ModelClient on the shared cache file.
CHILD = """
import json, sys
from tests.test_paid_once import requests_for, settings
from aura_eval.llm.client import ModelClient
api_base, cache, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = ModelClient(settings(cache), "child", progress=False)
results = client.run(requests_for(api_base, n))
print(json.dumps({"ok": sum(r.status == "ok" for r in results), "sent": client.calls_made,
                  "hits": sum(r.cache_hit for r in results), "lease_waits": client.lease_waits}))
"""


def start_child(api_base, cache, n, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, api_base, str(cache), str(n)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_two_processes_sharing_a_cache_send_each_request_once(tmp_path):
    """Started together on one cache file, two jobs asking the same 24 questions send 24 requests:
    one claims each lease, the other waits on it (no budget, no turn) and reads the answer."""
    with StubServer() as stub:
        stub.state.latency_s = 0.3
        children = [start_child(stub.api_base, tmp_path / "cache.sqlite", 24) for _ in range(2)]
        outs = [json.loads(c.communicate(timeout=120)[0].strip().splitlines()[-1]) for c in children]
        sent = len(stub.state.requests)
    assert [o["ok"] for o in outs] == [24, 24]
    assert sent == 24 and sum(o["sent"] for o in outs) == 24
    assert sum(o["hits"] for o in outs) == 24 and sum(o["lease_waits"] for o in outs) > 0
    assert len(ResponseCache(tmp_path / "cache.sqlite")) == 24


def test_a_lease_is_taken_over_from_a_gone_or_silent_owner(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    me = Owner.this_process()
    gone = Owner(me.host, 2 ** 22 + 7, 1.0)  # no such process here
    elsewhere = Owner("another-host", 1, 1.0)
    assert cache.claim("k1", gone) == ("claimed", None)
    assert cache.claim("k1", me) == ("claimed", None)  # its owner is gone: taken over at once
    assert cache.claim("k2", elsewhere)[0] == "claimed"
    state, lease = cache.claim("k2", me)  # another host's owner, renewed just now: it stands
    assert state == "held" and lease["owner"] == elsewhere
    cache._db.execute("UPDATE leases SET renewed_at = renewed_at - ? WHERE key = 'k2'", (LEASE_STALE_S + 1,))
    assert cache.claim("k2", me) == ("claimed", None)  # silent for 30 s: taken over
    cache.put("k3", {"model": "m"}, {"content": "x"})
    assert cache.claim("k3", me) == ("cached", {"content": "x"})


@pytest.mark.serial
def test_a_waiter_sends_the_request_itself_when_the_owner_fails(tmp_path):
    """A lease released without an answer (the owner's call failed): the waiter asks itself."""
    with StubServer() as stub:
        client = ModelClient(settings(tmp_path / "cache.sqlite"), "waiter", progress=False)
        [req] = requests_for(stub.api_base, 1)
        key = cache_key(client.describe(req))
        other = Owner("another-host", 1, 1.0)
        client.cache.claim(key, other)
        release_after_s = 0.6
        litellm_module()  # imported before the clock starts: its seconds are not what is timed
        started = time.monotonic()  # before the timer starts: the release comes at least this long after it
        threading.Timer(release_after_s, lambda: ResponseCache(tmp_path / "cache.sqlite").release(key, other)).start()
        [result] = client.run([req])
        waited = time.monotonic() - started
        assert result.status == "ok" and not result.cache_hit and result.attempts == 1
        assert len(stub.state.requests) == 1
        # It waited for the release (the lease is looked at every 0.2 s), then sent its one request.
        assert release_after_s <= waited < release_after_s + 0.2 + timing.WAKE_S + timing.CALLS_S


@pytest.mark.serial
def test_a_failed_cache_write_stops_the_sending_and_counts_the_answers_lost(tmp_path, monkeypatch):
    """The third write fails (a full disk): the job sends nothing more, keeps what it can, and stops
    with one message naming the file, the cause and the answers lost."""
    cache_path = tmp_path / "cache.sqlite"
    writes = {"n": 0}
    put = ResponseCache.put

    def failing_put(self, key, request, response):
        writes["n"] += 1
        if writes["n"] >= 3:
            raise CacheError(f"response cache {self.path}: the disk failed or is full (database or disk is full).",
                             self.path)
        return put(self, key, request, response)

    monkeypatch.setattr(ResponseCache, "put", failing_put)
    with StubServer() as stub:
        stub.state.latency_s = 0.2
        client = ModelClient(settings(cache_path, concurrency={"default": 2}), "writes", progress=False)
        with pytest.raises(CacheError) as err:
            client.run(requests_for(stub.api_base, 20))
        sent = len(stub.state.requests)
    text = str(err.value)
    assert str(cache_path) in text and "disk failed or is full" in text
    assert f"{client.unstored} answer(s) received could not be stored" in text and client.unstored in (1, 2)
    assert sent <= 4  # two stored, the failed one and at most one other in flight; none after
    assert len(ResponseCache(cache_path)) == 2


def test_invalid_unicode_is_stored_as_replacement_characters(tmp_path):
    with StubServer() as stub:
        # A lone surrogate in the answer (the body's JSON escapes it: "\ud800"), not storable as UTF-8;
        # and one that only the answer's own JSON escape makes.
        stub.state.content = '{"answer": "bad \ud800 half", "note": "\\udfff"}'
        client = ModelClient(settings(tmp_path / "cache.sqlite"), "unicode", progress=False)
        [result] = client.run(requests_for(stub.api_base, 1))
    assert result.status == "ok" and result.parsed == {"answer": "bad \ufffd half", "note": "\ufffd"}
    assert client.invalid_unicode == 1
    record = ResponseCache(tmp_path / "cache.sqlite").get(result.key)
    assert record["invalid_unicode"] == 1 and "\ufffd" in record["content"]


@pytest.mark.serial
def test_the_stop_mark_stops_the_sending_within_the_grace(tmp_path, monkeypatch):
    """The run's mark appears while 40 requests wait their turn (2 at a time, 0.5 s each): no request
    reaches the stub after it, those in flight are stored, and the job ends with RunStopped."""
    mark = tmp_path / ".snakemake" / "aura-stop"
    monkeypatch.setenv(stop.ENV, str(mark))
    cache_path = tmp_path / "cache.sqlite"
    with StubServer() as stub:
        latency_s, mark_after_s, at_once = 0.5, 1.2, 2
        stub.state.latency_s = latency_s
        client = ModelClient(settings(cache_path, concurrency={"default": at_once}), "stopped", progress=False)
        marked = {}
        litellm_module()  # imported before the clock starts: its seconds are not what is timed

        def set_mark():
            marked["at"] = time.time()
            stop.write_mark("test")

        threading.Timer(mark_after_s, set_mark).start()
        started = time.time()
        with pytest.raises(stop.RunStopped, match="stopped .*requests answered") as err:
            client.run(requests_for(stub.api_base, 40))
        ended = time.time()
        arrived = list(stub.state.arrived)
    # Nothing sent after the watcher saw the mark (it looks every stop.POLL_S).
    assert max(arrived) <= marked["at"] + stop.POLL_S + timing.WAKE_S
    # Those in flight get the grace, then the job ends.
    assert ended - marked["at"] < stop.GRACE_S + timing.WAKE_S
    assert ended - started < mark_after_s + stop.GRACE_S + timing.WAKE_S
    # Sent before the mark was seen: `at_once` every `latency_s` up to mark_after_s + POLL_S (6),
    # one round more on a slow machine; at most the last round unanswered when the grace ran out.
    rounds = int((mark_after_s + stop.POLL_S) / latency_s) + 1
    assert at_once <= len(arrived) <= at_once * (rounds + 1)
    assert len(ResponseCache(cache_path)) >= len(arrived) - at_once
    assert "A plain rerun sends only what is not in the cache" in str(err.value)
    # A job started after the mark sends nothing at all.
    with StubServer() as stub:
        with pytest.raises(stop.RunStopped):
            ModelClient(settings(cache_path), "late", progress=False).run(requests_for(stub.api_base, 3, "z"))
        assert stub.state.requests == []


@pytest.mark.serial
def test_a_signal_to_a_job_writes_the_mark_and_stops_it(tmp_path):
    """SIGINT to a job in its own process: it writes the run's mark, sends nothing more, exits
    non-zero with the message, and what it received is in the cache."""
    mark = tmp_path / "aura-stop"
    script = ("import sys\nfrom aura_eval.stage_runner import StageRun\nfrom tests.test_paid_once import requests_for, "
              "settings\nwith StageRun('sig', settings(sys.argv[2], concurrency={'default': 2}), sys.argv[3], "
              "progress=False) as run:\n    run.results(requests_for(sys.argv[1], 40))\n")
    with StubServer() as stub:
        stub.state.latency_s = 0.5
        proc = subprocess.Popen([sys.executable, "-c", script, stub.api_base, str(tmp_path / "c.sqlite"),
                                 str(tmp_path / "calls.jsonl")], cwd=ROOT, text=True, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT), stop.ENV: str(mark)},
                                preexec_fn=sigint_as_in_a_terminal)
        while len(stub.state.requests) < 3:
            time.sleep(0.05)
        signalled = time.time()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        ended = time.time()
        arrived = list(stub.state.arrived)
    assert proc.returncode != 0 and "sig: stopped (SIGINT received)" in err and "Traceback" not in err
    assert mark.exists() and "SIGINT to job" in mark.read_text()
    assert max(arrived) <= signalled + stop.POLL_S + timing.WAKE_S  # the handler writes the mark at once
    assert ended - signalled < stop.GRACE_S + timing.PROCESS_S  # the grace, then the process exits
    assert not (tmp_path / "calls.jsonl").exists()


def test_a_stage_run_in_process_gives_its_signal_handlers_back(tmp_path):
    """A job installs its own SIGINT/SIGTERM handlers while it calls; a stage run inside a longer-lived
    process (a test, a notebook) gives the process's own back on leaving, so Ctrl-C works again."""
    import signal

    from aura_eval.llm import stop
    from aura_eval.llm.types import Endpoint, Request
    from aura_eval.stage_runner import run_stage

    before = {sig: signal.getsignal(sig) for sig in stop.SIGNALS}
    ep = Endpoint(name="j", model="aura_sim/judge")
    rows = run_stage("s", {"cache": str(tmp_path / "c.sqlite")}, [1], lambda u: Request(
        item_id=str(u), endpoint=ep, messages=[{"role": "user", "content": "x"}], prompt_id="judge_action_safety",
        prompt_version=1, role="judge", schema=None), lambda u, r: {"id": str(u), "status": r.status},
        tmp_path / "out.jsonl", "id", tmp_path / "calls.jsonl", progress=False)
    assert len(rows) == 1 and {sig: signal.getsignal(sig) for sig in stop.SIGNALS} == before


_HANDLERS = ("import signal, sys\nfrom aura_eval.llm import stop\n"
             "signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == 'ignored' else signal.default_int_handler)\n"
             "getattr(stop, sys.argv[2])()\n"
             "print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN, callable(signal.getsignal(signal.SIGTERM)))")


@pytest.mark.parametrize("install", ["install_run_handlers", "install_job_handlers"])
@pytest.mark.parametrize("sigint, expected", [("ignored", "True True"), ("default", "False True")])
def test_a_run_started_ignoring_sigint_keeps_ignoring_it(install, sigint, expected):
    """Snakemake started in a script's background (`&`, `nohup`) ignores SIGINT, and so do its jobs:
    so does the stop mark's handler, or the jobs would stop spending while Snakemake goes on (SIGTERM
    still stops both)."""
    out = subprocess.run([sys.executable, "-c", _HANDLERS, sigint, install], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == expected
