"""The forecast's bands and the assumptions each bound comes from (docs/running-the-paper.md states them).

A `Band` is (low, point, high); `high` is None where nothing bounds it (an entry without `max_tokens`).
Before a stage's input exists, its units follow the stage before through the paper's yields
(`YIELDS`, from PAPER_FUNNEL), each an interval covering the binomial noise at the run's own size:
k of n trials at the paper's rate p lies, with about 95% probability, in
n*p +/- Z*sqrt(n*p*(1-p) + n^2*p*(1-p)/n_paper) (the second term: the paper's own rate is an
estimate). A count drawn from an uncertain count carries that count's variance on (the law of total
variance), so a chain of yields is as wide as its noise, not as the 95% extremes of every step.
The judges' shares (judgeable, thought, distinct) are assumed bands until a pilot shows its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aura_eval.construct.funnel import PAPER_FUNNEL
from aura_eval.vocab import VARIED_DIMENSIONS

Z = 1.96  # two-sided 95% per yield; chained lows and highs make the band's coverage higher still

# (trials, successes) in the paper's funnel: the yield of each construction step.
_F = PAPER_FUNNEL
YIELDS = {
    # a seed gets a pre-execution prefix besides its at-trigger one (157 seeds, 54 of them)
    "second_prefix": (157, _F["prefixes"] - 157),
    # a (prefix, dimension) is a candidate: 1,029 of 211 x 11
    "candidate": (_F["prefixes"] * len(VARIED_DIMENSIONS), _F["variation candidates"]),
    "parseable": (_F["variation candidates"], _F["parseable variations"]),
    "kept": (_F["parseable variations"], _F["kept variations"]),
    "pair": (_F["classified pool"], _F["pair candidates"]),
    "parseable_pair": (_F["pair candidates"], _F["parseable pairs"]),
    "kept_pair": (_F["parseable pairs"], _F["kept pairs"]),
    "released": (_F["classified pool"] + _F["kept pairs"], _F["released rows"]),
}

# The share of rollouts the judges see (status ok: an action, and a thought for detection) before
# any rollout exists: (low, point, high). A refused, cut or unparseable answer gets no judge call;
# the simulation's agents (planted refusals) give 81% of 356 (.test/config/sim_small.yaml), a model
# that follows the format and never declines 100%, one that often declines or rambles far less.
# Once rollouts exist the count is exact; a pilot's share replaces these (`observed`).
JUDGEABLE = (0.6, 0.85, 1.0)
# Of the judgeable ReAct rollouts, the share with a thought (the detection judge reads it): a model
# that answers in the format writes one nearly always; the simulation's agents: 19 of 23 (2 seeds).
THOUGHT = (0.5, 0.9, 1.0)
# Of a judge stage's requests, the share that differ (the cache answers alike ones once: agents that
# answer an item word for word alike ask the judges the same question): real models rarely do, the
# simulation's agents often (82% of 3,468 differed in a 2-seed pilot of config/simulate.yaml).
DISTINCT = (0.75, 1.0, 1.0)
ASSUMED_SHARES = {"judgeable": JUDGEABLE, "thought": THOUGHT, "distinct": DISTINCT}

# The input tokens a provider bills per token we count (o200k_base, litellm's gpt-4o count), per
# provider: (low, point, high). OpenAI's models use o200k itself (the schema a structured request
# carries is added to point and high); Anthropic's tokenizer counts 0-40% more on English and code;
# Gemini's SentencePiece 15% fewer to 25% more; anything else (a self-hosted model, the embedded
# one) 20% fewer to 50% more. Once a model's answers report their input tokens, the observed
# ratio replaces these.
TOKENIZER = {"openai": (1.0, 1.0, 1.05), "azure": (1.0, 1.0, 1.05), "anthropic": (1.0, 1.15, 1.4),
             "gemini": (0.85, 1.0, 1.25), "vertex_ai": (0.85, 1.0, 1.25)}
TOKENIZER_OTHER = (0.8, 1.0, 1.5)

# Hidden reasoning a reasoning model (litellm's cost map: supports_reasoning) bills as output, per
# answer, by the entry's `reasoning_effort` (none set: the provider's default, medium), before any
# answer shows it; always within the entry's max_tokens.
REASONING_TOKENS = {"minimal": 256, "low": 1024, "medium": 4096, "high": 16384}
THINKS_ONLY_WHEN_ASKED = ("anthropic", "bedrock", "vertex_ai")  # extended thinking off unless the entry asks

# A prompt's tokens estimated before its inputs exist (its template, plus the seeds' mean trajectory or
# the items' mean prefix, plus half an answer): (low, point, high) per estimated token. The sim_small run's
# judges' reliability prompts came to 0.85 of the estimate, its rollouts' to 0.84.
ESTIMATED_PROMPT = (0.7, 1.0, 1.3)

# Seconds one live request takes before any call log shows it: (low, point, high).
LATENCY_S = (1.0, 5.0, 30.0)
BATCH_TURNAROUND_H = (0.1, 2.0, 24.0)  # a batch stage, submitted to answered: the providers promise 24 h

_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
         15: 2.13, 20: 2.09, 30: 2.04, 60: 2.00}


def t975(df: int) -> float:
    """Student's t at 97.5% for `df` degrees of freedom (the nearest tabled df at or below; Z from 120)."""
    if df >= 120:
        return Z
    return _T975[max(k for k in _T975 if k <= max(1, df))]


