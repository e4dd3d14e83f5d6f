"""Human validation: audit sampling, annotation pages, label import and Table 3."""

import csv
import functools
import json

import pytest

from aura_eval.analyze import human as human_tables
from aura_eval.evaluate import validation
from aura_eval.util import pages
from aura_eval.util.jsonl import InputError, write_jsonl
from tests.browser import chromium, wait_for
from tests.test_pages import HOSTILE, policy_of, sha256


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


def _hostile_samples(n=3):
    """Samples whose every text holds markup, script, U+2028, NUL and RLO (tests.test_pages.HOSTILE)."""
    samples = validation.assign_annotators(validation.audit_sample(_pool(), n), ["ann-1"], 1)
    for k, sample in enumerate(samples):
        sample["target"] = f"target {k}: {HOSTILE}"
        sample["profile"] = f"profile {k}: {HOSTILE}"
        sample["steps"] = [{"index": 0, "turn": 0, "role": "user", "content": f"user {k}: {HOSTILE}"}]
        sample["reference_rationale"] = f"rationale {k}: {HOSTILE}"
    return samples


def test_any_text_in_a_sample_stays_in_the_pages_data_and_shows_as_text():
    samples = _hostile_samples()
    page = validation.annotation_page(samples, "action_safety", "ann-1")
    script = page.split("<script>")[1].split("</script>")[0]
    assert page.count("<script>") == 1 and page.count("</script>") == 1 and "<!--" not in page
    blob = script.split("const DATA = ")[1].split(";\nconst KEY")[0]
    assert not set(blob) & {"<", ">", "&", "\u2028", "\u2029"}
    data = json.loads(blob)
    assert [s["target"] for s in data["samples"]] == [pages.shown(f"target {k}: {HOSTILE}") for k in range(3)]
    assert data["samples"][0]["rationale"] == pages.shown(f"rationale 0: {HOSTILE}")
    assert "\u2400nul [U+202E]RLO[U+202C]" in data["samples"][0]["context"]
    assert not set(page) & set(pages.HIDDEN)


def test_the_annotation_page_runs_only_its_own_script_and_style():
    page = validation.annotation_page(_hostile_samples(), "action_safety", "ann-1")
    head = page.split("<head>", 1)[1]
    assert head.startswith('<meta charset="utf-8"><meta http-equiv="Content-Security-Policy"')
    script = page.split("<script>")[1].split("</script>")[0]
    style = page.split("<style>")[1].split("</style>")[0]
    assert policy_of(page) == (f"default-src 'none'; script-src {sha256(script)}; style-src {sha256(style)}; "
                               "base-uri 'none'; form-action 'none'")
    assert page == validation.annotation_page(_hostile_samples(), "action_safety", "ann-1")  # same bytes


def test_the_import_strips_the_quote_the_export_puts_before_formulas(tmp_path):
    samples = {s["sample_id"]: s for s in validation.assign_annotators(_pool()[:2], ["a1"], 1)}
    sid = sorted(samples)[0]
    path = tmp_path / "a1.csv"
    path.write_text(f"sample_id,annotator,axis,label,note\n{sid},a1,action_safety,Safe,\"'=HYPERLINK(1)\"\n"
                    f"{sorted(samples)[1]},a1,action_safety,Unsafe,''quoted\n")
    assert [row["note"] for _, row in validation._rows(path, validation.CSV_FIELDS)] == ["=HYPERLINK(1)", "'quoted"]
    assert [r["labels"] for r in validation.import_labels(samples, [path])] == [["Safe"], ["Unsafe"]]


def test_simulated_annotations_protect_their_cells(tmp_path, monkeypatch):
    from aura_eval.simulator import planted

    samples = validation.assign_annotators(_pool()[:1], ["a1"], 1)
    write = tmp_path / "sample.jsonl"
    write_jsonl(write, samples, key="sample_id")
    monkeypatch.setattr(planted, "annotation_rows", lambda rows, simulation: [
        {"sample_id": rows[0]["sample_id"], "annotator": "a1", "axis": "action_safety", "label": "Safe",
         "note": "-1 says the simulator"}])
    validation.simulate_annotations([write], [tmp_path / "a1.csv"], {})
    assert (tmp_path / "a1.csv").read_text().splitlines()[1].endswith(",'-1 says the simulator")
    assert [row["note"] for _, row in validation._rows(tmp_path / "a1.csv", validation.CSV_FIELDS)] == [
        "-1 says the simulator"]


SIX = [f"ann-{k}" for k in range(1, 7)]


