"""Rate limits that hold across every job of a run (`llm.rate_limits`), on Snakemake's global resources.

Each configured key (a litellm provider, `openai`, or a `provider/model-name`) becomes two global
resources, `rpm_<key>` and `tpm_<key>` (non-alphanumerics as `_`), whose totals are the limits. A
model job requests a share of the key of each model it calls (a model's own key before its
provider's), so the scheduler never runs more shares than the whole at once: the shares bound how
many jobs of a limit run together. The calls themselves are paced to the whole limit through one
bucket per limit that every job shares (`Pacer`, in the cache file), so capacity one job leaves
idle goes to the others; a job learns the whole limits from its string resource `rate_limits_paced`.
Also here: the threads a model job reserves. Nothing here imports litellm.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from pathlib import Path

from aura_eval.llm.cache import connect, names_the_file
from aura_eval.llm.providers import LOCAL_PROVIDER, SIM_PROVIDER, provider_of
from aura_eval.llm.settings import RESOURCE

KINDS = ("rpm", "tpm")
# Threads of a job whose models are all behind a network: none reserved, it waits on the network
# (Snakemake 9 accepts `threads: 0`); `NETWORK_JOBS` caps how many such jobs run at once.
NETWORK_JOBS = "network_model_jobs"
PACING = "rate_limits_paced"  # the string resource naming the whole limits a job paces to (pacing_resource)


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


def job_threads(models: list[str], cores: int, replay: bool = False) -> int:
    """Threads of a model job: the embedded model uses up to 2 (llama.cpp computes on them) but 1
    in a replay (it generates nothing there: every answer comes from the cache), the simulator 1
    (it answers in-process), network models none (see NETWORK_JOBS)."""
    providers = {provider_of(m) for m in models}
    if LOCAL_PROVIDER in providers:
        return min(1 if replay else 2, cores)
    return 1 if SIM_PROVIDER in providers else 0


def is_network_job(models: list[str]) -> bool:
    """A job whose models are all reached over the network (a job with none, such as a rollout read
    from an inspect log, is not)."""
    return bool(models) and job_threads(models, 1) == 0


def pacing_resource(shares: dict[str, int], limits: dict) -> str:
    """The string resource that tells a job the whole limit of each rate resource it was granted a
    share of (`rpm_openai:1000/tpm_openai:90000`): the job paces to the whole, shared with the other
    jobs (see Pacer). A string resource constrains no scheduling, and no resource reruns a job."""
    whole = {resource_name(kind, key): int(spec[kind]) for key, spec in limits.items() for kind in KINDS
             if spec.get(kind) is not None}
    return "/".join(f"{name}:{whole[name]}" for name in sorted(shares) if name in whole)


def granted(resources) -> dict[str, int]:
    """The whole limits a Snakemake job paces to (`snakemake.resources`): {resource: per minute}."""
    text = resources.get(PACING, "") if hasattr(resources, "get") else getattr(resources, PACING, "")
    return {name: int(value) for name, value in (pair.split(":") for pair in str(text or "").split("/") if pair)}


def estimated_tokens(messages: list[dict], params: dict) -> int:
    """Tokens a call may count against a tokens-per-minute limit before its answer is known: about
    four characters a token of the prompt, plus `max_tokens` (the most it may write)."""
    chars = sum(len(m["content"]) if isinstance(m.get("content"), str) else len(json.dumps(m.get("content")))
                for m in messages)
    return math.ceil(chars / 4) + int(params.get("max_tokens") or 0)


class Pacer:
    """Keeps the calls of every job on one cache file within the run's limits: one shared bucket per
    rate resource (GCRA, a leaky bucket kept as its "theoretical arrival time") in that SQLite file,
    draining at the whole limit's rate and holding half a second's worth (whole calls, at least one).
    Each call reserves its place in one `BEGIN IMMEDIATE` transaction and sleeps until its turn, so
    the jobs that run at once together never pass the limit, and what one job leaves unused (it is
    starting, or has few calls left) the others take: the shares the scheduler grants only bound
    how many jobs run on a limit at once. A call larger than the bucket waits until the tokens
    beyond it have drained (as if taken in bucket-sized pieces). The model jobs all run on the host
    that runs Snakemake (they are local rules), where the cache file is (it refuses a network file
    system), so every job of a run sees the same buckets."""

    def __init__(self, limits: dict[str, int], path=None):
        self.limits = {name: int(per_min) for name, per_min in limits.items() if int(per_min) > 0}
        self.path = path
        self._db = None

    def __bool__(self) -> bool:
        return bool(self.limits)

    @names_the_file
    def _connect(self):
        if self._db is None:
            if self.path is None:
                raise ValueError("rate limits need the cache file (llm.cache) that holds their shared buckets")
            self._db = connect(Path(self.path))
            self._db.execute("CREATE TABLE IF NOT EXISTS rate_buckets (resource TEXT PRIMARY KEY, tat REAL NOT NULL)")
        return self._db

    def governing(self, model: str, kind: str) -> str | None:
        """The paced resource of `kind` that governs a model's calls: its own key's where the job
        paces any limit of that key (a model's key replaces its provider's), else its provider's."""
        own = any(resource_name(k, model) in self.limits for k in KINDS)
        name = resource_name(kind, model if own else provider_of(model))
        return name if name in self.limits else None

    @names_the_file
    def reserve(self, amounts: dict[str, int], now: float | None = None) -> float:
        """Seconds until a call of `amounts` ({resource: calls or tokens}) may be sent, its place
        reserved in every bucket. A bucket's `tat` is when it would be empty; at the send, each
        holds at most its capacity, counting this call."""
        db = self._connect()
        if not amounts:
            return 0.0
        db.execute("BEGIN IMMEDIATE")  # the read and the reservation as one, across processes
        try:
            now = time.time() if now is None else now
            rows = dict(db.execute(f"SELECT resource, tat FROM rate_buckets WHERE resource IN "
                                   f"({','.join('?' * len(amounts))})", list(amounts)).fetchall())
            plan = {}
            for name, units in amounts.items():
                per_s = self.limits[name] / 60
                capacity = max(1.0, float(math.floor(per_s / 2)))
                tat = rows.get(name, now)
                # sent once the bucket has room for the call (a larger call: once it is empty and the
                # tokens beyond its capacity have drained); it then fills by at most the capacity
                plan[name] = (tat, max(tat, now) + (units - capacity) / per_s, min(units, capacity) / per_s)
            send_at = max([now] + [earliest for _, earliest, _ in plan.values()])
            for name, (tat, _, fill) in plan.items():
                db.execute("INSERT INTO rate_buckets (resource, tat) VALUES (?, ?) ON CONFLICT (resource) DO "
                           "UPDATE SET tat = excluded.tat", (name, max(tat, send_at) + fill))
        finally:
            db.execute("COMMIT")
        return send_at - now

    async def wait(self, model: str, tokens: int) -> None:
        """Return once one call of `tokens` estimated tokens fits the model's limits."""
        amounts = {name: units for name, units in ((self.governing(model, "rpm"), 1),
                                                    (self.governing(model, "tpm"), max(1, tokens)))
                   if name is not None}
        if amounts:
            delay = self.reserve(amounts)
            if delay > 0:
                await asyncio.sleep(delay)


def job_llm(job) -> dict:
    """A Snakemake job's `llm` settings: its params (what changes answers), the whole limits it paces
    to, and its call settings (aura_eval.llm.settings: what changes no answer), both resources."""
    return {**job.params.llm, "rate_limits_paced": granted(job.resources),
            RESOURCE: getattr(job.resources, RESOURCE, None)}
