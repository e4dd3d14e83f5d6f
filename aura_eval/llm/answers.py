"""What a model's answer is, as real models give them: the statuses an answer can have, and how
one response (its text, finish reason, refusal field and separate reasoning) becomes a status, a
parsed object and a reason a reader understands.

Real answers are not bare JSON: an object fenced inside prose or followed by a remark, a
reasoning block (`<think>...</think>`) before the answer, a cut at max_tokens, a refusal. The
answer's JSON is the first complete object in the text (reasoning removed) that matches the
prompt's schema; a cut answer is `truncated` and never taken for a whole one; a refusal is
recognised from the provider's own signals, and for construction, review and judge prompts also
from the text. An agent's refusal in its text is its answer, judged like any other.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import jsonschema


@dataclass(frozen=True)
class Status:
    name: str
    meaning: str
    cached: bool  # the answer was paid for: kept in the response cache, never asked again
    counts_as_failed: bool  # counts against llm.max_failed_share (a rerun asks it again)


# Every status a model call can have, defined once: the call logs, the rows, the call tables and
# the panels' vote counts list them in this order.
STATUS_TABLE = (
    Status("ok", "an answer that parsed: a JSON object matching the prompt's schema, or (prompts without "
                 "one) the text", cached=True, counts_as_failed=False),
    Status("unparseable", "an answer came back but holds no complete JSON object matching the prompt's schema",
           cached=True, counts_as_failed=False),
    Status("truncated", "the answer was cut at max_tokens (finish reason length) or inside its reasoning "
                        "block: never taken for a whole one", cached=True, counts_as_failed=False),
    Status("refused", "the model or its provider declined: a refusal field or stop reason, a content-filter or "
                      "safety finish reason, or (construction, review and judge prompts) a refusal in the text",
           cached=True, counts_as_failed=False),
    Status("failed", "no answer after all retries, or the budget refused the call", cached=False,
           counts_as_failed=True),
)
STATUSES = tuple(s.name for s in STATUS_TABLE)
STATUS = {s.name: s for s in STATUS_TABLE}
OK, UNPARSEABLE, TRUNCATED, REFUSED, FAILED = STATUSES

# Finish reasons as litellm normalises them (litellm_core_utils/core_helpers.map_finish_reason:
# Anthropic max_tokens and Gemini MAX_TOKENS -> length; Anthropic refusal and Gemini SAFETY,
# RECITATION, BLOCKLIST, ... -> content_filter), plus the raw provider values a batch result keeps.
CUT_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})
FILTER_REASONS = frozenset({"content_filter", "refusal", "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT",
                            "SPII"})

# A reasoning block inline in the text: DeepSeek-R1 and its distillations (<think>), others.
REASONING_TAGS = ("think", "thinking", "reasoning")
_TAGS = "|".join(REASONING_TAGS)
_BLOCK = re.compile(rf"<({_TAGS})>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(rf"<({_TAGS})>", re.IGNORECASE)
_CLOSE = re.compile(rf"</({_TAGS})\s*>", re.IGNORECASE)

# A refusal in the text, recognised only near the start of an answer that holds no valid object:
# a small, conservative set (an answer that mentions "I can't" later is not a refusal).
_DECLINE = re.compile(
    r"^\W*(?:(?:I'?m|I am)\s+(?:very\s+|really\s+)?sorry|sorry|I\s+apologi[sz]e|unfortunately)?[\s,.!]*(?:but\s+)?"
    r"(?:I|we)\s*(?:can\s*not|cannot|can'?t|can’t|won'?t|won’t|will\s+not|must\s+decline|'?m\s+(?:not\s+able|unable)|"
    r"am\s+(?:not\s+able|unable)|do\s+not\s+feel\s+comfortable|don'?t\s+feel\s+comfortable)"
    r"(?:\s+to)?\s+(?:help|assist|comply|provide|create|generate|write|produce|rewrite|do|fulfil+|complete|"
    r"participate|support|engage|with|this|that|the)", re.IGNORECASE)


@dataclass(frozen=True)
class Answer:
    """One response read: its status, the parsed object (ok with a schema), the reason when not
    ok, the reasoning (inline blocks and the separate field, joined) and the answer's text with the
    reasoning removed (what a text answer is split from)."""

    status: str
    parsed: dict | None = None
    reason: str | None = None
    reasoning: str | None = None
    text: str | None = None


def split_reasoning(content: str | None) -> tuple[str | None, str, bool]:
    """(reasoning, the rest of the text, cut): every closed reasoning block removed and kept, a
    closing tag with no opening one (the template opened it: everything before it is reasoning),
    and an opening tag never closed (cut = True: everything after it is reasoning)."""
    text = content or ""
    parts = []
    close = _CLOSE.search(text)
    if close and not _OPEN.search(text, 0, close.start()):
        parts.append(text[:close.start()])
        text = text[close.end():]

    def keep(match):
        parts.append(match.group(2))
        return ""

    text = _BLOCK.sub(keep, text)
    opened = _OPEN.search(text)
    cut = opened is not None
    if cut:
        parts.append(text[opened.end():])
        text = text[:opened.start()]
    reasoning = "\n\n".join(p.strip() for p in parts if p.strip())
    return reasoning or None, text.strip(), cut


_validators: dict[str, jsonschema.protocols.Validator] = {}
_DECODER = json.JSONDecoder(strict=False)  # tolerate raw newlines inside strings


def _validator(schema: dict):
    key = json.dumps(schema, sort_keys=True)
    if key not in _validators:
        _validators[key] = jsonschema.validators.validator_for(schema)(schema)
    return _validators[key]


def _schema_error(obj, schema: dict | None) -> str | None:
    if schema is None:
        return None
    error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(obj))
    return None if error is None else error.message[:300]


def parse_json(content: str | None, schema: dict | None) -> tuple[dict | None, str | None]:
    """(object, None): the first complete JSON object in `content` that matches `schema` (fences,
    prose before or after, a trailing remark: all ignored); else (None, why). Each `{` is tried
    with the json library's raw_decode; an object that decodes but does not match is skipped
    whole (never its inner objects)."""
    if content is None or not content.strip():
        return None, "empty answer"
    first_mismatch, first_error, i = None, None, content.find("{")
    while i != -1:
        try:
            obj, end = _DECODER.raw_decode(content, i)
        except json.JSONDecodeError as err:
            first_error = first_error or err
            i = content.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            mismatch = _schema_error(obj, schema)
            if mismatch is None:
                return obj, None
            first_mismatch = first_mismatch or mismatch
        i = content.find("{", end)
    if first_mismatch is not None:
        return None, f"JSON object does not match the schema: {first_mismatch}"
    if first_error is not None:
        return None, f"no complete JSON object in the answer ({first_error.msg} at char {first_error.pos})"
    return None, "no JSON object in the answer"


def first_words(text: str, n: int = 12) -> str:
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


def declines(text: str | None) -> bool:
    """Whether a text opens with a refusal (the conservative pattern set)."""
    return bool(text) and _DECLINE.search(text[:300]) is not None


def may_decline(role: str) -> bool:
    """Whether a refusal in the text counts as one for this role: every role but an agent's (an
    agent's refusal is its answer, judged like any other)."""
    return not role.startswith("agent")


