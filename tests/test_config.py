"""Configuration: Snakemake's overrides, the schema's switch-dependent keys, references to
undefined models or roles, and canonical params."""

import copy

import pytest
import yaml

from aura_eval.workflow_config import ConfigError, canonical, check_config, missing_keys
from tests.workflow import ROOT, planned_jobs, scratch_copy, snakemake

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return scratch_copy(tmp_path_factory.mktemp("config"))


def _config_file(work, name, config):
    path = work / "config" / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _fails(work, *args) -> str:
    proc = snakemake(work, *args, "-n", check=False)
    assert proc.returncode != 0
    return proc.stdout + proc.stderr


def test_config_override_applies_to_the_default_config(work):
    jobs = planned_jobs(work, "--config", "seeds=3")
    assert jobs["select_seeds"] == 1 and jobs["report"] == 1
    # A mapping on the command line is merged into the config's (the other llm keys stay).
    assert planned_jobs(work, "--config", "seeds=3", "llm={cache: cache/other.sqlite}")["tag_steps"] == 1


def test_a_config_file_is_complete_on_its_own(work):
    partial = {k: v for k, v in DEFAULT.items() if k != "agents"}
    out = _fails(work, "--configfile", str(_config_file(work, "partial.yaml", partial)))
    # The default's agents are not inherited: its action-only agent now names nobody.
    assert "action_only.agents names 'smollm2-135m', which is not under 'agents'" in out


@pytest.mark.parametrize("switch, key", [("five_judge_panel", "validation_judges"),
                                         ("vendor_swap", "replacement_judge")])
def test_switch_dependent_roles_are_required(work, switch, key):
    config = copy.deepcopy(DEFAULT)
    del config["roles"][key]
    out = _fails(work, "--configfile", str(_config_file(work, f"no-{key}.yaml", config)))
    assert f"'{key}' is a required property" in out
    config["reliability"][switch] = False
    if switch == "five_judge_panel":  # the audit sample then comes from the panel's own labels
        planned_jobs(work, "--configfile", str(_config_file(work, f"off-{key}.yaml", config)))


def test_undefined_model_and_misspelled_role_stop_before_any_job(work):
    config = copy.deepcopy(DEFAULT)
    config["roles"]["reviewers"] = ["smollm2-judge-1", "no-such-model"]
    out = _fails(work, "--configfile", str(_config_file(work, "undefined.yaml", config)))
    assert "role 'reviewers' names model 'no-such-model', which is not under 'models'" in out
    config = copy.deepcopy(DEFAULT)
    config["roles"]["judgs"] = config["roles"].pop("judges")
    out = _fails(work, "--configfile", str(_config_file(work, "misspelled.yaml", config)))
    assert "unknown role(s) judgs under 'roles'" in out


def test_check_config_names_the_reference():
    config = copy.deepcopy(DEFAULT)
    check_config(config)
    config["agents"]["smollm2-135m"]["model"] = "missing"
    with pytest.raises(ConfigError, match="agent 'smollm2-135m' names model 'missing'"):
        check_config(config)
    config = copy.deepcopy(DEFAULT)
    config["action_only"]["agents"] = ["nobody"]
    with pytest.raises(ConfigError, match="action_only.agents names 'nobody'"):
        check_config(config)
    config = copy.deepcopy(DEFAULT)
    config["roles"]["taggr"] = "smollm2"
    with pytest.raises(ConfigError, match="unknown role"):
        check_config(config)
    config = copy.deepcopy(DEFAULT)
    config["reliability"]["calibration_agents"] = ["smollm2-135m", "gpt-9"]
    with pytest.raises(ConfigError) as err:
        check_config(config)
    assert str(err.value) == ("config: reliability.calibration_agents names 'gpt-9', which is not under 'agents' "
                              "(defined: smollm2-135m)")
    config = copy.deepcopy(DEFAULT)
    config["validation"]["annotators_per_sample"] = 4
    with pytest.raises(ConfigError) as err:
        check_config(config)
    assert str(err.value) == ("config: validation.annotators_per_sample is 4, but validation.annotators names "
                              "only 3 annotator(s)")
    config["validation"]["annotators_per_sample"] = 3
    check_config(config)


def test_calibration_agent_and_annotator_count_stop_before_any_job(work):
    config = copy.deepcopy(DEFAULT)
    config["reliability"]["calibration_agents"] = ["nobody"]
    out = _fails(work, "--configfile", str(_config_file(work, "no-calibration-agent.yaml", config)))
    assert "reliability.calibration_agents names 'nobody', which is not under 'agents'" in out
    config = copy.deepcopy(DEFAULT)
    config["validation"]["annotators_per_sample"] = 5
    out = _fails(work, "--configfile", str(_config_file(work, "too-few-annotators.yaml", config)))
    assert "validation.annotators_per_sample is 5, but validation.annotators names only 3" in out
    del config["validation"]["annotators_per_sample"]
    out = _fails(work, "--configfile", str(_config_file(work, "no-per-sample.yaml", config)))
    assert "'annotators_per_sample' is a required property" in out


def test_canonical_sorts_mappings_and_keeps_lists():
    value = {"b": [{"y": 1, "x": 2}, 3], "a": {"d": 1, "c": 2}}
    out = canonical(value)
    assert list(out) == ["a", "b"] and list(out["a"]) == ["c", "d"]
    assert out["b"] == [{"x": 2, "y": 1}, 3] and list(out["b"][0]) == ["x", "y"]
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})


def test_a_missing_key_stops_a_real_run_before_its_first_job(work, monkeypatch):
    monkeypatch.delenv("AURA_UNSET_CRED", raising=False)
    config = copy.deepcopy(DEFAULT)
    config["models"]["remote"] = {"model": "openai/remote-model", "api_base": "http://127.0.0.1:9/v1",
                                  "api_key_env": "AURA_UNSET_CRED"}
    config["roles"]["tagger"] = "remote"
    path = _config_file(work, "unset-key.yaml", config)
    planned_jobs(work, "--configfile", str(path))  # a dry run makes no call: no key needed
    proc = snakemake(work, "results/seeds/seeds.jsonl", "--configfile", str(path), check=False)
    assert proc.returncode != 0
    assert "model 'remote' (openai/remote-model) needs AURA_UNSET_CRED, which is not set" in proc.stdout + proc.stderr
    assert not (work / "results/seeds/seeds.jsonl").exists()
    config["llm"]["replay"] = True  # replay makes no call either
    assert missing_keys(config, {}) == []


def test_key_variables_of_models_in_use():
    config = copy.deepcopy(DEFAULT)
    assert missing_keys(config, {}) == []  # the embedded model needs no key
    config["models"]["smollm2"] = {"model": "anthropic/claude-opus-4-6"}
    config["models"]["unused"] = {"model": "openai/gpt-5.4"}
    assert missing_keys(config, {}) == [
        "model 'smollm2' (anthropic/claude-opus-4-6) needs ANTHROPIC_API_KEY, which is not set"]
    assert missing_keys(config, {"ANTHROPIC_API_KEY": "x"}) == []
