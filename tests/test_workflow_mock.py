"""The whole workflow on mock models (litellm's mock responses, and a stub server that
answers each construction request with a valid instance of its schema): file contents,
counts and the job graph."""

import io
import shutil
import json
import os
import re
import tarfile
import time

import pytest
import yaml

from aura_eval import artefact_registry, vocab
from aura_eval.__main__ import main as aura_main
from aura_eval.tools.digest import stable_digests
from aura_eval.util.jsonl import read_jsonl
from aura_eval.tools.pack import PackError, unpack
from tests.stub_server import STUB_TEXT
from tests.workflow import AGENT_MOCK, MOCK_ENV, STUB_CRED, copy_run, mock_model, planned_jobs, scratch_copy, snakemake


# The mock run (tests/conftest.py, `mock_run`) is shared: a test that changes it works on its own copy.
pytestmark = [pytest.mark.suite, pytest.mark.xdist_group("mock")]


def test_construction_stages_and_release(mock_run):
    work, _ = mock_run
    read = {name: read_jsonl(work / f"results/construct/{name}.jsonl") for name in
            ("relevance", "candidates", "variations", "variation_reviews", "pool", "pairs", "pair_reviews")}
    prefixes = read_jsonl(work / "results/prefixes/prefixes.jsonl")
    n = len(prefixes)
    # Each prefix is one user step (the mock tag is r=0, e=1); the stub finds RS1 relevant.
    assert n > 0 and all(len(p["steps"]) == 1 for p in prefixes)
    assert len(read["relevance"]) == len(read["candidates"]) == len(read["variations"]) == n
    assert all(c["dimension"] == "RS1" and c["selected"] and not c["grounding_found"] for c in read["candidates"])
    for v in read["variations"]:
        assert v["passed_gate"] and v["prompt"] == "p3_intensity_variation" and v["prompt_version"] == 1
        assert v["steps"][0]["content"] == STUB_TEXT and v["raw_response"] and v["model"] == "openai/stub-constructor"
    for review in read["variation_reviews"]:
        assert review["kept"] and (review["keep_votes"], review["unparseable_votes"]) == (2, 1)
        assert [v["status"] for v in review["votes"]] == ["ok", "ok", "unparseable"]
    pool = read["pool"]
    assert len(pool) == 2 * n and sum(i["dimension"] == "original" for i in pool) == n
    assert all(i["classification"]["pair_label"] == "NSP" and i["classification"]["pairable"] for i in pool)
    assert len(read["pairs"]) == 2 * n and all(p["pair_label"] == "SP" for p in read["pairs"])
    # The stub rewrites every step to the same text: a variation's counterpart changes nothing, and the gate says so.
    for pair in read["pairs"]:
        from_original = pair["source_item_id"].endswith(".original")
        assert pair["passed_checks"] == from_original
        assert pair["rejection"] == (None if from_original else "gate: no user or environment step changed")
    assert len(read["pair_reviews"]) == n and all(r["kept"] for r in read["pair_reviews"])
    items = read_jsonl(work / "results/dataset/aura_eval.jsonl")
    excluded = read_jsonl(work / "results/dataset/excluded.jsonl")
    assert len(items) + len(excluded) == 3 * n
    by_id = {i["item_id"]: i for i in items}
    for item in items:
        if item["pair_id"] is not None:
            other = by_id[item["counterpart_id"]]
            assert other["counterpart_id"] == item["item_id"] and other["pair_id"] == item["pair_id"]
            assert {item["pair_label"], other["pair_label"]} == {"NSP", "SP"}
        assert item["steps"][-1]["role"] != "agent" and item["reference_rationale"]
        assert item["provenance"]["prefix_id"] in {p["prefix_id"] for p in prefixes}
    pair_rows = [i for i in items if i["item_id"].endswith(".pair")]
    assert all(len(r["provenance"]["origin"]["review"]) == 3 and r["safe_action_sketches"] for r in pair_rows)
    funnel = json.loads((work / "results/construct/funnel.json").read_text())["funnel"]
    assert (funnel["prefixes"], funnel["variation candidates"], funnel["kept variations"], funnel["classified pool"],
            funnel["pair candidates"], funnel["kept pairs"], funnel["released rows"]) == (
        n, n, n, 2 * n, 2 * n, n, len(items))
    assert funnel["unparseable review votes"] == n and funnel["unparseable pair-review votes"] == n
    assert funnel["pair rejections"] == {"gate: no user or environment step changed": n}
    table = (work / "results/tables/construction_funnel.csv").read_text().splitlines()
    assert table[0] == "stage,ours,paper" and f"prefixes,{n},211" in table and f"released rows,{len(items)},1249" in table
    card = (work / "results/dataset/README.md").read_text()
    assert f"- rows: {len(items)} from" in card and "| `counterpart_id` |" in card


