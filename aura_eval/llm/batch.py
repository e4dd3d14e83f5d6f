"""One job's requests of the models whose entry sets `batch: true`, through their provider's batch
API (about half the price, within 24 hours instead of seconds): each vendor's API is an adapter of
`vendors` (its SDK used directly: litellm's batch functions cover OpenAI only); `BatchRun` does the
rest, needing of the client only `BatchHost`.

Crash-safe: each batch and the keys it holds (the custom_id of a request is its cache key) are
kept in the cache file as soon as the provider names the batch, so a rerun polls the batches still
open instead of submitting their keys again, and their answers go into the response cache
(`put_first`), which a replay answers from. Every key ends as a Result; what no answer came for
(per-item errors, an expired or cancelled batch, a refused submission, a batch still open after
`llm.batch_max_wait_s`) is "failed" with the reason, and a later run submits it anew.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from typing import Protocol

from aura_eval.llm import auth, pricing, stop
from aura_eval.llm.cache import ResponseCache, cache_key
from aura_eval.llm.providers import BATCH_PROVIDERS
from aura_eval.llm.settings import CallSettings
from aura_eval.llm.types import CALL_FIELDS, Endpoint, Request, Result, utc_now
from aura_eval.llm.vendors import ADAPTERS, BatchAdapter, Status
from aura_eval.llm.wire import describe, params_of


class BatchHost(Protocol):
    """What a `BatchRun` needs of the job's client (`client.ModelClient` is one): the steps a live
    call takes, the job's cache and call settings; nothing else of the client."""

    stage: str
    replay: bool
    call: CallSettings  # batch_poll_s, batch_max_wait_s; timeout_s and max_retries for the adapters
    cache: ResponseCache

    def check_stop(self) -> None: ...
    def cached(self, key: str) -> dict | None: ...
    def result_from(self, req: Request, response: dict, key: str, cache_hit: bool) -> Result: ...
    def raise_replay_miss(self, req: Request, described: dict, key: str): ...
    def reserve_budget(self, req: Request, key: str) -> tuple[int | None, str | None]: ...
    def settle_budget(self, hold: int, cost: float) -> None: ...
    def count_calls(self, n: int) -> None: ...
    def scrub(self, text: str | None) -> str | None: ...
    def log_call(self, result: Result) -> None: ...


def batch_price(endpoint: Endpoint) -> tuple[float, float] | None:
    """USD per input and per output token of a batch call (`pricing.per_token` with batch=True:
    litellm's cost map, else the model entry's `price`); None (unpriced, never $0) when neither prices it."""
    rates = pricing.per_token(endpoint.model, endpoint.price, batch=True)
    return None if rates is None else rates[:2]


def batch_cost(endpoint: Endpoint, tokens_in: int | None, tokens_out: int | None) -> float | None:
    """The batch price of one call in USD (`batch_price`); None when unpriced or without token counts."""
    return _cost(batch_price(endpoint), tokens_in, tokens_out)


def _cost(per: tuple[float, float] | None, tokens_in: int | None, tokens_out: int | None) -> float | None:
    if per is None or tokens_in is None or tokens_out is None:
        return None
    return tokens_in * per[0] + tokens_out * per[1]



