"""The config recorded with the results: which config made the files under `results/`.

The workflow's onstart (a real run, not a dry run) writes `results/run/config.yaml` once its start
checks pass: the config exactly as the workflow sees it (its `--configfile`s merged in order, the
`--config` overrides applied), as YAML that is itself a valid `--configfile`, under a header naming
the files. `make clean` removes it with the results. It is a volatile file (`vocab.VOLATILE_FILES`):
a replay records its replay config there.

The tools that act on a run's results read it: `make pack` packs the recorded config when told none
and refuses one that differs (`python -m aura_eval pack`), and `make forecast` forecasts the recorded
config when told none and warns when told another. What counts as another config is what changes the
results: `differences` leaves out the `llm` section (where the cache lives, replay, concurrency,
budget, rate limits) and the model entries' `batch` and `api_key_env`, which change how an answer is
fetched, never which answer is asked for or kept (an entry's `api_base` enters the cache key, so it counts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

RUN_CONFIG = "results/run/config.yaml"
HEADER = "# The config of the run started last in this folder, as the workflow saw it (written at its start):\n"
NEUTRAL_SECTIONS = ("llm",)  # how answers are fetched and paid for, not which
NEUTRAL_MODEL_KEYS = ("batch", "api_key_env")  # api_base enters the cache key: not neutral


@dataclass(frozen=True)
class RecordedConfig:
    config: dict  # the run's config, as the workflow saw it
    files: tuple[str, ...]  # the config files named at its start, in order (as the report names them)
    path: Path  # the record's file


def record(config: dict, configfiles, root=".") -> Path:
    """Write `results/run/config.yaml` under `root` (atomically): `config` (the workflow's, merged and
    overridden) as YAML, the config files' names in its header."""
    path = Path(root) / RUN_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    names = "".join(f"#   configfile: {name}\n" for name in configfiles)
    body = yaml.safe_dump(_plain(config), sort_keys=False, allow_unicode=True)
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    partial.write_text(HEADER + names + body, encoding="utf-8")
    partial.replace(path)
    return path


def recorded_config(root=".") -> RecordedConfig | None:
    """The config recorded with the results under `root` (`results/run/config.yaml`), or None where no
    run has recorded one (no run yet, or results from before the record existed). This is the function
    for "the config recorded with these results"."""
    path = Path(root) / RUN_CONFIG
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    config = yaml.safe_load(text) or {}
    if not isinstance(config, dict):
        return None
    files = tuple(line.split("configfile:", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("#   configfile:"))
    return RecordedConfig(config=config, files=files, path=path)


def _result_part(config: dict) -> dict:
    """The config with its defaults filled, less what changes no result (NEUTRAL_*)."""
    from aura_eval.workflow.config import complete_config

    filled, _ = complete_config(_plain(config))
    for section in NEUTRAL_SECTIONS:
        filled.pop(section, None)
    for entry in (filled.get("models") or {}).values():
        if isinstance(entry, dict):
            for key in NEUTRAL_MODEL_KEYS:
                entry.pop(key, None)
    return filled


def _diff(a, b, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                found.append(where)
            else:
                found += _diff(a[key], b[key], where)
        return found
    return [] if a == b else [prefix or "(the whole config)"]


def differences(config: dict, recorded: dict) -> list[str]:
    """The dotted keys whose values differ between two configs in what changes results (both with
    their defaults filled; the `llm` section and the entries' `batch` and `api_key_env` left out). Empty: the results under one belong to the other."""
    return _diff(_result_part(config), _result_part(recorded), "")


def _plain(value):
    """Snakemake's config (its own mapping types included) as plain dicts and lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def mismatch_text(config_names, recorded: RecordedConfig, found: list[str], most: int = 6) -> str:
    """One line: the results were made with another config, which keys differ, which config they were made with."""
    shown = ", ".join(found[:most]) + (f" and {len(found) - most} more" if len(found) > most else "")
    made = " ".join(recorded.files) or str(recorded.path)
    return (f"the results under results/ were made with {made} (recorded in {RUN_CONFIG}), not with "
            f"{' '.join(str(n) for n in config_names)}: they differ in {shown}")
