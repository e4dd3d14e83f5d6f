"""The report a reviewer reads: the paper's column names, one cell per rate, wide tables split,
empty and partial tables that say why, the "What was run" section with each table's sources,
and (in headless Chromium) every table whole at 1280 px and no blank figure, on screen and in print."""

import pytest
import html as html_lib
import functools
import json
import shutil
import struct
import zlib
from pathlib import Path

import pandas as pd

import yaml

from aura_eval.analyze import behaviour, examples, reasons
from aura_eval.analyze import human as human_tables
from aura_eval.artefact_registry import FIGURES, TABLES
from aura_eval.report import paper_numbers, provenance, render, sections
from aura_eval.util import pages
from aura_eval.util.table_files import explain, markdown, write_csv
from aura_eval.vocab import INLINE_SVG_FIGURES
from tests.browser import chromium
from tests.test_pages import HOSTILE, policy_of, sha256

FIXTURE = Path(__file__).parent / "fixtures" / "report"
REPORT = Path(__file__).resolve().parent.parent / "paper" / "report.qmd"


def _frame(rows):
    columns = ["run", "agent", "model", "format", "group", "item_id", "seed_id", "domain", "dimension", "pair_label",
               "pair_id", "counterpart_id", "prefix_id", "decision_point", "rollout_status", "detection",
               "action_type", "safety", "unsafe"]
    out = []
    for i, (label, dim, safety) in enumerate(rows):
        prefix = f"s{i}.at_trigger"
        out.append({"run": "m", "agent": "m", "model": "★ m", "format": "react", "group": "frontier",
                    "item_id": f"{prefix}.{dim}", "seed_id": f"s{i}", "domain": "IoT", "dimension": dim,
                    "pair_label": label, "pair_id": None, "counterpart_id": None, "prefix_id": prefix,
                    "decision_point": "at_trigger", "rollout_status": "ok", "detection": "D0", "action_type": "A0",
                    "safety": safety, "unsafe": float(safety == "Unsafe")})
    return pd.DataFrame(out, columns=columns)


# -- the Markdown a reader sees -----------------------------------------------------------------