def test_no_key_reaches_any_file(mock_run):
    """The stub quotes the key it was sent in every answer of one reviewer: the value of the
    variable a model entry names never reaches results, logs, Snakemake's metadata or the cache."""
    work, _ = mock_run
    leaked = [str(p.relative_to(work)) for folder in ("results", "logs", ".snakemake", "cache")
              for p in (work / folder).rglob("*") if p.is_file() and STUB_CRED.encode() in p.read_bytes()]
    assert leaked == []
    reviews = read_jsonl(work / "results/construct/variation_reviews.jsonl")
    raw = [v["raw_response"] for r in reviews for v in r["votes"] if v["reviewer"] == "reviewer-3"]
    assert raw and all("Bearer <redacted>" in text and "key=<AURA_STUB_CRED>" in text for text in raw)


def test_a_finished_run_leaves_its_cache_one_file(mock_run):
    """The run's end folds the -wal its last jobs may leave (rules/common.smk, fold_cache_at_end): the
    file alone holds every answer the call logs name."""
    import sqlite3

    from aura_eval.llm.cache import has_wal_content

    work, _ = mock_run
    cache = work / "cache/mock.sqlite"
    assert not has_wal_content(cache)
    answered = {c["key"] for p in (work / "results/calls").rglob("*.jsonl") for c in read_jsonl(p)
                if c["status"] == "ok" and not c["model"].startswith("aura_sim/")}
    copy = work.parent / "mock-cache-alone.sqlite"
    copy.write_bytes(cache.read_bytes())  # the file alone, as a copy without its side files is
    db = sqlite3.connect(copy)
    try:
        stored = {key[:16] for (key,) in db.execute("SELECT key FROM responses")}
    finally:
        db.close()
    assert len(answered) > 100 and sorted(answered - stored) == []


def test_every_stage_writes_traceable_rows(mock_run):
    work, _ = mock_run
    items = read_jsonl(work / "results/dataset/aura_eval.jsonl")
    prefixes = read_jsonl(work / "results/prefixes/prefixes.jsonl")
    assert len(items) > len(prefixes) > 0
    rollouts = read_jsonl(work / "results/rollouts/mock-agent.jsonl")
    assert [r["item_id"] for r in rollouts] == sorted(i["item_id"] for i in items)
    assert all(r["thought"] == "mock thought" and r["action"] == "mock action" for r in rollouts)
    assert all(r["prompt"] == "agent_react_json" and r["raw_response"] == AGENT_MOCK for r in rollouts)
    action_only = read_jsonl(work / "results/rollouts/mock-agent.action_only.jsonl")
    assert len(action_only) == len(items) and all(r["prompt"] == "agent_action_only_json" for r in action_only)
    for judge in ("judge-1", "judge-2", "judge-3"):
        rows = read_jsonl(work / f"results/judgments/mock-agent/{judge}.jsonl")
        assert len(rows) == len(items)
        assert all(r["action_safety"]["given_action_type"] == "A2" for r in rows)
        assert all(r[axis]["prompt"].startswith("judge_") for r in rows for axis in
                   ("detection", "action_type", "action_safety"))
    labels = read_jsonl(work / "results/labels/mock-agent.jsonl")
    assert all(r["detection"]["label"] == "D2" and r["action_type"]["stratum"] == "unanimous" for r in labels)
    ao_labels = read_jsonl(work / "results/labels/mock-agent.action_only.jsonl")
    assert all(r["detection"]["label"] is None and r["action_safety"]["label"] == "Safe" for r in ao_labels)


def test_tables_and_figures(mock_run):
    work, _ = mock_run
    n_items = len(read_jsonl(work / "results/dataset/aura_eval.jsonl"))
    behaviour = (work / "results/tables/table33_behaviour.csv").read_text().splitlines()
    assert behaviour[1].startswith(f"mock-agent,○ mock-agent,{n_items},{n_items},0.0,")
    # Every mock action is judged Safe: Table 37 says so, in the reader's terms.
    assert "*Empty: no unsafe outcome among" in (work / "results/tables/table37_top_unsafe.md").read_text()
    for name in ("fig4_unsafe_by_detection", "fig5_action_types", "fig6_unsafe_by_dimension",
                 "fig7_detection_levels", "fig8_detection_by_action"):
        assert (work / f"results/figures/{name}.png").read_bytes()[:4] == b"\x89PNG"
    html = (work / "results/report/report.html").read_text()
    assert "Overall safe and unsafe rates" in html and "no human reference labels yet" in html
    assert "no human labels imported yet: see results/validation/annotation/" in html
    assert 'href="../labels/mock-agent.jsonl"' in html and "mock.yaml" in html  # what each table read; the config
    # every figure as a PNG but Figure 2, whose SVG is inline (tests/test_workflow_mock.py's running example test)
    assert html.count("data:image/png;base64") == len(artefact_registry.FIGURES) - len(vocab.INLINE_SVG_FIGURES)


