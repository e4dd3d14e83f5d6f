"""What a run will ask of the providers, before any call: per stage x model, the number of
calls, input and output tokens, dollars, and the wall time the rate limits imply.

Counts come from the config (seeds, roles, agents, judges, reliability and action-only
settings, repeats) and from the intermediate files under `results/` where they exist (real
rows); where a stage's input does not exist yet, from the paper's funnel (`PAPER_FUNNEL`:
211 prefixes, 1,029 candidates, ..., 1,249 rows) scaled by the seeds used, marked `estimated`.
Every evaluated row is assumed judgeable where no rollouts exist.

Input tokens: the real prompts, rendered by the stages' own request builders from the files
that exist, counted as litellm's `token_counter` counts them for gpt-4o (aura_eval.util.tokens,
without importing litellm; one tokenizer for every model: an estimate for vendors whose tokenizer
differs); where a stage's input is missing, the prompt template plus the stage's `trajectory_copies`
x the mean tokens of the seeds' trajectories (the seeds are selected from the raw R-Judge files, so
this needs no model call), marked `estimated`.
Output tokens: the mean observed in the call logs for that stage and model where they exist,
else the stage's `output_tokens` (aura_eval.stages); both capped at the model's `max_tokens`.
Dollars: `llm.pricing` (litellm's local cost map, else the entry's `price`; batch prices where
`batch: true`); an unpriced model shows as unpriced, never $0.
Wall time: per rate-limit bucket (`llm.rate_limits`: a `provider/model` key, else the
provider), calls over rpm and tokens over tpm, whichever is longer; stages run one after
another, so the run's bound is the sum over stages of each stage's slowest bucket. Batch
calls are not paced by those limits (the providers answer batches within 24 h).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import string
from collections import defaultdict
from pathlib import Path

from aura_eval import jobs, stages
from aura_eval.construct.funnel import PAPER_FUNNEL
from aura_eval.construct.seeds import load_seeds, stratified_subset
from aura_eval.construct.tagging import render_steps
from aura_eval.llm import pricing, providers, ratelimit
from aura_eval.llm.types import endpoint_from
from aura_eval.util.csv_cells import protect_row
from aura_eval.util.jsonl import atomic_write_text, read_jsonl
from aura_eval.util.prompts import load_prompt
from aura_eval.util.tokens import chat_tokens
from aura_eval.vocab import AGENT_PROMPTS, AXES, FILES, JUDGE_PROMPTS, REACT, parse_run, stage_group

PAPER_SEEDS = 157
ROWS_COLUMNS = ["stage", "endpoint", "model", "provider", "batch", "calls", "tokens_in", "tokens_out", "usd",
                "usd_standard", "usd_batch", "price_source", "counts", "tokens", "output_from"]

_TOKENS: dict[str, int] = {}  # sha256 of a prompt's messages -> its tokens (panels repeat prompts)


def count_tokens(messages: list[dict]) -> int:
    """Tokens of a chat prompt (aura_eval.util.tokens: as litellm's token_counter counts for gpt-4o,
    without importing litellm), memoised by text."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    if digest not in _TOKENS:
        _TOKENS[digest] = chat_tokens(messages)
    return _TOKENS[digest]


def _template_tokens(prompt_id: str) -> int:
    """A prompt's own tokens: the template with every placeholder empty."""
    prompt = load_prompt(prompt_id)
    names = {n for text in (prompt.system, prompt.user) for n in string.Template(text).get_identifiers()}
    return count_tokens(prompt.messages(**{n: "" for n in names}))


def _read(root: Path, rel: str) -> list[dict] | None:
    path = root / rel
    return read_jsonl(path) if path.exists() else None


