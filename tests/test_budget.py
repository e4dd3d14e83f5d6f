"""`llm.budget_usd`: the client stops sending before the run's spend (cache database) would pass it."""

import sqlite3
import threading

import pytest

from aura_eval.llm import Endpoint, Request
from aura_eval.llm.budget import Budget, estimate_usd
from aura_eval.llm.client import ModelClient

# the model client (litellm) against the stub
pytestmark = pytest.mark.suite

# The stub answers every call with 11 prompt and 5 completion tokens. Input free, output at
# $1,000 per million tokens: each call costs 5 x $0.001 = $0.005, and with max_tokens 5 the
# reservation (prompt tokens x 0 + 5 x $0.001) is exactly the call's cost.
PRICE = {"input_per_mtok": 0.0, "output_per_mtok": 1000.0}
BUDGET = 0.0225  # room for four calls: 4 x 0.005 = 0.02, and a fifth would reach 0.025


def requests(stub, n, first=0, price=PRICE, model="openai/stub-priced"):
    endpoint = Endpoint(name="priced", model=model, params={"temperature": 0.0, "max_tokens": 5},
                        api_base=stub.api_base, price=price)
    return [Request(item_id=f"item-{i:02d}", endpoint=endpoint, prompt_id="p_test", prompt_version=1, role="tester",
                    schema=None, messages=[{"role": "user", "content": f"question {i}"}]) for i in range(first, first + n)]


def spend_rows(path):
    """(calls, their summed cost, settled calls); the running total must equal the sum."""
    with sqlite3.connect(path) as db:
        count, total, settled = db.execute("SELECT COUNT(*), SUM(cost_usd), SUM(settled) FROM spend").fetchone()
        (running,) = db.execute("SELECT spent_usd FROM spend_total").fetchone()
    assert round(running, 9) == round(total, 9)
    return count, total, settled


def test_calls_stop_at_the_budget_and_refusals_are_failed_results(stub, llm_settings):
    settings = {**llm_settings, "budget_usd": BUDGET, "concurrency": {"default": 1}}
    client = ModelClient(settings, "t", progress=False)
    results = client.run(requests(stub, 10))
    assert len(stub.state.requests) == 4
    assert [r.status for r in results] == ["ok"] * 4 + ["failed"] * 6
    assert results[4].error == "budget of $0.0225 reached: spent $0.0200 (llm.budget_usd)"
    assert [r.cost_usd for r in results[:4]] == [0.005] * 4  # the entry's price: litellm's map has no stub
    assert len(client.calls) == 10 and sum(c["status"] == "failed" for c in client.calls) == 6
    count, total, settled = spend_rows(llm_settings["cache"])
    assert (count, round(total, 6), settled) == (4, 0.02, 4)
    # The spend is the cache file's, across jobs: a second job sends nothing new, yet its
    # cached answers still come back (a cache hit costs nothing).
    again = ModelClient(settings, "t2", progress=False)
    results = again.run(requests(stub, 6, first=2))
    assert len(stub.state.requests) == 4
    assert [r.status for r in results] == ["ok", "ok", "failed", "failed", "failed", "failed"]


def test_concurrent_jobs_never_overspend(stub, llm_settings):
    """Two jobs at once, eight requests in flight each: the reservations admit exactly four calls."""
    stub.state.latency_s = 0.2
    settings = {**llm_settings, "budget_usd": BUDGET, "concurrency": {"default": 8}}
    outcomes = {}

    def job(name, first):
        outcomes[name] = ModelClient(settings, name, progress=False).run(requests(stub, 8, first=first))

    threads = [threading.Thread(target=job, args=(name, first)) for name, first in (("a", 0), ("b", 100))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stub.state.requests) == 4
    statuses = [r.status for rs in outcomes.values() for r in rs]
    assert statuses.count("ok") == 4 and statuses.count("failed") == 12
    count, total, _ = spend_rows(llm_settings["cache"])
    assert count == 4 and round(total, 6) == 0.02 <= BUDGET


def test_an_unpriced_model_is_refused_under_a_budget(stub, llm_settings):
    settings = {**llm_settings, "budget_usd": 10.0}
    (result,) = ModelClient(settings, "t", progress=False).run(requests(stub, 1, price=None))
    assert result.status == "failed" and len(stub.state.requests) == 0
    assert result.error == ("budget set (llm.budget_usd) but model 'openai/stub-priced' of endpoint 'priced' "
                            "has no price: add `price` to its entry under models")


def test_no_budget_sends_everything(stub, llm_settings):
    results = ModelClient(llm_settings, "t", progress=False).run(requests(stub, 10))
    assert len(stub.state.requests) == 10 and all(r.status == "ok" for r in results)


def test_the_estimate_reserves_prompt_and_max_tokens(tmp_path):
    endpoint = Endpoint(name="e", model="openai/gpt-4o", params={"max_tokens": 100})
    # gpt-4o in litellm's map: $2.50 and $10.00 per million tokens.
    assert round(estimate_usd(endpoint, 1000), 9) == round(1000 * 2.5e-6 + 100 * 1e-5, 9)
    budget = Budget(tmp_path / "c.sqlite", 1.0)
    hold, spent = budget.reserve("k", "s", "m", 0.6)
    assert (spent, budget.reserve("k2", "s", "m", 0.5)) == (0.0, (None, 0.6))
    budget.settle(hold, 0.1)
    assert budget.reserve("k2", "s", "m", 0.5)[1] == pytest.approx(0.1)
