"""Panels (inspect_ai's `multi_scorer(scorers, reducer)`): several models answer the same
question and a vote rule combines their answers. The construction reviews (P5, P6, P9)
and the judges (the three-judge panel, the five-judge panel, repeats, vendor swap) are
built from these three pieces: one member's request, one member's ballot, the tally.
"""

from __future__ import annotations

from aura_eval.llm.answers import STATUSES
from aura_eval.llm.types import Endpoint, Request, Result
from aura_eval.util.stats import consensus, plurality_consensus, vote


def member_requests(item_id: str, members: list[Endpoint], prompt, messages: list[dict], role: str,
                    sample: int = 0) -> list[Request]:
    """The same question to every member of a panel, in the panel's order."""
    return [Request(item_id=item_id, endpoint=ep, prompt_id=prompt.id, prompt_version=prompt.version, role=role,
                    schema=prompt.schema, messages=messages, sample=sample) for ep in members]


def answer(result: Result) -> dict:
    """A member's parsed answer; empty unless the response parsed and matched the schema."""
    return (result.parsed or {}) if result.status == "ok" else {}


def ballot(result: Result, field: str):
    """A member's vote: the answer's `field`, or None (a member who chose nothing)."""
    return answer(result).get(field)


def tally(votes: list, statuses: list[str], rule: str = "majority") -> dict:
    """The panel's label under `rule` (None without one), the votes, the consensus stratum under the
    same rule (majority: unanimous/majority/tied; plurality: unanimous/plurality/no_plurality), and
    the members who chose nothing, kept apart by their status (`<status>_votes`: an answer that
    did not parse, was cut, declined; a call that failed). No votes (nothing to judge) gives no
    label and no stratum."""
    strata = plurality_consensus if rule == "plurality" else consensus
    return {"label": vote(votes, rule) if votes else None, "votes": votes,
            "stratum": strata(votes) if votes else None,
            **{f"{s}_votes": sum(status == s for status in statuses) for s in STATUSES[1:]}}
