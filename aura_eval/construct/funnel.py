"""The construction funnel: counts at every stage with the reason for every loss, beside the
paper's counts; and the three construction tables of the report built from it.

The stages at which a candidate can be lost and the reason categories are aura_eval.vocab's
(LOSS_STAGES, LOSS_REASONS); `losses` says which stage dropped each candidate and why, and both
the funnel's counts and the audit index (aura_eval.report.audit) read it, so a loss reads the same
in the tables, the dataset card and the audit index."""

from __future__ import annotations

from collections import Counter
import pandas as pd
from aura_eval.vocab import (DIMENSIONS, LOSS_REASONS, LOSS_STAGES, NO_MAJORITY, OVER_CAP, REFUSED, TRUNCATED,
                             reason_category, reason_kind)

# The paper's count at each stage (§4, C.2-C.3, H.2-H.3).
PAPER_FUNNEL = {"prefixes": 211, "variation candidates": 1029, "parseable variations": 916,
                "kept variations": 650, "classified pool": 861, "pair candidates": 593, "parseable pairs": 590,
                "kept pairs": 428, "released rows": 1249}

# -- losses ---------------------------------------------------------------------------


def votes_line(review: dict) -> str:
    """A panel decision's votes, as a rejected row shows them beside its reason."""
    others = "".join(f", {review[f'{s}_votes']} {s}" for s in (TRUNCATED, REFUSED) if review.get(f"{s}_votes"))
    return (f"{review.get('keep_votes', 0)} keep, {review.get('reject_votes', 0)} reject, "
            f"{review.get('unparseable_votes', 0)} unparseable{others}, {review.get('failed_votes', 0)} failed")


def losses(variations, reviews, pairs, pair_reviews, excluded) -> dict[str, dict]:
    """Every candidate lost from variation generation on, at the first stage that dropped it:
    candidate id -> {"stage": a LOSS_STAGES key, "reason": the reason its file records (a review
    loss: `no majority to keep`), "detail": what a row shows beside it and nobody counts (the votes)
    or None}. A generation that failed or did not parse is lost at generation, any other rewrite
    that did not pass at the gate (pair checks), a kept-less review at the review, the rest at release."""
    out = {}
    for rows, key, passed, generation, checks, reviewed, review in (
            (variations, "variation_id", "passed_gate", "generation losses", "gate rejections", reviews,
             "review losses"),
            (pairs, "item_id", "passed_checks", "pair generation losses", "pair rejections", pair_reviews,
             "pair review losses")):
        for row in rows:
            if not row[passed]:
                reason = row.get("rejection") or f"{row['status']}: {row.get('error')}"
                out[row[key]] = {"stage": generation if row["status"] != "ok" else checks, "reason": reason,
                                 "detail": None}
        for row in reviewed:
            if not row["kept"]:
                out.setdefault(row[key], {"stage": review, "reason": NO_MAJORITY, "detail": votes_line(row)})
    for row in excluded:
        out.setdefault(row["item_id"], {"stage": "excluded rows", "reason": row["reason"], "detail": None})
    return out


def loss_text(loss: dict) -> str:
    """A loss as one line: `<stage title>: <reason>`, the detail in parentheses."""
    detail = f" ({loss['detail']})" if loss.get("detail") else ""
    return f"{LOSS_STAGES[loss['stage']].title}: {loss['reason']}{detail}"


# -- counts ---------------------------------------------------------------------------

