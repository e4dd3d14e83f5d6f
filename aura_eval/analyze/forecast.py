"""What a run will pay the providers, before any call and while it goes: per stage x model, the
calls, input and output tokens and dollars that are left to pay, each as a band (low, point, high),
what the run has already paid, a hard ceiling, and the wall time as a band.

Paid answers, not requests. Where a stage's inputs exist, its requests are rendered by the stage's
own builder and keyed as the model module keys them (`client.describe`, `cache.cache_key`): a key
asked twice (agents sharing a model entry, a judge on two panels, a repeat's first sample) counts
once, in the first stage x model that asks it; a key the run's cache already answers is paid (its
recorded tokens and cost, `paid_*`) and not left; a job whose output exists leaves nothing (a failed
call is not cached, and only a rerun of its job would ask it again). Where a stage's inputs do not
exist yet its units follow the stage before through the paper's yields as intervals at the run's
own size (aura_eval.analyze.bands), and the row says `estimated`. The safety judge's requests are
keyed once every panel judge's phase 1 exists (they carry the panel's action type); reliability
runs draw their samples inside the job, so they are estimated until their job has written its call
log, which then says what they used.

Input tokens: the prompts we render, counted as litellm counts them for gpt-4o (aura_eval.util.tokens,
no litellm import), times the provider's tokenizer band (bands.TOKENIZER; the schema a structured
request carries added to the point and high) until the model's own answers show the ratio its
provider bills. Output tokens, per answer: between the stage's floor (its schema's smallest valid
answer) and the entry's `max_tokens` (hidden reasoning included: it is billed as output); the point
is the stage's visible answer (`output_tokens`) plus a reasoning model's allowance
(bands.REASONING_TOKENS), until answers show the model's own lengths (that stage's answers: their
mean and spread; its earlier stages': their ratio to the defaults). Dollars: `llm.pricing` (litellm's
local cost map, else the entry's `price`; batch prices where `batch: true`); an unpriced model shows
as unpriced, never $0. The ceiling: every yield at its maximum, every answer at `max_tokens`, every
tokenizer at its high; finite only where every entry in use sets `max_tokens`.
Wall time: per rate-limit bucket (`llm.rate_limits`), calls over rpm and tokens over tpm; without
limits, the calls over each job's concurrency times the latency (observed, else bands.LATENCY_S);
stages one after another; batch stages apart (bands.BATCH_TURNAROUND_H).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import string
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from aura_eval import stage_registry
from aura_eval.analyze import bands
from aura_eval.analyze.bands import ZERO, Band
from aura_eval.analyze.paid import PaidAnswers, call_log_answers
from aura_eval.construct.seeds import load_seeds, stratified_subset
from aura_eval.construct.tagging import render_steps
from aura_eval.evaluate.rollout import render_context
from aura_eval.llm import pricing, providers, ratelimit
from aura_eval.llm import settings as call_settings
from aura_eval.llm.cache import cache_key
from aura_eval.llm.client import describe
from aura_eval.llm.types import endpoint_from
from aura_eval.util.jsonl import read_jsonl
from aura_eval.util.prompts import load_prompt
from aura_eval.util.tokens import chat_tokens, text_tokens
from aura_eval.workflow import jobs
from aura_eval.workflow.config import CONSTRUCTION_ROLES
from aura_eval.vocab import (AGENT_PROMPTS, AXES, FILES, JUDGE_PROMPTS, REACT, VARIED_DIMENSIONS,
                             parse_run, run_name, stage_group)

TOTAL = "All"  # the stage of the total row (forecast.csv and the printed text only)
MEASURES = ("calls", "tokens_in", "tokens_out", "usd")
ROWS_COLUMNS = ["stage", "endpoint", "model", "provider", "batch", "calls", "tokens_in", "tokens_out", "usd",
                "usd_standard", "usd_batch", "price_source", "counts", "tokens", "output_from",
                "calls_low", "calls_high", "tokens_in_low", "tokens_in_high", "tokens_out_low", "tokens_out_high",
                "usd_low", "usd_high", "paid_calls", "paid_tokens_in", "paid_tokens_out", "paid_usd",
                "paid_tokens_reasoning", "keys", "note"]

_TOKENS: dict[str, int] = {}  # sha256 of a prompt's messages -> its tokens (panels repeat prompts)


def count_tokens(messages: list[dict]) -> int:
    """Tokens of a chat prompt (aura_eval.util.tokens: as litellm's token_counter counts for gpt-4o,
    without importing litellm), memoised by text."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    if digest not in _TOKENS:
        _TOKENS[digest] = chat_tokens(messages)
    return _TOKENS[digest]


@functools.cache
def _template_tokens(prompt_id: str) -> int:
    """A prompt's own tokens: the template with every placeholder empty."""
    prompt = load_prompt(prompt_id)
    names = {n for text in (prompt.system, prompt.user) for n in string.Template(text).get_identifiers()}
    return count_tokens(prompt.messages(**{n: "" for n in names}))


def smallest_answer(schema: dict | None):
    """The smallest JSON value `schema` accepts (required properties only, empty strings, zeros, the
    first enum value): the floor of an answer's visible tokens."""
    if not schema:
        return ""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: smallest_answer(props.get(k)) for k in schema.get("required", [])}
    if kind == "array":
        items = schema.get("prefixItems") or [schema.get("items") or {}] * int(schema.get("minItems", 0))
        return [smallest_answer(i) for i in items[:max(int(schema.get("minItems", 0)), len(schema.get("prefixItems") or []))]]
    return {"integer": 0, "number": 0, "boolean": False, "null": None}.get(kind, "")


@functools.cache
def output_floor(stage: stage_registry.ModelStage) -> int:
    """The fewest output tokens a parseable answer of the stage takes (its prompts' smallest answers)."""
    floors = []
    for prompt_id in stage.prompts:
        schema = load_prompt(prompt_id).schema
        floors.append(max(1, text_tokens(json.dumps(smallest_answer(schema))) if schema else 1))
    return min(floors)


def _read(root: Path, rel: str) -> list[dict] | None:
    path = root / rel
    return read_jsonl(path) if path.exists() else None


# -- what results belong to the run ---------------------------------------------------------

def run_seeds(config: dict, root: Path) -> list[dict]:
    """The seeds the config selects from its raw R-Judge files (no model call)."""
    return stratified_subset(load_seeds(root / config["rjudge_dir"]), config["seeds"])


BUILT_BY = ("tagger", *CONSTRUCTION_ROLES)  # the roles whose answers results/ holds before any agent runs


