"""The cost band against runs whose answers report real usage: the simulation (planted lengths,
hidden reasoning tokens, priced entries) and the mock run (the stub's usage). Before any call the
band holds what the run paid; recomputed from the files at each model stage's end it never widens;
at the end it is the actual; a finished run has nothing left; the status reads a run's files only."""

import csv
from pathlib import Path

import pytest
import yaml

from aura_eval.__main__ import main
from aura_eval.analyze import bands
from aura_eval.analyze import forecast as fc
from aura_eval.analyze import forecast_text
from aura_eval.util.jsonl import read_jsonl
from aura_eval.workflow.config import complete_config
from tests import workflow

MEASURES = ("calls", "tokens_in", "tokens_out", "usd")


def run_config(work: Path) -> dict:
    return complete_config(yaml.safe_load((work / "results/run/config.yaml").read_text()))[0]


def band_rows(work: Path) -> list[dict]:
    with open(work / "results/tables/forecast_bands.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _num(value: str) -> float | None:
    return None if value == "" else float(value)


@pytest.mark.e2e
def test_the_band_before_any_call_holds_the_simulation_s_cost_and_narrows_to_it(sim_run):
    work, _ = sim_run
    rows = band_rows(work)
    stages = [r["at"] for r in rows if r["measure"] == "calls"]
    assert stages[0] == "before any call" and stages[-1] == "after reliability" and len(stages) == 12
    for measure in MEASURES:
        mine = [r for r in rows if r["measure"] == measure]
        actual = float(mine[0]["actual"])
        assert actual > 0, measure  # the simulation reports tokens and its entries are priced
        first, last = mine[0], mine[-1]
        assert first["held"] == "True", (measure, first)
        # every band after the first is no wider than the one before, and the last is the actual
        assert all(r["narrowed"] == "True" for r in mine[1:]), (measure, [r["narrowed"] for r in mine])
        assert _num(last["low"]) == pytest.approx(actual) and _num(last["high"]) == pytest.approx(actual)
        assert all(r["held"] == "True" for r in mine), measure
    # Once the rollouts are done, paid + the point of what is left is within 5% of the final calls.
    after_rollout = next(r for r in rows if r["measure"] == "calls" and r["at"] == "after rollout")
    assert abs(float(after_rollout["point"]) - float(after_rollout["actual"])) <= 0.05 * float(after_rollout["actual"])


@pytest.mark.e2e
def test_a_finished_simulation_has_nothing_left_and_its_paid_dollars_are_its_call_logs(sim_run):
    work, _ = sim_run
    config = run_config(work)
    result = fc.forecast(config, root=work)
    total = result["total"]
    assert (total["calls"], total["calls_high"], total["usd"], total["usd_high"]) == (0, 0, 0, 0)
    logged = [row for path in sorted((work / "results/calls").rglob("*.jsonl")) for row in read_jsonl(path)]
    answered = [row for row in logged if row["status"] != "failed"]
    # Each answer once: a key its job asked twice, or a judge on two panels, counts once.
    assert 0 < total["paid_calls"] <= len(answered)
    assert total["paid_usd"] <= sum(row["cost_usd"] for row in answered) + 1e-9
    assert total["paid_tokens_reasoning"] > 0  # the OpenAI and Google judges' hidden reasoning, reported apart
    assert any(row["tokens_reasoning"] for row in logged) and all("tokens_reasoning" in row for row in logged)


@pytest.mark.suite
def test_a_finished_run_has_nothing_left_and_the_status_says_what_it_paid(mock_run, capsys):
    work, _ = mock_run
    config = run_config(work)
    result = fc.forecast(config, root=work)
    total = result["total"]
    assert (total["calls_low"], total["calls"], total["calls_high"]) == (0, 0, 0)
    assert total["paid_calls"] > 0 and result["ignored"] is None
    assert main(["status", "--root", str(work)]) == 0
    out = capsys.readouterr().out
    assert f"paid: {total['paid_calls']:,} answers" in out and "left: 0 (band 0 to 0)" in out


@pytest.mark.suite
def test_a_forecast_of_another_config_ignores_the_results_and_says_so(mock_run):
    work, _ = mock_run
    config = run_config(work)
    config["seeds"] = 5  # another selection of seeds: results/ is not this run's
    result = fc.forecast(config, root=work)
    assert "lists 4 seeds and this config selects 5" in result["ignored"]
    assert result["total"]["paid_calls"] == 0 and result["total"]["calls"] > 0
    assert result["ignored"] in forecast_text.text(result)


@pytest.mark.suite
def test_one_more_agent_after_a_finished_run_prices_only_its_own_calls(mock_run):
    work, _ = mock_run
    config = run_config(work)
    before = fc.forecast(config, root=work)["total"]["paid_calls"]
    config["models"]["new-agent"] = {**config["models"]["agent"],
                                     "params": {**config["models"]["agent"]["params"], "seed": 99}}
    config["agents"]["new"] = {"model": "new-agent", "group": "frontier", "vendor": "newvendor"}
    result = fc.forecast(config, root=work)
    left = {(r["stage"], r["endpoint"]): r["calls"] for r in result["rows"] if r["calls"]}
    assert result["ignored"] is None and result["total"]["paid_calls"] == before
    # its rollouts and the panel's judgments of them, nothing else
    assert {stage for stage, _ in left} <= {"rollout", "judge_detection_type", "judge_safety"}
    assert left[("rollout", "new-agent")] > 0 and not any(
        endpoint == "agent" for (stage, endpoint) in left)


@pytest.mark.suite
def test_an_agent_sharing_a_model_entry_costs_nothing_more(mock_run):
    """Its rollouts are the same requests as the first agent's (rendered and keyed: already paid) and
    so are their judgments (estimated, and said so): nothing is left to pay."""
    work, _ = mock_run
    config = run_config(work)
    config["agents"]["twin"] = {**config["agents"][next(iter(config["agents"]))], "vendor": "twinvendor"}
    result = fc.forecast(config, root=work)
    assert result["total"]["calls_high"] == 0
    rows = {r["stage"]: r for r in result["rows"] if r["endpoint"] == "agent"}
    assert "requests asked identically by another stage x model" in rows["rollout"]["note"]


@pytest.mark.suite
def test_a_budget_below_the_band_is_said_before_any_call(mock_run):
    work, _ = mock_run
    config = run_config(work)
    for name in config["models"]:
        config["models"][name]["price"] = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}
        config["models"][name].setdefault("params", {})["max_tokens"] = 256
    config["llm"]["budget_usd"] = 0.01
    config["seeds"] = 5  # another run than the mock's: nothing paid yet (its results/ are ignored)
    line = forecast_text.budget_at_start(config, work)
    result = fc.forecast(config, root=work)
    assert result["total"]["usd_low"] > 0.01 and result["ceiling"]["usd"] > result["total"]["usd_high"]
    assert line.startswith("budget (llm.budget_usd) $0.01: paid $0.00 + left ") and "may pass it" in line
    config["llm"]["budget_usd"] = 1e6
    assert "covers the ceiling" in forecast_text.budget_at_start(config, work)


