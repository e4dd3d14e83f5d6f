"""Which rows each table cell counts: recorded where the number is computed, so that every cell of
the report links to the exact list of rows behind it (the audit site's index, `#cell=...`).

A builder that computes its numbers over the analysis frame (one row per run × item,
results/analysis/labels_long.csv) passes boolean masks over the frame to `share_rows` / `count_rows`
instead of bare counts; while `recording()` is active these also return hidden `<column>__rows`
entries (the frame's row numbers of the numerator `k` and the denominator `n`), and `frame_table`
takes them out of the rows into the recording before it builds the DataFrame. Outside a recording
nothing extra is computed, so the tables are the same either way.

Tables built from lists of rows (the audit samples, the vendor swap, the label files, the dataset)
name their members instead (`key`: `run|item`, or `|item` for an item alone) with `share_keys` and
`count_keys`.

The recording, written as `results/tables/<table>.cells.json`, maps a table row (its position in
the CSV) to its columns, each `{"k": [...], "n": [...]}` (a plain count: `n` only). The audit site
turns it into `cells/<table>.js`, which its index reads to list the rows of one cell.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from urllib.parse import quote

import pandas as pd

from aura_eval.util.jsonl import atomic_write_text
from aura_eval.util.stats import share

_RECORDING: contextvars.ContextVar[dict | None] = contextvars.ContextVar("cells", default=None)
MARK = "__rows"  # the hidden key suffix of a row's member lists
AUDIT_INDEX = "../audit/index.html"  # the audit site's index, from results/report/ (and results/tables/)
ROW = "row"  # the pseudo-column of a whole table row: every row any of its cells counts


@contextlib.contextmanager
def recording():
    """Record, in the dict this yields, the members of every table built inside."""
    recorded: dict = {}
    token = _RECORDING.set(recorded)
    try:
        yield recorded
    finally:
        _RECORDING.reset(token)


def _rows(mask: pd.Series) -> list[int]:
    return [int(i) for i in mask.index[mask.to_numpy(bool)]]


def share_rows(name: str, hit: pd.Series, among: pd.Series) -> dict:
    """`stats.share` over boolean frame rows (the rows of `among` that are also `hit`), with their
    row numbers while recording."""
    both = hit & among
    out = share(name, both.sum(), among.sum())
    if _RECORDING.get() is not None:
        out[name + MARK] = {"k": _rows(both), "n": _rows(among)}
    return out


def count_rows(name: str, mask: pd.Series) -> dict:
    """A plain count of frame rows, with their row numbers while recording."""
    out = {name: int(mask.sum())}
    if _RECORDING.get() is not None:
        out[name + MARK] = {"n": _rows(mask)}
    return out


def key(run: str | None, item_id: str) -> str:
    """A member named rather than numbered: one run's row of an item (`run|item`), or an item
    alone (`|item`, for counts of released items). Tables built from lists of rows use these."""
    return f"{run or ''}|{item_id}"


def share_keys(name: str, hits: list[bool], keys: list[str]) -> dict:
    """`stats.share` over listed members (`key`): the ones whose `hits` entry is true, of all."""
    out = share(name, sum(map(bool, hits)), len(keys))
    if _RECORDING.get() is not None:
        out[name + MARK] = {"k": [k for k, hit in zip(keys, hits) if hit], "n": list(keys)}
    return out


def count_keys(name: str, keys: list[str]) -> dict:
    """A plain count of listed members (`key`), with them while recording."""
    out = {name: len(keys)}
    if _RECORDING.get() is not None:
        out[name + MARK] = {"n": list(keys)}
    return out


def frame_table(rows: list[dict], columns: list[str] | None = None) -> pd.DataFrame:
    """The DataFrame of `rows`; while recording, each row's member lists (and the union of its
    denominators, ROW) go to the recording under the row's position."""
    recorded = _RECORDING.get()
    if recorded is not None:
        for position, row in enumerate(rows):
            members = {key[:-len(MARK)]: row.pop(key) for key in [k for k in row if k.endswith(MARK)]}
            if members:
                members[ROW] = {"n": sorted({i for cell in members.values() for i in cell["n"]})}
                recorded[str(position)] = members
    return pd.DataFrame(rows, columns=columns)


def write(recorded: dict, path) -> None:
    atomic_write_text(path, json.dumps(recorded, sort_keys=True, separators=(",", ":")) + "\n")


def read(path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def link(table: str, row: int, column: str, part: str = "n") -> str:
    """The audit index's address listing the rows of one cell (`part`: k, the numerator, or n)."""
    return f"{AUDIT_INDEX}#cell=" + quote(f"{table}/{row}/{column}/{part}", safe="/")


def item_href(item_id: str, section: str | None = None) -> str:
    """The address of the audit site's page of one item (or excluded candidate), from results/report/
    (and results/figures/, results/audit/: `../audit/` resolves the same from each); `section`: the
    id of one of its sections (`prefix`, `pair`, `run-<run>`)."""
    anchor = f"#{quote(section, safe='')}" if section else ""
    return f"{AUDIT_INDEX.rsplit('/', 1)[0]}/items/{quote(item_id, safe='')}.html{anchor}"


def item_link(item_id: str, text: str | None = None) -> str:
    """A Markdown link to the audit site's page of one item (or excluded candidate), from results/report/."""
    return f"[{text or item_id}]({item_href(item_id)})"


def linked(text: str, table: str, row: int, column: str, part: str = "n") -> str:
    return f"[{text}]({link(table, row, column, part)})"
