"""Figure 1: the construction pipeline, one box per step in the order the workflow runs them,
each with the rule(s) and prompt(s) behind it and this run's counts after it (from
results/construct/funnel.json and the seed file), and the losses of each step beside it.

`pipeline_steps` gives the numbers (tests check them); `draw_pipeline` lays them out with
matplotlib boxes and arrows (no Graphviz).
"""

from __future__ import annotations

import json
import textwrap

from aura_eval.analyze.figures import pyplot, save
from aura_eval.artefact_registry import builder
from aura_eval.stage_registry import registry
from aura_eval.util.jsonl import read_jsonl

# (title, rules, funnel counts shown after the step, funnel loss entries of the step), in the order of
# the rules (rules/seeds.smk, prefixes.smk, construct.smk); the prompts come from the model stages' registry.
STEPS = (
    ("Seed selection", ("select_seeds",), (), ()),
    ("Step tagging and truncation", ("tag_steps", "truncate_prefixes"), ("prefixes",), ()),
    ("Dimension relevance", ("relevance",), ("relevant (prefix, dimension) pairs", "variation candidates"),
     ("relevance losses",)),
    ("Variation", ("vary",), ("parseable variations", "passed gate"),
     ("generation losses", "gate rejections")),
    ("Variation review", ("review_variations",), ("kept variations",), ("review losses",)),
    ("NSP / SP classification", ("classify",), ("classified pool", "complete labels"), ()),
    ("Pair generation", ("generate_pairs",), ("pair candidates", "parseable pairs", "passed pair checks"),
     ("pair generation losses", "pair rejections")),
    ("Pair review", ("review_pairs",), ("kept pairs",), ("pair review losses",)),
    ("Release", ("release",), ("released rows", "paired rows"), ("excluded rows",)),
)
SEEDS = "seed trajectories"


def prompt_label(prompt_id: str) -> str:
    """How the figure names a construction prompt: `p3_intensity_variation` -> `P3` (the paper's P1-P9)."""
    return prompt_id.split("_", 1)[0].upper()
SHOWN_AS = {"classified pool": "classified pool (prefixes + kept variations)"}


def pipeline_steps(funnel: dict, n_seeds: int) -> list[dict]:
    """Each step: title, rules, prompts, counts [(what, n)] and losses [(reason, n)] (nonzero)."""
    out = []
    stages = registry()
    for title, rules, counts, losses in STEPS:
        prompts = tuple(prompt_label(pid) for rule in rules if rule in stages for pid in stages[rule].prompts)
        shown = [(SEEDS, n_seeds)] if rules == ("select_seeds",) else [(key, funnel[key]) for key in counts]
        lost = [(reason, n) for key in losses for reason, n in funnel[key].items() if n]
        out.append({"title": title, "rules": rules, "prompts": prompts, "counts": shown, "losses": lost})
    return out


def draw_pipeline(steps: list[dict], png, svg) -> None:
    height = 0.95
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = pyplot().subplots(figsize=(9, 0.95 * len(steps) + 0.8))
    fig.subplots_adjust(left=0.01, right=0.99, top=1 - 0.5 / (0.95 * len(steps) + 0.8), bottom=0.01)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.1, len(steps))
    ax.axis("off")
    seeds = steps[0]["counts"][0][1]
    released = dict(steps[-1]["counts"]).get("released rows")
    fig.suptitle(f"Construction pipeline: {seeds} seed trajectories to {released} released rows", fontsize=11)
    for i, step in enumerate(steps):
        top = len(steps) - i
        y = top - 0.5
        ax.add_patch(FancyBboxPatch((0.02, y - 0.3), 0.58, 0.6, boxstyle="round,pad=0.01", facecolor="#eaf2f8",
                                    edgecolor="#2e86c1", linewidth=1))
        where = ", ".join(step["rules"]) + (f"; {', '.join(step['prompts'])}" if step["prompts"] else "")
        ax.text(0.04, y + 0.13, f"{step['title']}  ({where})", fontsize=8.5, fontweight="bold", va="center")
        counts = "   ".join(f"{SHOWN_AS.get(what, what)}: {n}" for what, n in step["counts"])
        ax.text(0.04, y - 0.12, "\n".join(textwrap.wrap(counts, 78)) or " ", fontsize=8, va="center")
        if step["losses"]:
            lost = "; ".join(f"{reason} ({n})" for reason, n in step["losses"])
            ax.add_patch(FancyArrowPatch((0.6, y), (0.64, y), arrowstyle="-|>", mutation_scale=8, color="#c0392b"))
            ax.text(0.65, y, "lost: " + "\n".join(textwrap.wrap(lost, 50)), fontsize=7.5, va="center",
                    color="#922b21")
        if i + 1 < len(steps):
            ax.add_patch(FancyArrowPatch((0.31, y - 0.31), (0.31, y - height + 0.31), arrowstyle="-|>",
                                         mutation_scale=10, color="#34495e"))
    save(fig, png, svg)


@builder("fig1_construction_pipeline")
def _fig1(inputs, png, svg):
    with open(inputs["funnel"], encoding="utf-8") as handle:
        funnel = json.load(handle)["funnel"]
    draw_pipeline(pipeline_steps(funnel, len(read_jsonl(inputs["seeds"]))), png, svg)
