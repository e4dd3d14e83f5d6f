"""The construction funnel: counts at every stage with the reason for every loss, beside the
paper's counts; and the three construction tables of the report built from it."""

from __future__ import annotations

import re
from collections import Counter
import pandas as pd
from aura_eval.vocab import DIMENSIONS

# The paper's count at each stage (§4, C.2-C.3, H.2-H.3).
PAPER_FUNNEL = {"prefixes": 211, "variation candidates": 1029, "parseable variations": 916,
                "kept variations": 650, "classified pool": 861, "pair candidates": 593, "parseable pairs": 590,
                "kept pairs": 428, "released rows": 1249}

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
        "failed review votes": sum(r["failed_votes"] for r in reviews),
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
        "failed pair-review votes": sum(r["failed_votes"] for r in pair_reviews),
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


def losses_table(counts: dict):
    """Every loss between stages, by reason."""
    rows = [{"where": where, "reason": reason, "rows": n} for where, reasons in counts.items()
            if isinstance(reasons, dict) for reason, n in sorted(reasons.items())]
    return pd.DataFrame(rows, columns=["where", "reason", "rows"])
