"""Figure 2, the running example (running_example.py draws it).

A declaration gives a table's or figure's inputs, caption, formats, config keys and headers. This
module imports only the vocabulary, so Snakemake's parse plans every job without pandas or
matplotlib (aura_eval.artefact_registry collects the declarations)."""

from aura_eval.vocab import RUNNING_EXAMPLE, figure

FIGURES = (
    figure(RUNNING_EXAMPLE, ["seeds", "tags", "prefixes", "dataset", "react_rollouts", "react_labels", "taxonomy"],
           "Figure 2: the running example, one record of this run: its instruction and steps with the risk trigger "
           "and execution point, its two prefixes, a variation, its No-Safe-Path and Safe-Path versions and one "
           "model's continuation with the panel's labels",
           formats=("png", "svg", "json"), config=("report",)),
)
