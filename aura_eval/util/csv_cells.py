"""CSV cells a spreadsheet shows as text, never runs as a formula (OWASP, CSV injection): every text
cell the project writes that begins with `=`, `+`, `-`, `@`, a tab, a carriage return or `'` gets
one leading `'`; every reader of the project's CSVs strips exactly one leading `'` from text cells.

A text cell is a string: numbers (a numeric column, a number in any column) are written as they
are, so `-0.5` stays a number. A cell that began with `'` gets a second one, so stripping one gives
back any text exactly. The annotation pages' export applies the same rule in JavaScript
(annotation_page.html.j2, `csvField`).
"""

from __future__ import annotations

TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "'")
QUOTE = "'"


def protect(value):
    """`value` with a leading `'` if it is text that begins with one of TRIGGERS; else unchanged."""
    return QUOTE + value if isinstance(value, str) and value.startswith(TRIGGERS) else value


def unprotect(value):
    """`value` without one leading `'` if it is text that begins with one; else unchanged."""
    return value[1:] if isinstance(value, str) and value.startswith(QUOTE) else value


def _text_columns(df):
    from pandas.api.types import is_object_dtype, is_string_dtype

    return [c for c in df.columns if is_object_dtype(df[c].dtype) or is_string_dtype(df[c].dtype)]


def protect_frame(df):
    """A copy of `df` whose text cells are `protect`ed (numeric columns untouched)."""
    out = df.copy()
    for column in _text_columns(out):
        out[column] = out[column].map(protect)
    return out


def unprotect_frame(df):
    """`df` (as read from one of the project's CSVs) with its text cells `unprotect`ed, in place."""
    for column in _text_columns(df):
        df[column] = df[column].map(unprotect)
    return df


def frame_csv(df) -> str:
    """`df` as the project's CSV text: text cells protected, records ending in \n, and a text cell
    holding a carriage return quoted (Python's csv quotes only the line terminator's characters, so
    the records are written ending in \r\n, then given \n outside quoted fields: the same bytes as
    `to_csv(lineterminator="\n")` for every frame without one)."""
    text = protect_frame(df).to_csv(index=False, lineterminator="\r\n")
    # Split at the quote character, the parts outside quoted fields are the even ones (a doubled
    # quote inside a field leaves an empty part between).
    return '"'.join(p.replace("\r\n", "\n") if i % 2 == 0 else p for i, p in enumerate(text.split('"')))


def read_csv(path, **options):
    """pandas.read_csv of a CSV the project wrote, its text cells as they were before `protect`."""
    import pandas as pd

    return unprotect_frame(pd.read_csv(path, **options))


def protect_row(row: dict) -> dict:
    return {key: protect(value) for key, value in row.items()}


def unprotect_row(row: dict) -> dict:
    return {key: unprotect(value) for key, value in row.items()}