@pytest.mark.e2e
def test_a_pilot_s_files_narrow_a_larger_run_s_band(sim_run, tmp_path):
    """The simulation's 10-seed run read as the pilot of a 40-seed run: its models' answers replace the
    defaults (the output, so the dollars, narrow), and its funnel's yields the paper's where they
    contradict them (sim_small keeps more than the paper: the calls' band moves up)."""
    work, _ = sim_run
    config = run_config(work)
    config["seeds"] = 40
    (tmp_path / "data").symlink_to(work / "data")
    without = fc.forecast(config, root=tmp_path, results=False)
    seen = fc.forecast(config, root=tmp_path, results=False, pilot=work)
    assert seen["pilot"].startswith("from a pilot of 10 seeds")
    assert {r["output_from"].split(" (")[0] for r in seen["rows"] if r["calls"]} <= {"answers", "the model's earlier answers"}
    a, b = without["total"], seen["total"]
    for m in ("tokens_out", "usd"):
        assert b[f"{m}_high"] - b[f"{m}_low"] < (a[f"{m}_high"] - a[f"{m}_low"]) / 2, m
    funnel = fc.observed_yields(work)
    kept, reviewed = funnel["kept"][1], funnel["kept"][0]
    assert kept / reviewed > 0.85 and bands.contradicts("kept", funnel["kept"])  # 94% of 3-vote majorities
    assert b["calls"] > a["calls"]


GRID = {  # the usage every simulated model reports in each case of the 2-seed grid
    "short": {"default": {"input_factor": 1.0, "answer_tokens": [0, 0], "reasoning_tokens": [0, 0]}},
    "long": {"default": {"input_factor": 1.3, "answer_tokens": [500, 900], "reasoning_tokens": [100, 600]}},
}


def _grid_run(case: str):
    def build(work: Path) -> None:
        config = yaml.safe_load((work / ".test/config/sim_small.yaml").read_text())
        config["seeds"] = 2
        config["llm"]["simulation"]["usage"] = {**GRID[case], "models": {}}
        path = work / f"band_{case}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        workflow.snakemake(work, "results/tables/forecast_bands.csv", "--configfile", str(path))
    return build


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(GRID))
def test_at_two_seeds_the_band_holds_short_and_long_answers_with_hidden_reasoning(tmp_path_factory, case):
    """Two seeds (the widest binomial noise), every model answering at the visible length or at a drawn
    long one with hidden reasoning tokens and a tokenizer 30% above ours, priced: the band made before
    any call holds all four measures, narrows at every stage's end and ends at the actual."""
    work = workflow.shared_run(tmp_path_factory, f"band_{case}", _grid_run(case))
    rows = band_rows(work)
    for measure in MEASURES:
        mine = [r for r in rows if r["measure"] == measure]
        assert float(mine[0]["actual"]) > 0 and mine[0]["held"] == "True", (case, measure, mine[0])
        assert all(r["narrowed"] == "True" for r in mine[1:]) and all(r["held"] == "True" for r in mine), measure
        assert _num(mine[-1]["low"]) == _num(mine[-1]["high"]) == pytest.approx(float(mine[0]["actual"]))
    if case == "long":  # the reasoning is billed as output and said apart in the call logs
        logged = [row for path in (work / "results/calls").rglob("*.jsonl") for row in read_jsonl(path)]
        assert all(row["tokens_reasoning"] >= 100 and row["tokens_out"] >= 600 for row in logged
                   if row["status"] == "ok")