def _items_page(work, href: str):
    """The audit page an address of Figure 2 leads to (from results/figures/), and its section id."""
    page, _, section = href.partition("#")
    return (work / "results/figures" / page).resolve(), section


def test_running_example_shows_what_the_runs_files_hold(mock_run, tmp_path):
    """Figure 2's sidecar against the mock run's files (its seeds lack iot-023: the figure says which
    record it shows instead, and why); its SVG inline in the report and the audit index, every part
    linking to the page of the item that holds it; drawn again with that record named, the same parts."""
    from aura_eval.analyze.running_example import sidecar_text

    work, _ = mock_run
    shown = json.loads((work / "results/figures/fig2_running_example.json").read_text())
    seeds = {s["seed_id"]: s for s in read_jsonl(work / "results/seeds/seeds.jsonl")}
    tags = {t["seed_id"]: t for t in read_jsonl(work / "results/prefixes/tags.jsonl")}
    prefixes = {p["prefix_id"]: p for p in read_jsonl(work / "results/prefixes/prefixes.jsonl")}
    items = {i["item_id"]: i for i in read_jsonl(work / "results/dataset/aura_eval.jsonl")}
    assert len(seeds) == 4 and "iot-023" not in seeds and shown["setting"] == "iot-023"
    seed = shown["record"]["seed_id"]
    assert shown["chosen_by"] in ("case_study", "most_complete") and seed in seeds
    assert shown["why"].startswith("report.running_example (iot-023) is not among this run's 4 seeds")
    assert (shown["record"]["domain"], shown["record"]["rjudge_id"], shown["record"]["n_steps"]) == (
        seeds[seed]["domain"], seeds[seed]["rjudge_id"], seeds[seed]["n_steps"])
    assert (shown["tag"]["risk_trigger"], shown["tag"]["execution_point"]) == (
        tags[seed]["risk_trigger"], tags[seed]["execution_point"]) == (0, 1)  # the mock tagger's answer
    for point, p in shown["prefixes"].items():
        if p["prefix_id"] is None:  # r=0, e=1: no user or environment step between them
            assert point == "pre_execution" and f"{seed}.{point}" not in prefixes and p["missing"]
        else:
            assert p["steps"] == [s["index"] for s in prefixes[p["prefix_id"]]["steps"]] == [0]
    assert shown["prefixes"]["at_trigger"]["item_id"] == f"{seed}.at_trigger.original" in items
    v = shown["variation"]
    assert items[v["item_id"]]["seed_id"] == seed and items[v["item_id"]]["dimension"] == v["dimension"] == "RS1"
    pair = shown["pair"]  # the mock run pairs every original (NSP) with an SP counterpart
    nsp, sp = items[pair["NSP"]], items[pair["SP"]]
    assert (nsp["pair_label"], sp["pair_label"], nsp["pair_id"], sp["pair_id"]) == ("NSP", "SP", pair["pair_id"],
                                                                                  pair["pair_id"])
    assert nsp["counterpart_id"] == sp["item_id"] and nsp["seed_id"] == sp["seed_id"] == seed
    rollout = shown["rollout"]
    row = {r["item_id"]: r for r in read_jsonl(work / "results/rollouts/mock-agent.jsonl")}[rollout["item_id"]]
    label = {r["item_id"]: r for r in read_jsonl(work / "results/labels/mock-agent.jsonl")}[rollout["item_id"]]
    assert (rollout["run"], rollout["item_id"], rollout["key"]) == ("mock-agent", pair["NSP"], row["call"]["key"])
    assert [rollout[a] for a in vocab.AXES] == [label[a]["label"] for a in vocab.AXES] == ["D2", "A2", "Safe"]
    links = {shown["prefixes"]["at_trigger"]["link"], v["link"], *pair["links"].values(), rollout["link"]}
    assert len(links) == 5
    svg = (work / "results/figures/fig2_running_example.svg").read_text()
    report = (work / "results/report/report.html").read_text()
    index = (work / "results/audit/index.html").read_text()
    for href in links:
        page, section = _items_page(work, href)
        assert page.is_file() and f'id="{section}"' in page.read_text(), href
        assert f'xlink:href="{href}"' in svg and f'xlink:href="{href}"' in report and f'xlink:href="{href}"' in index
    for page in (report, index):
        assert page.count('<svg class="aura-inline-figure" role="img"') == 1 and f"Shown: record {seed}, as " in page
    # The same run's files, the record named: the figure shows it, with the same parts (no new run).
    inputs = {name: str(work / vocab.FILES[name]) for name in ("seeds", "tags", "prefixes", "dataset")} | {
        "react_rollouts": [str(work / "results/rollouts/mock-agent.jsonl")],
        "react_labels": [str(work / "results/labels/mock-agent.jsonl")],
        "taxonomy": [str(work / "prompts/taxonomy.yaml")]}
    named = artefact_registry.builder_of(vocab.RUNNING_EXAMPLE)(
        inputs, tmp_path / "f.png", tmp_path / "f.svg", json=tmp_path / "f.json",
        settings={"report": {"running_example": seed, "case_study": {"dimension": "RS5", "prefix": None}}})
    assert named["chosen_by"] == "running_example" and named["record"] == shown["record"]
    assert {k: named[k] for k in ("tag", "prefixes", "variation", "pair", "rollout")} == {
        k: shown[k] for k in ("tag", "prefixes", "variation", "pair", "rollout")}
    assert (tmp_path / "f.json").read_text() == sidecar_text(named)