def funnel(prefixes, relevance, candidates, variations, reviews, pool, pairs, pair_reviews, rows, excluded) -> dict:
    """Counts at every stage, with the reasons for every loss: each LOSS_STAGES key maps
    reason_kind(reason) -> candidates lost (relevance: prefixes whose answer failed or did not parse,
    and candidates over the per-prefix cap); a reason nothing was lost to is absent."""
    selected = [c for c in candidates if c["selected"]]
    lost = {key: Counter() for key in LOSS_STAGES}
    lost["relevance losses"].update(r["status"] for r in relevance if r["status"] != "ok")
    lost["relevance losses"][OVER_CAP] += len(candidates) - len(selected)
    for loss in losses(variations, reviews, pairs, pair_reviews, excluded).values():
        lost[loss["stage"]][reason_kind(loss["reason"])] += 1
    lost = {key: dict(sorted((reason, n) for reason, n in counts.items() if n)) for key, counts in lost.items()}
    return {
        "prefixes": len(prefixes),
        "relevance losses": lost["relevance losses"],
        "relevant (prefix, dimension) pairs": len(candidates),
        "variation candidates": len(selected),
        "parseable variations": sum(v["status"] == "ok" for v in variations),
        "generation losses": lost["generation losses"],
        "passed gate": sum(v["passed_gate"] for v in variations),
        "gate rejections": lost["gate rejections"],
        "reviewed variations": len(reviews),
        "unparseable review votes": sum(r["unparseable_votes"] for r in reviews),
        "truncated or refused review votes": sum(r.get("truncated_votes", 0) + r.get("refused_votes", 0)
                                                 for r in reviews),
        "failed review votes": sum(r["failed_votes"] for r in reviews),
        "review losses": lost["review losses"],
        "kept variations": sum(r["kept"] for r in reviews),
        "classified pool": len(pool),
        "complete labels": sum(i["classification"]["complete"] for i in pool),
        "pair candidates": len(pairs),
        "parseable pairs": sum(p["status"] == "ok" for p in pairs),
        "pair generation losses": lost["pair generation losses"],
        "passed pair checks": sum(p["passed_checks"] for p in pairs),
        "pair rejections": lost["pair rejections"],
        "unparseable pair-review votes": sum(r["unparseable_votes"] for r in pair_reviews),
        "truncated or refused pair-review votes": sum(r.get("truncated_votes", 0) + r.get("refused_votes", 0)
                                                      for r in pair_reviews),
        "failed pair-review votes": sum(r["failed_votes"] for r in pair_reviews),
        "pair review losses": lost["pair review losses"],
        "kept pairs": sum(r["kept"] for r in pair_reviews),
        "released rows": len(rows),
        "excluded rows": lost["excluded rows"],
        "paired rows": sum(r["pair_id"] is not None for r in rows),
    }


def by_dimension(candidates, variations, reviews, rows) -> list[dict]:
    """Per dimension: candidates, parseable, passed gate, kept, released rows."""
    out = []
    for dim in DIMENSIONS:  # "original" too: its released rows
        out.append({"dimension": dim,
                    "candidates": sum(c["dimension"] == dim and c["selected"] for c in candidates),
                    "parseable": sum(v["dimension"] == dim and v["status"] == "ok" for v in variations),
                    "passed_gate": sum(v["dimension"] == dim and v["passed_gate"] for v in variations),
                    "kept": sum(r["dimension"] == dim and r["kept"] for r in reviews),
                    "released_rows": sum(r["dimension"] == dim for r in rows)})
    return out


# -- the report's tables -------------------------------------------------------------

def funnel_table(counts: dict):
    """The construction funnel beside the paper's count at each stage."""
    rows = [{"stage": stage, "ours": value, "paper": PAPER_FUNNEL.get(stage)}
            for stage, value in counts.items() if isinstance(value, int)]
    return pd.DataFrame(rows, columns=["stage", "ours", "paper"]).astype({"paper": "Int64"})


def losses_table(counts: dict, titled: bool = False):
    """Every loss between stages, by stage (in flow order) and reason: `where` is the stage's key
    (its entry in funnel.json), with `titled` its title (what the Markdown and the card show)."""
    rows = [{"where": LOSS_STAGES[key].title if titled else key, "reason": reason, "rows": n}
            for key in LOSS_STAGES for reason, n in sorted(counts.get(key, {}).items())]
    return pd.DataFrame(rows, columns=["where", "reason", "rows"])


def reason_legend(counts: dict) -> list[tuple[str, str]]:
    """(category, meaning) of each reason category the funnel's losses show, in LOSS_REASONS' order."""
    shown = {reason_category(reason) for key in LOSS_STAGES for reason in counts.get(key, {})}
    return [(category, meaning) for category, meaning in LOSS_REASONS.items() if category in shown]
