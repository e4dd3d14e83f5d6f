"""A table's files: the CSV a reviewer checks and the Markdown the report includes; and the
job that builds one declared table (aura_eval.artefact_registry.TABLES) and writes its files.

The CSV keeps the machine column names (`unsafe_nsp_pct`, `unsafe_nsp_k`, `unsafe_nsp_n`).
The Markdown is what a reader sees: the paper's column names (HEADERS, the one mapping from CSV
names to display headers, or a table's own `headers` where a column means something else there),
each `_pct/_k/_n` triple as one cell `32.1% (203/633)`, an interval as `[low, high]`, model names
that never wrap, and a table too wide for the page split into parts that repeat the row keys. An empty table prints the
reason its builder gave (`df.attrs["empty_reason"]`, see `explain`); a partial one prints its
note (`df.attrs["note"]`) under it.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from aura_eval.artefact_registry import TABLES, builder_of
from aura_eval.util import cells, csv_cells
from aura_eval.util.jsonl import atomic_write_text

# -- display headers: CSV column (or triple) name -> what the reader sees -------------------------
# A triple `<name>_pct/_k/_n` is looked up under `<name>`; an interval `difference/low/high` under
# `difference` (the merged cell) and `ci_low/ci_high` under `ci`.
HEADERS = {
    "run": "Run", "model": "Model", "agent": "Model", "judge": "Judge", "judges": "Judges", "group": "Group",
    "format": "Prompt format", "domain": "Domain", "axis": "Axis", "stratum": "5-judge stratum",
    "dimension": "Dimension", "stage": "Stage", "endpoint": "Model name", "what": "What", "where": "Stage",
    "reason": "Reason", "by": "By", "value": "Value", "ours": "This run", "paper": "Paper", "rows": "Rows",
    "note": "Note", "items": "Items", "n": "N", "resolved": "Resolved", "seeds": "Seeds", "rank": "Rank",
    "total": "Total", "unsafe": "Unsafe", "safe": "Safe", "paper_total": "Paper total",
    "paper_unsafe": "Paper unsafe", "paper_safe": "Paper safe",
    # Tables 1 and 2 (the taxonomy)
    "name": "Name", "definition": "Definition", "variation_direction": "Direction of a variation",
    "taxonomy_version": "Taxonomy version", "label": "Label", "prompt": "Prompt", "prompt_version": "Prompt version",
    # Table 33 and 38 (paper J.1)
    "unsafe_all": "Unsafe (all)", "unsafe_nsp": "Unsafe NSP", "unsafe_sp": "Unsafe SP",
    "sp_safe_non_refusal": "SP safe non-refusal", "sp_over_refusal": "SP over-refusal",
    "nsp_risk_aware": "NSP risk aware [%D2/D3]", "nsp_aware_unsafe": "NSP aware unsafe [%D2/D3&U]",
    "nsp_miss_execute": "NSP miss+execute [%D0–A0&U]",
    # Tables 31, 32 (paper I.1)
    "nsp_unsafe": "NSP unsafe", "sp_unsafe": "SP unsafe", "difference": "Δ = NSP − SP [95% CI]",
    "excludes_zero": "CI excludes 0",
    # Tables 35-37 (paper J.2, J.3)
    "RS2_flips": "RS2 (Scope/Scale) flips", "RS5_flips": "RS5 (Oversight) flips", "d0_d1": "D0/D1",
    "d2_d3": "D2/D3", "no_detection_label": "No detection label", "combination": "Detection × action",
    "of_unsafe": "% of unsafe", "missing_label": "Missing a label",
    # Human validation (Tables 3, 18-20) and judge reliability (Tables 21-25)
    "p_o": "P_o", "alpha_nominal": "α (nominal)", "n_panel": "Np", "accuracy": "Acc.", "ci": "Wilson 95% CI",
    "unanimous_accuracy": "Unan.", "sampled": "Sampled", "annotated": "Annotated by all assigned",
    "incomplete": "Incomplete", "retained": "Retained",
    "dropped": "Dropped", "unresolved": "Unresolved", "unanimous": "Unan.", "majority": "Maj.", "tied": "Tie",
    "plurality": "Plurality (not unanimous)", "no_plurality": "No plurality (tied)", "no_votes": "No panel votes",
    "detection": "Detection", "action_type": "Action type",
    "action_safety": "Action safety", "overall": "Overall", "samples": "Samples", "ensemble": "Ensemble",
    "in_use": "In use", "n_plurality": "Np", "n_unanimous": "Nu", "ties": "T",
    "detection_consistent": "Detection", "action_type_consistent": "Action type",
    "action_safety_consistent": "Action safety",
    "both_resolved": "Resolved under both", "replaced_judges": "Replaced judge", "replacement": "Replacement",
    "original_safe": "Orig. Safe %", "replaced_safe": "Repl. Safe %",
    "detection_plurality": "Detection: plurality", "detection_unanimous": "Detection: unanimous",
    "action_type_plurality": "Action type: plurality", "action_type_unanimous": "Action type: unanimous",
    "action_safety_plurality": "Action safety: plurality", "action_safety_unanimous": "Action safety: unanimous",
    # the run's own tables
    "requests": "Requests", "cache_hits": "Cache hits", "ok": "OK", "unparseable": "Unparseable",
    "truncated": "Truncated", "refused": "Refused",
    "failed": "Failed", "tokens_in": "Tokens in", "tokens_out": "Tokens out", "cost_usd": "Cost (USD)",
    "rollouts_ok": "Rollouts OK", "rollouts_unparseable": "Rollouts unparseable",
    "rollouts_truncated": "Rollouts truncated", "rollouts_refused": "Rollouts refused",
    "rollouts_failed": "Rollouts failed", "detection_resolved": "Detection resolved",
    "type_resolved": "Action type resolved", "safety_resolved": "Safety resolved",
    "safety_unanimous": "Safety unanimous", "safety_majority": "Safety majority", "safety_tied": "Safety tied",
    "candidates": "Candidates", "parseable": "Parseable", "passed_gate": "Passed gate", "kept": "Kept",
    "released_rows": "Released rows",
    # forecast beside actual (aura_eval.analyze.forecast)
    "forecast_calls": "Calls (forecast)", "sent": "Calls sent", "forecast_tokens_in": "Tokens in (forecast)",
    "forecast_tokens_out": "Tokens out (forecast)", "forecast_usd": "USD (forecast)", "spent_usd": "Spent (USD)",
    "price": "Price from",
    # the headline comparison (aura_eval.report.headline)
    "comparison": "Comparison", "paper_low": "Paper low %", "paper_high": "Paper high %", "models": "Models",
    "ours_low": "Ours: lowest model (k/n)", "ours_high": "Ours: highest model (k/n)",
    "in_paper_range": "Our models in the paper's range", "pooled": "Ours, group pooled",
    "paper_in_ci": "Paper's value or range meets our pooled CI",
}
ITEM_COLUMNS = ("item_id", "source_item_id")  # cells naming a dataset item or candidate (aura_eval.report.audit pages)
# Columns whose cells are model (or judge) names: shown whole, never broken across lines.
NAME_COLUMNS = ("run", "model", "agent", "judge", "judges", "endpoint", "replaced_judges", "replacement")
# Columns that identify a row: a table split into parts repeats them in each part.
KEY_COLUMNS = ("model", "run", "agent", "judge", "ensemble", "stage", "endpoint", "axis", "stratum", "dimension",
               "rank", "domain", "what", "where", "by", "value")
# The width a table may take (in characters of the table font) before it is split into parts; the
# browser test checks that every table's last column is visible at 1280 px.
MAX_WIDTH_CHARS = 150

NO_REASON = "No rows in this run."


def write_csv(df: pd.DataFrame, path) -> None:
    """`df` as CSV, its text cells protected from spreadsheets (aura_eval.util.csv_cells; read it back
    with csv_cells.read_csv)."""
    atomic_write_text(path, csv_cells.frame_csv(df))


def explain(df: pd.DataFrame, empty_reason: str | None = None, note: str | None = None) -> pd.DataFrame:
    """`df` carrying the reader's reason it is empty, or a note on why it is partial (Markdown only;
    the CSV is the same)."""
    if empty_reason:
        df.attrs["empty_reason"] = empty_reason
    if note:
        df.attrs["note"] = note
    return df


def header(column: str, table: str | None = None) -> str:
    """What the reader sees over `column`: the table's own header where its declaration gives one."""
    own = TABLES[table].headers if table in TABLES else {}
    return own.get(column, HEADERS.get(column, column))


