"""The workflow end to end on the real embedded model (SmolLM2-135M), on two seeds."""

import json

import pytest

from aura_eval.construct.common import gate, panel_decision, prefix_valid
from aura_eval.util.jsonl import read_jsonl
from aura_eval.tools.digest import stable_digests
from tests.workflow import copy_run, scratch_copy, shared_run, snakemake, suite_config

# The embedded model's run: the e2e tier, one xdist group (built once, by one worker).

def _build(work):
    # One llama.cpp thread per model job: the tier's other xdist worker keeps the second core busy,
    # and llama.cpp's threads spin-wait on each other, so two threads on a shared core ran 3 to 6
    # times slower than one (300 tokens: 61-113 s against 18-22 s, load 4 on 2 cores).
    from aura_eval import stage_registry

    snakemake(work, "--configfile", str(suite_config(work, "two_seeds.yaml")),
              "--set-threads", *(f"{rule}=1" for rule in stage_registry.registry()))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    work = shared_run(tmp_path_factory, "two_seeds", _build)
    return work, work / ".test/config/two_seeds.yaml"


@pytest.mark.e2e
@pytest.mark.xdist_group("embedded")
def test_default_run_covers_every_stage(finished_run):
    work, _ = finished_run
    seeds = read_jsonl(work / "results/seeds/seeds.jsonl")
    tags = read_jsonl(work / "results/prefixes/tags.jsonl")
    prefixes = read_jsonl(work / "results/prefixes/prefixes.jsonl")
    calls = read_jsonl(work / "results/calls/tag_steps.jsonl")
    assert len(seeds) == 2 and len(tags) == 2 and len(calls) == 2
    assert {c["model"] for c in calls} == {"aura_local/smollm2-135m-instruct"}
    assert all(c["tokens_in"] > 100 and not c["cache_hit"] for c in calls)
    for tag in tags:
        assert tag["prompt"] == "p1_step_tagging" and tag["raw_response"]
        assert tag["valid"] == (tag["invalid_reason"] is None)
    expected = sum(1 + (t["execution_point"] is not None) for t in tags if t["valid"])
    assert len(prefixes) <= expected and len(prefixes) == sum(
        1 for p in prefixes if p["seed_id"] in {t["seed_id"] for t in tags if t["valid"]})
    html = (work / "results/report/report.html").read_text()
    assert "Seeds" in html and "at-trigger prefixes" in html and "data:image/png;base64" in html
    calls_table = (work / "results/tables/model_calls.csv").read_text()
    assert "tag_steps,smollm2,aura_local/smollm2-135m-instruct,2,0," in calls_table
    # The embedded model as agent and as a panel of three, on every item.
    items = read_jsonl(work / "results/dataset/aura_eval.jsonl")
    rollouts = read_jsonl(work / "results/rollouts/smollm2-135m.jsonl")
    assert [r["item_id"] for r in rollouts] == [i["item_id"] for i in items] and items
    assert all(r["model"] == "aura_local/smollm2-135m-instruct" and r["raw_response"] for r in rollouts)
    labels = read_jsonl(work / "results/labels/smollm2-135m.jsonl")
    assert len(labels) == len(items)
    for label in labels:
        if label["rollout_status"] == "ok":
            assert len(label["action_type"]["votes"]) == 3
            assert label["action_type"]["label"] in (None, "A0", "A1", "A2", "A3", "A4", "A5")
            assert label["action_safety"]["label"] in (None, "Safe", "Unsafe")
    summary = (work / "results/tables/evaluation_summary.csv").read_text().splitlines()
    assert summary[1].startswith(f"smollm2-135m,open-weight,react,{len(items)},")


