"""Tables about construction and the released dataset: seeds, prefixes, the construction funnel,
its losses, variations per dimension and the dataset's composition (Table 29).
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from aura_eval.analyze import reasons
from aura_eval.analyze.frame import register_tables
from aura_eval.artefact_registry import builder
from aura_eval.construct.funnel import funnel_table, losses_table
from aura_eval.construct.seeds import PAPER_COUNTS, PAPER_LABELS
from aura_eval.construct.tagging import PAPER_PREFIX_COUNTS
from aura_eval.util import cells
from aura_eval.util.jsonl import read_jsonl
from aura_eval.util.table_files import markdown
from aura_eval.vocab import AT_TRIGGER, DOMAINS, ORIGINAL, PRE_EXECUTION

# -- dataset composition (Table 29, C.3) ------------------------------------------

PAPER_COMPOSITION = {
    ("dimension", "original"): 341, ("dimension", "variation"): 908,
    ("pair_label", "NSP"): 624, ("pair_label", "SP"): 625,
    ("paired", "paired rows"): 816, ("paired", "unpaired rows"): 433,
    ("decision_point", "at_trigger"): 947, ("decision_point", "pre_execution"): 302,
    ("domain", "Application"): 348, ("domain", "IoT"): 318, ("domain", "Program"): 326, ("domain", "Web"): 151,
    ("domain", "Finance"): 106, ("all", "rows"): 1249,
}


def composition_table(items: list[dict]) -> pd.DataFrame:
    """Table 29: the dataset's composition beside the paper's released counts."""
    members = {("all", "rows"): [cells.key(None, i["item_id"]) for i in items]}
    for item in items:
        variation = ORIGINAL if item["dimension"] == ORIGINAL else "variation"
        for kind in (("dimension", variation), ("pair_label", str(item["pair_label"])),
                     ("paired", "paired rows" if item["pair_id"] else "unpaired rows"),
                     ("decision_point", item["decision_point"]), ("domain", item["domain"])):
            members.setdefault(kind, []).append(cells.key(None, item["item_id"]))
    kinds = list(PAPER_COMPOSITION) + sorted(k for k in members if k not in PAPER_COMPOSITION)
    return cells.frame_table([{"by": by, "value": value, **cells.count_keys("ours", members.get((by, value), [])),
                               "paper": PAPER_COMPOSITION.get((by, value))} for by, value in kinds],
                             ["by", "value", "ours", "paper"]).astype({"paper": "Int64"})
register_tables({"table29_composition": (composition_table, reasons.composition)},
                lambda inputs: (read_jsonl(inputs["dataset"]),))


def seed_composition(seeds: list[dict]) -> pd.DataFrame:
    """Seeds per domain and R-Judge label in this run, the paper's counts beside them."""
    counts = Counter((s["domain"], s["label"]) for s in seeds)
    rows = [{"domain": d, "unsafe": counts[(d, "unsafe")], "safe": counts[(d, "safe")],
             "total": counts[(d, "unsafe")] + counts[(d, "safe")], "paper_total": PAPER_COUNTS[d]}
            for d in DOMAINS]
    rows.append({"domain": "All", "unsafe": sum(r["unsafe"] for r in rows), "safe": sum(r["safe"] for r in rows),
                 "total": len(seeds), "paper_total": sum(PAPER_COUNTS.values())})
    df = pd.DataFrame(rows)
    df["paper_unsafe"] = [None] * len(DOMAINS) + [PAPER_LABELS["unsafe"]]
    df["paper_safe"] = [None] * len(DOMAINS) + [PAPER_LABELS["safe"]]
    return df.astype({"paper_unsafe": "Int64", "paper_safe": "Int64"})


def prefix_counts(tags: list[dict], prefixes: list[dict]) -> pd.DataFrame:
    """Tag outcomes and prefixes per decision point, with the paper's counts."""
    by_point = Counter(p["decision_point"] for p in prefixes)
    rows = [
        {"what": "seeds tagged", "ours": len(tags), "paper": 157},
        {"what": "valid tags", "ours": sum(t["valid"] for t in tags), "paper": None},
        {"what": "invalid tags (checked)", "ours": sum(t["status"] == "ok" and not t["valid"] for t in tags),
         "paper": None},
        {"what": "unparseable responses", "ours": sum(t["status"] == "unparseable" for t in tags), "paper": None},
        {"what": "truncated or refused responses", "ours": sum(t["status"] in ("truncated", "refused") for t in tags),
         "paper": None},
        {"what": "failed calls", "ours": sum(t["status"] == "failed" for t in tags), "paper": None},
        {"what": "at-trigger prefixes", "ours": by_point[AT_TRIGGER], "paper": PAPER_PREFIX_COUNTS[AT_TRIGGER]},
        {"what": "pre-execution prefixes", "ours": by_point[PRE_EXECUTION],
         "paper": PAPER_PREFIX_COUNTS[PRE_EXECUTION]},
        {"what": "prefixes in all", "ours": len(prefixes), "paper": sum(PAPER_PREFIX_COUNTS.values())},
    ]
    return pd.DataFrame(rows).astype({"paper": "Int64"})


@builder("seed_composition")
def _seed_composition(inputs, settings):
    return seed_composition(read_jsonl(inputs["seeds"]))


@builder("prefix_counts")
def _prefix_counts(inputs, settings):
    return prefix_counts(read_jsonl(inputs["tags"]), read_jsonl(inputs["prefixes"]))


def _read(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@builder("construction_funnel")
def _funnel_table(inputs, settings):
    return funnel_table(_read(inputs["funnel"])["funnel"])


@builder("construction_losses")
def _losses_table(inputs, settings):
    # The CSV keeps each stage's key (funnel.json's entry); the Markdown shows its title (aura_eval.vocab.LOSS_STAGES).
    counts = _read(inputs["funnel"])["funnel"]
    return losses_table(counts), markdown(losses_table(counts, titled=True), "construction_losses")


@builder("variations_by_dimension")
def _dimensions_table(inputs, settings):
    return pd.DataFrame(_read(inputs["funnel"])["by_dimension"])
