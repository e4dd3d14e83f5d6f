"""The calibration samples and the five-judge panel (paper F.1-F.3): the audit samples are
distinct scenarios (F.1.1: "84 distinct scenarios"), and the panel's one rule, the plurality,
gives both the label it records and the action type its safety judges see."""

from itertools import combinations

from aura_eval.evaluate import reliability, validation
from aura_eval.evaluate.judging import NO_TYPE, panel_action_types
from aura_eval.llm.types import Result
from aura_eval.vocab import DOMAINS

AGENTS = ["cal-a", "cal-b", "cal-c", "cal-d"]
DIMS = ["original", "RS1", "RS2", "RS5", "SD3"]


def _items(n_per_cell: int) -> dict:
    """n_per_cell items in every (domain, dimension) cell."""
    items = {}
    for domain in DOMAINS:
        for dim in DIMS:
            for k in range(n_per_cell):
                item_id = f"{domain}-{k}.at_trigger.{dim}"
                items[item_id] = {"item_id": item_id, "domain": domain, "dimension": dim, "reference_rationale": "r",
                                  "steps": [{"role": "user", "content": f"please do {item_id}"}]}
    return items


def _rollouts(items: dict, agent: str) -> list[dict]:
    """Every item rolled out by `agent`; every seventh one unparseable (not judgeable)."""
    return [{"item_id": i, "agent": agent, "format": "react", "status": "unparseable" if n % 7 == 0 else "ok",
             "thought": "t", "action": f"do({i})"} for n, i in enumerate(sorted(items))]


def _samples(items, n):
    return {a: reliability.agent_sample(_rollouts(items, a), items, {"calibration_items": n,
                                                                    "calibration_agents": AGENTS}, a)
            for a in AGENTS}


def test_calibration_agents_sample_distinct_scenarios_spread_over_domains():
    items = _items(8)  # 200 items, 4 x 20 sampled: the pool allows distinct samples
    samples = _samples(items, 20)
    ids = {a: {r["item_id"] for r in rows} for a, rows in samples.items()}
    assert all(len(rows) == 20 and all(r["status"] == "ok" for r in rows) for rows in samples.values())
    assert all(not ids[a] & ids[b] for a, b in combinations(AGENTS, 2))
    assert len(set().union(*ids.values())) == 80
    for rows in samples.values():  # evenly over the five domains, as before
        assert sorted(sum(items[r["item_id"]]["domain"] == d for r in rows) for d in DOMAINS) == [4] * 5
    # Drawn as before the fix (one sample of the whole pool per agent): the same 20 scenarios for all.
    same = [{r["item_id"] for r in reliability.calibration_sample(_rollouts(items, a), items, 20)} for a in AGENTS]
    assert len(set().union(*same)) == 20


def test_the_audit_samples_drawn_from_them_are_distinct_scenarios():
    items = _items(8)
    samples = _samples(items, 20)
    pool = [{"sample_id": f"action_safety/{a}/{r['item_id']}", "axis": "action_safety", "agent": a,
             "item_id": r["item_id"], "domain": items[r["item_id"]]["domain"], "panel_label": "Safe",
             "panel_stratum": "unanimous"} for a, rows in samples.items() for r in rows]
    audit = validation.audit_sample(pool, 30)
    assert len(audit) == 30 and len({r["item_id"] for r in audit}) == 30


def test_audit_sample_repeats_a_scenario_only_to_fill_what_remains():
    pool = [{"sample_id": f"action_safety/{a}/item-{k}", "axis": "action_safety", "agent": a, "item_id": f"item-{k}",
             "domain": "IoT", "panel_label": "Safe", "panel_stratum": "unanimous"} for a in ("m1", "m2")
            for k in range(5)]
    assert len({r["item_id"] for r in validation.audit_sample(pool, 5)}) == 5
    eight = validation.audit_sample(pool, 8)
    assert len(eight) == 8 and len({r["item_id"] for r in eight}) == 5


def test_a_share_too_small_is_topped_up_from_the_rest():
    items = _items(1)  # 25 items for 4 x 10: the pool does not allow distinct samples
    samples = _samples(items, 10)
    for agent, rows in samples.items():
        share = reliability.calibration_share(items, AGENTS, agent)
        judgeable = {r["item_id"] for r in _rollouts(items, agent) if r["status"] == "ok"}
        assert len(rows) == 10 and share & judgeable <= {r["item_id"] for r in rows}
    shares = [reliability.calibration_share(items, AGENTS, a) for a in AGENTS]
    assert sum(map(len, shares)) == len(items) == len(set().union(*shares))


def test_one_calibration_agent_samples_as_before():
    items = _items(3)
    rollouts = _rollouts(items, "cal-a")
    assert (reliability.agent_sample(rollouts, items, {"calibration_items": 12, "calibration_agents": ["cal-a"]},
                                     "cal-a")
            == reliability.calibration_sample(rollouts, items, 12))


# -- one rule for the five-judge panel -----------------------------------------------------------

TYPES = {"v1": "A0", "v2": "A0", "v3": "A1", "v4": "A2", "v5": "A3"}  # a plurality (A0), no majority


class FakeStage:
    """Answers every judge request: each judge's own action type (TYPES), D1, Safe; keeps the requests."""

    def __init__(self):
        self.requests = []

    def results(self, requests):
        self.requests += requests
        answers = {"judge:detection": lambda r: {"level": "D1", "reason": ""},
                   "judge:action_type": lambda r: {"action_type": TYPES[r.endpoint.name], "reason": ""},
                   "judge:action_safety": lambda r: {"safety": "Safe", "reason": ""}}
        return [Result(request=r, status="ok", parsed=answers[r.role](r)) for r in requests]


def test_five_judge_panel_shows_and_records_its_plurality_type():
    items = _items(1)
    rollouts = [r for r in _rollouts(items, "cal-a") if r["status"] == "ok"][:2]
    panel = [{"name": name, "model": f"openai/{name}"} for name in TYPES]
    stage = FakeStage()
    rows = reliability.five_judge(rollouts, items, {"panel": panel, "calibration_items": 2,
                                                   "calibration_agents": ["cal-a"]}, "cal-a", stage)
    assert len(rows) == 2
    for row in rows:
        assert row["action_type"]["label"] == "A0" and row["action_type"]["stratum"] == "plurality"
        assert row["detection"]["stratum"] == "unanimous" and row["rule"] == "plurality"
    safety = [r for r in stage.requests if r.role == "judge:action_safety"]
    assert len(safety) == 2 * 5
    for request in safety:
        text = request.messages[-1]["content"]
        assert "(A0, the judge panel's action type)" in text and NO_TYPE not in text
    # The same votes under the three-judge panel's rule (majority) give no type.
    phase1 = {name: [{"item_id": "x", "action_type": {"label": t}}] for name, t in TYPES.items()}
    assert panel_action_types(phase1, "plurality") == {"x": "A0"} and panel_action_types(phase1) == {"x": None}
