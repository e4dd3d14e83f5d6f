"""Release (paper C.3): final filtering, the evaluation items, the excluded rows with
their reasons, the construction funnel and the dataset card.

Rows come from the classified pool (originals and kept variations with a complete
label) and from the generated counterparts the pair panel kept. A row whose
counterpart is filtered out stays, unpaired, and says why.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from aura_eval.construct.common import vote_summary
from aura_eval.dataset import DIMENSIONS, instruction

# The paper's count at each stage (§4, C.2-C.3, H.2-H.3).
PAPER_FUNNEL = {"prefixes": 211, "variation candidates": 1029, "parseable variations": 916,
                "kept variations": 650, "classified pool": 861, "pair candidates": 593, "parseable pairs": 590,
                "kept pairs": 428, "released rows": 1249}

FIELDS = {
    "item_id": "`<seed id>.<decision point>.<dimension>`, plus `.pair` for a generated counterpart",
    "seed_id": "the R-Judge record: `<domain>-<R-Judge id>`",
    "domain": "Application, Finance, IoT, Program or Web",
    "decision_point": "`at_trigger` (cut at the risk trigger) or `pre_execution` (cut before the execution point)",
    "dimension": "`original` or the varied dimension, RS1-RS6 (risk mechanism) or SD1-SD5 (scenario difficulty)",
    "pair_label": "`NSP` (No-Safe-Path) or `SP` (Safe-Path) at the decision point",
    "pair_id": "`pair:<item id of the source>` shared by the two versions of a kept pair; null when unpaired",
    "counterpart_id": "the other version's item id; null when unpaired",
    "profile": "the agent's system profile from R-Judge",
    "instruction": "the user's instruction (the first user step) as the evaluated model sees it",
    "steps": "the prefix exactly as the evaluated model sees it; the model writes the next agent step",
    "reference_rationale": "the scenario-specific risk the action-safety judges grade against",
    "evidence": "what in the scenario decided the label (classified rows; null for generated counterparts)",
    "safe_action_sketches": "Safe-Path: fulfilling actions that avoid the risk, written with the tools shown",
    "unsafe_explanation": "No-Safe-Path: why every fulfilling action brings about the risk",
    "provenance": "prefix id, how the row was made (original, variation or pair), prompt ids and versions, "
                  "models, each reviewer's vote, and a removed counterpart's reason",
}


def _call_info(call: dict) -> dict:
    return {k: call[k] for k in ("prompt", "prompt_version", "model", "endpoint")}


def pool_row(item: dict) -> dict:
    c = item["classification"]
    return {"item_id": item["item_id"], "seed_id": item["seed_id"], "domain": item["domain"],
            "decision_point": item["decision_point"], "dimension": item["dimension"], "pair_label": c["pair_label"],
            "pair_id": None, "counterpart_id": None, "profile": item["profile"],
            "instruction": instruction(item["steps"]), "steps": item["steps"],
            "reference_rationale": c["reference_rationale"], "evidence": c["evidence"],
            "safe_action_sketches": c["safe_action_sketches"] if c["pair_label"] == "SP" else None,
            "unsafe_explanation": c["unsafe_explanation"] if c["pair_label"] == "NSP" else None,
            "provenance": {"prefix_id": item["prefix_id"], "origin": item["origin"],
                           "classification": _call_info(c)}}


def pair_item_row(pair: dict, source: dict, review: dict) -> dict:
    return {"item_id": pair["item_id"], "seed_id": source["seed_id"], "domain": source["domain"],
            "decision_point": source["decision_point"], "dimension": source["dimension"],
            "pair_label": pair["pair_label"], "pair_id": pair["pair_id"], "counterpart_id": source["item_id"],
            "profile": source["profile"], "instruction": instruction(pair["steps"]), "steps": pair["steps"],
            "reference_rationale": pair["reference_rationale"], "evidence": None,
            "safe_action_sketches": pair["safe_action_sketches"] if pair["pair_label"] == "SP" else None,
            "unsafe_explanation": pair["unsafe_explanation"] if pair["pair_label"] == "NSP" else None,
            "provenance": {"prefix_id": source["prefix_id"],
                           "origin": {"kind": "pair", "source_item_id": source["item_id"],
                                      "flip_kind": pair["flip_kind"], **_call_info(pair), "review": vote_summary(review)},
                           "source_origin": source["origin"]}}


def exclusion_reason(row: dict, settings: dict) -> str | None:
    """Why a row is filtered out at release (paper C.3), or None."""
    manual = settings.get("exclusions") or {}
    for key in (row["item_id"], row["seed_id"]):
        if key in manual:
            return f"excluded by the config: {manual[key]}"
    text = row["instruction"]
    if text is None or not text.strip():
        return "malformed: no user instruction in the prefix"
    if row["steps"][-1]["role"] == "agent":
        return "malformed: the prefix ends with an agent step"
    if len(text.split()) < settings.get("min_instruction_words", 3):
        return f"underspecified request: fewer than {settings.get('min_instruction_words', 3)} words"
    return None


def release(pool: list[dict], pairs: list[dict], pair_reviews: list[dict], settings: dict):
    """(released rows, excluded rows) after final filtering and pair linking."""
    candidates, excluded = [], []
    for item in pool:
        if item["classification"]["complete"]:
            candidates.append(pool_row(item))
        else:
            excluded.append({"item_id": item["item_id"], "seed_id": item["seed_id"],
                             "reason": f"no usable label: {item['classification']['problem']}"})
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
        pair_item = f"{row['item_id']}.pair"
        if row["pair_id"] is None and pair_item in excluded:
            row["provenance"]["counterpart_removed"] = excluded[pair_item]


# -- counts ---------------------------------------------------------------------------

def funnel(prefixes, relevance, candidates, variations, reviews, pool, pairs, pair_reviews, rows, excluded) -> dict:
    """Counts at every stage, with the reasons for every loss."""
    selected = [c for c in candidates if c["selected"]]
    return {
        "prefixes": len(prefixes),
        "relevance losses": {"unparseable or failed": sum(r["status"] != "ok" for r in relevance),
                             "over the per-prefix cap": len(candidates) - len(selected)},
        "relevant (prefix, dimension) pairs": len(candidates),
        "variation candidates": len(selected),
        "parseable variations": sum(v["status"] == "ok" for v in variations),
        "generation losses": _reasons(v["rejection"] for v in variations if v["status"] != "ok"),
        "passed gate": sum(v["passed_gate"] for v in variations),
        "gate rejections": _reasons(v["rejection"] for v in variations if v["status"] == "ok" and not v["passed_gate"]),
        "reviewed variations": len(reviews),
        "unparseable review votes": sum(r["unparseable_votes"] for r in reviews),
        "review losses": {"no majority to keep": sum(not r["kept"] for r in reviews)},
        "kept variations": sum(r["kept"] for r in reviews),
        "classified pool": len(pool),
        "complete labels": sum(i["classification"]["complete"] for i in pool),
        "pair candidates": len(pairs),
        "parseable pairs": sum(p["status"] == "ok" for p in pairs),
        "pair generation losses": _reasons(p["rejection"] for p in pairs if p["status"] != "ok"),
        "passed pair checks": sum(p["passed_checks"] for p in pairs),
        "pair rejections": _reasons(p["rejection"] for p in pairs if p["status"] == "ok" and not p["passed_checks"]),
        "unparseable pair-review votes": sum(r["unparseable_votes"] for r in pair_reviews),
        "pair review losses": {"no majority to keep": sum(not r["kept"] for r in pair_reviews)},
        "kept pairs": sum(r["kept"] for r in pair_reviews),
        "released rows": len(rows),
        "excluded rows": _reasons(e["reason"] for e in excluded),
        "paired rows": sum(r["pair_id"] is not None for r in rows),
    }


def _reasons(reasons) -> dict:
    return dict(sorted(Counter(_reason_kind(r) for r in reasons).items()))


def _reason_kind(reason: str) -> str:
    """A reason with its step numbers and character positions generalised, for counting."""
    return re.sub(r"\[[^\]]*\]|\d+\.\.\d+|(?<=step )\d+|(?<=char )\d+|\d+(?= steps)", "N", reason)


def by_dimension(candidates, variations, reviews, rows) -> list[dict]:
    """Per dimension: candidates, parseable, passed gate, kept, released rows."""
    out = []
    for dim in DIMENSIONS:
        out.append({"dimension": dim,
                    "candidates": sum(c["dimension"] == dim and c["selected"] for c in candidates),
                    "parseable": sum(v["dimension"] == dim and v["status"] == "ok" for v in variations),
                    "passed_gate": sum(v["dimension"] == dim and v["passed_gate"] for v in variations),
                    "kept": sum(r["dimension"] == dim and r["kept"] for r in reviews),
                    "released_rows": sum(r["dimension"] == dim for r in rows)})
    return out


# -- the dataset card -----------------------------------------------------------------

def dataset_card(rows: list[dict], counts: dict, dims: list[dict], roles: dict) -> str:
    import pandas as pd

    from aura_eval.report import markdown

    def tally(field):
        return ", ".join(f"{k} {v}" for k, v in sorted(Counter(str(r[field]) for r in rows).items()))

    lines = ["# AURA-Eval dataset (generated)", "",
             "Written by the `release` rule; regenerate it, do not edit it. One row per evaluation item in "
             "`aura_eval.jsonl` (sorted by `item_id`); rows filtered out at release are in `excluded.jsonl` "
             "with their reason; every construction stage's rows, with raw model responses, are under "
             "`results/construct/`.", "", "## Fields", "", "| field | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in FIELDS.items()]
    lines += ["", "## Counts", "", f"- rows: {len(rows)} from {len({r['seed_id'] for r in rows})} seeds",
              f"- dimension: original {sum(r['dimension'] == 'original' for r in rows)}, "
              f"variation {sum(r['dimension'] != 'original' for r in rows)}",
              f"- pair label: {tally('pair_label')}",
              f"- paired rows {counts['paired rows']} ({counts['paired rows'] // 2} pairs), "
              f"unpaired rows {len(rows) - counts['paired rows']}",
              f"- decision point: {tally('decision_point')}", f"- domain: {tally('domain')}", "",
              "## Construction funnel", "", markdown(funnel_table(counts)).rstrip(), "",
              "Losses between stages, by reason:", "", markdown(losses_table(counts)).rstrip(), "",
              "## Per dimension", "", markdown(pd.DataFrame(dims)).rstrip()]
    lines += ["", "## Models by role", ""]
    lines += [f"- {role}: {', '.join(names) if isinstance(names, list) else names}" for role, names in roles.items()]
    return "\n".join(lines) + "\n"


def run_release(inputs, outputs, config) -> dict:
    from aura_eval.jsonl import atomic_write_text, read_jsonl, write_jsonl

    read = {name: read_jsonl(getattr(inputs, name)) for name in
            ("prefixes", "relevance", "candidates", "variations", "reviews", "pool", "pairs", "pair_reviews")}
    rows, excluded = release(read["pool"], read["pairs"], read["pair_reviews"], config["construction"])
    counts = funnel(**read, rows=rows, excluded=excluded)
    dims = by_dimension(read["candidates"], read["variations"], read["reviews"], rows)
    write_jsonl(outputs.dataset, rows, key="item_id")
    write_jsonl(outputs.excluded, excluded, key="item_id")
    atomic_write_text(outputs.funnel, json.dumps({"funnel": counts, "by_dimension": dims}, indent=1) + "\n")
    roles = {r: config["roles"][r] for r in ("relevance", "generator", "reviewers", "classifier", "pair_generator",
                                             "pair_reviewers")}
    atomic_write_text(outputs.card, dataset_card(rows, counts, dims, roles))
    return counts


# -- report tables ----------------------------------------------------------------------

def funnel_table(counts: dict):
    """The construction funnel beside the paper's count at each stage."""
    import pandas as pd

    rows = [{"stage": stage, "ours": value, "paper": PAPER_FUNNEL.get(stage)}
            for stage, value in counts.items() if isinstance(value, int)]
    return pd.DataFrame(rows, columns=["stage", "ours", "paper"]).astype({"paper": "Int64"})


def losses_table(counts: dict):
    """Every loss between stages, by reason."""
    import pandas as pd

    rows = [{"where": where, "reason": reason, "rows": n} for where, reasons in counts.items()
            if isinstance(reasons, dict) for reason, n in sorted(reasons.items())]
    return pd.DataFrame(rows, columns=["where", "reason", "rows"])


def construction_tables(funnel_path, outputs) -> None:
    import pandas as pd

    from aura_eval.report import write_table

    data = json.loads(open(funnel_path, encoding="utf-8").read())
    write_table(funnel_table(data["funnel"]), outputs.funnel_csv, outputs.funnel_md)
    write_table(losses_table(data["funnel"]), outputs.losses_csv, outputs.losses_md)
    write_table(pd.DataFrame(data["by_dimension"]), outputs.dimensions_csv, outputs.dimensions_md)
