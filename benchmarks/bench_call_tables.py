"""Peak memory of the call tables (model_calls and the run summary's stage lines) on a run's call
logs: every row loaded into one DataFrame (how they were built before) against aggregating as the
logs stream. 200,000 synthetic rows with every call-log field, in 20 files. Each way runs in its
own process, twice: once for the peak RSS (ru_maxrss, and how far above the process after its
imports), once for tracemalloc's peak. Writes benchmarks/out/call_tables.json. BENCH_ROWS (default 200,000).
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402

N_ROWS, N_FILES = int(os.environ.get("BENCH_ROWS", 200_000)), 20


def write_logs(logs: Path) -> list[Path]:
    from aura_eval.util.jsonl import write_jsonl
    from tests.test_call_tables import synthetic_calls

    rows = synthetic_calls(1, N_ROWS)
    for row in rows:  # the provenance fields a real call log carries
        row.update(wait_s=0.0, auth_error=False, response_id=f"chatcmpl-{row['key']}", system_fingerprint="fp_1",
                   response_model="gpt-x-2025", litellm_version="1.110.2", called_at="2026-01-01T00:00:00.000Z",
                   first_latency_s=row["latency_s"], params={"temperature": 0.0, "max_tokens": 512})
    paths = [logs / f"calls_{k:02d}.jsonl" for k in range(N_FILES)]
    for k, path in enumerate(paths):
        write_jsonl(path, rows[k::N_FILES], key=None)
    return paths


def measure(logs: Path, way: str, traced: bool) -> dict:
    """In this process: build both tables the given way; the peak memory it took."""
    from aura_eval.util.jsonl import read_jsonl
    from aura_eval.analyze.calls import CallTotals
    from tests.test_call_tables import reference_model_calls, reference_stage_summary

    paths = sorted(logs.glob("*.jsonl"))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    if way == "whole":
        rows = [row for path in paths for row in read_jsonl(path)]
        tables = reference_model_calls(rows), reference_stage_summary(rows)
    else:
        totals = CallTotals.read(paths)
        tables = totals.model_calls(), totals.stage_summary()
    seconds = time.perf_counter() - start
    out = {"seconds": round(seconds, 2), "groups": len(tables[0])}
    if traced:
        out["tracemalloc_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.update(rss_peak_mb=round(peak / 1024, 1), rss_peak_above_imports_mb=round((peak - base) / 1024, 1))
    return out


def main() -> None:
    if len(sys.argv) == 3:  # a child: write the logs
        write_logs(Path(sys.argv[2]))
        return
    if len(sys.argv) == 4:  # a child: one measurement
        print(json.dumps(measure(Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "traced")))
        return
    # Every step in its own process, this one staying small: a child's ru_maxrss starts at its
    # parent's peak (Linux keeps the high-water mark across fork and exec).
    with tempfile.TemporaryDirectory() as logs:
        subprocess.run([sys.executable, __file__, "write", logs], check=True, cwd=ROOT)
        paths = sorted(Path(logs).glob("*.jsonl"))
        report = {"rows": N_ROWS, "files": len(paths), "log_mb": round(sum(p.stat().st_size for p in paths) / 2**20, 1)}
        for way in ("whole", "streamed"):
            for mode in ("rss", "traced"):
                proc = subprocess.run([sys.executable, __file__, logs, way, mode], capture_output=True, text=True,
                                      check=True, cwd=ROOT)
                report.setdefault(way, {}).update(json.loads(proc.stdout.splitlines()[-1]))
    publish("call_tables", report)


if __name__ == "__main__":
    main()
