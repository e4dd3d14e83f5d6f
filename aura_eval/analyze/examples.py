"""The report's worked examples, each chosen by a fixed rule so a rerun shows the same one:
Table 28 (a retained and a rejected pair candidate of the P9 review, with every reviewer's
vote, criteria and reason) and Table 34 (a case study: one scenario's original and its
variation along one dimension, with every model's thought, action and labels).

Each builder returns (frame, Markdown): the CSV holds the rows, the Markdown the example as a
reader sees it. Text from the data is escaped, so markup in a trajectory shows as written.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from aura_eval.artefact_registry import builder
from aura_eval.construct.pairing import PAIR_CRITERIA
from aura_eval.util import cells
from aura_eval.util.jsonl import read_jsonl
from aura_eval.vocab import NSP, ORIGINAL, hash_rank, item_id

TABLE28_SALT = "table28"
CASE_STUDY_SALT = "case_study"


# -- Markdown helpers ----------------------------------------------------------------------------

_MARKUP = re.compile(r"([\\`*_{}\[\]<>#+|$~^@&])")


def cell(value) -> str:
    """A value as literal text in one Markdown table cell: whitespace collapsed, markup escaped."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    return _MARKUP.sub(r"\\\1", " ".join(str(value).split()))


def grid(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def changed_span(before: str, after: str, context: int = 60, most: int = 400) -> tuple[str, str]:
    """The part of two texts that differs, with `context` characters around it (… where cut)."""
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1

    def show(text):
        lo, hi = max(0, start - context), min(len(text), len(text) - end + context)
        middle = text[lo:hi]
        if len(middle) > most:
            middle = middle[:most] + "…"
        return ("…" if lo > 0 else "") + middle + ("…" if hi < len(text) else "")
    return show(before), show(after)


def _step_text(step: dict) -> str:
    if "content" in step:
        return step["content"]
    return f"{step.get('thought', '')}\n{step.get('action', '')}"


def edited_steps(original: list[dict], rewrite: list[dict]) -> list[dict]:
    """The steps a rewrite changed: index, role, and the changed span before and after."""
    before = {s["index"]: s for s in original}
    out = []
    for step in rewrite:
        old = before.get(step["index"])
        old_text, new_text = ("" if old is None else _step_text(old)), _step_text(step)
        if old_text != new_text:
            shown_before, shown_after = changed_span(old_text, new_text)
            out.append({"step": step["index"], "role": step["role"], "original": shown_before,
                        "rewrite": shown_after})
    return out


# -- Table 28: the P9 review's examples ------------------------------------------------------------

def _first(rows: list[dict], salt: str) -> dict | None:
    return min(rows, key=lambda r: hash_rank(r["item_id"], salt), default=None)


def pick_review_examples(reviews: list[dict]) -> dict[str, dict | None]:
    """"retained" and "rejected": of the reviewed candidates with that outcome, the first in the
    hash order of their ids, among those whose every vote parsed if there are any."""
    picks = {}
    for name, kept in (("retained", True), ("rejected", False)):
        outcome = [r for r in reviews if bool(r["kept"]) == kept]
        parsed = [r for r in outcome if all(v["status"] == "ok" for v in r["votes"])]
        picks[name] = _first(parsed or outcome, TABLE28_SALT)
    return picks


def review_counts(pairs: list[dict], reviews: list[dict]) -> dict[str, int]:
    return {"pair_candidates": len(pairs), "parseable": sum(p["status"] == "ok" for p in pairs),
            "reviewed": len(reviews), "retained": sum(bool(r["kept"]) for r in reviews),
            "rejected": sum(not r["kept"] for r in reviews)}


TABLE28_COLUMNS = ["example", "item_id", "source_item_id", "dimension", "source_label", "pair_label", "flip_kind",
                   "keep_votes", "reject_votes", "reviewer", "model", "status", "keep", *PAIR_CRITERIA, "reason",
                   "reviewed", "retained", "rejected"]


def _yes_no(value) -> str | None:
    return None if value is None else ("yes" if value else "no")


def pair_review_examples(pool: list[dict], pairs: list[dict], reviews: list[dict]) -> tuple[pd.DataFrame, str]:
    """Table 28: one row per reviewer's vote on each chosen candidate (with the review counts),
    and the Markdown: the counts, then each candidate's edit and votes."""
    counts = review_counts(pairs, reviews)
    pair_by_id = {p["item_id"]: p for p in pairs}
    pool_by_id = {i["item_id"]: i for i in pool}
    rows = []
    text = [f"Of {counts['pair_candidates']} generated pair candidates, {counts['parseable']} parsed and "
            f"{counts['reviewed']} passed the pair checks and went to the P9 review: {counts['retained']} "
            f"retained (a strict majority of the reviewers voted keep) and {counts['rejected']} rejected. "
            "Shown: the first retained and the first rejected candidate in a fixed hash order of their ids "
            "(among those whose every vote parsed, where any).", ""]
    for example, review in pick_review_examples(reviews).items():
        if review is None:
            text += [f"**{example.capitalize()}:** none in this run.", ""]
            continue
        pair = pair_by_id.get(review["item_id"], {})
        for vote in review["votes"]:
            criteria = vote.get("criteria") or {}
            rows.append({"example": example, "item_id": review["item_id"], "source_item_id": review["source_item_id"],
                         "dimension": pair.get("dimension"), "source_label": pair.get("source_label"),
                         "pair_label": pair.get("pair_label"), "flip_kind": pair.get("flip_kind"),
                         "keep_votes": review["keep_votes"], "reject_votes": review["reject_votes"],
                         "reviewer": vote["reviewer"], "model": vote.get("model"), "status": vote["status"],
                         "keep": vote["keep"], **{c: criteria.get(c) for c in PAIR_CRITERIA},
                         "reason": vote.get("reason"), **{k: counts[k] for k in ("reviewed", "retained", "rejected")}})
        text += [f"**{example.capitalize()}: {cells.item_link(review['item_id'])}** "
                 f"(dimension {pair.get('dimension')}, "
                 f"{pair.get('source_label')} → {pair.get('pair_label')}, flip kind {pair.get('flip_kind')}; "
                 f"{review['keep_votes']} keep, {review['reject_votes']} reject)", ""]
        source = pool_by_id.get(review["source_item_id"])
        edits = edited_steps(source["steps"], pair["steps"]) if source and pair.get("steps") else []
        if edits:
            text += ["The edit (the changed part of each rewritten step):", "",
                     grid(["step", "role", "original", "rewrite"],
                          [[e["step"], e["role"], e["original"], e["rewrite"]] for e in edits]), ""]
        text += ["Votes:", "", grid(["reviewer", "keep", *PAIR_CRITERIA, "reason"],
                                    [[v["reviewer"], _yes_no(v["keep"]),
                                      *(_yes_no((v.get("criteria") or {}).get(c)) for c in PAIR_CRITERIA),
                                      v.get("reason") if v["status"] == "ok" else f"({v['status']})"]
                                     for v in review["votes"]]), ""]
    return pd.DataFrame(rows, columns=TABLE28_COLUMNS), "\n".join(text)


# -- Table 34: the case study -------------------------------------------------------------------------

def _judged(label: dict | None) -> bool:
    return bool(label) and label["rollout_status"] == "ok" and label["action_safety"]["label"] is not None


def case_study_prefix(items: dict, labels_by_run: dict[str, dict], dimension: str,
                      prefix: str | None = None) -> tuple[str | None, str]:
    """(prefix id, the rule that chose it). The candidates are the prefixes with an NSP original
    `<prefix>.original` and an NSP variation `<prefix>.<dimension>`. A pinned `prefix` must be
    one; otherwise the first, in the hash order of prefix ids, whose two items every run rolled
    out and judged safe or unsafe; failing that, the first candidate."""
    def nsp(iid):
        return iid in items and items[iid]["pair_label"] == NSP

    candidates = sorted({i["provenance"]["prefix_id"] for i in items.values()
                         if nsp(item_id(i["provenance"]["prefix_id"], ORIGINAL))
                         and nsp(item_id(i["provenance"]["prefix_id"], dimension))},
                        key=lambda p: hash_rank(p, CASE_STUDY_SALT))
    if prefix is not None:
        if prefix not in candidates:
            raise ValueError(f"report.case_study.prefix {prefix!r} has no NSP original and NSP {dimension} "
                             "variation in the dataset")
        return prefix, "the prefix report.case_study.prefix names"
    for p in candidates:
        if all(_judged(labels.get(item_id(p, v))) for labels in labels_by_run.values() for v in (ORIGINAL, dimension)):
            return p, (f"the first prefix, in a fixed hash order of prefix ids, with an NSP original and an NSP "
                       f"{dimension} variation that every model's run judged")
    if candidates:
        return candidates[0], (f"no prefix had both items judged for every model, so the first prefix, in a fixed "
                               f"hash order, with an NSP original and an NSP {dimension} variation")
    return None, f"no prefix in this run has an NSP original and an NSP {dimension} variation"


TABLE34_COLUMNS = ["run", "version", "item_id", "pair_label", "rollout_status", "thought", "action", "detection",
                   "action_type", "action_safety"]


def case_study(items: dict, rollouts_by_run: dict[str, dict], labels_by_run: dict[str, dict],
               dimension: str, prefix: str | None = None) -> tuple[pd.DataFrame, str]:
    """Table 34: for the chosen prefix, one row per run and version (the original, then the
    variation) with the run's thought, action and final labels."""
    chosen, rule = case_study_prefix(items, labels_by_run, dimension, prefix)
    if chosen is None:
        return pd.DataFrame(columns=TABLE34_COLUMNS), f"*{rule[0].upper()}{rule[1:]}.*\n"
    versions = [(ORIGINAL, item_id(chosen, ORIGINAL)), (dimension, item_id(chosen, dimension))]
    rows = []
    for run, labels in labels_by_run.items():
        for version, iid in versions:
            label, rollout = labels.get(iid), rollouts_by_run.get(run, {}).get(iid, {})
            rows.append({"run": run, "version": version, "item_id": iid, "pair_label": items[iid]["pair_label"],
                         "rollout_status": label["rollout_status"] if label else None,
                         "thought": rollout.get("thought"), "action": rollout.get("action"),
                         **{axis: label[axis]["label"] if label else None
                            for axis in ("detection", "action_type", "action_safety")}})
    df = pd.DataFrame(rows, columns=TABLE34_COLUMNS)
    original, variation = items[versions[0][1]], items[versions[1][1]]
    change = (variation.get("provenance", {}).get("origin") or {}).get("change")
    text = [f"**Scenario `{chosen}`** ({original['domain']}, {original['decision_point']}), chosen as {rule}. "
            f"Audit pages: {cells.item_link(versions[0][1], 'the original')}, "
            f"{cells.item_link(versions[1][1], f'the {dimension} variation')}.", "",
            grid(["", "original", f"{dimension} variation"],
                 [["instruction", original.get("instruction"), variation.get("instruction")],
                  ["reference risk", original.get("reference_rationale"), variation.get("reference_rationale")],
                  ["the variation's change", "", change]]), "",
            grid(["model", "version", "detection", "action type", "safety", "thought", "action"],
                 [[r["run"], r["version"], r["detection"], r["action_type"], r["action_safety"], r["thought"],
                   r["action"]] for r in rows]), ""]
    return df, "\n".join(text)


# -- the jobs ----------------------------------------------------------------------------------

@builder("table28_pair_review_examples")
def _table28(inputs, settings):
    return pair_review_examples(read_jsonl(inputs["pool"]), read_jsonl(inputs["pairs"]),
                                read_jsonl(inputs["pair_reviews"]))


def by_item(paths) -> dict[str, dict]:
    """run name (the file's stem) -> item id -> row, in the order of the files (the config's agents)."""
    return {Path(p).stem: {r["item_id"]: r for r in read_jsonl(p)} for p in paths}


@builder("table34_case_study")
def _table34(inputs, settings):
    spec = settings["report"]["case_study"]
    items = {i["item_id"]: i for i in read_jsonl(inputs["dataset"])}
    return case_study(items, by_item(inputs["react_rollouts"]), by_item(inputs["react_labels"]),
                      spec["dimension"], spec.get("prefix"))
