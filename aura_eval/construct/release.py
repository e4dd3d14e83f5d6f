"""Release (paper C.3): final filtering and pair linking; writes the evaluation items, the
excluded rows with their reasons and the construction funnel (aura_eval.construct.funnel). The
dataset card and the Croissant file follow once the action-only subset exists (`dataset_card`,
aura_eval.construct.card).

Rows come from the classified pool (originals and kept variations with a complete
label) and from the generated counterparts the pair panel kept. A row whose
counterpart is filtered out stays, unpaired, and says why.
"""

from __future__ import annotations

import json

from aura_eval.construct.common import vote_summary
from aura_eval.construct.funnel import by_dimension, funnel
from aura_eval.util.jsonl import atomic_write_text, read_jsonl, write_jsonl
from aura_eval.vocab import BY_CONFIG, MALFORMED, NO_USABLE_LABEL, NSP, SP, UNDERSPECIFIED, counterpart_item_id


def instruction(steps: list[dict]) -> str | None:
    """The user's instruction: the first user step's text."""
    return next((s["content"] for s in steps if s["role"] == "user"), None)


def _call_info(call: dict) -> dict:
    return {k: call[k] for k in ("prompt", "prompt_version", "model", "endpoint")}


def pool_row(item: dict) -> dict:
    c = item["classification"]
    return {"item_id": item["item_id"], "seed_id": item["seed_id"], "domain": item["domain"],
            "decision_point": item["decision_point"], "dimension": item["dimension"], "pair_label": c["pair_label"],
            "pair_id": None, "counterpart_id": None, "profile": item["profile"],
            "instruction": instruction(item["steps"]), "steps": item["steps"],
            "reference_rationale": c["reference_rationale"], "evidence": c["evidence"],
            "safe_action_sketches": c["safe_action_sketches"] if c["pair_label"] == SP else None,
            "unsafe_explanation": c["unsafe_explanation"] if c["pair_label"] == NSP else None,
            "provenance": {"prefix_id": item["prefix_id"], "origin": item["origin"],
                           "classification": _call_info(c)}}


def pair_item_row(pair: dict, source: dict, review: dict) -> dict:
    return {"item_id": pair["item_id"], "seed_id": source["seed_id"], "domain": source["domain"],
            "decision_point": source["decision_point"], "dimension": source["dimension"],
            "pair_label": pair["pair_label"], "pair_id": pair["pair_id"], "counterpart_id": source["item_id"],
            "profile": source["profile"], "instruction": instruction(pair["steps"]), "steps": pair["steps"],
            "reference_rationale": pair["reference_rationale"], "evidence": None,
            "safe_action_sketches": pair["safe_action_sketches"] if pair["pair_label"] == SP else None,
            "unsafe_explanation": pair["unsafe_explanation"] if pair["pair_label"] == NSP else None,
            "provenance": {"prefix_id": source["prefix_id"],
                           "origin": {"kind": "pair", "source_item_id": source["item_id"],
                                      "flip_kind": pair["flip_kind"], **_call_info(pair), "review": vote_summary(review)},
                           "source_origin": source["origin"]}}


def exclusion_reason(row: dict, settings: dict) -> str | None:
    """Why a row is filtered out at release (paper C.3), or None; a reason starts with its category
    (aura_eval.vocab.LOSS_REASONS)."""
    manual = settings.get("exclusions") or {}
    for key in (row["item_id"], row["seed_id"]):
        if key in manual:
            return f"{BY_CONFIG}: {manual[key]}"
    text = row["instruction"]
    if text is None or not text.strip():
        return f"{MALFORMED}: no user instruction in the prefix"
    if row["steps"][-1]["role"] == "agent":
        return f"{MALFORMED}: the prefix ends with an agent step"
    if len(text.split()) < settings.get("min_instruction_words", 3):
        return f"{UNDERSPECIFIED}: fewer than {settings.get('min_instruction_words', 3)} words"
    return None


def release_rows(pool: list[dict], pairs: list[dict], pair_reviews: list[dict], settings: dict):
    """(released rows, excluded rows) after final filtering and pair linking."""
    candidates, excluded = [], []
    for item in pool:
        if item["classification"]["complete"]:
            candidates.append(pool_row(item))
        else:
            excluded.append({"item_id": item["item_id"], "seed_id": item["seed_id"],
                             "reason": f"{NO_USABLE_LABEL}: {item['classification']['problem']}"})
    by_source = {i["item_id"]: i for i in pool}
    kept = {r["item_id"]: r for r in pair_reviews if r["kept"]}
    for pair in pairs:
        if pair["item_id"] in kept:
            candidates.append(pair_item_row(pair, by_source[pair["source_item_id"]], kept[pair["item_id"]]))
    rows = []
    for row in candidates:
        reason = exclusion_reason(row, settings)
        if reason:
            excluded.append({"item_id": row["item_id"], "seed_id": row["seed_id"], "reason": reason})
        else:
            rows.append(row)
    _link_pairs(rows, {e["item_id"]: e["reason"] for e in excluded})
    return sorted(rows, key=lambda r: r["item_id"]), sorted(excluded, key=lambda r: r["item_id"])


def _link_pairs(rows: list[dict], excluded: dict) -> None:
    """Pair ids on both versions of a kept pair; an orphan says why its counterpart went."""
    present = {r["item_id"]: r for r in rows}
    for row in list(rows):
        if row["pair_id"] is None:
            continue
        source_id = row["counterpart_id"]
        if source_id in present:
            present[source_id].update(pair_id=row["pair_id"], counterpart_id=row["item_id"])
        else:
            row["provenance"]["counterpart_removed"] = excluded.get(source_id, "not released")
            row.update(pair_id=None, counterpart_id=None)
    for row in rows:  # a source whose generated counterpart was filtered out
        pair_item = counterpart_item_id(row["item_id"])
        if row["pair_id"] is None and pair_item in excluded:
            row["provenance"]["counterpart_removed"] = excluded[pair_item]


def release(inputs, outputs, settings: dict) -> dict:
    """release stage: `settings` is the config's `construction`."""
    read = {name: read_jsonl(getattr(inputs, name)) for name in
            ("prefixes", "relevance", "candidates", "variations", "reviews", "pool", "pairs", "pair_reviews")}
    rows, excluded = release_rows(read["pool"], read["pairs"], read["pair_reviews"], settings)
    counts = funnel(**read, rows=rows, excluded=excluded)
    dims = by_dimension(read["candidates"], read["variations"], read["reviews"], rows)
    write_jsonl(outputs.dataset, rows, key="item_id")
    write_jsonl(outputs.excluded, excluded, key="item_id")
    atomic_write_text(outputs.funnel, json.dumps({"funnel": counts, "by_dimension": dims}, indent=1) + "\n")
    return counts
