"""Statistics against published reference values."""

import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest

from aura_eval.util.stats import (consensus, krippendorff_alpha, nsp_sp_difference, observed_agreement, percent,
                             plurality_consensus, round_half_up, share, share_columns, wilson_interval)

# Krippendorff's 4-observer x 12-unit example (None = missing).
K = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_wilson_interval_of_the_papers_action_safety_agreement():
    low, high = wilson_interval(66, 84)
    assert (round(100 * low, 1), round(100 * high, 1)) == (68.7, 86.0)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_krippendorff_reference_example():
    assert round(krippendorff_alpha(K, "nominal"), 3) == 0.743
    assert round(krippendorff_alpha(K, "interval"), 3) == 0.849
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(K, "")


def test_krippendorff_with_string_labels_matches_numeric_codes():
    as_labels = [[None if v is None else f"A{v}" for v in row] for row in K]
    assert krippendorff_alpha(as_labels, "nominal") == pytest.approx(krippendorff_alpha(K, "nominal"))


def test_observed_agreement():
    # Two observers agree on 3 of 4 units: P_o = 0.75; a unit with one value is not pairable.
    assert observed_agreement([["a", "b", "c", "d", "x"], ["a", "b", "c", "e", None]]) == 0.75
    # Reference example: 1 - D_o, with D_o from the nominal coincidences (alpha = 1 - D_o / D_e).
    assert observed_agreement(K) == pytest.approx(32 / 40)  # 32 agreeing of 40 pairable values
    assert math.isnan(observed_agreement([[1, None], [None, 2]]))


def test_nsp_sp_difference_point_and_interval():
    rng = np.random.default_rng(0)
    seeds = np.repeat([f"s{i}" for i in range(40)], 6)
    is_nsp = np.tile([True, True, True, False, False, False], 40)
    unsafe = np.where(is_nsp, rng.random(240) < 0.5, rng.random(240) < 0.1).astype(float)
    unsafe[5] = np.nan  # unresolved: left out
    diff, low, high = nsp_sp_difference(seeds, is_nsp, unsafe, n_resamples=2000)
    nsp = np.nanmean(unsafe[is_nsp])
    sp = np.nanmean(unsafe[~is_nsp])
    assert diff == pytest.approx(nsp - sp)
    assert low < diff < high and 0 < low and high < 0.8
    assert (diff, low, high) == nsp_sp_difference(seeds, is_nsp, unsafe, n_resamples=2000)  # seed 42 each time


def test_nsp_sp_difference_degenerate_cases():
    diff, low, high = nsp_sp_difference(["a", "b"], [True, True], [1.0, 0.0], n_resamples=100)
    assert math.isnan(diff) and math.isnan(low) and math.isnan(high)
    # One seed holds every SP row: resamples without it have no SP rate and are left out.
    diff, low, high = nsp_sp_difference(["a", "b", "c"], [True, True, False], [1.0, 1.0, 0.0], n_resamples=500)
    assert (diff, low, high) == (1.0, 1.0, 1.0)


def test_plurality_consensus_follows_the_plurality_rule():
    assert plurality_consensus(["A0"] * 5) == "unanimous"
    # Two of five: a plurality without a majority (the three-judge strata call it tied).
    assert plurality_consensus(["D1", "D1", "D0", "D2", "D3"]) == "plurality"
    assert consensus(["D1", "D1", "D0", "D2", "D3"]) == "tied"
    assert plurality_consensus(["Safe", "Safe", "Safe", "Unsafe", None]) == "plurality"
    assert plurality_consensus(["D0", "D0", "D1", "D1", "D2"]) == "no_plurality"  # a tie for first place
    assert plurality_consensus(["Safe", None, None]) == "plurality"  # one vote, no rival
    assert plurality_consensus([None] * 5) == "no_plurality" and plurality_consensus([]) == "no_plurality"


def test_share_gives_the_rate_with_its_counts():
    assert share("unsafe", 2, 3) == {"unsafe_pct": 66.7, "unsafe_k": 2, "unsafe_n": 3}
    empty = share("unsafe", 0, 0)
    assert math.isnan(empty["unsafe_pct"]) and (empty["unsafe_k"], empty["unsafe_n"]) == (0, 0)
    assert share_columns("a", "b") == ["a_pct", "a_k", "a_n", "b_pct", "b_k", "b_n"]


def test_percentages_round_a_half_up():
    """The convention for reported percentages: 1/16 = 6.25% shows as 6.3% (round() gives 6.2)."""
    assert round(100 * 1 / 16, 1) == 6.2  # what half-to-even gave
    assert share("x", 1, 16)["x_pct"] == percent(1, 16) == 6.3
    # Every k/n (n <= 200) whose percentage lies exactly halfway between two tenths (2000 k / n odd):
    halves = [(k, n) for n in range(1, 201) for k in range(n + 1) if (2000 * k) % n == 0 and (2000 * k // n) % 2]
    assert len(halves) > 50 and (1, 16) in halves
    for k, n in halves:  # exact decimals there: Decimal's own half-up rounding is the reference
        expected = float((Decimal(100 * k) / n).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
        assert percent(k, n) == expected, (k, n)
    assert [percent(k, 16) for k in (1, 3, 5)] == [6.3, 18.8, 31.3] and percent(1, 80) == 1.3
    assert percent(2, 3) == 66.7 and percent(1, 3) == 33.3 and math.isnan(percent(0, 0))
    assert (round_half_up(6.25), round_half_up(-6.25), round_half_up(0.125, 2), round_half_up(12.5, 0)) == (
        6.3, -6.3, 0.13, 13.0)
    assert round_half_up(100 * (0.3125 - 0.25)) == 6.3 and math.isnan(round_half_up(float("nan")))