@dataclass(frozen=True)
class Band:
    low: float
    point: float
    high: float | None  # None: unbounded
    # A count drawn through the yields carries its variance, so that the next yield adds its own noise
    # to it instead of chaining two 95% extremes (which would hold far more than 95% of the time).
    # None: a band of assumptions, whose bounds are combined as bounds.
    var: float | None = None

    @staticmethod
    def exact(value: float) -> Band:
        return Band(value, value, value, 0.0)

    def __add__(self, other: Band) -> Band:
        high = None if self.high is None or other.high is None else self.high + other.high
        # two counts of one chain rise and fall together: their spreads add (the widest the sum can be)
        var = None if self.var is None or other.var is None else (math.sqrt(self.var) + math.sqrt(other.var)) ** 2
        return Band(self.low + other.low, self.point + other.point, high, var)

    def scale(self, low: float, point: float, high: float | None) -> Band:
        """Each bound times its own factor (a None factor or bound: unbounded); one factor for all
        three keeps the variance (times its square)."""
        if self.high == 0:  # nothing times anything, unbounded included
            return Band(0, 0, 0, 0.0)
        var = self.var * point * point if self.var is not None and low == point == high else None
        return Band(self.low * low, self.point * point, None if self.high is None or high is None else self.high * high,
                    var)

    def times(self, other: Band) -> Band:
        return self.scale(other.low, other.point, other.high)

    def rounded(self) -> Band:
        return Band(math.floor(self.low), round(self.point), None if self.high is None else math.ceil(self.high))

    def holds(self, value: float, slack: float = 1e-9) -> bool:
        return self.low - slack <= value and (self.high is None or value <= self.high + slack)

    def width(self) -> float | None:
        """(high - low) / point: the band's width relative to its point (None: unbounded or point 0)."""
        if self.high is None or not self.point:
            return None
        return (self.high - self.low) / self.point


ZERO = Band(0, 0, 0, 0.0)


def contradicts(name: str, observed: tuple[float, float] | None) -> bool:
    """Whether (trials, successes) a pilot saw lie outside the paper's yield's 95% interval at that size."""
    if not observed or observed[0] <= 0:
        return False
    n, k = observed
    p0 = YIELDS[name][1] / YIELDS[name][0]
    return abs(k - n * p0) > Z * math.sqrt(n * p0 * (1 - p0)) + 0.5


def effective_size(groups: list[tuple[int, int]]) -> float:
    """The number of independent trials that `groups` [(trials, successes) per item] are worth: their
    trials over the design effect 1 + (m - 1) * ICC (m: trials per item; ICC: the intra-item
    correlation, one-way ANOVA). Where every item shows the same share (no spread to tell the ICC
    from, as when all succeed), each item counts once: its trials may fail or succeed together."""
    n_items, trials = len(groups), sum(n for n, _ in groups)
    if n_items < 2 or trials <= n_items:
        return float(min(n_items, trials))
    p = sum(k for _, k in groups) / trials
    between = sum(n * (k / n - p) ** 2 for n, k in groups) / (n_items - 1)
    within = sum(k * (1 - k / n) for n, k in groups) / (trials - n_items)
    if between + within == 0 or len({k / n for n, k in groups}) == 1:
        return float(n_items)
    m0 = (trials - sum(n * n for n, _ in groups) / trials) / (n_items - 1)
    icc = min(1.0, max(0.0, (between - within) / (between + (m0 - 1) * within)))
    return trials / (1 + (trials / n_items - 1) * icc)


