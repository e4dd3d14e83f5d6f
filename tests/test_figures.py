"""The numbers Figures 4-8 plot, from hand-built frames, and that every figure renders."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from aura_eval.analyze import figures
from aura_eval.artefact_registry import FIGURES, builder_of
from aura_eval.construct.funnel import funnel as construction_funnel
from aura_eval.analyze.figures import (MEAN_ROW, fig4_level_share_data, fig4_overall_data, fig4_unsafe_by_level_data,
                               fig5a_data, fig5b_data, fig6_data, fig7_data, fig8_data, why_empty)
from aura_eval.util.table_files import write_csv
from aura_eval.report import paper_numbers
from aura_eval.vocab import RUNNING_EXAMPLE

COLUMNS = ["run", "agent", "model", "format", "group", "item_id", "seed_id", "domain", "dimension", "pair_label",
           "pair_id", "counterpart_id", "prefix_id", "decision_point", "rollout_status", "detection",
           "action_type", "safety", "unsafe"]


def _rows(model, label, det, typ, safety, dim="original", fmt="react", times=1):
    """`times` frame rows (the columns of `analysis.frame`) for one model and one label combination."""
    out = []
    for i in range(times):
        out.append({"run": model if fmt == "react" else f"{model}.action_only", "agent": model, "model": model,
                    "format": fmt, "group": "open-weight", "item_id": f"{model}.{label}.{det}.{typ}.{dim}.{i}",
                    "seed_id": f"s{i}", "domain": "Finance", "dimension": dim, "pair_label": label, "pair_id": None,
                    "counterpart_id": None, "prefix_id": f"s{i}.at_trigger", "decision_point": "at_trigger",
                    "rollout_status": "ok", "detection": det, "action_type": typ, "safety": safety,
                    "unsafe": np.nan if safety is None else float(safety == "Unsafe")})
    return out


def _frame(*groups) -> pd.DataFrame:
    return pd.DataFrame([r for g in groups for r in g], columns=COLUMNS)


@pytest.fixture
def df():
    return _frame(
        # model a, NSP: D0xA0 five rows (4 unsafe), D2xA4 four rows (all safe), one unresolved safety
        _rows("a", "NSP", "D0", "A0", "Unsafe", times=4), _rows("a", "NSP", "D0", "A0", "Safe"),
        _rows("a", "NSP", "D2", "A4", "Safe", dim="RS5", times=4),
        _rows("a", "NSP", None, "A5", None),
        # model a, SP: two rows
        _rows("a", "SP", "D0", "A3", "Unsafe"), _rows("a", "SP", "D3", "A3", "Safe"),
        # model b, NSP: RS5 three rows, one unsafe; one row without an action type
        _rows("b", "NSP", "D1", "A0", "Unsafe", dim="RS5"), _rows("b", "NSP", "D1", "A2", "Safe", dim="RS5", times=2),
        _rows("b", "NSP", "D3", None, "Safe"),
        # action-only rows are never drawn
        _rows("a", "NSP", None, "A0", "Unsafe", fmt="action_only", times=7),
    )


def _one(table, **key):
    mask = np.ones(len(table), dtype=bool)
    for column, value in key.items():
        mask &= table[column] == value
    assert mask.sum() == 1, key
    return table[mask].iloc[0]


def test_fig4_overall_nsp_and_sp_rates(df):
    out = fig4_overall_data(df)
    assert list(out.columns) == ["model", "pair_label", "n", "unsafe", "unsafe_pct"]
    assert [tuple(r) for r in out[["model", "pair_label", "n", "unsafe"]].itertuples(index=False)] == [
        ("a", "NSP", 9, 4), ("a", "SP", 2, 1), ("b", "NSP", 4, 1)]
    assert out["unsafe_pct"].tolist() == pytest.approx([400 / 9, 50.0, 25.0])


def test_fig4_detection_level_shares(df):
    out = fig4_level_share_data(df)
    a_nsp = out[(out["model"] == "a") & (out["pair_label"] == "NSP")]
    assert a_nsp["detection"].tolist() == ["D0", "D1", "D2", "D3"]
    assert a_nsp["count"].tolist() == [5, 0, 4, 0]  # the row without a detection label is left out
    assert set(a_nsp["n"]) == {9}
    assert a_nsp["pct"].tolist() == pytest.approx([500 / 9, 0.0, 400 / 9, 0.0])
    b_nsp = out[(out["model"] == "b")]
    assert b_nsp["count"].tolist() == [0, 3, 0, 1] and b_nsp["pct"].tolist() == [0.0, 75.0, 0.0, 25.0]
    assert len(out) == 3 * 4  # a NSP, a SP, b NSP; every level listed
    assert fig7_data(df).equals(out)


def test_fig4_unsafe_rate_per_detection_level(df):
    out = fig4_unsafe_by_level_data(df)
    row = _one(out, model="a", pair_label="NSP", detection="D0")
    assert (row["n"], row["unsafe"], row["unsafe_pct"]) == (5, 4, 80.0)
    row = _one(out, model="a", pair_label="NSP", detection="D2")
    assert (row["n"], row["unsafe"], row["unsafe_pct"]) == (4, 0, 0.0)
    row = _one(out, model="b", pair_label="NSP", detection="D1")
    assert (row["n"], row["unsafe"]) == (3, 1)
    assert not ((out["model"] == "a") & (out["detection"] == "D1")).any()  # no rows, no point
    assert len(out) == 6


def test_fig5_action_types_per_model_and_pair_label(df):
    shares = fig5a_data(df)
    a_nsp = shares[(shares["model"] == "a") & (shares["pair_label"] == "NSP")]
    assert a_nsp["count"].tolist() == [5, 0, 0, 0, 4, 1] and set(a_nsp["n"]) == {10}
    a_sp = shares[(shares["model"] == "a") & (shares["pair_label"] == "SP")]
    assert a_sp["pct"].tolist() == [0.0, 0.0, 0.0, 100.0, 0.0, 0.0]
    b = shares[shares["model"] == "b"]
    assert b["count"].tolist() == [1, 0, 2, 0, 0, 0] and set(b["n"]) == {3}
    split = fig5b_data(df)
    assert list(split.columns) == ["model", "pair_label", "action_type", "n", "safe", "unsafe", "unsafe_pct"]
    row = _one(split, model="a", pair_label="NSP", action_type="A0")
    assert (row["n"], row["safe"], row["unsafe"], row["unsafe_pct"]) == (5, 1, 4, 80.0)
    row = _one(split, model="a", pair_label="SP", action_type="A3")
    assert (row["n"], row["safe"], row["unsafe"]) == (2, 1, 1)
    assert not ((split["model"] == "a") & (split["action_type"] == "A5")).any()  # its safety is unresolved
    assert ((split["model"] == "b") & (split["pair_label"] == "NSP")).sum() == 2


def test_fig6_rates_and_the_unweighted_mean_row(df):
    out = fig6_data(df)
    assert list(out.columns) == ["model", "pair_label", "dimension", "n", "unsafe", "unsafe_pct", "models"]
    a = _one(out, model="a", pair_label="NSP", dimension="RS5")
    assert (a["n"], a["unsafe"], a["unsafe_pct"]) == (4, 0, 0.0)
    b = _one(out, model="b", pair_label="NSP", dimension="RS5")
    assert (b["n"], b["unsafe"]) == (3, 1) and b["unsafe_pct"] == pytest.approx(100 / 3)
    mean = _one(out, model=MEAN_ROW, pair_label="NSP", dimension="RS5")
    # the mean of the two models' rates (0 and 33.3), not the pooled 1/7
    assert mean["unsafe_pct"] == pytest.approx(50 / 3) and (mean["n"], mean["unsafe"], mean["models"]) == (7, 1, 2)
    mean = _one(out, model=MEAN_ROW, pair_label="NSP", dimension="original")
    assert mean["unsafe_pct"] == pytest.approx((80.0 + 0.0) / 2) and mean["models"] == 2
    mean = _one(out, model=MEAN_ROW, pair_label="SP", dimension="original")
    assert (mean["unsafe_pct"], mean["models"], mean["n"]) == (50.0, 1, 2)
    assert set(out["pair_label"]) == {"NSP", "SP"}


def test_fig8_cells_below_the_minimum_n_are_hidden(df):
    out = fig8_data(df)
    assert list(out.columns) == ["model", "detection", "action_type", "n", "unsafe", "unsafe_pct", "shown"]
    assert len(out) == 2 * 4 * 6  # every cell of every model with NSP rows
    shown = _one(out, model="a", detection="D0", action_type="A0")
    assert (shown["n"], shown["unsafe"], shown["unsafe_pct"], shown["shown"]) == (5, 4, 80.0, True)
    hidden = _one(out, model="a", detection="D2", action_type="A4")
    assert (hidden["n"], hidden["unsafe"], hidden["shown"]) == (4, 0, False) and math.isnan(hidden["unsafe_pct"])
    empty = _one(out, model="a", detection="D3", action_type="A3")  # an SP row: not counted
    assert empty["n"] == 0 and not empty["shown"]
    assert out["shown"].sum() == 1
    assert int(out.loc[out["model"] == "b", "n"].sum()) == 3  # the row without an action type is out
    lowered = fig8_data(df, min_n=3)
    assert _one(lowered, model="a", detection="D2", action_type="A4")["unsafe_pct"] == 0.0
    assert _one(lowered, model="b", detection="D1", action_type="A2")["shown"] == False  # noqa: E712 (n=2)
    everything = fig8_data(df, min_n=1)
    assert _one(everything, model="b", detection="D1", action_type="A0")["unsafe_pct"] == 100.0
    assert not _one(everything, model="b", detection="D0", action_type="A0")["shown"]  # n=0 never shown


def test_empty_data_and_why():
    empty = _frame()
    assert why_empty(empty, "safety") == "the frame is empty (no run was labelled)"
    only_ao = _frame(_rows("a", "NSP", None, "A0", "Safe", fmt="action_only"))
    assert why_empty(only_ao, "safety") == "no ReAct run is in the frame"
    unresolved = _frame(_rows("a", "NSP", "D0", None, "Safe"), _rows("a", "SP", None, "A0", None))
    assert why_empty(unresolved, "safety", "action_type") == ("no ReAct row has a resolved action type label "
                                                             "together with action safety (no panel majority)")
    assert why_empty(unresolved, "safety", pair_label="SP") == (
        "no SP ReAct row has a resolved action safety label (no panel majority)")
    for data in (fig4_overall_data, fig4_level_share_data, fig4_unsafe_by_level_data, fig5a_data, fig5b_data,
                 fig6_data, fig8_data):
        assert data(empty).empty and data(only_ao).empty


FRAME_DRAWERS = [figures.unsafe_by_detection, figures.action_types, figures.unsafe_by_dimension,
                 figures.detection_levels, figures.detection_by_action]


def _png_ok(path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


@pytest.mark.parametrize("draw", FRAME_DRAWERS, ids=lambda d: d.__name__)
def test_each_figure_renders(draw, df, tmp_path):
    png, svg = tmp_path / "f.png", tmp_path / "f.svg"
    draw(df, png, svg)
    _png_ok(png)
    assert "<svg" in svg.read_text()


@pytest.mark.parametrize("draw", FRAME_DRAWERS, ids=lambda d: d.__name__)
def test_no_data_draws_the_reason(draw, tmp_path):
    png, svg = tmp_path / "f.png", tmp_path / "f.svg"
    draw(_frame(_rows("a", "NSP", None, "A0", "Safe", fmt="action_only")), png, svg)
    _png_ok(png)
    assert "no rows because no ReAct run is in the frame" in svg.read_text()


def test_a_missing_pair_label_panel_says_why(df, tmp_path):
    png, svg = tmp_path / "f.png", tmp_path / "f.svg"
    figures.unsafe_by_dimension(df[df["pair_label"] == "NSP"], png, svg)
    _png_ok(png)
    assert "no rows because no ReAct row is on an SP item" in svg.read_text()


@pytest.mark.suite
def test_registered_builders_render_from_files_and_rerun_byte_identical(df, tmp_path):
    frame_csv = tmp_path / "labels_long.csv"
    write_csv(df, frame_csv)
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"domain": "Finance", "label": "unsafe", "n_steps": 4, "seed_id": "s1"}\n')
    funnel = tmp_path / "funnel.json"
    funnel.write_text(json.dumps({"funnel": construction_funnel(*[[]] * 10)}))
    inputs = {"frame": str(frame_csv), "seeds": str(seeds), "funnel": str(funnel),
              "paper_numbers": str(paper_numbers.PATH)}
    unique = tmp_path / "unique_ids.csv"  # the headline's flips read each row's original: one row per (run, item)
    write_csv(df.assign(item_id=[f"{i}.{k}" for k, i in enumerate(df["item_id"])]), unique)
    for name in FIGURES:
        if name == RUNNING_EXAMPLE:  # it reads one record's files: tests/test_running_example.py
            continue
        png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
        builder_of(name)(inputs | {"frame": str(unique)} if name == "headline_comparison" else inputs, png, svg)
        _png_ok(png)
    name = "fig8_detection_by_action"
    first = [(tmp_path / f"{name}.{fmt}").read_bytes() for fmt in ("png", "svg")]
    builder_of(name)(inputs, tmp_path / "again.png", tmp_path / "again.svg")
    assert [(tmp_path / f"again.{fmt}").read_bytes() for fmt in ("png", "svg")] == first
