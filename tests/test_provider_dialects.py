"""The workflow on config/paper.yaml's own model entries (the same litellm model strings), each pointed
by `api_base` at a local emulator of its provider (tests/emulators/) that answers in that provider's
wire format and injects that provider's own retryable errors: every stage completes, no call fails,
and every retry waited at least what the provider asked for."""

import os
import time
from pathlib import Path

import pytest
import yaml

from aura_eval.util.jsonl import read_jsonl
from tests.emulators import EMULATORS, PROVIDER_DIALECT
from tests.workflow import ROOT, scratch_copy, snakemake

# the whole workflow (e2e), and each retry's wait checked against the wall clock (serial)
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

KEY_ENV = "AURA_EMULATOR_CRED"  # every emulated model reads its (fake) key from here
EMULATOR_CRED = "emu-cred-5d1c7a0b93e2"
EVERY = 6  # every 6th request of each emulator gets the next of its provider's retryable errors
WAIT_S = 1.0  # the wait each error asks for, where its provider asks for one
BACKOFF_S = 0.25  # our own backoff where the provider asks for none
ANSWER_LATENCY_S = 0.25  # per asked wait: how long an answer may take to reach the client on a loaded machine
# Three agents, on Gemini, OpenRouter and vLLM (each agent adds 8 jobs,
# ~6 s of CPU each for litellm's import): OpenAI, Anthropic and Gemini answer every run as panel judges,
# OpenAI, Anthropic and OpenRouter in construction; DeepSeek answers as the replacement judge of the
# vendor swap (for the Gemini agent, whose vendor judges).
AGENTS = ["gemini-3.1-pro", "qwen3-32b", "realsafe-r1-32b"]


def dialect_of(model: str) -> str:
    return PROVIDER_DIALECT[model.split("/", 1)[0]]


def emulated_config(paper: dict, bases: dict[str, str]) -> dict:
    """config/paper.yaml on 2 seeds with small samples, every model entry kept as it is but for
    `api_base` (its provider's emulator) and `api_key_env`."""
    config = dict(paper, seeds=2)
    config["llm"] = dict(paper["llm"], cache="cache/dialects.sqlite", backoff_s=BACKOFF_S)
    config["models"] = {name: dict(entry, api_base=bases[dialect_of(entry["model"])], api_key_env=KEY_ENV)
                        for name, entry in paper["models"].items()}
    config["agents"] = {name: paper["agents"][name] for name in AGENTS}
    config["action_only"] = {"agents": [], "n_items": 150}
    config["reliability"] = dict(paper["reliability"], calibration_agents=["gemini-3.1-pro"], calibration_items=2,
                                 repeats=0, vendor_swap_items=2)
    config["validation"] = {"sample_sizes": {"detection": 2, "action_type": 2, "action_safety": 2},
                            "annotators": ["annotator-1", "annotator-2", "annotator-3"], "annotators_per_sample": 2}
    return config


@pytest.fixture(scope="module")
def dialect_run(tmp_path_factory):
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    emulators = {name: cls() for name, cls in EMULATORS.items()}
    for emulator in emulators.values():
        emulator.__enter__()
        emulator.inject(emulator.retryable, every=EVERY, wait_s=WAIT_S)
    try:
        work = scratch_copy(tmp_path_factory.mktemp("dialects"))
        config = emulated_config(paper, {name: e.api_base for name, e in emulators.items()})
        path = work / ".test" / "config" / "dialects.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        start = time.monotonic()
        snakemake(work, "--configfile", str(path), env={KEY_ENV: EMULATOR_CRED})
        print(f"\nworkflow on the emulators: {time.monotonic() - start:.0f} s")
        yield work, emulators
    finally:
        for emulator in emulators.values():
            emulator.__exit__()


def call_rows(work: Path) -> list[dict]:
    return [row for path in sorted((work / "results" / "calls").rglob("*.jsonl")) for row in read_jsonl(path)]


def test_every_stage_completes_with_no_failed_call(dialect_run):
    work, _ = dialect_run
    assert (work / "results/report/report.html").is_file() and (work / "results/audit/index.html").is_file()
    rows = call_rows(work)
    assert rows and [r for r in rows if r["status"] == "failed"] == []
    for agent in AGENTS:
        rollouts = read_jsonl(work / f"results/rollouts/{agent}.jsonl")
        assert rollouts and all(r["action"] == "emulated action" for r in rollouts)
    # Anthropic's per-step rewrite lists came back whole (sent without prefixItems, which litellm would
    # have turned into a list that must stay empty): every variation assembled and passed the gate.
    variations = read_jsonl(work / "results/construct/variations.jsonl")
    assert variations and all(v["passed_gate"] and v["model"] == "anthropic/claude-opus-4-6" for v in variations)
    # Every model string of paper.yaml in use reached its own emulator.
    assert {dialect_of(r["model"]) for r in rows} == set(EMULATORS)


def test_each_provider_saw_its_errors_and_each_retry_waited_what_it_asked(dialect_run):
    work, emulators = dialect_run
    sent = [r for r in call_rows(work) if not r["cache_hit"]]
    report = {}
    for name, emulator in emulators.items():
        mine = [r for r in sent if dialect_of(r["model"]) == name]
        counts = emulator.state.counts()
        errors = sum(n for kind, n in counts["sent"].items() if kind in emulator.retryable)
        retries = sum(r["attempts"] - 1 for r in mine)
        waited = sum(r["wait_s"] for r in mine)
        unasked = errors - counts["waits_asked"]
        report[name] = {"requests": counts["requests"], "errors": {k: n for k, n in counts["sent"].items() if k != "ok"},
                        "waited_s": round(waited, 2), "asked_s": counts["waits_asked_s"]}
        # Each request the emulator saw is an attempt a call log counts; each retryable error one retry.
        assert counts["requests"] == sum(r["attempts"] for r in mine) and errors == retries > 0
        assert set(counts["sent"]) <= {"ok", *emulator.retryable}  # nothing refused: each request as it accepts
        # At least the asked waits, at most those plus our own backoff's cap for each error that asked for
        # none (twice the first retry's cap: a request can meet two). Slack per asked wait: Anthropic's reset
        # is a time, not a duration, so the time its answer takes to reach the client is already waited
        # (0.43 s over 4 waits, seen once on a loaded machine; the asked waits are about 1 s each).
        slack = ANSWER_LATENCY_S * counts["waits_asked"]
        assert counts["waits_asked_s"] - slack <= waited <= counts["waits_asked_s"] + unasked * 2 * BACKOFF_S + slack, name
    print("\nper dialect:", report)


def test_no_key_reaches_any_file(dialect_run):
    work, _ = dialect_run
    leaked = [str(p.relative_to(work)) for folder in ("results", "logs", ".snakemake", "cache")
              for p in (work / folder).rglob("*") if p.is_file() and EMULATOR_CRED.encode() in p.read_bytes()]
    assert leaked == []
