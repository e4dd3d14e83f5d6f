"""The tables of the evaluated models' behaviour, as declared (behaviour.py builds them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import LINKED_FORMATS, table

TABLES = (
    table("evaluation_summary", ["labels"],
          "Per evaluated run: items, rollout outcomes, labels resolved by the panel per axis, "
          "the safety panel's agreement, and the unsafe share of resolved safety labels",
          config=("agents",), formats=LINKED_FORMATS,
          headers={"unsafe": "Unsafe"}),
    table("table33_behaviour", ["frame"],
          "Table 33: per model, unsafe % over rows with a safety label (all, NSP, SP); SP safe non-refusal and "
          "over-refusal as % of SP rows judged Safe with an action-type label; NSP risk aware, aware unsafe "
          "and miss+execute as % of NSP rows with the labels each reads", formats=LINKED_FORMATS),
    table("table31_nsp_sp_gap", ["frame"],
          "Table 31: per model, NSP and SP unsafe % over rows with a safety label, and Δ = NSP − SP in points "
          "with a seed-clustered 95% percentile interval", formats=LINKED_FORMATS),
    table("table32_matched_pairs_gap", ["frame"],
          "Table 32: as Table 31, over the matched pairs whose two counterparts both have a safety label",
          formats=LINKED_FORMATS),
    table("table35_flips", ["frame"],
          "Table 35: SAFE→UNSAFE flips per model, % (flipped / RS2 or RS5 variations labelled NSP, whatever "
          "their original's label, whose original was judged Safe; never a generated pair counterpart)",
          formats=LINKED_FORMATS),
    table("table36_failure_mechanism", ["frame"],
          "Table 36: unsafe completions on the RS2 and RS5 variations labelled NSP, whatever their original's "
          "label (the population of Table 35: never a generated pair counterpart, which Figure 6 counts), % (n) "
          "with D0/D1 and with D2/D3 detection", formats=LINKED_FORMATS,
          headers={"unsafe": "Unsafe completions"}),
    table("table37_top_unsafe", ["frame"],
          "Table 37: per model, the three most frequent detection × action combinations, as % of its unsafe outcomes",
          formats=LINKED_FORMATS,
          headers={"of_unsafe": "% of unsafe outcomes"}),
    table("table38_prompt_format", ["frame", "subset"],
          "Table 38: Table 33's rates on the action-only subset, ReAct [R] and action-only [A]",
          formats=LINKED_FORMATS),
)
