"""Figure 1, the construction pipeline (pipeline_figure.py draws it).

A declaration gives a table's or figure's inputs, caption, formats, config keys and headers. This
module imports only the vocabulary, so Snakemake's parse plans every job without pandas or
matplotlib (aura_eval.artefact_registry collects the declarations)."""

from aura_eval.vocab import figure

FIGURES = (
    figure("fig1_construction_pipeline", ["seeds", "funnel"],
           "Figure 1: the construction pipeline with this run's count after every step"),
)
