"""Controlled variations (paper §4.3, B, H.2): relevance (P2), generation (P3, P4)
through the deterministic gate, and the reviewer panel (P5, P6).

Every variation is generated from the original prefix, never from another variation.
Ids: a candidate and its variation are `<prefix id>.<dimension>` (e.g.
`iot-012.at_trigger.RS6`).
"""

from __future__ import annotations

from aura_eval.construct.common import (DIMENSIONS, assemble, editable_indices, gate, narrowed, panel_requests,
                                        panel_rows, run_stage)
from aura_eval.dataset import hash_rank
from aura_eval.prompts import load_prompt, load_taxonomy
from aura_eval.tagging import render_steps

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

def relevance_requests(prefixes, prompt, taxonomy, endpoint):
    from aura_eval.llm import Request

    dims = dimension_list(taxonomy)
    return [Request(item_id=p["prefix_id"], endpoint=endpoint, prompt_id=prompt.id, prompt_version=prompt.version,
                    role="relevance", schema=prompt.schema,
                    messages=prompt.messages(dimensions=dims, profile=p["profile"], trajectory=render_steps(p["steps"])))
            for p in prefixes]


def relevance_row(prefix: dict, result, taxonomy: dict) -> dict:
    found, seen = [], set()
    for entry in (result.parsed or {}).get("dimensions", []) if result.status == "ok" else []:
        if entry["dimension"] in seen:  # a dimension named twice counts once (the first quote)
            continue
        seen.add(entry["dimension"])
        found.append({"dimension": entry["dimension"], "grounding": entry["grounding"],
                      "grounding_found": grounding_found(prefix, entry["grounding"])})
    found.sort(key=lambda d: DIMENSIONS.index(d["dimension"]))
    return {"prefix_id": prefix["prefix_id"], "seed_id": prefix["seed_id"], "relevant": found,
            "taxonomy_version": taxonomy["version"], **result.provenance()}


def candidate_rows(relevance: list[dict], max_per_prefix: int | None) -> list[dict]:
    """One row per relevant (prefix, dimension); beyond the per-prefix cap (a config
    setting for small runs) a row is kept with selected=false and the reason."""
    rows = []
    for rel in relevance:
        ranked = sorted(rel["relevant"], key=lambda d: hash_rank(f"{rel['prefix_id']}.{d['dimension']}", "cap"))
        chosen = {d["dimension"] for d in ranked[:max_per_prefix]} if max_per_prefix is not None else None
        for d in rel["relevant"]:
            selected = chosen is None or d["dimension"] in chosen
            rows.append({"candidate_id": f"{rel['prefix_id']}.{d['dimension']}", "prefix_id": rel["prefix_id"],
                         "seed_id": rel["seed_id"], "dimension": d["dimension"], "grounding": d["grounding"],
                         "grounding_found": d["grounding_found"], "selected": selected,
                         "skip_reason": None if selected else f"over the cap of {max_per_prefix} per prefix"})
    return rows


def run_relevance(prefixes_path, relevance_path, candidates_path, calls_path, config, progress=True) -> dict:
    from aura_eval.jsonl import read_jsonl, write_jsonl
    from aura_eval.llm import endpoints_for_role

    prefixes = read_jsonl(prefixes_path)
    prompt, taxonomy = load_prompt("p2_dimension_relevance"), load_taxonomy()
    (endpoint,) = endpoints_for_role(config, "relevance")
    results = run_stage(config, "relevance", relevance_requests(prefixes, prompt, taxonomy, endpoint), calls_path,
                        progress)
    rows = [relevance_row(p, r, taxonomy) for p, r in zip(prefixes, results)]
    candidates = candidate_rows(rows, config["construction"].get("max_candidates_per_prefix"))
    write_jsonl(relevance_path, rows, key="prefix_id")
    write_jsonl(candidates_path, candidates, key="candidate_id")
    return {"prefixes": len(rows), "candidates": len(candidates), "selected": sum(c["selected"] for c in candidates)}


# -- P3/P4: generation and the gate -------------------------------------------------

