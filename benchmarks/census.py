"""Which Python processes of a command start Snakemake and which import litellm.

`with census(path):` drops a one-line `.pth` file into this environment's site-packages for the
duration, so every Python process of the environment (pytest, its workers, Snakemake, each job, a
test's own subprocess, wherever it runs) runs this file at start-up; it counts only where
`AURA_CENSUS` names the file to append to (a process given an environment without it is not counted, so the
counts are lower bounds). Lines: `snakemake <pid>` for a Snakemake command line (`job` for the
per-job Snakemake a local job runs in), `litellm <pid>` for a process that had imported litellm
when it exited normally.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import sysconfig
from collections import Counter
from pathlib import Path

ENV = "AURA_CENSUS"
HOOK = "aura_census"  # the name this file runs under at a process's start
PTH = Path(sysconfig.get_paths()["purelib"]) / "aura_census.pth"


def _note(what: str) -> None:
    # the process's script (a job's is named after its rule) says which one it was
    script = Path(sys.orig_argv[1]).name if len(sys.orig_argv) > 1 else ""
    with open(os.environ[ENV], "a", encoding="utf-8") as out:
        out.write(f"{what} {os.getpid()} {script}\n")


def _note_litellm() -> None:
    # At exit, not at the import: `importlib.util.find_spec("litellm")` (which aura_eval.llm.pricing
    # and aura_eval.util.tokens use to find litellm's files) asks the import system too, loading nothing.
    if "litellm" in sys.modules:
        _note("litellm")


def note_process() -> None:
    if not os.environ.get(ENV) or getattr(sys, "_aura_census", False):  # once a process (a .pth may be read twice)
        return
    sys._aura_census = True
    argv = sys.orig_argv
    # the `snakemake` script or `python -m snakemake`; not a job's script under .snakemake/scripts/
    # (sys.argv is not set yet while site runs this file; sys.orig_argv is)
    if len(argv) > 1 and (Path(argv[1]).name == "snakemake" or argv[1:3] == ["-m", "snakemake"]):
        _note("snakemake-job" if "--target-jobs" in argv or "subprocess" in argv else "snakemake")
    atexit.register(_note_litellm)


@contextlib.contextmanager
def census(path: Path):
    """Count the processes of the commands run inside; the counts are read with `counts(path)`."""
    path.write_text("")
    # A .pth line that starts with `import` is run by `site` in every process of the environment.
    PTH.write_text(f"import os, runpy; os.environ.get({ENV!r}) and runpy.run_path({__file__!r}, run_name={HOOK!r})\n")
    previous = os.environ.get(ENV)
    os.environ[ENV] = str(path)
    try:
        yield
    finally:
        PTH.unlink(missing_ok=True)
        if previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = previous


def counts(path: Path) -> dict[str, int]:
    return dict(Counter(line.split()[0] for line in path.read_text().splitlines() if line.strip()))


if __name__ == HOOK:
    note_process()
