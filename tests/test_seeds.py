"""Seed selection from the raw R-Judge files (paper §4, C.1)."""

import json
from collections import Counter

import pytest

from aura_eval.construct import seeds as seeds_mod
from aura_eval.util.jsonl import InputError, read_jsonl


def test_unintended_seed_counts_match_the_paper(rjudge_dir):
    seeds = seeds_mod.load_seeds(rjudge_dir)
    assert len(seeds) == 157
    assert Counter(s["domain"] for s in seeds) == {"Program": 48, "Application": 39, "IoT": 30, "Web": 23,
                                                   "Finance": 17}
    assert Counter(s["label"] for s in seeds) == {"unsafe": 101, "safe": 56}
    assert len({s["seed_id"] for s in seeds}) == 157
    assert Counter(s["n_turns"] for s in seeds) == {1: 141, 2: 14, 3: 1, 4: 1}
    assert min(s["n_steps"] for s in seeds) == 3 and max(s["n_steps"] for s in seeds) == 28


def test_steps_keep_the_text_exactly(rjudge_dir):
    seed = next(s for s in seeds_mod.load_seeds(rjudge_dir) if s["seed_id"] == "iot-007")
    raw = next(r for r in json.loads((rjudge_dir / "IoT" / "harmful.json").read_text()) if r["id"] == 7)
    flat = [step for turn in raw["contents"] for step in turn]
    assert len(seed["steps"]) == len(flat) == 7
    for ours, theirs in zip(seed["steps"], flat):
        assert {k: v for k, v in ours.items() if k not in ("index", "turn")} == theirs
    assert seed["steps"][3]["action"] == raw["contents"][0][3]["action"]
    assert [s["index"] for s in seed["steps"]] == list(range(7))


def test_stratified_subset_is_deterministic_and_proportional(rjudge_dir):
    seeds = seeds_mod.load_seeds(rjudge_dir)
    subset = seeds_mod.stratified_subset(seeds, 20)
    assert len(subset) == 20
    assert subset == seeds_mod.stratified_subset(list(reversed(seeds)), 20)
    counts = Counter((s["domain"], s["label"]) for s in subset)
    assert counts[("Program", "unsafe")] == 4 and counts[("Finance", "safe")] == 1
    assert len(counts) == 10  # every stratum present
    assert seeds_mod.stratified_subset(seeds, "all") == seeds
    with pytest.raises(ValueError, match="seeds must be"):
        seeds_mod.stratified_subset(seeds, 0)


def _corrupt(path, mutate):
    records = json.loads(path.read_text())
    mutate(records)
    path.write_text(json.dumps(records))


@pytest.mark.parametrize("mutate, message", [
    (lambda rs: rs[0].pop("risk_description"), "field 'risk_description' is missing"),
    (lambda rs: rs[0].update(label="1"), "field 'label' must be 0 or 1"),
    (lambda rs: rs[0]["contents"][0][0].update(role="robot"), "unknown role 'robot'"),
    (lambda rs: rs[0].update(contents=[]), r"trajectory\) is missing or empty"),
    (lambda rs: rs[0]["contents"][0][1].update(action=5), "field 'action' must be a string or null"),
    (lambda rs: rs[1].update(id=rs[0]["id"]), "duplicate id"),
])
def test_malformed_record_names_file_and_record(rjudge_copy, tmp_path, mutate, message):
    path = rjudge_copy / "IoT" / "harmful.json"
    first_id = json.loads(path.read_text())[0]["id"]
    _corrupt(path, mutate)
    out = tmp_path / "out" / "seeds.jsonl"
    with pytest.raises(InputError, match=message) as err:
        seeds_mod.select_seeds(rjudge_copy, "all", out)
    assert "IoT/harmful.json" in str(err.value) and f"record id={first_id}" in str(err.value)
    assert not out.exists() and not out.parent.exists()


def test_invalid_json_names_the_file(rjudge_copy, tmp_path):
    (rjudge_copy / "Web" / "benign.json").write_text('[{"id": 1,')
    with pytest.raises(InputError, match=r"Web/benign.json: invalid JSON at line 1"):
        seeds_mod.select_seeds(rjudge_copy, "all", tmp_path / "seeds.jsonl")


def test_run_writes_sorted_jsonl(rjudge_dir, tmp_path):
    out = tmp_path / "seeds.jsonl"
    seeds_mod.select_seeds(rjudge_dir, 12, out)
    rows = read_jsonl(out)
    assert len(rows) == 12 and [r["seed_id"] for r in rows] == sorted(r["seed_id"] for r in rows)
    assert list(rows[0]) == ["seed_id", "domain", "rjudge_id", "label", "scenario", "profile", "risk_description",
                             "n_turns", "n_steps", "steps"]


def test_a_lone_surrogate_names_the_file_and_record(rjudge_copy, tmp_path):
    path = rjudge_copy / "IoT" / "harmful.json"
    records = json.loads(path.read_text())
    records[2]["contents"][0][1]["thought"] = "checks the \ud800 sensor"  # json.dumps writes it as \ud800
    path.write_text(json.dumps(records))
    out = tmp_path / "out" / "seeds.jsonl"
    with pytest.raises(InputError) as err:
        seeds_mod.select_seeds(rjudge_copy, "all", out)
    assert str(err.value) == (f"{path}: record id={records[2]['id']} (index 2): record['contents'][0][1]['thought'] "
                              f"is not valid Unicode (a lone surrogate at character 11, e.g. from a \\ud800 escape); "
                              f"fix that text in the file")
    assert not out.exists()
    # In a key, and in a record without an id: named by its index.
    records[2]["contents"][0][1]["thought"] = "fine"
    records[4] = {"\udfff": 1}
    path.write_text(json.dumps(records))
    with pytest.raises(InputError, match=r"harmful.json: record at index 4: a key of record is not valid Unicode"):
        seeds_mod.select_seeds(rjudge_copy, "all", out)
