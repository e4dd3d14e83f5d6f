"""Each answer paid once, and Ctrl-C that stops the spending: the whole workflow with every model served
by the test suite's stub (`tests.workflow.all_stub_config`: .test/config/mock.yaml's models, every one
a counted request; 0.3 s per answer), at BENCH_SEEDS seeds (default 8).

1. One clean run: requests the stub received against answers stored in the cache.
2. Two runs in two folders sharing one cache file, started together: the same.
3. Ctrl-C to the run's process group, then to Snakemake alone, each after BENCH_STOP_AFTER requests
   (default 60): seconds from the signal to the last request and to the end, whether a lock was left,
   and what a plain rerun sent against the answers it added.
Writes benchmarks/out/paid_once.json.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.results import publish  # noqa: E402
from tests.stub_server import StubServer  # noqa: E402
from tests.workflow import STUB_KEY_ENV, all_stub_config, scratch_copy  # noqa: E402

SEEDS = int(os.environ.get("BENCH_SEEDS", 8))
STOP_AFTER = int(os.environ.get("BENCH_STOP_AFTER", 60))
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def answers(cache: Path) -> int:
    if not cache.exists():
        return 0
    with sqlite3.connect(cache) as db:
        return db.execute("SELECT count(*) FROM responses").fetchone()[0]


def start(work: Path, config: Path) -> subprocess.Popen:
    # Its own session: a signal "to the process group" reaches Snakemake and its jobs, as Ctrl-C does.
    return subprocess.Popen([SNAKEMAKE, "--cores", "2", "--configfile", str(config)], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=open(work / "run.log", "a"), start_new_session=True)


def finish(proc: subprocess.Popen, timeout=1800) -> int:
    return proc.wait(timeout=timeout)


def setup(tmp: Path, stub, name: str, cache: Path | None = None) -> tuple[Path, Path]:
    (tmp / name).mkdir(parents=True, exist_ok=True)
    work = scratch_copy(tmp / name)
    config, responder = all_stub_config(work, stub.api_base, seeds=SEEDS, cache=str(cache) if cache else None)
    stub.state.responder = responder
    return work, config


def clean_runs(tmp: Path) -> dict:
    out = {}
    with StubServer() as stub:
        stub.state.latency_s = 0.3
        (tmp / "one").mkdir()
        work, config = setup(tmp / "one", stub, "run")
        started = time.perf_counter()
        assert finish(start(work, config)) == 0, (work / "run.log").read_text()[-3000:]
        out["one_run"] = {"requests": len(stub.state.requests), "answers": answers(work / "cache/mock.sqlite"),
                          "wall_s": round(time.perf_counter() - started, 1)}
    with StubServer() as stub:
        stub.state.latency_s = 0.3
        shared = tmp / "shared.sqlite"
        runs = []
        for name in ("a", "b"):
            (tmp / name).mkdir()
            runs.append(setup(tmp / name, stub, "run", cache=shared))
        started = time.perf_counter()
        procs = [start(w, c) for w, c in runs]
        assert all(finish(p) == 0 for p in procs), [(w / "run.log").read_text()[-2000:] for w, _ in runs]
        out["two_runs_one_cache"] = {"requests": len(stub.state.requests), "answers": answers(shared),
                                     "wall_s": round(time.perf_counter() - started, 1)}
    return out


def interrupted(tmp: Path, name: str, to_group: bool) -> dict:
    with StubServer() as stub:
        stub.state.latency_s = 0.3
        (tmp / name).mkdir()
        work, config = setup(tmp / name, stub, "run")
        proc = start(work, config)
        while len(stub.state.requests) < STOP_AFTER and proc.poll() is None:
            time.sleep(0.05)
        signalled = time.time()
        if to_group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        code = finish(proc, timeout=300)
        ended = time.time()
        late = [t - signalled for t in stub.state.arrived if t > signalled]
        locks = list((work / ".snakemake/locks").glob("*")) if (work / ".snakemake/locks").exists() else []
        sent, stored = len(stub.state.requests), answers(work / "cache/mock.sqlite")
        rerun = start(work, config)
        rerun_code = finish(rerun)
        result = {
            "signal": "SIGINT to the process group" if to_group else "SIGINT to snakemake alone",
            "exit_code": code, "requests_before_signal": sum(t <= signalled for t in stub.state.arrived[:sent]),
            "requests_after_signal": len(late), "last_request_after_signal_s": round(max(late, default=0.0), 2),
            "end_after_signal_s": round(ended - signalled, 1), "locks_left": len(locks),
            "requests_before_rerun": sent, "answers_before_rerun": stored,
            "rerun_exit_code": rerun_code, "rerun_requests": len(stub.state.requests) - sent,
            "rerun_new_answers": answers(work / "cache/mock.sqlite") - stored}
        return result


def main() -> None:
    os.environ[STUB_KEY_ENV] = "cred-bench-7f3a9c21e8b4"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        figures = {"seeds": SEEDS, "stub_latency_s": 0.3, **clean_runs(tmp)}
        figures["ctrl_c_group"] = interrupted(tmp, "group", to_group=True)
        figures["ctrl_c_snakemake"] = interrupted(tmp, "alone", to_group=False)
    publish("paid_once", figures)


if __name__ == "__main__":
    main()
