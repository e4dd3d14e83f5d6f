"""`python -m aura_eval preflight --configfile C`: one tiny request per model entry the config
uses, before a run spends anything, and one line per entry saying OK or what is wrong and how to
fix it: a key variable that is unset, a key the provider refuses, a model it does not know, a
provider it cannot reach, a parameter or structured output it refuses, a batch API that refuses
the key. Exits 1 on any problem.

The request goes through the model module's `wire.probe`, built as the run builds it (the
providers' adaptations included) but never through the response cache: a preflight answer is not a
research answer and must not be replayed as one. It carries the entry's parameters
(a parameter the model refuses fails here, not in the run), at most MAX_TOKENS output tokens, and
the response_format of the entry's roles (a prompt's JSON schema where a stage needs structured
output). An entry with `batch: true` also lists one batch of its provider's batch API with the
key (the cheapest call that checks the key there). Simulated and embedded models are OK without
a request: they run in this process and need no key.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace

from aura_eval import stage_registry
from aura_eval.workflow import jobs
from aura_eval.llm import auth, pricing, wire
from aura_eval.llm.providers import IN_PROCESS_PROVIDERS, LOCAL_PROVIDER, provider_of
from aura_eval.llm.types import endpoint_from
from aura_eval.llm.vendors import ADAPTERS
from aura_eval.util.prompts import load_prompt
from aura_eval.vocab import AGENT_PROMPTS, parse_run
from aura_eval.workflow.config import key_variable

MAX_TOKENS = 16  # enough for a provider to accept the request; the answer itself is not used
TIMEOUT_S = 60.0
QUESTION = 'Reply with the JSON object {"ok": true} and nothing else.'
MESSAGES = [{"role": "user", "content": QUESTION}]
# Words of a refused connection that litellm reports as another error (hosted_vllm: InternalServerError).
UNREACHABLE_WORDS = ("connection refused", "connecterror", "connection error", "failed to establish",
                     "name or service not known", "temporary failure in name resolution")
# Words of an unknown model that litellm reports as another error than NotFoundError (OpenRouter: a 400).
UNKNOWN_MODEL_WORDS = ("model not found", "does not exist", "not a valid model id")
# Words in a provider's refusal that point at the response_format (OpenAI, Anthropic, Gemini, vLLM).
STRUCTURED_WORDS = ("response_format", "json_schema", "response_schema", "responseschema", "structured output",
                    "responsemimetype", "guided_json")


@dataclass
class Check:
    name: str
    model: str
    ok: bool
    text: str  # what was found: OK's note, or the problem and its fix
    tokens_in: int = 0
    tokens_out: int = 0


def entries_in_use(config: dict) -> dict[str, dict | None]:
    """Every model entry some job of the run calls -> the JSON schema its roles need (the first
    prompt with one), or None where every prompt it answers is free text (a text-format agent)."""
    found: dict[str, dict | None] = {}
    for stage in stage_registry.registry().values():
        for job in jobs.stage_jobs(config, stage.wildcards):
            if "run" in job and "judge" not in job:  # a rollout: the prompt of its agent's format and output
                agent, fmt = parse_run(job["run"])
                prompt_ids = [AGENT_PROMPTS[(fmt, config["agents"][agent].get("output", "text"))]]
            else:
                prompt_ids = list(stage.prompts)
            schema = next((s for s in (load_prompt(p).schema for p in prompt_ids) if s is not None), None)
            for name in jobs.job_models(config, stage.role, job):
                if found.get(name) is None:
                    found[name] = schema
    return dict(sorted(found.items()))


def _scrub(text: str, secret: str | None) -> str:
    """One line of at most 300 characters, without the key's value (nor litellm's repeated prefixes)."""
    text = re.sub(r"litellm\.\w+: (\w+: )?", "", " ".join(str(text).split()))
    if secret:
        text = text.replace(secret, "***")
    return text[:300]


def _classify(err: Exception, variable: str | None, api_base: str | None, secret: str | None) -> str:
    """A litellm exception as the problem and its fix."""
    import openai  # litellm's exceptions subclass openai's

    message = _scrub(f"{type(err).__name__}: {err}", secret)
    lowered = message.lower()
    key = f"the key in {variable}" if variable else "the key"
    if auth.by_openai_class_or_invalid_key_text(err, message):
        return f"key refused ({message}); fix: put a valid key for this provider in {variable or 'the key variable'}"
    # OpenRouter answers an unknown model with a 400 saying it "is not a valid model ID"
    if isinstance(err, openai.NotFoundError) or any(w in lowered for w in UNKNOWN_MODEL_WORDS):
        return f"unknown model ({message}); fix: correct the entry's model string (litellm's provider/name)"
    if isinstance(err, openai.APIConnectionError) or any(w in lowered for w in UNREACHABLE_WORDS):  # or a timeout
        where = api_base or "the provider's default address"
        return f"provider unreachable at {where} ({message}); fix: check the network, api_base, or that the server runs"
    if isinstance(err, openai.RateLimitError):
        return f"rate-limited or out of quota ({message}); fix: check the account's quota and billing for {key}"
    if isinstance(err, openai.BadRequestError) and any(word in lowered for word in STRUCTURED_WORDS):
        return f"structured output refused ({message}); fix: set structured_output: false in the entry"
    if isinstance(err, openai.BadRequestError):
        return f"request refused ({message}); fix: check the entry's params against the provider's API"
    return f"failed ({message})"


def _batch_check(endpoint, secret: str | None) -> str | None:
    """None when the provider's batch API lists batches with the key, else the problem."""
    try:
        adapter = ADAPTERS[endpoint.provider](endpoint, SimpleNamespace(timeout_s=TIMEOUT_S, max_retries=0))
        adapter.check()
    except Exception as err:
        message = _scrub(f"{type(err).__name__}: {err}", secret)
        if auth.by_status_or_credential_words(err):
            return f"batch API refused the key ({message}); fix: a key with batch access, or batch: false"
        if auth.status_code_of(err) is None and "connect" in message.lower():
            return f"batch API unreachable ({message}); fix: check the network or api_base"
        return f"batch API failed ({message}); fix: batch: false in the entry, or check the provider's batch access"
    return None


