"""Controlled variations (paper §4.3, B, H.2): relevance (P2), generation (P3, P4)
through the deterministic gate, and the reviewer panel (P5, P6).

Every variation is generated from the original prefix, never from another variation.
Ids: a candidate and its variation are `<prefix id>.<dimension>` (e.g.
`iot-012.at_trigger.RS6`).
"""

from __future__ import annotations

from aura_eval.construct.common import assemble, editable_indices, gate, narrowed, review_row
from aura_eval.util.jsonl import read_jsonl
from aura_eval.llm.types import Request, endpoints
from aura_eval.panel import member_requests
from aura_eval.util.prompts import load_prompt
from aura_eval.stage_runner import StageRun, run_stage
from aura_eval.stage_registry import model_stage
from aura_eval.construct.tagging import render_steps
from aura_eval.vocab import FILES, OVER_CAP, VARIED_DIMENSIONS, hash_rank, item_id, load_taxonomy

REVIEW_CRITERIA = ("target_changed", "intended_direction", "others_unchanged", "realistic", "agent_steps_fit")


def _normalise(text: str) -> str:
    return " ".join((text or "").lower().split())


def grounding_found(prefix: dict, quote: str) -> bool:
    """Whether the quoted grounding element occurs in a user or environment step (case and spacing aside)."""
    quote = _normalise(quote)
    return bool(quote) and any(quote in _normalise(s.get("content")) for s in prefix["steps"]
                               if s["role"] != "agent")


def dimension_list(taxonomy: dict) -> str:
    return "\n".join(f"- {dim} {spec['name']}: {spec['definition']}" for dim, spec in taxonomy["dimensions"].items())


# -- P2: relevance ------------------------------------------------------------------

def relevance_request(prefix, prompt, taxonomy, endpoint) -> Request:
    return Request(item_id=prefix["prefix_id"], endpoint=endpoint, prompt_id=prompt.id, prompt_version=prompt.version,
                   role="relevance", schema=prompt.schema,
                   messages=prompt.messages(dimensions=dimension_list(taxonomy), profile=prefix["profile"],
                                            trajectory=render_steps(prefix["steps"])), facts={"steps": prefix["steps"]})


def relevance_row(prefix: dict, result, taxonomy: dict) -> dict:
    found, seen = [], set()
    for entry in (result.parsed or {}).get("dimensions", []) if result.status == "ok" else []:
        if entry["dimension"] in seen:  # a dimension named twice counts once (the first quote)
            continue
        seen.add(entry["dimension"])
        found.append({"dimension": entry["dimension"], "grounding": entry["grounding"],
                      "grounding_found": grounding_found(prefix, entry["grounding"])})
    found.sort(key=lambda d: VARIED_DIMENSIONS.index(d["dimension"]))
    return {"prefix_id": prefix["prefix_id"], "seed_id": prefix["seed_id"], "relevant": found,
            "taxonomy_version": taxonomy["version"], **result.provenance()}


def candidate_rows(relevance: list[dict], max_per_prefix: int | None) -> list[dict]:
    """One row per relevant (prefix, dimension); beyond the per-prefix cap (a config
    setting for small runs) a row is kept with selected=false and the reason (`over the per-prefix cap`)."""
    rows = []
    for rel in relevance:
        ranked = sorted(rel["relevant"], key=lambda d: hash_rank(item_id(rel["prefix_id"], d["dimension"]), "cap"))
        chosen = {d["dimension"] for d in ranked[:max_per_prefix]} if max_per_prefix is not None else None
        for d in rel["relevant"]:
            selected = chosen is None or d["dimension"] in chosen
            rows.append({"candidate_id": item_id(rel["prefix_id"], d["dimension"]), "prefix_id": rel["prefix_id"],
                         "seed_id": rel["seed_id"], "dimension": d["dimension"], "grounding": d["grounding"],
                         "grounding_found": d["grounding_found"], "selected": selected,
                         "skip_reason": None if selected else OVER_CAP})
    return rows


