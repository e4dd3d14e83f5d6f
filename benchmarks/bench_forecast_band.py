"""The cost band against simulated runs whose answers report usage and whose entries are priced.

1. Coverage: the band made before any call, over BENCH_RUNS (20) simulated runs of a small config
   (.test/config/sim_small.yaml on BENCH_SEEDS seeds, each with its own `llm.simulation.seed`): in
   how many runs it holds the run's calls, input and output tokens and dollars (goal: 19 of 20
   for each), and whether every run's band narrowed at each model stage's end and ended at the
   actual. Each run writes results/tables/forecast_bands.csv, which this reads.
2. The paper's scale (`BENCH_PAPER=1`; config/simulate.yaml, all 157 seeds, 20 agents): pilots of
   BENCH_PILOTS seeds ("2 8"; `python -m aura_eval pilot --seeds N --yes`), the band before any call
   and from each pilot (goal for the 2-seed one: within 25% each way), then the full run: its paid
   calls against each point (goal: 5%). About 15 minutes on 2 cores.
Writes benchmarks/out/forecast_band.json.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402
from tests.workflow import scratch_copy  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", 20))
SEEDS = int(os.environ.get("BENCH_SEEDS", 4))
PILOTS = [int(n) for n in os.environ.get("BENCH_PILOTS", "2 8").split()]  # pilot sizes at the paper's scale
MEASURES = ("calls", "tokens_in", "tokens_out", "usd")
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
ENV = {**os.environ, "SLURM_CONF": str(ROOT / "tests" / "slurm-no-controller.conf")}


def bands_of(work: Path) -> list[dict]:
    with open(work / "results/tables/forecast_bands.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def one_run(base: Path, seed: int) -> dict:
    (base / f"run{seed}").mkdir()
    work = scratch_copy(base / f"run{seed}")
    config = yaml.safe_load((work / ".test/config/sim_small.yaml").read_text())
    config["seeds"] = SEEDS
    config["llm"]["simulation"]["seed"] = seed
    path = work / "bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    started = time.perf_counter()
    done = subprocess.run([SNAKEMAKE, "results/tables/forecast_bands.csv", "--cores", "2", "--configfile", str(path)],
                          cwd=work, capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        raise SystemExit(f"run {seed} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rows = bands_of(work)
    out = {"seed": seed, "seconds": round(time.perf_counter() - started, 1)}
    for m in MEASURES:
        mine = [r for r in rows if r["measure"] == m]
        first = mine[0]
        out[m] = {"actual": float(first["actual"]), "low": float(first["low"]), "point": float(first["point"]),
                  "high": None if first["high"] == "" else float(first["high"]), "held": first["held"] == "True",
                  "narrowed_every_stage": all(r["narrowed"] == "True" for r in mine[1:]),
                  "ends_at_actual": float(mine[-1]["low"]) == float(mine[-1]["high"]) == float(first["actual"])}
    shutil.rmtree(work.parent, ignore_errors=True)
    return out


def coverage() -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(RUNS):
            runs.append(one_run(Path(tmp), seed))
            print(json.dumps(runs[-1]), flush=True)
    summary = {m: {"held": sum(r[m]["held"] for r in runs), "runs": len(runs),
                   "narrowed_every_stage": sum(r[m]["narrowed_every_stage"] for r in runs),
                   "ends_at_actual": sum(r[m]["ends_at_actual"] for r in runs),
                   "median_width": sorted((r[m]["high"] - r[m]["low"]) / r[m]["point"] for r in runs
                                          if r[m]["high"] is not None and r[m]["point"])[len(runs) // 2]}
               for m in MEASURES}
    return {"config": ".test/config/sim_small.yaml", "seeds": SEEDS, "summary": summary, "runs": runs}


def paper_scale() -> dict:
    from aura_eval.analyze import forecast as fc
    from aura_eval.workflow.config import complete_config, load_configs

    with tempfile.TemporaryDirectory() as tmp:
        work = scratch_copy(Path(tmp))
        config = complete_config(load_configs([str(work / "config/simulate.yaml")]))[0]
        started = time.perf_counter()
        before = fc.forecast(config, root=work, results=False)
        forecast_s = time.perf_counter() - started
        from_pilot, pilot_s = {}, {}
        for n in PILOTS:  # the larger pilot's seeds hold the smaller's: their answers are in the cache
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "aura_eval", "pilot", "--seeds", str(n), "--yes", "--configfile",
                            "config/simulate.yaml", "--dir", f"pilot{n}"], cwd=work, check=True, capture_output=True,
                           env={**ENV, "PYTHONPATH": str(ROOT)})
            pilot_s[n] = round(time.perf_counter() - started, 1)
            from_pilot[n] = fc.forecast(config, root=work, results=False, pilot=work / f"pilot{n}")
        started = time.perf_counter()
        subprocess.run([SNAKEMAKE, "--cores", "2", "--configfile", "config/simulate.yaml"], cwd=work, check=True,
                       capture_output=True, env=ENV)
        run_s = time.perf_counter() - started
        started = time.perf_counter()
        final = fc.forecast(config, root=work)
        with_results_s = time.perf_counter() - started

    def bands(result):
        t = result["total"]
        return {m: {"low": t[f"{m}_low"], "point": t[m], "high": t[f"{m}_high"],
                    "below_point": None if not t[m] else round(1 - t[f"{m}_low"] / t[m], 3),
                    "above_point": None if not t[m] or t[f"{m}_high"] is None else round(t[f"{m}_high"] / t[m] - 1, 3)}
                for m in MEASURES}

    actual = {m: final["total"][p] for m, p in (("calls", "paid_calls"), ("tokens_in", "paid_tokens_in"),
                                                ("tokens_out", "paid_tokens_out"), ("usd", "paid_usd"))}
    out = {"before_any_call": bands(before), **{f"after_{n}_seed_pilot": bands(r) for n, r in from_pilot.items()},
           "actual": actual, "left_at_the_end": final["total"]["calls"], "seconds": {
               "forecast_without_results": round(forecast_s, 1), "forecast_with_results": round(with_results_s, 1),
               **{f"pilot_{n}": s for n, s in pilot_s.items()}, "run": round(run_s, 1)}}
    for name in ("before_any_call", *(f"after_{n}_seed_pilot" for n in from_pilot)):
        for m in MEASURES:
            b = out[name][m]
            b["held"] = b["low"] <= actual[m] and (b["high"] is None or actual[m] <= b["high"])
            b["point_error"] = round(b["point"] / actual[m] - 1, 3) if actual[m] else None
            b["within_25_percent"] = b["below_point"] <= 0.25 and b["above_point"] is not None and b["above_point"] <= 0.25
    return out


def main():
    report = {}
    if RUNS:
        report["coverage"] = coverage()
    if os.environ.get("BENCH_PAPER") == "1":
        report["paper_scale"] = paper_scale()
    publish("forecast_band", report)


if __name__ == "__main__":
    main()
