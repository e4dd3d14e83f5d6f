"""The SLURM start check (aura_eval.workflow.slurm_check) against stub `sacct`/`squeue`/`scontrol` on PATH: the
status command the plugin will use must answer, and `squeue` must remember a finished job longer
than the plugin's longest pause between checks. tests/test_slurm.py runs it on a real SLURM."""

import os
from types import SimpleNamespace

import pytest

from aura_eval.workflow.slurm_check import slurm_status_problem


def _stubs(tmp_path, monkeypatch, min_job_age: int, sacct_ok: bool):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "scontrol": f'echo "MinJobAge               = {min_job_age} sec"',
        "squeue": "exit 0",
        "sacct": "exit 0" if sacct_ok else 'echo "Slurm accounting storage is disabled" >&2; exit 1',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _settings(command: str, init: int = 40):
    return SimpleNamespace(status_command=command, init_seconds_before_status_checks=init)


def test_sacct_without_accounting_stops_with_the_fix_named(tmp_path, monkeypatch):
    _stubs(tmp_path, monkeypatch, min_job_age=300, sacct_ok=False)
    problem = slurm_status_problem(_settings("sacct"))
    assert "`sacct` cannot report job states (Slurm accounting storage is disabled)" in problem
    assert "--slurm-status-command squeue" in problem and "MinJobAge" in problem and "\n" not in problem


@pytest.mark.parametrize("age, fine", [(300, True), (181, True), (180, False), (60, False)])
def test_squeue_needs_min_job_age_above_the_longest_pause(tmp_path, monkeypatch, age, fine):
    _stubs(tmp_path, monkeypatch, min_job_age=age, sacct_ok=False)
    monkeypatch.setattr("shutil.which", lambda name: None if name == "sacct" else f"/stub/{name}")
    problem = slurm_status_problem(_settings("squeue", init=2))
    assert (problem is None) == fine
    if not fine:
        assert f"MinJobAge ({age} s)" in problem


def test_squeue_under_three_first_delays_is_sacct_as_the_plugin_falls_back(tmp_path, monkeypatch):
    _stubs(tmp_path, monkeypatch, min_job_age=100, sacct_ok=False)
    assert "`sacct` cannot report" in slurm_status_problem(_settings("squeue", init=40))


def test_sacct_that_answers_passes(tmp_path, monkeypatch):
    _stubs(tmp_path, monkeypatch, min_job_age=300, sacct_ok=True)
    assert slurm_status_problem(_settings("sacct")) is None
