"""`ModelClient`: one job's model requests, answered from the cache or sent through litellm
(`wire`) with retries, pacing, the budget and leases, or through a provider's batch API (`batch`);
the call log. Every outcome is a `Result` (statuses: `answers.STATUS_TABLE`); nothing raises but a
replay's cache miss, a stop (`stop.RunStopped`) and a cache file that cannot be used (`CacheError`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time

from tqdm import tqdm

from aura_eval.util.jsonl import write_jsonl
from aura_eval.llm import pricing, providers, stop
from aura_eval.llm import settings as call_settings
from aura_eval.llm.budget import Budget, estimate_usd, refusal_text
from aura_eval.llm.cache import CacheError, Owner, ResponseCache, cache_key, valid_unicode
from aura_eval.llm.ratelimit import Pacer, estimated_tokens
from aura_eval.llm.types import CALL_FIELDS, CacheMissError, Request, Result, read_result, utc_now
from aura_eval.llm.batch import BatchRun
# litellm's wire; `describe`, `litellm_module` and the rest are also read from here (the forecast
# keys requests with `client.describe`)
from aura_eval.llm.wire import (completion_kwargs, describe, is_auth_error, litellm_module, litellm_version, params_of,
                                response_record, scrub_secrets)
from aura_eval.llm.wire import retrying as wire_retrying


def call_of(record: dict) -> dict:
    """CALL_FIELDS of a cached response record (None where a row from before provenance lacks one)."""
    prov = record.get("provenance") or {}
    out = {name: prov.get(name) for name in CALL_FIELDS}
    out.update(tokens_in=record.get("tokens_in"), tokens_out=record.get("tokens_out"),
               cost_usd=record.get("cost_usd"), first_latency_s=record.get("latency_s"))
    return out


class ModelClient:
    """Runs requests concurrently, reusing cached responses; one per stage job.

    Each answer is paid once: identical requests in a job share one call, and across processes on
    one cache file a request claims a lease first (`cache.ResponseCache.claim`); a request another
    live process is sending is waited for, never sent again. A result's `call` holds the provenance
    of the call that answered it (`types.CALL_FIELDS`), stored in the cache record at the first call
    and read back on every hit, so the call log and the rows are the same on a replay. A responder
    provider's requests (the simulator, `providers.register_responder`) are answered in-process,
    never cached: they carry their prompt and parameters only."""

    def __init__(self, llm_settings: dict, stage: str, progress: bool = True):
        self.settings = llm_settings
        self.call = call_settings.of(llm_settings)  # timeouts, retries, limits, ...: what changes no answer
        self.stage = stage
        self.replay = bool(llm_settings.get("replay", False))
        # A replay sends nothing, so it reads the cache read-only and writes nothing to it.
        self.cache = ResponseCache(llm_settings["cache"], self.call.cache_on_network_fs, readonly=self.replay)
        self.progress = progress
        self.calls: list[dict] = []
        self.calls_made = 0  # provider calls actually sent (retries included)
        self.key_names: set[str] = set()  # the key variables of the endpoints asked so far
        self._respond: dict = {}  # provider -> its registered responder's answer function for this job, or None
        self._said_damaged: set[str] = set()  # damaged cache rows already named in the job's log
        # Across runs sharing the cache file, one sender per request: this process's leases
        # (cache.claim), renewed while their requests are in flight.
        self.owner = Owner.this_process()
        self._leases: set[str] = set()
        self.lease_waits = 0  # requests answered by another process's call after waiting on its lease
        # Why this job stopped sending (a stop mark, a signal, a failed cache write), once it has.
        self._stopping: str | None = None
        self._write_failed: CacheError | None = None
        self.unstored = 0  # answers received that could not be stored (the failed write and after)
        self.invalid_unicode = 0  # characters of invalid Unicode replaced by U+FFFD in stored answers
        # None without llm.budget_usd, and in a replay (no call is sent, nothing is written)
        self.budget = None if self.replay else Budget.of(llm_settings["cache"], self.call.budget_usd)
        # The run's rate limits this job calls under (`rate_limits_paced`: {resource: per minute},
        # see aura_eval.llm.ratelimit): every call sent, retries included, waits for its turn in
        # the limit's bucket, which all jobs on this cache file share.
        self.pacer = Pacer(llm_settings.get("rate_limits_paced") or {}, llm_settings["cache"])

    # -- public ---------------------------------------------------------------
    def run(self, requests: list[Request]) -> list[Result]:
        """Results in the order of `requests`. Raises CacheMissError only in replay mode, and
        providers.NoResponderError for a request of a responder provider that nothing registered."""
        # the model entries' batch, price and key variable come with the call settings, not the request
        requests = [dataclasses.replace(r, endpoint=self.call.endpoint(r.endpoint)) for r in requests]
        if not self.replay:
            self.check_stop()  # a job started after Ctrl-C sends nothing
        self.key_names |= {r.endpoint.api_key_env for r in requests if r.endpoint.api_key_env}
        results: list[Result | None] = [None] * len(requests)
        remote, batched = [], []
        for i, req in enumerate(requests):
            respond = self._responder(req)
            if respond is not None:
                results[i] = self._answer_in_process(req, respond)
            else:
                (batched if req.endpoint.batch else remote).append(i)
        if batched:  # submitted first, so the provider works on them while the live calls run
            batch_run = BatchRun(self, [requests[i] for i in batched])
            batch_run.submit()
        if remote:
            # litellm is loaded only when a request must be sent, so a replay and a rerun that finds
            # every answer cached never pay its import (about 5 s of CPU); and it is loaded before any
            # lease is claimed: its seconds must not pass between a claim and its send.
            if not self.replay and any(self.cache.get(cache_key(self.describe(requests[i]))) is None for i in remote):
                litellm_module()
            for i, result in zip(remote, asyncio.run(self._run_all([requests[i] for i in remote]))):
                results[i] = result
        if batched:
            for i, result in zip(batched, batch_run.wait()):
                results[i] = result
        return results

    def write_call_log(self, path) -> None:
        write_jsonl(path, self.calls, key=("item_id", "endpoint", "sample", "prompt"))

    def scrub(self, text: str | None) -> str | None:
        return scrub_secrets(text, self.key_names)

    # -- for the batch path (batch.BatchRun, through batch.BatchHost): the steps a live call takes --
    params_of = staticmethod(params_of)  # wire.params_of: the sorted params a row records

    def describe(self, req: Request) -> dict:
        """`wire.describe(req)`: what the cache keys the request by."""
        return describe(req)

    def count_calls(self, n: int) -> None:
        """`n` more provider calls sent by this job (a batch's requests count one each)."""
        self.calls_made += n

    def settle_budget(self, hold: int, cost: float) -> None:
        """Settle a reservation of `reserve_budget` at the call's cost."""
        self.budget.settle(hold, cost)

    def result_from(self, req: Request, response: dict, key: str, cache_hit: bool) -> Result:
        """The Result of a response record (as the cache stores it): its status, parsed object and
        reason from `answers.read_answer` (text, finish reason, refusal field, separate reasoning; a
        record from before those were stored reads them as None); tokens, cost and latency from the
        record, `call` from its provenance (`call_of`). Attempts and waits are left at 0: the caller
        sets them."""
        result = read_result(req, response["content"], response.get("finish_reason"), response.get("refusal"),
                             response.get("reasoning"), tokens_in=response.get("tokens_in"),
                             tokens_out=response.get("tokens_out"), tokens_reasoning=response.get("tokens_reasoning"),
                             cost_usd=response.get("cost_usd"),
                             latency_s=response.get("latency_s"), cache_hit=cache_hit, key=key, call=call_of(response))
        if result.parsed is not None:  # an escape such as "\ud800" inside the answer's JSON: never written as is
            result.parsed = valid_unicode(result.parsed)[0]
        return result

    def cached(self, key: str) -> dict | None:
        """The cache's record of `key`, or None; a row that fails its checksum is None too, and the
        job's log says so (once per key): the call is made again and its answer replaces the row."""
        record = self.cache.get(key)
        if record is None and key in self.cache.damaged and key not in self._said_damaged:
            self._said_damaged.add(key)
            print(f"{self.stage}: the cached answer {key[:16]} in {self.cache.path} is damaged "
                  f"({self.cache.damaged[key]}): not used" + ("" if self.replay else "; asked again, and "
                                                               "the new answer replaces it"), file=sys.stderr)
        return record

    def raise_replay_miss(self, req: Request, described: dict, key: str):
        """Raise CacheMissError naming the stage, item, endpoint, sample and key. A replay writes
        nothing to the cache, so the request's description goes to the job's log as one line
        (`replay miss: {json}`), where `cache explain` finds it. Never returns."""
        print("replay miss: " + json.dumps({"key": key, "stage": self.stage, "item_id": req.item_id,
                                            "prompt": req.prompt_id, "reason": "replay miss", "request": described},
                                           sort_keys=True, ensure_ascii=False), file=sys.stderr)
        why = "no cached response"
        if key in self.cache.damaged:
            why = (f"the cached response is damaged ({self.cache.damaged[key]}; run `python -m aura_eval cache "
                   f"repair {self.cache.path}`, then rerun without replay to ask it again)")
        raise CacheMissError(f"replay mode: {why} for stage {self.stage}, item "
                             f"{req.item_id}, endpoint {req.endpoint.name}, sample {req.sample} (key "
                             f"{key[:16]}; `python -m aura_eval cache explain {self.cache.path} {key[:16]}` "
                             f"names what differs from the nearest cached request)")

    def reserve_budget(self, req: Request, key: str) -> tuple[int | None, str | None]:
        """Reserve the most a call of `req` may cost under `llm.budget_usd` (budget.py), before
        it is sent: (reservation, None), to settle with `budget.settle` once its cost is known;
        (None, None) without a budget; (None, why) when the budget refuses it or the model has
        no price (the call must then not be sent)."""
        if self.budget is None:
            return None, None
        estimate = estimate_usd(req.endpoint, litellm_module().token_counter(model=req.endpoint.model,
                                                                               messages=req.messages))
        if estimate is None:
            return None, (f"budget set (llm.budget_usd) but model {req.endpoint.model!r} of endpoint "
                          f"{req.endpoint.name!r} has no price: add `price` to its entry under models")
        hold, spent = self.budget.reserve(key, self.stage, req.endpoint.model, estimate)
        return (hold, None) if hold is not None else (None, refusal_text(self.budget.budget, spent))

    def log_call(self, result: Result) -> None:
        """Append the result's row to this job's call log (`calls`, written by `write_call_log`):
        once per request, in the order the caller logs them."""
        r = result.request
        self.calls.append({
            "stage": self.stage, "item_id": r.item_id, "role": r.role, "endpoint": r.endpoint.name,
            "model": r.endpoint.model, "prompt": r.prompt_id, "prompt_version": r.prompt_version,
            "sample": r.sample, "key": result.key[:16], "cache_hit": result.cache_hit,
            "status": result.status, "tokens_in": result.tokens_in, "tokens_out": result.tokens_out,
            "tokens_reasoning": result.tokens_reasoning,
            "latency_s": None if result.latency_s is None else round(result.latency_s, 3),
            "attempts": result.attempts, "wait_s": result.wait_s, "auth_error": result.auth_error,
            "cost_usd": result.cost_usd, "error": result.error,
            # The first call's provenance, from the cache (stable on replay, unlike latency_s).
            **{name: result.call.get(name) for name in CALL_FIELDS if name not in ("tokens_in", "tokens_out",
                                                                                   "cost_usd")},
        })

    # -- internals ------------------------------------------------------------
    def _responder(self, req: Request):
        """The answer function of the request's provider for this job (its registered responder's,
        made once per client), or None where litellm answers (`providers.responder`)."""
        provider = req.endpoint.provider
        if provider not in self._respond:
            responder_for = providers.responder(provider, req.endpoint.model)
            self._respond[provider] = None if responder_for is None else responder_for(self.settings)
        return self._respond[provider]

    def _answer_in_process(self, req: Request, respond) -> Result:
        """A registered responder's answer, in-process and without the cache (recomputing it is
        cheaper than a lookup, and it is the same on every run; replay mode answers it too)."""
        key = cache_key(self.describe(req))
        start = time.perf_counter()
        # Not cached, so nothing of this call is stored: no time, latency or response id (they
        # would differ on every run); the prompt and parameters are the request's.
        call = {name: None for name in CALL_FIELDS} | {"params": self.params_of(req), "cost_usd": 0.0}
        self.calls_made += 1
        try:
            answer = respond(req)
        except providers.ResponderFailure as err:  # no answer: failed, like a call out of retries
            result = Result(request=req, status="failed", error=str(err), key=key, attempts=1, call=call,
                            latency_s=time.perf_counter() - start)
            self.log_call(result)
            return result
        record = answer if isinstance(answer, dict) else {"content": answer}
        # the usage the responder reports (the simulator's planted lengths), priced as the entry's
        # `price` prices them (a simulated model standing in for a priced one), else free
        cost = pricing.cost_usd(req.endpoint, record.get("tokens_in"), record.get("tokens_out"))
        call.update(cost_usd=0.0 if cost is None else cost, tokens_in=record.get("tokens_in"),
                    tokens_out=record.get("tokens_out"))
        result = self.result_from(req, {**record, "cost_usd": call["cost_usd"],
                                        "latency_s": time.perf_counter() - start}, key, cache_hit=False)
        result.attempts = 1
        result.call = call
        self.log_call(result)
        return result

    def _limit(self, provider: str) -> int:
        return self.call.concurrency_of(provider)

    async def _run_all(self, requests):
        semaphores: dict[str, asyncio.Semaphore] = {}
        first: dict[str, asyncio.Task] = {}  # cache key -> the task that answers it
        bar = tqdm(total=len(requests), desc=self.stage, file=sys.stderr, disable=not self.progress,
                   mininterval=2.0)

        async def send(req, described, key):
            provider = req.endpoint.provider
            sem = semaphores.setdefault(provider, asyncio.Semaphore(self._limit(provider)))
            async with sem:
                return await self._call(req, described, key)

        async def one(req):
            described = self.describe(req)
            key = cache_key(described)
            if key in first:  # the same request again in this job: one call, its answer shared
                answered = await first[key]
                result = self._shared(req, answered)
            else:
                first[key] = asyncio.ensure_future(send(req, described, key))
                result = await first[key]
            bar.update(1)
            return result

        tasks = [asyncio.ensure_future(one(r)) for r in requests]
        renewer = None if self.replay else self.cache.renewer(lambda: tuple(self._leases), self.owner)
        try:
            await self._until_done_or_stopped(tasks)
        finally:
            if renewer is not None:
                renewer.stop()
            bar.close()
        results = [task.result() for task in tasks]
        for result in results:
            self.log_call(result)
        return results

    async def _until_done_or_stopped(self, tasks: list) -> None:
        """Wait for every task, watching for a stop (the run's mark, a signal, a failed cache write).
        On a stop: nothing more is sent; the requests in flight get `stop.GRACE_S` to be answered and
        stored, the rest are cancelled (never retried); then RunStopped (or the write's CacheError)
        with what happened, and the job writes no output. Any other error propagates."""
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=stop.POLL_S, return_when=asyncio.FIRST_EXCEPTION)
            errors = [t.exception() for t in done if not t.cancelled() and t.exception() is not None]
            other = [e for e in errors if not isinstance(e, stop.RunStopped)
                     and not (isinstance(e, CacheError) and self._write_failed is not None)]
            if other:
                for task in pending:
                    task.cancel()
                raise other[0]
            if self._stopping is None and not self.replay:
                self._stopping = stop.requested() or ("a cache write failed" if self._write_failed else None) or (
                    str(errors[0]) if errors else None)
            if self._stopping is not None:
                break
        if not pending and self._stopping is None:
            return
        began = time.monotonic()
        if pending:
            _, pending = await asyncio.wait(pending, timeout=stop.GRACE_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        answered = sum(t.done() and not t.cancelled() and t.exception() is None for t in tasks)
        summary = (f"{answered} of {len(tasks)} requests answered (every answer received is in the cache"
                   f"{'' if not self.unstored else f' but {self.unstored}'}), {len(pending)} in flight cancelled "
                   f"after {time.monotonic() - began:.1f} s, the rest never sent; no output written")
        if self._write_failed is not None:
            raise CacheError(f"{self._write_failed} This job sent nothing more after the failed write: "
                             f"{self.unstored} answer(s) received could not be stored (paid, and asked again on the "
                             f"rerun); {summary}.", self.cache.path)
        raise stop.RunStopped(f"{self.stage}: stopped ({self._stopping}): {summary}. A plain rerun sends only "
                              f"what is not in the cache.")

    def check_stop(self) -> None:
        """Raise RunStopped (or the failed write's CacheError) once this job must send nothing more."""
        if self._write_failed is not None:
            raise self._write_failed
        why = self._stopping or stop.requested()
        if why is not None:
            self._stopping = self._stopping or why
            raise stop.RunStopped(f"{self.stage}: stopped ({why})")

    async def _wait_for_owner(self, key: str) -> tuple[dict | None, float]:
        """While another live process holds the lease on `key` (it is sending that request), wait:
        no budget, no rate-limit turn. (its stored answer or None once the lease is gone, the seconds
        waited). None: the owner failed or vanished, so this job sends the request itself."""
        waited, started = False, time.monotonic()
        while self.cache.holder(key, self.owner) is not None:
            waited = True
            if self._stopping or stop.requested():
                break
            await asyncio.sleep(0.2)
        if not waited:
            return None, 0.0
        return self.cached(key), round(time.monotonic() - started, 3)

    def _shared(self, req: Request, answered: Result) -> Result:
        if answered.status == "failed":
            return Result(request=req, status="failed", error=answered.error, key=answered.key, latency_s=0.0,
                          call=dict(answered.call))
        result = self.result_from(req, self.cache.get(answered.key) or {"content": answered.content},
                                  answered.key, cache_hit=True)
        result.latency_s = 0.0
        return result

    def _hit(self, req: Request, record: dict, key: str, waited_s: float = 0.0) -> Result:
        result = self.result_from(req, record, key, cache_hit=True)
        result.latency_s, result.wait_s = 0.0, waited_s
        return result

    async def _call(self, req: Request, described: dict, key: str) -> Result:
        cached = self.cached(key)
        if cached is not None:
            return self._hit(req, cached, key)
        if self.replay:  # a replay sends nothing, so it takes no lease
            self.raise_replay_miss(req, described, key)
        waited, tokens = 0.0, 0
        while True:
            self.check_stop()
            record, wait_s = await self._wait_for_owner(key)
            waited += wait_s
            if record is not None:  # another process's call answered it while this one waited
                self.lease_waits += 1
                return self._hit(req, record, key, waited)
            hold, refused = self.reserve_budget(req, key)
            if refused is not None:
                self.cache.record_miss(key, described, prompt=req.prompt_id, stage=self.stage, item_id=req.item_id,
                                       reason="budget")
                return Result(request=req, status="failed", error=refused, key=key, latency_s=0.0,
                              call={name: None for name in CALL_FIELDS} | {"params": self.params_of(req)})
            if self.pacer:  # before the clock starts: waiting for a turn is not latency
                tokens = estimated_tokens(req.messages, req.endpoint.params)
                await self.pacer.wait(req.endpoint.model, tokens)
            # The lease is claimed after the rate-limit turn, with the cache checked in the same transaction.
            state, record = self.cache.claim(key, self.owner)
            if state == "claimed":
                break
            if hold is not None:
                self.budget.settle(hold, 0.0)
            if state == "cached":
                self.lease_waits += 1
                return self._hit(req, record, key, waited)
        self._leases.add(key)
        try:
            return await self._send_and_store(req, described, key, hold, tokens)
        finally:
            self._leases.discard(key)
            if self._write_failed is None:
                self.cache.release(key, self.owner)  # a failed owner's waiters send it themselves

    async def _send_and_store(self, req: Request, described: dict, key: str, hold, tokens: int) -> Result:
        response, error, attempts = await self._with_retries(req, described, tokens)
        if hold is not None:
            self.budget.settle(hold, 0.0 if error is not None else response["cost_usd"])
        if error is not None:
            self.cache.record_miss(key, described, prompt=req.prompt_id, stage=self.stage, item_id=req.item_id,
                                   reason="failed")
            return Result(request=req, status="failed", error=error, key=key, latency_s=attempts["latency_s"],
                          attempts=attempts["n"], wait_s=attempts["wait_s"], auth_error=attempts["auth"],
                          call={name: None for name in CALL_FIELDS} | {"params": self.params_of(req),
                                                                      "litellm_version": litellm_version()})
        response, replaced = valid_unicode(response)
        if replaced:
            self.invalid_unicode += replaced
            response["invalid_unicode"] = replaced
            print(f"{self.stage}: the answer to {req.item_id} ({req.endpoint.name}) held {replaced} character(s) of "
                  f"invalid Unicode, stored as U+FFFD", file=sys.stderr)
        try:
            stored = self.cache.put_first(key, described, response)  # another job's first answer, if it won
        except CacheError as err:
            # The answer is paid but cannot be kept: send nothing more; the run loop stops the job.
            self.unstored += 1
            self._write_failed = self._write_failed or err
            self._stopping = self._stopping or "a cache write failed"
            raise
        result = self.result_from(req, stored, key, cache_hit=False)
        result.attempts, result.wait_s = attempts["n"], attempts["wait_s"]
        return result

    async def _with_retries(self, req, described, tokens: int = 0) -> tuple[dict | None, str | None, dict]:
        """(response record, None, attempts) or (None, error text, attempts) once retries are spent
        (`wire.retrying`: `llm.max_retries`, `llm.max_wait_s`, the provider's Retry-After)."""
        kwargs = completion_kwargs(req.endpoint, req.messages, described["response_format"], self.call.timeout_s)
        retrying = wire_retrying(self.call.backoff_s, self.call.max_retries, self.call.max_wait_s)
        called_at, start = utc_now(), time.perf_counter()
        attempts = {"n": 0, "wait_s": 0.0, "auth": False, "latency_s": 0.0}
        try:
            async for attempt in retrying:
                with attempt:
                    if self.pacer and attempts["n"]:  # a retry is a call too: it waits for its turn
                        await self.pacer.wait(req.endpoint.model, tokens)
                    self.check_stop()  # before each send and each retry
                    attempts["n"] += 1
                    self.calls_made += 1
                    resp = await litellm_module().acompletion(**kwargs)
        except (stop.RunStopped, CacheError):
            raise
        except Exception as err:  # spent or not retryable (bad request, auth, ...): recorded, never raised
            attempts.update(wait_s=round(retrying.statistics.get("idle_for", 0.0), 3), auth=is_auth_error(err),
                            latency_s=time.perf_counter() - start)
            return None, self.scrub(f"{type(err).__name__}: {err}")[:1000], attempts
        latency = time.perf_counter() - start
        attempts.update(wait_s=round(retrying.statistics.get("idle_for", 0.0), 3), latency_s=latency)
        return response_record(req, resp, latency, called_at, self.scrub), None, attempts
