"""No-Safe-Path / Safe-Path labels and pairs (paper §4.2, A.1-A.2, H.3):
classification of the pool (P7), pair generation (P8) through the gate and the
prefix-validity check, and the pair-review panel (P9).

The pool is every original prefix (`<prefix id>.original`) and every kept variation
(`<prefix id>.<dimension>`). A generated counterpart is `<source item id>.pair`; the
two share the pair id `pair:<source item id>`.
"""

from __future__ import annotations

from aura_eval.construct.common import assemble, editable_indices, gate, narrowed, prefix_valid, review_row, vote_summary
from aura_eval.util.jsonl import read_jsonl
from aura_eval.llm.types import Request, endpoints
from aura_eval.panel import member_requests
from aura_eval.util.prompts import load_prompt
from aura_eval.stage_runner import run_stage
from aura_eval.stage_registry import model_stage
from aura_eval.construct.tagging import render_steps
from aura_eval.vocab import FILES, NO_USABLE_LABEL, NSP, OPPOSITE, ORIGINAL, SP, counterpart_item_id, item_id, pair_id
CLASSIFICATION_FIELDS = ("pair_label", "reference_rationale", "evidence", "safe_action_sketches",
                         "unsafe_explanation", "flip_feasible", "flip_kind", "flip_difficulty")
PAIR_CRITERIA = ("achieves_label", "agent_steps_preserved", "minimal_in_domain", "realistic_consistent",
                 "valid_prefix", "sketches_accurate")


def pool_items(prefixes: list[dict], variations: list[dict], reviews: list[dict]) -> list[dict]:
    """Originals plus the variations the panel kept, each with where it came from."""
    by_prefix = {p["prefix_id"]: p for p in prefixes}
    pool = []
    for p in prefixes:
        pool.append({"item_id": item_id(p["prefix_id"], ORIGINAL), "prefix_id": p["prefix_id"], "seed_id": p["seed_id"],
                     "domain": p["domain"], "decision_point": p["decision_point"], "dimension": ORIGINAL,
                     "profile": p["profile"], "steps": p["steps"], "origin": {"kind": "original"}})
    kept = {r["variation_id"]: r for r in reviews if r["kept"]}
    for v in variations:
        if v["variation_id"] not in kept:
            continue
        p = by_prefix[v["prefix_id"]]
        pool.append({"item_id": v["variation_id"], "prefix_id": p["prefix_id"], "seed_id": p["seed_id"],
                     "domain": p["domain"], "decision_point": p["decision_point"], "dimension": v["dimension"],
                     "profile": p["profile"], "steps": v["steps"],
                     "origin": {"kind": "variation", "prompt": v["prompt"], "prompt_version": v["prompt_version"],
                                "model": v["model"], "endpoint": v["endpoint"], "grounding": v["grounding"],
                                "change": v["change"],
                                "taxonomy_version": v["taxonomy_version"],
                                "review": vote_summary(kept[v["variation_id"]])}})
    return sorted(pool, key=lambda item: item["item_id"])


# -- P7: classification ---------------------------------------------------------------

def label_problem(parsed: dict, label: str) -> str | None:
    """Why a label's supporting text is incomplete: SP needs a sketch, NSP an explanation."""
    if not (parsed.get("reference_rationale") or "").strip():
        return "no reference risk rationale"
    if label == SP and not any((s or "").strip() for s in parsed.get("safe_action_sketches") or []):
        return "Safe-Path without a safe-action sketch"
    if label == NSP and not (parsed.get("unsafe_explanation") or "").strip():
        return "No-Safe-Path without an explanation of why fulfilment is unsafe"
    return None


def classification_row(item: dict, result) -> dict:
    parsed = result.parsed if result.status == "ok" else {}
    problem = f"{result.status}: {result.error}" if result.status != "ok" else label_problem(parsed, parsed["pair_label"])
    pairable = problem is None and parsed["flip_feasible"] and parsed["flip_kind"] != "none" \
        and parsed["flip_difficulty"] != "hard"
    return {**item, "classification": {**{f: parsed.get(f) for f in CLASSIFICATION_FIELDS},
                                       "complete": problem is None, "problem": problem, "pairable": bool(pairable),
                                       **result.provenance()}}


def classification_request(item: dict, prompt, endpoint) -> Request:
    return Request(item_id=item["item_id"], endpoint=endpoint, prompt_id=prompt.id, prompt_version=prompt.version,
                   role="classifier", schema=prompt.schema,
                   messages=prompt.messages(profile=item["profile"], trajectory=render_steps(item["steps"])))


