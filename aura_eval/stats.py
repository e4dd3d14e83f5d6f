"""Statistics shared by the evaluation and the report (paper §5, §6, F, I.1)."""

from __future__ import annotations

from collections import Counter

UNANIMOUS, MAJORITY, TIED = "unanimous", "majority", "tied"


def vote(labels: list, rule: str = "majority"):
    """The panel's label, or None.

    rule "majority": the label held by more than half of the judges; "plurality":
    the single most common label (a tie for first place gives None). An unparseable
    vote (None) is a vote for nobody but still counts in the number of judges.
    """
    if rule not in ("majority", "plurality"):
        raise ValueError(f"rule must be 'majority' or 'plurality', got {rule!r}")
    counts = Counter(label for label in labels if label is not None).most_common()
    if not counts:
        return None
    top, n_top = counts[0]
    if rule == "majority":
        return top if n_top > len(labels) / 2 else None
    return top if len(counts) == 1 or counts[1][1] < n_top else None


def consensus(labels: list) -> str:
    """unanimous (every judge gave the same label), majority (a label held by more
    than half, not all) or tied (no majority); None votes count as disagreement."""
    if labels and labels[0] is not None and all(label == labels[0] for label in labels):
        return UNANIMOUS
    return MAJORITY if vote(labels, "majority") is not None else TIED
