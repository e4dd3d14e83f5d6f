"""AURA-Eval: controlled agent-safety evaluation built from R-Judge trajectories.

The package mirrors the pipeline (ARCHITECTURE.md): `vocab` (the one vocabulary and the
table/figure registries), `llm` (the one door to every model), `stage` (the one
model-stage runner), `seeds`, `tagging`, `construct`, `dataset`, `rollout`, `judging`,
`reliability`, `validation`, `analysis`, `run_tables`, `figures`, `render`.
"""

__version__ = "0.1.0"
