"""The one interface every provider's batch API is used through (`BatchAdapter`), what a poll
reads (`Status`), and the key an adapter's SDK is given. `batch.BatchRun` and the preflight use the
adapters of `vendors.ADAPTERS` only through this interface."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Protocol

from aura_eval.llm.types import Endpoint


@dataclass
class Status:
    state: str  # the provider's status of the batch
    ended: bool  # no more answers will come
    progress: str  # e.g. "12/40 done, 1 failed"
    reason: str | None  # why items went unanswered (expired, cancelled, failed), where it says
    raw: object



class BatchAdapter(Protocol):
    """One provider's batch API, made per (provider, api_base, key variable) with the job's call
    settings (`timeout_s`, `max_retries`): its SDK is imported when one is made."""

    provider: ClassVar[str]  # the provider prefix of the model strings it takes (providers.BATCH_PROVIDERS)
    max_requests: ClassVar[int]  # the provider's limits per batch: requests,
    max_bytes: ClassVar[int]  # and bytes of requests (with a margin)
    sdk_version: str  # e.g. "openai 2.8.0", kept in each answer's provenance

    def __init__(self, endpoint: Endpoint, settings) -> None: ...

    def line(self, key: str, described: dict) -> tuple[dict | None, str | None]:
        """The provider's request for one key (`described`: what the cache keys it by), or why it
        cannot be sent (None, reason)."""

    def check(self) -> None:
        """Raise unless the batch API answers with this key (the preflight's cheapest call)."""

    def create(self, lines: list[dict]) -> tuple[str, str]:
        """Submit one batch of `line`s: (batch id, its state)."""

    def retrieve(self, batch_id: str) -> Status:
        """Poll one batch."""

    def answers(self, status: Status, keys: list[str]) -> Iterator[tuple[str, dict | None, str | None]]:
        """(key, response record or None, error or None) of an ended batch (`keys`: its keys
        sorted, for a provider that answers by position)."""


def api_key(endpoint: Endpoint) -> str | None:
    """The key from the variable the entry names; None lets the SDK read its own variable."""
    return os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else None
