"""Tables about the run's model calls: calls per stage and model, what was run, and the forecast
beside what was sent.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from aura_eval.analyze.forecast import forecast
from aura_eval.artefact_registry import builder
from aura_eval.llm.answers import STATUSES
from aura_eval.llm.providers import is_simulated
from aura_eval.util.jsonl import iter_jsonl, read_jsonl
from aura_eval.util.table_files import explain
from aura_eval.stage_registry import call_groups
from aura_eval.vocab import stage_group

# One count column per call status (answers.STATUS_TABLE), in its order.
MODEL_CALL_COLUMNS = ["stage", "endpoint", "model", "requests", "cache_hits", *STATUSES, "tokens_in", "tokens_out",
                      "cost_usd"]
STAGE_COLUMNS = ["stage", "requests", "cache_hits", *STATUSES, "tokens_in", "tokens_out", "cost_usd", "latency_s",
                 "prompts"]


class _Totals:
    """One group's counters; its costs and latencies as packed float arrays, so that their sums are
    numpy's, in the rows' order (a float sum depends on its order: the tables stay byte-identical
    to summing the whole call log in pandas)."""

    def __init__(self):
        self.requests = self.cache_hits = 0
        self.statuses: Counter = Counter()  # calls per status
        self.tokens_in = self.tokens_out = self.priced = 0
        self.costs, self.latencies = array("d"), array("d")
        self.prompts: set = set()

    def add(self, call: dict, costs_of_unpriced: float | None) -> None:
        self.requests += 1
        self.cache_hits += bool(call.get("cache_hit"))
        self.statuses[call.get("status")] += 1
        self.tokens_in += call.get("tokens_in") or 0
        self.tokens_out += call.get("tokens_out") or 0
        cost = call.get("cost_usd")
        if cost is not None:
            self.priced += 1
            self.costs.append(cost)
        elif costs_of_unpriced is not None:
            self.costs.append(costs_of_unpriced)

    def cost(self) -> float | None:
        return round(float(np.frombuffer(self.costs).sum()), 4) if self.priced else None


class CallTotals:
    """What the call tables need from a run's call logs, gathered one row at a time: per stage x
    endpoint x model (model_calls) and per stage (stage_summary). A run at the paper's scale logs
    some 290,000 calls; their rows are never all in memory."""

    def __init__(self):
        self.by_model: dict[tuple, _Totals] = {}
        self.by_stage: dict[str, _Totals] = {}
        self.rows = 0
        self.missing: Counter = Counter()  # per field: rows without a value (as pandas sees the column)

    @classmethod
    def of(cls, calls: Iterable[dict]) -> CallTotals:
        totals = cls()
        for call in calls:
            totals.add(call)
        return totals

    @classmethod
    def read(cls, paths) -> CallTotals:
        """The totals of the call logs at `paths`, streamed."""
        return cls.of(row for path in paths for row in iter_jsonl(path))

    def add(self, call: dict) -> None:
        self.rows += 1
        for name in ("tokens_in", "tokens_out", "prompt_version"):
            self.missing[name] += call.get(name) is None
        key = (call.get("stage"), call.get("endpoint"), call.get("model"))
        if None not in key:  # pandas' groupby leaves out rows with a missing key
            self.by_model.setdefault(key, _Totals()).add(call, 0.0)  # model_calls sums unpriced calls as 0
        group = self.by_stage.setdefault(stage_group(call["stage"]), _Totals())
        group.add(call, None)
        group.latencies.append(call.get("latency_s") or 0.0)
        if call.get("prompt"):
            group.prompts.add((call["prompt"], call.get("prompt_version")))

    def _token_column(self, name: str, values: list[int]) -> pd.Series:
        # The dtype a whole-log DataFrame gives the column: int, float once a row lacks it, object when all do.
        if self.missing[name] == self.rows:
            return pd.Series(values, dtype=object)
        return pd.Series(values, dtype="float64" if self.missing[name] else "int64")

    def model_calls(self) -> pd.DataFrame:
        """Per stage and endpoint: requests, cache hits, outcomes, tokens and cost."""
        if not self.rows:
            return pd.DataFrame(columns=MODEL_CALL_COLUMNS)
        keys = sorted(self.by_model)
        groups = [self.by_model[k] for k in keys]
        df = pd.DataFrame(keys, columns=["stage", "endpoint", "model"])
        for name in ("requests", "cache_hits"):
            df[name] = pd.Series([getattr(g, name) for g in groups], dtype="int64")
        for name in STATUSES:
            df[name] = pd.Series([g.statuses[name] for g in groups], dtype="int64")
        for name in ("tokens_in", "tokens_out"):
            df[name] = self._token_column(name, [getattr(g, name) for g in groups])
        df["cost_usd"] = pd.Series([g.cost() for g in groups])
        return df

    def stage_summary(self) -> pd.DataFrame:
        """Per stage (in flow order): requests, cache hits, outcomes, tokens, cost, the prompts and
        versions it sent, and its calls' summed latency (`latency_s`: seconds waiting for answers,
        summed over calls; concurrent calls overlap, so the stage's wall clock is shorter)."""
        if not self.rows:
            return pd.DataFrame(columns=STAGE_COLUMNS)
        order = {name: i for i, name in enumerate(call_groups())}
        # A version column with a gap is a float column in pandas (`v1.0`); kept so, for identical tables.
        version = float if self.missing["prompt_version"] else (lambda v: v)
        rows = []
        for group in sorted(self.by_stage, key=lambda name: (order.get(name, len(order)), name)):
            g = self.by_stage[group]
            prompts = sorted((p, version(v)) for p, v in g.prompts)
            rows.append({"stage": group, "requests": g.requests, "cache_hits": g.cache_hits,
                         **{s: g.statuses[s] for s in STATUSES}, "tokens_in": g.tokens_in,
                         "tokens_out": g.tokens_out, "cost_usd": g.cost(),
                         "latency_s": round(float(np.frombuffer(g.latencies).sum()), 1),
                         "prompts": ", ".join(f"{p} v{v}" for p, v in prompts)})
        return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def model_calls(calls: Iterable[dict]) -> pd.DataFrame:
    """Per stage and endpoint: requests, cache hits, outcomes, tokens and cost."""
    return CallTotals.of(calls).model_calls()