def test_running_example_setting_reruns_only_figure_2(mock_run, tmp_path):
    """report.running_example reaches Figure 2 alone (then what embeds it); Table 34's setting reaches
    Table 34 and Figure 2, whose fallback is Table 34's scenario."""
    work, config = mock_run
    settings = yaml.safe_load(config.read_text())
    settings["report"]["running_example"] = "program-138"
    changed = tmp_path / "mock-example.yaml"
    changed.write_text(yaml.safe_dump(settings, sort_keys=False))
    embedding = {"report": 1, "audit_site": 1, "all": 1}
    assert planned_jobs(work, "--configfile", str(changed)) == {vocab.RUNNING_EXAMPLE: 1, **embedding}
    settings["report"]["case_study"]["dimension"] = "RS2"
    changed.write_text(yaml.safe_dump(settings, sort_keys=False))
    assert planned_jobs(work, "--configfile", str(changed)) == {vocab.RUNNING_EXAMPLE: 1, "table34_case_study": 1,
                                                                **embedding}


def test_validation_pages_and_no_human_labels(mock_run):
    work, _ = mock_run
    annotators = ("annotator-1", "annotator-2", "annotator-3")
    for axis in ("detection", "action_type", "action_safety"):
        sample = read_jsonl(work / f"results/validation/sample_{axis}.jsonl")
        assert len(sample) == 3 and all(s["sample_id"].startswith(f"{axis}/mock-agent/") for s in sample)
        # Two of the three annotators per sample (mock.yaml): 6 assignments, 2 each.
        assert all(len(s["annotators"]) == 2 and set(s["annotators"]) < set(annotators) for s in sample)
        for annotator in annotators:
            page = (work / f"results/validation/annotation/{annotator}_{axis}.html").read_text()
            mine = [s["sample_id"] for s in sample if annotator in s["annotators"]]
            assert len(mine) == 2 and "judge-1" not in page
            assert [s["sample_id"] in page for s in sample] == [annotator in s["annotators"] for s in sample]
    human = read_jsonl(work / "results/validation/human_labels.jsonl")
    assert len(human) == 9 and not any(r["retained"] for r in human)
    assert all(len(r["assigned"]) == 2 and r["annotators"] == [] for r in human)


def test_reliability_runs(mock_run):
    work, _ = mock_run
    five = read_jsonl(work / "results/reliability/five_judge/mock-agent.jsonl")
    assert len(five) == 3 and all(len(r["judges"]) == 5 and r["rule"] == "plurality" for r in five)
    repeats = read_jsonl(work / "results/reliability/repeats/mock-agent.jsonl")
    assert len(repeats) == 9  # 3 items x 3 judges
    assert all(r["action_type"]["labels"] == ["A2"] * 3 and r["action_type"]["consistent"] for r in repeats)
    calls = read_jsonl(work / "results/calls/reliability/repeats/mock-agent.jsonl")
    assert sorted({c["sample"] for c in calls}) == [0, 1, 2]
    swap = read_jsonl(work / "results/reliability/vendor_swap/mock-agent.jsonl")
    assert len(swap) == 3 and swap[0]["replaced_judges"] == ["judge-1", "judge-2", "judge-3"]
    assert all(r["original_safety"] == r["replaced_safety"] == "Safe" for r in swap)
    # The calibration runs wait for the agent's panel labels, so what they ask the panel judges that the
    # judge jobs already asked (detection and type, first sample) comes from the cache: paid once.
    panel = {"judge-1", "judge-2", "judge-3"}
    for kind in ("five_judge", "repeats"):
        again = [c for c in read_jsonl(work / f"results/calls/reliability/{kind}/mock-agent.jsonl")
                 if c["endpoint"] in panel and c["sample"] == 0 and c["prompt"] != "judge_action_safety"]
        assert again and all(c["cache_hit"] and c["attempts"] == 0 for c in again), kind


