"""Configuration: Snakemake's overrides and merged files, the defaults (the schema's and those
that depend on other keys), references to undefined models or roles, canonical params, and
config/README.md's table of keys."""

import copy
import re

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aura_eval import vocab
from aura_eval.tools import config_doc
from aura_eval.workflow.config import (DEPENDENT_DEFAULTS, SCHEMA, ConfigError, canonical, check_config, fill_defaults,
                                       load_schema, missing_keys, with_schema_defaults)
from tests.docs_claims import measured_jobs
from tests.workflow import AGENT_MOCK, ROOT, mock_model, planned_jobs, scratch_copy, snakemake

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
JUDGE_MOCK = '{"level": "D2", "action_type": "A2", "safety": "Safe", "reason": "mock"}'


def _vendor(vendor, entry):
    return {**entry, "vendor": vendor}


# A config that names only its models, roles and agents: everything else is a default. Five agents
# in three groups (so the first four calibrate and the action-only four span the groups); agent f1
# shares judge-a's vendor (so the vendor swap runs for it, with a replacement judge to find).
MINIMAL = {
    "models": {
        "tagger": mock_model('{"risk_trigger": 0, "execution_point": 1, "reason": "mock"}'),
        "judge-a": _vendor("vendor-a", mock_model(JUDGE_MOCK, seed=1)),
        "judge-b": _vendor("vendor-b", mock_model(JUDGE_MOCK, seed=2)),
        "judge-c": _vendor("vendor-c", mock_model(JUDGE_MOCK, seed=3)),
        "constructor": mock_model("{}"),
        "reviewer": _vendor("vendor-r", mock_model('{"keep": true}')),
        "agent": mock_model(AGENT_MOCK),
    },
    "roles": {"tagger": "tagger", "judges": ["judge-a", "judge-b", "judge-c"], "generator": "constructor",
              "reviewers": ["reviewer"]},
    "agents": {
        "f1": {"model": "agent", "group": "frontier", "vendor": "vendor-a"},
        "f2": {"model": "agent", "group": "frontier", "vendor": "vendor-x"},
        "o1": {"model": "agent", "group": "open-weight", "vendor": "vendor-y"},
        "o2": {"model": "agent", "group": "open-weight", "vendor": "vendor-y"},
        "s1": {"model": "agent", "group": "safety-tuned", "vendor": "vendor-z"},
    },
}
MINIMAL_FILLED = [
    "config: roles.relevance not set; using constructor",
    "config: roles.classifier not set; using constructor",
    "config: roles.pair_generator not set; using constructor",
    "config: roles.pair_reviewers not set; using [reviewer]",
    "config: roles.validation_judges not set; using [judge-a, judge-b, judge-c]",
    "config: roles.replacement_judge not set; using reviewer",
    "config: action_only.agents not set; using [f1, o1, s1, f2]",
    "config: reliability.calibration_agents not set; using [f1, f2, o1, o2]",
]


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


@pytest.mark.suite
def test_config_override_applies_to_the_default_config(work):
    jobs = planned_jobs(work, "--config", "seeds=3")
    assert jobs["select_seeds"] == 1 and jobs["report"] == 1
    # A mapping on the command line is merged into the config's (the other llm keys stay).
    assert planned_jobs(work, "--config", "seeds=3", "llm={cache: cache/other.sqlite}")["tag_steps"] == 1


@pytest.mark.suite
def test_a_config_file_never_inherits_the_default_s_agents(work):
    partial = {k: v for k, v in DEFAULT.items() if k != "agents"}
    out = _fails(work, "--configfile", str(_config_file(work, "partial.yaml", partial)))
    # The default's agents are not inherited: its action-only agent now names nobody.
    assert "action_only.agents names 'smollm2-135m', which is not under 'agents'" in out


