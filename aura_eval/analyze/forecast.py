"""What a run will ask of the providers, before any call: per stage x model, the number of
calls, input and output tokens, dollars, and the wall time the rate limits imply.

Counts come from the config (seeds, roles, agents, judges, reliability and action-only
settings, repeats) and from the intermediate files under `results/` where they exist (real
rows); where a stage's input does not exist yet, from the paper's funnel (`PAPER_FUNNEL`:
211 prefixes, 1,029 candidates, ..., 1,249 rows) scaled by the seeds used, marked `estimated`.
Every evaluated row is assumed judgeable where no rollouts exist.

Input tokens: the real prompts, rendered by the stages' own request builders from the files
that exist, counted with litellm's `token_counter` (its default tokenizer for every model: an
estimate for vendors whose tokenizer differs); where a stage's input is missing, the prompt
template plus `TRAJECTORY_COPIES` x the mean tokens of the seeds' trajectories (the seeds are
selected from the raw R-Judge files, so this needs no model call), marked `estimated`.
Output tokens: the mean observed in the call logs for that stage and model where they exist,
else `DEFAULT_OUTPUT_TOKENS` for the stage; both capped at the model's `max_tokens`.
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
import json
import os
import string
from collections import defaultdict
from pathlib import Path

from aura_eval.construct.funnel import PAPER_FUNNEL
from aura_eval.construct.pairing import classification_request, pair_request, pair_review_requests, pool_items
from aura_eval.construct.seeds import load_seeds, stratified_subset
from aura_eval.construct.tagging import render_steps, tag_request
from aura_eval.construct.variation import relevance_request, review_requests, variation_request
from aura_eval.evaluate.judging import _request as judge_request
from aura_eval.evaluate.judging import judgeable
from aura_eval.evaluate.rollout import rollout_request
from aura_eval.llm import pricing, providers, ratelimit
from aura_eval.llm.types import endpoint_from
from aura_eval.util.jsonl import read_jsonl
from aura_eval.util.prompts import load_prompt
from aura_eval.vocab import (
    ACTION_ONLY,
    AGENT_PROMPTS,
    AXES,
    FILES,
    JUDGE_PROMPTS,
    MODEL_STAGES,
    REACT,
    load_taxonomy,
    run_name,
    stage_group,
)

PAPER_SEEDS = 157
STAGES = MODEL_STAGES
# Output tokens per call where no call log shows them yet: our estimate of a typical answer
# (a JSON verdict, a rewritten trajectory, a thought and action), capped at max_tokens.
DEFAULT_OUTPUT_TOKENS = {"tag_steps": 120, "relevance": 600, "vary": 2000, "review_variations": 300,
                         "classify": 600, "generate_pairs": 2500, "review_pairs": 400, "rollout": 400,
                         "judge_detection_type": 150, "judge_safety": 150, "reliability:five_judge": 150,
                         "reliability:repeats": 150, "reliability:vendor_swap": 150}
# For an estimated prompt: how many trajectories (seed-sized) each stage's prompt holds.
TRAJECTORY_COPIES = {"tag_steps": 1, "relevance": 1, "vary": 1, "review_variations": 2, "classify": 1,
                     "generate_pairs": 2, "review_pairs": 3, "rollout": 1}
STAGE_PROMPTS = {"tag_steps": ["p1_step_tagging"], "relevance": ["p2_dimension_relevance"],
                 "vary": ["p4_context_variation"], "review_variations": ["p6_context_review"],
                 "classify": ["p7_pair_classification"], "generate_pairs": ["p8_pair_generation"],
                 "review_pairs": ["p9_pair_review"]}
ROWS_COLUMNS = ["stage", "endpoint", "model", "provider", "batch", "calls", "tokens_in", "tokens_out", "usd",
                "usd_standard", "usd_batch", "price_source", "counts", "tokens", "output_from"]

_litellm = None
_TOKENS: dict[str, int] = {}  # sha256 of a prompt's messages -> its tokens (panels repeat prompts)


def count_tokens(messages: list[dict]) -> int:
    """Tokens of a chat prompt (litellm's token_counter, its default tokenizer), memoised by text.
    litellm is imported at the first count (seconds), never when this module is imported."""
    global _litellm
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    if digest not in _TOKENS:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the price map
            import litellm

            _litellm = litellm
        _TOKENS[digest] = int(_litellm.token_counter(model="gpt-4o", messages=messages))
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


def _as_list(value):
    return value if isinstance(value, list) else [value]


def plan(config: dict, root: str | Path = ".", results: bool = True, seeds: list[dict] | None = None) -> _Plan:
    """Calls and input tokens of every model stage; `results=False` reads no intermediate file
    (the forecast before any call: the config and the raw R-Judge files only); `seeds`, when
    given, are the run's seeds (else read or selected from `rjudge_dir`)."""
    root = Path(root)
    read = (lambda rel: _read(root, rel)) if results else (lambda rel: None)
    roles, models = config["roles"], config["models"]
    endpoint = {name: endpoint_from(name, spec) for name, spec in models.items()}
    p = _Plan()

    seeds = seeds or read(FILES["seeds"]) or stratified_subset(load_seeds(root / config["rjudge_dir"]), config["seeds"])
    scale = len(seeds) / PAPER_SEEDS
    trajectory = sum(count_tokens([{"role": "user", "content": render_steps(s["steps"])}]) for s in seeds) / len(seeds)

    def estimated_in(stage):
        return round(_template_tokens(STAGE_PROMPTS[stage][0]) + TRAJECTORY_COPIES[stage] * trajectory)

    def real(stage, requests, counts="files"):
        by_endpoint = defaultdict(lambda: [0, 0])
        for r in requests:
            by_endpoint[r.endpoint.name][0] += 1
            by_endpoint[r.endpoint.name][1] += count_tokens(r.messages)
        for name, (n, tokens) in by_endpoint.items():
            p.add(stage, name, n, tokens, counts, "rendered")

    def estimate(stage, names, n, counts="estimated"):
        for name in _as_list(names):
            p.add(stage, name, n, n * estimated_in(stage), counts, "estimated")

    # -- construction ----------------------------------------------------------------
    prompt_of = {pid: load_prompt(pid) for pids in STAGE_PROMPTS.values() for pid in pids}
    prompt_of |= {pid: load_prompt(pid) for pid in ("p3_intensity_variation", "p5_intensity_review")}
    taxonomy = load_taxonomy()
    real("tag_steps", [tag_request(s, prompt_of["p1_step_tagging"], endpoint[roles["tagger"]]) for s in seeds],
         counts="files" if read(FILES["seeds"]) else "config")
    # Where a stage's input is missing, its count follows the stage before at the paper's ratio
    # (candidates per prefix, parseable per candidate, ...), so estimates and real counts chain.
    ratio = {name: PAPER_FUNNEL[b] / PAPER_FUNNEL[a] for name, (a, b) in {
        "candidates": ("prefixes", "variation candidates"), "parseable": ("variation candidates", "parseable variations"),
        "kept": ("parseable variations", "kept variations"), "pairs": ("classified pool", "pair candidates"),
        "parseable_pairs": ("pair candidates", "parseable pairs"), "kept_pairs": ("parseable pairs", "kept pairs")}.items()}
    prefixes = read(FILES["prefixes"])
    if prefixes is not None:
        real("relevance", [relevance_request(x, prompt_of["p2_dimension_relevance"], taxonomy,
                                             endpoint[roles["relevance"]]) for x in prefixes])
        n_prefixes = len(prefixes)
    else:
        n_prefixes = round(PAPER_FUNNEL["prefixes"] * scale)
        estimate("relevance", roles["relevance"], n_prefixes)
    by_prefix = {x["prefix_id"]: x for x in prefixes or []}
    candidates = read("results/construct/candidates.jsonl")
    if candidates is not None and prefixes is not None:
        selected = [c for c in candidates if c["selected"]]
        real("vary", [variation_request(c, by_prefix, prompt_of, taxonomy, endpoint[roles["generator"]])
                      for c in selected])
        n_candidates = len(selected)
    else:
        cap = config.get("construction", {}).get("max_candidates_per_prefix")
        n_candidates = round(n_prefixes * ratio["candidates"])
        n_candidates = min(n_candidates, cap * n_prefixes) if cap else n_candidates
        estimate("vary", roles["generator"], n_candidates)
    variations = read("results/construct/variations.jsonl")
    reviewers = [endpoint[n] for n in _as_list(roles["reviewers"])]
    if variations is not None and prefixes is not None:
        passed = [v for v in variations if v["passed_gate"]]
        real("review_variations", [r for v in passed
                                   for r in review_requests(v, by_prefix, prompt_of, taxonomy, reviewers)])
        n_reviewed = len(passed)
    else:
        n_reviewed = round(n_candidates * ratio["parseable"])
        estimate("review_variations", roles["reviewers"], n_reviewed)
    reviews = read("results/construct/variation_reviews.jsonl")
    if None not in (prefixes, variations, reviews):
        pool_in = pool_items(prefixes, variations, reviews)
        real("classify", [classification_request(i, prompt_of["p7_pair_classification"], endpoint[roles["classifier"]])
                          for i in pool_in])
        n_pool = len(pool_in)
    else:
        n_pool = n_prefixes + round(n_reviewed * ratio["kept"])
        estimate("classify", roles["classifier"], n_pool)
    pool = read(FILES["pool"])
    by_seed = {s["seed_id"]: s for s in seeds}
    if pool is not None:
        pairable = [i for i in pool if i["classification"]["pairable"]]
        real("generate_pairs", [pair_request(i, by_seed[i["seed_id"]], prompt_of["p8_pair_generation"],
                                             endpoint[roles["pair_generator"]]) for i in pairable])
        n_pairs = len(pairable)
    else:
        n_pairs = round(n_pool * ratio["pairs"])
        estimate("generate_pairs", roles["pair_generator"], n_pairs)
    pairs = read(FILES["pairs"])
    pair_reviewers = [endpoint[n] for n in _as_list(roles["pair_reviewers"])]
    if pairs is not None and pool is not None:
        by_item = {i["item_id"]: i for i in pool}
        checked = [x for x in pairs if x["passed_checks"]]
        real("review_pairs", [r for x in checked
                              for r in pair_review_requests(x, by_item, prompt_of["p9_pair_review"], pair_reviewers)])
        n_pair_reviews = len(checked)
    else:
        n_pair_reviews = round(n_pairs * ratio["parseable_pairs"])
        estimate("review_pairs", roles["pair_reviewers"], n_pair_reviews)

    # -- evaluation ------------------------------------------------------------------
    dataset = read(FILES["dataset"])
    # Released rows: the pool and its kept counterparts, less the paper's final filtering share.
    paper_released = PAPER_FUNNEL["released rows"] / (PAPER_FUNNEL["classified pool"] + PAPER_FUNNEL["kept pairs"])
    n_rows = len(dataset) if dataset is not None else round(
        (n_pool + round(n_pair_reviews * ratio["kept_pairs"])) * paper_released)
    rows_basis = "files" if dataset is not None else "estimated"
    judges = _as_list(roles["judges"])
    judge_prompts = {axis: load_prompt(JUDGE_PROMPTS[axis]) for axis in AXES}
    agent_out = DEFAULT_OUTPUT_TOKENS["rollout"]
    action_only = set(config.get("action_only", {}).get("agents", []))
    n_subset = min(config.get("action_only", {}).get("n_items", 0), n_rows)
    subset = read(FILES["subset"])
    items = {i["item_id"]: i for i in dataset or []}
    agent_template = _template_tokens(AGENT_PROMPTS[(REACT, "text")])
    judge_templates = {axis: _template_tokens(JUDGE_PROMPTS[axis]) for axis in AXES}
    per_judge_call = {axis: round(judge_templates[axis] + trajectory + agent_out / 2) for axis in AXES}
    mean_judge_in = round(sum(per_judge_call.values()) / len(AXES))

    for agent, spec in config["agents"].items():
        for fmt in (REACT, ACTION_ONLY):
            if fmt == ACTION_ONLY and agent not in action_only:
                continue
            run = run_name(agent, fmt)
            ep = endpoint[spec["model"]]
            run_items = (dataset if fmt == REACT else subset)
            if run_items is not None:
                prompt = load_prompt(AGENT_PROMPTS[(fmt, spec.get("output", "text"))])
                real("rollout", [rollout_request(i, ep, prompt, agent, fmt, spec) for i in run_items])
            else:
                n = n_rows if fmt == REACT else n_subset
                p.add("rollout", ep.name, n, n * round(agent_template + trajectory), rows_basis, "estimated")
            rollouts = read(f"results/rollouts/{run}.jsonl")
            if rollouts is not None and dataset is not None:
                ok = judgeable(rollouts)
                for judge in judges:
                    jep = endpoint[judge]
                    real("judge_detection_type", [judge_request("detection", r, items[r["item_id"]], jep,
                                                                judge_prompts["detection"], 0)
                                                  for r in ok if r["thought"]]
                         + [judge_request("action_type", r, items[r["item_id"]], jep, judge_prompts["action_type"], 0)
                            for r in ok])
                    real("judge_safety", [judge_request("action_safety", r, items[r["item_id"]], jep,
                                                        judge_prompts["action_safety"], 0, action_type="A0")
                                          for r in ok])
            else:
                n = n_rows if fmt == REACT else n_subset
                axes1 = ("detection", "action_type") if fmt == REACT else ("action_type",)
                for judge in judges:
                    p.add("judge_detection_type", judge, n * len(axes1), n * sum(per_judge_call[a] for a in axes1),
                          rows_basis, "estimated")
                    p.add("judge_safety", judge, n, n * per_judge_call["action_safety"], rows_basis, "estimated")

    # Reliability: three axes per item and panel member (the mean judge prompt of the estimate).
    rel = config.get("reliability", {})
    calibration = min(rel.get("calibration_items", 0), n_rows)
    calibration_agents = rel.get("calibration_agents", [])
    if rel.get("five_judge_panel"):
        for judge in _as_list(roles["validation_judges"]):
            n = 3 * calibration * len(calibration_agents)
            p.add("reliability:five_judge", judge, n, n * mean_judge_in, "config", "estimated")
    if rel.get("repeats", 0) > 0:
        for judge in judges:
            n = 3 * calibration * rel["repeats"] * len(calibration_agents)
            p.add("reliability:repeats", judge, n, n * mean_judge_in, "config", "estimated")
    if rel.get("vendor_swap"):
        vendors = {models[j].get("vendor") for j in judges}
        swapped = [a for a, spec in config["agents"].items() if spec["vendor"] in vendors]
        n_swap = min(rel.get("vendor_swap_items", 0), n_rows)
        for agent in swapped:
            vendor = config["agents"][agent]["vendor"]
            panel = [roles["replacement_judge"] if models[j].get("vendor") == vendor else j for j in judges]
            for judge in panel:
                p.add("reliability:vendor_swap", judge, 3 * n_swap, 3 * n_swap * mean_judge_in, "config", "estimated")
    return p


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
    for stage in STAGES:
        for (s, name), cell in sorted(p.cells.items()):
            if s != stage:
                continue
            spec = config["models"][name]
            ep = endpoint_from(name, spec)
            batch = bool(spec.get("batch", False))
            cap = ep.params.get("max_tokens")
            per_call, source = ((observed[(stage, name)], "call logs") if (stage, name) in observed
                                else (DEFAULT_OUTPUT_TOKENS[stage], "default"))
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
    for stage in STAGES:
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
    with open(out / "forecast.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=ROWS_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(result["rows"])
    (out / "forecast.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return [out / "forecast.csv", out / "forecast.json"]
