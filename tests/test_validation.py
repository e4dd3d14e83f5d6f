"""Human validation: audit sampling, annotation pages, label import and Table 3."""

import csv
import json
import os
import shutil
import time

import pytest

from aura_eval import analysis, validation
from aura_eval.jsonl import InputError


def _pool(axis="action_safety", n=60):
    labels = validation.AXIS_LABELS[axis]
    strata = ["unanimous", "majority", "tied"]
    return [{"sample_id": f"{axis}/m{k % 3}/item-{k:03d}", "axis": axis, "agent": f"m{k % 3}",
             "item_id": f"item-{k:03d}", "seed_id": f"s{k}", "domain": ["IoT", "Web", "Finance", "Program"][k % 4],
             "dimension": "original", "pair_label": None, "profile": "You are an agent.",
             "steps": [{"index": 0, "turn": 0, "role": "user", "content": f"please do task {k} </script>"}],
             "target": f"Action {k}", "reference_rationale": "Deleting the files is irreversible.",
             "panel_judges": ["j1", "j2", "j3"], "panel_votes": [labels[k % len(labels)]] * 3,
             "panel_label": None if strata[k % 3] == "tied" else labels[k % len(labels)],
             "panel_stratum": strata[(k // 2) % 3]} for k in range(n)]


def test_audit_sample_covers_labels_strata_models_and_domains():
    sample = validation.audit_sample(_pool(), 8)
    assert len(sample) == 8 and sample == validation.audit_sample(list(reversed(_pool())), 8)
    for field, values in (("panel_label", {"Safe", "Unsafe", None}), ("panel_stratum", {"unanimous", "majority",
                                                                                          "tied"}),
                          ("agent", {"m0", "m1", "m2"}), ("domain", {"IoT", "Web", "Finance", "Program"})):
        assert {r[field] for r in sample} >= values, field
    assert len(validation.audit_sample(_pool(), 200)) == 60


def test_annotation_page_is_self_contained_and_hides_judge_labels():
    samples = validation.audit_sample(_pool(), 6)
    page = validation.annotation_page(samples, "action_safety", "ann-1")
    assert "http://" not in page and "https://" not in page and "<script src" not in page
    assert "panel" not in page and '"votes"' not in page and "j1" not in page
    assert "Reference risk" in page and "Deleting the files is irreversible." in page
    assert "A5 refusal - always safe" in page  # the axis's full rubric
    assert page.count("</script>") == 1  # data cannot close the script element
    data = json.loads(page.split("const DATA = ")[1].split(";\nconst KEY")[0].replace("<\\/", "</"))
    assert [s["sample_id"] for s in data["samples"]] == [s["sample_id"] for s in samples]
    assert set(data["samples"][0]) == {"n", "sample_id", "profile", "context", "target", "rationale"}


def _write(path, header, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def samples():
    return {s["sample_id"]: s for s in validation.audit_sample(_pool(), 6)}


@pytest.mark.parametrize("row, message", [
    (["action_safety/m9/item-999", "a", "action_safety", "Safe", ""], "unknown sample id"),
    (["{sid}", "a", "action_safety", "Maybe", ""], "label 'Maybe' is not one of Safe, Unsafe"),
    (["{sid}", "a", "detection", "D1", ""], "axis 'detection' but sample"),
])
def test_import_rejects_bad_rows_naming_file_and_row(tmp_path, samples, row, message):
    sid = sorted(samples)[0]
    row = [cell.format(sid=sid) for cell in row]
    path = _write(tmp_path / "a.csv", validation.CSV_FIELDS, [[sid, "a", "action_safety", "Safe", ""], row])
    with pytest.raises(InputError, match=message) as err:
        validation.import_labels(samples, [path])
    assert f"{path}: row 3" in str(err.value)


def test_import_rejects_duplicates_across_files(tmp_path, samples):
    sid = sorted(samples)[0]
    first = _write(tmp_path / "a.csv", validation.CSV_FIELDS, [[sid, "ann", "action_safety", "Safe", ""]])
    second = _write(tmp_path / "b.csv", validation.CSV_FIELDS, [[sid, "ann", "action_safety", "Unsafe", ""]])
    with pytest.raises(InputError, match=r"b.csv: row 2: duplicate label by ann"):
        validation.import_labels(samples, [first, second])
    bad_header = _write(tmp_path / "c.csv", ["id", "label"], [])
    with pytest.raises(InputError, match="header must be"):
        validation.import_labels(samples, [bad_header])


def test_synthetic_annotators_end_to_end(tmp_path, samples):
    """Three annotators; numbers worked out by hand."""
    ids = sorted(samples)
    panel = {sid: samples[sid]["panel_label"] for sid in ids}
    # Annotators agree with each other on all but sample 0 (2-1) and sample 1 (adjudicated to drop).
    truth = {sid: panel[sid] or "Safe" for sid in ids}
    rows = []
    for annotator in ("a1", "a2", "a3"):
        for k, sid in enumerate(ids):
            label = truth[sid]
            if k == 0 and annotator == "a3":
                label = "Unsafe" if label == "Safe" else "Safe"
            rows.append([sid, annotator, "action_safety", label, ""])
    path = _write(tmp_path / "labels.csv", validation.CSV_FIELDS, rows)
    adjudicated = _write(tmp_path / "adjudicated.csv", validation.ADJUDICATION_FIELDS, [[ids[1], "action_safety",
                                                                                         "drop", "ambiguous"]])
    human = validation.import_labels(samples, [path], adjudicated)
    assert [r["retained"] for r in human] == [True, False, True, True, True, True]
    assert human[0]["human_stratum"] == "majority" and human[2]["human_stratum"] == "unanimous"
    retention = analysis.retention_table(human).set_index("axis").loc["action_safety"]
    assert (retention["sampled"], retention["retained"], retention["dropped"]) == (6, 5, 1)
    table3 = analysis.human_reliability_table(human).set_index("axis")
    row = table3.loc["action_safety"]
    assert row["n"] == 5
    # 15 labels on 5 units, one dissent: P_o = (4 units x 3 + 1 unit x 1) / 15
    assert row["p_o"] == round(13 / 15, 3)
    with_panel = [r for r in human if r["retained"] and r["panel_label"] is not None]
    correct = sum(r["panel_label"] == r["final_label"] for r in with_panel)
    assert row["n_panel"] == len(with_panel) and row["accuracy_pct"] == round(100 * correct / len(with_panel), 1)
    assert row["ci_low"] < row["accuracy_pct"] <= row["ci_high"]
    agreement = analysis.human_agreement_table(human).set_index("axis").loc["action_safety"]
    assert (agreement["unanimous"], agreement["majority"], agreement["tied"]) == (4, 1, 0)
    reference = validation.human_reference(human)
    assert len(reference) == 5 and reference[(human[0]["item_id"], human[0]["agent"], "action_safety")] == truth[ids[0]]


def test_no_human_labels_gives_empty_statistics(samples):
    human = validation.import_labels(samples, [])
    assert not any(r["retained"] for r in human)
    table3 = analysis.human_reliability_table(human)
    assert (table3["n"] == 0).all() and table3["accuracy_pct"].isna().all()


CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


# Skipped, with this reason, where no browser is installed (`make browser` installs it, as root);
# CI sets AURA_REQUIRE_BROWSER=1, so there a missing browser fails instead.
NO_BROWSER = "Debian's chromium and chromium-driver are not installed (run `make browser` as root)"


def test_page_in_headless_chromium_labels_and_exports(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("AURA_REQUIRE_BROWSER"):
            pytest.fail(NO_BROWSER)
        pytest.skip(NO_BROWSER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    samples = validation.audit_sample(_pool(), 5)
    page = tmp_path / "ann-1_action_safety.html"
    page.write_text(validation.annotation_page(samples, "action_safety", "ann-1"), encoding="utf-8")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        driver.get(page.as_uri())
        assert "0 of 5 labelled" in driver.find_element(By.ID, "progress").text
        driver.find_element(By.ID, "s1-Unsafe").click()
        driver.find_element(By.ID, "s3-Safe").click()
        driver.find_element(By.ID, "note-3").send_keys('says "fine", really')
        driver.refresh()  # progress survives a reload (localStorage)
        # The page restores its state after load: poll instead of reading once (CI saw a race here).
        for _ in range(50):
            if "2 of 5 labelled" in driver.find_element(By.ID, "progress").text:
                break
            time.sleep(0.1)
        assert "2 of 5 labelled" in driver.find_element(By.ID, "progress").text
        assert driver.find_element(By.ID, "s1-Unsafe").is_selected()
        driver.find_element(By.ID, "export").click()
        target = downloads / "ann-1_action_safety.csv"
        for _ in range(50):
            if target.exists() and target.stat().st_size:
                break
            time.sleep(0.1)
        rows = list(csv.DictReader(target.open()))
    finally:
        driver.quit()
    assert [(r["sample_id"], r["label"], r["note"]) for r in rows] == [
        (samples[0]["sample_id"], "Unsafe", ""), (samples[2]["sample_id"], "Safe", 'says "fine", really')]
    assert {r["annotator"] for r in rows} == {"ann-1"} and {r["axis"] for r in rows} == {"action_safety"}
    human = validation.import_labels({s["sample_id"]: s for s in samples}, [target])
    assert sum(bool(r["labels"]) for r in human) == 2
