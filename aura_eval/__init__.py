"""AURA-Eval: controlled agent-safety evaluation built from R-Judge trajectories.

The package mirrors the pipeline (ARCHITECTURE.md, section 2): `vocab` (the shared names),
`artefact_registry` (the tables and figures, each declared beside its builder), `llm` (the one door
to every model), `simulator`, the model stages' runner and registry (`stage_runner`,
`stage_registry`), `workflow` (what serves the Snakefile: its config, job plan and start checks),
then `construct`, `evaluate`, `analyze`, `report` and `tools` in the order their files flow.
"""

# The one source of the version: pyproject.toml reads it, the dataset release carries it
# (vocab.RELEASE_VERSION), and a test checks CITATION.cff and CHANGELOG.md against it.
__version__ = "0.1.0"
