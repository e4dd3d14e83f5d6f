"""Time a no-op `snakemake` on a finished default run (target: under 10 s).

Run after `make reproduce`; it fails if the workflow still has jobs to run.
Writes benchmarks/out/snakemake_noop.json.
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "snakemake_noop.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