def test_paper_headers_one_cell_per_rate_and_the_csv_keeps_machine_names(tmp_path):
    df = pd.read_csv(FIXTURE / "table33_behaviour.csv")
    text = markdown(df, "table33_behaviour")
    assert "| Model | N | Resolved | Unsafe (all) | Unsafe NSP | Unsafe SP |" in text
    assert "NSP miss+execute [%D0–A0&U]" in text and "unsafe_nsp_pct" not in text
    row = df.iloc[0]
    assert f"{row['unsafe_nsp_pct']:.1f}% ({row['unsafe_nsp_k']}/{row['unsafe_nsp_n']})" in text
    assert '<span class="nw">★ sim-frontier-1</span>' in text  # a model name never wraps
    assert text.startswith("::: {.aura-table}") and "\n: Table 33: per model" in text
    write_csv(df, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == ",".join(df.columns)


def test_intervals_ticks_and_a_share_of_nothing():
    gap = markdown(pd.read_csv(FIXTURE / "table31_nsp_sp_gap.csv"), "table31_nsp_sp_gap")
    assert "Δ = NSP − SP [95% CI]" in gap and "22.7 [18.1, 27.2]" in gap and "| yes |" in gap
    ensembles = markdown(pd.read_csv(FIXTURE / "table23_ensembles.csv"), "table23_ensembles")
    assert "| Np | Nu | T |" in ensembles
    empty_share = markdown(pd.read_csv(FIXTURE / "table38_prompt_format.csv"), "table38_prompt_format")
    assert "— (0/0)" in empty_share


def test_a_table_too_wide_for_the_page_is_split_repeating_its_keys():
    df = pd.DataFrame({"model": ["★ a-model-name"], **{f"column_{i}_pct": [50.0] for i in range(12)},
                       **{f"column_{i}_k": [1] for i in range(12)}, **{f"column_{i}_n": [2] for i in range(12)}})
    text = markdown(df, caption="Wide")
    parts = text.count("::: {.aura-table}")
    assert parts >= 2 and text.count("★ a-model-name") == parts
    assert "(part 1 of" in text and "(continued, part 2 of" in text
    assert sum(line.count("50.0% (1/2)") for line in text.splitlines()) == 12


def test_the_construction_tables_name_stages_and_counts_in_one_vocabulary(tmp_path):
    """construction_losses.md shows each stage's title (its CSV the key funnel.json uses), and
    variations_by_dimension's headers are construction_funnel's names for the same counts."""
    from aura_eval.construct.funnel import by_dimension, funnel
    from aura_eval.util import table_files
    from aura_eval.vocab import LOSS_STAGES

    counts = funnel(*[[]] * 10)
    counts["gate rejections"] = {"gate: step N was emptied": 2}
    counts["pair review losses"] = {"no majority to keep": 3}
    (tmp_path / "funnel.json").write_text(json.dumps({"funnel": counts, "by_dimension": by_dimension([], [], [], [])}))
    out = {}
    for name in ("construction_funnel", "construction_losses", "variations_by_dimension"):
        out[name] = {fmt: tmp_path / f"{name}.{fmt}" for fmt in ("csv", "md")}
        table_files.build(name, {"funnel": str(tmp_path / "funnel.json")}, out[name], {})
    losses_md = out["construction_losses"]["md"].read_text()
    assert "| Variation gate | gate: step N was emptied | 2 |" in losses_md
    assert "| Pair review (P9) | no majority to keep | 3 |" in losses_md and "pair review losses" not in losses_md
    assert "filter by exclusion stage and reason" in losses_md
    assert out["construction_losses"]["csv"].read_text().splitlines() == [
        "where,reason,rows", "gate rejections,gate: step N was emptied,2", "pair review losses,no majority to keep,3"]
    header = out["variations_by_dimension"]["md"].read_text().splitlines()[1]
    assert header == ("| Dimension | Variation candidates | Parseable variations | Passed gate | Kept variations "
                      "| Released rows |")
    funnel_rows = pd.read_csv(out["construction_funnel"]["csv"])["stage"].tolist()
    assert [s.passed for s in LOSS_STAGES.values() if s.column] == [
        h.strip().lower() for h in header.strip("|").split("|")[1:]]
    assert all(s.passed in funnel_rows for s in LOSS_STAGES.values())


# -- empty and partial tables say why -------------------------------------------------------------

def test_an_empty_table_prints_its_reason_never_empty_inputs():
    assert "inputs are empty" not in markdown(pd.DataFrame())
    text = markdown(explain(pd.DataFrame(), "this run released no Safe-Path rows"), "table31_nsp_sp_gap")
    assert "**Table 31: per model" in text and "*Empty: this run released no Safe-Path rows.*" in text


def test_reasons_in_the_readers_terms():
    all_safe = _frame([("NSP", "original", "Safe")] * 6 + [("SP", "original", "Safe")] * 4)
    top = reasons.attach(reasons.top_unsafe, behaviour.top_unsafe_combinations(all_safe), all_safe)
    assert top.empty and top.attrs["empty_reason"] == "no unsafe outcome among 10 labelled rows"
    no_sp = _frame([("NSP", "original", "Unsafe"), ("NSP", "RS5", "Safe")])
    table33 = reasons.attach(reasons.behaviour, behaviour.behaviour_table(no_sp), no_sp)
    assert table33.attrs["note"] == "this run released no Safe-Path rows: the SP columns are empty"
    assert "this run released no Safe-Path rows" in markdown(table33, "table33_behaviour")
    gap = reasons.attach(reasons.gap, behaviour.nsp_sp_gap_table(no_sp, n_resamples=10), no_sp)
    assert gap.attrs["note"].startswith("this run released no Safe-Path rows")
    nothing = _frame([])
    assert reasons.attach(reasons.behaviour, behaviour.behaviour_table(nothing), nothing).attrs[
        "empty_reason"] == "no model's ReAct continuations were labelled in this run"
    human = [{"sample_id": "x", "axis": "detection", "agent": "a", "item_id": "i", "labels": [], "retained": False,
              "dropped": False, "complete": False, "incomplete": True}]
    table3 = reasons.attach(functools.partial(reasons.human_only, distinct=True), human_tables.retention_table(human), human)
    assert table3.attrs["note"].startswith("no human labels imported yet: see results/validation/annotation/")


# -- the report's own parts -------------------------------------------------------------------------

INLINE_SVG = ('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n<svg xmlns:xlink="http://www.w3.org/1999/xlink" '
              'width="300pt" height="120pt" viewBox="0 0 300 120" xmlns="http://www.w3.org/2000/svg">\n'
              '<a xlink:href="../audit/items/iot-023.at_trigger.original.html#prefix"><rect width="300" height="60" '
              'style="fill: #333333"/></a>\n</svg>\n')


def _png(path: Path, width=300, height=120):
    """A small PNG at 150 dpi with a dark band (not blank)."""
    raw = b"".join(b"\x00" + bytes([40 if 40 < y < 80 else 255] * width * 3) for y in range(height))
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data  # noqa: E731
                                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ppm = round(150 / 0.0254)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"pHYs", struct.pack(">IIB", ppm, ppm, 1)) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))