def _number(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:.4g}" if abs(value) < 1e4 or value != int(value) else f"{int(value):,}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value)


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _cell(value) -> str:
    if _missing(value):
        return "—"
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    return _number(value)


def share_cell(pct, k, n) -> str:
    """`32.1% (203/633)`; a share of nothing is `— (0/0)`."""
    if _missing(n):
        return "—"
    k, n = int(k), int(n)
    return f"— (0/{n})" if _missing(pct) else f"{float(pct):.1f}% ({k}/{n})"


def interval_cell(low, high, estimate=None) -> str:
    if _missing(low) or _missing(high):
        return "—" if estimate is None or _missing(estimate) else _cell(estimate)
    bounds = f"[{float(low):.1f}, {float(high):.1f}]"
    return bounds if estimate is None else f"{float(estimate):.1f} {bounds}"


def _names(value, column: str) -> str:
    """A name cell whose names never break across lines (raw HTML, which Quarto and pandoc keep)."""
    if _missing(value):
        return "—"
    text = str(value)
    sep = " + " if column == "judges" else " " if column == "replaced_judges" else None
    parts = text.split(sep) if sep else [text]
    return (sep or "").join(f'<span class="nw">{_escape(p)}</span>' for p in parts)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _link_cells(name: str, cells_: list[str], table: str, members: dict, shared: bool) -> list[str]:
    """`cells_` of column `name` with links to the rows each counts (aura_eval.util.cells): a share's k and
    n each to their own list, a count to its rows, any other cell to its table row's rows."""
    out = []
    for position, text in enumerate(cells_):
        row = members.get(str(position))
        if not row:
            out.append(text)
        elif shared and name in row and (m := re.fullmatch(r"(.*\()(\d+)/(\d+)\)", text)):
            out.append(f"{m[1]}{cells.linked(m[2], table, position, name, 'k')}/"
                       f"{cells.linked(m[3], table, position, name, 'n')})")
        elif name in row:
            out.append(cells.linked(text, table, position, name))
        else:
            out.append(cells.linked(text, table, position, cells.ROW))
    return out


