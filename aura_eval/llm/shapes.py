"""Answers shaped as real models give them, made from a clean answer: fenced inside prose,
followed by a remark, opened by a reasoning block (or with the reasoning returned apart), cut at
max_tokens, declined. Each shape gives a response record's answer fields (`content`,
`finish_reason`, `reasoning`, `refusal`) as litellm normalises them, so the simulator's noise and
the benchmark of the parse (benchmarks/bench_answer_shapes.py) make the same answers the tests'
fixture corpus pins down (tests/fixtures/answers/).
"""

from __future__ import annotations

import random

# Openers and remarks in the manner of chat models asked for JSON only.
OPENERS = ("Here is my assessment:", "Sure! Here's the JSON you asked for:", "Based on the trajectory, my answer is:",
           "Here is the result.", "After reviewing the interaction, I conclude:", "Certainly.")
REMARKS = ("Let me know if you need anything else.", "I hope this helps!",
           "Note: the assessment is based only on the steps shown.", "(All fields are filled as requested.)")
REASONINGS = (("Let me look at the steps first. The user asks for one thing, but the environment shows something "
               "else. I should check whether the action follows from the request."),
              ("Okay, so the key question is whether the agent noticed the risk. It mentions the file, "
               "but does it say why that matters? I think the answer follows."))
DECLINES = ("I'm sorry, but I can't help with rewriting this scenario to make it more harmful.",
            "I cannot assist with creating content that describes how to cause harm.",
            "Sorry, I can't help with that request.")
REFUSAL_FIELD = "I'm sorry, but I can't assist with that."  # OpenAI's message.refusal for a declined schema


def record(content: str | None, finish_reason: str = "stop", reasoning: str | None = None,
           refusal: str | None = None) -> dict:
    """A response record's answer fields."""
    return {"content": content, "finish_reason": finish_reason, "reasoning": reasoning, "refusal": refusal}


def fenced_in_prose(answer: str, rng: random.Random) -> str:
    """The answer in a ```json fence between an opener and a remark."""
    return f"{rng.choice(OPENERS)}\n\n```json\n{answer}\n```\n\n{rng.choice(REMARKS)}"


def with_remark(answer: str, rng: random.Random) -> str:
    """The answer followed by a one-line remark."""
    return f"{answer}\n{rng.choice(REMARKS)}"


def reasoning_block(answer: str, rng: random.Random, tag: str = "think") -> str:
    """The answer opened by an inline reasoning block (a reasoning model on a server that leaves it
    in the text); the block mentions the answer's own markers, as R1's often do."""
    return (f"<{tag}>\n{rng.choice(REASONINGS)} The format is [Agent_Thought]: my reasoning, then "
            f"[Agent_Action]: the call.\n</{tag}>\n\n{answer}")


def reasoning_apart(answer: str, rng: random.Random) -> dict:
    """The answer with its reasoning returned apart (reasoning_content: DeepSeek's API, OpenRouter,
    vLLM with a reasoning parser, Anthropic's thinking blocks)."""
    return record(answer, reasoning=rng.choice(REASONINGS))


def cut(answer: str, rng: random.Random) -> dict:
    """The answer cut at max_tokens: a prefix of 30-90% of it, finish reason length."""
    return record(answer[:max(1, int(len(answer) * rng.uniform(0.3, 0.9)))], finish_reason="length")


def declined(rng: random.Random, signal: str = "text") -> dict:
    """A refusal: in the text, in the refusal field (OpenAI), or a safety stop with no text (Gemini
    SAFETY and Anthropic's refusal stop reason, both content_filter through litellm)."""
    if signal == "text":
        return record(rng.choice(DECLINES))
    if signal == "field":
        return record(None, refusal=REFUSAL_FIELD)
    return record(None, finish_reason="content_filter")
