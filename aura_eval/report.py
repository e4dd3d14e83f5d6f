"""Tables for the report: plain CSV files built from the stage outputs."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from aura_eval.jsonl import atomic_write_text, read_jsonl
from aura_eval.seeds import DOMAINS, PAPER_COUNTS, PAPER_LABELS
from aura_eval.tagging import AT_TRIGGER, PAPER_PREFIX_COUNTS, PRE_EXECUTION


def write_csv(df: pd.DataFrame, path) -> None:
    atomic_write_text(path, df.to_csv(index=False, lineterminator="\n"))


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
        {"what": "failed calls", "ours": sum(t["status"] == "failed" for t in tags), "paper": None},
        {"what": "at-trigger prefixes", "ours": by_point[AT_TRIGGER], "paper": PAPER_PREFIX_COUNTS[AT_TRIGGER]},
        {"what": "pre-execution prefixes", "ours": by_point[PRE_EXECUTION],
         "paper": PAPER_PREFIX_COUNTS[PRE_EXECUTION]},
        {"what": "prefixes in all", "ours": len(prefixes), "paper": sum(PAPER_PREFIX_COUNTS.values())},
    ]
    return pd.DataFrame(rows).astype({"paper": "Int64"})


def model_calls(calls: list[dict]) -> pd.DataFrame:
    """Per stage and endpoint: requests, cache hits, outcomes, tokens and cost."""
    columns = ["stage", "endpoint", "model", "requests", "cache_hits", "ok", "unparseable", "failed",
               "tokens_in", "tokens_out", "cost_usd"]
    if not calls:
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(calls)
    out = df.groupby(["stage", "endpoint", "model"], sort=True).agg(
        requests=("item_id", "size"), cache_hits=("cache_hit", "sum"),
        ok=("status", lambda s: int((s == "ok").sum())),
        unparseable=("status", lambda s: int((s == "unparseable").sum())),
        failed=("status", lambda s: int((s == "failed").sum())),
        tokens_in=("tokens_in", "sum"), tokens_out=("tokens_out", "sum"),
        cost_usd=("cost_usd", lambda s: round(float(s.sum()), 4) if s.notna().any() else None),
    ).reset_index()
    return out[columns]


def run_summary(seeds_setting, models: dict, roles: dict, n_seeds: int, calls: pd.DataFrame) -> str:
    """A Markdown paragraph and table saying what this run was."""
    role_rows = []
    for role, names in sorted(roles.items()):
        for name in names if isinstance(names, list) else [names]:
            role_rows.append(f"| {role} | {name} | `{models[name]['model']}` | "
                             f"`{json.dumps(models[name].get('params', {}), sort_keys=True)}` |")
    return "\n".join([
        f"Seeds setting: `{seeds_setting}` ({n_seeds} seeds in this run). "
        f"Model requests: {int(calls['requests'].sum()) if len(calls) else 0}, "
        f"of which answered from the cache: {int(calls['cache_hits'].sum()) if len(calls) else 0}.",
        "",
        "| role | model name | litellm model | parameters |",
        "|---|---|---|---|",
        *role_rows,
        "",
    ])


def spine_tables(inputs, outputs, params) -> None:
    seeds = read_jsonl(inputs.seeds)
    calls = [row for path in inputs.calls for row in read_jsonl(path)]
    write_csv(seed_composition(seeds), outputs.composition)
    write_csv(prefix_counts(read_jsonl(inputs.tags), read_jsonl(inputs.prefixes)), outputs.prefixes)
    call_table = model_calls(calls)
    write_csv(call_table, outputs.calls)
    atomic_write_text(outputs.summary, run_summary(params.seeds, params.models, params.roles, len(seeds),
                                                   call_table))