LINKED_NOTE = ("Every number links to the rows it counts in the audit site (results/audit/): a share's numerator "
               "and denominator each to its own list; any other cell to every row its table row counts")


def display(df: pd.DataFrame, table: str | None = None, members: dict | None = None
            ) -> list[tuple[str, str, list[str]]]:
    """The reader's columns of `df`: (source column, header, cells), triples and intervals merged;
    with `members` (aura_eval.util.cells), every cell a link to the rows it counts."""
    if members is not None:
        return [(c, h, _link_cells(c, cells_, table, members, c not in df.columns))
                for c, h, cells_ in display(df, table)]
    columns = list(df.columns)
    if "model" in columns and "run" in columns:  # the model cell is the run's name with its group mark
        columns.remove("run")
    out = []
    done = set()
    for column in columns:
        if column in done:
            continue
        triple = re.fullmatch(r"(.+)_pct", column)
        if triple and {f"{triple[1]}_k", f"{triple[1]}_n"} <= set(columns):
            name = triple[1]
            cells = [share_cell(p, k, n) for p, k, n in zip(df[column], df[f"{name}_k"], df[f"{name}_n"])]
            done |= {column, f"{name}_k", f"{name}_n"}
            out.append((name, header(name, table), cells))
        elif column == "difference" and {"low", "high"} <= set(columns):
            cells = [interval_cell(lo, hi, d) for d, lo, hi in zip(df["difference"], df["low"], df["high"])]
            done |= {"difference", "low", "high"}
            out.append((column, header(column, table), cells))
        elif column == "ci_low" and "ci_high" in columns:
            cells = [interval_cell(lo, hi) for lo, hi in zip(df["ci_low"], df["ci_high"])]
            done |= {"ci_low", "ci_high"}
            out.append(("ci", header("ci", table), cells))
        elif column == "in_use":
            out.append((column, header(column, table), ["✓" if v is True or v == "True" else "" for v in df[column]]))
        elif column in ITEM_COLUMNS:  # an item named in the table links to its audit page
            out.append((column, header(column, table),
                        ["—" if _missing(v) else cells.item_link(str(v)) for v in df[column]]))
        elif column in NAME_COLUMNS:
            out.append((column, header(column, table), [_names(v, column) for v in df[column]]))
        else:
            out.append((column, header(column, table), [_escape(_cell(v)) for v in df[column]]))
    return out


