"""Why a table is empty or partial, in the reader's terms: each function takes what its table's
builder took, then the table, and returns (empty_reason, note), either None. A builder names its
table's reason where it registers (aura_eval.analyze.frame.register_tables); `attach(reason, table,
*args)` puts them on the table (`table_files.explain`), whose Markdown prints them; the CSV is unchanged.

The reasons name the first thing missing in the order a reader would check: no labelled run,
no Safe-Path rows released, no matched pairs, no human labels imported, a switch that is off."""

from __future__ import annotations

import pandas as pd

from aura_eval.util.table_files import explain
from aura_eval.vocab import FLIP_DIMENSIONS, NSP, SP, item_id

NO_HUMAN = "no human labels imported yet: see results/validation/annotation/ (format in data/human/README.md)"
NO_SP = "this run released no Safe-Path rows"
NO_NSP = "this run released no No-Safe-Path rows"


def _frame_basics(df: pd.DataFrame) -> str | None:
    if df.empty:
        return "no model's ReAct continuations were labelled in this run"
    return None


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["safety"].notna()]


def behaviour(df: pd.DataFrame, table: pd.DataFrame):
    """Table 33 (and 38's rows): empty only without a labelled run; partial without SP or NSP rows."""
    if (why := _frame_basics(df)) or table is None:
        return why, None
    notes = []
    labels = set(df["pair_label"].dropna())
    if SP not in labels:
        notes.append(f"{NO_SP}: the SP columns are empty")
    if NSP not in labels:
        notes.append(f"{NO_NSP}: the NSP columns are empty")
    if not notes and _labelled(df).empty:
        notes.append(f"none of the {len(df)} rows has an action-safety label (no panel majority)")
    return None, "; ".join(notes) or None


def gap(df: pd.DataFrame, table: pd.DataFrame, matched_only: bool = False):
    """Tables 31 and 32: the gap needs labelled NSP and SP rows (matched pairs for Table 32)."""
    if why := _frame_basics(df):
        return why, None
    labels = set(df["pair_label"].dropna())
    if SP not in labels:
        return None, f"{NO_SP}: no gap can be computed"
    if NSP not in labels:
        return None, f"{NO_NSP}: no gap can be computed"
    labelled = _labelled(df)
    if labelled.empty:
        return None, f"none of the {len(df)} rows has an action-safety label (no panel majority)"
    if matched_only:
        if df["pair_id"].notna().sum() == 0:
            return None, "this run released no matched NSP/SP pairs"
        if table is not None and not table.empty and (table["rows"] == 0).all():
            return None, "no matched pair has an action-safety label on both counterparts for any model"
    return None, None


def flip_variations(df: pd.DataFrame, dimensions=FLIP_DIMENSIONS) -> pd.DataFrame:
    """The population of Tables 35 and 36: the NSP variations `<prefix id>.<dimension>` of the flip
    dimensions (generated counterparts, `.pair`, share the prefix id and dimension but are neither).
    Defined here, where the empty-state reasons need it too; behaviour.flip_population adds the originals."""
    variation = [item_id(prefix, dim) for prefix, dim in zip(df["prefix_id"], df["dimension"])]
    return df[df["dimension"].isin(dimensions) & (df["pair_label"] == NSP) & (df["item_id"] == variation)]


def flips(df: pd.DataFrame, table: pd.DataFrame):
    """Table 35: RS2/RS5 NSP variations whose original was judged Safe."""
    if why := _frame_basics(df):
        return why, None
    dims = "/".join(FLIP_DIMENSIONS)
    pop = flip_variations(df)
    if pop.empty:
        return None, f"this run released no NSP {dims} variation: every cell is empty"
    if table is not None and not table.empty:
        counted = sum(int(table[f"{d}_flips_n"].sum()) for d in FLIP_DIMENSIONS)
        if counted == 0:
            return None, (f"none of the {len(pop)} NSP {dims} variation rows has an original judged Safe "
                          "with a label on both: every cell is empty")
    return None, None


def failures(df: pd.DataFrame, table: pd.DataFrame):
    """Table 36: the unsafe NSP RS2/RS5 variations."""
    if why := _frame_basics(df):
        return why, None
    dims = "/".join(FLIP_DIMENSIONS)
    pop = flip_variations(df)
    if pop.empty:
        return None, f"this run released no NSP {dims} variation"
    labelled = _labelled(pop)
    if not (labelled["safety"] == "Unsafe").any():
        return None, f"no unsafe outcome among {len(labelled)} labelled NSP {dims} variation rows"
    return None, None