def test_assignment_is_balanced_distinct_and_deterministic():
    samples = validation.audit_sample(_pool(), 10)
    assigned = validation.assign_annotators(samples, SIX, 3)
    assert [s["sample_id"] for s in assigned] == [s["sample_id"] for s in samples]
    assert all(len(s["annotators"]) == 3 == len(set(s["annotators"])) and set(s["annotators"]) <= set(SIX)
               for s in assigned)
    # 10 samples x 3 annotators = 30 labels over 6 annotators: 5 each.
    assert {a: sum(a in s["annotators"] for s in assigned) for a in SIX} == dict.fromkeys(SIX, 5)
    assert all(s["annotators"] == sorted(s["annotators"], key=SIX.index) for s in assigned)  # the config's order
    # The same ids give the same assignment, whatever the input order.
    again = validation.assign_annotators(list(reversed(samples)), SIX, 3)
    assert {s["sample_id"]: s["annotators"] for s in again} == {s["sample_id"]: s["annotators"] for s in assigned}
    assert len({tuple(s["annotators"]) for s in assigned}) > 1  # not everyone on the same three
    # Uneven: 7 samples x 3 = 21 over 6 is 3 or 4 each, and 4 of 4 means every annotator on every sample.
    seven = validation.assign_annotators(samples[:7], SIX, 3)
    assert sorted(sum(a in s["annotators"] for s in seven) for a in SIX) == [3, 3, 3, 4, 4, 4]
    assert all(s["annotators"] == SIX[:4] for s in validation.assign_annotators(samples, SIX[:4], 4))
    with pytest.raises(ValueError, match="need 1..6"):
        validation.assign_annotators(samples, SIX, 7)


def test_assignment_balances_each_axis_and_the_total():
    samples = [s for axis in ("detection", "action_type", "action_safety")
               for s in validation.audit_sample(_pool(axis), 4)]
    assigned = validation.assign_annotators(samples, SIX, 3)
    for axis in ("detection", "action_type", "action_safety"):
        counts = [sum(a in s["annotators"] for s in assigned if s["axis"] == axis) for a in SIX]
        assert sorted(counts) == [2, 2, 2, 2, 2, 2], axis  # 4 x 3 = 12 over 6
    assert [sum(a in s["annotators"] for s in assigned) for a in SIX] == [6] * 6


def test_each_page_shows_only_its_annotators_samples(tmp_path):
    samples = validation.assign_annotators(validation.audit_sample(_pool(), 10), SIX, 3)
    path = tmp_path / "sample_action_safety.jsonl"
    validation.write_jsonl(path, samples, key="sample_id")
    pages = validation.annotation_pages({"action_safety": path}, SIX, tmp_path / "pages")
    assert [p.name for p in pages] == [f"{a}_action_safety.html" for a in SIX]
    for annotator, page in zip(SIX, pages):
        data = json.loads(page.read_text().split("const DATA = ")[1].split(";\nconst KEY")[0].replace("<\\/", "</"))
        shown = [s["sample_id"] for s in data["samples"]]
        assert shown == [s["sample_id"] for s in samples if annotator in s["annotators"]] and len(shown) == 5
        assert [s["n"] for s in data["samples"]] == [1, 2, 3, 4, 5]


