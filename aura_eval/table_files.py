"""A table's files: the CSV a reviewer checks and the Markdown the report includes; and the
job that builds one registered table (aura_eval.vocab.TABLES) and writes its files."""

from __future__ import annotations

import pandas as pd

from aura_eval.jsonl import atomic_write_text
from aura_eval.vocab import TABLES, builder_of


def write_csv(df: pd.DataFrame, path) -> None:
    atomic_write_text(path, df.to_csv(index=False, lineterminator="\n"))


def markdown(df: pd.DataFrame) -> str:
    """The rendered version of a table; an empty one says so."""
    if df.empty:
        return "*No rows in this run: its inputs are empty.*\n"
    shown = df.astype(object).where(df.notna(), None)  # NaN and <NA> print as the missing mark
    return shown.to_markdown(index=False, floatfmt=".4g", missingval="—") + "\n"


def build(name: str, inputs: dict, outputs: dict, settings: dict) -> str:
    """Build the registered table `name` from its declared inputs and write each of its formats.

    A builder returns a DataFrame (its CSV and its Markdown rendering), the text of a
    Markdown-only table, or (DataFrame, text) for a table whose Markdown shows more than a grid
    (a worked example): the CSV holds the frame, the Markdown the text."""
    table = builder_of(name)(inputs, settings)
    if TABLES[name].formats == ("md",):  # a Markdown-only table's builder returns its text
        atomic_write_text(outputs["md"], table)
        return f"{len(table.splitlines())} lines"
    table, text = table if isinstance(table, tuple) else (table, None)
    if "csv" in outputs:
        write_csv(table, outputs["csv"])
    if "md" in outputs:
        atomic_write_text(outputs["md"], markdown(table) if text is None else text)
    return f"{len(table)} rows"
