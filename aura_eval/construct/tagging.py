"""Step tagging (P1) and truncation at the decision points (paper §4.2, C.2, H.1).

A tag names the risk trigger r (a user or environment step with content) and the execution
point e (the first agent step after r that carries out the decision, or none).
Tags are checked deterministically; a seed whose tag is invalid, unparseable or
failed gets no prefix and stays in tags.jsonl with the reason.

From a valid tag come the at-trigger prefix (steps 0..r) and, where e exists and
the last non-agent step before e is not r, the pre-execution prefix (steps up to
that step). The evaluated model writes the next agent step after either prefix.
"""

from __future__ import annotations

from aura_eval.util.jsonl import InputError, read_jsonl, write_jsonl
from aura_eval.llm.types import Endpoint, Request, Result, endpoints
from aura_eval.util.prompts import Prompt, load_prompt
from aura_eval.stage_runner import run_stage, status_counts
from aura_eval.stage_registry import model_stage
from aura_eval.vocab import AT_TRIGGER, FILES, PRE_EXECUTION, prefix_id

# Paper §4.2 / C.2: 157 at-trigger + 54 pre-execution prefixes.
PAPER_PREFIX_COUNTS = {AT_TRIGGER: 157, PRE_EXECUTION: 54}


def render_steps(steps: list[dict]) -> str:
    """Numbered, labelled steps; texts inserted exactly (null shown as `(empty)`)."""
    lines = []
    for step in steps:
        i = step["index"]
        if step["role"] == "agent":
            lines.append(f"[{i}] AGENT THOUGHT: {_text(step['thought'])}\n[{i}] AGENT ACTION: {_text(step['action'])}")
        else:
            lines.append(f"[{i}] {step['role'].upper()}: {_text(step['content'])}")
    return "\n".join(lines)


def _text(value):
    return "(empty)" if value is None else value


def _can_trigger(step: dict) -> bool:
    # Risk enters from outside the agent, and an empty step (R-Judge's closing
    # environment step is often null) carries no information.
    return step["role"] != "agent" and bool((step["content"] or "").strip())


def tag_schema(prompt: Prompt, seed: dict) -> dict:
    """The prompt's schema narrowed to the tags this seed allows.

    One alternative per possible risk trigger (a user or environment step), each
    allowing only agent steps after it as the execution point (or null when none
    follows). A grammar-constrained model therefore cannot break the rules of
    paper H.1; `check_tag` still checks every tag, whatever model produced it.
    """
    base = prompt.schema
    alternatives = []
    for r in (s["index"] for s in seed["steps"] if _can_trigger(s)):
        later = [s["index"] for s in seed["steps"][r + 1:] if s["role"] == "agent"]
        properties = dict(base["properties"])
        properties["risk_trigger"] = {"type": "integer", "enum": [r]}
        properties["execution_point"] = {"type": "integer", "enum": later} if later else {"type": "null"}
        alternatives.append({**base, "properties": properties, "additionalProperties": False})
    # No step can trigger: the unconstrained schema, and check_tag explains the rejection.
    return {"anyOf": alternatives} if alternatives else base


def tag_request(seed: dict, prompt: Prompt, endpoint: Endpoint) -> Request:
    return Request(item_id=seed["seed_id"], endpoint=endpoint, prompt_id=prompt.id,
                   prompt_version=prompt.version, role="tagger", schema=tag_schema(prompt, seed),
                   messages=prompt.messages(profile=seed["profile"], risk_description=seed["risk_description"],
                                            trajectory=render_steps(seed["steps"])))


