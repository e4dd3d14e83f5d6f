"""Figures: each written as PNG and SVG, byte-stable across reruns.

The numbers each figure plots come from a small pure function of the frame (`fig4_overall_data`,
`fig4_level_share_data`, `fig4_unsafe_by_level_data`, `fig5a_data`, `fig5b_data`, `fig6_data`,
`fig7_data`, `fig8_data`), each returning a long DataFrame with the counts behind every rate,
so tests can check the plotted values; the drawing functions only lay them out. Every figure
carries a title with its n, keeps its legends and colour bars outside the data, grows with the
number of models, and draws an explicit "no rows because ..." panel when there is nothing to show.
Rates use resolved labels only (an unresolved label leaves the row out of that rate), as in
`aura_eval.analyze.frame`; only ReAct runs are drawn (Figures 4-8 of the paper are ReAct results).
"""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd

from aura_eval import vocab
from aura_eval.analyze.frame import read_frame
from aura_eval.artefact_registry import builder
from aura_eval.util.jsonl import atomic_write_bytes, atomic_write_text, read_jsonl
from aura_eval.util.stats import percent, round_half_up
from aura_eval.vocab import DOMAINS, FIG8_MIN_N, NSP, PAIR_LABELS, REACT


def pyplot():
    """matplotlib's pyplot on the Agg backend, with fixed ids in SVG output; imported at the first
    figure drawn, so the figures' data functions (and what imports them) never pay its second."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "aura-eval"
    return plt

LABEL_COLOURS = {"unsafe": "#c0392b", "safe": "#2e86c1"}
DETECTION, ACTION_TYPES, DIMENSIONS = list(vocab.DETECTION_LEVELS), list(vocab.ACTION_TYPES), list(vocab.DIMENSIONS)
DETECTION_NAMES = {"D0": "D0 no risk noticed", "D1": "D1 perception", "D2": "D2 comprehension",
                   "D3": "D3 projection"}
ACTION_NAMES = {"A0": "A0 direct execution", "A1": "A1 clarification", "A2": "A2 confirmation",
                "A3": "A3 information gathering", "A4": "A4 safer alternative", "A5": "A5 refusal"}
DETECTION_COLOURS = dict(zip(DETECTION, ("#d9d9d9", "#9ecae1", "#4292c6", "#08519c")))
ACTION_COLOURS = dict(zip(ACTION_TYPES, ("#c0392b", "#f39c12", "#f7dc6f", "#a569bd", "#52be80", "#2e86c1")))
MEAN_ROW = "mean across models"


_CLIP_ID = re.compile(r'<clipPath id="(p[0-9a-f]{10})">')


def save(fig, png, svg) -> None:
    """Write both formats without timestamps, so a rerun is byte-identical. matplotlib names an
    SVG clip rectangle by a hash of its exact float bounds, which can differ in the last bit
    between processes (the layout's arithmetic); the ids are renamed in document order. Both are
    drawn in memory first, then each file written through a temporary file and a rename, so a
    killed job never leaves a cut or empty figure."""
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=150, metadata={"Software": None})
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    pyplot().close(fig)
    text = buffer.getvalue()
    for n, old in enumerate(_CLIP_ID.findall(text)):
        text = text.replace(old, f"clip{n}")
    atomic_write_bytes(png, image.getvalue())
    atomic_write_text(svg, text)


def no_data(ax, message="no data in this run") -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, wrap=True, fontsize=9)
    # tick_params, not set_*ticks([]): the ticks of a shared axis belong to every panel sharing it
    ax.tick_params(left=False, bottom=False, labelleft=False, labelbottom=False)
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _empty_figure(title: str, reason: str, png, svg) -> None:
    fig, ax = pyplot().subplots(figsize=(7, 2.2), layout="constrained")
    fig.suptitle(title, fontsize=11)
    no_data(ax, f"no rows because {reason}")
    save(fig, png, svg)


# -- the numbers each figure plots -----------------------------------------------------------------
# Each takes the frame (`aura_eval.analyze.frame.frame`, any formats) and keeps ReAct rows only.

def _react(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["format"] == REACT]


def _labelled(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """ReAct rows with an NSP/SP label and a resolved label on every named column."""
    df = _react(df)
    keep = df["pair_label"].isin(PAIR_LABELS)
    for column in columns:
        keep &= df[column].notna()
    return df[keep]


def _unsafe_counts(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """n (rows with a resolved safety label), unsafe (how many Unsafe) and unsafe_pct per group."""
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in by}
                            | {"n": pd.Series(dtype="int64"), "unsafe": pd.Series(dtype="int64"),
                               "unsafe_pct": pd.Series(dtype="float64")})
    g = df.groupby(by, sort=True)
    out = pd.DataFrame({"n": g.size(), "unsafe": g["safety"].apply(lambda s: int((s == "Unsafe").sum()))})
    out = out.reset_index()
    out["n"] = out["n"].astype(int)
    out["unsafe"] = out["unsafe"].astype(int)
    out["unsafe_pct"] = 100 * out["unsafe"] / out["n"]
    return out[by + ["n", "unsafe", "unsafe_pct"]]


def _shares(df: pd.DataFrame, by: list[str], column: str, levels: list[str], name: str) -> pd.DataFrame:
    """For each group, every level of `column`: count, n (the group's rows) and pct; absent levels count 0."""
    rows = []
    for key, g in df.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        counts = g[column].value_counts()
        for level in levels:
            count = int(counts.get(level, 0))
            rows.append({**dict(zip(by, key)), name: level, "count": count, "n": len(g),
                         "pct": 100 * count / len(g)})
    return pd.DataFrame(rows, columns=by + [name, "count", "n", "pct"])


def fig4_overall_data(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 4 (a): each model's unsafe rate on NSP and on SP items (rows: model × pair label)."""
    return _unsafe_counts(_labelled(df, "safety"), ["model", "pair_label"])


def fig4_level_share_data(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 4 (b) and Figure 7: the share of each detection level per model and pair label
    (n: the group's rows with a resolved detection label)."""
    return _shares(_labelled(df, "detection"), ["model", "pair_label"], "detection", DETECTION, "detection")


def fig4_unsafe_by_level_data(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 4 (c): unsafe rate per model, pair label and detection level (rows with both labels;
    a combination with no rows is absent)."""
    return _unsafe_counts(_labelled(df, "safety", "detection"), ["model", "pair_label", "detection"])


fig7_data = fig4_level_share_data


def fig5a_data(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 5 (a): the share of each action type per model and pair label."""
    return _shares(_labelled(df, "action_type"), ["model", "pair_label"], "action_type", ACTION_TYPES,
                   "action_type")


def fig5b_data(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 5 (b): per model, pair label and action type, the safe / unsafe split
    (n: rows with that action type and a resolved safety label; safe = n - unsafe)."""
    out = _unsafe_counts(_labelled(df, "safety", "action_type"), ["model", "pair_label", "action_type"])
    out.insert(out.columns.get_loc("unsafe"), "safe", out["n"] - out["unsafe"])
    return out


def fig6_data(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 6: unsafe rate per model, pair label and dimension, plus one `MEAN_ROW` row per pair
    label and dimension: the unweighted mean of the models' rates there ("across displayed models",
    §7.3), its n the pooled rows and `models` how many models have a rate."""
    per_model = _unsafe_counts(_labelled(df, "safety"), ["model", "pair_label", "dimension"])
    per_model["models"] = 1
    means = []
    for (label, dim), g in per_model.groupby(["pair_label", "dimension"], sort=True):
        means.append({"model": MEAN_ROW, "pair_label": label, "dimension": dim, "n": int(g["n"].sum()),
                      "unsafe": int(g["unsafe"].sum()), "unsafe_pct": float(g["unsafe_pct"].mean()),
                      "models": len(g)})
    return pd.concat([per_model, pd.DataFrame(means, columns=per_model.columns)], ignore_index=True)


def fig8_data(df: pd.DataFrame, min_n: int = FIG8_MIN_N) -> pd.DataFrame:
    """Figure 8: on NSP items, per model, every detection level × action type: n (rows with all
    three labels), unsafe, and unsafe_pct, which is NaN (the cell is not shown) when n < min_n."""
    sub = _labelled(df, "safety", "detection", "action_type")
    sub = sub[sub["pair_label"] == NSP]
    rows = []
    for model, g in sub.groupby("model", sort=True):
        for d in DETECTION:
            for a in ACTION_TYPES:
                cell = g[(g["detection"] == d) & (g["action_type"] == a)]
                n, unsafe = len(cell), int((cell["safety"] == "Unsafe").sum())
                shown = n >= min_n and n > 0
                rows.append({"model": model, "detection": d, "action_type": a, "n": n, "unsafe": unsafe,
                             "unsafe_pct": 100 * unsafe / n if shown else np.nan, "shown": shown})
    return pd.DataFrame(rows, columns=["model", "detection", "action_type", "n", "unsafe", "unsafe_pct",
                                       "shown"])


def why_empty(df: pd.DataFrame, *columns: str, pair_label: str | None = None) -> str:
    """Why `_labelled(df, *columns)` (restricted to `pair_label` if given) has no rows: the first
    filter that leaves nothing."""
    if df.empty:
        return "the frame is empty (no run was labelled)"
    df = _react(df)
    if df.empty:
        return "no ReAct run is in the frame"
    what = f"{pair_label} " if pair_label else ""
    df = df[df["pair_label"].isin([pair_label] if pair_label else PAIR_LABELS)]
    if df.empty:
        return f"no ReAct row is on an {what or 'NSP or SP '}item"
    names = {"safety": "action safety", "detection": "detection", "action_type": "action type"}
    for i, column in enumerate(columns):
        df = df[df[column].notna()]
        if df.empty:
            also = " together with " + " and ".join(names[c] for c in columns[:i]) if i else ""
            return f"no {what}ReAct row has a resolved {names[column]} label{also} (no panel majority)"
    return "nothing to draw"


# -- drawing helpers -------------------------------------------------------------------------------

_GROUP_ORDER = {mark: i for i, mark in enumerate(vocab.GROUP_MARK.values())}


def _model_key(model: str) -> tuple:
    """Frontier, open-weight, then safety-tuned (the group mark the model name starts with), then by name."""
    return _GROUP_ORDER.get(model[:1], len(_GROUP_ORDER)), model


def _models(*tables: pd.DataFrame) -> list[str]:
    return sorted({m for t in tables for m in t["model"]} - {MEAN_ROW}, key=_model_key)


def _height(n_rows: int, per_row: float = 0.32, base: float = 1.0) -> float:
    return base + per_row * max(n_rows, 1)


def _stacked_bars(ax, shares: pd.DataFrame, models: list[str], column: str, levels, colours, names) -> list:
    """Horizontal stacked bars (one per model, first at the top) of `pct` per level; n at the right."""
    lookup = shares.set_index(["model", column])
    left = np.zeros(len(models))
    handles = []
    for level in levels:
        widths = np.array([lookup["pct"].get((m, level), 0.0) for m in models])
        handles.append(ax.barh(range(len(models)), widths, left=left, color=colours[level], label=names[level],
                               edgecolor="white", linewidth=0.4))
        left += widths
    ns = shares.drop_duplicates("model").set_index("model")["n"]
    for y, m in enumerate(models):
        if m in ns.index:
            ax.text(101, y, f"n={ns[m]}", va="center", fontsize=6)
        else:
            ax.text(50, y, "no rows", va="center", ha="center", fontsize=6, color="grey")
    ax.set_yticks(range(len(models)), models, fontsize=7)
    ax.set_ylim(len(models) - 0.5, -0.5)
    ax.set_xlim(0, 115)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share (%)", fontsize=7)
    ax.tick_params(labelsize=7)
    return handles


def _heatmap(ax, values, text, rows, cols, vmax=100, fontsize=6):
    """A 0-vmax heat map of `values` (NaN cells grey), each cell annotated with `text[i][j]`."""
    data = np.array(values, dtype=float).reshape(len(rows), len(cols))
    ax.set_facecolor("#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(data), vmin=0, vmax=vmax, cmap="Reds", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    for i in range(len(rows)):
        for j in range(len(cols)):
            colour = "white" if data[i, j] == data[i, j] and data[i, j] > 0.6 * vmax else "black"
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=fontsize, color=colour)
    return image


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"


def _pct(value) -> str:
    return "" if value != value else f"{round_half_up(value, 0):.0f}%"


# -- the figures -----------------------------------------------------------------------------------

def trajectory_length_by_domain(seeds: list[dict], png, svg) -> None:
    """Steps per seed trajectory, one column of points per domain, coloured by R-Judge label."""
    title = f"Trajectory length by domain (n={len(seeds)} seeds)"
    if not seeds:
        return _empty_figure(title, "no seed was selected", png, svg)
    fig, ax = pyplot().subplots(figsize=(7.5, 3.6), layout="constrained")
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
    ax.set_title(title)
    ax.legend(title="R-Judge label", frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    save(fig, png, svg)


def _stacked_panel(ax, shares: pd.DataFrame, models, column, levels, colours, names, title: str, why: str) -> list:
    """One pair label's stacked shares (or why there are none), titled with its n; the legend handles."""
    handles = []
    if shares.empty:
        no_data(ax, "no rows because " + why)
    else:
        handles = _stacked_bars(ax, shares, models, column, levels, colours, names)
    n = int(shares.drop_duplicates("model")["n"].sum()) if not shares.empty else 0
    ax.set_title(f"{title} (n={n})", fontsize=9)
    return handles


def _unsafe_panel(ax, cells: pd.DataFrame, models, columns, cell_text, xlabel: str, title: str, why: str):
    """A heat map of `cells` (indexed by model and column, with unsafe_pct and n), or why it is empty."""
    image = None
    if cells.empty:
        no_data(ax, "no rows because " + why)
    else:
        values = [[cells["unsafe_pct"].get((m, c), np.nan) for c in columns] for m in models]
        text = [[cell_text(cells, (m, c)) if (m, c) in cells.index else "–" for c in columns] for m in models]
        image = _heatmap(ax, values, text, models, columns)
        ax.set_xlabel(xlabel, fontsize=7)
    ax.set_title(f"{title} (n={int(cells['n'].sum()) if not cells.empty else 0})", fontsize=9)
    return image


def unsafe_by_detection(df, png, svg) -> None:
    """Figure 4, NSP and SP rows: (a) each model's unsafe rate, (b) its detection levels,
    (c) its unsafe rate at each detection level (cells: rate and n)."""
    overall, shares, by_level = fig4_overall_data(df), fig4_level_share_data(df), fig4_unsafe_by_level_data(df)
    title = "Figure 4: unsafe actions by detection level, ReAct"
    if overall.empty and shares.empty:
        return _empty_figure(title, why_empty(df, "safety"), png, svg)
    models = _models(overall, shares, by_level)
    n_rows = int(overall["n"].sum())
    fig, axes = pyplot().subplots(2, 3, figsize=(14, 2 * _height(len(models)) + 1.2), layout="constrained",
                             gridspec_kw={"width_ratios": [1, 1.2, 1.2]})
    fig.suptitle(f"{title} ({_count(len(models), 'model')}, n={n_rows} rows with a resolved safety label)", fontsize=11)
    handles, image = [], None
    for row, label in enumerate(PAIR_LABELS):
        ax_a, ax_b, ax_c = axes[row]
        o = overall[overall["pair_label"] == label].set_index("model")
        if o.empty:
            no_data(ax_a, "no rows because " + why_empty(df, "safety", pair_label=label))
        else:
            pct = [o["unsafe_pct"].get(m, np.nan) for m in models]
            ax_a.barh(range(len(models)), np.nan_to_num(pct), color=LABEL_COLOURS["unsafe"])
            for y, m in enumerate(models):
                k, n = (o.at[m, "unsafe"], o.at[m, "n"]) if m in o.index else (0, 0)
                note = f"{percent(k, n):.1f}% ({k}/{n})" if m in o.index else "no rows"
                ax_a.text((o.at[m, "unsafe_pct"] if m in o.index else 0) + 2, y, note, va="center", fontsize=6)
            ax_a.set_yticks(range(len(models)), models, fontsize=7)
            ax_a.set_ylim(len(models) - 0.5, -0.5)
            ax_a.set_xlim(0, 135)
            ax_a.set_xticks([0, 25, 50, 75, 100])
            ax_a.set_xlabel("unsafe actions (%)", fontsize=7)
            ax_a.tick_params(labelsize=7)
        ax_a.set_title(f"(a) {label}: unsafe rate (n={int(o['n'].sum()) if not o.empty else 0})", fontsize=9)
        handles = _stacked_panel(ax_b, shares[shares["pair_label"] == label], models, "detection", DETECTION,
                                 DETECTION_COLOURS, DETECTION_NAMES, f"(b) {label}: detection levels",
                                 why_empty(df, "detection", pair_label=label)) or handles
        image = _unsafe_panel(ax_c, by_level[by_level["pair_label"] == label].set_index(["model", "detection"]),
                              models, DETECTION, lambda c, key: f"{_pct(c['unsafe_pct'][key])}\nn={c['n'][key]}",
                              "detection level", f"(c) {label}: unsafe rate per detection level",
                              why_empty(df, "safety", "detection", pair_label=label)) or image
    if image is not None:
        fig.colorbar(image, ax=axes[:, 2], label="unsafe actions (%)", shrink=0.8)
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False, fontsize=7,
                   title="detection level", title_fontsize=7)
    save(fig, png, svg)


def action_types(df, png, svg) -> None:
    """Figure 5, NSP and SP rows: (a) each model's action types, (b) the unsafe share of each
    action type per model (cells: unsafe / n)."""
    shares, split = fig5a_data(df), fig5b_data(df)
    title = "Figure 5: action types, ReAct"
    if shares.empty:
        return _empty_figure(title, why_empty(df, "action_type"), png, svg)
    models = _models(shares, split)
    n_rows = int(shares.drop_duplicates(["model", "pair_label"])["n"].sum())
    fig, axes = pyplot().subplots(2, 2, figsize=(13, 2 * _height(len(models)) + 1.2), layout="constrained")
    fig.suptitle(f"{title} ({_count(len(models), 'model')}, n={n_rows} rows with a resolved action type)", fontsize=11)
    handles, image = [], None
    for row, label in enumerate(PAIR_LABELS):
        ax_a, ax_b = axes[row]
        handles = _stacked_panel(ax_a, shares[shares["pair_label"] == label], models, "action_type", ACTION_TYPES,
                                 ACTION_COLOURS, ACTION_NAMES, f"(a) {label}: action-type distribution",
                                 why_empty(df, "action_type", pair_label=label)) or handles
        image = _unsafe_panel(ax_b, split[split["pair_label"] == label].set_index(["model", "action_type"]),
                              models, ACTION_TYPES, lambda b, key: f"{b['unsafe'][key]}/{b['n'][key]}",
                              "action type (cells: unsafe / n)", f"(b) {label}: unsafe share per action type",
                              why_empty(df, "safety", "action_type", pair_label=label)) or image
    if image is not None:
        fig.colorbar(image, ax=axes[:, 1], label="unsafe actions (%)", shrink=0.8)
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=6, frameon=False, fontsize=7,
                   title="action type", title_fontsize=7)
    save(fig, png, svg)


def unsafe_by_dimension(df, png, svg) -> None:
    """Figure 6: unsafe rate per dimension (originals, RS1-RS6, SD1-SD5) and model, NSP and SP
    side by side, with the across-model mean as the last row (cells: rate and n)."""
    data = fig6_data(df)
    title = "Figure 6: unsafe rate per dimension, ReAct"
    if data.empty:
        return _empty_figure(title, why_empty(df, "safety"), png, svg)
    models = _models(data)
    rows = models + [MEAN_ROW]
    fig, axes = pyplot().subplots(1, 2, figsize=(16, _height(len(rows), 0.42, 1.6)), layout="constrained", sharey=True)
    n_rows = int(data.loc[data["model"] != MEAN_ROW, "n"].sum())
    fig.suptitle(f"{title} ({_count(len(models), 'model')}, n={n_rows} rows with a resolved safety label; "
                 "mean row: unweighted mean of the models' rates)", fontsize=11)
    image = None
    for ax, label in zip(axes, PAIR_LABELS):
        d = data[data["pair_label"] == label].set_index(["model", "dimension"])
        n = int(d.loc[d.index.get_level_values(0) != MEAN_ROW, "n"].sum()) if not d.empty else 0
        ax.set_title(f"{label} (n={n})", fontsize=9)
        if d.empty:
            no_data(ax, "no rows because " + why_empty(df, "safety", pair_label=label))
            continue
        values = [[d["unsafe_pct"].get((m, dim), np.nan) for dim in DIMENSIONS] for m in rows]
        text = [[(f"{_pct(d['unsafe_pct'][(m, dim)])}\n"
                  + (f"{d['models'][(m, dim)]}m" if m == MEAN_ROW else f"n={d['n'][(m, dim)]}"))
                 if (m, dim) in d.index else "–" for dim in DIMENSIONS] for m in rows]
        image = _heatmap(ax, values, text, rows, DIMENSIONS, fontsize=5.5)
        ax.axhline(len(models) - 0.5, color="black", linewidth=1.2)
        ax.set_xlabel("dimension (mean row: rate and number of models)", fontsize=7)
    if image is not None:
        fig.colorbar(image, ax=axes, label="unsafe actions (%)", shrink=0.8)
    save(fig, png, svg)


def detection_levels(df, png, svg) -> None:
    """Figure 7: distribution of detection levels per model, NSP and SP panels."""
    shares = fig7_data(df)
    title = "Figure 7: detection levels, ReAct"
    if shares.empty:
        return _empty_figure(title, why_empty(df, "detection"), png, svg)
    models = _models(shares)
    n_rows = int(shares.drop_duplicates(["model", "pair_label"])["n"].sum())
    fig, axes = pyplot().subplots(1, 2, figsize=(11, _height(len(models), 0.32, 1.6)), layout="constrained", sharey=True)
    fig.suptitle(f"{title} ({_count(len(models), 'model')}, n={n_rows} rows with a resolved detection label)",
                 fontsize=11)
    handles = []
    for ax, label in zip(axes, PAIR_LABELS):
        handles = _stacked_panel(ax, shares[shares["pair_label"] == label], models, "detection", DETECTION,
                                 DETECTION_COLOURS, DETECTION_NAMES, label,
                                 why_empty(df, "detection", pair_label=label)) or handles
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False, fontsize=7,
                   title="detection level", title_fontsize=7)
    save(fig, png, svg)


def detection_by_action(df, png, svg, min_n: int = FIG8_MIN_N) -> None:
    """Figure 8: on NSP items, one detection × action-type table per model: the unsafe rate of each
    cell with its n; cells with fewer than `min_n` rows show only their n."""
    data = fig8_data(df, min_n)
    title = "Figure 8: NSP unsafe rate per detection × action type, ReAct"
    if data.empty:
        return _empty_figure(title, why_empty(df, "safety", "detection", "action_type", pair_label=NSP), png, svg)
    models = _models(data)
    ncols = min(4, len(models))
    nrows = -(-len(models) // ncols)
    fig, axes = pyplot().subplots(nrows, ncols, figsize=(max(3.4 * ncols + 1.2, 8), 2.5 * nrows + 1.2),
                             layout="constrained", squeeze=False)
    fig.suptitle(f"{title}\n({_count(len(models), 'model')}, n={int(data['n'].sum())} NSP rows with all three "
                 f"labels; rates shown where n ≥ {min_n}, grey: fewer)", fontsize=11)
    image = None
    for ax, model in zip(axes.flat, models):
        g = data[data["model"] == model].set_index(["detection", "action_type"])
        values = [[g.at[(d, a), "unsafe_pct"] for a in ACTION_TYPES] for d in DETECTION]
        text = [[(f"{_pct(g.at[(d, a), 'unsafe_pct'])}\nn={g.at[(d, a), 'n']}" if g.at[(d, a), "shown"]
                  else (f"n={g.at[(d, a), 'n']}" if g.at[(d, a), "n"] else "–")) for a in ACTION_TYPES]
                for d in DETECTION]
        image = _heatmap(ax, values, text, DETECTION, ACTION_TYPES, fontsize=5.5)
        ax.set_title(f"{model} (n={int(g['n'].sum())})", fontsize=8)
        ax.set_xlabel("action type", fontsize=7)
        ax.set_ylabel("detection", fontsize=7)
    for ax in list(axes.flat)[len(models):]:
        ax.set_axis_off()
    if image is not None:
        fig.colorbar(image, ax=axes, label="unsafe actions (%)", shrink=0.8)
    save(fig, png, svg)


# -- the builders of the figures declared in figures_spec.py ------------------------------

@builder("trajectory_length_by_domain")
def _trajectory_length(inputs, png, svg):
    trajectory_length_by_domain(read_jsonl(inputs["seeds"]), png, svg)


def _from_frame(draw):
    return lambda inputs, png, svg: draw(read_frame(inputs["frame"]), png, svg)


for _name, _draw in {"fig4_unsafe_by_detection": unsafe_by_detection, "fig5_action_types": action_types,
                     "fig6_unsafe_by_dimension": unsafe_by_dimension, "fig7_detection_levels": detection_levels,
                     "fig8_detection_by_action": detection_by_action}.items():
    builder(_name)(_from_frame(_draw))
