"""The one-node SLURM of scripts/slurm/cluster.sh for the cluster tests and the SLURM benchmark, and
copies of profiles/slurm that point at it.

Where its packages are missing (`make slurm`) or this process is not root, a test is skipped with the
reason; CI sets AURA_REQUIRE_SLURM=1, so there it fails instead (as the browser tests do)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "scripts" / "slurm" / "cluster.sh"
PARTITION, ACCOUNT = "main", "aura"  # what cluster.sh declares
NO_SLURM = ("Debian's slurm-wlm, munge, slurmdbd and mariadb-server are not installed "
            "(run `make slurm` as root)")
NOT_ROOT = "the one-node SLURM starts its daemons as root (run the SLURM tests as root)"
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")
# The SLURM_CONF of every test but those on this cluster (tests/conftest.py; the file says why).
NO_CONTROLLER = Path(__file__).resolve().parent / "slurm-no-controller.conf"


def unavailable() -> str | None:
    """Why the one-node SLURM cannot start here, or None."""
    if not all(shutil.which(p) for p in ("slurmctld", "slurmd", "munged", "slurmdbd", "mariadbd")):
        return NO_SLURM
    if os.geteuid() != 0:
        return NOT_ROOT
    return None


def require() -> None:
    reason = unavailable()
    if reason:
        if os.environ.get("AURA_REQUIRE_SLURM"):
            pytest.fail(reason)
        pytest.skip(reason)


def cluster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER), *args], capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)


def running() -> str:
    """The mode the one-node SLURM runs in: "accounting", "no-accounting" or "none"."""
    return cluster("status").stdout.strip() or "none"


def start(accounting: bool) -> str:
    """Start (or switch) the one-node SLURM; its line saying how long it took."""
    proc = cluster("start", *(["--accounting"] if accounting else []))
    if proc.returncode != 0:
        raise AssertionError(f"the one-node SLURM did not start:\n{proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


def stop() -> None:
    proc = cluster("stop")
    if proc.returncode != 0:
        raise AssertionError(f"the one-node SLURM did not stop:\n{proc.stdout}{proc.stderr}")


def profile(work: Path, accounting: bool, status_command: str | None = "squeue", init_seconds: int = 2,
            **settings) -> Path:
    """A copy of profiles/slurm in `work` with its placeholders filled for the one-node SLURM (the
    account left out without accounting: the plugin cannot check one there), the SLURM logs of
    successful jobs kept, the first status check after `init_seconds`, and `status_command` (None:
    the plugin's default)."""
    config = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    resources = config["default-resources"]
    resources["slurm_partition"] = PARTITION
    if accounting:
        resources["slurm_account"] = ACCOUNT
    else:
        del resources["slurm_account"]
    config.update({"slurm-keep-successful-logs": True, "slurm-init-seconds-before-status-checks": init_seconds,
                   **settings})
    if status_command:
        config["slurm-status-command"] = status_command
    folder = work / "slurm-profile"
    folder.mkdir(exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder


def where_jobs_ran(text: str) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """({rule: jobs on this host}, {rule: jobs submitted alone}, {rule: jobs submitted in a group})
    from a Snakemake run's output."""
    host, alone, grouped = {}, {}, {}
    for indent, kind, rule in re.findall(r"^( *)(localrule|rule) (\w+):$", text, flags=re.M):
        target = grouped if indent else host if kind == "localrule" else alone
        target[rule] = target.get(rule, 0) + 1
    return host, alone, grouped


def planned_submissions(work: Path, profile: Path, config: str) -> dict:
    """From dry runs of `config` in `work`: its jobs, the model jobs (run on the submitting host), the
    SLURM submissions without groups (one per other job but `all`) and with the profile's groups (one
    per ungrouped other job, one per group job), and the rules of the grouped jobs."""
    from aura_eval import stage_registry
    from tests.workflow import planned_jobs, snakemake

    models = set(stage_registry.registry())
    jobs = planned_jobs(work, "--configfile", config)
    dry = snakemake(work, "-n", "--profile", str(profile), "--configfile", config).stdout
    single = [rule for rule in re.findall(r"^rule (\w+):$", dry, flags=re.M) if rule not in models and rule != "all"]
    model_jobs = sum(n for rule, n in jobs.items() if rule in models)
    return {"jobs": sum(jobs.values()), "model_jobs": model_jobs,
            "ungrouped": sum(jobs.values()) - model_jobs - jobs.get("all", 0),
            "grouped": len(single) + len(re.findall(r"^\S.*Group job ", dry, flags=re.M)),
            "grouped_rules": set(where_jobs_ran(dry)[2])}
