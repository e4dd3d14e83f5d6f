"""The way back from inspect_ai (aura_eval/evaluate/inspect_log.py): a log of the aura_eval task as an
agent's rollouts, the refusals of a log that does not fit, and what the config accepts."""

import copy

import pytest

from aura_eval.workflow import jobs
from aura_eval.util.jsonl import read_jsonl, write_jsonl
from aura_eval.vocab import ACTION_ONLY, REACT
from aura_eval.workflow.config import ConfigError, check_config, fill_defaults
from tests.inspect_mock import PROSE, run_task, token
from tests.test_inspect_task import ACTIONS, _items

# inspect_ai (seconds to import) is loaded by the tests, never at collection: every test here is suite.
pytestmark = [pytest.mark.suite, pytest.mark.xdist_group("inspect_log")]  # its module fixture built once


def inspect_log():
    """aura_eval.evaluate.inspect_log, imported where a test needs it (it loads inspect_ai)."""
    from aura_eval.evaluate import inspect_log

    return inspect_log


@pytest.fixture(scope="module")
def logged(tmp_path_factory, rjudge_dir):
    folder = tmp_path_factory.mktemp("inspect_log")
    items = _items(rjudge_dir)
    write_jsonl(folder / "items.jsonl", items, key="item_id")
    log = run_task(folder / "items.jsonl", folder / "logs", lambda text: ACTIONS[token(text)])
    return folder, items, log


def test_a_logs_samples_become_the_agents_rollout_rows(logged):
    folder, items, log = logged
    counts = inspect_log().rollout_from_log(folder / "items.jsonl", log.location, folder / "rollouts.jsonl", folder / "calls.jsonl",
                              "inspected")
    assert counts == {"ok": 5, "unparseable": 1, "truncated": 0, "refused": 0, "failed": 0}
    by_id = {r["item_id"]: r for r in read_jsonl(folder / "rollouts.jsonl")}
    tokens = {i["item_id"]: i["steps"][0]["content"].split()[0].removeprefix("TOKEN-") for i in items}
    for item_id, row in by_id.items():
        expected = ACTIONS[tokens[item_id]]
        assert (row["agent"], row["format"], row["action"]) == ("inspected", REACT, expected)
        assert row["model"] == "mockllm/model" and row["inspect"]["eval_id"] == log.eval.eval_id
        assert row["status"] == ("ok" if expected else "unparseable")
    assert {r["raw_response"] for r in by_id.values() if r["status"] == "unparseable"} == {PROSE}
    assert read_jsonl(folder / "calls.jsonl") == []


def test_a_log_that_does_not_fit_is_refused_naming_file_and_item(logged):
    folder, items, log = logged
    with pytest.raises(inspect_log().InspectLogError, match=r"inspect log .*: no sample for item .* \(1 of 7 missing"):
        extra = dict(items[0], item_id="web-999.at_trigger.original")
        inspect_log().log_rollouts(log.location, items + [extra], "inspected", REACT)
    with pytest.raises(inspect_log().InspectLogError, match=f"item {sorted(i['item_id'] for i in items)[0]} .* is not among the 5"):
        inspect_log().log_rollouts(log.location, sorted(items, key=lambda i: i["item_id"])[1:], "inspected", REACT)
    with pytest.raises(inspect_log().InspectLogError, match="the react format .* needs action_only"):
        inspect_log().log_rollouts(log.location, items, "inspected", ACTION_ONLY)
    changed = copy.deepcopy(items)
    changed[2]["steps"][0]["content"] += " (edited)"
    with pytest.raises(inspect_log().InspectLogError, match=f"item {changed[2]['item_id']}: the sample's input is not the prompt"):
        inspect_log().log_rollouts(log.location, changed, "inspected", REACT)


def _config(**agent) -> dict:
    models = {m: {"model": "openai/x", "vendor": "v"} for m in ("a", "j")}
    return {"models": models, "roles": {"judges": ["j", "j", "j"]},
            "agents": {"model-agent": {"model": "a", "group": "frontier", "vendor": "v"},
                       "inspected": {"group": "open-weight", "vendor": "w", **agent}},
            "action_only": {}, "reliability": {"calibration_agents": ["model-agent"]}}


def test_the_config_takes_an_inspect_log_instead_of_a_model():
    config = _config(inspect_log="logs/x.eval")
    fill_defaults(config)
    check_config(config)
    assert config["action_only"]["agents"] == ["model-agent"]  # no action-only log: not picked by default
    assert jobs.job_models(config, "agents", {"run": "inspected"}) == []
    assert jobs.run_inspect_log(config, "inspected") == "logs/x.eval"
    with pytest.raises(ConfigError, match="'inspected' names both a model and an inspect_log"):
        check_config(_config(inspect_log="x.eval", model="a"))
    with pytest.raises(ConfigError, match="'inspected' names neither"):
        check_config(_config())
    listed = _config(inspect_log="x.eval")
    listed["action_only"]["agents"] = ["inspected"]
    with pytest.raises(ConfigError, match="give its action-only log .* as inspect_log_action_only"):
        check_config(listed)
    listed["agents"]["inspected"]["inspect_log_action_only"] = "y.eval"
    check_config(listed)
    assert jobs.run_inspect_log(listed, "inspected.action_only") == "y.eval"


def test_pack_takes_each_agents_inspect_log(tmp_path):
    from aura_eval.tools.pack import PackError, inspect_logs

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.eval").write_bytes(b"log")
    config = _config(inspect_log="logs/a.eval", inspect_log_action_only="logs/b.eval")
    with pytest.raises(PackError, match=r"agent 'inspected': its inspect_log_action_only .*b.eval does not exist"):
        inspect_logs(config, tmp_path)
    (tmp_path / "logs" / "b.eval").write_bytes(b"log")
    assert inspect_logs(config, tmp_path) == {"inspect/inspected/a.eval": tmp_path / "logs/a.eval",
                                              "inspect/inspected/action_only/b.eval": tmp_path / "logs/b.eval"}
