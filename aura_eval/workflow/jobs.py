"""The job plan: which runs, judges, calibration agents and vendor-swap agents a config asks for,
and so which jobs each model stage has. The rules (rules/common.smk) and the forecast read these
same functions, so the forecast counts exactly the jobs Snakemake will run.
"""

from __future__ import annotations

from aura_eval.workflow.config import as_list, vendor_swap_agents
from aura_eval.vocab import ACTION_ONLY, REACT, RELIABILITY_KINDS, parse_run, run_name


def react_runs(config: dict) -> list[str]:
    return [run_name(agent, REACT) for agent in config["agents"]]


def runs(config: dict) -> list[str]:
    """Every evaluated run: each agent in ReAct format, the action-only agents again."""
    return react_runs(config) + [run_name(a, ACTION_ONLY) for a in config["action_only"]["agents"]]


def judges(config: dict) -> list[str]:
    return as_list(config["roles"]["judges"])


def calibration_agents(config: dict) -> list[str]:
    """The evaluated models the calibration runs and the human audit use (paper F.1: four),
    so that adding an agent changes neither the calibration sample nor the audit."""
    return list(config["reliability"]["calibration_agents"])


def reliability_agents(config: dict, kind: str) -> list[str]:
    """five_judge and repeats: the calibration agents (when on); vendor_swap: see above."""
    rel = config["reliability"]
    if kind == "vendor_swap":
        return vendor_swap_agents(config)
    on = rel["five_judge_panel"] if kind == "five_judge" else rel["repeats"] > 0
    return calibration_agents(config) if on else []


def stage_jobs(config: dict, wildcards: tuple[str, ...]) -> list[dict]:
    """The wildcards of every job of a model stage with these wildcards ([{}]: one job)."""
    if not wildcards:
        return [{}]
    if wildcards == ("run",):
        return [{"run": run} for run in runs(config)]
    if wildcards == ("run", "judge"):
        return [{"run": run, "judge": judge} for run in runs(config) for judge in judges(config)]
    if wildcards == ("kind", "agent"):
        return [{"kind": kind, "agent": agent} for kind in RELIABILITY_KINDS
                for agent in reliability_agents(config, kind)]
    raise ValueError(f"no job plan for a model stage with wildcards {wildcards}")


def inspect_log_of(agent_entry: dict, fmt: str) -> str | None:
    """The inspect log an agent's run in format `fmt` is read from (`inspect_log`; its action-only
    run: `inspect_log_action_only`), or None: a model answers (aura_eval.evaluate.inspect_log)."""
    return agent_entry.get("inspect_log_action_only" if fmt == ACTION_ONLY else "inspect_log")


def run_inspect_log(config: dict, run: str) -> str | None:
    agent, fmt = parse_run(run)
    return inspect_log_of(config["agents"][agent], fmt)


def job_models(config: dict, role: str, job: dict) -> list[str]:
    """The names of the models one job calls, in panel order: its role's (a judge job: its judge;
    a rollout: its agent's model; a reliability run: its panel, then the replacement judge)."""
    if "judge" in job:
        return [job["judge"]]
    if "run" in job:  # an agent given by an inspect log calls no model (aura_eval.evaluate.inspect_log)
        model = config["agents"][parse_run(job["run"])[0]].get("model")
        return [model] if model else []
    if "kind" in job:
        roles = config["roles"]
        if job["kind"] == "five_judge":
            return as_list(roles["validation_judges"])
        return judges(config) + ([roles["replacement_judge"]] if job["kind"] == "vendor_swap" else [])
    return as_list(config["roles"][role])