def results_belong(config: dict, root: Path, seeds: list[dict]) -> str | None:
    """None where the intermediate files under results/ are this run's, else why they are not (the
    forecast then reads none of them): the seeds they hold must be the config's selection, and the
    config recorded with them (aura_eval.workflow.run_config) must agree on what built them (seeds, construction
    settings, construction roles and their model entries). Agents, judges and reliability may differ:
    their requests are keyed, so a new model's calls are left and the others' are paid."""
    from aura_eval.workflow import run_config

    found = _read(root, FILES["seeds"])
    if found is None:
        return None
    have, want = [s["seed_id"] for s in found], [s["seed_id"] for s in seeds]
    if sorted(have) != sorted(want):
        return (f"{root / FILES['seeds']} lists {len(have)} seeds and this config selects {len(want)}"
                f"{' (other ones)' if len(have) == len(want) else ''}: results/ holds another run, so the "
                f"forecast reads none of its files (point --root at this run's directory)")
    recorded = run_config.recorded_config(root)
    if recorded is None:
        return None
    built_by = {m for role in BUILT_BY for m in _names(config["roles"].get(role))}
    built_by |= {m for role in BUILT_BY for m in _names(recorded.config.get("roles", {}).get(role))}
    matters = ("seeds", "rjudge_dir", "construction", *(f"roles.{r}" for r in BUILT_BY),
               *(f"models.{m}" for m in built_by))
    differ = [d for d in run_config.differences(config, recorded.config)
              if any(d == m or d.startswith(m + ".") for m in matters)]
    if differ:
        return (f"results/ was built under another construction ({run_config.RUN_CONFIG} differs in "
                f"{', '.join(differ[:6])}): the forecast reads none of its files")
    return None


def _names(value) -> list[str]:
    return [] if value is None else ([value] if isinstance(value, str) else list(value))


def observed_yields(root: Path) -> dict[str, tuple[int, int]]:
    """(trials, successes) of each construction yield in a finished run's funnel (a pilot's):
    results/construct/funnel.json, the seeds and the released rows."""
    funnel_path, seeds, dataset = root / FILES["funnel"], _read(root, FILES["seeds"]), _read(root, FILES["dataset"])
    if not funnel_path.exists() or seeds is None or dataset is None:
        return {}
    f = json.loads(funnel_path.read_text(encoding="utf-8"))["funnel"]
    return {"second_prefix": (len(seeds), f["prefixes"] - len(seeds)),
            "candidate": (f["prefixes"] * len(VARIED_DIMENSIONS), f["variation candidates"]),
            "parseable": (f["variation candidates"], f["passed gate"]),
            "kept": (f["passed gate"], f["kept variations"]),
            "pair": (f["classified pool"], f["pair candidates"]),
            "parseable_pair": (f["pair candidates"], f["passed pair checks"]),
            "kept_pair": (f["passed pair checks"], f["kept pairs"]),
            "released": (f["classified pool"] + f["kept pairs"], len(dataset)), **_judgeable(root)}


def _judgeable(root: Path) -> dict:
    """{"judgeable": (n, rollouts the judges see), "thought": (n, judgeable ReAct rollouts with a thought),
    "distinct": (n, judge requests that differ)} of a run's files (none: {}), each counted at its
    effective size n over the items it was seen on (`bands.effective_size`: every agent answers each
    item, and those answers may fail or coincide together)."""
    rows = [r for path in sorted((root / "results" / "rollouts").glob("*.jsonl")) for r in read_jsonl(path)]
    react = [r for r in rows if r["status"] == "ok" and r.get("format", REACT) == REACT]

    def per_item(hits: list[tuple[str, bool]]) -> tuple[float, float]:
        """(effective size, successes at that size) of [(item id, success)]."""
        groups = defaultdict(lambda: [0, 0])
        for item, hit in hits:
            groups[item][0] += 1
            groups[item][1] += hit
        n = bands.effective_size([tuple(g) for g in groups.values()])
        return n, n * sum(hit for _, hit in hits) / len(hits)
    out = {}
    if rows:
        out["judgeable"] = per_item([(r["item_id"], r["status"] == "ok") for r in rows])
    if react:
        out["thought"] = per_item([(r["item_id"], bool(r["thought"])) for r in react])
    asked = [r for path in sorted((root / "results" / "calls" / "judge").glob("*/*/*.jsonl")) for r in read_jsonl(path)]
    if asked:  # the cache answers alike requests once, whichever job asks them: a key's first request is paid
        seen, firsts = set(), []
        for r in asked:
            firsts.append((r["item_id"], r["key"] not in seen))
            seen.add(r["key"])
        out["distinct"] = per_item(firsts)
    return out


# -- the plan: per stage x model, what is left, what was paid -------------------------------------

@dataclasses.dataclass
class Cell:
    """One stage x model: its calls left (a band) and their counted input tokens, what it paid."""

    stage: str
    endpoint: str
    calls: Band = ZERO
    counted_in: Band = ZERO  # input tokens as we count them (no tokenizer band yet), left
    schema_in: Band = ZERO  # the tokens of the schemas the left requests carry
    paid_calls: int = 0
    paid_in: int = 0
    paid_out: int = 0
    paid_usd: float = 0.0
    paid_unpriced: int = 0  # paid answers without a recorded cost
    shared: int = 0  # requests another stage x model asks identically (paid once, there)
    counts: set = dataclasses.field(default_factory=set)
    keys: set = dataclasses.field(default_factory=set)
    notes: list = dataclasses.field(default_factory=list)
    out_seen: list = dataclasses.field(default_factory=list)  # tokens_out of the answers paid
    reasoning_seen: list = dataclasses.field(default_factory=list)
    in_ratio: list = dataclasses.field(default_factory=list)  # (provider's tokens_in, our count), per answer
    prompt_sizes: list = dataclasses.field(default_factory=list)  # our count of each prompt it renders
    latency: list = dataclasses.field(default_factory=list)
    called_at: list = dataclasses.field(default_factory=list)  # when each paid answer was first called
    ceiling_calls: float = 0.0
    ceiling_in: float = 0.0

    def pay(self, answer, counted: int | None) -> None:
        self.paid_calls += 1
        self.paid_in += answer.tokens_in or 0
        self.paid_out += answer.tokens_out or 0
        if answer.cost_usd is None:
            self.paid_unpriced += 1
        else:
            self.paid_usd += answer.cost_usd
        if answer.tokens_out is not None:
            self.out_seen.append(answer.tokens_out)
        if answer.tokens_reasoning is not None:
            self.reasoning_seen.append(answer.tokens_reasoning)
        if answer.tokens_in and counted:
            self.in_ratio.append((answer.tokens_in, counted))
        if answer.latency_s:
            self.latency.append(answer.latency_s)
        if answer.called_at:
            self.called_at.append(answer.called_at)


class _Plan:
    def __init__(self):
        self.cells: dict[tuple, Cell] = {}
        self.seen: set[str] = set()  # keys planned so far (full), and their 16-digit prefixes
        self.notes: list[str] = []

    def cell(self, stage: str, endpoint: str) -> Cell:
        return self.cells.setdefault((stage, endpoint), Cell(stage, endpoint))