def test_every_call_carries_its_first_calls_provenance(mock_run):
    """Call logs and rows carry the provenance stored with the response at its first call."""
    work, _ = mock_run
    calls = read_jsonl(work / "results/calls/construct/vary.jsonl")
    assert calls and all(c["response_id"] == "chatcmpl-stub" and c["called_at"].endswith("Z") and
                         c["litellm_version"] and c["params"] == {"temperature": 0.0} and
                         c["first_latency_s"] is not None for c in calls)
    variations = read_jsonl(work / "results/construct/variations.jsonl")
    assert {v["call"]["key"] for v in variations} == {c["key"] for c in calls}
    assert all(v["call"]["tokens_in"] == 11 and v["call"]["tokens_out"] == 5 for v in variations)


def _zero_calls_made(work) -> list[str]:
    """The stage logs that report calls made (a replay must make none)."""
    logs = {p: p.read_text() for p in (work / "logs").rglob("*.log")}
    made = {str(p.relative_to(work)): [int(n) for n in re.findall(r"(\d+) calls made", text)] for p, text in logs.items()}
    assert sum(len(v) for v in made.values()) > 10
    return [p for p, counts in made.items() if any(counts)]


@pytest.mark.e2e
def test_pack_unpack_replays_offline_with_zero_calls(mock_run, tmp_path, capsys):
    """A finished run packed, verified, unpacked into a fresh checkout and replayed there: no
    model call, and every stable file under results/ equal to the packed run's."""
    work, config = mock_run
    archive = tmp_path / "run.tar.gz"
    assert aura_main(["pack", str(archive), "--configfile", str(config.relative_to(work)), "--root", str(work)]) == 0
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert names[0] == "MANIFEST.sha256" and "cache/mock.sqlite" in names and "config/run.yaml" in names
    assert {"TERMS.md", "LICENSE", "rjudge/SOURCE.md", "STABLE_DIGESTS.sha256", "PACK.json", "results/report/report.html",
            "results/dataset/aura_eval.jsonl", "results/dataset/croissant.json", "results/dataset/README.md",
            "results/tables/model_calls.csv"} <= set(names)
    checkout = scratch_copy(tmp_path)
    assert aura_main(["unpack", str(archive), str(checkout)]) == 0
    assert "packed/config/replay.yaml" in capsys.readouterr().out
    replay = checkout / "packed/config/replay.yaml"
    assert yaml.safe_load(replay.read_text())["llm"] == {**yaml.safe_load(config.read_text())["llm"],
                                                         "replay": True, "cache": "packed/cache/mock.sqlite"}
    start = time.monotonic()
    snakemake(checkout, "--forceall", "--configfile", str(replay))
    print(f"pack {archive.stat().st_size} bytes; replay {time.monotonic() - start:.1f} s")
    assert _zero_calls_made(checkout) == []
    calls = [c for p in (checkout / "results/calls").rglob("*.jsonl") for c in read_jsonl(p)]
    assert len(calls) > 50 and all(c["cache_hit"] for c in calls)
    packed = dict(reversed(line.split("  ")) for line in
                  (checkout / "packed/STABLE_DIGESTS.sha256").read_text().splitlines())
    assert stable_digests(checkout) == stable_digests(work) == packed


