"""The cache's start check and repair on a paper-size cache, measured in one run:

- builds a response cache of BENCH_CACHE_ROWS (150,000) answers through `ResponseCache.put`, each a
  request description of about 2 KB (a rendered prompt) and a response of about 2 KB, with checksums;
- times `llm.cache.check_at_start` (what the Snakefile's onstart runs: `PRAGMA quick_check`, the
  write probe, the row count) warm (the file in the page cache: the median of three) and cold (the
  file's pages dropped from the page cache with posix_fadvise(DONTNEED) first: the median of three),
  beside the time to read the whole file once, cold (what the disk allows), and `PRAGMA quick_check`
  alone, cold, without the start check's read-ahead;
- times `python -m aura_eval cache check`'s work (integrity_check and every checksum) warm;
- damages two copies, 4 KB of random bytes written over the middle and the file cut to half its
  size, and repairs each (`tools.cache_repair.repair`): the answers kept and lost, and the time.
Writes benchmarks/out/cache_check.json. BENCH_DIR names the folder for the files (default: a
temporary folder, removed after); they take about 4 x the cache's size at the peak.
"""

import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402

N_ROWS = int(os.environ.get("BENCH_CACHE_ROWS", 150_000))
WORDS = ("the agent user file delete backup server config run command safe unsafe risk check read write "
         "network request token model judge action thought environment step data record list ask confirm "
         "permission system folder email send payment account device light door camera").split()


def build(path: Path, n: int) -> float:
    from aura_eval.llm.cache import ResponseCache, cache_key

    rng = random.Random(7)
    cache = ResponseCache(path)
    started = time.perf_counter()
    for start in range(0, n, 5000):
        cache._db.execute("BEGIN")
        for i in range(start, min(n, start + 5000)):
            prompt = f"Item {i}. " + " ".join(rng.choices(WORDS, k=300))  # about 2 KB
            described = {"model": "openai/gpt-5.2", "api_base": None, "params": {"temperature": 0.0, "seed": 1},
                         "messages": [{"role": "system", "content": "You judge an agent's action."},
                                      {"role": "user", "content": prompt}],
                         "response_format": None, "sample": i % 3}
            answer = {"content": " ".join(rng.choices(WORDS, k=320)), "finish_reason": "stop", "tokens_in": 520,
                      "tokens_out": 480, "cost_usd": 0.0031, "latency_s": 1.7,
                      "provenance": {"response_id": f"chatcmpl-{i}", "prompt": "judge_action_safety",
                                     "prompt_version": 1, "params": described["params"],
                                     "called_at": "2026-12-03T10:00:00.000Z"}}
            cache.put(cache_key(described), described, answer)
        cache._db.execute("COMMIT")
    cache.close()
    return time.perf_counter() - started


def drop_from_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_all(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass


def quick_check(path: Path) -> None:
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    db.close()


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    from aura_eval.llm.cache import check_at_start
    from aura_eval.tools.cache_repair import answers_held, check, repair, repair_text

    keep = os.environ.get("BENCH_DIR")
    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench-cache-"))
    folder.mkdir(parents=True, exist_ok=True)
    report = {"rows": N_ROWS}
    try:
        path = folder / "responses.sqlite"
        for f in folder.glob("responses.sqlite*"):
            f.unlink()
        report["build_s"] = round(build(path, N_ROWS), 1)
        report["file_mb"] = round(path.stat().st_size / 1e6, 1)
        check_at_start(path)  # warm the page cache
        report["start_check_warm_s"] = round(statistics.median(timed(lambda: check_at_start(path)) for _ in range(3)),
                                             3)
        cold = []
        for _ in range(3):
            drop_from_page_cache(path)
            cold.append(timed(lambda: check_at_start(path)))
        report["start_check_cold_s"] = round(statistics.median(cold), 3)
        report["start_check_cold_runs_s"] = [round(t, 3) for t in cold]
        drop_from_page_cache(path)  # the disk's own speed: the whole file read once, cold
        report["file_read_cold_s"] = round(timed(lambda: read_all(path)), 3)
        drop_from_page_cache(path)  # quick_check alone, cold: it reads the pages in b-tree order
        report["quick_check_alone_cold_s"] = round(timed(lambda: quick_check(path)), 3)
        check(path)
        started = time.perf_counter()
        text, intact = check(path)
        report["cache_check_warm_s"] = round(time.perf_counter() - started, 2)
        assert intact, text
        size = path.stat().st_size
        for kind in ("overwrite_4k_middle", "cut_to_half"):
            damaged = folder / f"{kind}.sqlite"
            shutil.copyfile(path, damaged)
            if kind == "overwrite_4k_middle":
                with open(damaged, "r+b") as f:
                    f.seek(size // 2)
                    f.write(random.Random(3).randbytes(4096))
            else:
                os.truncate(damaged, size // 2)
            done = repair(damaged)
            a = done["answers"]
            report[kind] = {"kept": a.kept, "held_at_least": answers_held(a), "held_estimated": max(answers_held(a),
                                                                                                a.estimated),
                            "lost": N_ROWS - a.kept, "refused": a.dropped, "unreadable": a.unreadable,
                            "repair_s": done["seconds"], "printed": repair_text(done)}
            for f in folder.glob(f"{kind}.sqlite*"):
                f.unlink()
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    publish("cache_check", report)


if __name__ == "__main__":
    main()
