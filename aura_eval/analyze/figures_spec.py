"""The figures of the seeds and the analysis frame, as declared (figures.py draws them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import FIG8_MIN_N, figure

FIGURES = (
    figure("trajectory_length_by_domain", ["seeds"], "Steps per trajectory by domain and R-Judge label"),
    figure("fig4_unsafe_by_detection", ["frame"],
           "Figure 4: NSP and SP unsafe rates, detection levels and unsafe rate by detection level"),
    figure("fig5_action_types", ["frame"], "Figure 5: action types and their unsafe share, per model, NSP and SP"),
    figure("fig6_unsafe_by_dimension",
           ["frame"], "Figure 6: unsafe rate per dimension, NSP and SP, with the model mean"),
    figure("fig7_detection_levels", ["frame"], "Figure 7: detection levels"),
    figure("fig8_detection_by_action", ["frame"],
           "Figure 8: NSP unsafe rate per detection × action type, per model; a cell with fewer than "
           f"{FIG8_MIN_N} rows shows only its n"),
)