def _visible_after(stage_index: int | None, order: list[str]):
    """Which files and cached answers a forecast made at the end of stage `order[stage_index]` may
    read (None: all): a model stage's files from its own end on; the deterministic files between
    (prefixes, candidates, the dataset) with the model stage they follow."""
    if stage_index is None:
        return lambda rel: True, lambda rule: True
    done = set(order[:stage_index + 1])
    produced_by = {FILES["tags"]: "tag_steps", FILES["prefixes"]: "tag_steps", FILES["relevance"]: "relevance",
                   FILES["candidates"]: "relevance", FILES["variations"]: "vary",
                   FILES["variation_reviews"]: "review_variations", FILES["pool"]: "classify",
                   FILES["pairs"]: "generate_pairs", FILES["pair_reviews"]: "review_pairs",
                   FILES["dataset"]: "review_pairs", FILES["subset"]: "review_pairs", FILES["funnel"]: "review_pairs"}

    def file_ok(rel: str) -> bool:
        if rel in produced_by:
            return produced_by[rel] in done
        if rel.startswith("results/rollouts/"):
            return "rollout" in done
        if "/detection_type/" in rel:
            return "judge_detection_type" in done
        if rel.startswith("results/judgments/"):
            return "judge_safety" in done
        if rel.startswith("results/reliability/") or rel.startswith("results/calls/reliability/"):
            return "reliability" in done
        return rel == FILES["seeds"]

    return file_ok, lambda rule: rule in done


