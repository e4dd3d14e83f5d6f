"""The one model-stage runner (HELM's `Cache.get(request, compute)` idea): a stage says what
to ask and what row each answer makes; the runner sends the requests through the model
module (cache, concurrency, retries), writes the rows and the call log, and prints the
stage's outcome counts to its log. Every model stage of every rule runs through here.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Callable

from aura_eval.jsonl import write_jsonl
from aura_eval.llm.types import STATUSES, Request, Result


class StageRun:
    """One model job: `with StageRun(...) as run:` ask, write; on leaving, the call log is
    written and the summary printed (not after an error: a failed job leaves no call log)."""

    def __init__(self, stage: str, llm: dict, calls_path, threads: int | None = None, progress: bool = True):
        # The client is imported here, once for the whole package: it loads litellm (seconds),
        # which only a job that calls models should pay.
        from aura_eval.llm import local
        from aura_eval.llm.client import ModelClient

        if threads:
            local.set_threads(threads)
        self.stage, self.calls_path = stage, calls_path
        self.client = ModelClient(llm, stage=stage, progress=progress)
        self.written: list[str] = []

    def __enter__(self) -> StageRun:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        self.client.write_call_log(self.calls_path)
        statuses = Counter(call["status"] for call in self.client.calls)
        outcome = ", ".join(f"{s} {statuses[s]}" for s in STATUSES)
        print(f"{self.stage}: {len(self.client.calls)} requests ({outcome}), {self.client.calls_made} calls made; "
              f"wrote {'; '.join(self.written)}", file=sys.stderr)

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