def _chunks(lines: list[tuple[str, dict]], max_requests: int, max_bytes: int):
    """Consecutive runs of (key, line) within the provider's count and size limits."""
    chunk, size = [], 0
    for key, line in lines:
        n = len(json.dumps(line, ensure_ascii=False).encode("utf-8")) + 1
        if chunk and (len(chunk) >= max_requests or size + n > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append((key, line))
        size += n
    if chunk:
        yield chunk


class BatchRun:
    """One job's batch requests: `submit()` answers the hits and sends (or resumes) the misses,
    `wait()` polls until every key is answered, failed, or the wait runs out, and returns the
    Results in the order of the requests."""

    def __init__(self, client: BatchHost, requests: list[Request]):
        self.client = client
        self.requests = requests
        self.results: list[Result | None] = [None] * len(requests)
        self.waiting: dict[str, list[int]] = {}  # key -> indices of the requests it answers
        self.batch_of: dict[str, str] = {}  # key -> the batch that holds it
        self.submitted: set[str] = set()  # keys this job submitted (the others were resumed)
        self.adapters: dict[tuple, BatchAdapter] = {}
        self.adapter_of: dict[str, BatchAdapter] = {}  # batch id -> adapter
        self.endpoint_of: dict[str, Endpoint] = {}  # batch id -> the endpoint of this job's keys in it
        self.holds: dict[str, int] = {}  # key -> its reservation under llm.budget_usd (budget.py), settled on ingest
        self.poll_s = float(client.call.batch_poll_s)
        self.max_wait_s = float(client.call.batch_max_wait_s)

    def _say(self, text: str) -> None:
        print(f"[{self.client.stage}] {text}", file=sys.stderr, flush=True)

    def _adapter(self, endpoint: Endpoint) -> BatchAdapter:
        ident = (endpoint.provider, endpoint.api_base, endpoint.api_key_env)
        if ident not in self.adapters:
            self.adapters[ident] = ADAPTERS[endpoint.provider](endpoint, self.client.call)
        return self.adapters[ident]

    def submit(self) -> None:
        c = self.client
        c.check_stop()  # after Ctrl-C nothing is submitted (before any budget is reserved)
        described_of = {}
        for i, req in enumerate(self.requests):
            if req.endpoint.provider not in ADAPTERS:
                raise ValueError(f"model {req.endpoint.name!r} ({req.endpoint.model}) has batch: true, but only "
                                 f"{', '.join(BATCH_PROVIDERS)} models have a batch API here")
            described = describe(req)
            key = cache_key(described)
            if key in self.waiting:
                self.waiting[key].append(i)
                continue
            cached = c.cached(key)
            if cached is not None:
                self.results[i] = c.result_from(req, cached, key, cache_hit=True)
                self.results[i].latency_s = 0.0
                continue
            if c.replay:
                c.raise_replay_miss(req, described, key)
            self.waiting[key] = [i]
            described_of[key] = described
        for key, batch_id in c.cache.open_batches(self.waiting).items():
            endpoint = self.requests[self.waiting[key][0]].endpoint
            try:
                self.adapter_of.setdefault(batch_id, self._adapter(endpoint))
            except Exception as err:  # e.g. no key for the SDK: recorded; the batch stays open for a rerun
                self._fail(key, c.scrub(f"batch client for {endpoint.model}: {type(err).__name__}: {err}")[:1000],
                           auth=auth.by_status_or_credential_words(err))
                continue
            self.batch_of[key] = batch_id
            self.endpoint_of.setdefault(batch_id, endpoint)
        if self.batch_of:
            self._say(f"resuming {len(set(self.batch_of.values()))} open batch(es) holding "
                      f"{len(self.batch_of)} of this job's requests")
        groups: dict[tuple, list[str]] = {}
        for key in self.waiting:
            if key not in self.batch_of:
                ep = self.requests[self.waiting[key][0]].endpoint
                groups.setdefault((ep.provider, ep.model, ep.api_base, ep.api_key_env), []).append(key)
        for (provider, model, _, _), keys in groups.items():
            self._submit_group(provider, model, keys, described_of)

    def _submit_group(self, provider: str, model: str, keys: list[str], described_of: dict) -> None:
        c = self.client
        endpoint = self.requests[self.waiting[keys[0]][0]].endpoint
        try:
            adapter = self._adapter(endpoint)
        except Exception as err:  # e.g. no key for the SDK: every request of the group fails, recorded
            for key in keys:
                self._fail(key, c.scrub(f"batch client for {model}: {type(err).__name__}: {err}")[:1000],
                           auth=auth.by_status_or_credential_words(err))
            return
        lines = []
        for key in keys:
            line, refused = adapter.line(key, described_of[key])
            if not refused:  # the budget, as for a live call: reserve the most it can cost before sending
                hold, refused = c.reserve_budget(self.requests[self.waiting[key][0]], key)
                if hold is not None:
                    self.holds[key] = hold
            if refused:
                self._fail(key, refused)
            else:
                lines.append((key, line))
        for chunk in _chunks(lines, adapter.max_requests, adapter.max_bytes):
            submitted_at = utc_now()
            try:
                batch_id, state = adapter.create([line for _, line in chunk])
            except Exception as err:  # refused (bad request, auth, ...): recorded, a rerun tries again
                for key, _ in chunk:
                    self._settle(key, 0.0)
                    self._fail(key, c.scrub(f"batch submission: {type(err).__name__}: {err}")[:1000],
                               auth=auth.by_status_or_credential_words(err))
                continue
            first = {key: self.requests[self.waiting[key][0]] for key, _ in chunk}
            c.cache.record_batch(batch_id, provider=provider, model=model, api_base=endpoint.api_base,
                                 endpoint=endpoint.name, state=state, submitted_at=submitted_at,
                                 items=[(key, described_of[key], first[key].prompt_id, first[key].prompt_version)
                                        for key, _ in chunk])
            c.count_calls(len(chunk))
            for key, _ in chunk:
                self.batch_of[key] = batch_id
                self.submitted.add(key)
            self.adapter_of[batch_id], self.endpoint_of[batch_id] = adapter, endpoint
            self._say(f"submitted batch {batch_id} ({model}, {len(chunk)} requests)")

    def _sleep_unless_stopped(self, open_ids: list[str]) -> None:
        """Sleep `poll_s` between polls, looking for the run's stop mark: on a stop the open batches
        stay open (recorded in the cache file), and the rerun polls them instead of resubmitting."""
        until = time.monotonic() + self.poll_s
        while time.monotonic() < until:
            why = stop.requested()
            if why is not None:
                raise stop.RunStopped(f"{self.client.stage}: stopped ({why}): batches {', '.join(open_ids)} left "
                                      f"open at the provider; a plain rerun polls them and submits nothing again")
            time.sleep(min(stop.POLL_S, max(0.0, until - time.monotonic())))

    def wait(self) -> list[Result]:
        start = time.monotonic()
        pending = set(self.batch_of.values())
        state: dict[str, str] = {}
        problem: dict[str, str] = {}  # batch id -> the last error polling it
        said: dict[str, tuple[str, float]] = {}  # batch id -> the progress last logged, and when
        while pending:
            for batch_id in sorted(pending):
                try:
                    status = self.adapter_of[batch_id].retrieve(batch_id)
                except Exception as err:
                    problem[batch_id] = self.client.scrub(f"{type(err).__name__}: {err}")[:500]
                    code = auth.status_code_of(err)
                    if code == 404:  # the provider does not know it: ended, unanswered; a rerun resubmits
                        status = Status("not_found", True, "", f"not found at the provider ({problem[batch_id]})",
                                        None)
                    elif auth.by_status_or_credential_words(err):  # a refused key (401, 403): stop; a rerun resumes it
                        self._say(f"batch {batch_id}: polling refused: {problem[batch_id]}")
                        self._give_up(batch_id, f"polling refused ({problem[batch_id]}); a rerun with a valid key "
                                                f"resumes polling it", auth=True)
                        pending.discard(batch_id)
                        continue
                    else:  # the SDK retried already; poll again next round
                        continue
                problem.pop(batch_id, None)
                state[batch_id] = status.state
                self.client.cache.update_batch(batch_id, state=status.state, polled_at=utc_now())
                if status.ended:
                    try:
                        self._ingest(batch_id, status, waited=time.monotonic() - start)
                    except Exception as err:  # results not readable yet: read them again next round
                        problem[batch_id] = self.client.scrub(f"reading results: {type(err).__name__}: {err}")[:500]
                        self._say(f"batch {batch_id}: {problem[batch_id]}")
                        continue
                    pending.discard(batch_id)
                elif said.get(batch_id, ("", 0.0))[0] != status.progress or time.monotonic() - said[batch_id][1] > 600:
                    said[batch_id] = (status.progress, time.monotonic())  # on progress, else every 10 min
                    self._say(f"batch {batch_id}: {status.state}, {status.progress}; waited "
                              f"{time.monotonic() - start:.0f} s of {self.max_wait_s:.0f} s")
            if not pending or time.monotonic() - start + self.poll_s > self.max_wait_s:
                break
            self._sleep_unless_stopped(sorted(pending))
        waited = time.monotonic() - start
        for batch_id in sorted(pending):
            why = f"still {state.get(batch_id, 'unknown')}" + (f" (last poll: {problem[batch_id]})"
                                                                 if batch_id in problem else "")
            self._say(f"batch {batch_id}: {why} after {waited:.0f} s (llm.batch_max_wait_s); a rerun resumes it")
            self._give_up(batch_id, f"{why} after waiting {waited:.0f} s (llm.batch_max_wait_s); a rerun resumes "
                                    f"polling it")
        for result in self.results:
            self.client.log_call(result)
        return list(self.results)

    def _give_up(self, batch_id: str, why: str, auth: bool = False) -> None:
        """This job's keys in a batch that stays open: failed Results, the batch kept for a rerun."""
        for key in [k for k, b in self.batch_of.items() if b == batch_id and self.waiting.get(k)]:
            self._fail(key, f"batch {batch_id} {why}", auth=auth)

    def _ingest(self, batch_id: str, status: Status, waited: float) -> None:
        """Cache every answer of an ended batch (other jobs' keys too), record each key's outcome,
        mark the batch ingested, and answer this job's keys."""
        c = self.client
        adapter = self.adapter_of[batch_id]
        row = c.cache.batch(batch_id)
        items = c.cache.batch_items(batch_id)
        latency = max(0.0, time.time() - _epoch(row["submitted_at"]))
        per_token = batch_price(self.endpoint_of[batch_id])  # once per batch
        outcomes: dict[str, tuple[str, str | None]] = {}
        stored_of: dict[str, dict] = {}
        for key, record, error in adapter.answers(status, sorted(items)) if status.raw is not None else ():
            if key not in items or key in outcomes:
                continue
            if record is None:
                outcomes[key] = ("failed", c.scrub(error)[:1000])
                continue
            item = items[key]
            for name in ("content", "reasoning", "refusal"):
                record[name] = c.scrub(record.get(name))
            record["cost_usd"] = _cost(per_token, record["tokens_in"], record["tokens_out"])
            record["latency_s"] = round(latency, 4)
            record["provenance"].update(litellm_version=None, sdk_version=adapter.sdk_version, batch_id=batch_id,
                                        prompt=item["prompt"], prompt_version=item["prompt_version"],
                                        params=item["request"]["params"], called_at=row["submitted_at"])
            stored_of[key] = c.cache.put_first(key, item["request"], record)
            outcomes[key] = ("ok", None)
        reason = status.reason or f"{status.state} without an answer"
        for key in items:
            outcomes.setdefault(key, ("failed", reason))
        for key, (outcome, _) in outcomes.items():
            self._settle(key, (stored_of[key].get("cost_usd") or 0.0) if outcome == "ok" else 0.0)
        c.cache.record_batch_outcomes(batch_id, outcomes)
        c.cache.update_batch(batch_id, state=status.state, polled_at=utc_now(), ingested_at=utc_now(),
                             reason=status.reason)
        failed = sum(1 for outcome, _ in outcomes.values() if outcome == "failed")
        self._say(f"batch {batch_id}: {status.state} after {waited:.0f} s here ({latency:.0f} s since submission), "
                  f"{len(outcomes) - failed} answered, {failed} failed")
        for key in [k for k, b in self.batch_of.items() if b == batch_id]:
            if key in stored_of:
                self._answer(key, stored_of[key])
            else:
                self._fail(key, f"batch {batch_id}: {outcomes[key][1]}")

    def _settle(self, key: str, cost: float) -> None:
        """Settle this job's reservation of `key` (if it made one) at the call's cost."""
        hold = self.holds.pop(key, None)
        if hold is not None:
            self.client.settle_budget(hold, cost)

    def _answer(self, key: str, stored: dict) -> None:
        c = self.client
        for n, i in enumerate(self.waiting.pop(key, [])):
            result = c.result_from(self.requests[i], stored, key, cache_hit=n > 0)  # repeats share the first answer
            # wait_s stays 0: it counts waits between attempts; the batch's wait is in latency_s and the log.
            result.attempts = int(key in self.submitted and n == 0)
            if n > 0:
                result.latency_s = 0.0
            self.results[i] = result

    def _fail(self, key: str, error: str, auth: bool = False) -> None:
        c = self.client
        for n, i in enumerate(self.waiting.pop(key, [])):
            req = self.requests[i]
            if n == 0:
                c.cache.record_miss(key, describe(req), prompt=req.prompt_id, stage=c.stage, item_id=req.item_id,
                                    reason="failed")
            self.results[i] = Result(request=req, status="failed", error=error, key=key, latency_s=0.0,
                                     attempts=int(key in self.submitted and n == 0), auth_error=auth,
                                     call={name: None for name in CALL_FIELDS} | {"params": params_of(req)})


def _epoch(utc: str) -> float:
    return datetime.fromisoformat(utc.replace("Z", "+00:00")).timestamp()
