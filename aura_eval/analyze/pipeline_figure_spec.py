"""Figure 1, the construction pipeline, as declared (pipeline_figure.py draws it;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import figure

FIGURES = (
    figure("fig1_construction_pipeline", ["seeds", "funnel"],
           "Figure 1: the construction pipeline with this run's count after every step"),
)
