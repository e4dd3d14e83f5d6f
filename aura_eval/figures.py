"""Figures: each written as PNG and SVG, byte-stable across reruns."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from aura_eval.analysis import read_frame  # noqa: E402
from aura_eval.jsonl import read_jsonl  # noqa: E402
from aura_eval import vocab  # noqa: E402
from aura_eval.vocab import DOMAINS, NSP, REACT, SP, builder  # noqa: E402

plt.rcParams["svg.hashsalt"] = "aura-eval"  # fixed ids in SVG output
LABEL_COLOURS = {"unsafe": "#c0392b", "safe": "#2e86c1"}


def save(fig, png, svg) -> None:
    """Write both formats without timestamps, so a rerun is byte-identical."""
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(fig)


def no_data(ax, message="no data in this run") -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def trajectory_length_by_domain(seeds: list[dict], png, svg) -> None:
    """Steps per seed trajectory, one column of points per domain, coloured by R-Judge label."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    if not seeds:
        no_data(ax)
        return save(fig, png, svg)
    for x, domain in enumerate(DOMAINS):
        rows = [s for s in seeds if s["domain"] == domain]
        lengths = sorted(s["n_steps"] for s in rows)
        if lengths:
            ax.boxplot([lengths], positions=[x], widths=0.5, showfliers=False,
                       medianprops={"color": "black"})
        for offset, label in ((-0.12, "unsafe"), (0.12, "safe")):
            ys = [s["n_steps"] for s in rows if s["label"] == label]
            ax.scatter([x + offset] * len(ys), ys, s=14, alpha=0.7, color=LABEL_COLOURS[label],
                       label=label if x == 0 else None)
    ax.set_xticks(range(len(DOMAINS)), [f"{d}\n(n={sum(s['domain'] == d for s in seeds)})" for d in DOMAINS])
    ax.set_ylabel("steps in the trajectory")
    ax.set_title("Trajectory length by domain")
    ax.legend(title="R-Judge label", frameon=False)
    fig.tight_layout()
    save(fig, png, svg)


# Axis categories as lists, the form matplotlib's categorical axes take.
DETECTION, ACTION_TYPES, DIMENSIONS = list(vocab.DETECTION_LEVELS), list(vocab.ACTION_TYPES), list(vocab.DIMENSIONS)


def _react(df):
    return df[df["format"] == REACT]


def unsafe_by_detection(df, png, svg) -> None:
    """Figure 4: unsafe rate per detection level, NSP and SP panels, one line per model."""
    df = _react(df)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), sharey=True)
    for ax, label in zip(axes, (NSP, SP)):
        sub = df[(df["pair_label"] == label) & df["safety"].notna() & df["detection"].notna()]
        if sub.empty:
            no_data(ax, f"no resolved {label} rows")
            continue
        for model, g in sub.groupby("model", sort=True):
            rates = [100 * g.loc[g["detection"] == d, "unsafe"].mean() if (g["detection"] == d).any() else None
                     for d in DETECTION]
            ax.plot(DETECTION, [r if r is not None else float("nan") for r in rates], marker="o", label=model)
        ax.set_title(label)
        ax.set_ylim(0, 100)
        ax.set_xlabel("detection level")
    axes[0].set_ylabel("unsafe actions (%)")
    handles, labels = axes[0].get_legend_handles_labels() if axes[0].has_data() else axes[1].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False, fontsize=7)
        fig.subplots_adjust(bottom=0.3)
    save(fig, png, svg)


def action_types(df, png, svg) -> None:
    """Figure 5: (a) action-type distribution per model and pair label, (b) safe/unsafe split per type."""
    df = _react(df)
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(9, 3.6))
    sub = df[df["action_type"].notna()]
    if sub.empty:
        no_data(ax_a)
        no_data(ax_b)
        return save(fig, png, svg)
    groups = sorted(sub.groupby(["model", "pair_label"], dropna=False).groups.keys(), key=str)
    bottoms = [0.0] * len(groups)
    for t in ACTION_TYPES:
        shares = []
        for model, label in groups:
            g = sub[(sub["model"] == model) & ((sub["pair_label"] == label) if label == label and label is not None
                                               else sub["pair_label"].isna())]
            shares.append(100 * (g["action_type"] == t).mean())
        ax_a.bar(range(len(groups)), shares, bottom=bottoms, label=t)
        bottoms = [b + s for b, s in zip(bottoms, shares)]
    ax_a.set_xticks(range(len(groups)), [f"{m}\n{lab if isinstance(lab, str) else 'unlabelled'}"
                                         for m, lab in groups], fontsize=6)
    ax_a.set_ylabel("share of actions (%)")
    ax_a.set_title("(a) action types")
    ax_a.legend(fontsize=6, frameon=False)
    judged = sub[sub["safety"].notna()]
    safe = [int(((judged["action_type"] == t) & (judged["safety"] == "Safe")).sum()) for t in ACTION_TYPES]
    unsafe = [int(((judged["action_type"] == t) & (judged["safety"] == "Unsafe")).sum()) for t in ACTION_TYPES]
    ax_b.bar(ACTION_TYPES, safe, color=LABEL_COLOURS["safe"], label="Safe")
    ax_b.bar(ACTION_TYPES, unsafe, bottom=safe, color=LABEL_COLOURS["unsafe"], label="Unsafe")
    ax_b.set_title("(b) safe / unsafe per type")
    ax_b.set_ylabel("actions")
    ax_b.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    save(fig, png, svg)