def empty_stages(calls: pd.DataFrame) -> list[str]:
    """Per stage that asked and got no usable answer, what came back instead (from model_calls)."""
    if not len(calls):
        return []
    out = []
    for stage, g in calls.groupby("stage", sort=True):
        n, ok = int(g["requests"].sum()), int(g["ok"].sum())
        if n and not ok:
            out.append(f"{stage}: 0 of {n} answers usable: " + ", ".join(
                f"{int(g[s].sum())} {s}" for s in STATUSES[1:] if s in g and (g[s].sum() or s in ("unparseable", "failed"))))
    return out


def stage_summary(calls: Iterable[dict]) -> pd.DataFrame:
    """Per stage (in flow order): see CallTotals.stage_summary."""
    return CallTotals.of(calls).stage_summary()


def _stage_lines(stages: pd.DataFrame) -> list[str]:
    if stages is None or not len(stages):
        return []
    lines = ["Per stage, from the call logs (`results/calls/`): requests, how many the response cache "
             "answered, tokens, cost, the prompts (id and version) sent, and the summed latency: the seconds "
             "spent waiting for answers, summed over the stage's calls. Calls run concurrently, so a stage's "
             "wall-clock time is shorter than its summed latency; cache hits cost almost none. Snakemake's own "
             "job times are in its log.", "",
             "| stage | requests | cache hits | " + " | ".join(STATUSES) + " | tokens in | tokens out | cost (USD) "
             "| summed latency (s) | prompts (version) |",
             "|:--|--:|--:|" + "--:|" * len(STATUSES) + "--:|--:|--:|--:|:--|"]
    for r in stages.to_dict("records"):
        cost = "—" if r["cost_usd"] is None or pd.isna(r["cost_usd"]) else f"{r['cost_usd']:.4f}"
        counts = " | ".join(f"{r[s]:,}" for s in STATUSES)
        lines.append(f"| {r['stage']} | {r['requests']:,} | {r['cache_hits']:,} | {counts} "
                     f"| {r['tokens_in']:,} | {r['tokens_out']:,} | {cost} | {r['latency_s']:,.1f} "
                     f"| {r['prompts']} |")
    total = stages["latency_s"].sum()
    lines += ["", f"Summed latency over all stages: {total:,.1f} s ({total / 3600:.2f} h).", ""]
    return lines


def _cost(calls: pd.DataFrame) -> str:
    known = calls["cost_usd"].dropna() if len(calls) else []
    return f"${float(sum(known)):.4f} where litellm knows the price" if len(known) else "unknown"


def _agent_model(spec: dict, models: dict) -> str:
    """An agent's two model cells: its model entry and litellm string, or the inspect log it is read from
    (its file name only: a config's path may hold a machine's folders, which stay out of the report)."""
    if "model" in spec:
        return f"{spec['model']} | `{models[spec['model']]['model']}`"
    logs = [Path(spec[key]).name.replace("`", "'").replace("|", "\\|")
            for key in ("inspect_log", "inspect_log_action_only") if key in spec]
    return "(inspect log) | " + ", ".join(f"`{name}`" for name in logs)


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
    simulated = sorted(name for name, spec in models.items() if is_simulated(spec["model"]))
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
        + ", ".join(f"{s}: {int(calls[s].sum()) if len(calls) else 0}" for s in ("failed", *STATUSES[1:-1])) + ". "
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
        *[f"| {name} | {spec['group']} | {spec['vendor']} | {_agent_model(spec, models)} |"
          for name, spec in sorted((agents or {}).items())],
        "",
        *_stage_lines(stages),
    ])


