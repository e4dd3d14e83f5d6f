"""What the construction stages share: the rewrite format, the deterministic gate,
the prefix-validity check and the review panels' rows (built from aura_eval.panel).

Rewrite format. A generator returns the new text of every user and environment step
by step number ({"step": i, "content": ...}); the candidate trajectory is assembled
from those and the original's agent steps. A generator that returns an agent step
anyway ({"step": i, "thought": ..., "action": ...}) has it assembled as written, so
the gate sees it. Asking for the editable steps only saves output tokens (a
135M-parameter model runs away when asked to copy agent steps back; see the notes),
and the gate still checks the assembled trajectory against the original.
"""

from __future__ import annotations

from aura_eval.llm.types import Result
from aura_eval.panel import answer, ballot, tally
from aura_eval.vocab import EDITABLE_ROLES, GATE, MALFORMED, PREFIX


def editable_indices(steps: list[dict]) -> list[int]:
    return [s["index"] for s in steps if s["role"] in EDITABLE_ROLES]


def rewrite_schema(steps: list[dict]) -> dict:
    """A rewrite list for these steps: one entry per editable step, in order, with its number.

    Sent as the response schema, it lets a grammar-constrained model write only the
    text; `assemble` and `gate` check every response whatever model produced it. No
    maxLength: llama.cpp turns it into nested grammar rules, and a limit sized to a long
    environment step crashed the process (SIGSEGV); a run-away ends at max_tokens instead.
    """
    entries = [{"type": "object", "properties": {"step": {"type": "integer", "enum": [s["index"]]},
                                                 "content": {"type": "string"}},
                "required": ["step", "content"], "additionalProperties": False}
               for s in steps if s["role"] in EDITABLE_ROLES]
    return {"type": "array", "prefixItems": entries, "items": False,
            "minItems": len(entries), "maxItems": len(entries)}


def narrowed(schema: dict, **arrays: list[dict]) -> dict:
    """The prompt's schema with the named array properties replaced by per-item rewrite lists."""
    properties = dict(schema["properties"])
    for name, steps in arrays.items():
        properties[name] = rewrite_schema(steps)
    return {**schema, "properties": properties}


def assemble(original: list[dict], entries) -> tuple[list[dict] | None, str | None]:
    """(candidate steps, None), or (None, why the rewrite list is malformed)."""
    if not isinstance(entries, list):
        return None, f"{MALFORMED}: the rewrite is not a list of steps"
    by_index: dict[int, dict] = {}
    for entry in entries:
        step = entry.get("step") if isinstance(entry, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            return None, f"{MALFORMED}: rewrite entry without a step number: {str(entry)[:80]}"
        if step in by_index:
            return None, f"{MALFORMED}: step {step} rewritten twice"
        if not 0 <= step < len(original):
            return None, f"{MALFORMED}: extra step {step} (the trajectory has steps 0..{len(original) - 1})"
        by_index[step] = entry
    missing = [i for i in editable_indices(original) if i not in by_index]
    if missing:
        return None, f"{MALFORMED}: missing step(s) {missing}"
    steps = []
    for step in original:
        entry = by_index.get(step["index"])
        if entry is None:
            steps.append(dict(step))
        elif step["role"] == "agent" or "thought" in entry or "action" in entry:
            steps.append({**step, "role": entry.get("role", step["role"]),
                          "thought": entry.get("thought"), "action": entry.get("action")})
        else:
            content = entry.get("content")
            if not isinstance(content, str):
                return None, f"{MALFORMED}: step {step['index']} has no text"
            steps.append({**step, "content": content})
    return steps, None


def gate(original: list[dict], candidate: list[dict]) -> str | None:
    """None when `candidate` is a legal rewrite of `original`, else the reason it is not.

    Legal: the same steps with the same roles in the same order, every agent thought
    and action character-identical, no user or environment step emptied, and at
    least one of them changed.
    """
    if len(candidate) != len(original):
        return f"{GATE}: {len(candidate)} steps instead of {len(original)}"
    changed = False
    for old, new in zip(original, candidate):
        i = old["index"]
        if new.get("role") != old["role"]:
            return f"{GATE}: step {i} is {new.get('role')!r}, was {old['role']!r}"
        if old["role"] == "agent":
            for field in ("thought", "action"):
                if new.get(field) != old.get(field):
                    return f"{GATE}: agent {field} at step {i} changed"
            continue
        if (old.get("content") or "").strip() and not (new.get("content") or "").strip():
            return f"{GATE}: step {i} was emptied"
        changed |= new.get("content") != old.get("content")
    return None if changed else f"{GATE}: no user or environment step changed"


def prefix_valid(truncated: list[dict], full: list[dict]) -> str | None:
    """None when the truncated rewrite is exactly the start of the full rewrite."""
    if len(full) < len(truncated):
        return f"{PREFIX}: the full rewrite has {len(full)} steps, fewer than the truncated {len(truncated)}"
    for t, f in zip(truncated, full):
        if t != f:
            return f"{PREFIX}: step {t['index']} differs between the truncated and the full rewrite"
    return None


def panel_decision(votes: list[bool | None], statuses: list[str]) -> dict:
    """A strict majority of the whole panel keeps; a member who chose nothing (an unparseable,
    cut or declined answer or a failed call, each counted apart) keeps nothing."""
    t = tally(votes, statuses)
    return {"kept": t["label"] is True, "keep_votes": sum(v is True for v in votes),
            "reject_votes": sum(v is False for v in votes), **{k: n for k, n in t.items() if k.endswith("_votes")}}


def review_row(item: dict, results: list[Result], criteria: tuple[str, ...], fields: tuple[str, ...]) -> dict:
    """One reviewed row (its `fields` copied): the panel decision and every member's vote."""
    votes = review_votes(results, criteria)
    return {**{f: item[f] for f in fields}, **panel_decision([v["keep"] for v in votes], [v["status"] for v in votes]),
            "votes": votes}


def review_votes(results: list[Result], criteria: tuple[str, ...]) -> list[dict]:
    """Each reviewer's vote with its criteria and the call's provenance."""
    votes = []
    for result in results:
        parsed = answer(result)
        votes.append({"reviewer": result.request.endpoint.name, "keep": ballot(result, "keep"),
                      "criteria": {c: parsed.get(c) for c in criteria} if result.status == "ok" else None,
                      "reason": parsed.get("reason"), **result.provenance()})
    return votes


def vote_summary(review: dict) -> list[dict]:
    """Each reviewer's vote, as an item's provenance keeps it."""
    return [{"reviewer": v["reviewer"], "model": v["model"], "keep": v["keep"], "status": v["status"]}
            for v in review["votes"]]
