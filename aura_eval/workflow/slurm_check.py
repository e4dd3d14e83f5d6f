"""The SLURM start check: before the first submission, can the status command in force see a job end?

snakemake-executor-plugin-slurm learns that a job ended only from its status command. Where that
command cannot answer (`sacct` on a cluster without slurmdbd: "Slurm accounting storage is
disabled"), the plugin logs the failure at debug level and waits forever; where `squeue` forgets
finished jobs sooner than the plugin's longest pause between checks (180 s), it waits forever too.
So the Snakefile's onstart asks once, under the slurm executor only, and stops with one line.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess

# the plugin's longest pause between two status checks; squeue must remember a finished job longer
MAX_CHECK_INTERVAL_S = 180
ADVICE = ("run with `--slurm-status-command squeue` (profile key `slurm-status-command: squeue`) on a cluster "
          f"whose MinJobAge (`scontrol show config`) is above the plugin's {MAX_CHECK_INTERVAL_S} s between status "
          "checks (SLURM's default, 300 s, is enough)")


def _effective_command(settings) -> tuple[str | None, int | None]:
    """(the status command the plugin will use, MinJobAge): the plugin's own choice, which falls back
    to sacct where squeue's MinJobAge is under 3x the first check's delay."""
    from snakemake_executor_plugin_slurm.job_status_query import get_min_job_age

    command, min_age = settings.status_command, get_min_job_age()
    initial = settings.init_seconds_before_status_checks or 40
    if command == "squeue" and (min_age is None or min_age < 3 * initial) and shutil.which("sacct"):
        command = "sacct"
    if command == "sacct" and not shutil.which("sacct"):
        command = "squeue"
    return command, min_age


def _asks(command: str) -> str | None:
    """What is wrong when `command` is asked once as the plugin asks it (for no job), or None."""
    from snakemake_executor_plugin_slurm.job_status_query import query_job_status_sacct, query_job_status_squeue

    query = (query_job_status_sacct if command == "sacct" else query_job_status_squeue)("aura-start-check")
    try:
        proc = subprocess.run(shlex.split(query), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return None


def slurm_status_problem(settings) -> str | None:
    """One line saying why the plugin would never see a job end, or None (`settings`: the SLURM
    executor's settings, `workflow.executor_settings`)."""
    command, min_age = _effective_command(settings)
    if command is None:
        return None  # no SLURM here: the plugin's own submission fails first
    failure = _asks(command)
    if failure:
        return f"SLURM: `{command}` cannot report job states ({failure}), so no job would be seen to end: {ADVICE}."
    if command == "squeue" and (min_age is None or min_age <= MAX_CHECK_INTERVAL_S):
        return (f"SLURM: `squeue` forgets a finished job after MinJobAge ({min_age} s), before the plugin's next "
                f"status check, so a job could be waited for forever: {ADVICE}.")
    return None