def test_unpack_names_a_file_that_does_not_match_its_checksum(mock_run, tmp_path):
    work, config = mock_run
    archive, tampered = tmp_path / "run.tar.gz", tmp_path / "tampered.tar.gz"
    assert aura_main(["pack", str(archive), "--configfile", str(config.relative_to(work)), "--root", str(work)]) == 0
    with tarfile.open(archive) as src, tarfile.open(tampered, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name == "results/tables/seed_composition.csv":
                data += b"x"
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    (tmp_path / "checkout").mkdir()
    with pytest.raises(PackError, match=r"checksum mismatch for results/tables/seed_composition\.csv"):
        unpack(tampered, tmp_path / "checkout")
    assert not (tmp_path / "checkout/packed").exists()


# The tables and figures that read the labels (through the frame, the call logs, the reliability
# runs or the human-validation chain); the construction and seed tables do not.
FRAME_TABLES = {"table33_behaviour", "table31_nsp_sp_gap", "table32_matched_pairs_gap", "table35_flips",
                "table36_failure_mechanism", "table37_top_unsafe", "table38_prompt_format", "headline_summary"}
FIGURES = {"fig4_unsafe_by_detection", "fig5_action_types", "fig6_unsafe_by_dimension", "fig7_detection_levels",
           "fig8_detection_by_action", "headline_comparison"}
HUMAN_TABLES = {"table3_human_reliability", "table18_retention", "table19_panel_strata", "table20_human_agreement",
                "table21_judge_accuracy", "table22_accuracy_by_consensus", "table23_ensembles"}
CALL_TABLES = {"model_calls", "run_summary", "forecast_vs_actual", "forecast_bands"}
# What reads the ReAct runs' labels and rollouts themselves (not the frame): a new agent reruns it,
# a new action-only subset does not.
REACT_TABLES = {"table34_case_study", vocab.RUNNING_EXAMPLE}


def _one_each(names) -> dict:
    return {name: 1 for name in names}


def test_action_only_size_reruns_only_the_action_only_runs(mock_run, tmp_path):
    """A new action-only subset size reruns the subset, the action-only run and what reads it."""
    work, config = mock_run
    settings = yaml.safe_load(config.read_text())
    settings["action_only"]["n_items"] = 2
    changed = tmp_path / "mock-subset.yaml"
    changed.write_text(yaml.safe_dump(settings, sort_keys=False))
    assert planned_jobs(work, "--configfile", str(changed)) == {
        "action_only_subset": 1, "dataset_card": 1, "rollout": 1, "judge_detection_type": 3, "judge_safety": 3, "labels": 1,
        "analysis_frame": 1, "evaluation_summary": 1, **_one_each(FRAME_TABLES | FIGURES | CALL_TABLES),
        "report": 1, "audit_site": 1, "all": 1}


def test_human_labels_rerun_only_the_human_validation_tables(mock_run, tmp_path):
    source, config = mock_run
    work = copy_run(source, tmp_path)
    (work / "data/human/annotations/annotator-9.csv").write_text("sample_id,annotator,axis,label,note\n")
    assert planned_jobs(work, "--configfile", str(config.relative_to(source))) == {
        # the audit site too: it serves the rows behind each cell of those tables
        "import_human_labels": 1, **_one_each(HUMAN_TABLES), "report": 1, "audit_site": 1, "all": 1}


def test_reordered_config_reruns_nothing(mock_run, tmp_path):
    """Params are canonical: the same values in another key order change no job."""
    work, config = mock_run
    settings = yaml.safe_load(config.read_text())

    def reverse(value):
        return {k: reverse(value[k]) for k in reversed(list(value))} if isinstance(value, dict) else value
    reordered = tmp_path / "mock-reordered.yaml"
    reordered.write_text(yaml.safe_dump(reverse(settings), sort_keys=False))
    assert planned_jobs(work, "--configfile", str(reordered)) == {}


# What an added agent's own jobs are, and what reads labels, call logs or the frame: never the
# calibration runs (five_judge, repeats), the audit samples, the pages or the human labels; the
# audit site (it lists every run's labels) does.
NEW_AGENT_JOBS = {"rollout": 1, "judge_detection_type": 3, "judge_safety": 3, "labels": 1, "analysis_frame": 1,
                  "evaluation_summary": 1, **_one_each(FRAME_TABLES | FIGURES | CALL_TABLES | REACT_TABLES),
                  "report": 1, "audit_site": 1, "all": 1}
CALIBRATION_OUTPUTS = ("results/validation/", "results/reliability/five_judge/", "results/reliability/repeats/")


def _with_agent(folder, config, name, vendor, file_name, calibrate=False):
    settings = yaml.safe_load(config.read_text())
    settings["models"]["agent-2"] = mock_model(AGENT_MOCK, seed=7)
    settings["agents"][name] = {"model": "agent-2", "group": "frontier", "vendor": vendor, "output": "json"}
    if calibrate:
        settings["reliability"]["calibration_agents"].append(name)
    path = folder / file_name
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def _planned_outputs(work, config) -> str:
    """The output lines of a dry run's jobs."""
    dry = snakemake(work, "--configfile", str(config), "-n")
    return "\n".join(line for line in (dry.stdout + dry.stderr).splitlines() if line.strip().startswith("output:"))


def test_an_agent_sharing_a_judges_vendor_adds_its_vendor_swap_and_no_calibration(mock_run, tmp_path):
    """A dry run only: the vendor swap is the one reliability job; naming the agent under
    calibration_agents adds its calibration and audit, and redoes the other calibration agent's."""
    work, config = mock_run
    same_vendor = _with_agent(tmp_path, config, "kin-agent", "mockvendor", "mock-kin.yaml")
    assert planned_jobs(work, "--configfile", str(same_vendor)) == {
        **NEW_AGENT_JOBS, "reliability": 1, "table24_vendor_swap": 1}
    out = _planned_outputs(work, same_vendor)
    assert "results/reliability/vendor_swap/kin-agent.jsonl" in out
    assert not [line for line in out.splitlines() if any(p in line for p in CALIBRATION_OUTPUTS)]
    calibrated = _with_agent(tmp_path, config, "kin-agent", "mockvendor", "mock-kin-calibrated.yaml", calibrate=True)
    # Its three reliability jobs, and mock-agent's five-judge and repeats jobs again: the calibration
    # agents sample disjoint shares of the items, and a new agent takes part of mock-agent's share.
    assert planned_jobs(work, "--configfile", str(calibrated)) == {
        **NEW_AGENT_JOBS, "reliability": 5, "table24_vendor_swap": 1, "five_judge_panel": 1, "judge_consistency": 1,
        "validation_sample": 1, "annotation_pages": 1, "import_human_labels": 1, **_one_each(HUMAN_TABLES)}


@pytest.mark.e2e
def test_adding_a_model_runs_only_its_jobs(mock_run, tmp_path):
    source, config = mock_run
    work = copy_run(source, tmp_path)
    bigger = _with_agent(work / "config", config, "new-agent", "elsewhere", "mock-plus.yaml")
    # Its own jobs, then the tables and figures that read labels; the construction tables, the
    # seed tables, Table 29, the vendor swap (no judge shares its vendor), the calibration runs and
    # the whole human-validation chain (they use the calibration agents only) stay as they are.
    assert planned_jobs(work, "--configfile", str(bigger)) == NEW_AGENT_JOBS
    assert not [line for line in _planned_outputs(work, bigger).splitlines()
                if any(p in line for p in CALIBRATION_OUTPUTS)]
    before = {p: p.read_bytes() for folder in CALIBRATION_OUTPUTS for p in (work / folder).rglob("*") if p.is_file()}
    snakemake(work, "--configfile", str(bigger), env=MOCK_ENV)
    assert len(read_jsonl(work / "results/labels/new-agent.jsonl")) > 0
    behaviour = (work / "results/tables/table33_behaviour.csv").read_text()
    assert "★ new-agent" in behaviour and "○ mock-agent" in behaviour
    after = {p: p.read_bytes() for folder in CALIBRATION_OUTPUTS for p in (work / folder).rglob("*") if p.is_file()}
    assert after == before and any("annotation" in str(p) for p in before)
    again = snakemake(work, "--configfile", str(bigger), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


# Settings that change no answer (aura_eval.llm.settings): each, changed on a finished run, plans no job.
ANSWER_FREE_SETTINGS = [
    ("llm", "timeout_s", 61), ("llm", "max_retries", 2), ("llm", "backoff_s", 0.25), ("llm", "max_wait_s", 30),
    ("llm", "concurrency", {"default": 3}), ("llm", "max_failed_share", 0.5), ("llm", "batch_poll_s", 5),
    ("llm", "batch_max_wait_s", 60), ("llm", "budget_usd", 100), ("llm", "rate_limits", {"openai": {"rpm": 6000}}),
    ("llm", "jobs_per_rate_limit", 2), ("llm", "max_network_jobs", 3), ("llm", "cache_on_network_fs", True),
    ("judge-1", "batch", True), ("judge-1", "price", {"input_per_mtok": 1.0, "output_per_mtok": 2.0}),
    ("judge-1", "api_key_env", "AURA_OTHER_CRED"),
]


def _changed(config: dict, changes) -> dict:
    out = json.loads(json.dumps(config))
    for section, key, value in changes:
        (out["llm"] if section == "llm" else out["models"][section])[key] = value
    return out


@pytest.mark.e2e
def test_settings_that_change_no_answer_rerun_nothing(mock_run, tmp_path, monkeypatch):
    work, config = mock_run
    copy = copy_run(work, tmp_path)  # a run of our own (mtimes kept)
    base = yaml.safe_load(config.read_text())
    path = copy / ".test" / "config" / "changed.yaml"
    for change in ANSWER_FREE_SETTINGS:
        path.write_text(yaml.safe_dump(_changed(base, [change])))
        assert planned_jobs(copy, "--configfile", str(path)) == {}, change
    # All at once, and one job forced: its log shows the new values in force (answers from the cache).
    path.write_text(yaml.safe_dump(_changed(base, ANSWER_FREE_SETTINGS)))
    assert planned_jobs(copy, "--configfile", str(path)) == {}
    monkeypatch.setenv("AURA_OTHER_CRED", "other-cred-1234567890")
    snakemake(copy, "--configfile", str(path), "--forcerun", "judge_safety", "--until", "judge_safety", env=MOCK_ENV)
    log = (copy / "logs/judge/mock-agent/safety/judge-1.log").read_text()
    assert "timeout_s=61" in log and "max_failed_share=0.5" in log and "budget_usd=100" in log
    assert "concurrency={'default': 3}" in log
    calls = read_jsonl(copy / "results/calls/judge/mock-agent/safety/judge-1.jsonl")
    assert calls and all(c["cache_hit"] for c in calls)  # a batch model whose answers are all cached sends nothing
    # What changes answers still reruns exactly its jobs: a judge's sampling parameters, replay.
    path.write_text(yaml.safe_dump(_changed(base, [("judge-2", "params", {**base["models"]["judge-2"]["params"],
                                                                          "temperature": 0.3})])))
    planned = planned_jobs(copy, "--configfile", str(path))
    assert planned["judge_detection_type"] == 2  # judge-2 on the two runs
    assert planned["judge_safety"] == 6  # every judge's safety job reads every judge's action types
    assert "rollout" not in planned and "tag_steps" not in planned and planned["labels"] == 2
    assert planned["reliability"] == 3  # every calibration run's panel holds judge-2
    replay = json.loads(json.dumps(base))
    replay["llm"]["replay"] = True
    path.write_text(yaml.safe_dump(replay))
    planned = planned_jobs(copy, "--configfile", str(path))
    assert {"tag_steps", "relevance", "rollout", "judge_safety", "reliability"} <= set(planned)


@pytest.mark.e2e
def test_an_agent_given_by_an_inspect_log_lands_in_labels_and_tables(mock_run, tmp_path):
    """The way back from inspect_ai: the aura_eval task run on this run's dataset with mockllm, its log
    named by an agent instead of a model; the rollout job reads it (no call) and the agent's
    judgments, labels and tables follow as for any new agent."""
    from tests.inspect_mock import SAFE_ACTION, UNSAFE_ACTION, run_task

    source, config = mock_run
    work = copy_run(source, tmp_path)
    dataset = read_jsonl(work / "results/dataset/aura_eval.jsonl")

    def action_of(text):  # either action, by the prompt's length: the rollouts must follow the log's text
        return UNSAFE_ACTION if len(text) % 2 else SAFE_ACTION

    log = run_task(work / "results/dataset/aura_eval.jsonl", work / "inspect_logs", action_of)
    assert log.status == "success" and len(log.samples) == len(dataset)
    settings = yaml.safe_load(config.read_text())
    log_path = os.path.relpath(log.location, work)
    settings["agents"]["inspected"] = {"inspect_log": log_path, "group": "frontier", "vendor": "elsewhere"}
    path = work / "config" / "mock-inspected.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    assert planned_jobs(work, "--configfile", str(path)) == NEW_AGENT_JOBS
    snakemake(work, "--configfile", str(path), env=MOCK_ENV)
    rows = {r["item_id"]: r for r in read_jsonl(work / "results/rollouts/inspected.jsonl")}
    outputs = {str(s.id): s.output for s in log.samples}
    assert sorted(rows) == sorted(item["item_id"] for item in dataset)
    assert all(r["raw_response"] == outputs[i].completion and r["status"] == "ok" for i, r in rows.items())
    assert all(r["action"] == outputs[i].completion.split("[Agent_Action]: ")[1] for i, r in rows.items())
    assert {r["action"] for r in rows.values()} <= {SAFE_ACTION, UNSAFE_ACTION}
    assert {r["inspect"]["log"] for r in rows.values()} == {os.path.basename(log_path)}
    assert {(r["inspect"]["eval_id"], r["inspect"]["model"]) for r in rows.values()} == {(log.eval.eval_id, "mockllm/model")}
    assert read_jsonl(work / "results/calls/rollout/inspected.jsonl") == []  # no model call
    labels = read_jsonl(work / "results/labels/inspected.jsonl")
    assert len(labels) == len(dataset) and all(r["rollout_status"] == "ok" for r in labels)
    assert "★ inspected" in (work / "results/tables/table33_behaviour.csv").read_text()
    assert "inspected" in (work / "results/tables/evaluation_summary.csv").read_text()
    summary = (work / "results/tables/run_summary.md").read_text()
    assert f"(inspect log) | `{os.path.basename(log_path)}`" in summary and os.path.dirname(log_path) not in summary
    again = snakemake(work, "--configfile", str(path), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # A packed run carries the log, and its replay config reads the packed copy.
    from aura_eval.tools.pack import pack

    pack(work / "inspected.tar.gz", str(path), work)
    name = f"inspect/inspected/{os.path.basename(log_path)}"
    with tarfile.open(work / "inspected.tar.gz") as tar:
        assert tar.extractfile(name).read() == (work / log_path).read_bytes()
        replay = yaml.safe_load(tar.extractfile("config/replay.yaml").read())
    assert replay["agents"]["inspected"]["inspect_log"] == f"packed/{name}"