def read_answer(content: str | None, schema: dict | None, finish_reason: str | None = None,
                refusal: str | None = None, reasoning: str | None = None, text_refusals: bool = True) -> Answer:
    """The status of one response (see STATUS_TABLE) and what it holds. `schema` None: a text
    answer (an agent's ReAct output), ok unless cut or refused; `text_refusals`: whether a
    refusal in the text counts (`may_decline` of the request's role)."""
    inline, text, cut = split_reasoning(content)
    reasoning = "\n\n".join(r for r in (reasoning, inline) if r and r.strip()) or None

    def outcome(status, reason=None, parsed=None):
        return Answer(status=status, parsed=parsed, reason=reason, reasoning=reasoning, text=text)

    if finish_reason in CUT_REASONS:
        return outcome(TRUNCATED, f"answer cut at max_tokens (finish reason {finish_reason})")
    if refusal and refusal.strip():
        return outcome(REFUSED, f"model declined: {first_words(refusal)} (the provider's refusal field)")
    if finish_reason in FILTER_REASONS:
        return outcome(REFUSED, f"blocked by the provider's safety filter (finish reason {finish_reason})")
    if cut:
        return outcome(TRUNCATED, f"answer cut inside its reasoning block: the block never closes (finish "
                                  f"reason {finish_reason})")
    if schema is None:
        return outcome(OK)
    parsed, problem = parse_json(text, schema)
    if problem is None:
        return outcome(OK, parsed=parsed)
    if text_refusals and declines(text):
        return outcome(REFUSED, f"model declined: {first_words(text)}")
    return outcome(UNPARSEABLE, problem)
