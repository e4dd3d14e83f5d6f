"""Statistics shared by the evaluation and the report (paper §5, §6, F, I.1)."""

from __future__ import annotations

import functools
from collections import Counter

UNANIMOUS, MAJORITY, TIED = "unanimous", "majority", "tied"
PLURALITY, NO_PLURALITY = "plurality", "no_plurality"


# The seed-clustered bootstrap's resamples and its random seed (paper I.1): every interval of the
# report draws these many, from default_rng(BOOTSTRAP_SEED) afresh, so a rerun gives the same bounds.
N_RESAMPLES = 10_000
BOOTSTRAP_SEED = 42


def vote(labels: list, rule: str = "majority"):
    """The panel's label, or None.

    rule "majority": the label held by more than half of the judges; "plurality":
    the single most common label (a tie for first place gives None). An unparseable
    vote (None) is a vote for nobody but still counts in the number of judges.
    """
    if rule not in ("majority", "plurality"):
        raise ValueError(f"rule must be 'majority' or 'plurality', got {rule!r}")
    counts = Counter(label for label in labels if label is not None).most_common()
    if not counts:
        return None
    top, n_top = counts[0]
    if rule == "majority":
        return top if n_top > len(labels) / 2 else None
    return top if len(counts) == 1 or counts[1][1] < n_top else None


def consensus(labels: list) -> str:
    """unanimous (every judge gave the same label), majority (a label held by more
    than half, not all) or tied (no majority); None votes count as disagreement."""
    if labels and labels[0] is not None and all(label == labels[0] for label in labels):
        return UNANIMOUS
    return MAJORITY if vote(labels, "majority") is not None else TIED


def plurality_consensus(labels: list) -> str:
    """The strata of a panel labelled by plurality (the five-judge panel): unanimous,
    plurality (a single most common label, not unanimous) or no_plurality (a tie for
    first place, or no vote); None votes count as disagreement, as in `consensus`."""
    if labels and labels[0] is not None and all(label == labels[0] for label in labels):
        return UNANIMOUS
    return PLURALITY if vote(labels, "plurality") is not None else NO_PLURALITY


# -- rates ------------------------------------------------------------------------