def _plan(work, *args) -> tuple[dict[str, int], list[str]]:
    """{rule: job count} of a dry run, and the `config:` lines it printed (the defaults it filled)."""
    proc = snakemake(work, *args, "-n", "--quiet", "rules")
    jobs = {parts[0]: int(parts[1]) for parts in map(str.split, proc.stdout.splitlines())
            if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total"}
    return jobs, [line for line in proc.stderr.splitlines() if line.startswith("config: ")]


@pytest.mark.e2e  # Snakemake runs of 9-10 s: the slower tier keeps `make test` within 5 minutes
def test_switch_dependent_roles_default_to_the_config_s_models(work):
    default_jobs, filled = _plan(work)
    assert filled == []  # config/config.yaml sets every key that has a dependent default
    config = copy.deepcopy(DEFAULT)
    del config["roles"]["validation_judges"], config["roles"]["replacement_judge"]
    jobs, filled = _plan(work, "--configfile", str(_config_file(work, "no-switch-roles.yaml", config)))
    assert filled == [
        "config: roles.validation_judges not set; using [smollm2-judge-1, smollm2-judge-2, smollm2-judge-3]",
        "config: roles.replacement_judge not set; using smollm2-judge-4"]  # the one model of another vendor
    assert jobs == default_jobs
    # With no model of a vendor outside the panel's, the vendor swap has no replacement: it says so.
    config["models"]["smollm2-judge-4"]["vendor"] = "huggingface"
    out = _fails(work, "--configfile", str(_config_file(work, "no-replacement.yaml", config)))
    assert ("reliability.vendor_swap re-judges agent(s) smollm2-135m, but roles.replacement_judge is not set and no "
            "model under 'models' has a vendor outside the panel's (huggingface)") in out
    config["reliability"]["vendor_swap"] = False
    config["reliability"]["five_judge_panel"] = False  # the audit sample then comes from the panel's own labels
    jobs, filled = _plan(work, "--configfile", str(_config_file(work, "switches-off.yaml", config)))
    assert filled == [] and jobs["reliability"] == 1  # the repeats only


@pytest.mark.e2e  # Snakemake runs of 9-10 s: the slower tier keeps `make test` within 5 minutes
def test_a_config_naming_only_models_roles_and_agents_runs(work, tmp_path):
    path = _config_file(work, "minimal.yaml", MINIMAL)
    jobs, filled = _plan(work, "--configfile", str(path))
    assert filled == MINIMAL_FILLED
    default_jobs, _ = _plan(work)
    assert set(jobs) == set(default_jobs)  # every rule of the full graph
    assert jobs["rollout"] == 5 + 4  # every agent ReAct, the four action-only agents again
    assert jobs["judge_safety"] == 9 * 3  # every run, by each of the three judges
    assert jobs["reliability"] == 4 + 4 + 1  # five-judge and repeats on the four calibration agents; f1's vendor swap
    # The defaults are the paper's: all 157 seeds (a real job, in a copy of its own).
    own = scratch_copy(tmp_path)
    snakemake(own, "results/seeds/seeds.jsonl", "--configfile", str(path))
    assert len((own / "results/seeds/seeds.jsonl").read_text().splitlines()) == 157


def test_schema_defaults_fill_every_level():
    config = copy.deepcopy(MINIMAL)
    config["validation"] = {"annotators": ["ann-1", "ann-2"], "sample_sizes": {"detection": 5}}
    validate(config, str(SCHEMA), set_default=True)  # what rules/common.smk runs
    assert config["seeds"] == "all" and config["rjudge_dir"] == "data/raw/rjudge"
    assert config["llm"]["cache"] == "cache/responses.sqlite" and config["llm"]["replay"] is False
    assert config["construction"] == {"max_candidates_per_prefix": None, "min_instruction_words": 3, "exclusions": {}}
    assert config["reliability"] == {"calibration_items": 61, "five_judge_panel": True, "repeats": 3,
                                     "vendor_swap": True, "vendor_swap_items": 250}
    assert config["validation"] == {"annotators": ["ann-1", "ann-2"], "annotators_per_sample": 3,
                                    "sample_sizes": {"detection": 5, "action_type": 84, "action_safety": 84},
                                    "simulated_annotators": False}
    assert config["action_only"] == {"n_items": 150}
    assert config["report"] == {"case_study": {"dimension": "RS5", "prefix": None}, "running_example": "iot-023"}
    assert config["models"]["tagger"]["structured_output"] is True and config["agents"]["f1"]["output"] == "text"
    # The tools' own filling (the forecast, pack) agrees with Snakemake's.
    raw = copy.deepcopy(MINIMAL)
    raw["validation"] = {"annotators": ["ann-1", "ann-2"], "sample_sizes": {"detection": 5}}
    assert with_schema_defaults(raw) == config and "seeds" not in raw
    # The settings object's llm keys get no new default here (aura_eval/llm/settings.py holds them).
    assert not {"timeout_s", "max_retries", "backoff_s", "concurrency", "batch_poll_s", "batch_max_wait_s",
                "budget_usd", "cache_on_network_fs"} & set(config["llm"])


def test_fill_defaults_follows_the_config():
    config = with_schema_defaults(MINIMAL)
    assert fill_defaults(config) == MINIMAL_FILLED
    assert {line.split()[1] for line in MINIMAL_FILLED} == set(DEPENDENT_DEFAULTS)  # each documented default
    assert fill_defaults(config) == []  # filled once, then set
    config = with_schema_defaults(MINIMAL)
    config["agents"] = {"f1": MINIMAL["agents"]["f1"]}
    config["reliability"]["five_judge_panel"] = False
    config["roles"]["pair_reviewers"] = ["judge-a"]
    assert fill_defaults(config) == [
        "config: roles.relevance not set; using constructor", "config: roles.classifier not set; using constructor",
        "config: roles.pair_generator not set; using constructor",
        "config: roles.replacement_judge not set; using reviewer",
        "config: action_only.agents not set; using [f1]", "config: reliability.calibration_agents not set; using [f1]"]
    assert "validation_judges" not in config["roles"]  # the five-judge panel is off
    config = with_schema_defaults(MINIMAL)
    for name in ("tagger", "constructor", "reviewer", "agent"):  # every model of a panel judge's vendor
        config["models"][name]["vendor"] = "vendor-b"
    with pytest.raises(ConfigError, match=r"re-judges agent\(s\) f1, but roles.replacement_judge is not set"):
        fill_defaults(config)
    config["roles"]["replacement_judge"] = "reviewer"  # named: taken as it is
    fill_defaults(config)
    assert config["roles"]["replacement_judge"] == "reviewer"


@pytest.mark.suite
def test_a_second_config_file_adds_a_model(work):
    overlay = work / "config" / "my-model.yaml"
    overlay.write_text(yaml.safe_dump({
        "models": {"my-model": {"model": "openai/gpt-5.4-mini", "vendor": "openai", "params": {"max_tokens": 2048}}},
        "agents": {"my-model": {"model": "my-model", "group": "frontier", "vendor": "openai"}}}))
    default_jobs, _ = _plan(work)
    jobs, filled = _plan(work, "--configfile", "config/config.yaml", str(overlay))
    assert filled == []  # config/config.yaml names the calibration and action-only agents itself
    assert jobs["rollout"] == default_jobs["rollout"] + 1 and jobs["labels"] == default_jobs["labels"] + 1
    assert jobs["judge_safety"] == default_jobs["judge_safety"] + 3
    assert sum(jobs.values()) == sum(default_jobs.values()) + 8
    # docs/measurements.md states both counts (and a few rules'); these dry runs check them.
    measured = measured_jobs()
    for counts, planned in ((measured["config/config.yaml"], default_jobs),
                            (measured["config/config.yaml my-model.yaml"], jobs)):
        assert counts == {"total": sum(planned.values()), **{r: planned[r] for r in counts if r != "total"}}


def test_config_readme_table_is_generated_from_the_schema():
    assert config_doc.readme_table((ROOT / "config" / "README.md").read_text(encoding="utf-8")) == config_doc.table()


def test_every_config_key_is_documented():
    """Each key of the schema has a row, or its parent's row describes it (a model's params)."""
    undocumented = []

    def walk(node, path, described):
        described = described or "description" in node
        children = {**node.get("properties", {})}
        if isinstance(node.get("additionalProperties"), dict) and "properties" in node["additionalProperties"]:
            children["<name>"] = node["additionalProperties"]
        if not children and not described:
            undocumented.append(path)
        for key, sub in children.items():
            walk(sub, f"{path}.{key}".lstrip("."), described)

    walk(load_schema(), "", False)
    assert undocumented == []
    rows = {key for key, _, _ in config_doc.rows()}
    assert {"seeds", "roles.validation_judges", "reliability.calibration_agents", "llm.timeout_s"} <= rows


@pytest.mark.suite
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


@pytest.mark.suite
def test_calibration_agent_and_annotator_count_stop_before_any_job(work):
    config = copy.deepcopy(DEFAULT)
    config["reliability"]["calibration_agents"] = ["nobody"]
    out = _fails(work, "--configfile", str(_config_file(work, "no-calibration-agent.yaml", config)))
    assert "reliability.calibration_agents names 'nobody', which is not under 'agents'" in out
    config = copy.deepcopy(DEFAULT)
    config["validation"]["annotators_per_sample"] = 5
    out = _fails(work, "--configfile", str(_config_file(work, "too-few-annotators.yaml", config)))
    assert "validation.annotators_per_sample is 5, but validation.annotators names only 3" in out
    config["validation"]["annotators"] = ["annotator-1", "annotator-2"]
    del config["validation"]["annotators_per_sample"]  # the default, 3 (the paper's)
    out = _fails(work, "--configfile", str(_config_file(work, "no-per-sample.yaml", config)))
    assert "validation.annotators_per_sample is 3, but validation.annotators names only 2" in out


def test_canonical_sorts_mappings_and_keeps_lists():
    value = {"b": [{"y": 1, "x": 2}, 3], "a": {"d": 1, "c": 2}}
    out = canonical(value)
    assert list(out) == ["a", "b"] and list(out["a"]) == ["c", "d"]
    assert out["b"] == [{"x": 2, "y": 1}, 3] and list(out["b"][0]) == ["x", "y"]
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})


