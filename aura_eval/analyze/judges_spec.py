"""The tables of the judges' reliability, as declared (judges.py builds them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import LINKED_FORMATS, table

TABLES = (
    table("five_judge_panel", ["five_judge"],
          "Per calibration model: items on which the five-judge panel reached a plurality, and a unanimous vote, "
          "per axis", formats=LINKED_FORMATS),
    table("judge_consistency", ["repeats"],
          "Table 25: per panel judge and axis, % of calibration items given the same label in every repeated run",
          formats=LINKED_FORMATS),
    table("table21_judge_accuracy", ["samples", "five_judge", "human"],
          "Table 21: per validation judge, % of final audit samples (a human final label) where its label "
          "matches that reference, per axis and overall", formats=LINKED_FORMATS),
    table("table22_accuracy_by_consensus", ["samples", "five_judge", "human"],
          "Table 22: per validation judge and five-judge plurality stratum of the final audit samples (a human "
          "final label), % matching that reference", formats=LINKED_FORMATS,
          headers={"samples": "Samples in stratum"}),
    table("table23_ensembles", ["samples", "five_judge", "human"],
          "Table 23: the five judges and every three-of-five ensemble over the final audit samples (a human "
          "final label): Np (a plurality), Nu (unanimous), T (ties), and accuracy on Np against that reference; "
          "the panel in use is ticked", config=("roles",), formats=LINKED_FORMATS,
          headers={"accuracy": "Acc. (on Np)"}),
    table("table24_vendor_swap", ["vendor_swap", "dataset"],
          "Table 24: per model sharing a vendor with a panel judge, Safe % under the original panel and with that "
          "judge replaced, over items resolved under both, and the difference with a 95% interval",
          formats=LINKED_FORMATS,
          headers={"items": "Sample", "difference": "Diff. (orig. − repl.) [95% CI]"}),
)