def _visible(text: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text only
    return re.sub(r"<[^>]+>", "", text).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")


def _min_width(column: str, head: str, cells: list[str]) -> int:
    """The narrowest the column can be, in characters: its widest unbreakable piece (a name cell is
    one piece; other cells and the header break at spaces and hyphens), plus padding."""
    if column in NAME_COLUMNS:
        pieces = [re.sub(r"<[^>]+>", "", p) for c in cells for p in re.findall(r'<span class="nw">.*?</span>', c)]
    else:
        pieces = [w for c in cells for w in re.split(r"[ \-]", _visible(c))]
    pieces += re.split(r"[ \-]", head)
    return max((len(p) for p in pieces), default=1) + 3


def _parts(columns: list) -> list[list]:
    """`columns` in as few parts as fit MAX_WIDTH_CHARS, of about equal width, each part
    repeating the key columns."""
    keys = [c for c in columns if c[0] in KEY_COLUMNS]
    values = [c for c in columns if c[0] not in KEY_COLUMNS]
    widths = [_min_width(*c) for c in values]
    key_width = sum(_min_width(*c) for c in keys)
    if key_width + sum(widths) <= MAX_WIDTH_CHARS or len(values) < 2:
        return [columns]
    budget = max(MAX_WIDTH_CHARS - key_width, 20)
    n_parts = min(len(values), math.ceil(sum(widths) / budget))
    while True:  # cut where the running width passes each equal share; add a part if one overflows
        share = sum(widths) / n_parts
        parts, current, used, done = [], [], 0, 0
        for column, width in zip(values, widths):
            if current and (used + width > budget or done + used + width / 2 > share * (len(parts) + 1)):
                parts.append(current)
                done += used
                current, used = [], 0
            current.append(column)
            used += width
        parts.append(current)
        if len(parts) <= n_parts or n_parts >= len(values):
            return [keys + part for part in parts]
        n_parts += 1


def _pipe_table(columns: list, numeric: set) -> str:
    heads = [h.replace("|", "\\|") or " " for _, h, _ in columns]
    rows = list(zip(*[cells for _, _, cells in columns]))
    # Dashes in proportion to the column's width: what pandoc uses if it sets relative widths.
    align = [("-" * max(3, _min_width(c, h, cells) - 1)) + (":" if c in numeric else "")
             for c, h, cells in columns]
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(df: pd.DataFrame, name: str | None = None, caption: str | None = None, members: dict | None = None) -> str:
    """The reader's version of a table (see the module's docstring): a pipe table in a
    `.aura-table` block with its caption, split into parts when too wide; an empty table says why."""
    if caption is None and name in TABLES:
        caption = TABLES[name].caption
    note = df.attrs.get("note")
    if df.empty:
        reason = df.attrs.get("empty_reason") or NO_REASON
        lead = f"**{caption}.** " if caption else ""
        return f"::: {{.aura-empty}}\n{lead}*Empty: {reason.rstrip('.')}.*\n:::\n"
    columns = display(df, name, members)
    numeric = {c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])}
    numeric |= {c for c, _, _ in columns if c not in df.columns}  # merged shares and intervals
    parts = _parts(columns)
    blocks = []
    for i, part in enumerate(parts, start=1):
        title = caption or ""
        if len(parts) > 1:
            short = title.split(":")[0] if i > 1 and title.startswith("Table") else title if i == 1 else ""
            title = f"{short} ({'continued, ' if i > 1 else ''}part {i} of {len(parts)})".strip()
        block = _pipe_table(part, numeric)
        if title:
            block += f"\n\n: {title}"
        blocks.append(f"::: {{.aura-table}}\n{block}\n:::\n")
    if members is not None:
        note = " ".join(filter(None, [note, LINKED_NOTE]))
    elif name in TABLES and TABLES[name].not_items:
        note = " ".join(filter(None, [note, f"Its cells list no items: {TABLES[name].not_items}"]))
    if note:
        blocks.append(f"::: {{.aura-note}}\n*{note.rstrip('.')}.*\n:::\n")
    return "\n".join(blocks)


def build(name: str, inputs: dict, outputs: dict, settings: dict) -> str:
    """Build the registered table `name` from its declared inputs and write each of its formats.

    A builder returns a DataFrame (its CSV and its Markdown rendering), the text of a
    Markdown-only table, or (DataFrame, text) for a table whose Markdown shows more than a grid
    (a worked example) or other words than its CSV's keys (construction_losses' stage titles): the
    CSV holds the frame, the Markdown the text."""
    with cells.recording() as members:
        table = builder_of(name)(inputs, settings)
    if "cells" in outputs:
        cells.write(members, outputs["cells"])
    if TABLES[name].formats == ("md",):  # a Markdown-only table's builder returns its text
        atomic_write_text(outputs["md"], table)
        return f"{len(table.splitlines())} lines"
    table, text = table if isinstance(table, tuple) else (table, None)
    if "csv" in outputs:
        write_csv(table, outputs["csv"])
    if "md" in outputs:
        atomic_write_text(outputs["md"], markdown(table, name, members=members if "cells" in outputs else None)
                          if text is None else text)
    return f"{len(table)} rows"