def check_entry(name: str, spec: dict, schema: dict | None, environ=os.environ) -> Check:
    """One entry's check: OK without a request where none is needed, else one request (and the
    batch API's list where `batch: true`)."""
    endpoint = endpoint_from(name, spec)
    model, provider = endpoint.model, endpoint.provider
    if provider in IN_PROCESS_PROVIDERS:
        why = "embedded local model" if provider == LOCAL_PROVIDER else "simulated"
        return Check(name, model, True, f"OK ({why}: answered in this process, no key, no request)")
    if "mock_response" in endpoint.params:
        return Check(name, model, True, "OK (mock_response: litellm answers without a request)")
    variable = key_variable(spec)
    secret = environ.get(variable) if variable else None
    if variable and not secret:
        return Check(name, model, False, f"key variable {variable} is unset; fix: export {variable}=<your key> "
                                         f"(or name the variable that holds it in the entry's api_key_env)")
    small = dataclasses.replace(endpoint, params={**endpoint.params, "max_tokens": MAX_TOKENS})
    structured = schema is not None and endpoint.structured_output
    try:
        response = wire.probe(small, MESSAGES, schema, TIMEOUT_S, environ)  # sent as the run sends it
    except Exception as err:
        return Check(name, model, False, _classify(err, variable, endpoint.api_base, secret))
    usage = getattr(response, "usage", None)
    tokens = (getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0)
    note = "answered" + (", structured output accepted" if structured else "")
    if endpoint.batch:
        problem = _batch_check(endpoint, secret)
        if problem:
            return Check(name, model, False, problem, *tokens)
        note += "; batch API accepts the key"
    return Check(name, model, True, f"OK ({note})", *tokens)


def run(config: dict, environ=os.environ, workers: int = 8) -> list[Check]:
    """Every entry in use, checked concurrently (the providers answer in seconds), in name order."""
    used = entries_in_use(config)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda item: check_entry(item[0], config["models"][item[0]], item[1], environ),
                             used.items()))


def cost(config: dict, checks: list[Check]) -> tuple[float, list[str]]:
    """Dollars of the preflight's answered requests at standard prices, and the entries unpriced."""
    total, unpriced = 0.0, []
    for c in checks:
        if not c.tokens_in and not c.tokens_out:
            continue
        spec = config["models"][c.name]
        rates = pricing.per_token(spec["model"], spec.get("price"))
        if rates is None:
            unpriced.append(c.name)
        else:
            total += c.tokens_in * rates[0] + c.tokens_out * rates[1]
    return total, unpriced


def estimate(config: dict) -> tuple[int, float, list[str]]:
    """Before any request: how many the preflight sends and the most they cost (the prompt with its
    schema, and MAX_TOKENS out, at standard prices); and the entries unpriced."""
    from aura_eval.analyze.forecast import count_tokens

    requests, total, unpriced = 0, 0.0, []
    for name, schema in entries_in_use(config).items():
        spec = config["models"][name]
        if provider_of(spec["model"]) in IN_PROCESS_PROVIDERS or "mock_response" in (spec.get("params") or {}):
            continue
        requests += 1
        rates = pricing.per_token(spec["model"], spec.get("price"))
        if rates is None:
            unpriced.append(name)
            continue
        text = QUESTION + (json.dumps(schema) if schema is not None else "")
        total += count_tokens([{"role": "user", "content": text}]) * rates[0] + MAX_TOKENS * rates[1]
    return requests, total, unpriced


def report(config: dict, checks: list[Check]) -> str:
    lines = [f"{c.name} ({c.model}): {c.text}" for c in checks]
    usd, unpriced = cost(config, checks)
    problems = sum(not c.ok for c in checks)
    lines.append(f"preflight: {len(checks)} model entries, {problems} with a problem; its requests cost "
                 f"${usd:.4f}" + (f" (unpriced: {', '.join(unpriced)})" if unpriced else ""))
    return "\n".join(lines) + "\n"