def classify(prefixes_path, variations_path, reviews_path, pool_path, calls_path, llm,
                       model: list[dict], threads=None, progress=True) -> dict:
    pool = pool_items(read_jsonl(prefixes_path), read_jsonl(variations_path), read_jsonl(reviews_path))
    prompt = load_prompt("p7_pair_classification")
    (endpoint,) = endpoints(model)
    rows = run_stage("classify", llm, pool, lambda i: classification_request(i, prompt, endpoint),
                     classification_row, pool_path, "item_id", calls_path, threads, progress)
    return {"pool": len(rows), "complete": sum(r["classification"]["complete"] for r in rows),
            "pairable": sum(r["classification"]["pairable"] for r in rows)}


# -- P8: pair generation --------------------------------------------------------------

def full_trajectory(item: dict, seed: dict) -> list[dict]:
    """The item's (possibly rewritten) prefix followed by the rest of the source trajectory."""
    return item["steps"] + seed["steps"][len(item["steps"]):]


def pair_request(item: dict, seed: dict, prompt, endpoint) -> Request:
    c, full = item["classification"], full_trajectory(item, seed)
    values = {"profile": item["profile"], "source_label": c["pair_label"], "target_label": OPPOSITE[c["pair_label"]],
              "rationale": c["reference_rationale"], "flip_kind": c["flip_kind"],
              "trajectory": render_steps(item["steps"]), "full_trajectory": render_steps(full),
              "editable_truncated": ", ".join(map(str, editable_indices(item["steps"]))),
              "editable_full": ", ".join(map(str, editable_indices(full)))}
    return Request(item_id=item["item_id"], endpoint=endpoint, prompt_id=prompt.id, prompt_version=prompt.version,
                   role="pair_generator", schema=narrowed(prompt.schema, truncated=item["steps"], full=full),
                   messages=prompt.messages(**values), facts={"steps": full})


def check_pair(item: dict, seed: dict, parsed: dict, target: str) -> tuple[list | None, list | None, str | None]:
    """(truncated steps, full steps, None) for a legal counterpart, else (.., .., the rejection reason,
    which starts with its category: aura_eval.vocab.LOSS_REASONS)."""
    full_original = full_trajectory(item, seed)
    truncated, problem = assemble(item["steps"], parsed["truncated"])
    if problem:
        return None, None, f"{problem} (in the truncated rewrite)"
    full, problem = assemble(full_original, parsed["full"])
    if problem:
        return truncated, None, f"{problem} (in the full rewrite)"
    problem = gate(item["steps"], truncated) or gate(full_original, full) or prefix_valid(truncated, full)
    if problem is None and (unlabelled := label_problem(parsed, target)):
        problem = f"{NO_USABLE_LABEL}: {unlabelled}"
    return truncated, full, problem


def pair_row(item: dict, seed: dict, result) -> dict:
    source_label = item["classification"]["pair_label"]
    target = OPPOSITE[source_label]
    truncated = full = None
    if result.status != "ok":
        rejection = f"{result.status}: {result.error}"
    else:
        truncated, full, rejection = check_pair(item, seed, result.parsed, target)
    parsed = result.parsed or {}
    return {"item_id": counterpart_item_id(item["item_id"]), "source_item_id": item["item_id"],
            "pair_id": pair_id(item["item_id"]), "prefix_id": item["prefix_id"], "seed_id": item["seed_id"],
            "dimension": item["dimension"], "source_label": source_label, "pair_label": target,
            "flip_kind": item["classification"]["flip_kind"], "passed_checks": rejection is None,
            "rejection": rejection, "steps": truncated if rejection is None else None,
            "full_steps": full if rejection is None else None,
            "reference_rationale": parsed.get("reference_rationale"),
            "safe_action_sketches": parsed.get("safe_action_sketches"),
            "unsafe_explanation": parsed.get("unsafe_explanation"), **result.provenance()}


def generate_pairs(pool_path, seeds_path, pairs_path, calls_path, llm, model: list[dict], threads=None,
                        progress=True) -> dict:
    items = [i for i in read_jsonl(pool_path) if i["classification"]["pairable"]]
    seeds = {s["seed_id"]: s for s in read_jsonl(seeds_path)}
    prompt = load_prompt("p8_pair_generation")
    (endpoint,) = endpoints(model)
    rows = run_stage("generate_pairs", llm, items, lambda i: pair_request(i, seeds[i["seed_id"]], prompt, endpoint),
                     lambda i, result: pair_row(i, seeds[i["seed_id"]], result), pairs_path, "item_id", calls_path,
                     threads, progress)
    return {"pair_candidates": len(rows), "parseable": sum(r["status"] == "ok" for r in rows),
            "passed_checks": sum(r["passed_checks"] for r in rows)}


