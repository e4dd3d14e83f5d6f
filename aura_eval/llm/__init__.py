"""The one door to the models: every model call of every stage goes through here.

`client.ModelClient` runs batches of requests on litellm with the response cache
(`cache.ResponseCache`), per-provider concurrency, retries with backoff, JSON-schema
output, accounting and the call log. `local` registers the embedded SmolLM2 model
as the litellm provider `aura_local`, so it takes the same path as any provider.
"""

from aura_eval.llm.client import (  # noqa: F401
    CacheMissError,
    Endpoint,
    ModelClient,
    Request,
    Result,
    endpoint,
    endpoints_for_role,
)