def _results(tmp_path: Path) -> tuple[list[str], Path]:
    """The fixture's tables (one empty with its reason) and a small PNG per figure, in a run folder."""
    tables, figures = tmp_path / "results/tables", tmp_path / "results/figures"
    tables.mkdir(parents=True)
    figures.mkdir()
    for csv in FIXTURE.glob("*.csv"):
        shutil.copy(csv, tables / csv.name)
    empty = explain(pd.DataFrame(columns=["run"]), "no unsafe outcome among 10 labelled rows")
    write_csv(empty, tables / "table37_top_unsafe.csv")
    (tables / "table37_top_unsafe.md").write_text(markdown(empty, "table37_top_unsafe"))
    (tables / "run_summary.md").write_text("Seeds setting: `4`.\n")
    for name in FIGURES:
        _png(figures / f"{name}.png")
    for name in INLINE_SVG_FIGURES:  # placed inline: its SVG, linked to an item page, and its sidecar
        (figures / f"{name}.svg").write_text(INLINE_SVG)
        (figures / f"{name}.json").write_text(json.dumps({"record": {"seed_id": "iot-023"},
                                                          "why": "the record report.running_example names"}))
    (tmp_path / "results/labels").mkdir()
    (tmp_path / "results/labels/m.jsonl").write_text("")
    files = sorted(str(p) for p in (tmp_path / "results").glob("*/*"))
    return files, tmp_path / "results/report/report.html"


@pytest.mark.suite
def test_what_was_run_lists_each_tables_sources_relative_to_the_report(tmp_path):
    files, html = _results(tmp_path)
    engine = render.report(REPORT, files, html, configfiles=["config/simulate.yaml"])
    text = html.read_text()
    assert engine in ("quarto", "pandoc")
    assert "Config file: <code>config/simulate.yaml</code>" in text
    assert "Funnel: 157 seeds → 191 prefixes" in text
    assert 'href="../labels/m.jsonl"' in text and 'href="../analysis/labels_long.csv"' in text
    assert 'href="../tables/table33_behaviour.csv"' in text
    assert "Empty: no unsafe outcome among 10 labelled rows" in text and "inputs are empty" not in text
    assert "Missing from this run: <code>tables/table32_matched_pairs_gap.md</code>" in text
    # Figure 2 is its SVG, inline: its link leads to the item page, its style attribute is allowed by hash
    assert text.count('<svg class="aura-inline-figure" role="img"') == len(INLINE_SVG_FIGURES) == 1
    assert 'xlink:href="../audit/items/iot-023.at_trigger.original.html#prefix"' in text
    assert "Shown: record iot-023, as the record report.running_example names." in text
    assert text.count("data:image/png;base64") == len(FIGURES) - len(INLINE_SVG_FIGURES)
    assert sha256("fill: #333333") in policy_of(text) and "'unsafe-inline'" not in policy_of(text)
    source = REPORT.read_text()
    for include in ("tables/table1_risk_mechanisms.md", "tables/table2_evaluation_taxonomy.md",
                    "tables/table28_pair_review_examples.md", "tables/table34_case_study.md",
                    "figures/fig1_construction_pipeline.png", "deviations.md", "tables/prompt_templates.md"):
        assert include in source
    for name in (*TABLES, *FIGURES):  # every artefact the paper states numbers for has them beside it
        if paper_numbers.load().get(name):
            assert f"tables/paper_{name}.md" in source, name
    assert "goes here" not in source


