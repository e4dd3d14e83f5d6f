"""Tables about the run itself, from the stage outputs: seeds, prefixes, model calls, what
was run, the evaluation summary, the five-judge panel and judge consistency. Each is a
registered table (aura_eval.vocab.TABLES) with its own job."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd

from aura_eval.forecast import forecast
from aura_eval.jsonl import read_jsonl
from aura_eval.seeds import PAPER_COUNTS, PAPER_LABELS
from aura_eval.stats import share, share_columns
from aura_eval.table_files import explain
from aura_eval.tagging import PAPER_PREFIX_COUNTS
from aura_eval.vocab import AT_TRIGGER, AXES, DOMAINS, MODEL_STAGES, PRE_EXECUTION, builder, parse_run, stage_group


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


def empty_stages(calls: pd.DataFrame) -> list[str]:
    """Per stage that asked and got no usable answer, what came back instead (from model_calls)."""
    if not len(calls):
        return []
    out = []
    for stage, g in calls.groupby("stage", sort=True):
        n, ok = int(g["requests"].sum()), int(g["ok"].sum())
        if n and not ok:
            out.append(f"{stage}: 0 of {n} answers usable: {int(g['unparseable'].sum())} unparseable, "
                       f"{int(g['failed'].sum())} failed")
    return out


def stage_summary(calls: list[dict]) -> pd.DataFrame:
    """Per stage (in flow order): requests, cache hits, outcomes, tokens, cost, the prompts and
    versions it sent, and its calls' summed latency (`latency_s`: seconds waiting for answers,
    summed over calls; concurrent calls overlap, so the stage's wall clock is shorter)."""
    columns = ["stage", "requests", "cache_hits", "ok", "unparseable", "failed", "tokens_in", "tokens_out",
               "cost_usd", "latency_s", "prompts"]
    if not calls:
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(calls)
    df["group"] = df["stage"].map(stage_group)
    for column in ("tokens_in", "tokens_out", "latency_s", "cost_usd"):
        if column not in df:
            df[column] = None
    rows = []
    order = {name: i for i, name in enumerate(MODEL_STAGES)}
    for group, g in sorted(df.groupby("group"), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        prompts = sorted({(p, v) for p, v in zip(g.get("prompt", []), g.get("prompt_version", [])) if p})
        cost = g["cost_usd"].dropna()
        rows.append({"stage": group, "requests": len(g), "cache_hits": int(g["cache_hit"].fillna(False).sum()),
                     "ok": int((g["status"] == "ok").sum()), "unparseable": int((g["status"] == "unparseable").sum()),
                     "failed": int((g["status"] == "failed").sum()),
                     "tokens_in": int(g["tokens_in"].fillna(0).sum()), "tokens_out": int(g["tokens_out"].fillna(0).sum()),
                     "cost_usd": round(float(cost.sum()), 4) if len(cost) else None,
                     "latency_s": round(float(g["latency_s"].fillna(0).sum()), 1),
                     "prompts": ", ".join(f"{p} v{v}" for p, v in prompts)})
    return pd.DataFrame(rows, columns=columns)


def _stage_lines(stages: pd.DataFrame) -> list[str]:
    if stages is None or not len(stages):
        return []
    lines = ["Per stage, from the call logs (`results/calls/`): requests, how many the response cache "
             "answered, tokens, cost, the prompts (id and version) sent, and the summed latency: the seconds "
             "spent waiting for answers, summed over the stage's calls. Calls run concurrently, so a stage's "
             "wall-clock time is shorter than its summed latency; cache hits cost almost none. Snakemake's own "
             "job times are in its log.", "",
             "| stage | requests | cache hits | ok | unparseable | failed | tokens in | tokens out | cost (USD) "
             "| summed latency (s) | prompts (version) |",
             "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|:--|"]
    for r in stages.to_dict("records"):
        cost = "—" if r["cost_usd"] is None or pd.isna(r["cost_usd"]) else f"{r['cost_usd']:.4f}"
        lines.append(f"| {r['stage']} | {r['requests']:,} | {r['cache_hits']:,} | {r['ok']:,} | {r['unparseable']:,} "
                     f"| {r['failed']:,} | {r['tokens_in']:,} | {r['tokens_out']:,} | {cost} | {r['latency_s']:,.1f} "
                     f"| {r['prompts']} |")
    total = stages["latency_s"].sum()
    lines += ["", f"Summed latency over all stages: {total:,.1f} s ({total / 3600:.2f} h).", ""]
    return lines


def _cost(calls: pd.DataFrame) -> str:
    known = calls["cost_usd"].dropna() if len(calls) else []
    return f"${float(sum(known)):.4f} where litellm knows the price" if len(known) else "unknown"


def run_summary(seeds_setting, models: dict, roles: dict, n_seeds: int, calls: pd.DataFrame,
                agents: dict | None = None, validation: dict | None = None,
                stages: pd.DataFrame | None = None) -> str:
    """Markdown saying what this run was: warnings, the seeds and call totals, every role's model
    (name, litellm string, vendor, parameters), the evaluated models, and per stage the calls,
    prompts and summed latency (`stages`, from `stage_summary`)."""
    role_rows = []
    for role, names in sorted(roles.items()):
        for name in names if isinstance(names, list) else [names]:
            role_rows.append(f"| {role} | {name} | `{models[name]['model']}` | {models[name].get('vendor') or '—'} | "
                             f"`{json.dumps(models[name].get('params', {}), sort_keys=True)}` |")
    warnings = [f"**Warning — {problem}.**" for problem in empty_stages(calls)]
    simulated = sorted(name for name, spec in models.items() if spec["model"].startswith("aura_sim/"))
    if simulated:
        warnings.insert(0, f"**SIMULATION: {len(simulated)} of the {len(models)} models of this run are the "
                           f"planted-truth simulator `aura_sim`; their numbers come from planted parameters "
                           f"(`llm.simulation`), not from any model.**")
    if (validation or {}).get("simulated_annotators"):
        warnings.insert(1, "**SIMULATED ANNOTATORS: the human-validation tables (3, 18-23) use the labels of "
                           "simulated annotators (`results/validation/simulated/`), not of people.**")
    return "\n".join([
        *[line for w in warnings for line in (w, "")],
        f"Seeds setting: `{seeds_setting}` ({n_seeds} seeds in this run). "
        f"Model requests: {int(calls['requests'].sum()) if len(calls) else 0:,}, "
        f"of which answered from the cache: {int(calls['cache_hits'].sum()) if len(calls) else 0}; "
        f"failed: {int(calls['failed'].sum()) if len(calls) else 0}, "
        f"unparseable: {int(calls['unparseable'].sum()) if len(calls) else 0}. "
        f"Tokens in: {int(calls['tokens_in'].sum()) if len(calls) else 0}, "
        f"out: {int(calls['tokens_out'].sum()) if len(calls) else 0}; "
        f"cost: {_cost(calls)}.",
        "",
        "| role | model name | litellm model | vendor | parameters |",
        "|---|---|---|---|---|",
        *role_rows,
        "",
        "| evaluated model | group | vendor | model name | litellm model |",
        "|---|---|---|---|---|",
        *[f"| {name} | {spec['group']} | {spec['vendor']} | {spec['model']} | `{models[spec['model']]['model']}` |"
          for name, spec in sorted((agents or {}).items())],
        "",
        *_stage_lines(stages),
    ])


@builder("seed_composition")
def _seed_composition(inputs, settings):
    return seed_composition(read_jsonl(inputs["seeds"]))


@builder("prefix_counts")
def _prefix_counts(inputs, settings):
    return prefix_counts(read_jsonl(inputs["tags"]), read_jsonl(inputs["prefixes"]))


def _call_rows(paths) -> list[dict]:
    return [row for path in paths for row in read_jsonl(path)]


@builder("model_calls")
def _model_calls(inputs, settings):
    table = model_calls(_call_rows(inputs["calls"]))
    return explain(table, "no model call was made in this run" if table.empty else None)


@builder("run_summary")
def _run_summary(inputs, settings):
    rows = _call_rows(inputs["calls"])
    return run_summary(settings["seeds"], settings["models"], settings["roles"], len(read_jsonl(inputs["seeds"])),
                       model_calls(rows), settings["agents"], settings.get("validation"), stage_summary(rows))


FORECAST_COLUMNS = ["stage", "endpoint", "forecast_calls", "requests", "sent", "forecast_tokens_in", "tokens_in",
                    "forecast_tokens_out", "tokens_out", "forecast_usd", "cost_usd", "spent_usd", "price"]


def forecast_vs_actual(predicted: list[dict], calls: list[dict]) -> pd.DataFrame:
    """Per stage x model: the forecast before any call (`aura_eval.forecast`) beside what the call
    logs show: requests, calls sent in this run (not from the cache), tokens, the cost of every
    answer as its first call paid it (`cost_usd`) and of the calls sent in this run (`spent_usd`).
    Dollars are empty where unpriced (`price` says so), never 0; a last row sums the priced ones."""
    actual: dict[tuple, dict] = {}
    for row in calls:
        cell = actual.setdefault((stage_group(row["stage"]), row["endpoint"]), {
            "requests": 0, "sent": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": None, "spent_usd": None})
        cell["requests"] += 1
        cell["sent"] += not row.get("cache_hit") and bool(row.get("attempts"))
        cell["tokens_in"] += row.get("tokens_in") or 0
        cell["tokens_out"] += row.get("tokens_out") or 0
        if row.get("cost_usd") is not None:
            cell["cost_usd"] = (cell["cost_usd"] or 0.0) + row["cost_usd"]
            if not row.get("cache_hit"):
                cell["spent_usd"] = (cell["spent_usd"] or 0.0) + row["cost_usd"]
    predicted_by = {(r["stage"], r["endpoint"]): r for r in predicted}
    order = [(r["stage"], r["endpoint"]) for r in predicted] + sorted(set(actual) - set(predicted_by))
    rows = []
    for key in order:
        f, a = predicted_by.get(key, {}), actual.get(key, {})
        rows.append({"stage": key[0], "endpoint": key[1], "forecast_calls": f.get("calls"),
                     "requests": a.get("requests", 0), "sent": a.get("sent", 0),
                     "forecast_tokens_in": f.get("tokens_in"), "tokens_in": a.get("tokens_in", 0),
                     "forecast_tokens_out": f.get("tokens_out"), "tokens_out": a.get("tokens_out", 0),
                     "forecast_usd": None if f.get("usd") is None else round(f["usd"], 4),
                     "cost_usd": None if a.get("cost_usd") is None else round(a["cost_usd"], 4),
                     "spent_usd": None if a.get("spent_usd") is None else round(a["spent_usd"], 4),
                     "price": f.get("price_source", "not forecast")})
    df = pd.DataFrame(rows, columns=FORECAST_COLUMNS)
    total = {"stage": "All", "endpoint": "(priced rows for dollars)",
             **{c: int(df[c].dropna().sum()) for c in FORECAST_COLUMNS[2:9]},
             **{c: round(float(df[c].dropna().sum()), 4) for c in ("forecast_usd", "cost_usd", "spent_usd")},
             "price": f"{int(df['forecast_usd'].isna().sum())} rows unpriced"}
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    return df.astype({c: "Int64" for c in FORECAST_COLUMNS[2:9]})


@builder("forecast_vs_actual")
def _forecast_vs_actual(inputs, settings):
    # The forecast as it stood before any call: the config and the seeds only (results=False).
    predicted = forecast(settings, results=False, seeds=read_jsonl(inputs["seeds"]))
    return forecast_vs_actual(predicted["rows"], _call_rows(inputs["calls"]))


def evaluation_summary(labels_by_run: dict[str, list[dict]], agents: dict) -> pd.DataFrame:
    """Per evaluated run: rollout outcomes, resolved labels per axis, consensus, unsafe rate."""
    rows = []
    for run, labels in sorted(labels_by_run.items()):
        agent, fmt = parse_run(run)
        safety = [r["action_safety"] for r in labels]
        resolved = [s["label"] for s in safety if s["label"] is not None]
        rows.append({
            "run": run, "group": agents.get(agent, {}).get("group"), "format": fmt, "items": len(labels),
            "rollouts_ok": sum(r["rollout_status"] == "ok" for r in labels),
            "rollouts_unparseable": sum(r["rollout_status"] == "unparseable" for r in labels),
            "rollouts_failed": sum(r["rollout_status"] == "failed" for r in labels),
            "detection_resolved": sum(r["detection"]["label"] is not None for r in labels),
            "type_resolved": sum(r["action_type"]["label"] is not None for r in labels),
            "safety_resolved": len(resolved),
            "safety_unanimous": sum(s["stratum"] == "unanimous" for s in safety),
            "safety_majority": sum(s["stratum"] == "majority" for s in safety),
            "safety_tied": sum(s["stratum"] == "tied" for s in safety),
            **share("unsafe", sum(label == "Unsafe" for label in resolved), len(resolved)),
        })
    return pd.DataFrame(rows)


def judge_consistency(repeat_rows: list[dict]) -> pd.DataFrame:
    """Per judge and axis: share of items on which every repeated run gave the same label (F.5)."""
    rows = []
    for judge in sorted({r["judge"] for r in repeat_rows}):
        mine = [r for r in repeat_rows if r["judge"] == judge]
        row = {"judge": judge}
        for axis in AXES:
            known = [r[axis]["consistent"] for r in mine if r[axis]["consistent"] is not None]
            row.update(share(f"{axis}_consistent", sum(known), len(known)))
        rows.append(row)
    return pd.DataFrame(rows, columns=["judge", *share_columns(*(f"{a}_consistent" for a in AXES))])


def five_judge_summary(rows_by_agent: dict[str, list[dict]]) -> pd.DataFrame:
    """Per agent's calibration sample: how often the five-judge panel reaches a plurality, per axis."""
    out = []
    for agent, rows in sorted(rows_by_agent.items()):
        row = {"agent": agent, "items": len(rows)}
        for axis in AXES:
            row[f"{axis}_plurality"] = sum(r[axis]["label"] is not None for r in rows)
            row[f"{axis}_unanimous"] = sum(r[axis]["stratum"] == "unanimous" for r in rows)
        out.append(row)
    return pd.DataFrame(out, columns=["agent", "items"] + [f"{a}_{s}" for a in AXES
                                                           for s in ("plurality", "unanimous")])


def _by_stem(paths) -> dict:
    return {Path(p).stem: read_jsonl(p) for p in paths}


@builder("evaluation_summary")
def _evaluation_summary(inputs, settings):
    table = evaluation_summary(_by_stem(inputs["labels"]), settings["agents"])
    return explain(table, "no evaluated model was run (no agents in the config)" if table.empty else None)


@builder("five_judge_panel")
def _five_judge_panel(inputs, settings):
    table = five_judge_summary(_by_stem(inputs["five_judge"]))
    why = ("the five-judge validation panel did not run (reliability.five_judge_panel is off, or "
           "reliability.calibration_agents is empty)")
    return explain(table, why if table.empty else None)


@builder("judge_consistency")
def _judge_consistency(inputs, settings):
    table = judge_consistency([r for p in inputs["repeats"] for r in read_jsonl(p)])
    why = "no repeated judge runs (reliability.repeats is 0, or reliability.calibration_agents is empty)"
    return explain(table, why if table.empty else None)
