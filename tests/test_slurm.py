"""profiles/slurm on a real one-node SLURM (scripts/slurm/cluster.sh: Debian's slurm-wlm with munge;
with accounting also slurmdbd on MariaDB), through a copy of the profile with its placeholders
filled (tests/slurm.py). Without accounting `sacct` cannot answer, so those runs name
`--slurm-status-command squeue` as the cluster guide says; the start check refuses a run that
does not. The jobs of SLURM's own tests are small: one-job targets, the small simulation.

A tier of their own (`make test-slurm`), serial: each SLURM job starts Snakemake twice and is seen
to end only at the plugin's next status check, and they share the one node. The small simulation's
local run (`sim_run`) is the one `make test-e2e` builds where both share $AURA_TEST_RUNS (CI)."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import slurm
from tests.workflow import scratch_copy, sigint_as_in_a_terminal, snakemake, snakemake_exe, suite_config

pytestmark = [pytest.mark.slurm, pytest.mark.serial]

SEEDS = "results/seeds/seeds.jsonl"


@pytest.fixture(scope="module")
def one_node():
    """The one-node SLURM, in whichever mode a test asks for; stopped at the end unless it ran before.
    Its slurm.conf is at the default path: the suite's no-controller SLURM_CONF (conftest) is lifted."""
    with pytest.MonkeyPatch.context() as env:
        if Path(os.environ.get("SLURM_CONF", "/")).resolve() == slurm.NO_CONTROLLER:  # the Makefile's or conftest's
            env.delenv("SLURM_CONF")
        slurm.require()
        before = slurm.running()
        yield slurm.start
        if before == "none":
            slurm.stop()
        else:
            slurm.start(before == "accounting")


@pytest.fixture
def plain(one_node):
    one_node(accounting=False)


@pytest.fixture
def accounting(one_node):
    one_node(accounting=True)


def _model_rules() -> set[str]:
    from aura_eval import stage_registry

    return set(stage_registry.registry())


def _run_until_submitted(work: Path, profile: Path, log: Path, target: str = SEEDS) -> tuple[subprocess.Popen, str]:
    """Snakemake on `target` in the background; (the process, the SLURM job id of its first submission)."""
    with log.open("w") as out:
        proc = subprocess.Popen([snakemake_exe(), "--cores", "2", target, "--profile", str(profile),
                                 "--configfile", str(suite_config(work, "sim_small.yaml"))],
                                cwd=work, stdout=out, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=sigint_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = slurm.SUBMITTED.search(log.read_text())
        if found:
            return proc, found.group(1)
        assert proc.poll() is None, f"Snakemake ended before submitting:\n{log.read_text()[-3000:]}"
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"no submission within 60 s:\n{log.read_text()[-3000:]}")


def _blocker() -> str:
    """A SLURM job holding every CPU of the node, so the next one waits PENDING until it is cancelled."""
    cpus = re.search(r"CPUTot=(\d+)", subprocess.run(["scontrol", "show", "node"], capture_output=True,
                                                       text=True, check=True).stdout).group(1)
    return subprocess.run(["sbatch", "--parsable", "-p", slurm.PARTITION, "-c", cpus, "--mem", "100",
                           "-J", "aura-test-blocker", "-o", "/dev/null", "--wrap", "sleep 600"],
                          capture_output=True, text=True, check=True).stdout.strip().split(";")[0]


def _scancel(*job_ids: str) -> None:
    subprocess.run(["scancel", *job_ids], check=True)


