"""The registry of model stages: each stage once, and everything that lists stages reads it."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aura_eval import stage_registry
from aura_eval.workflow import jobs

ROOT = Path(__file__).resolve().parent.parent
RULES = "".join(p.read_text() for p in sorted((ROOT / "rules").glob("*.smk")))


def test_the_registry_lists_every_model_stage_in_flow_order():
    assert list(stage_registry.registry()) == ["tag_steps", "relevance", "vary", "review_variations", "classify",
                                       "generate_pairs", "review_pairs", "rollout", "judge_detection_type",
                                       "judge_safety", "reliability"]
    assert stage_registry.call_groups()[-3:] == ("reliability:five_judge", "reliability:repeats", "reliability:vendor_swap")
    assert len(stage_registry.call_groups()) == 13


@pytest.mark.suite
def test_flow_order_does_not_depend_on_import_order():
    code = ("import aura_eval.evaluate.reliability, aura_eval.evaluate.rollout; from aura_eval import stage_registry; "
            "print(' '.join(stage_registry.registry()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["tag_steps", "relevance"] and out[-1] == "reliability"


def test_one_name_from_rule_to_script_to_entry_point():
    """rule x -> scripts/x.py -> a function x in the module that declares the stage."""
    for rule, entry in stage_registry.registry().items():
        assert re.search(rf"^rule {rule}:\n", RULES, re.M), rule
        script = (ROOT / "scripts" / f"{rule}.py").read_text()
        assert f".{rule}(" in script, f"scripts/{rule}.py does not call {rule}()"
        module = next(m for m in stage_registry.STAGE_MODULES
                      if rule in stage_registry._STAGES.get(f"aura_eval.{m}", {}))
        assert callable(getattr(importlib.import_module(f"aura_eval.{module}"), rule))
        for prompt in entry.prompts:
            assert yaml.safe_load((ROOT / "prompts" / f"{prompt}.yaml").read_text())["id"] == prompt


def test_a_rules_prompts_and_call_log_come_from_the_registry():
    for rule in stage_registry.registry():
        body = re.search(rf"^rule {rule}:\n((?:    .*\n|\n)*)", RULES, re.M).group(1)
        assert f'calls=CALL_LOGS["{rule}"]' in body, rule
        if rule != "rollout":  # a rollout reads the one agent prompt of its run's format
            assert f'prompts=stage_prompts("{rule}")' in body, rule


def test_the_job_plan_gives_every_call_log():
    config = yaml.safe_load((ROOT / ".test/config/mock.yaml").read_text())
    logs = [entry.calls.format(**job) for entry in stage_registry.registry().values()
            for job in jobs.stage_jobs(config, entry.wildcards)]
    runs, judges = jobs.runs(config), jobs.judges(config)
    assert len(logs) == 7 + len(runs) * (1 + 2 * len(judges)) + sum(
        len(jobs.reliability_agents(config, kind)) for kind in ("five_judge", "repeats", "vendor_swap"))
    assert logs[0] == "results/calls/tag_steps.jsonl" and len(set(logs)) == len(logs)
    assert f"results/calls/judge/{runs[-1]}/safety/{judges[-1]}.jsonl" in logs


def test_a_stage_declared_twice_is_refused():
    import pytest

    entry = stage_registry.stage("vary")
    with pytest.raises(ValueError, match="model stage 'vary' declared twice"):
        stage_registry.model_stage(**{**entry.__dict__, "output_tokens": 1})