def wilson(n: float, k: float) -> tuple[float, float]:
    """The 95% Wilson score interval of a share seen k times in n (it stays inside [0, 1] and is not
    empty at 0 of n or n of n, where a normal interval collapses)."""
    p, z2 = k / n, Z * Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def share_of(trials: Band, name: str, observed: tuple[float, float] | None = None) -> Band:
    """`trials` times a share: the assumed band (`ASSUMED_SHARES`) before any rollout; a pilot's where
    one saw it (`observed`: (trials, successes) at their effective size, `effective_size`): its share
    as the point, each bound at its own side of the 95% Wilson interval (a share of 1 seen is not
    proof of 1), with the binomial noise of the run's own rollouts."""
    if not observed or observed[0] <= 0:
        return trials.scale(*ASSUMED_SHARES[name])
    n, k = observed
    p = k / n
    low, high = wilson(n, k)
    if trials.var is not None:  # each side at its own side of the interval (skewed near 0 and 1)
        down, up = _drawn(trials, p, ((p - low) / Z) ** 2), _drawn(trials, p, ((high - p) / Z) ** 2)
        return Band(down.low, down.point, up.high, max(down.var, up.var))

    def noise(count: float, share: float) -> float:
        return Z * math.sqrt(count * share * (1 - share))
    top = None if trials.high is None else min(trials.high, trials.high * high + noise(trials.high, high))
    return Band(max(0.0, trials.low * low - noise(trials.low, low)), trials.point * p, top)


def _drawn(trials: Band, p: float, rate_var: float) -> Band:
    """Successes of a count with its variance at a rate p known to within `rate_var`: the law of total
    variance (each trial's noise, the count's own spread, the rate's), +/- Z sd within [0, trials]."""
    var = trials.point * p * (1 - p) + trials.var * (p * p + rate_var) + trials.point ** 2 * rate_var
    half = Z * math.sqrt(var)
    high = None if trials.high is None else min(trials.high, trials.point * p + half)
    return Band(max(0.0, trials.point * p - half), trials.point * p, high, var)


def binomial_count(trials: Band, name: str, observed: tuple[int, int] | None = None) -> Band:
    """Successes of `trials` at the yield `name`, with the 95% noise at the run's own size: at the
    paper's rate (its 1,029 candidates and so on make it precise), unless `observed` (trials, successes
    of these models: a pilot's funnel) contradicts it (`contradicts`): then at theirs, with the
    uncertainty of so few trials (a rate of 0 or 1 seen is taken half a trial in)."""
    use = contradicts(name, observed)
    n_paper, k_paper = observed if use else YIELDS[name]
    p = k_paper / n_paper
    if use and p in (0.0, 1.0):
        p = (k_paper + 0.5) / (n_paper + 1)
    if trials.var is not None:  # a count with its variance: one step on
        return _drawn(trials, p, p * (1 - p) / n_paper)

    def bounds(n: float) -> tuple[float, float]:
        half = Z * math.sqrt(max(0.0, n * p * (1 - p) + n * n * p * (1 - p) / n_paper))
        return max(0.0, n * p - half), min(n, n * p + half)

    low = bounds(trials.low)[0]
    high = None if trials.high is None else bounds(trials.high)[1]
    return Band(low, trials.point * p, high)


def mean_band(values: list[float], remaining: float, floor: float, cap: float | None) -> Band | None:
    """The total of `remaining` more draws like `values` (at least 3): their mean times `remaining`,
    +/- Student's t on the spread of a new total (the draws' variance and the mean's own), kept
    within [floor, cap] per draw. None with fewer than 3 values."""
    n = len(values)
    if n < 3:
        return None
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = t975(n - 1) * math.sqrt(remaining * var + remaining * remaining * var / n)
    point = remaining * mean
    low = max(remaining * floor, point - half)
    high = point + half if cap is None else min(remaining * cap, point + half)
    return Band(low, min(max(point, low), high), high)