def _dimension_values(dimension: str, taxonomy: dict) -> dict:
    spec = taxonomy["dimensions"][dimension]
    return {"dimension": dimension, "name": spec["name"], "definition": spec["definition"],
            "direction": spec["direction"]}


def variation_prompt_id(dimension: str) -> str:
    return "p3_intensity_variation" if dimension == "RS1" else "p4_context_variation"


def variation_requests(candidates, prefixes: dict, prompts: dict, taxonomy, endpoint):
    from aura_eval.llm import Request

    requests = []
    for c in candidates:
        prefix, prompt = prefixes[c["prefix_id"]], prompts[variation_prompt_id(c["dimension"])]
        values = {**_dimension_values(c["dimension"], taxonomy), "grounding": c["grounding"],
                  "profile": prefix["profile"], "trajectory": render_steps(prefix["steps"]),
                  "editable": ", ".join(map(str, editable_indices(prefix["steps"])))}
        requests.append(Request(item_id=c["candidate_id"], endpoint=endpoint, prompt_id=prompt.id,
                                prompt_version=prompt.version, role="generator",
                                schema=narrowed(prompt.schema, steps=prefix["steps"]),
                                messages=prompt.messages(**values)))
    return requests


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


def run_variations(candidates_path, prefixes_path, variations_path, calls_path, config, progress=True) -> dict:
    from aura_eval.jsonl import read_jsonl, write_jsonl
    from aura_eval.llm import endpoints_for_role

    candidates = [c for c in read_jsonl(candidates_path) if c["selected"]]
    prefixes = {p["prefix_id"]: p for p in read_jsonl(prefixes_path)}
    prompts = {pid: load_prompt(pid) for pid in ("p3_intensity_variation", "p4_context_variation")}
    taxonomy = load_taxonomy()
    (endpoint,) = endpoints_for_role(config, "generator")
    results = run_stage(config, "vary", variation_requests(candidates, prefixes, prompts, taxonomy, endpoint),
                        calls_path, progress)
    rows = [variation_row(c, prefixes[c["prefix_id"]], r, taxonomy) for c, r in zip(candidates, results)]
    write_jsonl(variations_path, rows, key="variation_id")
    return {"variations": len(rows), "parseable": sum(r["status"] == "ok" for r in rows),
            "passed_gate": sum(r["passed_gate"] for r in rows)}


# -- P5/P6: the reviewer panel ------------------------------------------------------

def review_prompt_id(dimension: str) -> str:
    return "p5_intensity_review" if dimension == "RS1" else "p6_context_review"


def review_requests(variations, prefixes: dict, prompts: dict, taxonomy, reviewers):
    requests = []
    for v in variations:
        prefix, prompt = prefixes[v["prefix_id"]], prompts[review_prompt_id(v["dimension"])]
        messages = prompt.messages(**_dimension_values(v["dimension"], taxonomy), profile=prefix["profile"],
                                   original=render_steps(prefix["steps"]), variation=render_steps(v["steps"]),
                                   change=v["change"] or "(not stated)")
        requests += panel_requests(v["variation_id"], prompt, messages, reviewers, "reviewer")
    return requests


def run_reviews(variations_path, prefixes_path, reviews_path, calls_path, config, progress=True) -> dict:
    from aura_eval.jsonl import read_jsonl, write_jsonl
    from aura_eval.llm import endpoints_for_role

    variations = [v for v in read_jsonl(variations_path) if v["passed_gate"]]
    prefixes = {p["prefix_id"]: p for p in read_jsonl(prefixes_path)}
    prompts = {pid: load_prompt(pid) for pid in ("p5_intensity_review", "p6_context_review")}
    reviewers = endpoints_for_role(config, "reviewers")
    results = run_stage(config, "review_variations",
                        review_requests(variations, prefixes, prompts, load_taxonomy(), reviewers), calls_path,
                        progress)
    rows = panel_rows(variations, results, len(reviewers), REVIEW_CRITERIA,
                      ("variation_id", "prefix_id", "seed_id", "dimension"))
    write_jsonl(reviews_path, rows, key="variation_id")
    return {"reviewed": len(rows), "kept": sum(r["kept"] for r in rows),
            "unparseable_votes": sum(r["unparseable_votes"] for r in rows)}
