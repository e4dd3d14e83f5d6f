"""`python -m aura_eval pilot --seeds N`: the whole workflow on N of the run's seeds, then the full
run's forecast from what the pilot saw.

The pilot runs in a folder of its own (`--dir`, default `pilot/`: the repository's prompts, data
and paper linked in, as `make simulate` does) against the run's own cache file, so the full run
pays none of its answers again: its seeds are a subset of the full run's (the stratified selection
nests; checked here), and every request of theirs is the same request. Its spend counts toward
`llm.budget_usd`, which lives in that cache file. Before paying it says what it will cost (the
forecast of N seeds before any call) and asks; `--yes` answers for you.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import yaml

from aura_eval.analyze import forecast as fc
from aura_eval.analyze import forecast_text

LINKED = ("prompts", "data", "paper")  # what a workflow run reads from the checkout beside its config


class PilotError(ValueError):
    """A pilot that cannot be run as asked (its message says why and what to do)."""


def pilot_config(config: dict, n, root: Path) -> dict:
    """The run's config on `n` of its seeds, its cache the run's own file (an absolute path)."""
    full = len(fc.run_seeds(config, root))
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PilotError(f"--seeds must be a whole number of seeds, at least 1 (got {n!r})")
    if n >= full:
        raise PilotError(f"--seeds {n}: the run itself has {full} seeds; a pilot takes fewer (2 to 10 is usual)")
    pilot = copy.deepcopy(config)
    pilot["seeds"] = n
    pilot["llm"]["cache"] = str((root / config["llm"]["cache"]).resolve())
    return pilot


def outside_seeds(config: dict, pilot: dict, root: Path) -> list[str]:
    """The pilot's seeds that the full run does not select (their answers would not be reused)."""
    full = {s["seed_id"] for s in fc.run_seeds(config, root)}
    return sorted(s["seed_id"] for s in fc.run_seeds(pilot, root) if s["seed_id"] not in full)


def prepare(folder: Path, root: Path, pilot: dict) -> Path:
    """The pilot's folder with the checkout's inputs linked in and its config written; the config's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for part in LINKED:
        link = folder / part
        if not link.exists() and not link.is_symlink():
            link.symlink_to(os.path.relpath(root / part, folder))
    path = folder / "pilot-config.yaml"
    path.write_text("# The pilot's config (python -m aura_eval pilot): the run's, on fewer seeds.\n"
                    + yaml.safe_dump(pilot, sort_keys=False), encoding="utf-8")
    return path


def run(config: dict, n, folder: str = "pilot", root: str = ".", yes: bool = False, cores: int = 2,
        ask=input, out=sys.stdout) -> int:
    root_path, where = Path(root).resolve(), Path(root) / folder
    pilot = pilot_config(config, n, root_path)
    outside = outside_seeds(config, pilot, root_path)
    before = fc.forecast(pilot, root=root_path, results=False)
    t = before["total"]
    out.write(f"the pilot: {n} seeds in {where}/, against the run's cache {pilot['llm']['cache']}\n"
              f"it will cost {forecast_text.band_text(t['usd_low'], t['usd'], t['usd_high'], forecast_text.money)} "
              f"({t['calls']:,} calls, band {t['calls_low']:,} to {forecast_text.number(t['calls_high'])}); ceiling "
              f"{forecast_text.ceiling_usd(before)}\n")
    if outside:
        out.write(f"note: {len(outside)} of the pilot's seeds are not among the run's ({', '.join(outside[:5])}): "
                  f"the run pays their answers' counterparts anew\n")
    if not yes:
        if not sys.stdin.isatty() and ask is input:
            raise PilotError("the pilot pays for its calls and asks first: run it at a terminal, or add --yes")
        if ask("pay for the pilot? [y/N] ").strip().lower() not in ("y", "yes"):
            out.write("not run\n")
            return 1
    configfile = prepare(where, root_path, pilot)
    snakemake = Path(sys.executable).parent / "snakemake"
    done = subprocess.run([str(snakemake), "--cores", str(cores), "--keep-going", "--directory", str(where),
                           "--configfile", str(configfile)], cwd=root_path)
    if done.returncode != 0:
        out.write(f"the pilot's run failed (exit {done.returncode}); its answers are in the cache: rerun the same "
                  f"command to finish it\n")
        return done.returncode
    out.write("\nthe full run, from what the pilot saw:\n")
    out.write(forecast_text.text(fc.forecast(config, root=root_path, pilot=where)))
    return 0
