"""The construction tables, as declared (construction.py builds them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import LINKED_FORMATS, LOSS_STAGES, table

# each count per dimension under the funnel's name for it (construction_funnel's rows)
COUNTED_AS = {s.column: s.passed[:1].upper() + s.passed[1:] for s in LOSS_STAGES.values() if s.column}

TABLES = (
    table("seed_composition", ["seeds"],
          "Seeds (R-Judge records with attack_type unintended) per domain and R-Judge label, "
          "beside the paper's counts",
          not_items="it counts R-Judge seeds, before any item exists; results/seeds/seeds.jsonl lists them",
          headers={"unsafe": "Unsafe", "safe": "Safe"}),
    table("prefix_counts", ["tags", "prefixes"],
          "Seeds by tag outcome, and prefixes per decision point, beside the paper's counts",
          not_items="it counts seeds and prefixes, before any item exists; results/prefixes/ lists them"),
    table("construction_funnel", ["funnel"],
          "Rows left after each construction stage, beside the paper's counts",
          not_items=("it counts construction candidates; the audit index lists every one lost from variation "
                     "generation on with its stage and reason (status: excluded)")),
    table("construction_losses", ["funnel"],
          "Rows lost between construction stages, by stage and reason",
          not_items=("it counts construction candidates; the audit index lists every one lost from variation "
                     "generation on under the same stage and reason (filter by exclusion stage and reason)")),
    table("variations_by_dimension", ["funnel"],
          "Per dimension: candidates, parseable rewrites, gate passes, kept variations and released rows",
          not_items=("it counts construction candidates; the audit index lists every excluded one, filterable "
                     "by dimension, exclusion stage and reason"),
          headers=COUNTED_AS),
    table("table29_composition", ["dataset"], "Table 29: released rows by kind, beside the paper's counts",
          formats=LINKED_FORMATS),
)
