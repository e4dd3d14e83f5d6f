"""Ctrl-C stops the spending: one stop mark per run, written by whoever sees the signal first.

A SIGINT or SIGTERM reaches the run in one of two ways: to the whole process group (Ctrl-C in a
terminal: Snakemake and every job get it) or to Snakemake alone (`kill -INT <pid>`, a scheduler
that stops the main process). Snakemake then waits for running jobs and may still start queued
ones, which never see a signal. So both sides write one file, the stop mark:
- the Snakefile's `onstart` clears a stale mark and chains a handler to Snakemake's own
  (`install_run_handlers`);
- every model job installs its own (`install_job_handlers`), checks the mark when it starts and
  before each send or retry (`requested`), and watches it while requests are in flight.
A job that sees the mark sends nothing more, gives the requests in flight `GRACE_S` seconds to be
answered and stored, cancels the rest (never retried), leaves open provider batches open for the
rerun, writes no output and ends with `RunStopped`'s message. The mark's path travels to the jobs
in the environment (`ENV`), set by the Snakefile; without it (a stage run outside Snakemake) only
the job's own signal handlers stop it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ENV = "AURA_STOP_MARK"
MARK_NAME = ".snakemake/aura-stop"  # in the run's working directory, beside Snakemake's own locks
GRACE_S = 3.0  # what a request in flight gets to be answered and stored after the mark
POLL_S = 0.25  # how often a job with requests in flight looks for the mark
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunStopped(RuntimeError):
    """The run was stopped (Ctrl-C, SIGTERM): this job sent nothing more and wrote no output."""


_flagged: list[str] = []  # the signal this process received, if any (its handler sets it)


def mark_path() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def write_mark(why: str) -> None:
    """Write the run's stop mark (where the run has one); never raises, it runs in a signal handler."""
    path = mark_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{time.time():.3f} {os.getpid()} {why}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def requested() -> str | None:
    """Why the run is stopping (a signal this process got, or the run's mark), or None."""
    if _flagged:
        return _flagged[0]
    path = mark_path()
    if path is not None and path.exists():
        return "the run's stop mark is set (Ctrl-C or SIGTERM)"
    return None


def clear_mark() -> None:
    """Remove a mark left by an earlier, stopped run (the Snakefile's `onstart`)."""
    path = mark_path()
    if path is not None:
        path.unlink(missing_ok=True)


def _name(signum: int) -> str:
    return signal.Signals(signum).name


def install_job_handlers() -> dict:
    """SIGINT and SIGTERM in a model job: flag this process and write the mark. The job itself
    stops at its next check (ModelClient watches while requests are in flight). Returns the
    handlers replaced, for `restore_handlers` once the job's calls are over (a stage run in a
    longer-lived process, such as a test, must not leave the process deaf to Ctrl-C)."""
    def handler(signum, frame):
        if not _flagged:
            _flagged.append(f"{_name(signum)} received")
            write_mark(f"{_name(signum)} to job")

    # a signal the job was started ignoring (Snakemake started in a script's background) stays ignored
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS if signal.getsignal(sig) != signal.SIG_IGN}
    for sig in previous:
        signal.signal(sig, handler)
    return previous


def restore_handlers(previous: dict) -> None:
    """Put back the handlers `install_job_handlers` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def install_run_handlers() -> None:
    """SIGINT and SIGTERM in Snakemake's process (from `onstart`): write the mark, then do what
    Snakemake's own handler does (it was installed first, so it is chained, not replaced).

    A signal the process was started ignoring stays ignored: a run started in a script's background
    (`&`, `nohup`) ignores SIGINT, so Snakemake goes on after one, and its jobs must not stop
    spending behind its back (stop such a run with SIGTERM)."""
    for sig in SIGNALS:
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN:
            continue

        def handler(signum, frame, previous=previous):
            write_mark(f"{_name(signum)} to snakemake")
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)