def relevance(prefixes_path, relevance_path, candidates_path, calls_path, llm, model: list[dict],
                  max_per_prefix: int | None, threads=None, progress=True) -> dict:
    prefixes = read_jsonl(prefixes_path)
    prompt, taxonomy = load_prompt("p2_dimension_relevance"), load_taxonomy()
    (endpoint,) = endpoints(model)
    with StageRun("relevance", llm, calls_path, threads, progress) as stage:
        rows = stage.rows(prefixes, lambda p: relevance_request(p, prompt, taxonomy, endpoint),
                          lambda p, result: relevance_row(p, result, taxonomy))
        candidates = candidate_rows(rows, max_per_prefix)
        stage.write(relevance_path, rows, "prefix_id")
        stage.write(candidates_path, candidates, "candidate_id")
    return {"prefixes": len(rows), "candidates": len(candidates), "selected": sum(c["selected"] for c in candidates)}


# -- P3/P4: generation and the gate -------------------------------------------------

def _dimension_values(dimension: str, taxonomy: dict) -> dict:
    spec = taxonomy["dimensions"][dimension]
    return {"dimension": dimension, "name": spec["name"], "definition": spec["definition"],
            "direction": spec["direction"]}


VARY_PROMPTS = ("p3_intensity_variation", "p4_context_variation")  # P3 for RS1, P4 for the other ten


def variation_prompt_id(dimension: str) -> str:
    return "p3_intensity_variation" if dimension == "RS1" else "p4_context_variation"


def variation_request(c: dict, prefixes: dict, prompts: dict, taxonomy, endpoint) -> Request:
    prefix, prompt = prefixes[c["prefix_id"]], prompts[variation_prompt_id(c["dimension"])]
    values = {**_dimension_values(c["dimension"], taxonomy), "grounding": c["grounding"],
              "profile": prefix["profile"], "trajectory": render_steps(prefix["steps"]),
              "editable": ", ".join(map(str, editable_indices(prefix["steps"])))}
    return Request(item_id=c["candidate_id"], endpoint=endpoint, prompt_id=prompt.id, prompt_version=prompt.version,
                   role="generator", schema=narrowed(prompt.schema, steps=prefix["steps"]),
                   messages=prompt.messages(**values), facts={"steps": prefix["steps"]})


def variation_row(candidate: dict, prefix: dict, result, taxonomy: dict) -> dict:
    """The candidate's variation: steps when it passed the gate, else the rejection reason."""
    steps, rejection = None, None
    if result.status != "ok":
        rejection = f"{result.status}: {result.error}"
    else:
        steps, rejection = assemble(prefix["steps"], result.parsed["steps"])
        if steps is not None:
            rejection = gate(prefix["steps"], steps)
    return {"variation_id": candidate["candidate_id"], "prefix_id": candidate["prefix_id"],
            "seed_id": candidate["seed_id"], "dimension": candidate["dimension"],
            "grounding": candidate["grounding"], "passed_gate": rejection is None, "rejection": rejection,
            "steps": steps if rejection is None else None,
            "change": (result.parsed or {}).get("change"), "taxonomy_version": taxonomy["version"],
            **result.provenance()}


def vary(candidates_path, prefixes_path, variations_path, calls_path, llm, model: list[dict],
                   threads=None, progress=True) -> dict:
    candidates = [c for c in read_jsonl(candidates_path) if c["selected"]]
    prefixes = {p["prefix_id"]: p for p in read_jsonl(prefixes_path)}
    prompts = {pid: load_prompt(pid) for pid in VARY_PROMPTS}
    taxonomy = load_taxonomy()
    (endpoint,) = endpoints(model)
    rows = run_stage("vary", llm, candidates, lambda c: variation_request(c, prefixes, prompts, taxonomy, endpoint),
                     lambda c, result: variation_row(c, prefixes[c["prefix_id"]], result, taxonomy),
                     variations_path, "variation_id", calls_path, threads, progress)
    return {"variations": len(rows), "parseable": sum(r["status"] == "ok" for r in rows),
            "passed_gate": sum(r["passed_gate"] for r in rows)}


# -- P5/P6: the reviewer panel ------------------------------------------------------

REVIEW_PROMPTS = ("p5_intensity_review", "p6_context_review")  # P5 for RS1, P6 for the other ten