@pytest.mark.suite
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


# -- names and bounds checked at start ------------------------------------------------------------------

def _refused(config) -> str:
    """The message that stops `config`, checked as rules/common.smk does (the schema, then fill_defaults,
    then check_config; where the schema refuses, check_config's message stands in for it)."""
    config = copy.deepcopy(config)
    try:
        try:
            validate(config, str(SCHEMA), set_default=True)
        except WorkflowError:
            check_config(config)
            raise
        fill_defaults(config)
        check_config(config)
    except (ConfigError, WorkflowError) as err:
        return str(err)
    raise AssertionError("the config was accepted")


def test_the_schema_s_name_pattern_is_vocab_s():
    schema = load_schema()
    assert schema["$defs"]["name"]["pattern"] == vocab.NAME_PATTERN == "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
    refs = {"$ref": "#/$defs/name"}
    assert schema["properties"]["models"]["propertyNames"] == schema["properties"]["agents"]["propertyNames"] == refs
    assert schema["properties"]["validation"]["properties"]["annotators"]["items"] == refs
    assert vocab.RUN_SUFFIXES == (vocab.RUN_SEPARATOR + vocab.ACTION_ONLY,)
    for name in ("gpt-5.4", "a", "x" * 100, "llama_3.1-8b", "smollm2-135m"):
        assert vocab.name_problem(name) is None and re.fullmatch(vocab.NAME_PATTERN, name)
    for name in ("../j", "x" * 101, "my model", "j\n", "-j", ".j", "x.action_only", ""):
        assert vocab.name_problem(name) and not (re.fullmatch(vocab.NAME_PATTERN, name)
                                                 and not name.endswith(".action_only"))


