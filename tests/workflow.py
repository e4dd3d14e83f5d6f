"""Helpers to run the Snakemake workflow in a scratch copy of the repository."""

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW_PARTS = ["Snakefile", "rules", "scripts", "prompts", "schemas", "config", "paper", "profiles", "envs",
                  "data"]


def scratch_copy(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for part in WORKFLOW_PARTS:
        source = ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / part)
    return work


def write_config(work: Path, name: str, **overrides) -> Path:
    """The default config with `overrides`: `llm` settings are merged, every other key replaced."""
    config = yaml.safe_load((work / "config" / "config.yaml").read_text())
    for key, value in overrides.items():
        config[key] = {**config[key], **value} if key == "llm" else value
    path = work / "config" / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake(work: Path, *args: str, check=True) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run([str(exe), "--cores", "2", *args], cwd=work, capture_output=True, text=True,
                          timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# One canned answer that fits every judge schema (extra keys are allowed there).
JUDGE_MOCK = '{"level": "D2", "action_type": "A2", "safety": "Safe", "reason": "mock"}'
AGENT_MOCK = '{"thought": "mock thought", "action": "mock action"}'
TAG_MOCK = '{"risk_trigger": 0, "execution_point": 1, "reason": "mock"}'


def mock_model(answer: str, **params) -> dict:
    return {"model": "openai/mock-model", "vendor": "mockvendor",
            "params": {"temperature": 0.0, "mock_response": answer, **params}}


STUB_KEY_ENV = "AURA_STUB_KEY"


def stub_model(name: str, api_base: str) -> dict:
    """A model served by tests/stub_server.py (the key variable's value is a dummy)."""
    return {"model": f"openai/{name}", "vendor": "stubvendor", "api_base": api_base, "api_key_env": STUB_KEY_ENV,
            "params": {"temperature": 0.0}}


def write_mock_config(work: Path, stub_base: str, name: str = "mock.yaml", seeds=4, **overrides) -> Path:
    """Tagger, agents and judges on litellm's mock responses; the construction roles on the
    stub server at `stub_base`, whose answers follow each request's schema (a fixed answer
    cannot fit the per-item rewrite schemas): the whole workflow in minutes, no model."""
    models = {"tagger": mock_model(TAG_MOCK), "agent": mock_model(AGENT_MOCK)}
    for i in range(1, 6):
        models[f"judge-{i}"] = mock_model(JUDGE_MOCK, seed=i)
    models["judge-4"]["vendor"] = "othervendor"
    models["constructor"] = stub_model("stub-constructor", stub_base)
    for i in range(1, 4):
        models[f"reviewer-{i}"] = stub_model(f"stub-reviewer-{i}", stub_base)
    reviewers = ["reviewer-1", "reviewer-2", "reviewer-3"]
    settings = dict(
        seeds=seeds, llm={"cache": "cache/mock.sqlite"}, models=models,
        roles={"tagger": "tagger", "judges": ["judge-1", "judge-2", "judge-3"],
               "validation_judges": [f"judge-{i}" for i in range(1, 6)], "replacement_judge": "judge-4",
               "relevance": "constructor", "generator": "constructor", "reviewers": reviewers,
               "classifier": "constructor", "pair_generator": "constructor", "pair_reviewers": reviewers},
        construction={"max_candidates_per_prefix": None, "min_instruction_words": 3, "exclusions": {}},
        agents={"mock-agent": {"model": "agent", "group": "open-weight", "vendor": "mockvendor", "output": "json"}},
        action_only={"agents": ["mock-agent"], "n_items": 150},
        reliability={"calibration_items": 3, "five_judge_panel": True, "repeats": 3, "vendor_swap": True,
                     "vendor_swap_items": 3},
        validation={"sample_sizes": {"detection": 3, "action_type": 3, "action_safety": 3},
                    "annotators": ["annotator-1", "annotator-2", "annotator-3"]},
    )
    settings.update(overrides)
    return write_config(work, name, **settings)
