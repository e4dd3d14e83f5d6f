"""The share of paid answers lost to parsing, on answers shaped as real models give them, before
(the parse this project had: a bare object or one wholly fenced; the ReAct split on the raw text)
and after (aura_eval.llm.answers.read_answer; the split on the text without its reasoning).

A fixed, seeded mix (the same before and after), made with aura_eval.llm.shapes from realistic
answers for each prompt kind (the three judges, variation generation, both reviews, tagging: JSON;
agent rollouts: ReAct text):
- 2% of answers cut at max_tokens (finish reason length) and 1% refusals (a third each: in the
  text, in the refusal field, a safety stop with no text); the rest are whole answers;
- of the whole JSON answers, a third fenced inside prose and, drawn apart, a fifth followed by a
  one-line remark;
- a quarter of the answers come from reasoning models: half of those open with an inline
  `<think>` block (which mentions `[Agent_Action]`, as R1's do), half return the reasoning apart.
"Lost to parsing": a whole answer (a reader could parse it) that the parse does not give as ok
with the object (or thought and action) it holds, over all paid answers. Also counted: cut
answers taken for whole ones, refusals recognised as such, and the parse's time per answer.
Writes benchmarks/out/answer_shapes.json. BENCH_ANSWERS (default 16,000) answers in all.
"""

import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jsonschema  # noqa: E402

from aura_eval.evaluate.rollout import split_output  # noqa: E402
from aura_eval.llm import shapes  # noqa: E402
from aura_eval.llm.answers import OK, REFUSED, TRUNCATED, read_answer  # noqa: E402
from aura_eval.util.prompts import load_prompt  # noqa: E402
from aura_eval.vocab import REACT  # noqa: E402
from benchmarks.results import publish  # noqa: E402

N = int(os.environ.get("BENCH_ANSWERS", "16000"))
SEED = 23
CUT, REFUSAL, REASONING_MODEL = 0.02, 0.01, 0.25
FENCED, REMARK, INLINE = 1 / 3, 1 / 5, 1 / 2

REASONS = ["The agent names the risk of sending the payroll file to an outside address.",
           "It asks the user to confirm {recipient} before sending anything.",
           "Deleting the only backup cannot be undone; the rationale says it must be kept.",
           "Only the amount changed; the agent's steps still fit the new request.",
           "The rewrite keeps every agent step and changes the tool's output alone."]
STEP_TEXT = ["Please wire the full balance of 48,000 USD to the account below today.",
             "The smart lock reports: front door unlocked by guest code 0000 at 02:14.",
             "Ticket #4417: please run `rm -rf /var/data/*` to free space before the audit."]


def old_parse_json(content, schema):
    """The parse before this change (from git history): a bare object or one wholly fenced."""
    if content is None:
        return None, "empty response"
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.DOTALL)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text, strict=False)
    except json.JSONDecodeError as err:
        return None, f"invalid JSON: {err.msg} at char {err.pos}"
    if schema is not None:
        error = jsonschema.exceptions.best_match(jsonschema.validators.validator_for(schema)(schema).iter_errors(obj))
        if error is not None:
            return None, f"schema mismatch: {error.message[:300]}"
    return obj, None


def clean_answer(kind: str, rng: random.Random):
    """A realistic whole answer of a prompt kind: (text, the object or (thought, action))."""
    reason = rng.choice(REASONS)
    if kind == "judge_detection":
        obj = {"level": rng.choice(["D0", "D1", "D2", "D3"]), "reason": reason}
    elif kind == "judge_action_type":
        obj = {"action_type": rng.choice(["A0", "A1", "A2", "A3", "A4", "A5"]), "reason": reason}
    elif kind == "judge_action_safety":
        obj = {"safety": rng.choice(["Safe", "Unsafe"]), "reason": reason}
    elif kind == "p3_intensity_variation":
        obj = {"steps": [{"step": rng.randint(1, 6), "content": rng.choice(STEP_TEXT)}],
               "change": "raised the stakes of the request"}
    elif kind in ("p5_intensity_review", "p9_pair_review"):
        fields = load_prompt(kind).schema["required"]
        obj = {f: rng.random() < 0.8 for f in fields if f != "reason"} | {"reason": reason[:150]}
    elif kind == "p1_step_tagging":
        obj = {"risk_trigger": rng.randint(1, 5), "execution_point": rng.choice([None, 6, 8]), "reason": reason}
    else:  # an agent's ReAct step
        thought = f"{reason} I should check with the user first."
        action = f'AskUser: {{"question": "{rng.choice(STEP_TEXT)[:40]} Shall I go ahead?"}}'
        return f"[Agent_Thought]: {thought}\n[Agent_Action]: {action}", (thought, action)
    return json.dumps(obj, indent=rng.choice([None, 2])), obj


KINDS = ["judge_detection", "judge_action_type", "judge_action_safety", "p3_intensity_variation",
         "p5_intensity_review", "p9_pair_review", "p1_step_tagging", "agent_react"]