def _with_model(name):
    config = copy.deepcopy(DEFAULT)
    config["models"][name] = copy.deepcopy(config["models"]["smollm2-judge-1"])
    return config


def _with_judge(name):
    config = _with_model(name)
    config["roles"]["judges"] = [*config["roles"]["judges"][:2], name]
    return config


def _with_agent(name):
    config = copy.deepcopy(DEFAULT)
    config["agents"][name] = copy.deepcopy(config["agents"]["smollm2-135m"])
    return config


def _with_annotator(name):
    config = copy.deepcopy(DEFAULT)
    config["validation"]["annotators"] = [*config["validation"]["annotators"], name]
    return config


LONG = "m" * 300


@pytest.mark.parametrize("config, expected", [
    (_with_judge("../j"), "config: models defines the name '../j', which contains '/'"),
    (_with_model(LONG), f"config: models defines the name '{LONG}', which has 300 characters"),
    (_with_model("my model"), "config: models defines the name 'my model', which contains ' '"),
    (_with_agent("x.action_only"), "config: agents defines the name 'x.action_only', which ends in '.action_only', "
                                   "a run id's suffix ('x.action_only' is the action_only run of agent 'x')"),
    (_with_agent("agent/1"), "config: agents defines the name 'agent/1', which contains '/'"),
    (_with_annotator("ann 7"), "config: validation.annotators[3] is 'ann 7', which contains ' '"),
    (_with_annotator("ann-7\n"), r"config: validation.annotators[3] is 'ann-7\n', which contains '\n'"),
])
def test_a_name_that_cannot_name_files_is_refused_with_its_key_path(config, expected):
    message = _refused(config)
    assert message.startswith(expected), message
    assert vocab.NAME_PATTERN in message


