"""Ctrl-C stops the spending, on the whole workflow: every model served by the stub (each answer a
counted request), a SIGINT to Snakemake alone in the middle of the run, then a plain rerun."""

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aura_eval.llm import stop
from tests import timing
from tests.stub_server import StubServer
from tests.workflow import (STUB_KEY_ENV, all_stub_config, scratch_copy, sigint_as_in_a_terminal, snakemake,
                            snakemake_exe)

# the whole workflow (e2e), the signal's effect bounded in wall time (serial)
pytestmark = [pytest.mark.e2e, pytest.mark.serial]


# Snakemake running its SIGINT handler, which writes the stop mark: Python runs a handler in the
# main thread between two bytecodes (a sleep is interrupted), so within a second on a loaded machine.
SIGNAL_S = 1.0

def answers(cache: Path) -> int:
    with sqlite3.connect(cache) as db:
        return db.execute("SELECT count(*) FROM responses").fetchone()[0]


def test_sigint_to_snakemake_stops_the_sending_and_the_rerun_pays_only_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "cred-stop-5d1e0c7a9b")
    with StubServer() as stub:
        stub.state.latency_s = 0.3
        work = scratch_copy(tmp_path)
        config, stub.state.responder = all_stub_config(work, stub.api_base, seeds=2)
        exe = snakemake_exe()
        log = open(tmp_path / "run.log", "w")
        proc = subprocess.Popen([str(exe), "--cores", "2", "--configfile", str(config)], cwd=work, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=sigint_as_in_a_terminal)
        while len(stub.state.requests) < 25 and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the signal"
        signalled = time.time()
        proc.send_signal(signal.SIGINT)  # to Snakemake alone: its jobs get no signal, only the mark
        proc.wait(timeout=120)
        ended = time.time()
        late = [t - signalled for t in stub.state.arrived if t > signalled]
        text = (tmp_path / "run.log").read_text()
        assert proc.returncode != 0
        # Snakemake's handler writes the run's stop mark at the signal; each job looks for it every
        # stop.POLL_S and sends nothing after. Then the requests in flight get the grace, the jobs
        # exit and Snakemake cleans up and exits.
        assert max(late, default=0.0) <= SIGNAL_S + stop.POLL_S + timing.WAKE_S, late
        # (the processes: a job's exit, a queued job that starts, sees the mark and exits, Snakemake's exit)
        assert ended - signalled <= SIGNAL_S + stop.POLL_S + stop.GRACE_S + 3 * timing.PROCESS_S, text[-3000:]
        assert (work / stop.MARK_NAME).exists()
        assert not list((work / ".snakemake/locks").glob("*"))  # no lock left: a plain rerun starts
        assert "stopped (the run's stop mark is set" in text
        sent, stored = len(stub.state.requests), answers(work / "cache/mock.sqlite")
        assert sent - stored <= 2  # at most what was in flight when the grace ran out

        snakemake(work, "--configfile", str(config))
        rerun_sent = len(stub.state.requests) - sent
        assert rerun_sent == answers(work / "cache/mock.sqlite") - stored  # only what was not stored
        assert not (work / stop.MARK_NAME).exists()  # the rerun's start cleared the old mark
        assert (work / "results/report/report.html").exists()
