"""The planted-truth simulator (`aura_sim/<name>` models), outside the model module.

Importing this package registers the simulator as the in-process responder of `aura_sim`
(`llm.providers.register_responder`): the model client then answers those requests with
`planted.responder` (no litellm, no cache, no retries), and litellm, once imported, with
`planted.register`. The stage runner (`aura_eval.stage_runner.StageRun`) imports it, so every model job
can answer simulated models; code that runs a client itself imports it first.
"""

from aura_eval.llm.providers import SIM_PROVIDER, register_responder
from aura_eval.simulator import planted

register_responder(SIM_PROVIDER, planted.responder, litellm_hook=planted.register)
