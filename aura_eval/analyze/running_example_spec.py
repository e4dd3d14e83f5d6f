"""Figure 2, the running example, as declared (running_example.py draws it;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import RUNNING_EXAMPLE, figure

FIGURES = (
    figure(RUNNING_EXAMPLE, ["seeds", "tags", "prefixes", "dataset", "react_rollouts", "react_labels", "taxonomy"],
           "Figure 2: the running example, one record of this run: its instruction and steps with the risk trigger "
           "and execution point, its two prefixes, a variation, its No-Safe-Path and Safe-Path versions and one "
           "model's continuation with the panel's labels",
           formats=("png", "svg", "json"), config=("report",)),
)
