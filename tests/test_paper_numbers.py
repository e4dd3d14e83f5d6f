"""paper/reference_numbers.yaml: it loads, names only registered tables and figures, quotes the
paper verbatim (where the paper's text is at hand), and renders as the report's "Paper's numbers"."""

import os
from pathlib import Path

import pytest

from aura_eval.artefact_registry import FIGURES, TABLES
from aura_eval.report import paper_numbers, render

ROOT = Path(__file__).resolve().parent.parent
# The paper's text lies beside the checkout (../shared/paper/), or where AURA_PAPER_TEXT names it.
PAPER_TEXTS = [Path(p) for p in [os.environ.get("AURA_PAPER_TEXT")] if p] + [
    ROOT.parent / "shared/paper/aura-eval-paper.txt"]
# Every artefact that reproduces a paper table or figure has a key (an empty list: the text states none).
PAPER_ARTEFACTS = ["table3_human_reliability", "table18_retention", "table19_panel_strata",
                   "table20_human_agreement", "table21_judge_accuracy", "table22_accuracy_by_consensus",
                   "table23_ensembles", "table24_vendor_swap", "judge_consistency", "table29_composition",
                   "table31_nsp_sp_gap", "table32_matched_pairs_gap", "table33_behaviour", "table35_flips",
                   "table36_failure_mechanism", "table37_top_unsafe", "table38_prompt_format",
                   "fig4_unsafe_by_detection", "fig5_action_types", "fig6_unsafe_by_dimension",
                   "fig7_detection_levels", "fig8_detection_by_action"]


@pytest.fixture(scope="module")
def numbers():
    return paper_numbers.load()


def test_the_file_loads_and_names_only_registered_artefacts(numbers):
    assert set(numbers) <= set(TABLES) | set(FIGURES)
    assert sorted(numbers) == sorted(PAPER_ARTEFACTS)
    assert all(set(e) == set(paper_numbers.FIELDS) for entries in numbers.values() for e in entries)
    assert numbers["fig7_detection_levels"] == []


def test_each_value_occurs_in_its_sentence(numbers):
    missing = [(name, e["what"]) for name, entries in numbers.items() for e in entries
               if e["value"] not in e["sentence"]]
    assert missing == []


def test_every_sentence_is_the_papers_verbatim(numbers):
    text = next((p for p in PAPER_TEXTS if p.is_file()), None)
    if text is None:
        pytest.skip(f"the paper's text is not here (looked for {', '.join(map(str, PAPER_TEXTS))})")
    paper = text.read_text(encoding="utf-8")
    absent = [(name, e["what"]) for name, entries in numbers.items() for e in entries if e["sentence"] not in paper]
    assert absent == []


def test_markdown_lists_the_entries(numbers):
    md = paper_numbers.markdown("table35_flips", numbers)
    lines = md.splitlines()
    assert lines[0] == "**The paper's numbers**"
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header == ["what", "paper value", "the paper's sentence"]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[4:]]
    assert [r[1] for r in rows] == [e["value"] for e in numbers["table35_flips"]]
    assert rows[0][:2] == ["RS5 (Oversight), all models: flipped / SAFE-on-original", "52.3% (45/86)"]
    assert "1,249" in paper_numbers.markdown("table29_composition", numbers)  # not read as a number


def test_an_artefact_without_numbers_says_so(numbers):
    assert paper_numbers.markdown("fig7_detection_levels", numbers) == \
        "*The paper's text states no number for this figure.*\n"
    assert paper_numbers.markdown("table31_nsp_sp_gap", {"table31_nsp_sp_gap": []}) == \
        "*The paper's text states no number for this table.*\n"
    assert "No paper numbers are recorded" in paper_numbers.markdown("seed_composition", numbers)
    with pytest.raises(KeyError, match="unknown table or figure"):
        paper_numbers.markdown("table99", numbers)


@pytest.mark.parametrize("text, message", [
    ("table99_nothing: []\n", "unknown table or figure 'table99_nothing'"),
    ("table35_flips:\n  - what: x\n    value: '1'\n", "table35_flips entry 1: missing field(s) sentence"),
    ("table35_flips:\n  - what: x\n    value: 1\n    sentence: s 1\n", "table35_flips entry 1: value must be"),
    ("table35_flips:\n  - what: x\n    value: '1'\n    sentence: s 1\n    note: y\n", "unknown field(s) note"),
    ("table35_flips: {what: x}\n", "table35_flips: expected a list"),
])
def test_a_malformed_file_is_refused_naming_file_and_entry(tmp_path, text, message):
    path = tmp_path / "numbers.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(paper_numbers.PaperNumbersError) as err:
        paper_numbers.load(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_the_report_build_holds_the_papers_numbers_for_every_artefact(tmp_path):
    source = tmp_path / "report.qmd"
    source.write_text("# R\n\n{{< include tables/paper_table35_flips.md >}}\n", encoding="utf-8")
    qmd = render.prepare(source, [], tmp_path / "build")
    names = sorted(p.name for p in (qmd.parent / "tables").iterdir() if p.name.startswith("paper_"))
    assert names == sorted(f"paper_{n}.md" for n in [*TABLES, *FIGURES])
    assert "52.3% (45/86)" in render.resolve_includes(qmd.read_text(encoding="utf-8"), qmd.parent)
    assert (qmd.parent / "deviations.md").read_text(encoding="utf-8").startswith("## Where this implementation departs")
