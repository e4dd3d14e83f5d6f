"""Every provider fact the code acts on, in one place: which provider a model string names, which
providers run in this process, need no key or have a batch API, the variable each one's key is
read from, and the in-process responders registered at run time (the simulator's).

A provider is the prefix of a litellm model string before its first `/` (`openai/gpt-5.4` ->
`openai`). Two run in this process: the embedded llama.cpp model (`aura_local`, a litellm
custom provider in `llm/local.py`) and the planted-truth simulator (`aura_sim`), which litellm
never serves: the client calls the function `aura_eval.simulator` registers here
(`register_responder`). The model module imports nothing of the workflow; the workflow tells it
what to run in-process by registering it. Imports nothing.
"""

from __future__ import annotations

from typing import Callable

DEFAULT_PROVIDER = "default"  # provider_of a model string that names none
LOCAL_PROVIDER = "aura_local"  # the embedded llama.cpp model (llm/local.py)
SIM_PROVIDER = "aura_sim"  # the planted-truth simulator (aura_eval.simulator)
IN_PROCESS_PROVIDERS = (LOCAL_PROVIDER, SIM_PROVIDER)  # answered in this process: free, no key
KEYLESS_PROVIDERS = IN_PROCESS_PROVIDERS  # their calls need no key variable
# Answered by a registered responder (`register_responder`), never by litellm, never cached; the
# responder may read `Request.facts`, so they enter the request's description (its cache key).
RESPONDER_PROVIDERS = (SIM_PROVIDER,)
RESPONDER_MODULES = {SIM_PROVIDER: "aura_eval.simulator"}  # the module whose import registers each
BATCH_PROVIDERS = ("openai", "anthropic", "gemini")  # the providers whose batch API `batch: true` uses (llm/vendors/)
# The variable litellm reads a provider's key from, where a model entry names none.
PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
                 "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY", "mistral": "MISTRAL_API_KEY",
                 "groq": "GROQ_API_KEY", "together_ai": "TOGETHERAI_API_KEY", "xai": "XAI_API_KEY"}
# Providers whose API refuses a JSON schema in `response_format` (DeepSeek: "This response_format type
# is unavailable now") and answers JSON only with `{"type": "json_object"}` and a prompt that says
# "json": the client sends that, with the schema written into the last message (`wire.py`).
JSON_OBJECT_PROVIDERS = ("deepseek",)
# Providers whose structured outputs take no `prefixItems` (a list whose n-th item has its own schema):
# litellm moves it into the description and keeps `"items": false`, a list that must stay empty, so
# the client sends those lists as `items: {"anyOf": [the item schemas]}` (`wire.py`).
NO_PREFIX_ITEMS_PROVIDERS = ("anthropic",)
BARE_MODEL_PROVIDER = "openai"  # whose key litellm uses for a model string that names no provider


def provider_of(model: str) -> str:
    """A litellm model string's provider (`openai/gpt-5.4` -> `openai`; no `/`: `default`)."""
    return model.split("/", 1)[0] if "/" in model else DEFAULT_PROVIDER


def is_simulated(model: str) -> bool:
    """Whether a model string names the planted-truth simulator (`aura_sim/<name>`)."""
    return provider_of(model) == SIM_PROVIDER


def default_key_variable(model: str) -> str | None:
    """The variable litellm reads a model's key from when its entry names none (a model string
    without a provider is OpenAI's, as litellm reads it); None for a provider not in PROVIDER_KEYS."""
    return PROVIDER_KEYS.get(model.split("/", 1)[0] if "/" in model else BARE_MODEL_PROVIDER)


# -- in-process responders ------------------------------------------------------------------------

# A Request -> the answer: its text, or a response record's answer fields (`content`, `finish_reason`,
# `reasoning`, `refusal`: a cut, a refusal field, reasoning returned apart); raising ResponderFailure
# is a call that got no answer.
Respond = Callable[[object], "str | dict"]


class ResponderFailure(RuntimeError):
    """A responder's call that got no answer (the simulator's failed calls): the client records it
    as status `failed` with this message as its error, counted against llm.max_failed_share."""


class NoResponderError(RuntimeError):
    """A request names a responder provider (RESPONDER_PROVIDERS) that nothing registered."""


_responders: dict[str, Callable[[dict], Respond]] = {}
_litellm_hooks: dict[str, Callable] = {}
_litellm = None  # the litellm module, once the client has imported it (litellm_loaded)


def register_responder(provider: str, responder_for: Callable[[dict], Respond],
                       litellm_hook: Callable | None = None) -> None:
    """Answer `provider`'s requests in this process. The client calls `responder_for(llm_settings)`
    once, on its first request of the provider (a bad setting raises there, out of
    `ModelClient.run`), and then the function it returns once per request: `respond(request)`,
    the answer's text. `litellm_hook(litellm)`, where given, makes the same answers callable
    through litellm too (applied when the client imports litellm, at once if it has). Registering
    again replaces. Raises ValueError for a provider not in RESPONDER_PROVIDERS (its facts, e.g.
    that its requests' facts enter the cache key, are declared here first)."""
    if provider not in RESPONDER_PROVIDERS:
        raise ValueError(f"provider {provider!r} is not a responder provider (declared: "
                         f"{', '.join(RESPONDER_PROVIDERS)}; add it to llm.providers.RESPONDER_PROVIDERS)")
    _responders[provider] = responder_for
    if litellm_hook is not None:
        _litellm_hooks[provider] = litellm_hook
        if _litellm is not None:
            litellm_hook(_litellm)


def responder(provider: str, model: str | None = None) -> Callable[[dict], Respond] | None:
    """The registered `responder_for` of a provider; None for a provider litellm serves. Raises
    NoResponderError naming the provider (and the module whose import registers it) when it is a
    responder provider that nothing registered."""
    if provider in _responders:
        return _responders[provider]
    if provider in RESPONDER_PROVIDERS:
        module = RESPONDER_MODULES.get(provider)
        raise NoResponderError(f"no in-process responder is registered for provider {provider!r}"
                               + (f" (model {model!r})" if model else "") + ": import "
                               + (f"{module} first (the stage runner does)" if module else "the module that "
                                  "registers it first"))
    return None


def litellm_loaded(litellm) -> None:
    """Apply every registered litellm hook to the litellm module the client just imported (and
    remember it, for responders registered later)."""
    global _litellm
    _litellm = litellm
    for hook in _litellm_hooks.values():
        hook(litellm)
