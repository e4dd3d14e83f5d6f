"""Human validation (paper F.1, Table 3, Tables 18-20): retention, annotator agreement and the
judge panel against the human reference.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from aura_eval.analyze import reasons
from aura_eval.analyze.frame import register_tables
from aura_eval.analyze.judges import OVERALL, PLURALITY_STRATA, audit_inputs, calibration_cells, sample_keys
from aura_eval.util import cells
from aura_eval.util.jsonl import read_jsonl
from aura_eval.util.stats import (
    krippendorff_alpha,
    observed_agreement,
    plurality_consensus,
    round_half_up,
    wilson_interval,
)
from aura_eval.vocab import AXES

# -- human validation (Table 3, Tables 18-20) ------------------------------------------

def _annotator_matrix(rows: list[dict]):
    annotators = sorted({a for r in rows for a in r["annotators"]})
    return [[dict(zip(r["annotators"], r["labels"])).get(a) for r in rows] for a in annotators]


def human_reliability_table(human_rows: list[dict]) -> pd.DataFrame:
    """Table 3: per axis and overall, retained N, human P_o and nominal alpha, samples with
    a panel label (Np), judge-human accuracy on Np with a Wilson 95% interval, and
    accuracy on the panel-unanimous subset (`unanimous_accuracy`)."""
    out = []
    for axis in (*AXES, OVERALL):
        rows = [r for r in human_rows if r["retained"] and axis in (OVERALL, r["axis"])]
        with_panel = [r for r in rows if r["panel_label"] is not None]
        correct = sum(r["panel_label"] == r["final_label"] for r in with_panel)
        unanimous = [r for r in with_panel if r["panel_stratum"] == "unanimous"]
        low, high = wilson_interval(correct, len(with_panel))
        matrix = _annotator_matrix(rows)
        pairable = sum(len(r["labels"]) >= 2 for r in rows)
        out.append({
            "axis": axis, **cells.count_keys("n", sample_keys(rows)),
            "p_o": round(observed_agreement(matrix), 3) if pairable else np.nan,
            "alpha_nominal": round(krippendorff_alpha(matrix, "nominal"), 3) if pairable and len(
                {v for row in matrix for v in row if v}) > 1 else np.nan,
            **cells.count_keys("n_panel", sample_keys(with_panel)),
            **cells.share_keys("accuracy", [r["panel_label"] == r["final_label"] for r in with_panel],
                               sample_keys(with_panel)),
            "ci_low": round_half_up(100 * low) if with_panel else np.nan,
            "ci_high": round_half_up(100 * high) if with_panel else np.nan,
            **cells.share_keys("unanimous_accuracy", [r["panel_label"] == r["final_label"] for r in unanimous],
                               sample_keys(unanimous)),
        })
    return cells.frame_table(out)


def retention_table(human_rows: list[dict]) -> pd.DataFrame:
    """Table 18, per axis: sampled; annotated (every assigned annotator labelled it); incomplete
    (some assigned annotator has not, and it is not adjudicated: not final); retained (a final
    label); dropped (adjudicated "drop"); unresolved (annotated, tied, not adjudicated). Sampled =
    retained + dropped + unresolved + incomplete."""
    out = []
    for axis in AXES:
        rows = [r for r in human_rows if r["axis"] == axis]
        out.append({"axis": axis, **cells.count_keys("sampled", sample_keys(rows)),
                    **cells.count_keys("annotated", sample_keys([r for r in rows if r["complete"]])),
                    **cells.count_keys("incomplete", sample_keys([r for r in rows if r["incomplete"]])),
                    **cells.count_keys("retained", sample_keys([r for r in rows if r["retained"]])),
                    **cells.count_keys("dropped", sample_keys([r for r in rows if r["dropped"]])),
                    **cells.count_keys("unresolved", sample_keys([r for r in rows if r["complete"] and not r["retained"]
                                                            and not r["dropped"]]))})
    return cells.frame_table(out)


def panel_strata_table(samples: list[dict], five_judge_rows: list[dict], human_rows: list[dict]) -> pd.DataFrame:
    """Table 19: per axis and overall, the final audit samples (the calibration cells: a human
    final label, the paper's retained samples) by the five-judge panel's plurality stratum
    (`no_votes`: the panel has no votes on the sample)."""
    _, units = calibration_cells(samples, five_judge_rows, human_rows)
    out = []
    for axis in (*AXES, OVERALL):
        mine = [c for c in units if axis in (OVERALL, c["axis"])]
        strata = [plurality_consensus(c["votes"]) if c["votes"] else None for c in mine]
        out.append({"axis": axis, **{k: v for stratum in PLURALITY_STRATA for k, v in cells.count_keys(
                        stratum, [c["key"] for c, st in zip(mine, strata) if st == stratum]).items()},
                    **cells.count_keys("no_votes", [c["key"] for c in mine if not c["votes"]]),
                    **cells.count_keys("total", sample_keys(mine))})
    return cells.frame_table(out, ["axis", *PLURALITY_STRATA, "no_votes", "total"])


def human_agreement_table(human_rows: list[dict]) -> pd.DataFrame:
    """Table 20: the retained samples by the annotators' agreement (unanimous, majority, tied: all
    assigned annotators labelled it; `incomplete`: adjudicated before they all did, so in no stratum)
    per axis, with P_o and alpha."""
    reliability = human_reliability_table(human_rows).set_index("axis")
    out = []
    for axis in (*AXES, OVERALL):
        rows = [r for r in human_rows if r["retained"] and axis in (OVERALL, r["axis"])]
        out.append({"axis": axis, **{k: v for s in ("unanimous", "majority", "tied") for k, v in cells.count_keys(
                        s, sample_keys([r for r in rows if r["human_stratum"] == s])).items()},
                    **cells.count_keys("incomplete", sample_keys([r for r in rows if not r["complete"]])),
                    "p_o": reliability.loc[axis, "p_o"], "alpha_nominal": reliability.loc[axis, "alpha_nominal"]})
    return cells.frame_table(out)
register_tables({"table19_panel_strata": (panel_strata_table, reasons.audit)}, audit_inputs)
register_tables({"table3_human_reliability": (human_reliability_table,
                                              functools.partial(reasons.human_only, distinct=True)),
                 "table18_retention": (retention_table, reasons.human_only),
                 "table20_human_agreement": (human_agreement_table, reasons.human_only)},
                lambda inputs: (read_jsonl(inputs["human"]),))