def plan(config: dict, root: str | Path = ".", results: bool = True, seeds: list[dict] | None = None,
         cache: PaidAnswers | None = None, upto: str | None = None, yields: dict | None = None,
         memo: dict | None = None, prompt_sizes: dict | None = None) -> _Plan:
    """Per stage x model: what is left and what was paid (see the module doc). `results=False` reads
    no intermediate file and no cache (the forecast before any call); `seeds`: the run's seeds (else
    selected from `rjudge_dir`); `upto`: as the files stood at that model stage's end; `memo`: a dict
    kept between forecasts of one run's files as they stand (the report's table makes twelve)."""
    root = Path(root)
    order = [s.rule for s in stage_registry.registry().values()]
    file_ok, stage_ok = _visible_after(None if upto is None else order.index(upto), order)
    def read_file(rel: str):
        if not results or not file_ok(rel):
            return None
        if memo is None:
            return _read(root, rel)
        if ("file", rel) not in memo:  # the files stand still while one memo lives
            memo[("file", rel)] = _read(root, rel)
        return memo[("file", rel)]

    seeds = seeds or run_seeds(config, root)

    def read(name: str):
        return seeds if name == "seeds" else read_file(FILES.get(name, name))

    p = _Plan()
    call = call_settings.CallSettings.from_config(config)
    trajectory = sum(count_tokens([{"role": "user", "content": render_steps(s["steps"])}]) for s in seeds) / len(seeds)
    estimates = _Estimates(config, len(seeds), trajectory, read, yields)
    shared_runs: dict[tuple, str] = {}  # (agent's model entry, format) -> the first run that asks it
    for stage in stage_registry.registry().values():
        # its requests render wherever its inputs exist; what it paid and whether it is done, only from its own end on
        use_results = results and stage_ok(stage.rule)
        for job in jobs.stage_jobs(config, stage.wildcards):
            names = jobs.job_models(config, stage.role, job)
            if not names:
                continue
            group = stage_group_of(stage, job)
            done = use_results and (root / stage.output.format(**job)).exists()
            first = None
            if "run" in job:  # agents sharing a model entry ask the same requests (an answerer in-process: not cached)
                agent, fmt = parse_run(job["run"])
                model = config["agents"][agent].get("model")
                if model and providers.provider_of(config["models"][model]["model"]) not in providers.RESPONDER_PROVIDERS:
                    first = shared_runs.setdefault((model, fmt), job["run"])
            ctx = stage_registry.StageInputs(read, job, [{"name": n, **config["models"][n]} for n in names], config)
            scope = json.dumps(job, sort_keys=True)
            phase1 = stage.rule == "judge_safety" and results and _panel_phase1(read, config, job)
            memo_key = (stage.rule, scope, phase1)  # what it renders, once its inputs exist, stays the same
            if memo is not None and memo_key in memo:
                keyed = memo[memo_key]
            else:
                requests = stage.requests(ctx) if stage.requests and (results or stage.rule == "tag_steps") else None
                keyed = None if requests is None else _keyed(requests, call, stage.rule)
                if memo is not None and keyed is not None:
                    memo[memo_key] = keyed
            if keyed is not None:  # (the seeds' tagging prompts need no model call: rendered before any)
                logged = call_log_answers(root / stage.calls.format(**job)) if done else {}
                found = {}
                if use_results and cache is not None:
                    found_key = ("found",) + memo_key
                    found = memo[found_key] if memo is not None and found_key in memo else cache.lookup(
                        k[2] for k in keyed)
                    if memo is not None:
                        memo[found_key] = found
                _rendered(p, group, keyed, found, done, stage.rule, logged, scope, cached=use_results)
                estimates.asked(stage.rule, Band.exact(len(keyed) // max(1, len(names))))
                if stage.rule == "judge_safety" and not phase1:
                    for name in names:
                        p.cell(group, name).keys.add("estimated (the panel's action types are not known yet)")
                continue
            if done and stage.rule == "reliability":
                _from_call_log(p, group, root / stage.calls.format(**job), names)
                continue
            if done:
                for name in names:
                    p.cell(group, name).counts.add("files")
                continue
            for name, calls, per_call, ceiling, basis in estimates.calls(stage, job, names):
                c = p.cell(group, name)
                if first is not None and first != job["run"]:
                    c.notes.append(f"asks what run {first} asks (same model entry): paid once, there")
                    calls, ceiling = ZERO, 0.0
                c.calls += calls
                sizes = (prompt_sizes or {}).get((group, name), [])
                if len(sizes) >= 3:  # a pilot rendered this stage's prompts: their mean and spread
                    per_call = sum(sizes) / len(sizes)
                    spread = bands.mean_band(sizes, max(1.0, calls.point), 0, None)
                    lo, pt, hi = (per_call * spread.low / spread.point, per_call, per_call * spread.high / spread.point)
                    c.notes.append(f"prompt size from a pilot's {len(sizes)} prompts")
                else:
                    lo, pt, hi = (per_call * f for f in bands.ESTIMATED_PROMPT)
                c.counted_in += calls.scale(lo, pt, hi)
                c.ceiling_calls += ceiling
                c.ceiling_in += ceiling * per_call * bands.ESTIMATED_PROMPT[2]
                c.counts.add(basis)
                c.keys.add("estimated")
    return p


def _panel_phase1(read, config: dict, job: dict) -> bool:
    return all(read(f"results/judgments/{job['run']}/detection_type/{j}.jsonl") is not None
               for j in jobs.judges(config))


EXACT_PER_STAGE = 60  # prompts per stage counted exactly; the rest at their characters times the ratio these showed
_SCHEMA_TOKENS: dict[str, int] = {}
_CHARS_PER_TOKEN: dict[str, list] = {}  # stage -> [prompts counted exactly, their tokens, their characters]


def _keyed(requests: list, call, rule: str) -> list[tuple]:
    """[(endpoint name, provider, cache key, counted input tokens, schema tokens)] of rendered requests.
    Counting a long prompt takes milliseconds (tiktoken), so past EXACT_PER_STAGE a stage's prompts
    (one template, so one mix of text) are counted from their characters at the ratio its first ones
    showed (within a few percent)."""
    out = []
    seen = _CHARS_PER_TOKEN.setdefault(rule, [0, 0, 0])
    for r in requests:
        req = dataclasses.replace(r, endpoint=call.endpoint(r.endpoint))
        described = describe(req)
        size = sum(len(m.get("content") or "") for m in req.messages)
        if seen[0] < EXACT_PER_STAGE:
            counted = count_tokens(req.messages)
            seen[0], seen[1], seen[2] = seen[0] + 1, seen[1] + counted, seen[2] + size
        else:
            counted = round(size * seen[1] / max(1, seen[2]))
        fmt = described["response_format"]
        text = json.dumps(fmt, sort_keys=True) if fmt else ""
        if text not in _SCHEMA_TOKENS:
            _SCHEMA_TOKENS[text] = text_tokens(text) if text else 0
        out.append((req.endpoint.name, req.endpoint.provider, cache_key(described), counted, _SCHEMA_TOKENS[text]))
    return out


def _rendered(p: _Plan, group: str, keyed: list[tuple], found: dict, done: bool, rule: str, logged: dict,
              scope: str = "", cached: bool = True) -> None:
    """Count each keyed request (`_keyed`) once: a key planned before is shared, one the cache holds
    (`found`) is paid, and so is one its finished job's call log answered (`logged`: an in-process
    answer is never cached, so a responder's request is shared within its job only, `scope`)."""
    for name, provider, key, counted, schema in keyed:
        c = p.cell(group, name)
        c.prompt_sizes.append(counted)
        c.counts.add("config" if rule == "tag_steps" and not cached else "files")
        c.keys.add("rendered")
        seen = f"{scope}|{key}" if provider in providers.RESPONDER_PROVIDERS else key
        if seen in p.seen:
            c.shared += 1
            continue
        p.seen.add(seen)
        p.seen.add(key[:16])
        answer = found.get(key) or logged.get(key[:16])
        if answer is not None:
            c.pay(answer, counted)
        elif not done:
            c.calls += Band.exact(1)
            c.counted_in += Band.exact(counted)
            c.schema_in += Band.exact(schema)
            c.ceiling_calls += 1
            c.ceiling_in += counted + schema


def _from_call_log(p: _Plan, group: str, path: Path, names: list[str]) -> None:
    """A finished job without a request builder: what its call log says it used, each key once."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    answers = call_log_answers(path)
    for row in rows:
        key = row.get("key")
        if key not in answers:
            continue
        c = p.cell(group, row["endpoint"])
        c.counts.add("files (call log)")
        c.keys.add("call log")
        if key in p.seen:
            c.shared += 1
            continue
        p.seen.add(key)
        c.pay(answers.pop(key), None)
    for name in names:
        p.cell(group, name).counts.add("files (call log)")


def stage_group_of(stage: stage_registry.ModelStage, job: dict) -> str:
    """The call-log group of one job (reliability jobs: per kind), as vocab.stage_group gives it."""
    return stage_group(":".join([stage.rule, *job.values()])) if stage.groups else stage.rule


class _Estimates:
    """Calls and input tokens of the jobs whose inputs do not exist yet, as bands. A construction
    stage's units follow the stage before at the paper's yields (bands.YIELDS), from the real count
    where the stage before could be counted, so estimates and real counts chain; an evaluation job
    asks about every released row (or the action-only subset) it judges; reliability runs three axes
    per calibration item and panel member (less what the main panel already asked)."""

    def __init__(self, config: dict, n_seeds: int, trajectory: float, read, yields: dict | None = None):
        self.config, self.n_seeds, self.trajectory, self.read = config, n_seeds, trajectory, read
        self.yields = yields or {}  # name -> (trials, successes) a pilot saw: replaces the paper's
        self.units: dict[str, Band] = {}  # rule -> units it asks about (one per request, per panel member)
        self.most: dict[str, float] = {}  # rule -> the most units it could ask about (the ceiling)

    def asked(self, rule: str, units: Band) -> None:
        self.units[rule] = units
        self.most[rule] = units.high

    def _construction_units(self, rule: str) -> tuple[Band, float]:
        u, m = self.units, self.most

        def b(trials, name):
            return bands.binomial_count(trials, name, self.yields.get(name))
        if rule == "relevance":
            seeds = Band.exact(self.n_seeds)
            return seeds + b(seeds, "second_prefix"), 2.0 * self.n_seeds
        if rule == "vary":
            cap = self.config.get("construction", {}).get("max_candidates_per_prefix")
            per = min(cap, len(VARIED_DIMENSIONS)) if cap else len(VARIED_DIMENSIONS)
            prefixes = u["relevance"]
            n = b(prefixes.scale(len(VARIED_DIMENSIONS), len(VARIED_DIMENSIONS), len(VARIED_DIMENSIONS)), "candidate")
            if cap and cap * prefixes.low < n.high:  # the cap may bind: bounds only
                n = Band(min(n.low, cap * prefixes.low), min(n.point, cap * prefixes.point),
                         min(n.high, cap * prefixes.high))
            return n, per * m["relevance"]
        if rule == "review_variations":
            return b(u["vary"], "parseable"), m["vary"]
        if rule == "classify":
            return u["relevance"] + b(u["review_variations"], "kept"), m["relevance"] + m["review_variations"]
        if rule == "generate_pairs":
            return b(u["classify"], "pair"), m["classify"]
        if rule == "review_pairs":
            return b(u["generate_pairs"], "parseable_pair"), m["generate_pairs"]
        raise KeyError(rule)

    def rows(self) -> tuple[Band, float, str]:
        """Released rows (real, or the pool and its kept counterparts at the paper's final filtering)."""
        dataset = self.read("dataset")
        if dataset is not None:
            return Band.exact(len(dataset)), len(dataset), "files"
        kept_pairs = bands.binomial_count(self.units["review_pairs"], "kept_pair", self.yields.get("kept_pair"))
        return (bands.binomial_count(self.units["classify"] + kept_pairs, "released", self.yields.get("released")),
                self.most["classify"] + self.most["review_pairs"], "estimated")

    def _context(self) -> float:
        """The mean tokens of what a judge is shown of an item: its prefix as the rollout prompt renders
        it once the dataset exists, before that the seeds' whole trajectories (longer: a safe side)."""
        if not hasattr(self, "_context_tokens"):
            dataset = self.read("dataset")
            self._context_tokens = self.trajectory if not dataset else sum(
                count_tokens([{"role": "user", "content": render_context(i)}]) for i in dataset) / len(dataset)
        return self._context_tokens

    def _per_call(self, prompt_id: str, copies: float) -> float:
        return bands_round(_template_tokens(prompt_id) + copies * self.trajectory)

    def calls(self, stage: stage_registry.ModelStage, job: dict, names: list[str]):
        """[(model name, calls band, counted input tokens per call, the most calls, basis)] of one job."""
        if "run" not in job and "kind" not in job:  # a construction stage: one job
            n, most = self._construction_units(stage.rule)
            self.units[stage.rule], self.most[stage.rule] = n, most
            # the last prompt is the one most units use (P4, P6: ten of the eleven dimensions)
            per_call = self._per_call(stage.prompts[-1], stage.trajectory_copies)
            return [(name, n, per_call, most, "estimated") for name in names]
        rows, most_rows, basis = self.rows()
        judge_in = {axis: bands_round(_template_tokens(JUDGE_PROMPTS[axis]) + self._context()
                                      + stage_registry.stage("rollout").output_tokens / 2) for axis in AXES}
        if "run" in job:
            fmt = parse_run(job["run"])[1]
            if fmt != REACT:
                n_items = self.config.get("action_only", {}).get("n_items", 0)
                rows, most_rows = _at_most(rows, n_items), min(most_rows, n_items)
            judged = bands.share_of(rows, "judgeable", self.yields.get("judgeable"))
            if stage.rule == "rollout":
                output = self.config["agents"][parse_run(job["run"])[0]].get("output", "text")
                return [(names[0], rows, self._per_call(AGENT_PROMPTS[(fmt, output)], 1), most_rows, basis)]
            axes = ("action_safety",) if stage.rule == "judge_safety" else (
                ("detection", "action_type") if fmt == REACT else ("action_type",))
            per_call = sum(judge_in[a] for a in axes) / len(axes)
            with_thought = bands.share_of(judged, "thought", self.yields.get("thought"))
            asked = judged + with_thought if "detection" in axes else judged  # detection: a thought
            calls = bands.share_of(asked, "distinct", self.yields.get("distinct"))
            return [(names[0], calls, per_call, most_rows * len(axes), basis)]
        return self._reliability(job, names, rows, most_rows, round(sum(judge_in.values()) / len(AXES)))

    def _sample_axes(self, agent: str, rows: Band, size: int) -> Band:
        """The judge requests per panel member of a sample of `size` of the agent's judgeable ReAct
        rollouts: action type and safety for each, detection for those with a thought. With its
        rollouts the bounds are exact (of J judgeable, T with a thought, a sample of n holds between
        n - (J - T) and min(n, T)); before them, the judgeable and thought shares' bands."""
        rollouts, dataset = self.read(f"results/rollouts/{run_name(agent, REACT)}.jsonl"), self.read("dataset")
        if rollouts is not None and dataset is not None:
            judged = [r for r in rollouts if r["status"] == "ok"]
            n, thoughts, J = min(size, len(judged)), sum(1 for r in judged if r["thought"]), max(1, len(judged))
            # rollouts a judge sees word for word alike (same prefix, same answer) are asked once
            items = {i["item_id"]: i for i in dataset}
            alike = len(judged) - len({(render_context(items[r["item_id"]]), r["thought"], r["action"])
                                       for r in judged if r["item_id"] in items})
            share = 1 - alike / J
            detection = Band(max(0, n - (len(judged) - thoughts) - alike), n * thoughts / J * share, min(n, thoughts))
            return Band(2 * max(0, n - alike), 2 * n * share, 2 * n) + detection
        n = _at_most(bands.share_of(rows, "judgeable", self.yields.get("judgeable")), size)
        asked = n.scale(2, 2, 2) + bands.share_of(n, "thought", self.yields.get("thought"))
        return bands.share_of(asked, "distinct", self.yields.get("distinct"))

    def _reliability(self, job, names, rows, most_rows, per_call):
        rel, panel = self.config.get("reliability", {}), set(jobs.judges(self.config))
        three = self._sample_axes(job["agent"], rows, rel.get("calibration_items", 0))
        most_cal = min(most_rows, rel.get("calibration_items", 0))
        out = []
        if job["kind"] == "vendor_swap":
            models, vendor = self.config["models"], self.config["agents"][job["agent"]]["vendor"]
            items = self._sample_axes(job["agent"], rows, rel.get("vendor_swap_items", 0))
            most = 3 * min(most_rows, rel.get("vendor_swap_items", 0))
            replaced = [j for j in jobs.judges(self.config) if models[j].get("vendor") == vendor]
            validating = rel.get("five_judge_panel") and self.config["roles"]["replacement_judge"] in _names(
                self.config["roles"].get("validation_judges"))
            for name in names:
                if name == self.config["roles"]["replacement_judge"]:
                    # one judge in every replaced seat asks each request once; where it validates too,
                    # its five-judge sample may hold the same items (asked there)
                    out.append((name, Band(0 if validating else items.low, items.point, items.high), per_call,
                                most, "config"))
                elif name in replaced:  # a seat the replacement takes: not asked
                    out.append((name, ZERO, per_call, 0, "config"))
                else:  # a seat kept: the main panel's requests again, but for safety under a new panel type
                    out.append((name, Band(0, 0, items.high), per_call, most, "config"))
            return out
        for name in names:
            if job["kind"] == "repeats":
                k = rel.get("repeats", 0)
                temp0 = (self.config["models"][name].get("params") or {}).get("temperature") == 0
                first = 1 if temp0 else 0  # sample 0 at temperature 0 is the main panel's request
                out.append((name, Band(three.low * (k - first), three.point * (k - first), three.high * k), per_call,
                            3 * most_cal * k, "config"))
            elif name in panel:  # five_judge: the panel's own judges ask what they asked before
                out.append((name, Band(0, 0, three.high), per_call, 3 * most_cal, "config"))
            else:
                out.append((name, three, per_call, 3 * most_cal, "config"))
        return out


def _at_most(band: Band, n: float) -> Band:
    return Band(min(band.low, n), min(band.point, n), None if band.high is None else min(band.high, n))


def bands_round(value: float) -> int:
    return int(round(value))


# -- the bands ---------------------------------------------------------------------------------

def _reasoning_allowance(ep) -> int:
    """Hidden reasoning tokens per answer before any answer shows them: for a model litellm's map
    says reasons, where it reasons unless told not to (OpenAI's, Gemini's) or its entry sets
    `reasoning_effort` (Anthropic's extended thinking is off unless asked for)."""
    entry = pricing.map_entry(ep.model) or {}
    if not entry.get("supports_reasoning") or (ep.provider in bands.THINKS_ONLY_WHEN_ASKED
                                               and not ep.params.get("reasoning_effort")):
        return 0
    return bands.REASONING_TOKENS.get(ep.params.get("reasoning_effort") or "medium", bands.REASONING_TOKENS["medium"])


def _clip(value: float, floor: float, cap: float | None) -> float:
    return max(floor, value if cap is None else min(cap, value))


def _tokenizer(ep, by_stage: list[list[tuple]], own: list[tuple] = ()) -> tuple[tuple[float, float, float], str]:
    """(low, point, high) of billed input tokens per counted token, and where it comes from: once this
    stage x model's own answers (or a pilot's of it) report their input tokens, 3 or more, billed over
    counted in all, +/- Student's t on the standard error of the per-answer ratio (what is left is a
    total over many prompts like these); else the model's other stages: their ratio in all, within the
    lowest and highest per stage with 3 answers or more; before any, the provider's assumed band."""
    if len(own) >= 3:
        ratio = sum(b for b, _ in own) / sum(c for _, c in own)
        each = [b / c for b, c in own if c]
        mean = sum(each) / len(each)
        half = bands.t975(len(each) - 1) * math.sqrt(
            sum((r - mean) ** 2 for r in each) / (len(each) - 1) / len(each)) if len(each) >= 2 else ratio
        return (max(0.0, ratio - half), ratio, ratio + half), "observed"
    pairs = [pair for stage in by_stage for pair in stage]
    if len(pairs) >= 3:
        ratio = sum(b for b, _ in pairs) / sum(c for _, c in pairs)
        per_stage = [sum(b for b, _ in st) / sum(c for _, c in st) for st in by_stage if len(st) >= 3] or [ratio]
        return (min(per_stage + [ratio]), ratio, max(per_stage + [ratio])), "observed"
    return bands.TOKENIZER.get(ep.provider, bands.TOKENIZER_OTHER), "assumed"


def _output(c: Cell, ep, default: int, floor: int, model_ratio: float | None) -> tuple[Band, str, float | None]:
    """(tokens out of the calls left, where the per-answer figure comes from, the most per answer)."""
    cap = ep.params.get("max_tokens")
    cap = None if cap is None else int(cap)
    if len(c.out_seen) >= 3:
        def total(n):
            return bands.mean_band(c.out_seen, n, floor, cap) if n else ZERO
        lo, pt = total(c.calls.low), total(c.calls.point)
        hi = None if c.calls.high is None else total(c.calls.high)
        return Band(lo.low, pt.point, None if hi is None else hi.high), f"answers ({len(c.out_seen)})", cap
    if model_ratio is not None:
        per, source = _clip(default * model_ratio, floor, cap), "the model's earlier answers"
    else:
        reasoning = _reasoning_allowance(ep)
        per = _clip(default + reasoning, floor, cap)
        source = "default" + (f" + {reasoning} reasoning" if reasoning else "")
    return c.calls.scale(floor, per, cap), source, cap


def _model_ratios(p: _Plan, defaults: dict[str, int]) -> dict[str, float]:
    """Per model entry: its answers' mean tokens over the stages' defaults, where it has 3 or more."""
    seen, expected = defaultdict(float), defaultdict(float)
    count = defaultdict(int)
    for (group, name), c in p.cells.items():
        seen[name] += sum(c.out_seen)
        expected[name] += defaults[group] * len(c.out_seen)
        count[name] += len(c.out_seen)
    return {n: seen[n] / expected[n] for n in seen if count[n] >= 3 and expected[n]}


def _pilot(pilot_root: Path) -> tuple[_Plan | None, dict, str]:
    """What a pilot saw (its plan over its own files and the shared cache, its funnel's yields), and
    a line saying so; (None, {}, why) where the folder holds no finished pilot."""
    from aura_eval.workflow import run_config
    from aura_eval.workflow.config import complete_config

    recorded = run_config.recorded_config(pilot_root)
    yields = observed_yields(pilot_root)
    if recorded is None or not yields:
        return None, {}, f"no finished pilot in {pilot_root} (its results/run/config.yaml and funnel): not used"
    config = complete_config(recorded.config)[0]
    cache = PaidAnswers(Path(pilot_root) / config["llm"]["cache"])  # an absolute cache path stays as it is
    try:
        seen = plan(config, pilot_root, True, None, cache)
    finally:
        cache.close()
    n = len(_read(pilot_root, FILES["seeds"]) or [])
    return seen, yields, (f"from a pilot of {n} seeds in {pilot_root}: its yields and its models' answer lengths, "
                          f"where this run has not shown its own yet")


def _learn(p: _Plan, seen: _Plan) -> None:
    """Give each stage x model that has no answers of its own what the pilot's showed."""
    for key, c in p.cells.items():
        other = seen.cells.get(key)
        if other is None:
            continue
        for field in ("out_seen", "reasoning_seen", "in_ratio", "latency"):
            if not getattr(c, field):
                setattr(c, field, list(getattr(other, field)))


def forecast(config: dict, root: str | Path = ".", results: bool = True, seeds: list[dict] | None = None,
             upto: str | None = None, pilot: str | Path | None = None, memo: dict | None = None,
             earlier: list[dict] | None = None) -> dict:
    """{"rows": per stage x model (no total row), "total": the bands and paid columns summed, "ceiling",
    "limits" and "wall_s" (the band), "ignored": why results/ was not read, "recent": the rate of the
    last ten minutes}; see the module doc. `upto`: from the files as they stood at that model stage's end.
    The total's band is `narrowed` by the totals in `earlier` (made at earlier stages' ends); where it is
    None and results are read, by those at the end of each stage the files show finished."""
    root = Path(root)
    # A caller that gives the seeds is the run itself (the report's tables): its results are its own.
    ignored = results_belong(config, root, run_seeds(config, root)) if results and seeds is None else None
    seeds = seeds or run_seeds(config, root)
    if ignored:
        results = False
    cache_path = root / config["llm"]["cache"] if results and config.get("llm", {}).get("cache") else None
    memo = {} if memo is None and results else memo  # shared with the earlier stages' ends below
    seen, yields, pilot_note = _pilot(Path(pilot)) if pilot is not None else (None, {}, None)
    cache = PaidAnswers(cache_path)
    try:
        p = plan(config, root, results, seeds, cache if results else None, upto, yields, memo,
                 None if seen is None else {key: c.prompt_sizes for key, c in seen.cells.items()})
    finally:
        cache.close()
    if seen is not None:
        _learn(p, seen)
    registry = stage_registry.registry()
    defaults = {g: registry[g.split(":")[0]].output_tokens for g in stage_registry.call_groups()}
    floors = {g: output_floor(registry[g.split(":")[0]]) for g in stage_registry.call_groups()}
    ratios = _model_ratios(p, defaults)
    in_ratios = defaultdict(list)
    for (_, name), c in p.cells.items():
        in_ratios[name].append(c.in_ratio)
    rows, uncapped = [], set()
    for stage in stage_registry.call_groups():
        for (s, name), c in sorted(p.cells.items()):
            if s != stage:
                continue
            spec = config["models"][name]
            ep = endpoint_from(name, spec)
            batch = bool(spec.get("batch", False))
            lo_f, pt_f, hi_f = (tok := _tokenizer(ep, in_ratios[name], c.in_ratio))[0]
            observed_in = tok[1] == "observed"
            tokens_in = Band(c.counted_in.low * lo_f,
                             (c.counted_in.point + (0 if observed_in else c.schema_in.point)) * pt_f,
                             None if c.counted_in.high is None else
                             (c.counted_in.high + (0 if observed_in else c.schema_in.high or 0)) * hi_f)
            tokens_out, source, cap = _output(c, ep, defaults[stage], floors[stage], ratios.get(name))
            if cap is None and c.calls.point:
                uncapped.add(name)
            standard = pricing.per_token(ep.model, ep.price, batch=False)
            batched = pricing.per_token(ep.model, ep.price, batch=True)
            chosen = batched if batch else standard

            def usd(rates, t_in=tokens_in, t_out=tokens_out):
                if rates is None:
                    return None
                return t_in.scale(rates[0], rates[0], rates[0]) + t_out.scale(rates[1], rates[1], rates[1])

            money = usd(chosen)
            ceiling_out = None if cap is None else c.ceiling_calls * cap
            ceiling_usd = None if chosen is None or ceiling_out is None else (
                c.ceiling_in * hi_f * chosen[0] + ceiling_out * chosen[1])
            notes = list(dict.fromkeys(c.notes))
            if c.shared:
                notes.append(f"{c.shared} requests asked identically by another stage x model: paid once, there")
            rows.append({
                "stage": stage, "endpoint": name, "model": ep.model, "provider": ep.provider, "batch": batch,
                **_triple("calls", c.calls.rounded()), **_triple("tokens_in", tokens_in.rounded()),
                **_triple("tokens_out", tokens_out.rounded()),
                **(_triple("usd", money) if money else {"usd": None, "usd_low": None, "usd_high": None}),
                "usd_standard": None if standard is None else usd(standard).point,
                "usd_batch": None if batched is None else usd(batched).point,
                "price_source": chosen[2] if chosen else "unpriced",
                "counts": "+".join(sorted(c.counts)), "tokens": f"{tok[1]} tokenizer",
                "output_from": source, "paid_calls": c.paid_calls, "paid_tokens_in": c.paid_in,
                "paid_tokens_out": c.paid_out, "paid_usd": round(c.paid_usd, 6),
                "keys": "+".join(sorted(c.keys)), "note": "; ".join(notes),
                "_ceiling": (c.paid_calls + c.ceiling_calls, c.paid_in + c.ceiling_in * hi_f,
                             None if ceiling_out is None else c.paid_out + ceiling_out,
                             None if ceiling_usd is None else c.paid_usd + ceiling_usd),
                "paid_tokens_reasoning": sum(c.reasoning_seen), "_latency": c.latency, "_called_at": c.called_at,
                "_unpriced_paid": c.paid_unpriced})
    limits = (config.get("llm") or {}).get("rate_limits") or {}
    ceiling = _ceiling(rows, uncapped)
    recent = _recent_rate(rows)
    out = {"rows": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows], "recent": recent,
           "total": total_row(rows), "ceiling": ceiling, **wall_time(rows, limits, config),
           "ignored": ignored, "pilot": pilot_note, "cache": None if cache_path is None else str(config["llm"]["cache"]),
           "cache_problem": cache.problem, "budget_usd": (config.get("llm") or {}).get("budget_usd")}
    out["totals"] = totals(out["rows"])
    if results and upto is None and earlier is None and out["total"]["calls_high"]:  # the CLI, something left:
        # narrow by each finished stage's end
        earlier = [forecast(config, root, results, seeds, upto=rule, pilot=pilot, memo=memo, earlier=[])["total"]
                   for rule in finished_stages(config, root)]
    if earlier:
        out["total"] = narrowed(out["total"], earlier)
    return out


def finished_stages(config: dict, root: Path) -> list[str]:
    """The model stages, in flow order, every job of which has written its output (up to the first that has not)."""
    done = []
    for stage in stage_registry.registry().values():
        outputs = [root / stage.output.format(**job) for job in jobs.stage_jobs(config, stage.wildcards)
                   if jobs.job_models(config, stage.role, job)]
        if not all(o.exists() for o in outputs):
            break
        done.append(stage.rule)
    return done


def narrowed(total: dict, earlier: list[dict]) -> dict:
    """The total's band of the whole run (paid + left) cut to the narrowest of those made earlier from
    the files as they stood (each held what it bounds, so their overlap does too): recomputed at each
    stage's end, the band never widens. An earlier band the new one lies wholly outside is dropped
    (it did not hold); the point stays within the band."""
    out = dict(total)
    for m, paid in (("calls", "paid_calls"), ("tokens_in", "paid_tokens_in"), ("tokens_out", "paid_tokens_out"),
                    ("usd", "paid_usd")):
        low, high = total[paid] + total[f"{m}_low"], _plus(total[paid], total[f"{m}_high"])
        for e in earlier:
            e_low, e_high = e[paid] + e[f"{m}_low"], _plus(e[paid], e[f"{m}_high"])
            if (high is not None and high < e_low) or (e_high is not None and e_high < low):
                continue
            low = max(low, e_low)
            high = e_high if high is None else (high if e_high is None else min(high, e_high))
        out[f"{m}_low"] = max(0, low - total[paid])
        out[f"{m}_high"] = None if high is None else max(out[f"{m}_low"], high - total[paid])
        hi = out[f"{m}_high"]
        out[m] = min(max(total[m], out[f"{m}_low"]), hi if hi is not None else total[m])
    return out


def _plus(a, b):
    return None if b is None else a + b


RATE_WINDOW_S = 600  # the status's rate: answers first called in the last ten minutes


def _recent_rate(rows: list[dict], now: datetime | None = None) -> dict:
    """Per stage x model and in all: answers the run paid for in the last RATE_WINDOW_S seconds
    (their first call's time), as answers per minute; a run that is not going shows 0."""
    now = now or datetime.now(timezone.utc)
    per, total = {}, 0
    for r in rows:
        n = 0
        for at in r["_called_at"]:
            try:
                when = datetime.fromisoformat(at.replace("Z", "+00:00"))
            except ValueError:
                continue
            n += (now - when).total_seconds() <= RATE_WINDOW_S
        per[f"{r['stage']}|{r['endpoint']}"] = n * 60.0 / RATE_WINDOW_S
        total += n
    return {"per_minute": total * 60.0 / RATE_WINDOW_S, "cells": per, "window_s": RATE_WINDOW_S}


def _triple(measure: str, band: Band) -> dict:
    return {f"{measure}_low": band.low, measure: band.point, f"{measure}_high": band.high}


def _sum(values):
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def total_row(rows: list[dict]) -> dict:
    """The `All` row: every band and paid column summed (dollars over the priced rows; a high that is
    unbounded anywhere is unbounded)."""
    priced = [r for r in rows if r["usd"] is not None]
    out = {"stage": TOTAL, "endpoint": "(all models)", "model": "", "provider": "", "batch": "",
           "price_source": f"{len(rows) - len(priced)} rows unpriced" if len(priced) < len(rows) else "all priced",
           "counts": "", "tokens": "", "output_from": "", "keys": "", "note": ""}
    for m in ("calls", "tokens_in", "tokens_out"):
        out[f"{m}_low"], out[m], out[f"{m}_high"] = (sum(r[f"{m}_low"] for r in rows), sum(r[m] for r in rows),
                                                     _sum(r[f"{m}_high"] for r in rows))
    out["usd_low"], out["usd"], out["usd_high"] = (sum(r["usd_low"] for r in priced), sum(r["usd"] for r in priced),
                                                   _sum(r["usd_high"] for r in priced))
    out["usd_standard"] = sum(r["usd_standard"] or 0 for r in priced)
    out["usd_batch"] = sum(r["usd_batch"] or 0 for r in priced)
    for m in ("paid_calls", "paid_tokens_in", "paid_tokens_out", "paid_usd", "paid_tokens_reasoning"):
        out[m] = sum(r[m] for r in rows)
    return out


def _ceiling(rows: list[dict], uncapped: set) -> dict:
    """Paid plus the most the rest could take: every yield at 1, every answer at max_tokens, every
    tokenizer at its high. Dollars and output unbounded where an entry in use sets no max_tokens."""
    calls = sum(r["_ceiling"][0] for r in rows)
    t_in = sum(r["_ceiling"][1] for r in rows)
    t_out = _sum(r["_ceiling"][2] for r in rows)
    usd = _sum(r["_ceiling"][3] for r in rows if r["usd"] is not None)
    return {"calls": round(calls), "tokens_in": round(t_in), "tokens_out": None if t_out is None else round(t_out),
            "usd": usd, "uncapped": sorted(uncapped),
            "unpriced": sorted({r["endpoint"] for r in rows if r["usd"] is None and r["calls_high"]})}


def totals(rows: list[dict]) -> dict:
    """The points summed (what the report's tables read), and the unpriced calls."""
    priced = [r for r in rows if r["usd"] is not None]
    return {"calls": sum(r["calls"] for r in rows), "tokens_in": sum(r["tokens_in"] for r in rows),
            "tokens_out": sum(r["tokens_out"] for r in rows),
            "usd": sum(r["usd"] for r in priced), "usd_standard": sum(r["usd_standard"] for r in priced),
            "usd_batch": sum(r["usd_batch"] for r in priced),
            "unpriced_calls": sum(r["calls"] for r in rows if r["usd"] is None),
            "unpriced_models": sorted({r["endpoint"] for r in rows if r["usd"] is None})}


def wall_time(rows: list[dict], limits: dict, config: dict | None = None) -> dict:
    """The wall time of what is left, as a band (seconds): per stage its slowest bucket, stages one
    after another. A bucket with rate limits takes calls/rpm or tokens/tpm, whichever is longer;
    without, each job sends `llm.concurrency` requests at a time, each taking the latency its
    answers showed (else bands.LATENCY_S). Batch stages apart: bands.BATCH_TURNAROUND_H each."""
    call = call_settings.CallSettings.from_config(config or {})
    buckets: dict[str, dict] = {}
    per_stage: dict[str, list[Band]] = defaultdict(list)
    batch_stages = set()
    for r in rows:
        if not r["calls_high"] and not r["calls"]:
            continue
        if r["batch"]:
            batch_stages.add(r["stage"])
            continue
        key = ratelimit.limit_key(r["model"], limits) or providers.provider_of(r["model"])  # as the jobs pace
        b = buckets.setdefault(key, {"bucket": key, "calls": 0, "tokens": 0})
        b["calls"] += r["calls"]
        b["tokens"] += r["tokens_in"] + r["tokens_out"]
        limit = limits.get(key) or {}
        if limit.get("rpm") or limit.get("tpm"):
            def secs(calls, tokens, limit=limit):
                if calls is None or tokens is None:
                    return None
                t = [60.0 * calls / limit["rpm"]] if limit.get("rpm") else []
                return max(t + ([60.0 * tokens / limit["tpm"]] if limit.get("tpm") else []))
            tokens_high = None if r["tokens_out_high"] is None else r["tokens_in_high"] + r["tokens_out_high"]
            per_stage[r["stage"]].append(Band(secs(r["calls_low"], r["tokens_in_low"] + r["tokens_out_low"]),
                                              secs(r["calls"], r["tokens_in"] + r["tokens_out"]),
                                              secs(r["calls_high"], tokens_high)))
        else:
            lat = r["_latency"]
            lat_band = (min(lat), sum(lat) / len(lat), max(lat)) if len(lat) >= 3 else bands.LATENCY_S
            conc = call.concurrency_of(r["provider"])
            per_stage[r["stage"]].append(Band(r["calls_low"] / conc * lat_band[0], r["calls"] / conc * lat_band[1],
                                              None if r["calls_high"] is None else r["calls_high"] / conc * lat_band[2]))
    for key, b in buckets.items():
        b["rpm"], b["tpm"] = (limits.get(key) or {}).get("rpm"), (limits.get(key) or {}).get("tpm")
        b["wall_s"] = (max(60.0 * b["calls"] / b["rpm"] if b["rpm"] else 0, 60.0 * b["tokens"] / b["tpm"] if b["tpm"]
                           else 0) if (b["rpm"] or b["tpm"]) else None)
    total = ZERO
    for stage in stage_registry.call_groups():
        if per_stage.get(stage):
            times = per_stage[stage]
            total += Band(max(t.low for t in times), max(t.point for t in times),
                          _max_or_none(t.high for t in times))
    unlimited = sorted(k for k, b in buckets.items() if b["wall_s"] is None)
    h = bands.BATCH_TURNAROUND_H
    # batch stages one after another, except the reliability runs, which wait on the same labels side by side
    chain = len({stage.split(":")[0] for stage in batch_stages})
    return {"limits": [buckets[k] for k in sorted(buckets)], "wall_s": round(total.point, 1),
            "wall_s_low": round(total.low, 1), "wall_s_high": None if total.high is None else round(total.high, 1),
            "wall_from": "rate limits" if not unlimited else (
                "concurrency x latency" + (" (rate limits where set)" if len(unlimited) < len(buckets) else "")),
            "unlimited": unlimited, "batch_stages": sorted(batch_stages),
            "batch_h": [chain * h[0], chain * h[1], chain * h[2]]}


def _max_or_none(values):
    values = list(values)
    return None if any(v is None for v in values) else max(values)