def _heatmap(ax, matrix, rows, cols, vmax=100):
    import numpy as np

    data = np.array(matrix, dtype=float)
    image = ax.imshow(np.ma.masked_invalid(data), vmin=0, vmax=vmax, cmap="Reds", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    for i in range(len(rows)):
        for j in range(len(cols)):
            if data[i, j] == data[i, j]:
                ax.text(j, i, f"{data[i, j]:.0f}", ha="center", va="center", fontsize=6)
    return image


def unsafe_by_dimension(df, png, svg) -> None:
    """Figure 6: unsafe rate per dimension (originals, RS1-RS6, SD1-SD5) and model."""
    df = _react(df)
    sub = df[df["safety"].notna()]
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.4 * max(1, sub["model"].nunique())))
    if sub.empty:
        no_data(ax)
        return save(fig, png, svg)
    models = sorted(sub["model"].unique())
    matrix = [[100 * sub[(sub["model"] == m) & (sub["dimension"] == d)]["unsafe"].mean()
               if ((sub["model"] == m) & (sub["dimension"] == d)).any() else float("nan") for d in DIMENSIONS]
              for m in models]
    fig.colorbar(_heatmap(ax, matrix, models, DIMENSIONS), ax=ax, label="unsafe (%)")
    ax.set_title("Unsafe actions per dimension (empty: no items)")
    fig.tight_layout()
    save(fig, png, svg)


def detection_levels(df, png, svg) -> None:
    """Figure 7: distribution of detection levels per model and pair label."""
    df = _react(df)
    sub = df[df["detection"].notna()]
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    if sub.empty:
        no_data(ax)
        return save(fig, png, svg)
    keys = sorted({(m, lab if isinstance(lab, str) else "unlabelled")
                   for m, lab in zip(sub["model"], sub["pair_label"])})
    bottoms = [0.0] * len(keys)
    for level in DETECTION:
        shares = []
        for model, label in keys:
            g = sub[(sub["model"] == model) & (sub["pair_label"].fillna("unlabelled") == label)]
            shares.append(100 * (g["detection"] == level).mean())
        ax.bar(range(len(keys)), shares, bottom=bottoms, label=level)
        bottoms = [b + s for b, s in zip(bottoms, shares)]
    ax.set_xticks(range(len(keys)), [f"{m}\n{lab}" for m, lab in keys], fontsize=6)
    ax.set_ylabel("share of thoughts (%)")
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    save(fig, png, svg)


def detection_by_action(df, png, svg) -> None:
    """Figure 8: unsafe rate for each detection × action-type combination (all ReAct runs)."""
    df = _react(df)
    sub = df[df["safety"].notna() & df["detection"].notna() & df["action_type"].notna()]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if sub.empty:
        no_data(ax)
        return save(fig, png, svg)
    matrix = [[100 * sub[(sub["detection"] == d) & (sub["action_type"] == a)]["unsafe"].mean()
               if ((sub["detection"] == d) & (sub["action_type"] == a)).any() else float("nan")
               for a in ACTION_TYPES] for d in DETECTION]
    fig.colorbar(_heatmap(ax, matrix, DETECTION, ACTION_TYPES), ax=ax, label="unsafe (%)")
    ax.set_xlabel("action type")
    ax.set_ylabel("detection")
    fig.tight_layout()
    save(fig, png, svg)


# -- the registered figures (aura_eval.vocab.FIGURES) ------------------------------------

@builder("trajectory_length_by_domain")
def _trajectory_length(inputs, png, svg):
    trajectory_length_by_domain(read_jsonl(inputs["seeds"]), png, svg)


def _from_frame(draw):
    return lambda inputs, png, svg: draw(read_frame(inputs["frame"]), png, svg)


for _name, _draw in {"fig4_unsafe_by_detection": unsafe_by_detection, "fig5_action_types": action_types,
                     "fig6_unsafe_by_dimension": unsafe_by_dimension, "fig7_detection_levels": detection_levels,
                     "fig8_detection_by_action": detection_by_action}.items():
    builder(_name)(_from_frame(_draw))
