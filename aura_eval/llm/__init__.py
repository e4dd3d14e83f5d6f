"""The one door to the models: every model call of every stage goes through here.

`types` says what a call is without importing litellm; `client.ModelClient` runs a job's
requests with the response cache, retries, pacing, the budget and the call log; at the edge,
`wire` is litellm's request and response, `vendors` each provider's batch API and `local` the
embedded model; `providers` holds every provider fact and the registry of in-process responders
(the simulator registers itself there: this package imports nothing of the workflow). Stages do
not use the client directly: `aura_eval.stage_runner` runs a stage's requests and writes its files.
"""

from aura_eval.llm.types import (  # noqa: F401
    CacheMissError,
    Endpoint,
    Request,
    Result,
    endpoint_from,
    endpoints,
)