class _Plan:
    """Calls and input tokens per (stage, endpoint name), with where the numbers came from."""

    def __init__(self):
        self.cells: dict[tuple, dict] = {}

    def add(self, stage, endpoint, calls, tokens_in, counts, tokens):
        cell = self.cells.setdefault((stage, endpoint), {"calls": 0, "tokens_in": 0, "counts": set(), "tokens": set()})
        cell["calls"] += calls
        cell["tokens_in"] += tokens_in
        cell["counts"].add(counts)
        cell["tokens"].add(tokens)


def plan(config: dict, root: str | Path = ".", results: bool = True, seeds: list[dict] | None = None) -> _Plan:
    """Calls and input tokens of every job of every model stage (aura_eval.stages, aura_eval.jobs):
    the requests its own builder makes where its inputs exist, else an estimate; `results=False`
    reads no intermediate file (the forecast before any call: the config and the raw R-Judge files
    only); `seeds`, when given, are the run's seeds (else read or selected from `rjudge_dir`)."""
    root = Path(root)
    read_file = (lambda rel: _read(root, rel)) if results else (lambda rel: None)
    seeds_read = read_file(FILES["seeds"])
    seeds = seeds or seeds_read or stratified_subset(load_seeds(root / config["rjudge_dir"]), config["seeds"])

    def read(name: str):
        return seeds if name == "seeds" else read_file(FILES.get(name, name))

    p = _Plan()
    trajectory = sum(count_tokens([{"role": "user", "content": render_steps(s["steps"])}]) for s in seeds) / len(seeds)
    estimates = _Estimates(config, len(seeds) / PAPER_SEEDS, trajectory, read)
    for stage in stages.registry().values():
        for job in jobs.stage_jobs(config, stage.wildcards):
            names = jobs.job_models(config, stage.role, job)
            ctx = stages.StageInputs(read, job, [{"name": n, **config["models"][n]} for n in names], config)
            requests = stage.requests(ctx) if stage.requests else None
            if requests is None:
                for name, calls, tokens_in, basis in estimates.calls(stage, job, names):
                    p.add(stage_group_of(stage, job), name, calls, tokens_in, basis, "estimated")
                continue
            basis = "config" if stage.rule == "tag_steps" and not seeds_read else "files"
            by_endpoint = defaultdict(lambda: [0, 0])
            for r in requests:
                by_endpoint[r.endpoint.name][0] += 1
                by_endpoint[r.endpoint.name][1] += count_tokens(r.messages)
            for name, (n, tokens) in by_endpoint.items():
                p.add(stage.rule, name, n, tokens, basis, "rendered")
            estimates.asked(stage.rule, len(requests) // max(1, len(names)))
    return p


def stage_group_of(stage: stages.ModelStage, job: dict) -> str:
    """The call-log group of one job (reliability jobs: per kind), as vocab.stage_group gives it."""
    return stage_group(":".join([stage.rule, *job.values()])) if stage.groups else stage.rule


class _Estimates:
    """Calls and input tokens of the jobs whose inputs do not exist yet. A construction stage's
    units follow the stage before at the paper's ratio (candidates per prefix, parseable per
    candidate, ...: PAPER_FUNNEL), from the real count where the stage before could be counted,
    so estimates and real counts chain; an evaluation job asks about every released row (or the
    action-only subset), three axes per calibration item and panel member for reliability."""

    def __init__(self, config: dict, scale: float, trajectory: float, read):
        self.config, self.scale, self.trajectory, self.read = config, scale, trajectory, read
        self.units: dict[str, int] = {}  # rule -> units it asks about (one per request, per panel member)
        self.ratio = {name: PAPER_FUNNEL[b] / PAPER_FUNNEL[a] for name, (a, b) in {
            "candidates": ("prefixes", "variation candidates"),
            "parseable": ("variation candidates", "parseable variations"),
            "kept": ("parseable variations", "kept variations"), "pairs": ("classified pool", "pair candidates"),
            "parseable_pairs": ("pair candidates", "parseable pairs"), "kept_pairs": ("parseable pairs", "kept pairs")}.items()}

    def asked(self, rule: str, units: int) -> None:
        self.units[rule] = units

    def _construction_units(self, rule: str) -> int:
        u, r = self.units, self.ratio
        if rule == "relevance":
            return round(PAPER_FUNNEL["prefixes"] * self.scale)
        if rule == "vary":
            cap = self.config.get("construction", {}).get("max_candidates_per_prefix")
            n = round(u["relevance"] * r["candidates"])
            return min(n, cap * u["relevance"]) if cap else n
        return {"review_variations": lambda: round(u["vary"] * r["parseable"]),
                "classify": lambda: u["relevance"] + round(u["review_variations"] * r["kept"]),
                "generate_pairs": lambda: round(u["classify"] * r["pairs"]),
                "review_pairs": lambda: round(u["generate_pairs"] * r["parseable_pairs"])}[rule]()

    def rows(self) -> tuple[int, str]:
        """Released rows (real, or the pool and its kept counterparts less the paper's final filtering)."""
        dataset = self.read("dataset")
        if dataset is not None:
            return len(dataset), "files"
        released = PAPER_FUNNEL["released rows"] / (PAPER_FUNNEL["classified pool"] + PAPER_FUNNEL["kept pairs"])
        kept_pairs = round(self.units["review_pairs"] * self.ratio["kept_pairs"])
        return round((self.units["classify"] + kept_pairs) * released), "estimated"

    def _per_call(self, prompt_id: str, copies: float) -> int:
        return round(_template_tokens(prompt_id) + copies * self.trajectory)

    def calls(self, stage: stages.ModelStage, job: dict, names: list[str]):
        """[(model name, calls, input tokens, basis)] of one job."""
        if "run" not in job and "kind" not in job:  # a construction stage: one job
            n = self._construction_units(stage.rule)
            self.asked(stage.rule, n)
            # the last prompt is the one most units use (P4, P6: ten of the eleven dimensions)
            per_call = self._per_call(stage.prompts[-1], stage.trajectory_copies)
            return [(name, n, n * per_call, "estimated") for name in names]
        n_rows, basis = self.rows()
        judge_in = {axis: round(_template_tokens(JUDGE_PROMPTS[axis]) + self.trajectory
                                + stage_output_tokens("rollout") / 2) for axis in AXES}
        if "run" in job:
            fmt = parse_run(job["run"])[1]
            n = n_rows if fmt == REACT else min(self.config.get("action_only", {}).get("n_items", 0), n_rows)
            if stage.rule == "rollout":
                return [(names[0], n, n * self._per_call(AGENT_PROMPTS[(REACT, "text")], 1), basis)]
            axes = ("action_safety",) if stage.rule == "judge_safety" else (
                ("detection", "action_type") if fmt == REACT else ("action_type",))
            return [(names[0], n * len(axes), n * sum(judge_in[a] for a in axes), basis)]
        rel, mean_in = self.config.get("reliability", {}), round(sum(judge_in.values()) / len(AXES))
        calibration = min(rel.get("calibration_items", 0), n_rows)
        if job["kind"] == "vendor_swap":
            models, vendor = self.config["models"], self.config["agents"][job["agent"]]["vendor"]
            n = 3 * min(rel.get("vendor_swap_items", 0), n_rows)
            panel = [self.config["roles"]["replacement_judge"] if models[j].get("vendor") == vendor else j
                     for j in jobs.judges(self.config)]
            return [(name, n, n * mean_in, "config") for name in panel]
        n = 3 * calibration * (rel.get("repeats", 0) if job["kind"] == "repeats" else 1)
        return [(name, n, n * mean_in, "config") for name in names]


def stage_output_tokens(group: str) -> int:
    """The forecast's guess of one answer's tokens in a call-log group, before any call log shows them."""
    return stages.stage(group.split(":")[0]).output_tokens


def observed_output_tokens(root: str | Path) -> dict[tuple[str, str], float]:
    """Mean tokens_out per (stage, endpoint) over the call logs under results/calls/ (calls that answered)."""
    sums: dict[tuple, list] = defaultdict(lambda: [0, 0])
    for path in sorted((Path(root) / "results" / "calls").rglob("*.jsonl")):
        for row in read_jsonl(path):
            if row.get("tokens_out") is not None:
                cell = sums[(stage_group(row["stage"]), row["endpoint"])]
                cell[0] += row["tokens_out"]
                cell[1] += 1
    return {key: total / n for key, (total, n) in sums.items() if n}


def forecast(config: dict, root: str | Path = ".", results: bool = True, seeds: list[dict] | None = None) -> dict:
    """{"rows": per stage x endpoint, "limits": per rate-limit bucket, "totals": {...}}; see the module doc."""
    root = Path(root)
    p = plan(config, root, results, seeds)
    observed = observed_output_tokens(root) if results else {}
    rows = []
    for stage in stages.call_groups():
        for (s, name), cell in sorted(p.cells.items()):
            if s != stage:
                continue
            spec = config["models"][name]
            ep = endpoint_from(name, spec)
            batch = bool(spec.get("batch", False))
            cap = ep.params.get("max_tokens")
            per_call, source = ((observed[(stage, name)], "call logs") if (stage, name) in observed
                                else (stage_output_tokens(stage), "default"))
            if cap is not None:
                per_call = min(per_call, cap)
            tokens_out = round(per_call * cell["calls"])
            standard = pricing.per_token(ep.model, ep.price, batch=False)
            batched = pricing.per_token(ep.model, ep.price, batch=True)

            def usd(rates):
                return None if rates is None else cell["tokens_in"] * rates[0] + tokens_out * rates[1]

            chosen = batched if batch else standard
            rows.append({"stage": stage, "endpoint": name, "model": ep.model, "provider": ep.provider, "batch": batch,
                         "calls": cell["calls"], "tokens_in": cell["tokens_in"], "tokens_out": tokens_out,
                         "usd": usd(chosen), "usd_standard": usd(standard), "usd_batch": usd(batched),
                         "price_source": chosen[2] if chosen else "unpriced",
                         "counts": "+".join(sorted(cell["counts"])), "tokens": "+".join(sorted(cell["tokens"])),
                         "output_from": source})
    return {"rows": rows, **wall_time(rows, config.get("llm", {}).get("rate_limits") or {}), "totals": totals(rows)}


def totals(rows: list[dict]) -> dict:
    priced = [r for r in rows if r["usd"] is not None]
    return {"calls": sum(r["calls"] for r in rows), "tokens_in": sum(r["tokens_in"] for r in rows),
            "tokens_out": sum(r["tokens_out"] for r in rows),
            "usd": sum(r["usd"] for r in priced), "usd_standard": sum(r["usd_standard"] for r in priced),
            "usd_batch": sum(r["usd_batch"] for r in priced),
            "unpriced_calls": sum(r["calls"] for r in rows if r["usd"] is None),
            "unpriced_models": sorted({r["endpoint"] for r in rows if r["usd"] is None})}


def wall_time(rows: list[dict], limits: dict) -> dict:
    """Per bucket: calls, tokens, the minutes its rpm/tpm imply; and the run's bound (seconds)."""
    buckets: dict[str, dict] = {}
    stage_cells: dict[tuple, list] = defaultdict(lambda: [0, 0])
    for r in rows:
        if r["batch"]:
            continue
        key = ratelimit.limit_key(r["model"], limits) or providers.provider_of(r["model"])  # as the jobs pace
        b = buckets.setdefault(key, {"bucket": key, "calls": 0, "tokens": 0})
        b["calls"] += r["calls"]
        b["tokens"] += r["tokens_in"] + r["tokens_out"]
        cell = stage_cells[(r["stage"], key)]
        cell[0] += r["calls"]
        cell[1] += r["tokens_in"] + r["tokens_out"]

    def seconds(key, calls, tokens):
        limit = limits.get(key) or {}
        times = [60.0 * calls / limit["rpm"]] if limit.get("rpm") else []
        times += [60.0 * tokens / limit["tpm"]] if limit.get("tpm") else []
        return max(times) if times else None

    for key, b in buckets.items():
        b["rpm"], b["tpm"] = (limits.get(key) or {}).get("rpm"), (limits.get(key) or {}).get("tpm")
        b["wall_s"] = seconds(key, b["calls"], b["tokens"])
    unlimited = sorted(k for k, b in buckets.items() if b["wall_s"] is None)
    if len(unlimited) == len(buckets):
        return {"limits": [buckets[k] for k in sorted(buckets)], "wall_s": None, "unlimited": unlimited}
    bound = 0.0
    for stage in stages.call_groups():
        times = [seconds(k, c, t) for (s, k), (c, t) in stage_cells.items() if s == stage]
        times = [t for t in times if t is not None]
        bound += max(times, default=0.0)
    return {"limits": [buckets[k] for k in sorted(buckets)], "wall_s": bound, "unlimited": unlimited}


# -- output ---------------------------------------------------------------------------

def _money(value) -> str:
    return "unpriced" if value is None else f"${value:,.2f}"


def _duration(seconds) -> str:
    if seconds is None:
        return "no limit configured"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def text(result: dict) -> str:
    """The forecast as the command prints it."""
    lines = [f"{'stage':<26} {'model':<34} {'calls':>8} {'tokens in':>13} {'tokens out':>12} {'dollars':>12}  basis"]
    for r in result["rows"]:
        basis = f"counts {r['counts']}, prompts {r['tokens']}, output {r['output_from']}, {r['price_source']}"
        lines.append(f"{r['stage']:<26} {r['endpoint']:<34} {r['calls']:>8,} {r['tokens_in']:>13,} "
                     f"{r['tokens_out']:>12,} {_money(r['usd']):>12}  {basis}")
    t = result["totals"]
    lines.append(f"{'total':<61} {t['calls']:>8,} {t['tokens_in']:>13,} {t['tokens_out']:>12,} {_money(t['usd']):>12}")
    lines.append(f"dollars of the priced calls: {_money(t['usd_standard'])} at standard prices, "
                 f"{_money(t['usd_batch'])} with every model in batch mode, {_money(t['usd'])} as configured")
    if t["unpriced_calls"]:
        lines.append(f"unpriced (no price in litellm's map nor a `price` in the entry): {t['unpriced_calls']:,} calls "
                     f"of {', '.join(t['unpriced_models'])}")
    lines.append("rate limits (llm.rate_limits), per bucket:")
    for b in result["limits"]:
        limit = "no limit configured" if b["wall_s"] is None else (
            f"rpm {b['rpm'] or '-'}, tpm {b['tpm'] or '-'}: {_duration(b['wall_s'])}")
        lines.append(f"  {b['bucket']:<40} {b['calls']:>8,} calls {b['tokens']:>14,} tokens  {limit}")
    if result["wall_s"] is None:
        lines.append("wall time: no bucket has a rate limit configured (llm.rate_limits), so none is implied")
    else:
        lines.append(f"wall time the limits imply (stages one after another, each at its slowest limited bucket): "
                     f"{_duration(result['wall_s'])}" + (f"; not counted, no limit configured: "
                                                         f"{', '.join(result['unlimited'])}" if result["unlimited"] else ""))
    return "\n".join(lines) + "\n"


def write(result: dict, out_dir: str | Path) -> list[Path]:
    """forecast.csv (the rows) and forecast.json (everything) under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = io.StringIO()
    writer = csv.DictWriter(rows, fieldnames=ROWS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(protect_row(row) for row in result["rows"])
    atomic_write_text(out / "forecast.csv", rows.getvalue())
    atomic_write_text(out / "forecast.json", json.dumps(result, indent=1, sort_keys=True) + "\n")
    return [out / "forecast.csv", out / "forecast.json"]