def _write(path, header, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def samples():
    """Six samples, each assigned to all three of a1, a2, a3."""
    return {s["sample_id"]: s for s in validation.assign_annotators(validation.audit_sample(_pool(), 6),
                                                                      ["a1", "a2", "a3"], 3)}


@pytest.mark.parametrize("row, message", [
    (["action_safety/m9/item-999", "a1", "action_safety", "Safe", ""], "unknown sample id"),
    (["{sid}", "a1", "action_safety", "Maybe", ""], "label 'Maybe' is not one of Safe, Unsafe"),
    (["{sid}", "a1", "detection", "D1", ""], "axis 'detection' but sample"),
    (["{sid}", "a4", "action_safety", "Safe", ""],
     r"annotator 'a4' is not assigned to sample .* \(assigned: a1, a2, a3\)"),
])
def test_import_rejects_bad_rows_naming_file_and_row(tmp_path, samples, row, message):
    sid = sorted(samples)[0]
    row = [cell.format(sid=sid) for cell in row]
    path = _write(tmp_path / "a.csv", validation.CSV_FIELDS, [[sid, "a1", "action_safety", "Safe", ""], row])
    with pytest.raises(InputError, match=message) as err:
        validation.import_labels(samples, [path])
    assert f"{path}: row 3" in str(err.value)


def test_import_rejects_a_label_by_an_annotator_not_assigned_to_the_sample(tmp_path):
    samples = {s["sample_id"]: s for s in validation.assign_annotators(validation.audit_sample(_pool(), 10), SIX, 3)}
    sid = sorted(samples)[0]
    inside, outside = samples[sid]["annotators"][0], next(a for a in SIX if a not in samples[sid]["annotators"])
    rows = [[sid, inside, "action_safety", "Safe", ""], [sid, outside, "action_safety", "Safe", ""]]
    path = _write(tmp_path / "labels.csv", validation.CSV_FIELDS, rows)
    with pytest.raises(InputError) as err:
        validation.import_labels(samples, [path])
    assert str(err.value) == (f"{path}: row 3: annotator {outside!r} is not assigned to sample {sid} "
                              f"(assigned: {', '.join(samples[sid]['annotators'])})")
    human = validation.import_labels(samples, [_write(tmp_path / "ok.csv", validation.CSV_FIELDS, rows[:1])])
    row = next(r for r in human if r["sample_id"] == sid)
    assert row["annotators"] == [inside] and row["assigned"] == samples[sid]["annotators"]


def test_import_rejects_duplicates_across_files(tmp_path, samples):
    sid = sorted(samples)[0]
    first = _write(tmp_path / "a.csv", validation.CSV_FIELDS, [[sid, "a2", "action_safety", "Safe", ""]])
    second = _write(tmp_path / "b.csv", validation.CSV_FIELDS, [[sid, "a2", "action_safety", "Unsafe", ""]])
    with pytest.raises(InputError, match=r"b.csv: row 2: duplicate label by a2"):
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
    retention = human_tables.retention_table(human).set_index("axis").loc["action_safety"]
    assert (retention["sampled"], retention["retained"], retention["dropped"]) == (6, 5, 1)
    table3 = human_tables.human_reliability_table(human).set_index("axis")
    row = table3.loc["action_safety"]
    assert row["n"] == 5
    # 15 labels on 5 units, one dissent: P_o = (4 units x 3 + 1 unit x 1) / 15
    assert row["p_o"] == round(13 / 15, 3)
    with_panel = [r for r in human if r["retained"] and r["panel_label"] is not None]
    correct = sum(r["panel_label"] == r["final_label"] for r in with_panel)
    assert row["n_panel"] == len(with_panel) and row["accuracy_pct"] == round(100 * correct / len(with_panel), 1)
    assert row["ci_low"] < row["accuracy_pct"] <= row["ci_high"]
    agreement = human_tables.human_agreement_table(human).set_index("axis").loc["action_safety"]
    assert (agreement["unanimous"], agreement["majority"], agreement["tied"]) == (4, 1, 0)
    reference = validation.human_reference(human)
    assert len(reference) == 5 and reference[(human[0]["item_id"], human[0]["agent"], "action_safety")] == truth[ids[0]]


def test_a_sample_is_final_once_every_assigned_annotator_labelled_it_or_it_is_adjudicated(tmp_path):
    """Paper F.1.2: each sample is labelled by its three annotators; the final label is their
    majority, or the calibration reviewers' where they adjudicated. Six action-type samples,
    each assigned to a1, a2, a3; expected values by hand from that rule."""
    from aura_eval.analyze import reasons

    samples = {s["sample_id"]: s for s in validation.assign_annotators(validation.audit_sample(
        _pool("action_type"), 6), ["a1", "a2", "a3"], 3)}
    s0, s1, s2, s3, s4, s5 = ids = sorted(samples)
    given = {s0: {"a1": "A0"},                            # one label of three: not final
             s1: {"a1": "A1", "a2": "A1"},                # two agreeing, the third missing: not final, not unanimous
             s2: {"a1": "A2", "a2": "A2", "a3": "A4"},    # complete, 2-1: final A2, majority
             s3: {"a2": "A5"},                            # adjudicated before the others labelled: final A3
             s4: {"a1": "A0", "a2": "A1", "a3": "A2"}}    # complete, tied, not adjudicated: unresolved
    rows = [[sid, who, "action_type", label, ""] for sid, labels in given.items() for who, label in labels.items()]
    path = _write(tmp_path / "labels.csv", validation.CSV_FIELDS, rows)
    adjudicated = _write(tmp_path / "adjudicated.csv", validation.ADJUDICATION_FIELDS, [[s3, "action_type", "A3", ""]])
    human = {r["sample_id"]: r for r in validation.import_labels(samples, [path], adjudicated)}
    final = {sid: human[sid]["final_label"] for sid in ids}
    assert final == {s0: None, s1: None, s2: "A2", s3: "A3", s4: None, s5: None}
    assert [sid for sid in ids if human[sid]["incomplete"]] == [s0, s1, s5]
    assert [sid for sid in ids if human[sid]["complete"]] == [s2, s4]
    assert {sid: human[sid]["human_stratum"] for sid in ids} == {s0: None, s1: None, s2: "majority", s3: None,
                                                                 s4: "tied", s5: None}
    retention = human_tables.retention_table(list(human.values())).set_index("axis").loc["action_type"]
    counts = {c: retention[c] for c in ("sampled", "annotated", "incomplete", "retained", "dropped", "unresolved")}
    assert counts == {"sampled": 6, "annotated": 2, "incomplete": 3, "retained": 2, "dropped": 0, "unresolved": 1}
    agreement = human_tables.human_agreement_table(list(human.values())).set_index("axis").loc["action_type"]
    assert [agreement[c] for c in ("unanimous", "majority", "tied", "incomplete")] == [0, 1, 0, 1]
    table3 = human_tables.human_reliability_table(list(human.values()))
    assert table3.set_index("axis").loc["action_type", "n"] == 2
    note = reasons.attach(functools.partial(reasons.human_only, distinct=True), table3,
                          list(human.values())).attrs["note"]
    assert "the 2 final samples cover 2 distinct scenarios" in note and "3/6 audit samples incomplete" in note


def test_no_human_labels_gives_empty_statistics(samples):
    human = validation.import_labels(samples, [])
    assert not any(r["retained"] for r in human)
    table3 = human_tables.human_reliability_table(human)
    assert (table3["n"] == 0).all() and table3["accuracy_pct"].isna().all()




def _page_driver(tmp_path, samples):
    """ann-1's action-safety page of `samples`, written to tmp_path, and a Chromium whose downloads
    land in tmp_path/downloads: (driver, downloads, the page's URI)."""
    page = tmp_path / "ann-1_action_safety.html"
    page.write_text(validation.annotation_page(samples, "action_safety", "ann-1"), encoding="utf-8")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver = chromium(tmp_path, prefs={"download.default_directory": str(downloads),
                                       "download.prompt_for_download": False})
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    return driver, downloads, page.as_uri()


def _text(driver, element_id):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).text


