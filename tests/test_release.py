"""The release folder (results/dataset/) of a real small run (the workflow on .test/config/sim_noisy.yaml up
to the `dataset_card` rule; SIMULATION: no model runs): it loads offline with `datasets.load_dataset`, by
default and by each named config, with the JSONL's row counts and nested fields; its Croissant file
validates with mlcroissant and its records are the JSONL's; both declare the data's licence and say the
run is simulated; a rerun writes the same bytes."""

from __future__ import annotations

import hashlib
import json
import shutil
from types import SimpleNamespace

import pytest
import yaml

from aura_eval.construct.card import CONFIGS, size_category
from aura_eval.util.jsonl import read_jsonl
from aura_eval.vocab import DATA_LICENCE, FILES, RJUDGE_LICENCE_STATEMENT
from aura_eval.workflow.config import CONSTRUCTION_ROLES
from tests.workflow import copy_run, snakemake

DATA = {"items": FILES["dataset"], "action_only_subset": FILES["subset"], "excluded": FILES["excluded"]}


@pytest.fixture
def release(noisy_run):
    """(work, config path): the shared noisy simulated run (tests/conftest.py), which holds the release."""
    work, _ = noisy_run
    return work, work / ".test/config/sim_noisy.yaml"


def _rows(work) -> dict[str, list[dict]]:
    return {name: read_jsonl(work / path) for name, path in DATA.items()}


def _front_matter(work) -> dict:
    text = (work / FILES["card"]).read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def _offline_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return datasets