def test_sections_follow_the_paper():
    text = REPORT.read_text()
    order = ["## Headline results beside the paper's", "headline_comparison", "headline_summary",
             "## 3 Task formulation", "fig2_running_example", "## 4 Data augmentation axes", "table29_composition", "## 5 Evaluation framework",
             "### 6.1 Human validation", "table3_human_reliability", "table18_retention", "table19_panel_strata",
             "table20_human_agreement", "### 6.2 Judge reliability", "table21_judge_accuracy", "table24_vendor_swap",
             "judge_consistency", "## 7 Results", "fig4_unsafe", "table33_behaviour", "table31", "table32",
             "### 7.2", "fig5", "fig7", "fig8", "table37", "### 7.3", "fig6", "table35", "table36", "table38",
             "## Appendix: prompts", "## Appendix: provenance of this run", "run_summary", "_model_calls_totals",
             "_forecast_vs_actual_totals", "_sources"]
    at = [text.index(marker) for marker in order]
    assert at == sorted(at)
    # the provenance's per-model tables as totals (their full CSVs linked); every other table whole
    assert all(f"tables/{name}.md" in text for name in TABLES if name not in provenance.COLLAPSED)
    assert all(f"tables/_{name}_totals.md" in text for name in provenance.COLLAPSED)
    # Snakemake's report files each table and figure under the section that shows it: every section has some
    assert set(sections.sections().values()) == {sections.category(line[3:]) for line in text.splitlines()
                                                 if line.startswith("## ")}
    assert all(f"figures/{name}.png" in text for name in FIGURES)


def test_no_safe_path_rows_are_said_once_at_the_top_of_the_results(tmp_path):
    composition = pd.read_csv(FIXTURE / "table29_composition.csv")
    composition.loc[composition["value"] == "SP", "ours"] = 0
    composition.to_csv(tmp_path / "table29_composition.csv", index=False)
    assert "This run released no Safe-Path rows" in render.results_notice(tmp_path)
    assert render.results_notice(FIXTURE) == ""


def test_the_simulation_banner_still_marks_the_report(tmp_path):
    files, html = _results(tmp_path)
    render.report(REPORT, files, html, simulated=True)
    text = html.read_text()
    assert "SIMULATION: every number" in text and "SIMULATED: AURA-Eval" in text


def test_figures_get_the_width_they_were_drawn_for(tmp_path):
    (tmp_path / "figures").mkdir()
    _png(tmp_path / "figures/f.png", width=1500)
    sized = render.size_figures("![Figure 9: x.](figures/f.png)\n![gone](figures/g.png)\n", tmp_path)
    assert '![Figure 9: x.](figures/f.png){width="960px"}' in sized and "Missing from this run" in sized


def _hostile_results(tmp_path: Path) -> tuple[list[str], Path]:
    """The fixture's run with a quoted trajectory holding markup, script, quotes, dashes, NUL and RLO in
    Table 28, as analyze.examples writes it, and the same text in a CSV-only table's cell."""
    files, html = _results(tmp_path)
    tables = tmp_path / "results/tables"
    text = f"The user said \"delete it -- all of it\" and it's {HOSTILE}"
    (tables / "table28_pair_review_examples.md").write_text(examples.grid(["Reviewer", "Reason"], [["r1", text]]))
    write_csv(pd.DataFrame({"run": ["m"], "reason": [f"-{text}"]}), tables / "table24_vendor_swap.csv")
    return sorted({*files, str(tables / "table28_pair_review_examples.md")}), html


def test_the_report_shows_quoted_text_as_written(tmp_path):
    files, html = _hostile_results(tmp_path)
    assert render.report(REPORT, files, html) == "pandoc"
    text = html.read_text()
    assert "The user said \"delete it -- all of it\" and it's" in html_lib.unescape(text)
    cell = html_lib.unescape(text.split("<td>The user said")[1].split("</td>")[0])
    assert not set(cell) & set("\u201c\u201d\u2018\u2019\u2013\u2014")  # no smart quote or dash
    assert " \"quoted\" -- 'single' " in cell
    front = yaml.safe_load(REPORT.read_text().split("---\n")[1])
    assert front["format"]["html"]["from"] == render.READER == "markdown-smart"  # Quarto reads it the same


