"""Each provider's batch API in a module of its own, behind `base.BatchAdapter`: the one place
that knows a vendor's SDK. `ADAPTERS` maps a provider to its adapter (one per
`providers.BATCH_PROVIDERS`); importing these modules imports no SDK."""

from __future__ import annotations

from aura_eval.llm.vendors.anthropic_batch import AnthropicBatch
from aura_eval.llm.vendors.base import BatchAdapter, Status
from aura_eval.llm.vendors.gemini_batch import GeminiBatch
from aura_eval.llm.vendors.openai_batch import OpenAIBatch

ADAPTERS: dict[str, type[BatchAdapter]] = {a.provider: a for a in (OpenAIBatch, AnthropicBatch, GeminiBatch)}

__all__ = ["ADAPTERS", "BatchAdapter", "Status"]
