"""The action-only subset (paper J.4) of the evaluation items (results/dataset/aura_eval.jsonl,
written by aura_eval.construct.release)."""

from __future__ import annotations

from aura_eval.util.jsonl import read_jsonl, write_jsonl
from aura_eval.util.sampling import stratified_sample


def subset_items(items: list[dict], n: int) -> list[dict]:
    """The action-only subset (J.4): balanced NSP/SP, proportional over dimensions."""
    return stratified_sample(items, n, balance="pair_label", strata="dimension", key="item_id", salt="action-only")


def action_only_subset(items_path, out_path, n: int) -> list[dict]:
    rows = subset_items(read_jsonl(items_path), n)
    write_jsonl(out_path, rows, key="item_id")
    return rows
