"""Any text shows as text (aura_eval.util.pages) and no CSV cell runs as a formula
(aura_eval.util.csv_cells): the helpers every page and every CSV writer and reader use."""

import base64
import csv
import hashlib
import json
import re

import pandas as pd
import pytest

from aura_eval.analyze import forecast, forecast_text, frame
from aura_eval.util import csv_cells, pages
from aura_eval.util.table_files import write_csv

# Text that breaks a page whose script data only escapes "</": "<!--" then "<script>" puts the
# HTML parser in a state where "</script>" no longer ends the script.
HOSTILE = ('<!-- <script>window.pwned = 1</script> </script><script>window.pwned = 2</script> & ok '
           '<img src=x onerror="window.pwned = 3"> "quoted" -- \'single\' '
           '\u2028line\u2029para \x00nul \u202eRLO\u202c \u2066isolate\u2069 \u200e\u200f\u061c')


def sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def policy_of(page: str) -> str:
    return re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page).group(1)


# -- JSON in a script ------------------------------------------------------------------------------

def test_script_json_cannot_open_a_comment_or_close_the_script():
    blob = pages.script_json({"text": HOSTILE, "<key>": ["a&b"]})
    assert not set(blob) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(blob) == {"text": HOSTILE, "<key>": ["a&b"]}
    assert pages.script_json([1, "x"], separators=(",", ":")) == '[1,"x"]'


# -- hidden characters -----------------------------------------------------------------------------

def test_nul_and_bidirectional_controls_show_as_marks():
    text = pages.shown(HOSTILE)
    assert "\u2400nul" in text and "[U+202E]RLO[U+202C]" in text and "[U+2066]isolate[U+2069]" in text
    assert "[U+200E][U+200F][U+061C]" in text
    assert not set(text) & set(pages.HIDDEN)
    assert pages.shown_data({"a\u202e": ["x\x00", 3, None]}) == {"a[U+202E]": ["x\u2400", 3, None]}
    assert pages.shown(text) == text  # marking twice changes nothing