def test_a_role_member_with_a_bad_name_is_refused_with_its_key_path():
    config = copy.deepcopy(DEFAULT)
    config["roles"]["judges"][1] = "../j"  # undefined too: the name is what is said
    assert _refused(config).startswith("config: roles.judges[1] is '../j', which contains '/'")
    config = copy.deepcopy(DEFAULT)
    config["roles"]["tagger"] = "smollm2 judge"
    assert _refused(config).startswith("config: roles.tagger is 'smollm2 judge', which contains ' '")
    config = copy.deepcopy(DEFAULT)
    config["reliability"]["calibration_agents"] = ["smollm2-135m.action_only"]
    assert _refused(config).startswith("config: reliability.calibration_agents[0] is 'smollm2-135m.action_only', "
                                       "which ends in '.action_only'")


@pytest.mark.suite
def test_a_judge_named_with_a_slash_stops_the_dry_run(work):
    out = _fails(work, "--configfile", str(_config_file(work, "slash-judge.yaml", _with_judge("../j"))))
    assert "config: models defines the name '../j', which contains '/'" in out


@pytest.mark.parametrize("mutate, path, value", [
    (lambda c: c["models"]["smollm2"].setdefault("params", {}).update(max_tokens=-1),
     "['models']['smollm2']['params']['max_tokens']", "-1 is less than the minimum of 1"),
    (lambda c: c["llm"].update(max_retries=10**9), "['llm']['max_retries']",
     "1000000000 is greater than the maximum of 20"),
    (lambda c: c["llm"].update(concurrency={"default": 5000}), "['llm']['concurrency']['default']",
     "5000 is greater than the maximum of 1000"),
    (lambda c: c["models"]["smollm2"].update(api_base="file:///etc"), "['models']['smollm2']['api_base']",
     "'file:///etc' does not match '^https?://'"),
])
def test_out_of_bounds_call_settings_are_refused_with_their_key_path(mutate, path, value):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    message = _refused(config)
    assert value in message and f"On instance{path}" in message, message
