"""The one model-stage runner (HELM's `Cache.get(request, compute)` idea): a stage says what
to ask and what row each answer makes; the runner sends the requests through the model
module (cache, concurrency, retries), writes the rows and the call log, and prints the
stage's outcome counts to its log. Every model stage of every rule runs through here.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

from aura_eval.util.jsonl import read_jsonl, write_jsonl
from aura_eval.llm import stop
from aura_eval.llm.cache import CacheError
from aura_eval.llm.answers import STATUS, STATUSES
from aura_eval.llm.types import Request, Result


class StageFailed(RuntimeError):
    """More calls failed than `llm.max_failed_share` allows; every success is in the cache,
    so a plain rerun sends only the failed calls again."""


def failure_problem(stage: str, calls: list[dict], max_share: float) -> str | None:
    """Why a stage's calls fail the job, or None: any failure by a missing or refused key, or
    a share of failed calls above `max_share` (0: none accepted). Only the statuses that count
    against it (answers.STATUS_TABLE: `failed`) do: a cut, declined or unparseable answer was paid
    for and is cached, so a rerun would only read it again."""
    failed = [c for c in calls if c["status"] in STATUS and STATUS[c["status"]].counts_as_failed]
    auth = [c for c in failed if c.get("auth_error")]
    if not failed or (not auth and len(failed) <= max_share * len(calls)):
        return None
    errors = sorted({c["error"] for c in failed})[:3]
    why = "the key is missing or refused (never retried)" if auth else f"more than {max_share:.0%} allowed"
    return (f"{stage}: {len(failed)} of {len(calls)} calls failed ({why}); the successes are cached, so a plain "
            f"rerun sends only the failed ones. First errors: " + " | ".join(errors))


def empty_problem(stage: str, calls: list[dict]) -> str | None:
    """A loud note when a stage asked something and got no usable answer."""
    if not calls or any(c["status"] == "ok" for c in calls):
        return None
    counts = Counter(c["status"] for c in calls)
    return (f"{stage}: 0 of {len(calls)} answers usable: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES[1:]
                                                                       if counts[s]))


def cache_exit(stage: str, err: CacheError) -> SystemExit:
    """The end of a job whose cache file cannot be used: one message in its log (the file, what is
    wrong, what to do), no traceback."""
    return SystemExit(f"{stage}: {err}")


class StageRun:
    """One model job: `with StageRun(...) as run:` ask, write; on leaving, the call log is
    written and the summary printed (not after an error: a failed job leaves no call log).
    Then the failure policy: failed calls beyond `llm.max_failed_share` (default none) fail
    the job with StageFailed, after every output is written and every success cached. A cache
    file that cannot be used (damaged, locked, unwritable: `llm.cache.CacheError`) ends the job
    with SystemExit and one message naming the file, never a traceback. A stop (Ctrl-C, SIGTERM, the
    run's stop mark: `llm.stop`) ends it the same way, with what was answered and what was not sent."""

    def __init__(self, stage: str, llm: dict, calls_path, threads: int | None = None, progress: bool = True):
        # The client is imported here, once for the whole package; it loads litellm (seconds)
        # only when a request needs it, so a job of simulated models never does. The simulator
        # registers itself as the `aura_sim` responder on import, so every job can answer it.
        import aura_eval.simulator  # noqa: F401
        from aura_eval.llm import local
        from aura_eval.llm.client import ModelClient

        if threads:
            local.set_threads(threads)
        self.stage, self.calls_path = stage, calls_path
        # a signal stops the sending, not the process mid-write; the handlers are put back on leaving
        self._handlers = stop.install_job_handlers()
        try:
            self.client = ModelClient(llm, stage=stage, progress=progress)
        except CacheError as err:
            stop.restore_handlers(self._handlers)
            raise cache_exit(stage, err) from None
        self.max_failed_share = self.client.call.max_failed_share
        print(f"{stage}: call settings: {self.client.call.shown()}", file=sys.stderr)
        self.written: list[str] = []

    def __enter__(self) -> StageRun:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._leave(exc_type, exc)
        finally:  # after the call log is written: a signal must not cut that write
            stop.restore_handlers(self._handlers)

    def _leave(self, exc_type, exc) -> None:
        if isinstance(exc, CacheError):
            raise cache_exit(self.stage, exc) from None
        if isinstance(exc, stop.RunStopped):
            raise SystemExit(str(exc)) from None
        if exc_type is not None:
            return
        self.client.write_call_log(self.calls_path)
        statuses = Counter(call["status"] for call in self.client.calls)
        outcome = ", ".join(f"{s} {statuses[s]}" for s in STATUSES)
        waited = sum(call["wait_s"] or 0 for call in self.client.calls)
        print(f"{self.stage}: {len(self.client.calls)} requests ({outcome}), {self.client.calls_made} calls made, "
              f"{waited:.1f} s waited (retries, rate limits, other processes' leases); wrote {'; '.join(self.written)}", file=sys.stderr)
        if self.client.lease_waits:
            print(f"{self.stage}: {self.client.lease_waits} answer(s) came from another process's call of the same "
                  f"request (waited on its lease, not sent again)", file=sys.stderr)
        if self.client.invalid_unicode:
            print(f"WARNING: {self.stage}: {self.client.invalid_unicode} character(s) of invalid Unicode in answers "
                  f"were stored as U+FFFD", file=sys.stderr)
        damaged = self.client.cache.damaged
        if damaged:
            print(f"WARNING: {self.stage}: {len(damaged)} cached answer(s) in {self.client.cache.path} failed their "
                  f"checksum (damaged rows): not used, asked again and replaced", file=sys.stderr)
        empty = empty_problem(self.stage, self.client.calls)
        if empty:
            print(f"WARNING: {empty}", file=sys.stderr)
        problem = failure_problem(self.stage, self.client.calls, self.max_failed_share)
        if problem:
            raise StageFailed(problem)

    def results(self, requests: list[Request]) -> list[Result]:
        """One result per request, in order."""
        return self.client.run(requests)

    def rows(self, units: list, request_for: Callable, row_for: Callable) -> list[dict]:
        """`row_for(unit, answer)` per unit, where `request_for(unit)` is one request (the
        answer is its result) or a list, e.g. one per panel member (the answer is their results)."""
        asked = [request_for(unit) for unit in units]
        flat = [r for a in asked for r in (a if isinstance(a, list) else [a])]
        results = iter(self.results(flat))
        return [row_for(unit, [next(results) for _ in a] if isinstance(a, list) else next(results))
                for unit, a in zip(units, asked)]

    def write(self, path, rows: list[dict], key) -> None:
        write_jsonl(path, rows, key=key)
        self.written.append(f"{path} ({len(rows)} rows)")


def run_stage(stage: str, llm: dict, units: list, request_for: Callable, row_for: Callable, out_path, key,
              calls_path, threads: int | None = None, progress: bool = True) -> list[dict]:
    """A stage of one question per unit (or one per panel member): ask, write, log; the rows."""
    with StageRun(stage, llm, calls_path, threads, progress) as run:
        rows = run.rows(units, request_for, row_for)
        run.write(out_path, rows, key)
    return rows


def status_counts(rows: list[dict], field: str = "status") -> dict:
    return {s: sum(r[field] == s for r in rows) for s in STATUSES}


def call_log_problems(calls_dir) -> list[str]:
    """Every stage in the call logs under `calls_dir` with no usable answer (the exit summary)."""
    by_stage: dict[str, list[dict]] = {}
    for path in sorted(Path(calls_dir).rglob("*.jsonl")):
        for call in read_jsonl(path):
            by_stage.setdefault(call["stage"], []).append(call)
    return [p for stage, calls in sorted(by_stage.items()) if (p := empty_problem(stage, calls))]


# The line a job that failed under the failure policy leaves in its log (failure_problem's words).
FAILED_CALLS = re.compile(r"(?P<stage>[\w.:/-]+): (?P<failed>\d+) of (?P<calls>\d+) calls failed \(")


def failed_calls_summary(logs_dir, since: float | None = None) -> str | None:
    """The end of a failed run (the Snakefile's onerror): how many calls failed in the jobs that failed
    under the failure policy (their logs under `logs_dir` written since `since`, the run's start), and
    that a plain rerun sends only those; None when no job failed that way."""
    failed = jobs_failed = 0
    stages_failed = set()
    for path in sorted(Path(logs_dir).rglob("*.log")) if Path(logs_dir).is_dir() else []:
        try:
            if since is not None and path.stat().st_mtime < since:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = FAILED_CALLS.findall(text)
        if found:
            stage, n, _ = found[-1]  # a job's own line (its log holds one run of the job)
            failed += int(n)
            jobs_failed += 1
            stages_failed.add(stage)
    if not jobs_failed:
        return None
    return (f"{failed} call(s) failed in {jobs_failed} job(s) ({', '.join(sorted(stages_failed))}); every answer "
            f"received is in the cache, so a plain rerun of the same command sends only the failed calls (and "
            f"runs the jobs that waited on them). Their errors are in each job's log under {logs_dir}/.")
