"""Agent rollouts (paper §5.1, Table 4, J.4).

Each evaluated model continues every item with its next thought and action
(ReAct), or with an action alone (the action-only format, on a stratified subset).
The model sees its profile and the trajectory prefix (which opens with the user's
instruction) and nothing else: never the pair label, the rationale, the sketches
or the dimension. An output that cannot be split into thought and action is
recorded as unparseable and counted; one cut at max_tokens (or inside its reasoning
block) is truncated, one the provider blocked is refused. A reasoning block
(`<think>...</think>`) or the provider's separate reasoning is kept in the row's
`reasoning`, never in the thought or the action: the split reads the text without it.
"""

from __future__ import annotations

import re

from aura_eval.workflow.jobs import inspect_log_of
from aura_eval.util.jsonl import read_jsonl
from aura_eval.llm.answers import FAILED, OK, REFUSED, UNPARSEABLE, declines, split_reasoning
from aura_eval.llm.types import Endpoint, Request, endpoints
from aura_eval.util.prompts import load_prompt
from aura_eval.stage_runner import run_stage, status_counts
from aura_eval.stage_registry import model_stage
from aura_eval.vocab import ACTION_ONLY, AGENT_PROMPTS, REACT, parse_run

_THOUGHT = re.compile(r"\[?\s*agent[_ ]thought\s*\]?\s*:?", re.I)
_ACTION = re.compile(r"\[?\s*agent[_ ]action\s*\]?\s*:?", re.I)


def render_context(item: dict) -> str:
    """The prefix as the evaluated model and the judges see it. Only steps: no label,
    rationale, sketch or dimension can reach the agent through here."""
    lines = []
    for step in item["steps"]:
        if step["role"] == "agent":
            lines.append(f"[Agent_Thought]: {step['thought'] or ''}")
            lines.append(f"[Agent_Action]: {step['action'] or ''}")
        else:
            lines.append(f"[{step['role'].capitalize()}]: {step['content'] or ''}")
    return "\n".join(lines)


def split_output(text: str | None, fmt: str) -> tuple[str | None, str | None, str | None]:
    """(thought, action, problem): the parts of an agent's output, or why it cannot be split."""
    if not text or not text.strip():
        return None, None, "empty output"
    actions = list(_ACTION.finditer(text))
    if not actions:
        return None, None, "no [Agent_Action] marker"
    action = text[actions[0].end():].strip()
    if not action:
        return None, None, "empty action"
    if fmt == ACTION_ONLY:
        return None, action, None
    thought_match = _THOUGHT.search(text, 0, actions[0].start())
    if thought_match is None:
        return None, None, "no [Agent_Thought] marker before the action"
    thought = text[thought_match.end(): actions[0].start()].strip()
    if not thought:
        return None, None, "empty thought"
    return thought, action, None


def rollout_request(item: dict, endpoint: Endpoint, prompt, agent: str, fmt: str = REACT,
                    agent_entry: dict | None = None) -> Request:
    # The facts reach only the simulator (aura_sim), never a provider: see Request.facts.
    facts = {"agent": agent, "format": fmt, "group": (agent_entry or {}).get("group"),
             "vendor": (agent_entry or {}).get("vendor"), "pair_label": item["pair_label"],
             "dimension": item["dimension"]}
    return Request(item_id=item["item_id"], endpoint=endpoint, prompt_id=prompt.id,
                   prompt_version=prompt.version, role=f"agent:{agent}", schema=prompt.schema,
                   messages=prompt.messages(profile=item["profile"], context=render_context(item)), facts=facts)


def rollout_row(item: dict, result, agent: str, fmt: str) -> dict:
    """The rollout's row: its status is the call's (failed, truncated, refused, unparseable), or
    unparseable when the text does not split into thought and action. An agent's refusal stays an
    answer to be judged: a refusal in plain text without the markers, or in the provider's refusal
    field, is the action (with no thought, so no detection label); `parse_problem` says so. Only a
    provider's block with no text stays `refused`."""
    status, text = result.status, split_reasoning(result.content)[1]
    if status == FAILED:
        thought, action, problem = None, None, f"no output: {result.error}"
    elif status == REFUSED and result.refusal and result.refusal.strip():
        # An agent's refusal is its answer, judged like any other (a block with no text stays refused).
        thought, action, status = None, result.refusal.strip(), OK
        problem = "declined through the provider's refusal field: that text is the action"
    elif status == UNPARSEABLE and declines(text):  # a JSON agent declining in prose
        thought, action, status = None, text, OK
        problem = f"declined in plain text ({result.error}): the whole text is the action"
    elif status != OK:
        thought, action, problem = None, None, result.error
    elif result.parsed is not None:  # a JSON answer (output: json), already checked against the schema
        thought = result.parsed.get("thought") if fmt == REACT else None
        thought, action, problem = thought, result.parsed["action"], None
    else:
        thought, action, problem = split_output(text, fmt)
        if problem is not None and declines(text):  # "I can't help with that": a refusal, judged as the action
            thought, action = None, text
            problem = f"declined in plain text ({problem}): the whole text is the action"
        status = OK if action is not None else UNPARSEABLE
    provenance = result.provenance()
    provenance["status"] = status
    return {"item_id": item["item_id"], "agent": agent, "format": fmt, "thought": thought, "action": action,
            "reasoning": result.reasoning, "parse_problem": problem, **provenance}


def rollout(items_path, out_path, calls_path, llm: dict, run: str, output: str, model: list[dict], threads=None,
        progress=True, agent_entry: dict | None = None) -> dict:
    """rollout stage for one run (agent × format): `items_path` is the dataset, or the
    action-only subset for an action-only run; `output` the agent's answer format;
    `agent_entry` the agent's config entry (its group and vendor)."""
    agent, fmt = parse_run(run)
    (agent_endpoint,) = endpoints(model)
    prompt = load_prompt(AGENT_PROMPTS[(fmt, output)])
    rows = run_stage(f"rollout:{run}", llm, read_jsonl(items_path),
                     lambda item: rollout_request(item, agent_endpoint, prompt, agent, fmt, agent_entry),
                     lambda item, result: rollout_row(item, result, agent, fmt), out_path, "item_id", calls_path,
                     threads, progress)
    return status_counts(rows)


def _rollout_requests(ctx) -> list[Request] | None:
    agent, fmt = parse_run(ctx.job["run"])
    entry = ctx.config["agents"][agent]
    if inspect_log_of(entry, fmt):  # its rollouts come from the log: no request
        return []
    items = ctx.read("dataset" if fmt == REACT else "subset")
    if items is None:
        return None
    prompt, (endpoint,) = load_prompt(AGENT_PROMPTS[(fmt, entry.get("output", "text"))]), endpoints(ctx.models)
    return [rollout_request(item, endpoint, prompt, agent, fmt, entry) for item in items]


model_stage(rule="rollout", role="agents", prompts=tuple(AGENT_PROMPTS.values()), wildcards=("run",),
            units="each released item (a run's agent and format; action-only runs: the subset)",
            output="results/rollouts/{run}.jsonl", calls="results/calls/rollout/{run}.jsonl", output_tokens=400,
            requests=_rollout_requests)
