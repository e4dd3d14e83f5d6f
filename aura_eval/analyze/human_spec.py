"""The tables of the human audit, as declared (human.py builds them; pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import LINKED_FORMATS, table

TABLES = (
    table("table3_human_reliability", ["human"],
          "Table 3: per axis, final audit samples (N: every assigned annotator labelled it, or it was "
          "adjudicated), human agreement (P_o, α), samples with a panel label (Np), and judge–human agreement on "
          "Np and on its unanimous subset; the note gives the distinct scenarios and the incomplete samples",
          formats=LINKED_FORMATS,
          headers={"n": "N (retained)", "accuracy": "Acc. (on Np)", "unanimous_accuracy": "Unan."}),
    table("table18_retention", ["human"],
          "Table 18: audit samples per axis: sampled; annotated by every assigned annotator; incomplete (not, "
          "and not adjudicated); retained (a final label); dropped; unresolved ties. Sampled = retained + "
          "dropped + unresolved + incomplete", formats=LINKED_FORMATS,
          headers={"unresolved": "Unresolved ties"}),
    table("table19_panel_strata", ["samples", "five_judge", "human"],
          "Table 19: final audit samples (a human final label: Table 18's retained) per axis by the five-judge "
          "panel's agreement", formats=LINKED_FORMATS,
          headers={"unanimous": "Unanimous", "total": "Total (final)"}),
    table("table20_human_agreement", ["human"],
          "Table 20: retained audit samples per axis by the annotators' agreement once all assigned annotators "
          "labelled them, with P_o and α (a tie is retained only once adjudicated, so Tie counts adjudicated "
          "ties; the last count: samples adjudicated before every annotator labelled them)", formats=LINKED_FORMATS,
          headers={"incomplete": "Adjudicated before all labelled"}),
)
