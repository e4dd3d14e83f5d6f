"""Time a no-op `snakemake` on a finished default run (target: under 10 s).

Run after `make reproduce`; it fails if the workflow still has jobs to run.
Writes benchmarks/out/snakemake_noop.json.
"""

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def main(repeats: int = 3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run([SNAKEMAKE, "--cores", "2"], cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if "Nothing to be done" not in proc.stdout + proc.stderr:
            sys.exit("the default run is not finished: run `make reproduce` first")
    report = {"noop_seconds": [round(t, 2) for t in times], "median_s": round(statistics.median(times), 2),
              "target_s": 10}
    publish("snakemake_noop", report)


if __name__ == "__main__":
    main()
