"""The call tables (model_calls, the run summary's per-stage lines) aggregate the call logs as
they stream them: the same tables, byte for byte, as loading every row into one DataFrame."""

import math
import random

import pandas as pd
import pytest

from aura_eval.util.jsonl import write_jsonl
from aura_eval.analyze.calls import CallTotals, model_calls, run_summary, stage_group, stage_summary
from aura_eval.util.table_files import build, markdown, write_csv
from aura_eval.stage_registry import call_groups


# The tables as they were computed before streaming (every row in one DataFrame): the reference.
def reference_model_calls(calls: list[dict]) -> pd.DataFrame:
    """Per stage and endpoint: requests, cache hits, outcomes, tokens and cost."""
    columns = ["stage", "endpoint", "model", "requests", "cache_hits", "ok", "unparseable", "truncated", "refused",
               "failed", "tokens_in", "tokens_out", "cost_usd"]
    if not calls:
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(calls)
    out = df.groupby(["stage", "endpoint", "model"], sort=True).agg(
        requests=("item_id", "size"), cache_hits=("cache_hit", "sum"),
        ok=("status", lambda s: int((s == "ok").sum())),
        unparseable=("status", lambda s: int((s == "unparseable").sum())),
        truncated=("status", lambda s: int((s == "truncated").sum())),
        refused=("status", lambda s: int((s == "refused").sum())),
        failed=("status", lambda s: int((s == "failed").sum())),
        tokens_in=("tokens_in", "sum"), tokens_out=("tokens_out", "sum"),
        cost_usd=("cost_usd", lambda s: round(float(s.sum()), 4) if s.notna().any() else None),
    ).reset_index()
    return out[columns]




