"""AURA-Eval: controlled agent-safety evaluation built from R-Judge trajectories.

The package mirrors the pipeline: `seeds` (select R-Judge records), `tagging`
(P1 step tags and truncation), `llm` (the one door to every model), `prompts`
(versioned prompt files), `report` (tables and figures for the report).
"""

__version__ = "0.1.0"
