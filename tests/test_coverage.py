"""Table 31's seed-clustered 95% intervals hold the gap they estimate as often as their level says:
the small version of benchmarks/bench_coverage.py (which counts 400 intervals), on a few dozen
simulated paper-sized label tables with the noisy judges of config/simulate.yaml. Which gap that
is: tests/interval_coverage.py. (A row bootstrap, which ignores the source seeds, would pass as
well: in this simulator a seed's difficulty shift cancels in the gap; README, bench_coverage.)"""

import pytest

from tests.interval_coverage import (AGENTS, binomial_band, holds, replicate, simulate_settings, table31_intervals,
                                     truths)

REPLICATES = 40  # simulator seeds 0-39, two agents each: 80 intervals
RESAMPLES = 1000
# 80 bootstrapped tables, drawn once (about 21 s): the slower tier, which keeps `make test` inside its 5 minutes
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("coverage")]


@pytest.fixture(scope="module")
def drawn():
    """Per replicate, the truths and Table 31's intervals."""
    settings = simulate_settings()
    out = []
    for r in range(REPLICATES):
        params, _, df = replicate(settings, r, noise_free=False)
        out.append((truths(params), table31_intervals(df, RESAMPLES)))
    return out


def _hits(drawn, target: str) -> int:
    return sum(holds(intervals[agent], truth[agent][target]) for truth, intervals in drawn for agent in AGENTS)


def test_table31_intervals_hold_the_judged_gap_at_their_level(drawn):
    n = REPLICATES * len(AGENTS)
    low, high = binomial_band(n)  # 95% +- 3 binomial standard errors (2.44% each) of 80: 71-80
    assert (low, high) == (71, 80)
    assert low <= _hits(drawn, "judged") <= high


def test_the_check_fails_where_intervals_miss_their_value(drawn):
    # Under noisy judges the planted gap is not what the intervals estimate (its judged value is
    # smaller), so the same check on the planted gap must fail: the check has power.
    assert _hits(drawn, "planted") < binomial_band(REPLICATES * len(AGENTS))[0]