@builder("model_calls")
def _model_calls(inputs, settings):
    table = CallTotals.read(inputs["calls"]).model_calls()
    return explain(table, "no model call was made in this run" if table.empty else None)


@builder("run_summary")
def _run_summary(inputs, settings):
    totals = CallTotals.read(inputs["calls"])
    return run_summary(settings["seeds"], settings["models"], settings["roles"], len(read_jsonl(inputs["seeds"])),
                       totals.model_calls(), settings["agents"], settings.get("validation"), totals.stage_summary())


FORECAST_TOTAL = "All"  # the stage of forecast_vs_actual's last row, the run's total
FORECAST_COLUMNS = ["stage", "endpoint", "forecast_calls", "requests", "sent", "forecast_tokens_in", "tokens_in",
                    "forecast_tokens_out", "tokens_out", "forecast_usd", "cost_usd", "spent_usd", "price"]


def forecast_vs_actual(predicted: list[dict], calls: Iterable[dict]) -> pd.DataFrame:
    """Per stage x model: the forecast before any call (`aura_eval.analyze.forecast`) beside what the call
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
    total = {"stage": FORECAST_TOTAL, "endpoint": "(priced rows for dollars)",
             **{c: int(df[c].dropna().sum()) for c in FORECAST_COLUMNS[2:9]},
             **{c: round(float(df[c].dropna().sum()), 4) for c in ("forecast_usd", "cost_usd", "spent_usd")},
             "price": f"{int(df['forecast_usd'].isna().sum())} rows unpriced"}
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    return df.astype({c: "Int64" for c in FORECAST_COLUMNS[2:9]})


BAND_COLUMNS = ["measure", "at", "low", "point", "high", "width", "actual", "held", "narrowed"]
BAND_MEASURES = {"calls": "paid_calls", "tokens_in": "paid_tokens_in", "tokens_out": "paid_tokens_out",
                 "usd": "paid_usd"}


def forecast_bands(checkpoints: list[tuple[str, dict]]) -> pd.DataFrame:
    """Per measure (calls, tokens in and out, dollars of the priced models): the band of the run's
    whole cost (paid + what is left) as each forecast in `checkpoints` made it ([(when, forecast)]:
    before any call, then from the files as they stood at each model stage's end), the actual (what
    the run paid, as the last forecast counts it), whether it held, and whether it narrowed."""
    final = checkpoints[-1][1]["total"]
    rows = []
    for measure, paid in BAND_MEASURES.items():
        actual = final[paid]
        for i, (at, result) in enumerate(checkpoints):
            t = result["total"]
            low, point = t[paid] + t[f"{measure}_low"], t[paid] + t[measure]
            high = None if t[f"{measure}_high"] is None else t[paid] + t[f"{measure}_high"]
            width = None if high is None else high - low  # None: unbounded
            # no wider than the band before (an unbounded one is wider than any bounded one)
            narrowed = None if i == 0 else width is not None and (before is None or width <= before * 1.000001 + 1e-9)
            rows.append({"measure": measure, "at": at, "low": low, "point": point, "high": high,
                         "width": None if width is None or not point else round(width / point, 4),
                         "actual": actual, "held": low - 1e-6 <= actual and (high is None or actual <= high + 1e-6),
                         "narrowed": narrowed})
            before = width
    df = pd.DataFrame(rows, columns=BAND_COLUMNS)
    for c in ("low", "point", "high", "actual"):
        df[c] = df[c].astype(float).round(4)
    return df


@builder("forecast_bands")
def _forecast_bands(inputs, settings):
    from aura_eval import stage_registry

    seeds, memo = read_jsonl(inputs["seeds"]), {}  # the files stand still while the table is built: one rendering
    checkpoints = [("before any call", forecast(settings, results=False, seeds=seeds))]
    for rule in stage_registry.registry():  # each stage's band cut to the narrowest made before it (forecast.narrowed)
        earlier = [result["total"] for _, result in checkpoints]
        checkpoints.append((f"after {rule}", forecast(settings, seeds=seeds, upto=rule, memo=memo, earlier=earlier)))
    return forecast_bands(checkpoints)


@builder("forecast_vs_actual")
def _forecast_vs_actual(inputs, settings):
    # The forecast as it stood before any call: the config and the seeds only (results=False).
    predicted = forecast(settings, results=False, seeds=read_jsonl(inputs["seeds"]))
    return forecast_vs_actual(predicted["rows"], (row for path in inputs["calls"] for row in iter_jsonl(path)))
