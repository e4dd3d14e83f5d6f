"""The cost band against runs whose answers report real usage: the simulation (planted lengths,
hidden reasoning tokens, priced entries) and the mock run (the stub's usage). Before any call the
band holds what the run paid; recomputed from the files at each model stage's end it never widens;
at the end it is the actual; a finished run has nothing left; the status reads a run's files only."""

import csv
import json
import math
from pathlib import Path

import pytest
import yaml

from aura_eval.__main__ import main
from aura_eval.analyze import forecast as fc
from aura_eval.util.jsonl import read_jsonl
from aura_eval.workflow_config import complete_config

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
    assert result["ignored"] in fc.text(result)


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