# -- the Content-Security-Policy -------------------------------------------------------------------

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>t</title>
<style>body { color: red; }</style><link rel="stylesheet" href="site.css">
</head><body><p style="text-align: left;">x</p><img src="data:image/png;base64,AAAA">
<script>const A = 1;</script>
<script>
const B = "\\u003c/script\\u003e";
</script></body></html>
"""


def test_the_policy_allows_the_pages_own_scripts_and_styles_by_hash_and_nothing_else():
    page = pages.with_policy(PAGE, loads_scripts=True)
    rule = policy_of(page)
    assert page.index('<meta http-equiv="Content-Security-Policy"') == page.index('<meta charset="utf-8">') + len(
        '<meta charset="utf-8">')  # opens <head>; only the charset, which loads nothing, before it
    directives = dict(d.split(" ", 1) for d in rule.split("; "))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"].split() == sorted(
        [sha256("const A = 1;"), sha256('\nconst B = "\\u003c/script\\u003e";\n')]) + ["'strict-dynamic'"]
    assert directives["style-src"].split() == ["'self'", sha256("body { color: red; }"), "'unsafe-hashes'",
                                               sha256("text-align: left;")]
    assert directives["img-src"] == "data:" and directives["base-uri"] == "'none'"
    assert "unsafe-inline" not in rule and "nonce" not in rule and "unsafe-eval" not in rule
    assert pages.with_policy(PAGE, loads_scripts=True) == page  # no nonce: the same bytes every time


def test_a_page_without_scripts_or_images_gets_neither():
    rule = policy_of(pages.with_policy('<html><head><link rel="stylesheet" href="../a.css"></head><body>x</body>'))
    assert rule == "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'"
    with pytest.raises(ValueError, match="without <head>"):
        pages.with_policy("<p>no head</p>")


def test_a_script_from_a_data_url_is_allowed_by_its_integrity_hash():
    code = "window.x = 1;"
    url = "data:application/javascript;base64," + base64.b64encode(code.encode()).decode()
    page = pages.with_policy(f'<html><head></head><body><script src="{url}" defer></script></body></html>')
    assert f'integrity="{sha256(code)[1:-1]}"' in page
    assert policy_of(page).startswith(f"default-src 'none'; script-src {sha256(code)};")


def test_finish_marks_hidden_characters_before_hashing_the_scripts():
    page = pages.finish("<html><head></head><body><script>const T = '\u202e';</script></body></html>")
    assert "\u202e" not in page and sha256("const T = '[U+202E]';") in policy_of(page)


# -- CSV cells -------------------------------------------------------------------------------------

FORMULAS = ["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx", "'quoted", "plain", "", "a=b"]


def test_a_cell_a_spreadsheet_would_run_gets_one_quote_and_readers_take_it_off():
    protected = [csv_cells.protect(v) for v in FORMULAS]
    assert protected == ["'=1+1", "'+cmd", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx", "''quoted", "plain", "", "a=b"]
    assert [csv_cells.unprotect(v) for v in protected] == FORMULAS
    assert csv_cells.protect(-1.5) == -1.5 and csv_cells.unprotect(None) is None


def test_write_csv_protects_text_cells_and_leaves_numbers(tmp_path):
    df = pd.DataFrame({"reason": FORMULAS, "difference": [-1.5] * len(FORMULAS), "n": range(-5, 5),
                       "mixed": [-3, "-3", None, "x", 1.0, "=x", "", "a", "b", "c"]})
    write_csv(df, tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert [r[0] for r in rows[1:5]] == ["'=1+1", "'+cmd", "'-2+3", "'@SUM(A1)"]
    assert {r[1] for r in rows[1:]} == {"-1.5"} and rows[1][2] == "-5"
    assert [r[3] for r in rows[1:3]] == ["-3", "'-3"]  # a number stays one, even among text
    back = csv_cells.read_csv(tmp_path / "t.csv", keep_default_na=False)
    assert back["reason"].tolist() == FORMULAS and back["difference"].tolist() == [-1.5] * len(FORMULAS)


def test_a_csv_without_such_cells_keeps_its_bytes_and_a_carriage_return_is_quoted(tmp_path):
    plain = pd.DataFrame({"text": ['say "hi", then\nleave', "a,b", "x"], "n": [1.5, float("nan"), -2]})
    assert csv_cells.frame_csv(plain) == plain.to_csv(index=False, lineterminator="\n")
    odd = pd.DataFrame({"text": ["line\r\nbreak", "\rlead", 'q"\r"'], "n": [1, 2, 3]})
    assert csv_cells.frame_csv(odd) == 'text,n\n"line\r\nbreak",1\n"\'\rlead",2\n"q""\r""",3\n'
    write_csv(odd, tmp_path / "odd.csv")
    assert csv_cells.read_csv(tmp_path / "odd.csv")["text"].tolist() == odd["text"].tolist()


def test_the_analysis_frame_reads_back_what_it_wrote(tmp_path):
    df = pd.DataFrame({c: ["-x" if c == "item_id" else "v"] for c in ["run", "agent", "model", "format", "group",
                                                                       "item_id", "pair_id", "detection"]})
    df["unsafe"] = -1.0
    write_csv(df, tmp_path / "labels_long.csv")
    assert "'-x" in (tmp_path / "labels_long.csv").read_text()
    back = frame.read_frame(tmp_path / "labels_long.csv")
    assert back["item_id"].tolist() == ["-x"] and back["unsafe"].tolist() == [-1.0]


def test_the_forecast_csv_protects_its_text(tmp_path):
    row = dict.fromkeys(forecast.ROWS_COLUMNS, "")
    row.update(stage="=HYPERLINK(1)", calls=-3)
    forecast_text.write({"rows": [row], "total": {**row, "stage": forecast.TOTAL, "endpoint": "@SUM(1)"}}, tmp_path)
    line, total = (tmp_path / "forecast.csv").read_text().splitlines()[1:]
    assert line.startswith("'=HYPERLINK(1),") and ",-3," in line
    assert total.startswith("All,'@SUM(1),")  # the total row last, its text protected too
