"""Figures: each written as PNG and SVG, byte-stable across reruns."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from aura_eval.seeds import DOMAINS  # noqa: E402

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
