"""The cluster profiles (profiles/slurm, profiles/kubernetes): a dry run through each plans the
same jobs as a local run, with the profile's resources; under the SLURM executor (against stub
SLURM commands) the model jobs run on the submitting host and the others go to sbatch.

No cluster here: the SLURM plugin's dry run needs none, and its real run is driven through stub
`sbatch`/`sacct`/... scripts that record what they are asked and accept no job. The Kubernetes
plugin needs a cluster's API for a real run (it loads a kube config when it starts), so only its
dry run is tested: the profile parsed, every file mapped to its storage, the resources."""

import os
import re
import shutil

import pytest

from tests.docs_claims import MEASUREMENTS, measured_jobs
from tests.slurm import planned_submissions
from tests.workflow import ROOT, STUB_KEY_ENV, planned_jobs, scratch_copy, snakemake, suite_config

# dry runs and a small run through each profile
pytestmark = pytest.mark.suite

CONFIG = "mock.yaml"
# The jobs of .test/config/mock.yaml (4 seeds, one agent in two formats, 3 judges, 5-judge
# reliability): the same through every executor.
TOTAL_JOBS = measured_jobs()[".test/config/mock.yaml"]["total"]  # as docs/measurements.md states it
MODEL_RULES = {"tag_steps": 1, "relevance": 1, "vary": 1, "review_variations": 1, "classify": 1, "generate_pairs": 1,
               "review_pairs": 1, "rollout": 2, "judge_detection_type": 6, "judge_safety": 6, "reliability": 3}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return scratch_copy(tmp_path_factory.mktemp("cluster"))


def _resources(text: str) -> list[str]:
    return re.findall(r"^ +resources: (.*)$", text, flags=re.M)  # a group's jobs are indented further


def test_slurm_profile_dry_run_plans_every_job_with_the_profile_resources(work):
    config = str(suite_config(work, CONFIG))
    local = planned_jobs(work, "--configfile", config)
    jobs = planned_jobs(work, "--profile", "profiles/slurm", "--configfile", config)
    assert jobs == local and sum(jobs.values()) == TOTAL_JOBS
    assert {rule: jobs[rule] for rule in MODEL_RULES} == MODEL_RULES
    dry = snakemake(work, "-n", "--profile", "profiles/slurm", "--configfile", config).stdout
    resources = _resources(dry)
    assert len(resources) == TOTAL_JOBS
    for line in resources:
        assert {"mem_mb=4000", "runtime=30", "slurm_partition=<your-partition>", "slurm_account=<your-account>",
                "cpus_per_task=1"} <= set(line.split(", "))


@pytest.mark.e2e  # 9-12 s: the slower tier keeps `make test` within 5 minutes
def test_kubernetes_profile_dry_run_maps_every_file_to_storage(work, tmp_path):
    pytest.importorskip("snakemake_storage_plugin_fs", reason="the Kubernetes profile's storage plugin "
                        "(snakemake-storage-plugin-fs, requirements.txt) is not installed")
    config = str(suite_config(work, CONFIG))
    store = tmp_path / "store"  # stands in for the profile's volume (/mnt/aura-eval)
    for part in ("data", "prompts", "paper"):  # the workflow's own inputs, uploaded once (README)
        shutil.copytree(work / part, store / "storage" / part)
    args = ("--profile", "profiles/kubernetes", "--default-storage-prefix", str(store / "storage"),
            "--configfile", config)
    jobs = planned_jobs(work, *args)
    assert jobs == planned_jobs(work, "--configfile", config) and sum(jobs.values()) == TOTAL_JOBS
    dry = snakemake(work, "-n", *args).stdout
    resources = _resources(dry)
    assert len(resources) == TOTAL_JOBS and all({"mem_mb=4000", "runtime=30"} <= set(r.split(", "))
                                                for r in resources)
    outputs = re.findall(r"^ +output: (.*)$", dry, flags=re.M)
    assert len(outputs) == TOTAL_JOBS - 1  # `all` writes nothing
    assert all(f.endswith("(send to storage)") and f.startswith(str(store)) for line in outputs
               for f in line.split(", "))


STUB_COMMAND = """#!/bin/sh
echo "{name} $*" >> "$FAKE_SLURM_LOG"
{body}
"""


@pytest.mark.e2e  # 9-12 s: the slower tier keeps `make test` within 5 minutes
def test_under_slurm_model_jobs_run_here_and_the_others_go_to_sbatch(work, tmp_path, monkeypatch):
    """tag_steps (a model job) runs on this host; truncate_prefixes, which needs its tags, is
    submitted with the profile's resources and refused by the stub cluster."""
    bin_dir, log = tmp_path / "bin", tmp_path / "slurm.log"
    bin_dir.mkdir()
    for name in ("sbatch", "sacct", "squeue", "sinfo", "scontrol", "sacctmgr", "sshare"):
        body = ('echo "sbatch: error: this stub cluster accepts no jobs" >&2\nexit 1' if name == "sbatch"
                else "exit 0")
        (bin_dir / name).write_text(STUB_COMMAND.format(name=name, body=body))
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_LOG", str(log))
    monkeypatch.setenv(STUB_KEY_ENV, "stub-credential-for-the-onstart-check")
    config = str(suite_config(work, CONFIG))
    snakemake(work, "results/seeds/seeds.jsonl", "--configfile", config)  # a local run first
    run = snakemake(work, "results/prefixes/prefixes.jsonl", "--profile", "profiles/slurm", "--keep-going",
                    "--slurm-init-seconds-before-status-checks", "1", "--configfile", config, check=False)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "sbatch: error: this stub cluster accepts no jobs" in text
    assert "localrule tag_steps:" in text and (work / "results/prefixes/tags.jsonl").exists()
    assert not (work / "results/prefixes/prefixes.jsonl").exists()
    (submitted,) = [line for line in log.read_text().splitlines() if line.startswith("sbatch ")]
    assert "--comment rule_truncate_prefixes" in submitted
    for flag in ("-p <your-partition>", "-A <your-account>", "-t 30", "--mem 4000", "--cpus-per-task=1"):
        assert flag in submitted


def test_slurm_groups_the_paper_scale_tables_and_figures_into_few_submissions(tmp_path):
    """config/simulate.yaml through profiles/slurm: the submissions with and without the groups as the
    measurements page states them (at most 40 with them), and only tables and figures grouped."""
    from aura_eval import stage_registry
    from aura_eval.artefact_registry import FIGURES, TABLES

    section = MEASUREMENTS.read_text(encoding="utf-8").split("\n## SLURM", 1)[1]
    grouped, ungrouped = map(int, re.search(r"(\d+) with the groups.*?(\d+) without", section).groups())
    work = scratch_copy(tmp_path)
    planned = planned_submissions(work, ROOT / "profiles/slurm", "config/simulate.yaml")
    assert (planned["grouped"], planned["ungrouped"]) == (grouped, ungrouped) and grouped <= 40
    assert planned["grouped_rules"] <= {*TABLES, *FIGURES} and planned["grouped_rules"]
    assert not planned["grouped_rules"] & set(stage_registry.registry())