def _cancel_while_pending(work: Path, profile: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """Snakemake started on SEEDS behind a blocker job, its job cancelled with scancel while still
    PENDING (so it never ran), the blocker cancelled after: (the process, the cancelled job's id)."""
    blocker = _blocker()
    try:
        proc, job_id = _run_until_submitted(work, profile, log)
        _scancel(job_id)
    finally:
        _scancel(blocker)
    return proc, job_id


def test_the_start_check_stops_a_run_whose_status_command_cannot_answer(plain, tmp_path):
    """No accounting, the plugin's default status command (sacct): one line at start, no submission."""
    work = scratch_copy(tmp_path)
    profile = slurm.profile(work, accounting=False, status_command=None)
    started = time.monotonic()
    run = snakemake(work, SEEDS, "--profile", str(profile), "--configfile",
                    str(suite_config(work, "sim_small.yaml")), check=False)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and time.monotonic() - started < 60
    (line,) = [line for line in text.splitlines() if line.startswith("SLURM: `sacct` cannot report job states")]
    assert "accounting storage is disabled" in line
    assert "--slurm-status-command squeue" in line and "MinJobAge" in line and "300 s" in line
    assert not slurm.SUBMITTED.search(text) and not (work / SEEDS).exists()


def test_a_job_failing_inside_slurm_ends_the_run_with_its_slurm_log_shown(plain, tmp_path):
    work = scratch_copy(tmp_path)
    raw = next((work / "data/raw/rjudge").glob("*/harmful.json"))
    raw.write_text('{"not": "a list"')  # select_seeds fails on it inside the job
    run = snakemake(work, SEEDS, "--profile", str(slurm.profile(work, accounting=False)), "--configfile",
                    str(suite_config(work, "sim_small.yaml")), check=False)
    text = run.stdout + run.stderr
    job_id = slurm.SUBMITTED.search(text).group(1)
    assert run.returncode != 0 and f"SLURM-job '{job_id}' failed, SLURM status is: 'FAILED'" in text
    (log,) = (work / ".snakemake/slurm_logs/rule_select_seeds").glob(f"{job_id}.log")
    assert f"Logfile {log}:" in text  # show-failed-logs prints it
    assert "Error in rule select_seeds" in log.read_text()
    assert "invalid JSON" in (work / "logs/select_seeds.log").read_text()


def test_a_job_cancelled_with_scancel_fails_the_run_and_a_plain_rerun_completes(plain, tmp_path):
    work = scratch_copy(tmp_path)
    profile = slurm.profile(work, accounting=False)
    proc, job_id = _cancel_while_pending(work, profile, tmp_path / "run.log")
    try:
        proc.wait(timeout=120)
    finally:
        proc.kill()
    text = (tmp_path / "run.log").read_text()
    assert proc.returncode != 0 and f"SLURM-job '{job_id}' failed, SLURM status is: 'CANCELLED'" in text
    assert not (work / SEEDS).exists()
    snakemake(work, SEEDS, "--profile", str(profile), "--configfile", str(suite_config(work, "sim_small.yaml")))
    assert (work / SEEDS).stat().st_size > 0


def test_the_small_simulation_through_slurm_grouped_equals_the_local_run(plain, sim_run, tmp_path):
    """Every model job on this host, every other job a SLURM job (the tables and figures in groups),
    and every stable output byte-identical to the local run of the same config."""
    from aura_eval.artefact_registry import FIGURES, TABLES
    from aura_eval.tools.digest import stable_digests

    local, _ = sim_run
    work = scratch_copy(tmp_path)
    run = snakemake(work, "--profile", str(slurm.profile(work, accounting=False)), "--configfile",
                    str(suite_config(work, "sim_small.yaml")))
    text = run.stdout + run.stderr
    host, alone, grouped = slurm.where_jobs_ran(text)
    models, planned = _model_rules(), {*host, *alone, *grouped}
    assert set(host) == (planned & models) | {"all"} and len(host) > 5
    assert set(grouped) == {name for name in [*TABLES, *FIGURES] if name in grouped} and grouped
    assert {"audit_site", "report", "select_seeds", "analysis_frame"} <= set(alone)
    submissions = slurm.SUBMITTED.findall(text)
    groups = len(re.findall(r"^\S.*Group job artefacts", text, flags=re.M))
    assert len(submissions) == sum(alone.values()) + groups and groups < sum(grouped.values())
    logs = list((work / ".snakemake/slurm_logs").rglob("*.log"))  # slurm-keep-successful-logs
    assert len(logs) == len(submissions)
    mine, theirs = stable_digests(work), stable_digests(local)
    assert mine.keys() == theirs.keys() and len(mine) > 100
    assert [path for path in mine if mine[path] != theirs[path]] == []


CANCEL_DEADLINE_S = 30
CTRL_C_END_S = 60  # Snakemake's end after Ctrl-C: within seconds quiet; a margin for a loaded machine


def test_with_accounting_a_cancelled_job_is_not_seen_and_ctrl_c_then_a_rerun_recover(accounting, tmp_path):
    """sacct reports `CANCELLED by <uid>`, which this plugin version does not take for a failure:
    the run keeps waiting. What the cluster guide says to do: Ctrl-C, then a plain rerun."""
    work = scratch_copy(tmp_path)
    profile = slurm.profile(work, accounting=True, status_command=None)
    proc, job_id = _cancel_while_pending(work, profile, tmp_path / "run.log")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=CANCEL_DEADLINE_S)  # still waiting for the cancelled job
        state = subprocess.run(["sacct", "-X", "-n", "--parsable2", "-o", "State", "-j", job_id],
                               capture_output=True, text=True).stdout.strip()
        assert state.startswith("CANCELLED by ")
        proc.send_signal(signal.SIGINT)
        # Snakemake cancels its jobs and ends within seconds (measurements, row 53). The 60 s this
        # waited once failed only where the test runner had been started in a script's background,
        # which made Snakemake ignore SIGINT; its Popen now gives the child SIGINT's default.
        proc.wait(timeout=CTRL_C_END_S)
    finally:
        proc.kill()
    assert proc.returncode != 0 and not (work / SEEDS).exists()
    snakemake(work, SEEDS, "--profile", str(profile), "--configfile", str(suite_config(work, "sim_small.yaml")))
    assert (work / SEEDS).stat().st_size > 0


