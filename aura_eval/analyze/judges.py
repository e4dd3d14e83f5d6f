"""How the judges behave (paper F.2-F.5): the five-judge panel, judge consistency across repeats,
judge-human accuracy (Tables 21-23) and the vendor swap (Table 24).
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from aura_eval.analyze import reasons
from aura_eval.analyze.frame import register_tables, rows_by_stem, rows_of
from aura_eval.artefact_registry import builder
from aura_eval.evaluate.validation import human_reference
from aura_eval.util import cells
from aura_eval.util.jsonl import read_jsonl
from aura_eval.util.stats import (N_RESAMPLES, NO_PLURALITY, PLURALITY, UNANIMOUS, plurality_consensus, round_half_up,
                                  seed_bootstrap, share_columns, vote)
from aura_eval.util.table_files import explain
from aura_eval.vocab import AXES, REACT, SAFE, run_name

# -- judge reliability (F.2-F.4) ------------------------------------------------

NO_HUMAN_LABELS = "no human reference labels yet"
OVERALL = "overall"
PLURALITY_STRATA = (UNANIMOUS, PLURALITY, NO_PLURALITY)  # of the five-judge panel, labelled by plurality


def calibration_cells(samples: list[dict], five_judge_rows: list[dict], human_rows: list[dict]):
    """(the five judges, the cells of Tables 19 and 21-23): one cell per final audit sample (a
    human final label: the paper's 243 retained samples, F.1-F.3), on its own axis, with the
    five-judge panel's votes on it (None where the panel has none) and that reference label. A
    sample not yet final (incomplete, an unresolved tie) or dropped is in no cell."""
    judges = five_judge_rows[0]["judges"] if five_judge_rows else []
    votes = {(r["item_id"], r["agent"], axis): r[axis]["votes"] for r in five_judge_rows for axis in AXES}
    reference = human_reference(human_rows)
    kept = [{"axis": s["axis"], "votes": votes.get((s["item_id"], s["agent"], s["axis"])) or None,
             "reference": reference[(s["item_id"], s["agent"], s["axis"])], "key": sample_key(s)}
            for s in samples if (s["item_id"], s["agent"], s["axis"]) in reference]
    return judges, kept


def sample_key(row: dict) -> str:
    """The member (aura_eval.util.cells) of an audit sample, a vendor-swap or a human row: the agent's ReAct run's item."""
    return cells.key(run_name(row["agent"], REACT), row["item_id"])


def sample_keys(rows: list[dict]) -> list[str]:
    return [c["key"] if "key" in c else sample_key(c) for c in rows]


def _judge_accuracy(units: list[dict], position: int, name: str = "accuracy") -> dict:
    """The `share` named `name`: the judge at `position` votes the reference label, over the
    cells with votes and a reference (an unparseable vote counts as wrong)."""
    judged = [c for c in units if c["votes"] and c["reference"] is not None]
    return cells.share_keys(name, [c["votes"][position] == c["reference"] for c in judged], sample_keys(judged))


def judge_accuracy_table(samples: list[dict], five_judge_rows: list[dict], human_rows: list[dict]) -> pd.DataFrame:
    """Table 21: each validation judge's accuracy against the human reference per axis and
    over all axes (`<axis>_pct/_k/_n`, `overall_…`), on the calibration cells."""
    judges, units = calibration_cells(samples, five_judge_rows, human_rows)
    out = []
    for position, judge in enumerate(judges):
        row = {"judge": judge}
        for axis in (*AXES, OVERALL):
            row.update(_judge_accuracy([c for c in units if axis in (OVERALL, c["axis"])], position, axis))
        out.append({**row, "note": "" if row[f"{OVERALL}_n"] else NO_HUMAN_LABELS})
    return cells.frame_table(out, ["judge", *share_columns(*AXES, OVERALL), "note"])


def accuracy_by_consensus_table(samples: list[dict], five_judge_rows: list[dict],
                                human_rows: list[dict]) -> pd.DataFrame:
    """Table 22: each validation judge's accuracy within the five-judge panel's plurality
    strata (unanimous, plurality without unanimity, no plurality), over all axes, on the final
    audit samples (`note`: none has a human final label yet)."""
    judges, units = calibration_cells(samples, five_judge_rows, human_rows)
    out = []
    for position, judge in enumerate(judges):
        for stratum in PLURALITY_STRATA:
            mine = [c for c in units if c["votes"] and plurality_consensus(c["votes"]) == stratum]
            accuracy = _judge_accuracy(mine, position)
            out.append({"judge": judge, "stratum": stratum, **cells.count_keys("samples", sample_keys(mine)), **accuracy,
                        "note": "" if units else NO_HUMAN_LABELS})
    return cells.frame_table(out, ["judge", "stratum", "samples", *share_columns("accuracy"), "note"])


def ensemble_table(samples: list[dict], five_judge_rows: list[dict], human_rows: list[dict],
                   panel=()) -> pd.DataFrame:
    """Table 23: the five-judge baseline and every three-of-five ensemble on the calibration
    cells: samples with a plurality (Np), unanimous ones within them (Nu), ties (T), and
    accuracy on Np against the human reference. `in_use` marks the ensemble whose judges
    are `panel` (the config's roles.judges, the panel that labels the benchmark)."""
    judges, units = calibration_cells(samples, five_judge_rows, human_rows)
    voted = [c for c in units if c["votes"]]
    panel = set(panel if isinstance(panel, (list, tuple)) else [panel])
    out = []
    for subset in ([tuple(range(len(judges)))] if judges else []) + list(combinations(range(len(judges)), 3)):
        chosen = [[c["votes"][i] for i in subset] for c in voted]
        strata = [plurality_consensus(v) for v in chosen]
        labels = [vote(v, "plurality") for v in chosen]
        judged = [(label, c) for label, c in zip(labels, voted) if label is not None and c["reference"] is not None]
        names = [judges[i] for i in subset]
        keys = sample_keys(voted)
        out.append({"ensemble": f"all {len(judges)}" if len(subset) == len(judges) else "three",
                    "judges": " + ".join(names), "in_use": set(names) == panel,
                    **cells.count_keys("n_plurality", [k for k, st in zip(keys, strata) if st != NO_PLURALITY]),
                    **cells.count_keys("n_unanimous", [k for k, st in zip(keys, strata) if st == UNANIMOUS]),
                    **cells.count_keys("ties", [k for k, st in zip(keys, strata) if st == NO_PLURALITY]),
                    **cells.share_keys("accuracy", [label == c["reference"] for label, c in judged],
                                       sample_keys([c for _, c in judged]))})
    return cells.frame_table(out, ["ensemble", "judges", "in_use", "n_plurality", "n_unanimous", "ties",
                                      *share_columns("accuracy")])


def vendor_swap_table(swap_rows: list[dict], items: dict, n_resamples: int = N_RESAMPLES) -> pd.DataFrame:
    """Table 24: Safe rate under the original panel minus with the same-vendor judge(s)
    replaced, on items resolved under both, with a seed-clustered 95% percentile interval."""
    out = []
    for agent in sorted({r["agent"] for r in swap_rows}):
        rows = [r for r in swap_rows if r["agent"] == agent and r["original_safety"] and r["replaced_safety"]]
        mine = [r for r in swap_rows if r["agent"] == agent]
        entry = {"agent": agent, **cells.count_keys("items", sample_keys(mine)),
                 **cells.count_keys("both_resolved", sample_keys(rows)),
                 "replaced_judges": " ".join(mine[0]["replaced_judges"]), "replacement": mine[0]["replacement"]}
        orig = np.array([r["original_safety"] == SAFE for r in rows], dtype=float)
        repl = np.array([r["replaced_safety"] == SAFE for r in rows], dtype=float)
        entry.update({**cells.share_keys("original_safe", list(orig == 1), sample_keys(rows)),
                      **cells.share_keys("replaced_safe", list(repl == 1), sample_keys(rows))})
        if rows:
            seeds = [items[r["item_id"]]["seed_id"] for r in rows]
            _, low, high = seed_bootstrap(seeds, np.column_stack([orig - repl, np.ones(len(rows))]),
                                          lambda t: 100 * t[..., 0] / t[..., 1], n_resamples)
            entry.update(difference=round_half_up(100 * (orig - repl).mean()), low=round_half_up(low),
                         high=round_half_up(high))
        out.append(entry)
    return cells.frame_table(out, ["agent", "items", "both_resolved", "replaced_judges", "replacement",
                                      *share_columns("original_safe", "replaced_safe"), "difference", "low", "high"])


def audit_inputs(inputs) -> tuple:
    """What the judge-human tables read: the audit samples, the five-judge rows, the human labels."""
    return rows_of(inputs["samples"]), rows_of(inputs["five_judge"]), read_jsonl(inputs["human"])
register_tables({"table24_vendor_swap": (vendor_swap_table, reasons.vendor_swap)},
          lambda inputs: (rows_of(inputs["vendor_swap"]), {i["item_id"]: i for i in read_jsonl(inputs["dataset"])}))


@builder("table23_ensembles")
def _ensembles(inputs, settings):
    args = audit_inputs(inputs)
    return reasons.attach(reasons.audit, ensemble_table(*args, panel=settings["roles"]["judges"]), *args)


def judge_consistency(repeat_rows: list[dict]) -> pd.DataFrame:
    """Per judge and axis: share of items on which every repeated run gave the same label (F.5)."""
    rows = []
    for judge in sorted({r["judge"] for r in repeat_rows}):
        mine = [r for r in repeat_rows if r["judge"] == judge]
        row = {"judge": judge}
        for axis in AXES:
            known = [r for r in mine if r[axis]["consistent"] is not None]
            row.update(cells.share_keys(f"{axis}_consistent", [r[axis]["consistent"] for r in known],
                                        [cells.key(run_name(r["agent"], REACT), r["item_id"]) for r in known]))
        rows.append(row)
    return cells.frame_table(rows, ["judge", *share_columns(*(f"{a}_consistent" for a in AXES))])


def five_judge_summary(rows_by_agent: dict[str, list[dict]]) -> pd.DataFrame:
    """Per agent's calibration sample: how often the five-judge panel reaches a plurality, per axis."""
    out = []
    for agent, rows in sorted(rows_by_agent.items()):
        run = run_name(agent, REACT)
        row = {"agent": agent, **cells.count_keys("items", [cells.key(run, r["item_id"]) for r in rows])}
        for axis in AXES:
            row.update(cells.count_keys(f"{axis}_plurality", [cells.key(run, r["item_id"]) for r in rows
                                                              if r[axis]["label"] is not None]))
            row.update(cells.count_keys(f"{axis}_unanimous", [cells.key(run, r["item_id"]) for r in rows
                                                              if r[axis]["stratum"] == "unanimous"]))
        out.append(row)
    return cells.frame_table(out, ["agent", "items"] + [f"{a}_{s}" for a in AXES
                                                           for s in ("plurality", "unanimous")])


@builder("five_judge_panel")
def _five_judge_panel(inputs, settings):
    table = five_judge_summary(rows_by_stem(inputs["five_judge"]))
    why = ("the five-judge validation panel did not run (reliability.five_judge_panel is off, or "
           "reliability.calibration_agents is empty)")
    return explain(table, why if table.empty else None)


@builder("judge_consistency")
def _judge_consistency(inputs, settings):
    table = judge_consistency([{**r, "agent": Path(p).stem} for p in inputs["repeats"] for r in read_jsonl(p)])
    why = "no repeated judge runs (reliability.repeats is 0, or reliability.calibration_agents is empty)"
    return explain(table, why if table.empty else None)


register_tables({"table21_judge_accuracy": (judge_accuracy_table, reasons.audit),
                 "table22_accuracy_by_consensus": (accuracy_by_consensus_table, reasons.audit)}, audit_inputs)
