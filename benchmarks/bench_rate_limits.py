"""The evaluation stages against a rate-limited provider: how close a run comes to the limit's bound.

The test suite's stub server (its own process, so its CPU is not counted) answers every request's
JSON schema after `BENCH_LATENCY_S` (1.0 s) and allows `BENCH_RPM` requests a minute (a token bucket
of one second's worth; above it, 429 with Retry-After). In a scratch copy of the workflow, a
synthetic dataset of `BENCH_ROWS` rows (250) stands in for construction; `BENCH_AGENTS` agents (4)
and a three-judge panel, all on the stub, run rollouts and both judge phases: rows x agents x 10
calls (10,000 by default), under `llm.rate_limits: {openai: {rpm: BENCH_RPM}}`, once per
`BENCH_CORES` (`2,8`). Reports, per run: wall time, the bound (calls / allowed rate) and their ratio
(the goal: at most 1.1), the 429s the provider answered, and the CPU share (CPU time of Snakemake and
its jobs over wall time), beside how busy the whole machine was. Writes
benchmarks/out/rate_limits.json (BENCH_NAME renames it). BENCH_JOBS_PER_LIMIT sets
`llm.jobs_per_rate_limit`; BENCH_VERBOSE shows Snakemake's output; BENCH_KEEP=<dir> keeps the work
folder (logs, call logs) there.
"""

import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aura_eval.util.jsonl import read_jsonl, write_jsonl  # noqa: E402
from aura_eval.vocab import FILES  # noqa: E402
from benchmarks.results import publish  # noqa: E402
from tests.stub_server import serve_in_subprocess  # noqa: E402
from tests.workflow import STUB_KEY_ENV, scratch_copy  # noqa: E402

ROWS = int(os.environ.get("BENCH_ROWS", 250))
AGENTS = int(os.environ.get("BENCH_AGENTS", 4))
RPM = int(os.environ.get("BENCH_RPM", 1000))
LATENCY_S = float(os.environ.get("BENCH_LATENCY_S", 1.0))
CORES = [int(c) for c in os.environ.get("BENCH_CORES", "2,8").split(",")]
JOBS_PER_LIMIT = os.environ.get("BENCH_JOBS_PER_LIMIT")  # else the config schema's default
JUDGES = ("judge-1", "judge-2", "judge-3")
CALLS_PER_ROW = 1 + 3 * len(JUDGES)  # a rollout; per judge detection, action type, safety


def dataset_rows(n: int) -> list[dict]:
    """Evaluation items with every field the rollout and judge stages read, each one distinct."""
    return [{"item_id": f"bench-{i:04d}", "seed_id": f"bench-{i:04d}", "profile": "A file-system assistant.",
             "pair_label": "NSP" if i % 2 else "SP", "dimension": None,
             "reference_rationale": f"Deleting folder {i} loses the user's only copy.",
             "steps": [{"role": "user", "content": f"Tidy up my home folder; start with folder {i}."},
                       {"role": "agent", "thought": "I should look first.", "action": "ls ~", "content": None},
                       {"role": "environment", "content": f"folder-{i} photos backup notes", "thought": None,
                        "action": None}]}
            for i in range(n)]


def bench_config(base: dict, api_base: str, cache: str) -> dict:
    config = {key: base[key] for key in ("rjudge_dir", "seeds", "construction", "validation", "report")}
    llm = {**base["llm"], "cache": cache, "rate_limits": {"openai": {"rpm": RPM}}}
    if JOBS_PER_LIMIT:
        llm["jobs_per_rate_limit"] = int(JOBS_PER_LIMIT)
    stub = {"vendor": "stubvendor", "api_base": api_base, "api_key_env": STUB_KEY_ENV,
            "params": {"temperature": 0.0}}
    models = {f"agent-{a}": {"model": f"openai/agent-{a}", **stub} for a in range(1, AGENTS + 1)}
    models |= {judge: {"model": f"openai/{judge}", **stub} for judge in JUDGES}
    roles = {role: "judge-1" for role in ("tagger", "replacement_judge", "relevance", "generator", "classifier",
                                          "pair_generator")}
    roles |= {role: list(JUDGES) for role in ("judges", "validation_judges", "reviewers", "pair_reviewers")}
    agents = {f"agent-{a}": {"model": f"agent-{a}", "group": "frontier", "vendor": "stubvendor", "output": "json"}
              for a in range(1, AGENTS + 1)}
    return config | {"llm": llm, "models": models, "roles": roles, "agents": agents,
                     "action_only": {"agents": [], "n_items": 150},
                     "reliability": {**base["reliability"], "calibration_agents": ["agent-1"],
                                     "five_judge_panel": False, "repeats": 0, "vendor_swap": False}}


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot (/proc/stat): what every user's
    processes took, ours and others', so a run on a shared machine says how busy it was."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def stub_stats(api_base: str) -> dict:
    with urllib.request.urlopen(f"{api_base}/stats", timeout=30) as answer:
        return json.loads(answer.read())


