"""Helpers to run the Snakemake workflow in a scratch copy of the repository."""

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW_PARTS = ["Snakefile", "rules", "scripts", "prompts", "schemas", "config", "paper", "profiles", "envs",
                  "data"]


def scratch_copy(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for part in WORKFLOW_PARTS:
        source = ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / part)
    return work


def write_config(work: Path, name: str, **overrides) -> Path:
    config = yaml.safe_load((work / "config" / "config.yaml").read_text())
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path = work / "config" / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake(work: Path, *args: str, check=True) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run([str(exe), "--cores", "2", *args], cwd=work, capture_output=True, text=True,
                          timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc
