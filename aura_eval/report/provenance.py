"""The report's last appendix, the run's provenance, kept short: its per-model tables (model_calls,
forecast_vs_actual: one row per stage job and model, hundreds at the paper's scale) collapse to one
row per stage with a total, and the full tables go beside the report as CSVs it links
(results/report/tables/), as does every file behind each table (sources.csv). Beside the report,
the links also work inside Snakemake's report archive, which keeps the report's folder whole.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from aura_eval.analyze.calls import FORECAST_TOTAL
from aura_eval.util.csv_cells import read_csv
from aura_eval.util.table_files import markdown, write_csv

COLLAPSED = ("model_calls", "forecast_vs_actual")  # the per-model tables shown as totals per stage
FOLDER = "tables"  # beside report.html
ALL_STAGES = "all stages"
TEXT_COLUMNS = ("stage", "endpoint", "model", "price")


def _total(values: pd.Series):
    """A column's sum; empty where any part is (a dollar amount of an unpriced model)."""
    return values.sum() if values.notna().all() else np.nan


def stage_totals(df: pd.DataFrame) -> pd.DataFrame:
    """One row per stage (a job's stage before its `:run:judge` suffix): how many rows of the full table
    it sums (`rows`), its models and the sum of every count, then the run's total. A total row the full
    table ends with (forecast_vs_actual's) is left out: the total here is computed again."""
    df = df[df["stage"].astype(str) != FORECAST_TOTAL] if "stage" in df else df
    if df.empty:
        return pd.DataFrame(columns=["stage", "rows", "models"])
    numbers = [c for c in df.columns if c not in TEXT_COLUMNS]
    df = df.assign(stage=df["stage"].astype(str).str.split(":").str[0])
    g = df.groupby("stage", sort=False)
    out = pd.concat([g.size().rename("rows"), g["endpoint"].nunique().rename("models"),
                     g[numbers].agg(_total)], axis=1).reset_index()
    total = {"stage": ALL_STAGES, "rows": len(df), "models": df["endpoint"].nunique(),
             **{c: _total(df[c]) for c in numbers}}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)


def link(name: str) -> str:
    return f"[`{FOLDER}/{name}.csv`]({FOLDER}/{name}.csv)"


def collapsed(tables: Path, out_dir: Path, name: str) -> str:
    """`name`'s totals per stage as Markdown, its full CSV copied to `out_dir`/tables/ and linked."""
    source = tables / f"{name}.csv"
    if not source.is_file():
        return f"*Missing from this run: `{name}.csv`.*\n"
    (out_dir / FOLDER).mkdir(parents=True, exist_ok=True)
    shutil.copy(source, out_dir / FOLDER / source.name)
    full = read_csv(source)
    return (f"Totals per stage of the full table's {len(full):,} rows; the full table: {link(name)}.\n\n"
            + markdown(stage_totals(full)))


def sources_csv(sources: dict, out_dir: Path) -> str:
    """Every (table, input, file) of `sources` (table -> {input: path or paths}) as tables/sources.csv;
    a link to it."""
    rows = []
    for table, given in sources.items():
        given = given if isinstance(given, dict) else {"files": given}
        for entry, paths in given.items():
            for path in [paths] if isinstance(paths, str) else paths:
                rows.append({"table": table, "input": entry, "file": str(path)})
    (out_dir / FOLDER).mkdir(parents=True, exist_ok=True)
    write_csv(pd.DataFrame(rows, columns=["table", "input", "file"]), out_dir / FOLDER / "sources.csv")
    return link("sources")