def reference_stage_summary(calls: list[dict]) -> pd.DataFrame:
    """Per stage (in flow order): requests, cache hits, outcomes, tokens, cost, the prompts and
    versions it sent, and its calls' summed latency (`latency_s`: seconds waiting for answers,
    summed over calls; concurrent calls overlap, so the stage's wall clock is shorter)."""
    columns = ["stage", "requests", "cache_hits", "ok", "unparseable", "truncated", "refused", "failed", "tokens_in",
               "tokens_out", "cost_usd", "latency_s", "prompts"]
    if not calls:
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(calls)
    df["group"] = df["stage"].map(stage_group)
    for column in ("tokens_in", "tokens_out", "latency_s", "cost_usd"):
        if column not in df:
            df[column] = None
    rows = []
    order = {name: i for i, name in enumerate(call_groups())}
    for group, g in sorted(df.groupby("group"), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        prompts = sorted({(p, v) for p, v in zip(g.get("prompt", []), g.get("prompt_version", [])) if p})
        cost = g["cost_usd"].dropna()
        rows.append({"stage": group, "requests": len(g), "cache_hits": int(g["cache_hit"].fillna(False).sum()),
                     "ok": int((g["status"] == "ok").sum()), "unparseable": int((g["status"] == "unparseable").sum()),
                     "truncated": int((g["status"] == "truncated").sum()),
                     "refused": int((g["status"] == "refused").sum()),
                     "failed": int((g["status"] == "failed").sum()),
                     "tokens_in": int(g["tokens_in"].fillna(0).sum()), "tokens_out": int(g["tokens_out"].fillna(0).sum()),
                     "cost_usd": round(float(cost.sum()), 4) if len(cost) else None,
                     "latency_s": round(float(g["latency_s"].fillna(0).sum()), 1),
                     "prompts": ", ".join(f"{p} v{v}" for p, v in prompts)})
    return pd.DataFrame(rows, columns=columns)


def synthetic_calls(seed: int, n: int, tokens="some missing", costs="some missing") -> list[dict]:
    rng = random.Random(seed)
    stages = ["tag_steps", "relevance", "rollout:m1:react", "judge_detection_type:m1:j1", "judge_safety:m1:j2",
              "reliability:five_judge:m1", "reliability:repeats:m2", "new_stage"]
    rows = []
    for i in range(n):
        status = rng.choices(["ok", "unparseable", "truncated", "refused", "failed"], [8, 1, 1, 1, 1])[0]
        hit = status != "failed" and rng.random() < 0.3
        answered = status != "failed"
        tokens_in = rng.randint(100, 5000) if answered else None
        if tokens == "all missing" or (tokens == "some missing" and rng.random() < 0.1):
            tokens_in = None
        cost = round(rng.random() * 1e-3, 7) if answered else None
        if costs == "all missing" or (costs == "some missing" and rng.random() < 0.2):
            cost = None
        endpoint = rng.choice(["j1", "j2", "gpt"])
        rows.append({"stage": rng.choice(stages), "item_id": f"s{i:06d}", "role": "r", "endpoint": endpoint,
                     "model": f"openai/{endpoint}", "prompt": rng.choice(["p_a", "p_b"]),
                     "prompt_version": rng.choice([1, 2]), "sample": 0, "key": f"{i:016x}", "cache_hit": hit,
                     "status": status, "tokens_in": tokens_in,
                     "tokens_out": None if tokens_in is None else rng.randint(1, 300),
                     "latency_s": None if not answered and rng.random() < 0.5 else round(rng.random() * 4, 3),
                     "attempts": 1, "cost_usd": cost, "error": "boom" if status == "failed" else None})
    return rows


def _logs(tmp_path, rows, files=4) -> list:
    paths = []
    for k in range(files):
        path = tmp_path / f"calls_{k}.jsonl"
        write_jsonl(path, rows[k::files], key=None)
        paths.append(path)
    return paths


def _same_table(streamed: pd.DataFrame, reference: pd.DataFrame, name: str, tmp_path):
    pd.testing.assert_frame_equal(streamed, reference, check_dtype=True)
    write_csv(streamed, tmp_path / "a.csv")
    write_csv(reference, tmp_path / "b.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert markdown(streamed, name) == markdown(reference, name)


@pytest.mark.parametrize("tokens, costs", [("some missing", "some missing"), ("none missing", "none missing"),
                                           ("all missing", "all missing"), ("all missing", "some missing")])
def test_streamed_tables_are_the_whole_log_tables(tmp_path, tokens, costs):
    rows = synthetic_calls(7, 3000, tokens, costs)
    paths = _logs(tmp_path, rows)
    streamed = CallTotals.read(paths)
    ordered = [row for k in range(4) for row in rows[k::4]]  # the rows as the files hold them
    _same_table(streamed.model_calls(), reference_model_calls(ordered), "model_calls", tmp_path)
    _same_table(streamed.stage_summary(), reference_stage_summary(ordered), None, tmp_path)
    models = {"gpt": {"model": "openai/gpt"}}
    assert (run_summary(4, models, {"tagger": "gpt"}, 4, streamed.model_calls(), {}, None, streamed.stage_summary())
            == run_summary(4, models, {"tagger": "gpt"}, 4, reference_model_calls(ordered), {}, None,
                           reference_stage_summary(ordered)))


def test_the_builders_write_the_whole_log_tables(tmp_path):
    rows = synthetic_calls(11, 2000)
    paths = _logs(tmp_path, rows, files=3)
    ordered = [row for k in range(3) for row in rows[k::3]]
    build("model_calls", {"calls": paths}, {"csv": tmp_path / "t.csv", "md": tmp_path / "t.md"}, {})
    write_csv(reference_model_calls(ordered), tmp_path / "ref.csv")
    assert (tmp_path / "t.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()
    assert (tmp_path / "t.md").read_text() == markdown(reference_model_calls(ordered), "model_calls")


def _nan_as_marker(records):
    return [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in records]


def test_call_totals_count_exactly_with_missing_tokens_costs_and_failures(tmp_path):
    base = {"stage": "judge_safety:m:j1", "endpoint": "j1", "model": "openai/j1", "item_id": "x", "prompt": "p_safety",
            "prompt_version": 2}
    calls = [{**base, "cache_hit": True, "status": "ok", "tokens_in": 100, "tokens_out": 10, "cost_usd": 0.25,
              "latency_s": 0.0},
             {**base, "cache_hit": False, "status": "ok", "tokens_in": None, "tokens_out": None, "cost_usd": None,
              "latency_s": 1.5},
             {**base, "cache_hit": False, "status": "failed", "tokens_in": None, "tokens_out": None, "cost_usd": None,
              "latency_s": None},
             {**base, "stage": "judge_safety:m:j2", "cache_hit": False, "status": "unparseable", "tokens_in": 7,
              "tokens_out": 3, "cost_usd": 0.125, "latency_s": 2.25},
             {**base, "stage": "judge_safety:m:j2", "cache_hit": False, "status": "truncated", "tokens_in": 7,
              "tokens_out": 3, "cost_usd": 0.125, "latency_s": 0.5},
             {**base, "stage": "tag_steps", "endpoint": "t", "model": "openai/t", "cache_hit": False,
              "status": "failed", "tokens_in": None, "tokens_out": None, "cost_usd": None, "latency_s": 3.0}]
    table = model_calls(calls)
    assert _nan_as_marker(table.to_dict("records")) == _nan_as_marker([
        {"stage": "judge_safety:m:j1", "endpoint": "j1", "model": "openai/j1", "requests": 3, "cache_hits": 1, "ok": 2,
         "unparseable": 0, "truncated": 0, "refused": 0, "failed": 1, "tokens_in": 100.0, "tokens_out": 10.0,
         "cost_usd": 0.25},
        {"stage": "judge_safety:m:j2", "endpoint": "j1", "model": "openai/j1", "requests": 2, "cache_hits": 0, "ok": 0,
         "unparseable": 1, "truncated": 1, "refused": 0, "failed": 0, "tokens_in": 14.0, "tokens_out": 6.0,
         "cost_usd": 0.25},
        # No priced call: no cost (NaN in the float column, an empty CSV cell), never $0.
        {"stage": "tag_steps", "endpoint": "t", "model": "openai/t", "requests": 1, "cache_hits": 0, "ok": 0,
         "unparseable": 0, "truncated": 0, "refused": 0, "failed": 1, "tokens_in": 0.0, "tokens_out": 0.0,
         "cost_usd": math.nan}])
    # A call without tokens makes the column float, as in pandas.
    assert str(table["tokens_in"].dtype) == "float64" and str(table["cost_usd"].dtype) == "float64"
    summary = _nan_as_marker(stage_summary(calls).to_dict("records"))
    assert summary == [
        {"stage": "tag_steps", "requests": 1, "cache_hits": 0, "ok": 0, "unparseable": 0, "truncated": 0, "refused": 0,
         "failed": 1, "tokens_in": 0, "tokens_out": 0, "cost_usd": "NaN", "latency_s": 3.0, "prompts": "p_safety v2"},
        {"stage": "judge_safety", "requests": 5, "cache_hits": 1, "ok": 2, "unparseable": 1, "truncated": 1,
         "refused": 0, "failed": 1, "tokens_in": 114, "tokens_out": 16, "cost_usd": 0.5, "latency_s": 4.2,
         "prompts": "p_safety v2"}]
    _same_table(table, reference_model_calls(calls), "model_calls", tmp_path)
    _same_table(stage_summary(calls), reference_stage_summary(calls), None, tmp_path)
    assert model_calls([]).empty and stage_summary([]).empty
