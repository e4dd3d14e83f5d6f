"""How a job makes its calls: the settings that change no answer, typed, each default written once.

Timeouts, retries, backoff, waits, concurrency, the failure share, batch polling, the budget, the
rate limits and how jobs share them, the cache's file-system check, and in a model entry `batch`,
`price` and `api_key_env`: none of them changes what a model answers, so none may rerun a job. They
reach a job the way the rate limits do, as a string resource (`call_settings`, JSON in base64), never
as a param: Snakemake reruns a job when a param changes, never when a resource does. What does change
answers (the model, its sampling parameters, the prompt, `llm.replay`, `llm.cache`, the simulator's
planted parameters) stays in the rules' params.

`CallSettings.from_config(config)` reads a config (absent keys take the defaults below);
`resource()` / `from_resource(text)` carry it to the job; `endpoint(ep)` gives a model's endpoint its
entry's batch, price and key variable. Nothing here imports litellm.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass, field

RESOURCE = "call_settings"  # the string resource that carries a job's CallSettings
MODEL_KEYS = ("batch", "price", "api_key_env")  # the keys of a model entry that change no answer
DEFAULT_CONCURRENCY = 8  # calls in flight per provider where `concurrency` names neither it nor `default`


@dataclass(frozen=True)
class CallSettings:
    """The `llm.*` keys that change no answer (config/README.md lists them with these defaults)."""

    timeout_s: float = 120.0  # one attempt's limit, in seconds
    max_retries: int = 5  # attempts after the first, for rate limits, server errors, timeouts, dropped connections
    backoff_s: float = 1.0  # the exponential backoff's multiplier (with jitter), where no Retry-After is given
    max_wait_s: float = 600.0  # the most one request waits between its attempts, in total
    concurrency: dict = field(default_factory=lambda: {"default": DEFAULT_CONCURRENCY})  # calls in flight per provider
    max_failed_share: float = 0.0  # the share of a job's calls that may fail without failing the job
    batch_poll_s: float = 30.0  # seconds between two polls of an open provider batch
    batch_max_wait_s: float = 86400.0  # the most a job waits for its batches (the providers' 24 h window)
    budget_usd: float | None = None  # stop new calls before the run's spend would pass this (None: no limit)
    rate_limits: dict = field(default_factory=dict)  # {provider or provider/model: {rpm, tpm}}, shared by all jobs
    jobs_per_rate_limit: int = 8  # model jobs that run on one rate limit at once (each requests 1/N of it)
    max_network_jobs: int = 16  # the most model jobs on network models at once (each holds litellm, ~200 MB)
    cache_on_network_fs: bool = False  # accept a cache on a network file system (refused otherwise)
    models: dict = field(default_factory=dict)  # {model name: {batch, price, api_key_env}} from the entries

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The `llm.*` keys held here."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "models")

    @classmethod
    def from_config(cls, config: dict) -> CallSettings:
        """The settings of a whole config: its `llm` keys over the defaults, and its model entries' facts."""
        llm = config.get("llm") or {}
        models = {name: {k: spec[k] for k in MODEL_KEYS if k in spec}
                  for name, spec in (config.get("models") or {}).items()}
        return cls(**{k: llm[k] for k in cls.keys() if llm.get(k) is not None},
                   models={name: facts for name, facts in sorted(models.items()) if facts})

    def resource(self) -> str:
        """The job resource: JSON with sorted keys (one string per config, whatever its order), in
        URL-safe base64, so that no comma, quote or space reaches Snakemake's resource syntax (a dry
        run's listing, an executor's command line); each job's log shows it decoded (`shown`)."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")  # no `=` in `name=value`

    @classmethod
    def from_resource(cls, text: str | None) -> CallSettings:
        if not text:
            return cls()
        return cls(**json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))))

    def concurrency_of(self, provider: str) -> int:
        return int(self.concurrency.get(provider, self.concurrency.get("default", DEFAULT_CONCURRENCY)))

    def endpoint(self, endpoint):
        """`endpoint` with its model entry's batch, price and key variable (unchanged for a model this
        config does not name, e.g. an endpoint a test built with them)."""
        facts = self.models.get(endpoint.name)
        if facts is None:
            return endpoint
        return dataclasses.replace(endpoint, batch=bool(facts.get("batch", False)), price=facts.get("price"),
                                   api_key_env=facts.get("api_key_env"))

    def shown(self) -> str:
        """One line for a job's log: the settings in force (never a key: only the variables' names)."""
        fields = {k: getattr(self, k) for k in self.keys() if getattr(self, k) != getattr(CallSettings(), k)}
        return ", ".join(f"{k}={v}" for k, v in fields.items()) or "defaults"


def answer_entry(entry: dict) -> dict:
    """A model entry without the keys that change no answer (what a rule's params carry)."""
    return {k: v for k, v in entry.items() if k not in MODEL_KEYS}


def of(llm: dict) -> CallSettings:
    """The settings a job's `llm` dict carries: from its resource where a rule passed one
    (`job_llm`), else the dict's own keys over the defaults (a direct caller, a test)."""
    text = llm.get(RESOURCE)
    return CallSettings.from_resource(text) if text else CallSettings.from_config({"llm": llm})


def with_call_settings(settings: dict, text: str | None) -> dict:
    """A table's config values (`settings`: top-level keys, as the rule's params carry them, without
    what changes no answer) with the call settings put back: `llm`'s keys and the models' facts."""
    if not text:
        return settings
    call, out = CallSettings.from_resource(text), dict(settings)
    if "llm" in out:
        out["llm"] = {**out["llm"], **{k: getattr(call, k) for k in call.keys()}}
    if "models" in out:
        out["models"] = {name: {**entry, **call.models.get(name, {})} for name, entry in out["models"].items()}
    return out