def test_size_category_of_a_row_count():
    assert [size_category(n) for n in (0, 999, 1000, 1249, 10_000, 100_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "1K<n<10K", "10K<n<100K", "100K<n<1M"]


@pytest.mark.e2e
@pytest.mark.xdist_group("sim")
def test_the_card_declares_licence_configs_and_the_simulation(release):
    work, _ = release
    rows = _rows(work)
    meta = _front_matter(work)
    assert meta["license"] == "cc-by-nc-sa-4.0" == DATA_LICENCE.id
    assert meta["pretty_name"] == "AURA-Eval (SIMULATED)" and "simulated" in meta["tags"]
    assert meta["size_categories"] == ["n<1K"] and meta["task_categories"] == ["text-generation"]
    assert [(c["config_name"], c.get("default"), c["data_files"]) for c in meta["configs"]] == [
        ("items", True, [{"split": "test", "path": "aura_eval.jsonl"}]),
        ("action_only_subset", None, [{"split": "test", "path": "action_only_subset.jsonl"}]),
        ("excluded", None, [{"split": "test", "path": "excluded.jsonl"}])]
    card = (work / FILES["card"]).read_text()
    assert "**SIMULATED: every model answer behind this release" in card
    assert f'"{RJUDGE_LICENCE_STATEMENT}"' in card and DATA_LICENCE.url in card
    assert f"- rows: {len(rows['items'])} from" in card
    # The noisy run has rows of every kind: exclusions, pairs, both labels.
    assert len(rows["excluded"]) > 0 and any(r["pair_id"] for r in rows["items"])
    assert {r["pair_label"] for r in rows["items"]} == {"NSP", "SP"}


@pytest.mark.e2e
@pytest.mark.xdist_group("sim")
def test_the_folder_loads_with_datasets_offline(release, tmp_path, monkeypatch):
    work, _ = release
    datasets = _offline_datasets(tmp_path, monkeypatch)
    folder, cache = str(work / "results/dataset"), str(tmp_path / "cache")
    rows = _rows(work)
    default = datasets.load_dataset(folder, cache_dir=cache)
    assert list(default) == ["test"] and default["test"].num_rows == len(rows["items"])  # the items, nothing else
    for name, expected in rows.items():
        loaded = datasets.load_dataset(folder, name, split="test", cache_dir=cache)
        assert loaded.num_rows == len(expected) == sum(1 for _ in open(work / DATA[name]))
        assert loaded.column_names == list(expected[0])
        for got, want in zip(loaded, expected):
            assert got["item_id"] == want["item_id"]
            if name == "excluded":
                assert got == want
                continue
            # Nested fields come back: each step's keys (a key the step lacks is null), the nulls, the lists,
            # and provenance as the very object the JSONL holds.
            assert [s["role"] for s in got["steps"]] == [s["role"] for s in want["steps"]]
            assert got["steps"] == [{k: s.get(k) for k in ("index", "turn", "role", "content", "thought", "action")}
                                    for s in want["steps"]]
            assert got["provenance"] == want["provenance"]
            for field in ("pair_id", "counterpart_id", "evidence", "safe_action_sketches", "unsafe_explanation"):
                assert got[field] == want[field]


@pytest.mark.e2e
@pytest.mark.xdist_group("sim")
def test_croissant_validates_and_its_records_are_the_jsonl(release):
    import mlcroissant as mlc

    work, _ = release
    path = work / FILES["croissant"]
    doc = json.loads(path.read_text())
    dataset = mlc.Dataset(jsonld=str(path))
    issues = dataset.metadata.ctx.issues
    assert issues.errors == set() and issues.warnings == set()
    assert (doc["datePublished"], doc["creator"]["@type"], doc["version"]) == ("2026-12-04", "sc:Organization", "0.1.0")
    assert "a panel of 3 reviewer models votes on each variation" in doc["rai:dataAnnotationProtocol"]
    rows = _rows(work)
    for name, expected in rows.items():
        records = {r[f"{name}/item_id"].decode(): r for r in dataset.records(record_set=name)}
        assert len(records) == len(expected)
        for want in expected:
            got = records[want["item_id"]]
            assert got[f"{name}/seed_id"].decode() == want["seed_id"]
            if name == "excluded":
                assert got[f"{name}/reason"].decode() == want["reason"]
                continue
            assert got[f"{name}/pair_label"].decode() == want["pair_label"]
            assert [s[f"{name}/steps/role"].decode() for s in got[f"{name}/steps"]] == [
                s["role"] for s in want["steps"]]
            assert got[f"{name}/provenance"][f"{name}/provenance/prefix_id"].decode() == \
                want["provenance"]["prefix_id"]
            assert got[f"{name}/pair_id"] == (want["pair_id"] and want["pair_id"].encode())
    files = {f["name"]: f for f in doc["distribution"]}
    for name, path_ in DATA.items():
        data = (work / path_).read_bytes()
        assert files[path_.rsplit("/", 1)[1]]["sha256"] == hashlib.sha256(data).hexdigest()
    assert doc["license"] == DATA_LICENCE.url and doc["version"] == "0.1.0"
    assert doc["description"].startswith("SIMULATED:") and "SIMULATED RUN" in doc["rai:dataCollection"]
    assert {k for k in doc if k.startswith("rai:")} >= {
        "rai:dataCollection", "rai:dataCollectionType", "rai:dataAnnotationProtocol", "rai:dataBiases",
        "rai:dataLimitations", "rai:personalSensitiveInformation", "rai:dataUseCases", "rai:machineAnnotationTools"}
    assert "classifier: aura_sim/classifier" in doc["rai:machineAnnotationTools"]
    assert "R-Judge" in doc["citeAs"] and "CC BY-NC-SA" in doc["rai:dataReleaseMaintenancePlan"]
    assert set(CONFIGS) == {rs["name"] for rs in doc["recordSet"]}


@pytest.mark.e2e
@pytest.mark.xdist_group("sim")
def test_a_file_without_rows_is_no_config_and_the_rest_still_loads(release, tmp_path, monkeypatch):
    """datasets refuses an empty split, so a run with no exclusions declares two configs; Croissant keeps the
    empty record set (mlcroissant reads it as no records)."""
    import mlcroissant as mlc

    from aura_eval.construct import card

    work, config = release
    folder = tmp_path / "dataset"
    shutil.copytree(work / "results/dataset", folder)
    (folder / "excluded.jsonl").write_text("")
    paths = {key: folder / FILES[key].rsplit("/", 1)[1] for key in ("dataset", "subset", "excluded", "card", "croissant")}
    settings = yaml.safe_load(config.read_text())
    roles = {role: settings["roles"][role] for role in CONSTRUCTION_ROLES}
    models = {name: entry["model"] for name, entry in settings["models"].items()}
    assert card.dataset_card(SimpleNamespace(**paths, funnel=work / FILES["funnel"]), SimpleNamespace(**paths),
                             roles, models)["excluded"] == 0
    text = paths["card"].read_text()
    meta = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in meta["configs"]] == [c["config_name"] for c in meta["dataset_info"]] == [
        "items", "action_only_subset"]
    assert "`excluded.jsonl` has no rows in this run, so it is no config" in text
    datasets = _offline_datasets(tmp_path, monkeypatch)
    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))
    assert loaded["test"].num_rows == len(read_jsonl(paths["dataset"]))
    assert list(mlc.Dataset(jsonld=str(paths["croissant"])).records(record_set="excluded")) == []


@pytest.mark.e2e
@pytest.mark.xdist_group("sim")
def test_a_rerun_writes_the_same_bytes(release, tmp_path):
    source, config = release
    work = copy_run(source, tmp_path)
    before = {key: (work / FILES[key]).read_bytes() for key in ("card", "croissant")}
    snakemake(work, FILES["croissant"], "--configfile", str(config), "--forcerun", "dataset_card")
    assert {key: (work / FILES[key]).read_bytes() for key in ("card", "croissant")} == before
