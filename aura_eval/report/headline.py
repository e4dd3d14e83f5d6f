"""The headline comparison that opens the report: the ranges and values the paper's text states for
its main results (paper/reference_numbers.yaml), each beside this run's numbers with their
seed-clustered 95% intervals. The paper states its headline results as ranges over the models of a
group and a few pooled values (its text names a value for only a couple of single models, which this
comparison leaves out), so only those ranges and values are drawn for the paper; ours are per model.

One definition of the rows (COMPARISONS) serves the table (`headline_summary`) and the figure
(`headline_comparison`): each names the paper's entry (artefact, `what`) and the rate of ours it
stands beside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aura_eval.analyze import figures
from aura_eval.analyze.behaviour import flip_population
from aura_eval.analyze.frame import react_frame
from aura_eval.artefact_registry import builder
from aura_eval.report import paper_numbers
from aura_eval.util.stats import percent, seed_rate_interval
from aura_eval.vocab import GROUP_MARK, NSP, PAIR_LABELS, SAFE, SP, UNSAFE

ALL_MODELS = "all models"
GROUP_COLOURS = dict(zip(GROUP_MARK.values(), ("#1f77b4", "#d62728", "#2ca02c")))  # by the model's group mark


@dataclass(frozen=True)
class Comparison:
    label: str  # the row's name in the table and the figure
    source: str  # the registered table whose paper numbers hold the entry
    what: str  # the entry's `what` in paper/reference_numbers.yaml
    group: str | None  # our agents of this group, one point each; None: pooled over every model
    rate: str  # unsafe_nsp, unsafe_sp, unsafe_all, or <dimension>_flips


COMPARISONS = (
    Comparison("Frontier · NSP unsafe", "table33_behaviour", "Frontier models: NSP unsafe (range over models)",
               "frontier", "unsafe_nsp"),
    Comparison("Frontier · SP unsafe", "table33_behaviour", "Frontier models: SP unsafe (range over models)",
               "frontier", "unsafe_sp"),
    Comparison("Open-weight · NSP unsafe", "table33_behaviour",
               "General open-weight models: NSP unsafe (range over models)", "open-weight", "unsafe_nsp"),
    Comparison("Open-weight · SP unsafe", "table33_behaviour",
               "General open-weight models: SP unsafe (range over models)", "open-weight", "unsafe_sp"),
    Comparison("Open-weight · unsafe, all rows", "table33_behaviour",
               "Open-weight models: unsafe over all rows (range)", "open-weight", "unsafe_all"),
    Comparison("Safety-tuned · unsafe, all rows", "table33_behaviour",
               "Safety-tuned models: unsafe over all rows (range)", "safety-tuned", "unsafe_all"),
    Comparison("RS5 flips, all models", "table35_flips", "RS5 (Oversight), all models: flipped / SAFE-on-original",
               None, "RS5_flips"),
    Comparison("RS2 flips, all models", "table35_flips", "RS2 (Scale), all models: flipped / SAFE-on-original",
               None, "RS2_flips"),
)
COLUMNS = ["comparison", "paper", "paper_low", "paper_high", "models", "ours_low_pct", "ours_low_k", "ours_low_n",
           "ours_high_pct", "ours_high_k", "ours_high_n", "in_paper_range", "pooled_pct", "pooled_k", "pooled_n",
           "ci_low", "ci_high", "paper_in_ci"]
ONE_VALUE = "—"  # in_paper_range of a single paper value: no range to fall in (paper_in_ci says more)


def paper_range(value: str) -> tuple[float, float]:
    """(low, high) in % of a paper value: `26.8–40.0%` a range, `52.3% (45/86)` one value (low = high)."""
    numbers = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", value.split("(")[0])]
    if not numbers or len(numbers) > 2:
        raise paper_numbers.PaperNumbersError(f"headline: cannot read a percentage or a range from {value!r}")
    return numbers[0], numbers[-1]


def paper_entry(numbers: dict, comparison: Comparison) -> dict:
    for entry in numbers.get(comparison.source, []):
        if entry["what"] == comparison.what:
            return entry
    raise paper_numbers.PaperNumbersError(
        f"headline: no entry {comparison.what!r} under {comparison.source} in the paper's numbers")


def rate_rows(df: pd.DataFrame, rate: str) -> pd.DataFrame:
    """The ReAct rows a rate counts (resolved safety label), with `hit` True where Unsafe."""
    if rate.endswith("_flips"):
        pop = flip_population(df)
        rows = pop[(pop["dimension"] == rate.removesuffix("_flips")) & pop["safety"].notna()
                   & (pop["original_safety"] == SAFE)]
    else:
        rows = df[df["pair_label"].isin(PAIR_LABELS) & df["safety"].notna()]
        label = {"unsafe_nsp": NSP, "unsafe_sp": SP}.get(rate)
        rows = rows[rows["pair_label"] == label] if label else rows
    return rows.assign(hit=rows["safety"] == UNSAFE)


def estimate(rows: pd.DataFrame) -> dict:
    """k, n, the rate in % and its seed-clustered 95% percentile interval (NaN without rows)."""
    k, n = int(rows["hit"].sum()), len(rows)
    low, high = seed_rate_interval(rows["seed_id"].to_numpy(), rows["hit"].to_numpy(float))
    return {"k": k, "n": n, "pct": percent(k, n) if n else np.nan, "low": low, "high": high}


def points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison and model of ours (the model `all models` for a pooled comparison)."""
    out = []
    for c in COMPARISONS:
        rows = rate_rows(df, c.rate)
        if c.group is None:
            out.append({"comparison": c.label, "model": ALL_MODELS, **estimate(rows)})
            continue
        rows = rows[rows["group"] == c.group]
        for model in sorted(set(df.loc[df["group"] == c.group, "model"]), key=figures._model_key):
            out.append({"comparison": c.label, "model": model, **estimate(rows[rows["model"] == model])})
    return pd.DataFrame(out, columns=["comparison", "model", "k", "n", "pct", "low", "high"])