def top_unsafe(df: pd.DataFrame, table: pd.DataFrame):
    """Table 37: needs unsafe outcomes."""
    if why := _frame_basics(df):
        return why, None
    labelled = _labelled(df)
    if table is None or table.empty:
        return f"no unsafe outcome among {len(labelled)} labelled rows", None
    return None, None


def prompt_format(df: pd.DataFrame, subset_ids: set, table: pd.DataFrame):
    """Table 38: needs an action-only run on the subset."""
    if df.empty:
        return "no model's continuations were labelled in this run", None
    if not (df["format"] == "action_only").any():
        return "no model answered the action-only subset in this run (action_only.agents is empty)", None
    if not subset_ids:
        return "the action-only subset has no items", None
    return behaviour(df[df["item_id"].isin(subset_ids)], table)


def _no_human(human_rows: list[dict]) -> bool:
    return not any(r.get("labels") for r in human_rows)


def incomplete(human_rows: list[dict]) -> str:
    """How many audit samples are not final for want of labels (k/n), which Tables 3 and 18-23 leave out."""
    k = sum(bool(r.get("incomplete")) for r in human_rows)
    return (f"{k}/{len(human_rows)} audit samples incomplete (an assigned annotator has not labelled them and "
            "none is adjudicated): not final, so in no count of final samples")


def scenarios(human_rows: list[dict]) -> str:
    """Table 3: how many distinct scenarios (item ids) its final samples cover, per axis and in all."""
    final = [r for r in human_rows if r.get("retained")]
    per_axis = [f"{axis.replace('_', ' ')} {len({r['item_id'] for r in final if r['axis'] == axis})}"
                for axis in dict.fromkeys(r["axis"] for r in human_rows)]
    return (f"the {len(final)} final samples cover {len({r['item_id'] for r in final})} distinct scenarios "
            f"({', '.join(per_axis)})")


def human_only(human_rows: list[dict], table: pd.DataFrame, distinct: bool = False):
    """Tables 3, 18 and 20: the human labels (Table 3 also says how many scenarios they cover)."""
    if not human_rows:
        return "no audit sample was drawn in this run (no calibration agent, or no labelled run)", None
    if _no_human(human_rows):
        return None, NO_HUMAN
    if not any(r.get("retained") for r in human_rows):
        return None, (f"none of the {len(human_rows)} audit samples has a final human label yet; "
                      f"{incomplete(human_rows)}")
    return None, "; ".join([scenarios(human_rows)] * distinct + [incomplete(human_rows)])


def audit(samples: list[dict], five_judge_rows: list[dict], human_rows: list[dict], table: pd.DataFrame):
    """Tables 19 and 21-23: the audit samples, the five-judge panel's votes and the human labels."""
    if not five_judge_rows:
        return ("the five-judge validation panel did not run (reliability.five_judge_panel is off, "
                "or reliability.calibration_agents is empty)"), None
    if not samples:
        return "no audit sample was drawn in this run", None
    if _no_human(human_rows):
        return None, f"{NO_HUMAN}; these tables count final samples only, so they stay empty until then"
    return None, f"final samples only: {incomplete(human_rows)}"


def vendor_swap(swap_rows: list[dict], items: dict, table: pd.DataFrame):
    if not swap_rows:
        return ("no leave-one-vendor-out run: no evaluated model shares a vendor with a panel judge, "
                "or roles.replacement_judge is unset"), None
    return None, None


def composition(items: list[dict], table: pd.DataFrame):
    if not items:
        return None, "the released dataset has no rows"
    labels = {i["pair_label"] for i in items}
    if SP not in labels:
        return None, NO_SP
    return None, None


def attach(reason, table: pd.DataFrame, *args) -> pd.DataFrame:
    """`table` with the reason it is empty or the note on why it is partial, from `reason` (one of
    the functions above) applied to the builder's arguments `args` and the table."""
    empty_reason, note = reason(*args, table)
    if table.empty:
        return explain(table, empty_reason or note)
    return explain(table, note=note)
