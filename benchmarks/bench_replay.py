"""What a reviewer pays to replay a finished run, before and after replays stopped loading litellm.

Two replays (`snakemake --cores 2 --forceall` with `llm.replay: true`), each under the workflow of
two commits, back to back on the same files:
- the embedded model's two-seed run (`.test/config/two_seeds.yaml`, built here first: ~5 min);
- the mock run (`.test/config/mock.yaml`, built on the stub server), packed with `aura_eval pack`
  and unpacked into a fresh checkout, replayed from `packed/config/replay.yaml`.
Each checkout is `git archive` of its commit, run with its own code (PYTHONPATH). The litellm
imports and Snakemake launches of each replay are counted (benchmarks/census.py).

    python benchmarks/bench_replay.py [--before 3b87bd8] [--after HEAD]

The default `--before` is the commit before "Replays never load litellm" (dc2a408).
Writes benchmarks/out/replay.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.census import census, counts  # noqa: E402
from benchmarks.results import publish  # noqa: E402
from tests.workflow import build_mock_run  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def checkout(commit: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def run(work: Path, *args: str) -> float:
    """`snakemake --cores 2 ARGS` in `work` with that checkout's own code: seconds."""
    start = time.perf_counter()
    proc = subprocess.run([SNAKEMAKE, "--cores", "2", *args], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(work)})
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed in {work}:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def replay(work: Path, config: str, census_file: Path) -> dict:
    with census(census_file):
        seconds = run(work, "--forceall", "--configfile", config)
    seen = counts(census_file)
    return {"seconds": round(seconds, 1), "litellm_imports": seen.get("litellm", 0),
            "snakemake_processes": seen.get("snakemake", 0) + seen.get("snakemake-job", 0)}


def with_replay_on(work: Path, config: str) -> str:
    path = work / config
    replayed = path.with_name(path.stem + "_replay.yaml")
    replayed.write_text(path.read_text().replace("  replay: false", "  replay: true"))
    return str(replayed.relative_to(work))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="3b87bd8")
    parser.add_argument("--after", default="HEAD")
    args = parser.parse_args()
    revs = {name: subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.strip() for name, rev in (("before", args.before), ("after", args.after))}
    report = {"commits": revs, "cores": 2}
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        base = Path(tmp)
        # The embedded model's run, built once under `after`, its results and cache copied to `before`.
        trees = {name: checkout(rev, base / name) for name, rev in revs.items()}
        build = run(trees["after"], "--configfile", ".test/config/two_seeds.yaml")
        report["embedded_build_s"] = round(build, 1)
        for part in ("results", "cache"):
            shutil.copytree(trees["after"] / part, trees["before"] / part, dirs_exist_ok=True)
        report["embedded_two_seeds"] = {
            name: replay(tree, with_replay_on(tree, ".test/config/two_seeds.yaml"), base / f"census-{name}.txt")
            for name, tree in trees.items()}
        # The mock run, packed and unpacked into a fresh checkout of each commit.
        mock = checkout(revs["after"], base / "mock")
        start = time.perf_counter()
        os.environ["PYTHONPATH"] = str(mock)
        build_mock_run(mock)
        report["mock_build_s"] = round(time.perf_counter() - start, 1)
        archive = base / "run.tar.gz"
        subprocess.run([sys.executable, "-m", "aura_eval", "pack", str(archive), "--configfile",
                        ".test/config/mock.yaml", "--root", str(mock)], cwd=mock, check=True, capture_output=True)
        report["pack_bytes"] = archive.stat().st_size
        with tarfile.open(archive) as tar:
            report["pack_files"] = sum(member.isfile() for member in tar.getmembers())
        packed = {}
        for name, rev in revs.items():
            fresh = checkout(rev, base / f"packed-{name}")
            subprocess.run([sys.executable, "-m", "aura_eval", "unpack", str(archive), str(fresh)], cwd=mock,
                           check=True, capture_output=True)
            packed[name] = replay(fresh, "packed/config/replay.yaml", base / f"census-packed-{name}.txt")
        report["packed_mock"] = packed
    for run_name in ("embedded_two_seeds", "packed_mock"):
        times = report[run_name]
        times["after_over_before"] = round(times["after"]["seconds"] / times["before"]["seconds"], 2)
    publish("replay", report)


if __name__ == "__main__":
    main()