@pytest.mark.e2e
@pytest.mark.xdist_group("embedded")
def test_construction_on_the_embedded_model(finished_run):
    """Every construction stage ran on the real model, and every file agrees with the next."""
    work, _ = finished_run
    prefixes = {p["prefix_id"]: p for p in read_jsonl(work / "results/prefixes/prefixes.jsonl")}
    read = {name: read_jsonl(work / f"results/construct/{name}.jsonl") for name in
            ("relevance", "candidates", "variations", "variation_reviews", "pool", "pairs", "pair_reviews")}
    assert sorted(r["prefix_id"] for r in read["relevance"]) == sorted(prefixes)
    assert all(r["prompt"] == "p2_dimension_relevance" and r["model"] == "aura_local/smollm2-135m-instruct"
               for r in read["relevance"])
    selected = [c for c in read["candidates"] if c["selected"]]
    assert selected and all(sum(c["prefix_id"] == p for c in selected) <= 2 for p in prefixes)  # the default cap
    variations = read["variations"]
    assert [v["variation_id"] for v in variations] == [c["candidate_id"] for c in selected]
    for v in variations:
        assert v["status"] in ("ok", "unparseable", "failed") and v["raw_response"] is not None
        if v["passed_gate"]:  # the gate, re-run here, agrees
            assert v["status"] == "ok" and gate(prefixes[v["prefix_id"]]["steps"], v["steps"]) is None
        else:
            assert v["rejection"] and v["steps"] is None
    passed = [v["variation_id"] for v in variations if v["passed_gate"]]
    assert [r["variation_id"] for r in read["variation_reviews"]] == passed
    for review in read["variation_reviews"]:
        assert len(review["votes"]) == 3 and {v["model"] for v in review["votes"]} == {
            "aura_local/smollm2-135m-instruct"}
        assert review["kept"] == panel_decision([v["keep"] for v in review["votes"]],
                                                        [v["status"] for v in review["votes"]])["kept"]
    kept = {r["variation_id"] for r in read["variation_reviews"] if r["kept"]}
    pool = read["pool"]
    assert {i["item_id"] for i in pool} == {f"{p}.original" for p in prefixes} | kept
    pairable = [i["item_id"] for i in pool if i["classification"]["pairable"]]
    assert [p["source_item_id"] for p in read["pairs"]] == pairable
    for pair in read["pairs"]:
        if pair["passed_checks"]:
            assert prefix_valid(pair["steps"], pair["full_steps"]) is None
    assert [r["item_id"] for r in read["pair_reviews"]] == [p["item_id"] for p in read["pairs"] if p["passed_checks"]]
    items = read_jsonl(work / "results/dataset/aura_eval.jsonl")
    excluded = read_jsonl(work / "results/dataset/excluded.jsonl")
    kept_pairs = sum(r["kept"] for r in read["pair_reviews"])
    assert len(items) + len(excluded) == len(pool) + kept_pairs and all(e["reason"] for e in excluded)
    assert all(i["pair_label"] in ("NSP", "SP") and i["reference_rationale"] for i in items)
    funnel = json.loads((work / "results/construct/funnel.json").read_text())["funnel"]
    assert (funnel["prefixes"], funnel["variation candidates"], funnel["classified pool"], funnel["released rows"]) \
        == (len(prefixes), len(selected), len(pool), len(items))
    calls = read_jsonl(work / "results/calls/construct/vary.jsonl")
    assert len(calls) == len(variations) and all(c["tokens_out"] for c in calls if not c["cache_hit"])


@pytest.mark.e2e
@pytest.mark.xdist_group("embedded")
def test_rerun_is_a_no_op_and_a_forced_rerun_makes_no_call(finished_run, tmp_path):
    source, config = finished_run
    work = copy_run(source, tmp_path)
    config = work / config.relative_to(source)
    dry = snakemake(work, "--configfile", str(config), "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
    # Targets go first: --configfile and --forcerun would swallow the words after them.
    snakemake(work, "results/prefixes/tags.jsonl", "--configfile", str(config), "--forcerun", "tag_steps")
    calls = read_jsonl(work / "results/calls/tag_steps.jsonl")
    assert len(calls) == 2 and all(c["cache_hit"] for c in calls)
    assert "), 0 calls made," in (work / "logs/tag_steps.log").read_text()


@pytest.mark.e2e
@pytest.mark.xdist_group("embedded")
def test_replay_from_the_cache_is_byte_identical(finished_run, tmp_path):
    """Every job rebuilt from the cache alone (replay mode: a miss would fail the job): every file
    under results/ is byte-identical but the named timing and cache-hit ones (aura_eval.vocab)."""
    source, config = finished_run
    work = copy_run(source, tmp_path)
    config = work / config.relative_to(source)
    before = stable_digests(work)
    assert len(before) > 60 and "results/dataset/aura_eval.jsonl" in before
    assert any(path.startswith("results/calls/") for path in before)
    replay = config.with_name("two_seeds_replay.yaml")
    replay.write_text(config.read_text().replace("  replay: false", "  replay: true"))
    snakemake(work, "--configfile", str(replay), "--forceall")
    assert stable_digests(work) == before
    calls = read_jsonl(work / "results/calls/tag_steps.jsonl")
    assert calls and all(c["cache_hit"] for c in calls)
    # A cache miss in replay mode is an error, not a call.
    proc = snakemake(work, "results/prefixes/tags.jsonl", "--configfile", str(replay), "--config", "seeds=3",
                     check=False)
    assert proc.returncode != 0
    assert "CacheMissError" in (work / "logs/tag_steps.log").read_text()


@pytest.mark.suite
def test_malformed_raw_file_stops_select_seeds(tmp_path):
    work = scratch_copy(tmp_path)
    path = work / "data/raw/rjudge/Finance/benign.json"
    records = json.loads(path.read_text())
    records[2]["contents"][0][0]["role"] = "narrator"
    path.write_text(json.dumps(records))
    proc = snakemake(work, "results/seeds/seeds.jsonl", check=False)
    assert proc.returncode != 0
    log = (work / "logs/select_seeds.log").read_text()
    assert f"Finance/benign.json: record id={records[2]['id']}: turn 0 step 0 has unknown role 'narrator'" in log
    assert not (work / "results/seeds/seeds.jsonl").exists()
