"""Overhead of the model module, measured against plain litellm in one run.

- uncached calls against the local OpenAI-compatible stub (50 ms latency,
  concurrency 64): CPU per call through ModelClient vs plain litellm.acompletion
  (target: ratio <= 1.5);
- cached calls: wall time per call when every response comes from the cache
  (target: < 2 ms);
- uncached calls with a rate share too large to bind: the CPU the pacing adds.
The stub runs in its own process, so only the client's CPU is counted.
Writes benchmarks/out/model_module.json and prints a summary.
"""

import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "dummy-key-for-benchmarks")

import litellm  # noqa: E402

from aura_eval.llm import Endpoint, Request  # noqa: E402
from aura_eval.llm.client import ModelClient  # noqa: E402
from tests.stub_server import serve_in_subprocess  # noqa: E402

N_CALLS = int(os.environ.get("BENCH_CALLS", 640))
CONCURRENCY = 64
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def requests(api_base, tag):
    endpoint = Endpoint(name="stub", model="openai/stub", params={"temperature": 0.0}, api_base=api_base)
    return [Request(item_id=f"{tag}-{i:05d}", endpoint=endpoint, prompt_id="bench", prompt_version=1,
                    role="bench", schema=SCHEMA, messages=[{"role": "user", "content": f"{tag} question {i}"}])
            for i in range(N_CALLS)]


async def plain_litellm(api_base, tag):
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i):
        async with sem:
            return await litellm.acompletion(model="openai/stub", api_base=api_base, temperature=0.0,
                                             messages=[{"role": "user", "content": f"{tag} question {i}"}],
                                             max_retries=0)

    await asyncio.gather(*(one(i) for i in range(N_CALLS)))


def measure(fn):
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main():
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=serve_in_subprocess, args=(0.05, ports), daemon=True)
    server.start()
    api_base = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = {"cache": f"{tmp}/bench.sqlite", "replay": False, "concurrency": {"default": CONCURRENCY},
                        "max_retries": 0, "backoff_s": 0.0, "timeout_s": 60}
            measure(lambda: asyncio.run(plain_litellm(api_base, "warm")))  # imports, connection pools
            plain_cpu, plain_wall = measure(lambda: asyncio.run(plain_litellm(api_base, "plain")))
            ours_cpu, ours_wall = measure(lambda: ModelClient(settings, "bench", progress=False).run(
                requests(api_base, "ours")))
            cached_cpu, cached_wall = measure(lambda: ModelClient(settings, "bench", progress=False).run(
                requests(api_base, "ours")))
            # The same path with a rate share too large to bind: what pacing itself costs.
            paced = {**settings, "rate_limits_paced": {"rpm_openai": 10**7, "tpm_openai": 10**9}}
            paced_cpu, paced_wall = measure(lambda: ModelClient(paced, "bench", progress=False).run(
                requests(api_base, "paced")))
    finally:
        server.kill()
    report = {
        "calls": N_CALLS, "concurrency": CONCURRENCY, "stub_latency_s": 0.05,
        "plain_litellm_cpu_ms_per_call": round(1000 * plain_cpu / N_CALLS, 3),
        "model_module_cpu_ms_per_call": round(1000 * ours_cpu / N_CALLS, 3),
        "cpu_ratio_model_module_over_plain": round(ours_cpu / plain_cpu, 3),
        "model_module_paced_cpu_ms_per_call": round(1000 * paced_cpu / N_CALLS, 3),
        "overhead_ms_per_call_over_plain": round(1000 * (ours_cpu - plain_cpu) / N_CALLS, 3),
        "plain_calls_per_s": round(N_CALLS / plain_wall, 1), "model_module_calls_per_s": round(N_CALLS / ours_wall, 1),
        "cached_ms_per_call_wall": round(1000 * cached_wall / N_CALLS, 3),
        "cached_ms_per_call_cpu": round(1000 * cached_cpu / N_CALLS, 3),
        "targets": {"cpu_ratio_max": 1.5, "cached_ms_per_call_max": 2.0},
    }
    publish("model_module", report)


if __name__ == "__main__":
    main()
