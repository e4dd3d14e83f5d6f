"""What the forecast says (aura_eval.analyze.forecast computes it): the text `python -m aura_eval
forecast` prints, the run's status while it goes (`status`), the budget line a run prints before its
first call, and the files `forecast --out` writes (forecast.csv with the `All` row, forecast.json).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from aura_eval.analyze.forecast import RATE_WINDOW_S, ROWS_COLUMNS, forecast
from aura_eval.util.csv_cells import protect_row
from aura_eval.util.jsonl import atomic_write_text


def money(value) -> str:
    return "unpriced" if value is None else f"${value:,.2f}"


def duration(seconds) -> str:
    if seconds is None:
        return "unbounded"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def band_text(low, point, high, fmt) -> str:
    width = "" if high is None or not point else f", width {(high - low) / point:.0%} of the point"
    return f"{fmt(point)} (band {fmt(low)} to {fmt(high) if high is not None else 'unbounded'}{width})"


def number(value) -> str:
    return "unbounded" if value is None else f"{value:,.0f}"


def text(result: dict) -> str:
    """The forecast as the command prints it: the total's band first, then per stage x model."""
    t, c = result["total"], result["ceiling"]
    lines = []
    if result.get("ignored"):
        lines.append(f"note: {result['ignored']}")
    if result.get("pilot"):
        lines.append(f"pilot: {result['pilot']}")
    lines += [f"left to pay: {band_text(t['usd_low'], t['usd'], t['usd_high'], money)}",
              f"  calls {band_text(t['calls_low'], t['calls'], t['calls_high'], number)}",
              f"  tokens in {band_text(t['tokens_in_low'], t['tokens_in'], t['tokens_in_high'], number)}",
              f"  tokens out {band_text(t['tokens_out_low'], t['tokens_out'], t['tokens_out_high'], number)}",
              f"paid so far (answers in this run's cache): {t['paid_calls']:,} answers, "
              f"{t['paid_tokens_in']:,} tokens in, {t['paid_tokens_out']:,} tokens out, {money(t['paid_usd'])}",
              f"ceiling (paid + every yield at its most, every answer at max_tokens): {number(c['calls'])} calls, "
              f"{ceiling_usd(result)}" + (
                  f" (no max_tokens: {', '.join(c['uncapped'])})" if c["uncapped"] else "")]
    if t["price_source"] != "all priced":
        lines.append(f"unpriced (no price in litellm's map nor a `price` in the entry): "
                     f"{', '.join(result['totals']['unpriced_models'])}: their dollars are not in the band")
    if result.get("budget_usd") is not None:
        lines.append(budget_line(result))
    lines.append("wall time left: nothing is left" if not t["calls_high"] else f"wall time left ({result['wall_from']}): "
                 f"{band_text(result['wall_s_low'], result['wall_s'], result['wall_s_high'], duration)}"
                 + (f"; and the batch stages ({', '.join(result['batch_stages'])}), one after another but the "
                    f"reliability runs side by side: "
                    f"{result['batch_h'][0]:.1f} to {result['batch_h'][2]:.0f} h, typically "
                    f"{result['batch_h'][1]:.0f} h" if result["batch_stages"] else ""))
    lines.append("")
    lines.append(f"{'stage':<26} {'model':<30} {'calls left':>20} {'dollars left':>24} {'paid':>16}  basis")
    for r in result["rows"]:
        calls = f"{r['calls']:,} [{r['calls_low']:,}-{number(r['calls_high'])}]"
        usd = "unpriced" if r["usd"] is None else (
            f"{money(r['usd'])} [{money(r['usd_low'])}-{money(r['usd_high']) if r['usd_high'] is not None else 'unbounded'}]")
        basis = (f"counts {r['counts']}, keys {r['keys']}, {r['tokens']}, output {r['output_from']}, "
                 f"{r['price_source']}" + (f"; {r['note']}" if r["note"] else ""))
        lines.append(f"{r['stage']:<26} {r['endpoint']:<30} {calls:>20} {usd:>24} "
                     f"{r['paid_calls']:>6,} {money(r['paid_usd']):>9}  {basis}")
    lines.append("rate limits (llm.rate_limits), per bucket:")
    for b in result["limits"]:
        limit = "no limit configured" if b["wall_s"] is None else (
            f"rpm {b['rpm'] or '-'}, tpm {b['tpm'] or '-'}: {duration(b['wall_s'])}")
        lines.append(f"  {b['bucket']:<40} {b['calls']:>8,} calls {b['tokens']:>14,} tokens  {limit}")
    lines.append("assumptions: docs/running-the-paper.md#the-cost-band")
    return "\n".join(lines) + "\n"


