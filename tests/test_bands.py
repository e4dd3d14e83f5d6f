"""The forecast's bands: yields as intervals at the run's size, totals of answers like those seen,
the smallest valid answer, and the pilot's refusals (no run)."""

import io
import math
from pathlib import Path

import pytest
import yaml

from aura_eval.analyze import bands
from aura_eval.analyze.bands import Band
from aura_eval.analyze.forecast import smallest_answer
from aura_eval.tools import pilot

pytestmark = pytest.mark.fast
ROOT = Path(__file__).resolve().parents[1]


def test_a_yield_s_interval_covers_the_binomial_noise_at_the_run_s_size():
    # 1,029 of 1,029 variation candidates parse at the paper's 916/1029: exactly its count, +/- 1.96 sd
    # of a new draw (plus the paper's own estimate's share)
    n, k = bands.YIELDS["parseable"]
    got = bands.binomial_count(Band.exact(n), "parseable")
    p = k / n
    half = 1.96 * math.sqrt(n * p * (1 - p) + n * p * (1 - p))
    assert got.point == pytest.approx(k) and got.low == pytest.approx(k - half) and got.high == pytest.approx(k + half)
    # at 10 trials the interval is relatively wider, and never leaves [0, trials]
    small = bands.binomial_count(Band.exact(10), "parseable")
    assert 0 <= small.low < small.point < small.high <= 10
    assert (small.high - small.low) / small.point > (got.high - got.low) / got.point
    # a band of trials: the low of its low, the high of its high
    wide = bands.binomial_count(Band(5, 10, 20), "kept")
    assert wide.low < bands.binomial_count(Band.exact(10), "kept").low and wide.high > small.high


def test_a_pilot_s_yield_replaces_the_paper_s_only_where_it_contradicts_it():
    paper = bands.binomial_count(Band.exact(100), "kept")
    # 15 of 20 kept: the paper's 71% at 20 trials allows it, so the paper's precise rate stays
    assert bands.binomial_count(Band.exact(100), "kept", observed=(20, 15)) == paper
    seen = bands.binomial_count(Band.exact(100), "kept", observed=(20, 5))  # 25%: not the paper's models
    assert seen.point == pytest.approx(25) and seen.high - seen.low > paper.high - paper.low
    all_kept = bands.binomial_count(Band.exact(100), "parseable_pair", observed=(4, 4))
    assert all_kept == bands.binomial_count(Band.exact(100), "parseable_pair")  # 4 of 4 fits 590/593
    none = bands.binomial_count(Band.exact(100), "kept", observed=(30, 30))  # 30 of 30 does not fit 71%
    assert none.high == 100 and none.low < 95  # and is not proof that all are kept


def test_the_total_of_answers_like_those_seen_is_a_band_within_floor_and_cap():
    seen = [100, 120, 80, 110, 90]
    band = bands.mean_band(seen, 1000, floor=10, cap=4096)
    assert band.point == pytest.approx(100_000)
    # sd 15.8 over 5 answers: t(4) = 2.78 on the spread of a new total and of the mean (+/- 19,707)
    assert band.low == pytest.approx(80_293, abs=1) and band.high == pytest.approx(119_707, abs=1)
    assert bands.mean_band(seen[:2], 1000, 10, 4096) is None  # two answers: too few to tell a spread
    capped = bands.mean_band([900, 1000, 1000], 10, floor=1, cap=1000)
    assert capped.high == 10_000


def test_the_smallest_answer_of_a_schema():
    schema = {"type": "object", "required": ["level", "reason", "steps"],
              "properties": {"level": {"enum": ["D0", "D1"]}, "reason": {"type": "string"},
                             "steps": {"type": "array", "items": {"type": "integer"}, "minItems": 2},
                             "extra": {"type": "string"}}}
    assert smallest_answer(schema) == {"level": "D0", "reason": "", "steps": [0, 0]}


def test_the_pilot_refuses_a_bad_seed_count_and_pays_nothing_unasked(tmp_path):
    config = yaml.safe_load((ROOT / ".test/config/two_seeds.yaml").read_text())
    for bad in (0, -1, True, 2, 5):
        with pytest.raises(pilot.PilotError):
            pilot.pilot_config(config, bad, ROOT)
    out = io.StringIO()
    assert pilot.run(config, 1, folder=str(tmp_path / "p"), root=str(ROOT), ask=lambda _: "n", out=out) == 1
    said = out.getvalue()
    assert "the pilot: 1 seeds" in said and "it will cost" in said and said.endswith("not run\n")
    assert not (tmp_path / "p").exists()  # nothing prepared, nothing run


def test_make_pilot_and_status_run_the_commands_the_guide_names():
    import re
    import subprocess

    for target, args, command in (("pilot", ["CONFIG=config/paper.yaml", "PILOT_SEEDS=2"],
                                   "-m aura_eval pilot --seeds 2 --configfile config/paper.yaml"),
                                  ("pilot", ["CONFIG=config/paper.yaml", "PILOT_SEEDS=8"],
                                   "-m aura_eval pilot --seeds 8 --configfile config/paper.yaml"),
                                  ("status", [], "-m aura_eval status")):
        dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", target, *args], cwd=ROOT, capture_output=True,
                             text=True, check=True)
        assert re.search(re.escape(command) + r"\s*$", dry.stdout, re.M), dry.stdout
    guide = (ROOT / "docs/running-the-paper.md").read_text(encoding="utf-8")
    assert "make pilot CONFIG=config/paper.yaml PILOT_SEEDS=2" in guide and "make status" in guide
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`make pilot CONFIG=config/paper.yaml PILOT_SEEDS=8`" in readme


