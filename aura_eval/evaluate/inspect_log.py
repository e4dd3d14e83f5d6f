"""The way back from inspect_ai: an agent whose config entry names an `inspect_log` (a log of the
aura_eval task, aura_eval.evaluate.inspect_task) gets its rollouts from that log, with no model
call. Each sample's output is read as the rollout job reads a response (`types.read_result`,
`rollout.rollout_row`), so the rows are those the rollout job would have written for the same
text, plus where they came from (`inspect`: the log, its eval id, the model inspect ran). The
judges, labels, tables and report then follow as for any agent.

A log that does not fit is refused, naming the file and the item: another task, the other format
(ReAct vs action-only), an item missing from the log or one the dataset does not hold, a sample
whose input is not the prompt this checkout builds for that item (another dataset version or prompt),
or several epochs. A sample that ended in an error is kept as a failed rollout, counted.
"""

from __future__ import annotations

from pathlib import Path

from aura_eval.evaluate.inspect_task import TASK_NAME, agent_request, output_result, task_format
from aura_eval.evaluate.rollout import rollout_row
from aura_eval.llm.answers import FAILED
from aura_eval.llm.types import Result
from aura_eval.stage_runner import status_counts
from aura_eval.util.jsonl import read_jsonl, write_jsonl
from aura_eval.util.prompts import load_prompt
from aura_eval.vocab import ACTION_ONLY, AGENT_PROMPTS, parse_run


class InspectLogError(ValueError):
    """An inspect log that cannot stand for an agent's rollouts (the message names the file and item)."""


def _text(message) -> tuple[str, str]:
    return message.role, message.text


def log_rollouts(log_path: str | Path, items: list[dict], agent: str, fmt: str) -> list[dict]:
    """The rollout rows of `agent` in format `fmt` from the inspect log at `log_path`, one per item."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path))
    where = f"inspect log {log_path}"
    if log.eval.task.split("/")[-1] != TASK_NAME:
        raise InspectLogError(f"{where}: task {log.eval.task!r}, not AURA-Eval's {TASK_NAME!r}")
    logged = task_format(bool(log.eval.task_args.get("action_only", False)))
    if logged != fmt:
        raise InspectLogError(f"{where}: its items are the {logged} format (-T action_only="
                              f"{str(logged == ACTION_ONLY).lower()}), but agent {agent!r} needs {fmt} here")
    output = log.eval.task_args.get("output", "text")
    samples = {}
    for sample in log.samples or []:
        if str(sample.id) in samples:
            raise InspectLogError(f"{where}: item {sample.id} appears in several epochs; run the task with "
                                  f"one epoch (the paper's single rollout per item)")
        samples[str(sample.id)] = sample
    wanted = {item["item_id"] for item in items}
    extra, missing = sorted(set(samples) - wanted), sorted(wanted - set(samples))
    if extra:
        raise InspectLogError(f"{where}: item {extra[0]} ({len(extra)} in all) is not among the {len(wanted)} "
                              f"items of this run's dataset (another dataset version?)")
    if missing:
        raise InspectLogError(f"{where}: no sample for item {missing[0]} ({len(missing)} of {len(wanted)} "
                              f"missing; a run with --limit, or cancelled?)")
    prompt, model = load_prompt(AGENT_PROMPTS[(fmt, output)]), log.eval.model
    # The log's file name (a packed run replays from its copy) and the task's format and output, not
    # all its arguments: `dataset` may be a machine's path.
    provenance = {"log": Path(log_path).name, "eval_id": log.eval.eval_id, "run_id": log.eval.run_id,
                  "task": log.eval.task, "action_only": fmt == ACTION_ONLY, "output": output}
    rows = []
    for item in items:
        sample = samples[item["item_id"]]
        request = agent_request(item, prompt, fmt, model)
        sent = [_text(m) for m in sample.input] if not isinstance(sample.input, str) else [("user", sample.input)]
        if sent != [(m["role"], m["content"]) for m in request.messages]:
            raise InspectLogError(f"{where}: item {item['item_id']}: the sample's input is not the prompt this "
                                  f"checkout builds for it (another dataset version or prompt version?)")
        if sample.error is not None:
            result = Result(request=request, status=FAILED, error=f"inspect sample error: {sample.error.message}")
        else:
            result = output_result(request, sample.output)
        row = rollout_row(item, result, agent, fmt)
        row["inspect"] = {**provenance, "model": sample.output.model or model, "sample_uuid": sample.uuid}
        rows.append(row)
    return rows


def rollout_from_log(items_path, log_path, out_path, calls_path, run: str) -> dict:
    """The rollout job of an agent given by an inspect log: its rows, and an empty call log (no call)."""
    agent, fmt = parse_run(run)
    rows = log_rollouts(log_path, read_jsonl(items_path), agent, fmt)
    write_jsonl(out_path, rows, key="item_id")
    write_jsonl(calls_path, [], key="item_id")
    return status_counts(rows)
