"""The headline table and figure, as declared (headline.py builds them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import figure, table

TABLES = (
    table("headline_summary", ["frame", "paper_numbers"],
          "Headline: each range or value the paper's text states for its main results, beside the lowest and "
          "highest of this run's models in that group (how many fall in the paper's range) and the group pooled, "
          "with its seed-clustered 95% interval", not_items="it compares ranges; Tables 33 and 35 link their rows",
          headers={"paper": "Paper (its text)", "ci": "Pooled 95% CI (seed-clustered)"}),
)

FIGURES = (
    figure("headline_comparison", ["frame", "paper_numbers"],
           "Headline: the paper's stated ranges and values beside each of this run's models with its "
           "seed-clustered 95% interval"),
)
