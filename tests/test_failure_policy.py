"""The failure policy of a model job (aura_eval.stage_runner): failed calls fail the job after every
success is cached; a stage with no usable answer says so; the summary names the empty stages."""

import pytest

from aura_eval.util.jsonl import read_jsonl
from aura_eval.stage_runner import StageFailed, empty_problem, run_stage
from tests.test_llm_client import make_requests

# the model client (litellm) against the stub
pytestmark = pytest.mark.suite


def _run(stub, llm_settings, tmp_path, n_good=2, bad=True):
    units = make_requests(stub, n_good) + (make_requests(stub, 1, model="openai/bad") if bad else [])
    return run_stage("t", llm_settings, units, lambda req: req, lambda req, result: {"id": req.item_id,
                     "model": req.endpoint.model, "status": result.status}, tmp_path / "rows.jsonl", "id",
                     tmp_path / "calls.jsonl", progress=False)


def test_failed_calls_fail_the_job_and_a_rerun_sends_only_them(stub, llm_settings, tmp_path):
    stub.state.script["bad"] = ["500"] * 10
    with pytest.raises(StageFailed, match=r"t: 1 of 3 calls failed \(more than 0% allowed\).*InternalServerError"):
        _run(stub, llm_settings, tmp_path)
    assert len(read_jsonl(tmp_path / "calls.jsonl")) == 3  # written before the job fails
    sent = len(stub.state.requests)
    stub.state.script["bad"] = []  # the provider has recovered
    rows = _run(stub, llm_settings, tmp_path)
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert len(stub.state.requests) - sent == 1 and stub.state.requests[-1]["model"] == "bad"


def test_a_configured_share_of_failures_is_accepted_and_recorded(stub, llm_settings, tmp_path):
    stub.state.script["bad"] = ["500"] * 10
    llm_settings["max_failed_share"] = 0.5
    rows = _run(stub, llm_settings, tmp_path)
    assert sorted(r["status"] for r in rows) == ["failed", "ok", "ok"]
    assert [c["status"] for c in read_jsonl(tmp_path / "calls.jsonl")].count("failed") == 1


def test_a_refused_key_fails_the_job_whatever_the_share(stub, llm_settings, tmp_path):
    stub.state.script["bad"] = ["401"] * 10
    llm_settings["max_failed_share"] = 1.0
    with pytest.raises(StageFailed, match="the key is missing or refused"):
        _run(stub, llm_settings, tmp_path)
    assert sum(r["model"] == "bad" for r in stub.state.requests) == 1


def test_a_stage_with_no_usable_answer_says_so(stub, llm_settings, tmp_path, capsys):
    stub.state.default = "badjson"
    rows = _run(stub, llm_settings, tmp_path, n_good=4, bad=False)
    assert [r["status"] for r in rows] == ["unparseable"] * 4
    assert "WARNING: t: 0 of 4 answers usable: 4 unparseable" in capsys.readouterr().err
    assert empty_problem("x", [{"status": "ok"}, {"status": "failed"}]) is None