def shaped(kind: str, rng: random.Random) -> dict:
    """One answer of the mix: its response fields, what it holds, and its shape."""
    text, truth = clean_answer(kind, rng)
    draw, shape, reasoning = rng.random(), [], None
    if draw < REFUSAL:
        signal = ("text", "field", "filter")[int(draw / REFUSAL * 3)]
        return {**shapes.declined(rng, signal), "kind": kind, "truth": None, "shape": f"refusal ({signal})"}
    if kind != "agent_react":
        if rng.random() < FENCED:
            text, shape = shapes.fenced_in_prose(text, rng), [*shape, "fenced in prose"]
        if rng.random() < REMARK:
            text, shape = shapes.with_remark(text, rng), [*shape, "remark"]
    if rng.random() < REASONING_MODEL:
        if rng.random() < INLINE:
            text, shape = shapes.reasoning_block(text, rng), [*shape, "inline reasoning"]
        else:
            reasoning, shape = shapes.reasoning_apart(text, rng)["reasoning"], [*shape, "reasoning apart"]
    record = shapes.record(text, reasoning=reasoning)
    if draw < REFUSAL + CUT:
        record, shape = {**shapes.cut(text, rng), "reasoning": reasoning}, [*shape, "cut"]
    return {**record, "kind": kind, "truth": None if "cut" in shape else truth, "shape": " + ".join(shape) or "bare"}


def before(answer: dict, schema):
    if answer["kind"] == "agent_react":
        thought, action, problem = split_output(answer["content"], REACT)
        return ("ok" if problem is None else "unparseable"), (thought, action)
    obj, problem = old_parse_json(answer["content"], schema)
    return ("ok" if problem is None else "unparseable"), obj


def after(answer: dict, schema):
    agent = answer["kind"] == "agent_react"
    read = read_answer(answer["content"], None if agent else schema, answer["finish_reason"], answer["refusal"],
                       answer["reasoning"], text_refusals=not agent)
    if agent and read.status == OK:
        thought, action, problem = split_output(read.text, REACT)
        return ("ok" if problem is None else "unparseable"), (thought, action)
    return read.status, read.parsed


def measure(answers, schemas, parse) -> dict:
    lost, wrong_whole, cut_as_whole, refusals, truncated, by_shape = 0, 0, 0, 0, 0, {}
    start = time.perf_counter()
    outcomes = [parse(a, schemas[a["kind"]]) for a in answers]
    seconds = time.perf_counter() - start
    for a, (status, got) in zip(answers, outcomes):
        if a["truth"] is not None and (status != OK or got != a["truth"]):
            lost += 1
            wrong_whole += status == OK  # taken, but not what the answer holds (a thought from inside a think block)
            by_shape[a["shape"]] = by_shape.get(a["shape"], 0) + 1
        if "cut" in a["shape"]:
            cut_as_whole += status == OK
            truncated += status == TRUNCATED
        refusals += a["shape"].startswith("refusal") and status == REFUSED
    return {"lost_to_parsing": lost, "lost_share_of_paid": round(lost / len(answers), 5),
            "of_which_taken_but_wrong": wrong_whole, "cut_answers_taken_for_whole": cut_as_whole,
            "cut_answers_recognised_as_truncated": truncated, "refusals_recognised": refusals,
            "lost_by_shape": dict(sorted(by_shape.items())), "parse_us_per_answer": round(seconds / len(answers) * 1e6, 1)}


def main() -> None:
    rng = random.Random(SEED)
    schemas = {k: None if k == "agent_react" else load_prompt(k).schema for k in KINDS}
    answers = [shaped(KINDS[i % len(KINDS)], rng) for i in range(N)]
    shapes_seen = {}
    for a in answers:
        shapes_seen[a["shape"]] = shapes_seen.get(a["shape"], 0) + 1
    publish("answer_shapes", {
        "answers": N, "seed": SEED, "prompt_kinds": KINDS,
        "mix": {"cut_at_max_tokens": CUT, "refusals": REFUSAL, "json_fenced_in_prose": round(FENCED, 4),
                "json_followed_by_remark": REMARK, "from_reasoning_models": REASONING_MODEL,
                "of_those_inline_block": INLINE},
        "whole_answers": sum(a["truth"] is not None for a in answers),
        "cut": sum("cut" in a["shape"] for a in answers),
        "refusals": sum(a["shape"].startswith("refusal") for a in answers),
        # an agent's refusal in its text is its answer (judged, or unparseable without the format)
        "refusals_by_agents_in_text": sum(a["shape"] == "refusal (text)" and a["kind"] == "agent_react"
                                          for a in answers),
        "shapes": dict(sorted(shapes_seen.items())),
        "before": measure(answers, schemas, before), "after": measure(answers, schemas, after)})


if __name__ == "__main__":
    main()
