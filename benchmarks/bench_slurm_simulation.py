"""The paper-scale simulation (config/simulate.yaml) locally and through the one-node SLURM, back to back.

Needs root and `make slurm` (scripts/slurm/cluster.sh starts the cluster without accounting; the node
declares this machine's CPUs, AURA_SLURM_CPUS to change it). Each run gets its own scratch copy of
the workflow. Local: `snakemake --cores 2`. SLURM: a copy of profiles/slurm with the partition filled
in and the plugin's own status-check timing (`--slurm-init-seconds` to change it), with
`--local-cores 2 --slurm-status-command squeue`. Reports each wall time, their ratio, the SLURM
submissions (grouped, as run; ungrouped, counted from dry runs), the overhead per submission, and
whether the two runs' stable outputs are byte-identical. Writes benchmarks/out/slurm_simulation.json.
About 20 minutes on a 2-core machine.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402
from tests import slurm  # noqa: E402
from tests.workflow import scratch_copy  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
CONFIG = "config/simulate.yaml"


def run(work: Path, *args: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([SNAKEMAKE, *args, "--configfile", CONFIG], cwd=work, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout + proc.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slurm-init-seconds", type=int, default=40, help="the plugin's default: 40")
    args = parser.parse_args()
    reason = slurm.unavailable()
    if reason:
        sys.exit(reason)
    from aura_eval.tools.digest import stable_digests

    before = slurm.running()
    started = time.perf_counter()
    up = slurm.start(accounting=False)
    start_s = time.perf_counter() - started
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "local").mkdir()
            (Path(tmp) / "slurm").mkdir()
            local_work = scratch_copy(Path(tmp) / "local")
            slurm_work = scratch_copy(Path(tmp) / "slurm")
            profile = slurm.profile(slurm_work, accounting=False, init_seconds=args.slurm_init_seconds,
                                    **{"slurm-keep-successful-logs": False})
            planned = slurm.planned_submissions(slurm_work, profile, CONFIG)
            local_s, _ = run(local_work, "--cores", "2")
            slurm_s, text = run(slurm_work, "--profile", str(profile), "--local-cores", "2")
            submitted = len(slurm.SUBMITTED.findall(text))
            mine, theirs = stable_digests(slurm_work), stable_digests(local_work)
            identical = mine == theirs
    finally:
        if before == "none":
            slurm.stop()
    report = {
        "config": CONFIG, "cluster": up, "cluster_start_s": round(start_s, 1),
        "slurm_init_seconds_before_status_checks": args.slurm_init_seconds,
        "local_s": round(local_s, 1), "slurm_s": round(slurm_s, 1), "ratio": round(slurm_s / local_s, 2),
        "jobs": planned["jobs"], "model_jobs_on_host": planned["model_jobs"],
        "submissions_ungrouped": planned["ungrouped"], "submissions_grouped_planned": planned["grouped"],
        "submissions_grouped": submitted,
        "overhead_per_submission_s": round((slurm_s - local_s) / submitted, 1),
        "stable_outputs_identical": identical, "stable_outputs": len(mine),
    }
    publish("slurm_simulation", report)


if __name__ == "__main__":
    main()