def ceiling_usd(result: dict) -> str:
    c = result["ceiling"]
    if all(r["usd"] is None for r in result["rows"]):
        return "unpriced"
    return "unbounded" if c["usd"] is None else money(c["usd"])


def budget_line(result: dict) -> str:
    """Whether `llm.budget_usd` covers the paid, the band and the ceiling."""
    budget, t, c = result["budget_usd"], result["total"], result["ceiling"]
    worst = c["usd"]
    if worst is not None and t["paid_usd"] + 0 <= budget and worst <= budget:
        return f"budget (llm.budget_usd) ${budget:,.2f}: covers the ceiling ({money(worst)})"
    high = t["usd_high"]
    where = ("the ceiling is unbounded" if worst is None else f"the ceiling ({money(worst)}) passes it")
    if high is not None and t["paid_usd"] + high <= budget:
        return f"budget (llm.budget_usd) ${budget:,.2f}: covers the band's high, but {where}"
    return (f"budget (llm.budget_usd) ${budget:,.2f}: paid {money(t['paid_usd'])} + left "
            f"{band_text(t['usd_low'], t['usd'], t['usd_high'], money)} may pass it ({where}); the run stops "
            f"sending once its spend would pass the budget")


def budget_at_start(config: dict, root: str | Path = ".") -> str:
    """The line a run with `llm.budget_usd` prints before its first call: what it paid, the band of
    what is left and the ceiling against the budget (the budget itself stops the spending)."""
    result = forecast(config, root)
    t = result["total"]
    return (f"{budget_line(result)}. Left to pay: {band_text(t['usd_low'], t['usd'], t['usd_high'], money)}; "
            f"ceiling {ceiling_usd(result)}"
            + (f"; unpriced, not counted: {', '.join(result['totals']['unpriced_models'])}"
               if result["totals"]["unpriced_models"] else ""))


def write(result: dict, out_dir: str | Path) -> list[Path]:
    """forecast.csv (the rows and the `All` total) and forecast.json (everything) under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = io.StringIO()
    writer = csv.DictWriter(rows, fieldnames=ROWS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(protect_row(row) for row in [*result["rows"], result["total"]])
    atomic_write_text(out / "forecast.csv", rows.getvalue())
    atomic_write_text(out / "forecast.json", json.dumps(result, indent=1, sort_keys=True) + "\n")
    return [out / "forecast.csv", out / "forecast.json"]


def status_text(result: dict) -> str:
    """A run while it goes (`python -m aura_eval status`): per stage x model, answers paid and their
    dollars, what is left as a band, the rate of the last ten minutes and the time left at that rate."""
    t = result["total"]
    rate = result["recent"]["per_minute"]
    left = ("none: nothing is left" if not t["calls_high"] else
            f"{t['calls'] / rate:.0f} min at that rate" if rate else "no answer in the last ten minutes")
    lines = [f"paid: {t['paid_calls']:,} answers, {money(t['paid_usd'])} "
             f"({t['paid_tokens_in']:,} tokens in, {t['paid_tokens_out']:,} out)",
             f"left: {band_text(t['calls_low'], t['calls'], t['calls_high'], number)} calls, "
             f"{band_text(t['usd_low'], t['usd'], t['usd_high'], money)}",
             f"rate: {rate:.1f} answers a minute (last {RATE_WINDOW_S // 60} min); time left: {left}", "",
             f"{'stage':<26} {'model':<30} {'paid':>8} {'dollars':>10} {'left (band)':>26} {'per min':>8}"]
    for r in result["rows"]:
        band = f"{r['calls']:,} [{r['calls_low']:,}-{number(r['calls_high'])}]"
        per = result["recent"]["cells"].get(f"{r['stage']}|{r['endpoint']}", 0.0)
        lines.append(f"{r['stage']:<26} {r['endpoint']:<30} {r['paid_calls']:>8,} {money(r['paid_usd']):>10} "
                     f"{band:>26} {per:>8.1f}")
    if result.get("ignored"):
        lines.append(f"note: {result['ignored']}")
    return "\n".join(lines) + "\n"
