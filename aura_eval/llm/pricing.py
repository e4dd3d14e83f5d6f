"""What a model's tokens cost: litellm's local cost map, else the model entry's `price`.

The cost map is the JSON file litellm ships (what `LITELLM_LOCAL_MODEL_COST_MAP=True` loads),
read here without importing litellm, so the forecast and the report stay light. A model that
neither names is unpriced: `per_token` returns None and callers show "unpriced", never $0.
Batch prices (a model entry's `batch: true`): the map's `*_batches` fields, else the entry's
`price.batch_*`, else half the standard price (what both OpenAI and Anthropic charge).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

from aura_eval.llm.providers import IN_PROCESS_PROVIDERS, provider_of

COST_MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def cost_map() -> dict:
    """litellm's bundled price map ({} when litellm is not installed)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    return json.loads((Path(spec.submodule_search_locations[0]) / COST_MAP_FILE).read_text(encoding="utf-8"))


def map_entry(model: str) -> dict | None:
    """The cost-map entry of a litellm model string: the string itself, else its name after the
    provider where the map files that name under the same provider (`openai/gpt-5.4` -> `gpt-5.4`)."""
    table = cost_map()
    if model in table:
        return table[model]
    if "/" in model:
        provider, name = model.split("/", 1)
        entry = table.get(name)
        if entry and entry.get("litellm_provider") == provider:
            return entry
    return None


def per_token(model: str, price: dict | None = None, batch: bool = False) -> tuple[float, float, str] | None:
    """(USD per input token, USD per output token, where the price comes from), or None: unpriced."""
    in_process = provider_of(model) in IN_PROCESS_PROVIDERS
    if in_process and not price:  # free, unless its entry prices it (a simulated stand-in): then as any `price`
        return 0.0, 0.0, "in-process"
    entry = None if in_process else map_entry(model)
    if entry and entry.get("input_cost_per_token") is not None and entry.get("output_cost_per_token") is not None:
        cin, cout = float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
        if not batch:
            return cin, cout, "litellm cost map"
        bin_, bout = entry.get("input_cost_per_token_batches"), entry.get("output_cost_per_token_batches")
        if bin_ is not None and bout is not None:
            return float(bin_), float(bout), "litellm cost map (batch)"
        return cin / 2, cout / 2, "litellm cost map, half for batch"
    if price:
        cin, cout = price["input_per_mtok"] / 1e6, price["output_per_mtok"] / 1e6
        if not batch:
            return cin, cout, "config price"
        if "batch_input_per_mtok" in price and "batch_output_per_mtok" in price:
            return price["batch_input_per_mtok"] / 1e6, price["batch_output_per_mtok"] / 1e6, "config batch price"
        return cin / 2, cout / 2, "config price, half for batch"
    return None


def endpoint_per_token(endpoint) -> tuple[float, float, str] | None:
    """`per_token` of an `Endpoint` (its `batch` switch where the batch part sets one)."""
    return per_token(endpoint.model, endpoint.price, bool(getattr(endpoint, "batch", False)))


def cost_usd(endpoint, tokens_in: int | None, tokens_out: int | None) -> float | None:
    """The dollars of one call from its token counts; None when unpriced or a count is missing."""
    rates = endpoint_per_token(endpoint)
    if rates is None or tokens_in is None or tokens_out is None:
        return None
    return tokens_in * rates[0] + tokens_out * rates[1]