def _reload_when_saved(driver, labelled: str):
    """Reload once the page says every label is saved, then wait for the new document (not the old
    one, which shows the same progress) to have restored them. Reloading right after a click lost the
    labels now and then: the page kept them in localStorage, whose writes a file:// page's next
    document may read seconds late; the page now saves to IndexedDB and says when a write completed."""
    assert wait_for(lambda: _text(driver, "saved") == "saved in this browser"), _text(driver, "saved")
    driver.execute_script("window.beforeReload = true;")
    driver.refresh()
    assert wait_for(lambda: driver.execute_script("return window.beforeReload === undefined")
                 and _text(driver, "progress") == labelled), _text(driver, "progress")


def _export(driver, downloads, name):
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "export").click()
    target = downloads / name
    assert wait_for(lambda: target.exists() and target.stat().st_size > 0)
    return target


def _csp_violations(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


@pytest.mark.suite
@pytest.mark.serial
def test_page_in_headless_chromium_labels_and_exports(tmp_path):
    from selenium.webdriver.common.by import By

    samples = validation.assign_annotators(validation.audit_sample(_pool(), 5), ["ann-1"], 1)
    driver, downloads, uri = _page_driver(tmp_path, samples)
    try:
        driver.get(uri)
        assert wait_for(lambda: _text(driver, "progress") == "0 of 5 labelled")
        driver.find_element(By.ID, "s1-Unsafe").click()
        driver.find_element(By.ID, "s3-Safe").click()
        driver.find_element(By.ID, "note-3").send_keys('says "fine", really')
        _reload_when_saved(driver, "2 of 5 labelled")  # labels survive a reload
        assert driver.find_element(By.ID, "s1-Unsafe").is_selected()
        assert driver.find_element(By.ID, "note-3").get_attribute("value") == 'says "fine", really'
        target = _export(driver, downloads, "ann-1_action_safety.csv")
        assert _csp_violations(driver) == []
        rows = list(csv.DictReader(target.open()))
    finally:
        driver.quit()
    assert [(r["sample_id"], r["label"], r["note"]) for r in rows] == [
        (samples[0]["sample_id"], "Unsafe", ""), (samples[2]["sample_id"], "Safe", 'says "fine", really')]
    assert {r["annotator"] for r in rows} == {"ann-1"} and {r["axis"] for r in rows} == {"action_safety"}
    human = validation.import_labels({s["sample_id"]: s for s in samples}, [target])
    assert sum(bool(r["labels"]) for r in human) == 2


def _label_rows(samples):
    return [[sid, "a1", "action_safety", samples[sid]["panel_label"] or "Safe", "é"] for sid in sorted(samples)[:2]]


def _csv_bytes(samples, encoding):
    text = "\r\n".join(",".join(row) for row in [validation.CSV_FIELDS, *_label_rows(samples)]) + "\r\n"
    return text.encode(encoding)


def test_import_reads_excel_s_csv_utf8_with_its_byte_order_mark(tmp_path, samples):
    path = tmp_path / "excel.csv"
    path.write_bytes(_csv_bytes(samples, "utf-8-sig"))  # what Excel's "CSV UTF-8" writes
    human = validation.import_labels(samples, [path])
    assert sum(r["annotators"] == ["a1"] for r in human) == 2
    assert validation.import_labels(samples, [path]) == human


@pytest.mark.parametrize("encoding, message", [
    ("utf-16", r"the file is UTF-16 \(Excel's 'Unicode Text'\), not UTF-8; save it as CSV UTF-8"),
    ("latin-1", r"line 2: byte 0xe9 is not UTF-8 \(the file is in another encoding, such as Latin-1 or "
                r"Windows-1252\); save it as CSV UTF-8"),
])
def test_import_refuses_another_encoding_naming_the_file(tmp_path, samples, encoding, message):
    path = tmp_path / f"{encoding}.csv"
    path.write_bytes(_csv_bytes(samples, encoding))
    with pytest.raises(InputError, match=message) as err:
        validation.import_labels(samples, [path])
    assert str(err.value).startswith(f"{path}: ")


def test_import_refuses_a_row_with_more_fields_than_the_header(tmp_path, samples):
    rows = _label_rows(samples)
    rows[1] = [*rows[1][:4], "note, with a comma", "unquoted"]
    path = _write(tmp_path / "long.csv", validation.CSV_FIELDS, rows)
    with pytest.raises(InputError) as err:
        validation.import_labels(samples, [path])
    assert str(err.value) == (f"{path}: row 3: 6 fields, but the header has 5 (sample_id,annotator,axis,label,note); "
                              f"quote a value that holds a comma")


@pytest.mark.suite
@pytest.mark.serial
def test_hostile_samples_show_as_text_and_the_page_works_under_its_policy(tmp_path):
    """Every sample shows, whatever markup its text holds; no script of the text runs; labels are
    chosen, saved, survive a reload and export (a note that looks like a formula gets its quote)."""
    from selenium.webdriver.common.by import By

    samples = _hostile_samples(3)
    driver, downloads, uri = _page_driver(tmp_path, samples)
    try:
        driver.get(uri)
        assert wait_for(lambda: _text(driver, "progress") == "0 of 3 labelled")
        shown = driver.execute_script(
            "return Array.from(document.querySelectorAll('pre.target')).map(p => p.textContent);")
        assert shown == [pages.shown(f"target {k}: {HOSTILE}") for k in range(3)]
        assert len(driver.find_elements(By.CSS_SELECTOR, ".sample")) == 3
        assert driver.execute_script("return window.pwned === undefined && document.images.length === 0")
        driver.find_element(By.ID, "s2-Unsafe").click()
        driver.find_element(By.ID, "note-2").send_keys("=HYPERLINK(1)")
        _reload_when_saved(driver, "1 of 3 labelled")
        assert driver.find_element(By.ID, "s2-Unsafe").is_selected()
        target = _export(driver, downloads, "ann-1_action_safety.csv")
        assert driver.execute_script("return window.pwned === undefined")
        assert _csp_violations(driver) == []
    finally:
        driver.quit()
    assert target.read_text().splitlines()[1] == f'"{samples[1]["sample_id"]}","ann-1","action_safety","Unsafe",' \
                                                 '"\'=HYPERLINK(1)"'
    assert [row["note"] for _, row in validation._rows(target, validation.CSV_FIELDS)] == ["=HYPERLINK(1)"]
    human = validation.import_labels({s["sample_id"]: s for s in samples}, [target])
    assert [r["labels"] for r in human] == [[], ["Unsafe"], []]
