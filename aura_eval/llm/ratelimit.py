"""Rate limits that hold across every job of a run (`llm.rate_limits`), on Snakemake's global resources.

Each configured key (a litellm provider, `openai`, or a `provider/model-name`) becomes two global
resources, `rpm_<key>` and `tpm_<key>` (non-alphanumerics as `_`), whose totals are the limits. A
model job requests a share of the key of each model it calls (a model's own key before its
provider's), so the scheduler never runs more shares than the whole, on one machine or many; the job
reads its granted shares from `snakemake.resources` and `Pacer` keeps its calls to them with
aiolimiter. Also here: the threads a model job reserves. Nothing here imports litellm.
"""

from __future__ import annotations

import json
import math
import re

KINDS = ("rpm", "tpm")
# Threads of a job whose models are all behind a network: none reserved, it waits on the network
# (Snakemake 9 accepts `threads: 0`); `NETWORK_JOBS` caps how many such jobs run at once.
NETWORK_JOBS = "network_model_jobs"
LOCAL_PROVIDER, SIM_PROVIDER = "aura_local", "aura_sim"  # the embedded llama.cpp model; the simulator


def provider_of(model: str) -> str:
    """A litellm model string's provider (`openai/gpt-5.4` -> `openai`), as Endpoint.provider."""
    return model.split("/", 1)[0] if "/" in model else "default"


def resource_name(kind: str, key: str) -> str:
    """The global resource of one limit: `rpm_openai`, `tpm_openai_gpt_5_4`."""
    return f"{kind}_{re.sub(r'[^A-Za-z0-9]', '_', key)}"


def check_limits(limits: dict) -> None:
    """Raise ValueError naming the keys when two keys of `llm.rate_limits` share a resource name."""
    seen: dict[str, str] = {}
    for key in sorted(limits):
        name = resource_name("rpm", key)
        if name in seen:
            raise ValueError(f"config: llm.rate_limits keys {seen[name]!r} and {key!r} both become the "
                             f"Snakemake resource {name!r}; rename one")
        seen[name] = key


def global_resources(limits: dict) -> dict[str, int]:
    """{resource: total} for every limit configured (the scheduler's whole)."""
    check_limits(limits)
    return {resource_name(kind, key): int(spec[kind]) for key, spec in limits.items() for kind in KINDS
            if spec.get(kind) is not None}


def limit_key(model: str, limits: dict) -> str | None:
    """The `llm.rate_limits` key that governs a model: its own, else its provider's, else None."""
    if model in limits:
        return model
    provider = provider_of(model)
    return provider if provider in limits else None


def share(limit: int, jobs: int) -> int:
    """One job's share of a limit that `jobs` jobs divide (at least 1, so a job can always run)."""
    return max(1, limit // max(1, jobs))


def job_keys(models: list[str], limits: dict) -> set[str]:
    """The limit keys a job with these models calls under."""
    return {k for k in (limit_key(m, limits) for m in models) if k is not None}


def job_resources(models: list[str], limits: dict, jobs_per_limit: int,
                  rule_jobs: list[list[str]] | None = None) -> dict[str, int]:
    """The resources one job with these models requests: a share of each governing limit, 1/N
    of it where N is `jobs_per_limit`, or fewer where fewer of its rule's jobs (`rule_jobs`, the
    models of each; None: this job alone) call under that key: a rule's only job of a provider
    (a construction stage, one agent's rollout) gets the whole limit instead of idling the rest."""
    out: dict[str, int] = {}
    for key in sorted(job_keys(models, limits)):
        peers = sum(key in job_keys(other, limits) for other in rule_jobs) if rule_jobs is not None else 1
        for kind in KINDS:
            if limits[key].get(kind) is not None:
                out[resource_name(kind, key)] = share(int(limits[key][kind]), min(jobs_per_limit, max(1, peers)))
    return out


def job_threads(models: list[str], cores: int) -> int:
    """Threads of a model job: the embedded model uses up to 2 (llama.cpp computes on them), the
    simulator 1 (it answers in-process), network models none (see NETWORK_JOBS)."""
    providers = {provider_of(m) for m in models}
    if LOCAL_PROVIDER in providers:
        return min(2, cores)
    return 1 if SIM_PROVIDER in providers else 0


def is_network_job(models: list[str]) -> bool:
    return job_threads(models, 1) == 0


def granted(resources) -> dict[str, int]:
    """The rate shares a Snakemake job was granted (`snakemake.resources`): {resource: share}."""
    items = resources.items() if hasattr(resources, "items") else vars(resources).items()
    return {name: int(value) for name, value in items
            if isinstance(name, str) and name.split("_", 1)[0] in KINDS and isinstance(value, int) and value > 0}


def estimated_tokens(messages: list[dict], params: dict) -> int:
    """Tokens a call may count against a tokens-per-minute limit before its answer is known: about
    four characters a token of the prompt, plus `max_tokens` (the most it may write)."""
    chars = sum(len(m["content"]) if isinstance(m.get("content"), str) else len(json.dumps(m.get("content")))
                for m in messages)
    return math.ceil(chars / 4) + int(params.get("max_tokens") or 0)


class Pacer:
    """Keeps one job's calls within its granted shares: one aiolimiter leaky bucket per resource
    draining at the share's rate and holding half a second's worth (whole calls, at least one), so
    the jobs of a run together never pass the limit's rate, and their bursts leave a provider's
    bucket (commonly a second's worth) half a second of slack for the network's jitter."""

    def __init__(self, shares: dict[str, int]):
        self.shares = dict(shares)
        self._limiters: dict[str, object] = {}

    def __bool__(self) -> bool:
        return bool(self.shares)

    def _limiter(self, name: str):
        if name not in self._limiters:
            from aiolimiter import AsyncLimiter

            per_s = self.shares[name] / 60
            capacity = max(1.0, float(math.floor(per_s / 2)))
            self._limiters[name] = AsyncLimiter(capacity, capacity / per_s)
        return self._limiters[name]

    def governing(self, model: str, kind: str) -> str | None:
        """The granted resource of `kind` that governs a model's calls: its own key's where the job
        was granted any share of that key (a model's key replaces its provider's), else its provider's."""
        own = any(resource_name(k, model) in self.shares for k in KINDS)
        name = resource_name(kind, model if own else provider_of(model))
        return name if name in self.shares else None

    async def wait(self, model: str, tokens: int) -> None:
        """Return once one call of `tokens` estimated tokens fits the model's shares."""
        name = self.governing(model, "rpm")
        if name is not None:
            await self._limiter(name).acquire(1)
        name = self.governing(model, "tpm")
        if name is not None:
            limiter = self._limiter(name)
            left = max(1, tokens)
            while left > 0:  # a call larger than the bucket takes it in bucket-sized pieces
                piece = min(left, limiter.max_rate)
                await limiter.acquire(piece)
                left -= piece


def job_llm(job) -> dict:
    """A Snakemake job's `llm` settings (its params) with the rate shares it was granted."""
    return {**job.params.llm, "rate_shares": granted(job.resources)}