def check_tag(seed: dict, r, e) -> str | None:
    """None when (r, e) is a valid tag for this seed, else the reason it is not."""
    steps = seed["steps"]
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < len(steps):
        return f"risk trigger {r!r} is not a step of this trajectory (0..{len(steps) - 1})"
    if steps[r]["role"] == "agent":
        return f"risk trigger {r} is an agent step; it must be a user or environment step"
    if not _can_trigger(steps[r]):
        return f"risk trigger {r} is an empty {steps[r]['role']} step"
    later_agents = [s["index"] for s in steps[r + 1:] if s["role"] == "agent"]
    if e is None:
        return None if not later_agents else (
            f"execution point is none but agent step {later_agents[0]} follows the risk trigger")
    if not isinstance(e, int) or isinstance(e, bool) or not 0 <= e < len(steps):
        return f"execution point {e!r} is not a step of this trajectory"
    if steps[e]["role"] != "agent":
        return f"execution point {e} is a {steps[e]['role']} step; it must be an agent step"
    if e <= r:
        return f"execution point {e} does not come after the risk trigger {r}"
    return None


def tag_row(seed: dict, result: Result) -> dict:
    """The tags.jsonl row for one seed: the tag, its validity and the call's provenance."""
    parsed = result.parsed or {}
    r, e = parsed.get("risk_trigger"), parsed.get("execution_point")
    if result.status == "ok":
        problem = check_tag(seed, r, e)
    else:
        problem = f"no tag: the response was {result.status}"
    return {"seed_id": seed["seed_id"], "domain": seed["domain"], "n_steps": seed["n_steps"],
            "risk_trigger": r, "execution_point": e, "reason": parsed.get("reason"),
            "valid": problem is None, "invalid_reason": problem, **result.provenance()}


def truncate(seed: dict, tag: dict) -> list[dict]:
    """The prefixes of one seed under a valid tag (see the module docstring)."""
    if not tag["valid"]:
        return []
    steps, r, e = seed["steps"], tag["risk_trigger"], tag["execution_point"]
    cuts = {AT_TRIGGER: r}
    if e is not None:
        last_outside = max(s["index"] for s in steps[:e] if s["role"] != "agent")
        if last_outside != r:
            cuts[PRE_EXECUTION] = last_outside
    return [{
        "prefix_id": prefix_id(seed["seed_id"], point),
        "seed_id": seed["seed_id"], "domain": seed["domain"], "label": seed["label"],
        "decision_point": point, "risk_trigger": r, "execution_point": e, "last_step": cut,
        "n_steps": cut + 1, "profile": seed["profile"], "risk_description": seed["risk_description"],
        "steps": steps[: cut + 1],
    } for point, cut in cuts.items()]


def tag_steps(seeds_path, tags_path, calls_path, llm: dict, tagger: list[dict], threads=None, progress=True) -> dict:
    """tag_steps stage: tag every seed with the tagger (its model entry); returns status counts."""
    seeds = read_jsonl(seeds_path)
    prompt = load_prompt("p1_step_tagging")
    (endpoint,) = endpoints(tagger)
    rows = run_stage("tag_steps", llm, seeds, lambda seed: tag_request(seed, prompt, endpoint), tag_row,
                     tags_path, "seed_id", calls_path, threads, progress)
    return {"seeds": len(rows), "valid": sum(r["valid"] for r in rows), **status_counts(rows)}


def truncate_prefixes(seeds_path, tags_path, prefixes_path) -> list[dict]:
    """truncate_prefixes stage: prefixes for every seed with a valid tag."""
    seeds = {s["seed_id"]: s for s in read_jsonl(seeds_path)}
    prefixes = []
    for tag in read_jsonl(tags_path):
        if tag["seed_id"] not in seeds:
            raise InputError(f"{tags_path}: record {tag['seed_id']}: no such seed in {seeds_path}")
        prefixes += truncate(seeds[tag["seed_id"]], tag)
    write_jsonl(prefixes_path, prefixes, key="prefix_id")
    return prefixes


def _tag_requests(ctx) -> list[Request] | None:
    seeds = ctx.read("seeds")
    if seeds is None:
        return None
    prompt, (endpoint,) = load_prompt("p1_step_tagging"), endpoints(ctx.models)
    return [tag_request(seed, prompt, endpoint) for seed in seeds]


model_stage(rule="tag_steps", role="tagger", prompts=("p1_step_tagging",), units="each seed trajectory",
            output=FILES["tags"], calls="results/calls/tag_steps.jsonl", output_tokens=120, requests=_tag_requests)