def test_the_report_shows_any_text_as_text_and_runs_only_its_own_scripts(tmp_path):
    files, html = _hostile_results(tmp_path)
    render.report(REPORT, files, html)
    text = html.read_text()
    assert "\u2400nul [U+202E]RLO[U+202C]" in text and not set(text) & set(pages.HIDDEN)
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in text and "<img src=x" not in text
    assert "<td>-The user said" in text  # the CSV's quote is stripped before the report shows it
    scripts = [s.split(">", 1)[1] for s in text.split("<script")[1:]]
    scripts = [s.split("</script>")[0] for s in scripts]
    styles = [s.split(">", 1)[1].split("</style>")[0] for s in text.split("<style")[1:]]
    assert len(scripts) == 1 and "beforeprint" in scripts[0]  # the report's own; none from the text
    rule = dict(d.split(" ", 1) for d in policy_of(text).split("; "))
    assert rule["default-src"] == "'none'" and rule["script-src"] == sha256(scripts[0])
    assert set(rule["style-src"].split()) >= {sha256(s) for s in styles} and rule["img-src"] == "data:"
    assert "unsafe-inline" not in policy_of(text)


# -- in a browser ------------------------------------------------------------------------------------


LAYOUT = """return {viewport: document.documentElement.clientWidth,
  tables: Array.from(document.querySelectorAll('table')).filter(t => t.offsetParent !== null).map(t => {
    const cells = t.querySelector('tr').children, last = cells[cells.length - 1].getBoundingClientRect();
    const caption = t.querySelector('caption');
    return {caption: caption ? caption.innerText.slice(0, 60) : t.innerText.slice(0, 60), right: last.right};
  }),
  figures: Array.from(document.images).map(i => ({src: i.alt.slice(0, 40), natural: i.naturalWidth,
    shown: i.getBoundingClientRect().width, right: i.getBoundingClientRect().right})),
  inline: Array.from(document.querySelectorAll('svg.aura-inline-figure')).map(s => ({
    shown: s.getBoundingClientRect().width, right: s.getBoundingClientRect().right}))};"""


@pytest.mark.suite
@pytest.mark.serial
def test_report_in_headless_chromium_every_table_whole_and_no_blank_figure(tmp_path):

    files, html = _results(tmp_path)
    render.report(REPORT, files, html, simulated=True)
    driver = chromium(tmp_path, window="1280,900")
    try:
        driver.set_window_size(1280, 900)
        driver.get(html.as_uri())
        screen = driver.execute_script(LAYOUT)
        # Print: A4 landscape is about 1030 CSS px wide inside its margins.
        driver.set_window_size(1030, 900)
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        printed = driver.execute_script(LAYOUT)
        violations = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
    finally:
        driver.quit()
    assert violations == []
    assert len(screen["tables"]) >= 14 and len(screen["figures"]) == len(FIGURES) - len(INLINE_SVG_FIGURES)
    assert len(screen["inline"]) == len(INLINE_SVG_FIGURES)
    for view in (screen, printed):
        assert [f for f in view["inline"] if not f["shown"] or f["right"] > view["viewport"]] == []
        cut = [t for t in view["tables"] if t["right"] > view["viewport"]]
        assert cut == [], f"tables whose last column is off the page: {cut}"
        assert [f for f in view["figures"] if not f["natural"]] == []
        assert [f for f in view["figures"] if f["right"] > view["viewport"]] == []


@pytest.mark.suite
@pytest.mark.serial
def test_a_hostile_report_in_headless_chromium_runs_no_script_of_its_text(tmp_path):
    files, html = _hostile_results(tmp_path)
    render.report(REPORT, files, html)
    driver = chromium(tmp_path)
    try:
        driver.get(html.as_uri())
        cells = driver.execute_script("return Array.from(document.querySelectorAll('td')).map(t => t.textContent)"
                                      ".filter(t => t.startsWith('The user said'));")
        assert driver.execute_script("return window.pwned === undefined")
        violations = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
    finally:
        driver.quit()
    # the Markdown cell collapses whitespace (U+2028 and U+2029 included) and keeps the rest as written
    assert cells == [" ".join(pages.shown(f"The user said \"delete it -- all of it\" and it's {HOSTILE}").split())]
    assert violations == []