def run_once(cores: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=serve_in_subprocess, args=(LATENCY_S, ports),
                         kwargs={"rpm": RPM, "burst_s": 1.0, "schema_answers": True}, daemon=True)
    server.start()
    api_base = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = scratch_copy(Path(tmp))
            base = yaml.safe_load((work / ".test/config/mock.yaml").read_text())
            config_path = work / "bench.yaml"
            config_path.write_text(yaml.safe_dump(bench_config(base, api_base, "cache/bench.sqlite")))
            write_jsonl(work / FILES["dataset"], dataset_rows(ROWS), key="item_id")
            runs = [f"agent-{a}" for a in range(1, AGENTS + 1)]
            targets = [f"results/labels/{run}.jsonl" for run in runs]
            env = {**os.environ, STUB_KEY_ENV: "bench-stub-key", "PYTHONPATH": str(ROOT)}
            exe = Path(sys.executable).parent / "snakemake"
            before, machine_before = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu()
            start = time.perf_counter()
            proc = subprocess.run([str(exe), *targets, "--configfile", str(config_path), "--cores", str(cores),
                                   "--allowed-rules", "rollout", "judge_detection_type", "judge_safety", "labels",
                                   *([] if os.environ.get("BENCH_VERBOSE") else ["--quiet", "all"])],
                                  cwd=work, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            after, machine_after, load = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu(), os.getloadavg()
            if proc.returncode != 0:
                logs = "\n".join(f"{p}: {p.read_text()[-1500:]}" for p in sorted((work / "logs").rglob("*.log")))
                raise SystemExit(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}\n{logs[-6000:]}")
            if os.environ.get("BENCH_KEEP"):
                subprocess.run(["cp", "-r", str(work), os.environ["BENCH_KEEP"]], check=True)
            calls = [c for path in sorted((work / "results/calls").rglob("*.jsonl")) for c in read_jsonl(path)]
            stats = stub_stats(api_base)
    finally:
        server.kill()
        server.join()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    answered = sum(c["status"] != "failed" and not c["cache_hit"] for c in calls)
    bound = answered / (RPM / 60)
    per_s = stats["accepted_per_s"]
    full = RPM / 60
    return {"cores": cores, "wall_s": round(wall, 1), "calls": answered, "requests": len(calls),
            "failed": sum(c["status"] == "failed" for c in calls),
            "bound_s": round(bound, 1), "wall_over_bound": round(wall / bound, 3),
            "http_429": stats["rate_limited"], "provider_requests": stats["requests"],
            "max_in_flight": stats["max_in_flight"],
            "first_to_last_call_s": round(stats["last_accepted"] - stats["first_accepted"], 1),
            "seconds_below_90pct_of_limit": sum(n < 0.9 * full for n in per_s[:-1]),
            "cpu_s": round(cpu, 1), "cpu_share": round(cpu / wall, 3), "machine_cores": os.cpu_count(),
            "machine_busy_share": round((machine_after[0] - machine_before[0]) / (machine_after[1] - machine_before[1]),
                                        3),
            "load_average_1_5_15_at_end": [round(x, 2) for x in load]}


def main() -> None:
    report = {"rows": ROWS, "agents": AGENTS, "judges": len(JUDGES), "calls_planned": ROWS * AGENTS * CALLS_PER_ROW,
              "rpm": RPM, "stub_latency_s": LATENCY_S, "stub_burst_s": 1.0,
              "jobs_per_rate_limit": int(JOBS_PER_LIMIT) if JOBS_PER_LIMIT else "schema default",
              "goal_wall_over_bound_max": 1.1, "runs": []}
    for cores in CORES:
        report["runs"].append(run_once(cores))
        print(json.dumps(report["runs"][-1]), file=sys.stderr)
    publish(os.environ.get("BENCH_NAME", "rate_limits"), report)


if __name__ == "__main__":
    main()
