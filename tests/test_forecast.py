"""The forecast: calls per stage x model from the config and the files that exist, tokens, dollars
(unpriced never $0, batch at half price), the wall time the rate limits imply, and the paper's run."""

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from aura_eval.analyze import bands
from aura_eval.analyze import forecast as fc
from aura_eval.analyze import forecast_text
from aura_eval.__main__ import main
from aura_eval.construct.seeds import load_seeds

# the forecast counts tokens with litellm's token_counter (its import: seconds)
pytestmark = pytest.mark.suite

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))


def by_cell(result):
    return {(r["stage"], r["endpoint"]): r for r in result["rows"]}


def by_cell_of(result, stage):
    return {endpoint: r for (s, endpoint), r in by_cell(result).items() if s == stage}


def bands_of(result, stage):
    return {endpoint: (r["calls_low"], r["calls"], r["calls_high"]) for endpoint, r in by_cell_of(result, stage).items()}


def judged(n):
    """The calls band of n rows' judge requests before any rollout: the judgeable share's (bands.JUDGEABLE),
    of which the distinct ones' (bands.DISTINCT: alike requests are paid once)."""
    low, point, high = bands.JUDGEABLE
    d = bands.DISTINCT
    return math.floor(n * low * d[0]), round(n * point * d[1]), math.ceil(n * high * d[2])


def calls_of(result, stage):
    return {endpoint: r["calls"] for (s, endpoint), r in by_cell(result).items() if s == stage}