# -- P9: pair review ------------------------------------------------------------------

def _sketch_text(pair: dict) -> tuple[str, str]:
    if pair["pair_label"] == SP:
        return "Safe-action sketches", "; ".join(pair["safe_action_sketches"] or []) or "(none)"
    return "Why no safe fulfilling action exists", pair["unsafe_explanation"] or "(none)"


def pair_review_requests(pair: dict, pool: dict, prompt, reviewers) -> list[Request]:
    source = pool[pair["source_item_id"]]
    heading, sketches = _sketch_text(pair)
    messages = prompt.messages(profile=source["profile"], source_label=pair["source_label"],
                               target_label=pair["pair_label"], original=render_steps(source["steps"]),
                               rewrite=render_steps(pair["steps"]), full_rewrite=render_steps(pair["full_steps"]),
                               rationale=pair["reference_rationale"], sketch_heading=heading, sketches=sketches)
    return member_requests(pair["item_id"], reviewers, prompt, messages, "pair_reviewer")


def review_pairs(pairs_path, pool_path, reviews_path, calls_path, llm, models: list[dict], threads=None,
                     progress=True) -> dict:
    pairs = [p for p in read_jsonl(pairs_path) if p["passed_checks"]]
    pool = {i["item_id"]: i for i in read_jsonl(pool_path)}
    prompt, reviewers = load_prompt("p9_pair_review"), endpoints(models)
    rows = run_stage("review_pairs", llm, pairs, lambda p: pair_review_requests(p, pool, prompt, reviewers),
                     lambda p, results: review_row(p, results, PAIR_CRITERIA, ("item_id", "source_item_id")),
                     reviews_path, "item_id", calls_path, threads, progress)
    return {"reviewed": len(rows), "kept": sum(r["kept"] for r in rows),
            **{f"{s}_votes": sum(r[f"{s}_votes"] for r in rows) for s in ("unparseable", "truncated", "refused")}}


# -- the registry entries (aura_eval.stage_registry) -------------------------------------------

def _classification_requests(ctx) -> list[Request] | None:
    prefixes, variations, reviews = ctx.read("prefixes"), ctx.read("variations"), ctx.read("variation_reviews")
    if None in (prefixes, variations, reviews):
        return None
    prompt, (endpoint,) = load_prompt("p7_pair_classification"), endpoints(ctx.models)
    return [classification_request(i, prompt, endpoint) for i in pool_items(prefixes, variations, reviews)]


def _pair_requests(ctx) -> list[Request] | None:
    pool, seeds = ctx.read("pool"), ctx.read("seeds")
    if pool is None or seeds is None:
        return None
    by_seed, prompt, (endpoint,) = {s["seed_id"]: s for s in seeds}, load_prompt("p8_pair_generation"), endpoints(ctx.models)
    return [pair_request(i, by_seed[i["seed_id"]], prompt, endpoint) for i in pool if i["classification"]["pairable"]]


def _pair_review_requests(ctx) -> list[Request] | None:
    pairs, pool = ctx.read("pairs"), ctx.read("pool")
    if pairs is None or pool is None:
        return None
    by_item, prompt, reviewers = {i["item_id"]: i for i in pool}, load_prompt("p9_pair_review"), endpoints(ctx.models)
    return [r for x in pairs if x["passed_checks"] for r in pair_review_requests(x, by_item, prompt, reviewers)]


model_stage(rule="classify", role="classifier", prompts=("p7_pair_classification",),
            units="each original prefix and kept variation (the pool)", output=FILES["pool"],
            calls="results/calls/construct/classify.jsonl", output_tokens=600, requests=_classification_requests)
model_stage(rule="generate_pairs", role="pair_generator", prompts=("p8_pair_generation",),
            units="each pool item whose label can flip", output=FILES["pairs"],
            calls="results/calls/construct/generate_pairs.jsonl", output_tokens=2500, trajectory_copies=2,
            requests=_pair_requests)
model_stage(rule="review_pairs", role="pair_reviewers", prompts=("p9_pair_review",),
            units="each pair candidate that passed the checks, per reviewer", output=FILES["pair_reviews"],
            calls="results/calls/construct/review_pairs.jsonl", output_tokens=400, trajectory_copies=3,
            requests=_pair_review_requests)