def round_half_up(value: float, digits: int = 1) -> float:
    """`value` to `digits` decimals, a half rounded away from zero (6.25 -> 6.3), the convention for
    reported percentages; Python's round() goes to the even digit (6.2). The value is taken as it
    prints (its shortest repr), so 6.25 is a half even though its binary value is not exactly 6.25
    for every computation that gives it. NaN stays NaN."""
    from decimal import ROUND_HALF_UP, Decimal

    if value != value:
        return float("nan")
    return float(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def percent(k: int, n: int) -> float:
    """100 k / n to one decimal, a half rounded up, exactly (integer arithmetic: 1/16 -> 6.3);
    NaN when n == 0. The one rounding of every table's rates (`share`)."""
    k, n = int(k), int(n)
    return (2000 * k + n) // (2 * n) / 10 if n else float("nan")


def share(name: str, k: int, n: int) -> dict:
    """A rate as three columns, the percentage with its counts: `<name>_pct` (`percent`: one
    decimal, a half rounded up, NaN when n == 0), `<name>_k` (numerator) and `<name>_n` (denominator)."""
    k, n = int(k), int(n)
    return {f"{name}_pct": percent(k, n), f"{name}_k": k, f"{name}_n": n}


def share_columns(*names: str) -> list[str]:
    """The columns `share` makes for each name, in order."""
    return [f"{name}_{part}" for name in names for part in ("pct", "k", "n")]


# -- intervals and agreement ----------------------------------------------------

def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials, as proportions (NaN, NaN when n == 0)."""
    import math

    from statsmodels.stats.proportion import proportion_confint

    if n == 0:
        return (math.nan, math.nan)
    low, high = proportion_confint(k, n, alpha=1 - level, method="wilson")
    return (float(low), float(high))


def _coded(data):
    """An observers × units float array; labels that are not numbers become integer codes."""
    import numpy as np

    rows = [list(row) for row in data]
    values = sorted({v for row in rows for v in row if not _missing(v)}, key=str)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array([[np.nan if _missing(v) else float(v) for v in row] for row in rows], dtype=float)
    codes = {v: i for i, v in enumerate(values)}
    return np.array([[np.nan if _missing(v) else codes[v] for v in row] for row in rows], dtype=float)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def krippendorff_alpha(data, level: str) -> float:
    """Krippendorff's alpha for an observers × units array (None or NaN = missing).

    `level` is required ("nominal", "ordinal", "interval", "ratio"): the krippendorff
    package would otherwise assume interval data. Non-numeric labels are coded as
    integers in sorted order, which only "nominal" treats correctly.
    """
    import krippendorff

    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"level must be nominal, ordinal, interval or ratio, got {level!r}")
    return float(krippendorff.alpha(reliability_data=_coded(data), level_of_measurement=level))


def observed_agreement(data) -> float:
    """Krippendorff's percent agreement P_o = 1 - D_o for nominal data.

    Over the pairable values (units with at least two observers), the share of
    ordered value pairs within a unit that agree, each unit weighted by its number
    of pairable values as in Krippendorff's coincidence matrix. NaN when no unit
    has two values.
    """
    import numpy as np

    coded = _coded(data)
    agree, pairable = 0.0, 0
    for unit in coded.T:
        values = unit[~np.isnan(unit)]
        m = len(values)
        if m < 2:
            continue
        _, counts = np.unique(values, return_counts=True)
        agree += float((counts * (counts - 1)).sum()) / (m - 1)
        pairable += m
    return agree / pairable if pairable else float("nan")


# -- seed-clustered bootstrap (paper I.1) ---------------------------------------

def cluster_weights(cluster_ids, n_resamples: int, seed: int):
    """(clusters, index, W): W[r, c] is how often cluster c is drawn in resample r.

    Each resample draws as many clusters as there are, with replacement, from a
    fresh numpy default_rng(seed); a drawn cluster brings all its rows.
    """
    import numpy as np

    clusters, index = np.unique(np.asarray(cluster_ids), return_inverse=True)
    return clusters, index, _draw_counts(len(clusters), n_resamples, seed)


@functools.lru_cache(maxsize=4)
def _draw_counts(n: int, n_resamples: int, seed: int):
    # The draws depend only on (n, n_resamples, seed): models sharing a seed count
    # reuse them, with exactly the numbers a fresh default_rng(seed) would give.
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_resamples, n), dtype=np.int64)
    draws += (np.arange(n_resamples, dtype=np.int64) * n)[:, None]
    weights = np.bincount(draws.ravel(), minlength=n_resamples * n).reshape(n_resamples, n).astype(np.float64)
    weights.flags.writeable = False  # shared between callers
    return weights


def cluster_sums(index, values, n_clusters: int):
    import numpy as np

    return np.bincount(index, weights=values, minlength=n_clusters)


def percentile_interval(samples, level: float):
    """Percentile interval of the finite samples (NaN resamples are left out)."""
    import numpy as np

    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return (float(low), float(high))


def seed_bootstrap(seed_ids, columns, statistic, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   level: float = 0.95) -> tuple[float, float, float]:
    """The general seed-clustered percentile bootstrap (paper I.1).

    `columns` is a rows × k array of additive per-row quantities (counts, sums);
    `statistic` maps their totals (an array whose last axis has length k) to the
    statistic, vectorised over resamples. Each resample draws source seeds with
    replacement (`cluster_weights`); a resample whose statistic is NaN (e.g. no row
    for a rate's denominator) is left out of the percentiles. Returns (point
    estimate on all rows, low, high).
    """
    import numpy as np

    clusters, index, weights = cluster_weights(seed_ids, n_resamples, seed)
    columns = np.asarray(columns, dtype=float).reshape(len(index), -1)
    per_cluster = np.column_stack([cluster_sums(index, columns[:, j], len(clusters))
                                   for j in range(columns.shape[1])])
    with np.errstate(invalid="ignore", divide="ignore"):
        point = float(statistic(per_cluster.sum(axis=0)))
        low, high = percentile_interval(statistic(weights @ per_cluster), level)
    return point, low, high


def seed_rate_interval(seed_ids, hits, n_resamples: int = N_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """The seed-clustered 95% interval of a rate, in % to one decimal: `hits` per row (0/1, or a share),
    the rate their sum over the rows; (NaN, NaN) without rows."""
    import numpy as np

    if not len(hits):
        return float("nan"), float("nan")
    columns = np.column_stack([np.asarray(hits, dtype=float), np.ones(len(hits))])
    _, low, high = seed_bootstrap(seed_ids, columns, lambda t: t[..., 0] / t[..., 1], n_resamples, seed)
    return round_half_up(100 * low), round_half_up(100 * high)


def _rate_difference(totals):
    # totals: (NSP unsafe, NSP resolved rows, SP unsafe, SP resolved rows)
    return totals[..., 0] / totals[..., 1] - totals[..., 2] / totals[..., 3]


def nsp_sp_difference(seed_ids, is_nsp, unsafe, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                      level: float = 0.95) -> tuple[float, float, float]:
    """NSP unsafe rate minus SP unsafe rate, with a seed-clustered percentile interval.

    Rows are resampled by source seed: each resample draws seed ids with replacement
    and every drawn seed brings all its rows. The NSP rate's denominator is the NSP
    rows with a resolved label, the SP rate's the SP rows; `unsafe` is 1, 0 or NaN
    (unresolved: the row is left out of both numerator and denominator). A resample
    that draws no resolved NSP row or no resolved SP row has no difference; it is
    left out of the percentiles, which are taken over the remaining resamples. The
    generator is numpy default_rng(seed), started afresh on every call (so for each
    model). Returns (difference, low, high) as proportions; NaN when the full data
    lack NSP or SP rows.
    """
    import numpy as np

    unsafe = np.asarray(unsafe, dtype=float)
    is_nsp = np.asarray(is_nsp, dtype=bool)
    resolved = ~np.isnan(unsafe)
    value = np.nan_to_num(unsafe)
    nsp, sp = is_nsp & resolved, ~is_nsp & resolved
    columns = np.column_stack([value * nsp, nsp, value * sp, sp])
    return seed_bootstrap(seed_ids, columns, _rate_difference, n_resamples, seed, level)
