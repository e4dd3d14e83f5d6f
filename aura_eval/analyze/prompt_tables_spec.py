"""The tables drawn from the prompt files (prompt_tables.py builds them).

A declaration gives a table's or figure's inputs, caption, formats, config keys and headers. This
module imports only the vocabulary, so Snakemake's parse plans every job without pandas or
matplotlib (aura_eval.artefact_registry collects the declarations)."""

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