def test_a_pilot_s_share_is_counted_at_the_size_of_its_items():
    rows = Band.exact(1000)
    assumed = rows.scale(*bands.JUDGEABLE)
    assert bands.share_of(rows, "judgeable") == assumed  # no pilot: the assumed 60-85-100%
    # 17 items all judgeable (a 2-seed pilot): the point is what it saw, the low the Wilson bound at
    # 17 (81.6%: the share's uncertainty as 1.96 sd); it cannot rise above all of them
    seen = bands.share_of(rows, "judgeable", (17, 17))
    low17, high17 = bands.wilson(17, 17)
    assert (round(low17, 3), high17) == (0.816, 1.0)
    assert (seen.low, seen.point, seen.high) == (pytest.approx(1000 * low17), 1000, 1000)
    # a band of trials without a variance (an assumption's): the Wilson bounds less the noise of new rollouts
    loose = bands.share_of(Band(800, 1000, 1200), "judgeable", (17, 17))
    assert loose.low == pytest.approx(800 * low17 - 1.96 * math.sqrt(800 * low17 * (1 - low17)))
    assert loose.high == 1200 and loose.var is None
    # 68 items (an 8-seed pilot) narrow it: the low rises to 94.7% less the noise
    assert round(bands.wilson(68, 68)[0], 3) == 0.947
    assert bands.share_of(rows, "judgeable", (68, 68)).low > seen.low
    # 30% of 280 items: no model the assumption describes; the pilot's share stands all the same
    few = bands.share_of(rows, "judgeable", (280, 84))
    assert few.point == pytest.approx(300) and few.high < assumed.low


def test_a_count_chained_through_yields_adds_each_yield_s_noise_to_its_variance():
    # 211 prefixes (exact) -> 2,321 (prefix, dimension) -> candidates at 1,029/2,321: one binomial step
    first = bands.binomial_count(Band.exact(211 * 11), "candidate")
    p = 1029 / 2321
    assert first.var == pytest.approx(2321 * p * (1 - p) + 2321 ** 2 * p * (1 - p) / 2321)
    # the next step draws from an uncertain count: its variance carries on (times p^2 and the rate's own)
    second = bands.binomial_count(first, "parseable")
    q = 916 / 1029
    rate_var = q * (1 - q) / 1029
    assert second.var == pytest.approx(first.point * q * (1 - q) + first.var * (q * q + rate_var)
                                       + first.point ** 2 * rate_var)
    assert second.low == pytest.approx(second.point - 1.96 * math.sqrt(second.var))
    # narrower than chaining the two 95% extremes (the low of one the trials of the next one's low)
    chained = bands.binomial_count(Band(first.low, first.point, first.high), "parseable")
    assert chained.var is None and second.low > chained.low and second.high < chained.high
    # two counts of one chain add their spreads; a band of assumptions keeps no variance
    both = first + second
    assert math.sqrt(both.var) == pytest.approx(math.sqrt(first.var) + math.sqrt(second.var))
    assert first.scale(*bands.JUDGEABLE).var is None and first.scale(11, 11, 11).var == pytest.approx(121 * first.var)


def test_billed_input_tokens_per_counted_token_come_from_the_stage_s_own_answers_first():
    from types import SimpleNamespace

    from aura_eval.analyze.forecast import _tokenizer

    anthropic = SimpleNamespace(provider="anthropic")
    assert _tokenizer(anthropic, []) == (bands.TOKENIZER["anthropic"], "assumed")
    # the model's stages: their ratio in all (1,100 of 1,000), between the lowest and highest stage's
    other = [[(110, 100)] * 3, [(120, 100)] * 3, [(100, 100)] * 3]
    assert _tokenizer(anthropic, other) == ((1.0, 1.1, 1.2), "observed")
    # this stage's own four answers: billed over counted (1.15), +/- t(3) on the per-answer ratio's
    # standard error (ratios 1.1, 1.2, 1.1, 1.2: sd 0.0577, se 0.0289, t 3.18)
    own = [(110, 100), (120, 100), (110, 100), (120, 100)]
    (low, point, high), source = _tokenizer(anthropic, other, own)
    assert source == "observed" and point == pytest.approx(1.15)
    assert (low, high) == (pytest.approx(1.15 - 3.18 * 0.05773503 / 2), pytest.approx(1.15 + 3.18 * 0.05773503 / 2))


def test_a_share_seen_on_items_counts_at_its_effective_size():
    # every item all successes: nothing tells how alike an item's trials are, so each item counts once
    assert bands.effective_size([(20, 20)] * 17) == 17
    # independent trials (the same share in every item but for the noise): close to all 160 of them
    alike_free = [(20, 16), (20, 17), (20, 15), (20, 16), (20, 17), (20, 15), (20, 16), (20, 16)]
    assert 120 < bands.effective_size(alike_free) <= 160
    # items that succeed or fail together: about one trial each
    together = [(20, 20), (20, 0), (20, 20), (20, 20), (20, 0), (20, 20), (20, 20), (20, 20)]
    assert bands.effective_size(together) == pytest.approx(8, abs=0.5)
    # one item, or one trial per item: no design effect to tell
    assert bands.effective_size([(30, 20)]) == 1 and bands.effective_size([(1, 1), (1, 0), (1, 1)]) == 3