@pytest.fixture
def run_root(tmp_path):
    """A working directory with the raw R-Judge files and a dataset of 5 items, 3 rollouts judgeable."""
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "rjudge").symlink_to(ROOT / "data" / "raw" / "rjudge")
    seeds = load_seeds(ROOT / "data" / "raw" / "rjudge")[:5]
    items = [{"item_id": f"{s['seed_id']}.original", "seed_id": s["seed_id"], "domain": s["domain"],
              "profile": s["profile"], "steps": s["steps"], "pair_label": "NSP", "dimension": "original",
              "reference_rationale": s["risk_description"]} for s in seeds]
    (tmp_path / "results" / "dataset").mkdir(parents=True)
    (tmp_path / "results" / "dataset" / "aura_eval.jsonl").write_text(
        "".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return tmp_path, items


def test_calls_follow_the_config_and_the_dataset(run_root):
    root, items = run_root
    config = load(".test/config/two_seeds.yaml")
    result = fc.forecast(config, root=root)
    rows = len(items)
    roles, rel = config["roles"], config["reliability"]
    (agent,) = config["agents"]
    subset = min(config["action_only"]["n_items"], rows)  # the agent answers the action-only prompt too
    assert calls_of(result, "tag_steps") == {roles["tagger"]: config["seeds"]}
    assert calls_of(result, "rollout") == {config["agents"][agent]["model"]: rows + subset}
    # Type per ReAct row and detection per ReAct row with a thought, type only per action-only row;
    # safety once per row; of the rows, the judgeable share (no rollout exists yet: 60%, 85%, 100%),
    # and of those, the share with a thought (50%, 90%, 100%); of all, the distinct ones (75%, 100%, 100%).
    j, t, d = bands.JUDGEABLE, bands.THOUGHT, bands.DISTINCT
    assert bands_of(result, "judge_detection_type") == {judge: (
        math.floor((rows * j[0] * (1 + t[0]) + subset * j[0]) * d[0]), round(rows * j[1] * (1 + t[1]) + subset * j[1]),
        2 * rows + subset) for judge in roles["judges"]}
    assert bands_of(result, "judge_safety") == {j: judged(rows + subset) for j in roles["judges"]}
    calibration = rel["calibration_items"] * len(rel["calibration_agents"])
    assert rows * j[0] >= calibration  # the sample is full even at the judgeable share's low
    # The five-judge panel: the main panel's judges ask what they asked before (0, at most all three
    # axes again, for safety under the plurality's type); the two added judges type and safety per item
    # and detection per item with a thought.
    five = by_cell_of(result, "reliability:five_judge")
    assert {j: (r["calls_low"], r["calls"], r["calls_high"]) for j, r in five.items()} == {
        judge: (0, 0, 3 * calibration) if judge in roles["judges"] else (
            math.floor(calibration * (2 + t[0]) * d[0]), round(calibration * (2 + t[1])), 3 * calibration)
        for judge in roles["validation_judges"]}
    # Repeats run at temperature 0: a judge whose entry samples at 0 asked the first already (paid there).
    at_zero = {j: config["models"][j]["params"].get("temperature") == 0 for j in roles["judges"]}
    assert calls_of(result, "reliability:repeats") == {
        judge: round(calibration * (2 + t[1]) * (rel["repeats"] - at_zero[judge])) for judge in roles["judges"]}
    # Every panel judge shares the agent's vendor, so all three seats go to the replacement.
    # The replacement takes every seat and asks each request once (three axes per item); no seat is kept.
    assert {j: c for j, c in calls_of(result, "reliability:vendor_swap").items() if c} == {
        roles["replacement_judge"]: round(rel["vendor_swap_items"] * (2 + t[1]))}
    # Construction has no files here: the paper's yields from 2 of 157 seeds (a second prefix for 54
    # of 157), as an interval at this size, marked estimated.
    relevance = by_cell(result)[("relevance", roles["relevance"])]
    assert (relevance["calls"], relevance["counts"], relevance["keys"]) == (round(2 * 211 / 157), "estimated",
                                                                           "estimated")
    # 2 seeds: 2 at-trigger prefixes and 0 to 1.9 pre-execution ones (1.96 sd at 2 trials)
    assert relevance["calls_low"] == 2 and relevance["calls_high"] == 4
    rollout = by_cell(result)[("rollout", "smollm2-agent")]
    # The action-only subset has no file yet: its count follows the dataset, its keys are estimated.
    assert (rollout["counts"], rollout["keys"]) == ("files", "estimated+rendered")
    # The embedded model is free, and says so; output tokens between the floor and max_tokens (160 < 600).
    assert relevance["usd"] == 0.0 and relevance["price_source"] == "in-process"
    assert by_cell(result)[("tag_steps", "smollm2")]["tokens_out"] == 2 * 120
    assert relevance["tokens_out_high"] == relevance["calls_high"] * 500
    assert relevance["tokens_out_low"] < relevance["tokens_out"] <= relevance["calls_high"] * 500


def test_real_rollouts_are_counted(run_root):
    root, items = run_root
    config = load(".test/config/two_seeds.yaml")
    rollouts = [{"item_id": i["item_id"], "status": status, "thought": thought, "action": "act"}
                for i, (status, thought) in zip(items, [("ok", "t"), ("ok", "t"), ("ok", None), ("failed", None),
                                                        ("unparseable", None)])]
    (root / "results" / "rollouts").mkdir(parents=True)
    (root / "results" / "rollouts" / "smollm2-135m.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rollouts), encoding="utf-8")
    result = fc.forecast(config, root=root)
    subset = config["action_only"]["n_items"]  # the action-only run has no rollouts yet
    # the ReAct run's 3 judgeable rollouts, 2 with a thought; the action-only run's 85% of its subset
    assert calls_of(result, "judge_detection_type")["smollm2-judge-1"] == round((2 + 3) + subset * bands.JUDGEABLE[1])
    assert calls_of(result, "judge_safety")["smollm2-judge-1"] == round(3 + subset * bands.JUDGEABLE[1])


def priced_mock():
    config = load(".test/config/mock.yaml")
    config["models"]["judge-1"]["model"] = "openai/gpt-4o"  # in litellm's map
    config["models"]["judge-2"]["price"] = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}
    config["models"]["judge-2"]["batch"] = True
    return config


def test_dollars_unpriced_and_batch_at_half(run_root):
    root, _ = run_root
    result = fc.forecast(priced_mock(), root=root, results=False)
    cells = by_cell(result)
    gpt4o, priced, unpriced = (cells[("judge_safety", j)] for j in ("judge-1", "judge-2", "judge-3"))
    assert gpt4o["usd"] == pytest.approx(gpt4o["tokens_in"] * 2.5e-6 + gpt4o["tokens_out"] * 1e-5, rel=1e-3)
    assert gpt4o["usd_batch"] == pytest.approx(gpt4o["usd"] / 2)  # the map's *_batches fields: half
    assert gpt4o["price_source"] == "litellm cost map"
    # batch: true with a config price and no batch_* prices: half of it.
    assert priced["usd"] == pytest.approx((priced["tokens_in"] * 2.0 + priced["tokens_out"] * 8.0) / 1e6 / 2, rel=1e-3)
    assert priced["usd_standard"] == pytest.approx(2 * priced["usd"])
    assert priced["price_source"] == "config price, half for batch"
    assert (unpriced["usd"], unpriced["price_source"]) == (None, "unpriced")
    printed = forecast_text.text(result)
    assert f"{unpriced['calls']:>8,} " in printed and "unpriced" in printed and "judge-3" in printed
    assert result["totals"]["usd"] == pytest.approx(sum(r["usd"] for r in result["rows"] if r["usd"] is not None))
    assert "judge-3" in result["totals"]["unpriced_models"]
    # The mock's entries set no max_tokens: no bound on their output, so neither on the dollars; never a number
    # that looks bounded. The unpriced judge's dollars are not in the band, and the text says so.
    assert result["ceiling"]["usd"] is None and {"judge-1", "judge-2"} <= set(result["ceiling"]["uncapped"])
    assert result["total"]["usd_high"] is None and gpt4o["usd_high"] is None and gpt4o["tokens_out_high"] is None
    assert "unbounded (no max_tokens: " in printed and "their dollars are not in the band" in printed


def test_wall_time_from_the_rate_limits(run_root):
    root, _ = run_root
    config = priced_mock()
    config["llm"]["rate_limits"] = {"openai/gpt-4o": {"rpm": 60}}
    result = fc.forecast(config, root=root, results=False)
    limits = {b["bucket"]: b for b in result["limits"]}
    gpt4o_calls = sum(r["calls"] for r in result["rows"] if r["model"] == "openai/gpt-4o")
    assert limits["openai/gpt-4o"]["wall_s"] == pytest.approx(60.0 * gpt4o_calls / 60)
    # judge-2 runs in batch mode: not paced by the rate limits, so not in any bucket.
    batch_calls = sum(r["calls"] for r in result["rows"] if r["endpoint"] == "judge-2")
    assert sum(b["calls"] for b in result["limits"]) == result["totals"]["calls"] - batch_calls
    assert limits["openai"]["wall_s"] is None and "openai" in result["unlimited"]
    # The unlimited bucket takes its calls over the job's concurrency times the assumed latency (5 s).
    assert result["wall_s"] >= 60.0 * gpt4o_calls / 60 and result["wall_from"].endswith("(rate limits where set)")
    # The mock's entries set no max_tokens: their output, so the wall time's high, is unbounded.
    assert result["wall_s_low"] <= result["wall_s"] and result["wall_s_high"] is None
    assert "no limit configured" in forecast_text.text(result)


def test_the_paper_config_offline_without_files(tmp_path):
    """config/paper.yaml with no results: the paper's funnel, 1,249 rows per agent; with the ten
    evaluated models the text does not name added as stand-ins, about the paper's 290k calls."""
    config = load("config/paper.yaml")
    result = fc.forecast(config, root=ROOT, results=False)
    rollout = calls_of(result, "rollout")
    n_action_only = len(config["action_only"]["agents"])
    assert sum(rollout.values()) == 1249 * len(config["agents"]) + 150 * n_action_only
    # 157 seeds, two of whose tagging prompts repeat another's word for word: 155 answers paid.
    assert calls_of(result, "tag_steps") == {"claude-opus-4.6": 155}
    assert "2 requests asked identically" in by_cell(result)[("tag_steps", "claude-opus-4.6")]["note"]
    assert calls_of(result, "review_pairs") == {"claude-opus-4.6": 590, "gpt-5.2": 590, "deepseek-v3.1": 590}
    assert all(r["counts"] in ("estimated", "config") for r in result["rows"])
    # Every entry is priced (litellm's map, else the entry's `price`): no call is left out of the dollars.
    assert (result["totals"]["unpriced_calls"], result["totals"]["unpriced_models"]) == (0, [])
    gemini = [r for r in result["rows"] if r["endpoint"] == "gemini-3.1-pro"]
    assert len({r["price_source"] for r in gemini}) == 1 and "unpriced" not in {r["price_source"] for r in gemini}
    assert all(0 < r["usd_batch"] < r["usd_standard"] for r in gemini if r["calls"])
    # a panel judge in the five-judge panel or a kept vendor-swap seat asks what it asked before: 0 at the point
    assert {r["stage"] for r in gemini if r["calls"]} == {"judge_detection_type", "judge_safety",
                                                          "reliability:repeats"}
    for k in range(20 - len(config["agents"])):  # stand-ins of their own (a shared entry would be paid once)
        config["models"][f"unnamed-{k}"] = {**config["models"]["qwen3-32b-agent"],
                                            "params": {**config["models"]["qwen3-32b-agent"]["params"], "seed": k}}
        config["agents"][f"unnamed-{k}"] = {"model": f"unnamed-{k}", "group": "open-weight", "vendor": "alibaba"}
    total = fc.forecast(config, root=ROOT, results=False)["total"]
    # the paper's requests; the point counts answers paid, of the rows the judges see (85%) and, for
    # detection, of those with a thought (90%)
    assert total["calls_low"] < 290_000 < total["calls_high"] and 0.75 * 290_000 < total["calls"] < 1.1 * 290_000


def test_the_command_prints_and_writes(run_root, capsys):
    root, _ = run_root
    configfile = root / "mock.yaml"
    configfile.write_text(yaml.safe_dump(priced_mock()), encoding="utf-8")
    assert main(["forecast", "--configfile", str(configfile), "--root", str(root), "--out", str(root / "fc")]) == 0
    out = capsys.readouterr().out
    assert "unpriced" in out and "judge_safety" in out and "written:" in out
    assert re.search(r"^preflight \(make preflight\): \d+ requests, at most \$\d+\.\d{4}", out, re.MULTILINE)
    written = json.loads((root / "fc" / "forecast.json").read_text())
    header = (root / "fc" / "forecast.csv").read_text().splitlines()[0]
    assert header.split(",") == fc.ROWS_COLUMNS and len(written["rows"]) > 0


def test_the_report_table_puts_the_forecast_beside_the_call_logs():
    from aura_eval.analyze.calls import forecast_vs_actual

    predicted = [{"stage": "rollout", "endpoint": "a", "calls": 10, "tokens_in": 1000, "tokens_out": 400, "usd": 0.5,
                  "price_source": "litellm cost map"},
                 {"stage": "judge_safety", "endpoint": "j", "calls": 4, "tokens_in": 80, "tokens_out": 20, "usd": None,
                  "price_source": "unpriced"}]
    call = {"tokens_in": 90, "tokens_out": 30, "cost_usd": 0.05, "attempts": 1, "cache_hit": False}
    calls = ([{"stage": "rollout:a", "endpoint": "a", **call}] * 3
             + [{"stage": "rollout:a.action_only", "endpoint": "a", **call, "cache_hit": True, "attempts": 0}]
             + [{"stage": "judge_safety:a:j", "endpoint": "j", **call, "cost_usd": None}] * 2)
    df = forecast_vs_actual(predicted, calls)
    rollout, judge, total = (df.iloc[i].to_dict() for i in range(3))
    assert (rollout["forecast_calls"], rollout["requests"], rollout["sent"], rollout["tokens_in"]) == (10, 4, 3, 360)
    assert (rollout["forecast_usd"], rollout["cost_usd"], rollout["spent_usd"]) == (0.5, 0.2, 0.15)
    assert judge["price"] == "unpriced" and pd.isna(judge["forecast_usd"]) and pd.isna(judge["cost_usd"])
    assert (total["forecast_calls"], total["requests"], total["forecast_usd"], total["price"]) == (
        14, 6, 0.5, "1 rows unpriced")


def test_a_config_that_says_only_what_differs_is_forecast_with_the_workflow_s_defaults(tmp_path, capsys):
    """The command fills what the file leaves out as the workflow does: the schema's defaults (all 157
    seeds) and those that depend on other keys (the calibration agents), said on stderr."""
    model = {"model": "openai/gpt-5.4", "vendor": "openai"}
    configfile = tmp_path / "minimal.yaml"
    configfile.write_text(yaml.safe_dump({
        "models": {"m": model, "agent": {**model, "vendor": "meta"}},
        "roles": {"tagger": "m", "judges": ["m"], "generator": "m", "reviewers": ["m"]},
        "agents": {"a": {"model": "agent", "group": "open-weight", "vendor": "meta"}}}), encoding="utf-8")
    assert main(["forecast", "--configfile", str(configfile), "--root", str(ROOT), "--no-results",
                 "--out", str(tmp_path / "fc")]) == 0
    err = capsys.readouterr().err
    assert "config: reliability.calibration_agents not set; using [a]" in err
    rows = json.loads((tmp_path / "fc" / "forecast.json").read_text())["rows"]
    assert {r["calls"] for r in rows if r["stage"] == "tag_steps"} == {155}  # 157 seeds, two prompts repeated


def test_an_agent_given_by_an_inspect_log_is_forecast_no_rollout_call(run_root):
    root, items = run_root
    config = load(".test/config/two_seeds.yaml")
    (agent,) = config["agents"]
    config["agents"]["inspected"] = {"inspect_log": "logs/x.eval", "group": "frontier", "vendor": "elsewhere"}
    result = fc.forecast(config, root=root)
    rows, subset = len(items), min(config["action_only"]["n_items"], len(items))
    assert calls_of(result, "rollout") == {config["agents"][agent]["model"]: rows + subset}  # its own only
    # Its rollouts are judged as any agent's: one more ReAct run per panel judge.
    assert bands_of(result, "judge_safety") == {j: judged(2 * rows + subset) for j in config["roles"]["judges"]}


def test_token_counts_equal_litellm_s_token_counter_on_the_workflow_s_prompts(rjudge_dir):
    """aura_eval.util.tokens counts as litellm's token_counter does for gpt-4o (what the forecast used
    before it stopped importing litellm): every seed's trajectory, long texts across chunk
    boundaries, special tokens as text, a name field."""
    import litellm

    from aura_eval.construct.tagging import render_steps
    from aura_eval.util.tokens import chat_tokens

    seeds = load_seeds(rjudge_dir)
    prompts = [[{"role": "system", "content": "You judge."}, {"role": "user", "content": render_steps(s["steps"])}]
               for s in seeds]
    prompts += [[{"role": "user", "content": "x<|endoftext|>y " * 700, "name": "agent"}],
                [{"role": "user", "content": "é" * 3000}], []]
    ours = [chat_tokens(p) for p in prompts]
    assert ours == [litellm.token_counter(model="gpt-4o", messages=p) for p in prompts]
    assert len(seeds) == 157 and max(ours) > 1000


def test_the_paper_s_cost_band_in_the_readme_and_the_guide_is_the_forecast_s(tmp_path):
    """The README's and the guide's numbers for config/paper.yaml (and with the judges in batch) are
    what the forecast prints before any call."""
    from aura_eval.workflow.config import complete_config, load_configs

    def dollars(value):
        return f"${value:,.0f}"

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    guide = " ".join((ROOT / "docs/running-the-paper.md").read_text(encoding="utf-8").split())
    for files, where in ((["config/paper.yaml"], "at standard"), (["config/paper.yaml", "config/paper-batch-judges.yaml"],
                                                                   "with the")):
        config = complete_config(load_configs([str(ROOT / f) for f in files]))[0]
        result = fc.forecast(config, root=ROOT, results=False)
        t = result["total"]
        said = f"**{dollars(t['usd'])} (band {dollars(t['usd_low'])} to {dollars(t['usd_high'])})** {where}"
        assert said in readme and said in guide, said
        assert f"ceiling {dollars(result['ceiling']['usd'])}" in guide or f"and {dollars(result['ceiling']['usd'])}" in guide
    t = fc.forecast(complete_config(load_configs([str(ROOT / "config/paper.yaml")]))[0], root=ROOT, results=False)["total"]
    assert f"{t['calls']:,} calls ({t['calls_low']:,} to {t['calls_high']:,})" in guide
