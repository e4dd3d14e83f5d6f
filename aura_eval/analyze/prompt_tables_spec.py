"""The tables drawn from the prompt files, as declared (prompt_tables.py builds them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import table

TABLES = (
    table("table1_risk_mechanisms", ["taxonomy"],
          "Table 1: the risk mechanisms RS1-RS6 as prompts/taxonomy.yaml defines them",
          not_items="it defines the risk mechanisms"),
    table("table2_evaluation_taxonomy", ["judge_prompts"],
          "Table 2: the evaluation taxonomy, each label's definition as its judge prompt states it",
          not_items="it defines the labels"),
    table("prompt_templates", ["prompt_templates"],
          "Tables 4-17: every prompt template, with its version and answer schema", formats=("md",)),
)
