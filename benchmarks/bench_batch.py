"""The batch path's wall time on the local batch stub (tests/batch_stub.py, in its own process):
N requests of about 2 KB each per provider through ModelClient with `batch: true` (submit, poll
every 0.5 s, the stub ends the batch at the second poll, one interval later, read and cache the results), then the
same requests again (all cache hits) and in replay mode. The stub answers at once, so this is
our own overhead; a provider's batch takes minutes to 24 h. Writes benchmarks/out/batch.json.
"""

import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from aura_eval.llm import Endpoint, Request  # noqa: E402
from aura_eval.llm.client import ModelClient, litellm_module  # noqa: E402
from benchmarks.results import publish  # noqa: E402
from tests.batch_stub import serve_in_subprocess  # noqa: E402

N = int(os.environ.get("BENCH_BATCH_REQUESTS", 3000))
POLL_S = 0.5
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
FILLER = "The agent reads the file, checks the owner and then decides what to do next. " * 25  # ~2 KB


def requests_for(provider: str, api_base: str) -> list[Request]:
    endpoint = Endpoint(name=f"{provider}-batch", model=f"{provider}/bench-batch", api_base=api_base, batch=True,
                        api_key_env="AURA_BENCH_CRED", params={"temperature": 0.0, "max_tokens": 256},
                        price={"input_per_mtok": 2.0, "output_per_mtok": 8.0})
    return [Request(item_id=f"r{i:05d}", endpoint=endpoint, prompt_id="bench", prompt_version=1, role="bench",
                    schema=SCHEMA, messages=[{"role": "system", "content": "Answer in JSON."},
                                             {"role": "user", "content": f"{FILLER} Item {i}."}])
            for i in range(N)]


def timed(settings: dict, requests: list[Request]) -> tuple[float, float, ModelClient, list]:
    client = ModelClient(settings, "bench", progress=False)
    wall, cpu = time.perf_counter(), time.process_time()
    results = client.run(requests)
    return time.perf_counter() - wall, time.process_time() - cpu, client, results


def main() -> None:
    os.environ["AURA_BENCH_CRED"] = "bench-credential-0000"
    # Imports are paid once per job, not per batch: measured apart and kept out of the timings.
    imports = {}
    for name, load in (("litellm", litellm_module), ("openai", lambda: __import__("openai")),
                       ("anthropic", lambda: __import__("anthropic")),
                       ("google-genai", lambda: __import__("google.genai"))):
        start = time.perf_counter()
        load()
        imports[name] = round(time.perf_counter() - start, 2)
    ports = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve_in_subprocess, args=(ports, 1), daemon=True)
    server.start()
    api_base = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    report = {"requests_per_provider": N, "batch_poll_s": POLL_S, "stub_polls_before_end": 1,
              "import_s": imports}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for provider in ("openai", "anthropic", "gemini"):
                settings = {"cache": f"{tmp}/{provider}.sqlite", "replay": False, "concurrency": {"default": 16},
                            "max_retries": 2, "backoff_s": 0.2, "timeout_s": 120, "batch_poll_s": POLL_S}
                requests = requests_for(provider, api_base)
                wall, cpu, client, results = timed(settings, requests)
                hit_wall, _, _, hits = timed(settings, requests)
                replay_wall, _, replay, _ = timed({**settings, "replay": True}, requests)
                report[provider] = {
                    "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                    "polling_s": POLL_S,  # one poll interval of that wall time is the stub's "processing"
                    "ms_per_request_excluding_polls": round(1000 * (wall - POLL_S) / N, 3),
                    "ok": sum(r.status == "ok" for r in results), "calls_sent": client.calls_made,
                    "cache_hit_rerun_s": round(hit_wall, 2), "rerun_hits": sum(r.cache_hit for r in hits),
                    "replay_s": round(replay_wall, 2), "replay_calls": replay.calls_made,
                    "cost_usd": round(sum(r.cost_usd or 0 for r in results), 6)}
    finally:
        server.terminate()
    publish("batch", report)


if __name__ == "__main__":
    main()