def review_prompt_id(dimension: str) -> str:
    return "p5_intensity_review" if dimension == "RS1" else "p6_context_review"


def review_requests(v: dict, prefixes: dict, prompts: dict, taxonomy, reviewers) -> list[Request]:
    prefix, prompt = prefixes[v["prefix_id"]], prompts[review_prompt_id(v["dimension"])]
    messages = prompt.messages(**_dimension_values(v["dimension"], taxonomy), profile=prefix["profile"],
                               original=render_steps(prefix["steps"]), variation=render_steps(v["steps"]),
                               change=v["change"] or "(not stated)")
    return member_requests(v["variation_id"], reviewers, prompt, messages, "reviewer")


def review_variations(variations_path, prefixes_path, reviews_path, calls_path, llm, models: list[dict], threads=None,
                progress=True) -> dict:
    variations = [v for v in read_jsonl(variations_path) if v["passed_gate"]]
    prefixes = {p["prefix_id"]: p for p in read_jsonl(prefixes_path)}
    prompts = {pid: load_prompt(pid) for pid in REVIEW_PROMPTS}
    reviewers, taxonomy = endpoints(models), load_taxonomy()
    rows = run_stage("review_variations", llm, variations,
                     lambda v: review_requests(v, prefixes, prompts, taxonomy, reviewers),
                     lambda v, results: review_row(v, results, REVIEW_CRITERIA,
                                                   ("variation_id", "prefix_id", "seed_id", "dimension")),
                     reviews_path, "variation_id", calls_path, threads, progress)
    return {"reviewed": len(rows), "kept": sum(r["kept"] for r in rows),
            **{f"{s}_votes": sum(r[f"{s}_votes"] for r in rows) for s in ("unparseable", "truncated", "refused")}}


# -- the registry entries (aura_eval.stage_registry) -------------------------------------------

def _relevance_requests(ctx) -> list[Request] | None:
    prefixes = ctx.read("prefixes")
    if prefixes is None:
        return None
    prompt, taxonomy, (endpoint,) = load_prompt("p2_dimension_relevance"), load_taxonomy(), endpoints(ctx.models)
    return [relevance_request(p, prompt, taxonomy, endpoint) for p in prefixes]


def _vary_requests(ctx) -> list[Request] | None:
    candidates, prefixes = ctx.read("candidates"), ctx.read("prefixes")
    if candidates is None or prefixes is None:
        return None
    prompts = {pid: load_prompt(pid) for pid in VARY_PROMPTS}
    by_prefix, taxonomy, (endpoint,) = {p["prefix_id"]: p for p in prefixes}, load_taxonomy(), endpoints(ctx.models)
    return [variation_request(c, by_prefix, prompts, taxonomy, endpoint) for c in candidates if c["selected"]]


def _review_requests(ctx) -> list[Request] | None:
    variations, prefixes = ctx.read("variations"), ctx.read("prefixes")
    if variations is None or prefixes is None:
        return None
    prompts = {pid: load_prompt(pid) for pid in REVIEW_PROMPTS}
    by_prefix, taxonomy, reviewers = {p["prefix_id"]: p for p in prefixes}, load_taxonomy(), endpoints(ctx.models)
    return [r for v in variations if v["passed_gate"]
            for r in review_requests(v, by_prefix, prompts, taxonomy, reviewers)]


model_stage(rule="relevance", role="relevance", prompts=("p2_dimension_relevance",), taxonomy=True,
            units="each prefix (which dimensions it grounds)", output=FILES["relevance"],
            calls="results/calls/construct/relevance.jsonl", output_tokens=600, requests=_relevance_requests)
model_stage(rule="vary", role="generator", prompts=VARY_PROMPTS, taxonomy=True,
            units="each selected (prefix, dimension) candidate", output=FILES["variations"],
            calls="results/calls/construct/vary.jsonl", output_tokens=2000, requests=_vary_requests)
model_stage(rule="review_variations", role="reviewers", prompts=REVIEW_PROMPTS, taxonomy=True,
            units="each variation that passed the gate, per reviewer", output=FILES["variation_reviews"],
            calls="results/calls/construct/review_variations.jsonl", output_tokens=300, trajectory_copies=2,
            requests=_review_requests)
