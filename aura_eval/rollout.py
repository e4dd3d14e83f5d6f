"""Agent rollouts (paper §5.1, Table 4, J.4).

Each evaluated model continues every item with its next thought and action
(ReAct), or with an action alone (the action-only format, on a stratified subset).
The model sees its profile and the trajectory prefix (which opens with the user's
instruction) and nothing else: never the pair label, the rationale, the sketches
or the dimension. An output that cannot be split into thought and action is
recorded as unparseable and counted.
"""

from __future__ import annotations

import re
import sys

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the model module loads litellm (seconds): only where calls are made
    from aura_eval.llm import Endpoint, Request

REACT, ACTION_ONLY = "react", "action_only"
# (format, output) -> prompt; `output: json` suits models whose decoding follows a schema.
PROMPTS = {(REACT, "text"): "agent_react", (ACTION_ONLY, "text"): "agent_action_only",
           (REACT, "json"): "agent_react_json", (ACTION_ONLY, "json"): "agent_action_only_json"}
RUN_SEPARATOR = "."
_THOUGHT = re.compile(r"\[?\s*agent[_ ]thought\s*\]?\s*:?", re.I)
_ACTION = re.compile(r"\[?\s*agent[_ ]action\s*\]?\s*:?", re.I)


def run_name(agent: str, fmt: str) -> str:
    """File name of one agent × prompt format: `gpt-5.4` or `gpt-5.4.action_only`."""
    return agent if fmt == REACT else f"{agent}{RUN_SEPARATOR}{ACTION_ONLY}"


def parse_run(run: str) -> tuple[str, str]:
    suffix = RUN_SEPARATOR + ACTION_ONLY
    return (run[: -len(suffix)], ACTION_ONLY) if run.endswith(suffix) else (run, REACT)


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


def rollout_requests(items, endpoint: Endpoint, prompt, agent: str) -> list[Request]:
    from aura_eval.llm import Request

    return [Request(item_id=item["item_id"], endpoint=endpoint, prompt_id=prompt.id,
                    prompt_version=prompt.version, role=f"agent:{agent}", schema=prompt.schema,
                    messages=prompt.messages(profile=item["profile"], context=render_context(item)))
            for item in items]


def rollout_row(item: dict, result, agent: str, fmt: str) -> dict:
    if result.status == "failed":
        thought, action, problem = None, None, f"no output: {result.error}"
    elif result.status == "unparseable":
        thought, action, problem = None, None, result.error
    elif result.parsed is not None:  # a JSON answer (output: json), already checked against the schema
        thought = result.parsed.get("thought") if fmt == REACT else None
        thought, action, problem = thought, result.parsed["action"], None
    else:
        thought, action, problem = split_output(result.content, fmt)
    provenance = result.provenance()
    provenance["status"] = "ok" if problem is None else ("failed" if result.status == "failed" else "unparseable")
    return {"item_id": item["item_id"], "agent": agent, "format": fmt, "thought": thought, "action": action,
            "parse_problem": problem, **provenance}


def run(items_path, subset_path, out_path, calls_path, config: dict, run: str, progress=True) -> dict:
    """rollout stage for one agent × format."""
    from aura_eval.jsonl import read_jsonl, write_jsonl
    from aura_eval.llm import ModelClient, endpoint
    from aura_eval.prompts import load_prompt

    agent, fmt = parse_run(run)
    items = read_jsonl(subset_path if fmt == ACTION_ONLY else items_path)
    spec = config["agents"][agent]
    agent_endpoint = endpoint(config, spec["model"])
    prompt = load_prompt(PROMPTS[(fmt, spec.get("output", "text"))])
    client = ModelClient(config["llm"], stage=f"rollout:{run}", progress=progress)
    results = client.run(rollout_requests(items, agent_endpoint, prompt, agent))
    rows = [rollout_row(item, result, agent, fmt) for item, result in zip(items, results)]
    write_jsonl(out_path, rows, key="item_id")
    client.write_call_log(calls_path)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "unparseable", "failed")}
    print(f"rollout {run}: {len(rows)} items {counts}, calls made {client.calls_made}", file=sys.stderr)
    return counts
