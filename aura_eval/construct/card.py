"""The dataset card (results/dataset/README.md): every field of a released row and the counts."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from aura_eval.construct.funnel import funnel_table, losses_table, reason_legend
from aura_eval.util.table_files import header, markdown
from aura_eval.vocab import ORIGINAL

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


# -- the dataset card -----------------------------------------------------------------

def dataset_card(rows: list[dict], counts: dict, dims: list[dict], roles: dict) -> str:
    def tally(field):
        return ", ".join(f"{k} {v}" for k, v in sorted(Counter(str(r[field]) for r in rows).items()))

    lines = ["# AURA-Eval dataset (generated)", "",
             "Written by the `release` rule; regenerate it, do not edit it. One row per evaluation item in "
             "`aura_eval.jsonl` (sorted by `item_id`); rows filtered out at release are in `excluded.jsonl` "
             "with their reason; every construction stage's rows, with raw model responses, are under "
             "`results/construct/`.", "", "## Fields", "", "| field | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in FIELDS.items()]
    lines += ["", "## Counts", "", f"- rows: {len(rows)} from {len({r['seed_id'] for r in rows})} seeds",
              f"- dimension: original {sum(r['dimension'] == ORIGINAL for r in rows)}, "
              f"variation {sum(r['dimension'] != ORIGINAL for r in rows)}",
              f"- pair label: {tally('pair_label')}",
              f"- paired rows {counts['paired rows']} ({counts['paired rows'] // 2} pairs), "
              f"unpaired rows {len(rows) - counts['paired rows']}",
              f"- decision point: {tally('decision_point')}", f"- domain: {tally('domain')}", "",
              "## Construction funnel", "", markdown(funnel_table(counts)).rstrip(), "",
              "Losses between stages, by reason:", "", markdown(losses_table(counts, titled=True)).rstrip(), ""]
    legend = reason_legend(counts)
    if legend:
        lines += ["Each reason starts with its category:", "",
                  *[f"- `{category}`: {meaning}" for category, meaning in legend], ""]
    per_dimension = pd.DataFrame(dims).rename(columns=lambda c: header(c, "variations_by_dimension"))
    lines += ["## Per dimension", "", markdown(per_dimension).rstrip()]
    lines += ["", "## Models by role", ""]
    lines += [f"- {role}: {', '.join(names) if isinstance(names, list) else names}" for role, names in roles.items()]
    return "\n".join(lines) + "\n"