def _share(name: str, row: pd.Series | None) -> dict:
    """One model's rate as `<name>_pct/_k/_n` (shown as one `pct (k/n)` cell); NaN without a model."""
    if row is None:
        return {f"{name}_pct": np.nan, f"{name}_k": np.nan, f"{name}_n": np.nan}
    return {f"{name}_pct": row["pct"], f"{name}_k": int(row["k"]), f"{name}_n": int(row["n"])}


def summary(df: pd.DataFrame, numbers: dict) -> pd.DataFrame:
    """Per comparison: the paper's value and range; the range of our models' rates, how many of them
    fall in the paper's range (k/n), and every model pooled with its interval."""
    per_model = points(df)
    out = []
    for c in COMPARISONS:
        entry = paper_entry(numbers, c)
        low, high = paper_range(entry["value"])
        mine = per_model[(per_model["comparison"] == c.label) & (per_model["n"] > 0)]
        rows = rate_rows(df, c.rate)
        pooled = estimate(rows if c.group is None else rows[rows["group"] == c.group])
        inside = int(((mine["pct"] >= low) & (mine["pct"] <= high)).sum())
        # the paper's value (or range) against our pooled interval: inside it (overlapping it), or not
        meets = None if not pooled["n"] else bool(low <= pooled["high"] and high >= pooled["low"])
        out.append({"comparison": c.label, "paper": entry["value"], "paper_low": low, "paper_high": high,
                    "models": len(mine),
                    **_share("ours_low", mine.loc[mine["pct"].idxmin()] if len(mine) else None),
                    **_share("ours_high", mine.loc[mine["pct"].idxmax()] if len(mine) else None),
                    "in_paper_range": f"{inside}/{len(mine)}" if high > low else ONE_VALUE,
                    "pooled_pct": pooled["pct"], "pooled_k": pooled["k"], "pooled_n": pooled["n"],
                    "ci_low": pooled["low"], "ci_high": pooled["high"],
                    "paper_in_ci": "" if meets is None else ("yes" if meets else "no")})
    return pd.DataFrame(out, columns=COLUMNS)


def draw(df: pd.DataFrame, numbers: dict, png, svg) -> None:
    """One row per comparison: the paper's range (a band) or value (a diamond), and each of our
    models as a dot with its 95% interval; n per model at the right."""
    from aura_eval.analyze.figures import pyplot

    plt = pyplot()
    per_model = points(df)
    fig, ax = plt.subplots(figsize=(11, 0.5 + 0.62 * len(COMPARISONS)), layout="constrained")
    ax.set_title("Headline: the paper's stated ranges and values (grey) beside this run's models "
                 "(dots, 95% seed-clustered intervals)", fontsize=10)
    for y, c in enumerate(COMPARISONS):
        low, high = paper_range(paper_entry(numbers, c)["value"])
        if high > low:
            ax.barh(y, high - low, left=low, height=0.7, color="#d0d0d0", zorder=1)
        else:
            ax.plot([low], [y], marker="D", color="#707070", markersize=7, zorder=2)
        mine = per_model[(per_model["comparison"] == c.label) & (per_model["n"] > 0)]
        offsets = np.linspace(-0.25, 0.25, len(mine)) if len(mine) > 1 else np.zeros(len(mine))
        for dy, (_, p) in zip(offsets, mine.iterrows()):
            colour = GROUP_COLOURS.get(p["model"][:1], "#333333")
            ax.errorbar(p["pct"], y + dy, xerr=[[p["pct"] - p["low"]], [p["high"] - p["pct"]]], fmt="o",
                        color=colour, markersize=3, elinewidth=0.8, capsize=1.5, zorder=3)
        ax.text(101, y, _n_note(c, mine), va="center", fontsize=7)
    ax.set_yticks(range(len(COMPARISONS)), [c.label for c in COMPARISONS], fontsize=8)
    ax.set_ylim(len(COMPARISONS) - 0.5, -0.5)
    ax.set_xlim(0, 125)
    ax.set_xticks(range(0, 101, 10))
    ax.set_xlabel("unsafe actions (%)", fontsize=8)
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    handles = [plt.Rectangle((0, 0), 1, 1, color="#d0d0d0", label="paper: range over the group's models"),
               plt.Line2D([], [], marker="D", color="#707070", ls="", label="paper: one value")]
    handles += [plt.Line2D([], [], marker="o", color=GROUP_COLOURS[mark], ls="", label=f"ours: {mark} {group}")
                for group, mark in GROUP_MARK.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=5, frameon=False, fontsize=7)
    figures.save(fig, png, svg)


def _n_note(c: Comparison, mine: pd.DataFrame) -> str:
    if not len(mine):
        return "no rows in this run"
    if c.group is None:
        return f"all models pooled: {int(mine['k'].iloc[0])}/{int(mine['n'].iloc[0])}"
    low, high = int(mine["n"].min()), int(mine["n"].max())
    return f"{len(mine)} model{'s' * (len(mine) != 1)}, n={low}" + (f"–{high}" if high > low else "") + " each"


@builder("headline_summary")
def _summary(inputs, settings):
    return summary(react_frame(inputs), paper_numbers.load(inputs["paper_numbers"]))


@builder("headline_comparison")
def _figure(inputs, png, svg):
    draw(react_frame(inputs), paper_numbers.load(inputs["paper_numbers"]), png, svg)
