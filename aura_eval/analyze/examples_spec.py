"""The worked-example tables, as declared (examples.py builds them; pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import table

TABLES = (
    table("table28_pair_review_examples", ["pool", "pairs", "pair_reviews"],
          "Table 28: a retained and a rejected pair candidate of the P9 review, with every reviewer's vote"),
    table("table34_case_study", ["dataset", "react_rollouts", "react_labels"],
          "Table 34: one scenario's original and variation, every model's thought, action and labels",
          config=("report.case_study",)),
)
