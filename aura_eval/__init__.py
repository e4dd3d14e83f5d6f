"""AURA-Eval: controlled agent-safety evaluation built from R-Judge trajectories.

The package mirrors the pipeline (ARCHITECTURE.md): `vocab` (the one vocabulary and the
table/figure registries), `llm` (the one door to every model), `stage` (the one
model-stage runner), `seeds`, `tagging`, `construct`, `dataset`, `rollout`, `judging`,
`reliability`, `validation`, `analysis`, `run_tables`, `figures`, `render`.
"""

# The one source of the version: pyproject.toml reads it, the dataset release carries it
# (vocab.RELEASE_VERSION), and a test checks CITATION.cff and CHANGELOG.md against it.
__version__ = "0.1.0"