def test_the_cluster_guide_s_site_setup_and_run_command_run_on_the_one_node_slurm(accounting, tmp_path):
    """The paper's path on a cluster (docs/cluster.md, issue 41), not as a dry run: the guide's
    `site_setup` with this cluster's partition and account (and the cache in the test's folder, not
    /var/tmp), then the guide's run command as written, on a three-job target of config/paper.yaml
    with every entry pointed at its provider's emulator: two jobs go to SLURM under the site's
    account and, with slurmdbd, the plugin's default status command (sacct) sees them end; the
    tagger's calls run on this host and reach the Anthropic emulator."""
    import shlex

    import yaml

    from tests.emulators import EMULATORS
    from tests.test_paper_path import PAPER, path_commands
    from tests.test_provider_dialects import EMULATOR_CRED, KEY_ENV, emulated_config

    commands = path_commands()
    (setup_line,) = [c for c in commands if c.startswith("python -m aura_eval.tools.site_setup")]
    (run_line,) = [c for c in commands if c.startswith("snakemake --profile profiles/site")]
    setup = shlex.split(setup_line)
    setup[setup.index("--partition") + 1], setup[setup.index("--account") + 1] = slurm.PARTITION, slurm.ACCOUNT
    emulators = {name: cls() for name, cls in EMULATORS.items()}
    for emulator in emulators.values():
        emulator.__enter__()
    try:
        work = scratch_copy(tmp_path)
        paper = emulated_config(yaml.safe_load(PAPER.read_text()), {n: e.api_base for n, e in emulators.items()})
        (work / "config/paper.yaml").write_text(yaml.safe_dump(paper, sort_keys=False))
        env = {**os.environ, KEY_ENV: EMULATOR_CRED}
        # `python` and `snakemake` as installed (the venv's): the commands' other words as the guide writes them
        subprocess.run([sys.executable, *setup[1:], "--cache", str(tmp_path / "local" / "responses.sqlite")],
                       cwd=work, check=True, env={**env, "PYTHONPATH": str(slurm.ROOT)}, capture_output=True)
        run = subprocess.run([snakemake_exe(), "results/prefixes/prefixes.jsonl", *shlex.split(run_line)[1:]],
                             cwd=work, env=env, capture_output=True, text=True, timeout=600)
        text = run.stdout + run.stderr
        assert run.returncode == 0, text[-4000:]
        host, alone, _ = slurm.where_jobs_ran(text)
        assert alone == {"select_seeds": 1, "truncate_prefixes": 1} and host == {"tag_steps": 1}, text[-3000:]
        jobs = slurm.SUBMITTED.findall(text)
        accounts = subprocess.run(["sacct", "-X", "-n", "--parsable2", "-o", "Account,State", "-j", ",".join(jobs)],
                                  capture_output=True, text=True, check=True).stdout.split()
        assert accounts == [f"{slurm.ACCOUNT}|COMPLETED"] * 2
        # the tagger (claude-opus-4.6) asked the Anthropic emulator once per seed step set, into the site's cache
        assert emulators["anthropic"].state.counts()["requests"] >= paper["seeds"]
        assert (tmp_path / "local" / "responses.sqlite").is_file() and not (work / "cache").exists()
        assert (work / "results/prefixes/prefixes.jsonl").stat().st_size > 0
    finally:
        for emulator in emulators.values():
            emulator.__exit__()
