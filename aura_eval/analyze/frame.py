"""The analysis frame (one row per run x item with the panel's final labels) and the helpers every
label table's builder shares.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aura_eval.analyze import reasons
from aura_eval.artefact_registry import builder
from aura_eval.util.csv_cells import read_csv
from aura_eval.util.jsonl import read_jsonl
from aura_eval.util.table_files import write_csv
from aura_eval.vocab import GROUP_MARK, REACT, parse_run


def frame(labels_by_run: dict[str, list[dict]], items: dict[str, dict], agents: dict) -> pd.DataFrame:
    rows = []
    for run, labels in labels_by_run.items():
        agent, fmt = parse_run(run)
        group = agents.get(agent, {}).get("group")
        for label in labels:
            item = items[label["item_id"]]
            safety = label["action_safety"]["label"]
            rows.append({
                "run": run, "agent": agent, "model": f"{GROUP_MARK.get(group, '')} {agent}".strip(),
                "format": fmt, "group": group, "item_id": item["item_id"], "seed_id": item["seed_id"],
                "domain": item["domain"], "dimension": item["dimension"], "pair_label": item["pair_label"],
                "pair_id": item["pair_id"], "counterpart_id": item["counterpart_id"],
                "prefix_id": item["provenance"].get("prefix_id"),
                "decision_point": item["decision_point"], "rollout_status": label["rollout_status"],
                "detection": label["detection"]["label"], "action_type": label["action_type"]["label"],
                "safety": safety, "unsafe": np.nan if safety is None else float(safety == "Unsafe"),
            })
    columns = ["run", "agent", "model", "format", "group", "item_id", "seed_id", "domain", "dimension",
               "pair_label", "pair_id", "counterpart_id", "prefix_id", "decision_point", "rollout_status",
               "detection", "action_type", "safety", "unsafe"]
    return pd.DataFrame(rows, columns=columns)


# -- the jobs: the frame, and one registered builder per table (aura_eval.artefact_registry) ---

def read_frame(path) -> pd.DataFrame:
    return read_csv(path, dtype={"pair_id": "object", "counterpart_id": "object", "pair_label": "object",
                                    "detection": "object", "action_type": "object", "safety": "object"})


def analysis_frame(label_paths, dataset_path, agents: dict, out_path) -> None:
    items = {i["item_id"]: i for i in read_jsonl(dataset_path)}
    df = frame({Path(p).stem: read_jsonl(p) for p in label_paths}, items, agents)
    write_csv(df.sort_values(["run", "item_id"]), out_path)


def react_frame(inputs) -> pd.DataFrame:
    df = read_frame(inputs["frame"])
    return df[df["format"] == REACT]


def rows_of(paths) -> list[dict]:
    return [r for p in paths for r in read_jsonl(p)]


def register_tables(builders_and_reasons: dict, read) -> None:
    """Register each table's builder applied to what `read(inputs)` gives, with the reader's reason
    when the table is empty or partial: {name: (build, reason)}, `reason` one of
    aura_eval.analyze.reasons' functions, taking the builder's arguments and the table."""
    for name, (build, reason) in builders_and_reasons.items():
        def run(inputs, settings, build=build, reason=reason):
            args = read(inputs)
            return reasons.attach(reason, build(*args), *args)
        builder(name)(run)


def rows_by_stem(paths) -> dict:
    """{file name without .jsonl: its rows}: the rows of one file per run or agent."""
    return {Path(p).stem: read_jsonl(p) for p in paths}
