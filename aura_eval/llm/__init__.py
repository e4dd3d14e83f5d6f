"""The one door to the models: every model call of every stage goes through here.

`types` says what a call is (endpoints, requests, results, JSON parsing) without importing
litellm; `client.ModelClient` runs batches of requests on litellm with the response cache
(`cache.ResponseCache`), per-provider concurrency, retries with backoff, JSON-schema
output, accounting and the call log; `local` registers the embedded SmolLM2 model as the
litellm provider `aura_local`, so it takes the same path as any provider; `providers` holds every
provider fact and the registry of in-process responders (the simulator registers itself there:
this package imports nothing of the workflow). Stages do not use the client directly:
`aura_eval.stage` runs a stage's requests and writes its files.
"""

from aura_eval.llm.types import (  # noqa: F401
    CacheMissError,
    Endpoint,
    Request,
    Result,
    endpoint_from,
    endpoints,
)
