"""The failure policy under injected faults: requests through the model module against the
test suite's stub, 20% of whose answers are a fault (500, a hang past the timeout, a body that
is not JSON, a dropped connection, a 429 with Retry-After). Reports requests, calls sent,
retries, failures, rows present and the wall time spent waiting on rate limits.
Writes benchmarks/out/faults.json.
"""

import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "dummy-key-for-benchmarks")

from aura_eval.llm import Endpoint, Request  # noqa: E402
from aura_eval.llm.client import ModelClient  # noqa: E402
from benchmarks.results import publish  # noqa: E402
from tests.stub_server import StubServer  # noqa: E402

N = int(os.environ.get("BENCH_FAULT_REQUESTS", 500))
FAULTS = ["500", "timeout", "garbled", "drop", "429"]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def main() -> None:
    rng = random.Random(7)
    with StubServer() as stub, tempfile.TemporaryDirectory() as tmp:
        stub.state.default = lambda: rng.choice(FAULTS) if rng.random() < 0.2 else "ok"
        stub.state.slow_s, stub.state.retry_after_s, stub.state.latency_s = 1.5, 1.0, 0.02
        settings = {"cache": f"{tmp}/cache.sqlite", "replay": False, "concurrency": {"default": 16},
                    "max_retries": 5, "backoff_s": 0.2, "timeout_s": 1.0, "max_wait_s": 60}
        endpoint = Endpoint(name="stub", model="openai/stub", params={"temperature": 0.0}, api_base=stub.api_base)
        requests = [Request(item_id=f"r{i:04d}", endpoint=endpoint, prompt_id="bench", prompt_version=1,
                            role="bench", schema=SCHEMA, messages=[{"role": "user", "content": f"q{i}"}])
                    for i in range(N)]
        client = ModelClient(settings, "faults", progress=False)
        start = time.perf_counter()
        results = client.run(requests)
        wall = time.perf_counter() - start
        statuses = [r.status for r in results]
        publish("faults", {
            "requests": N, "injected_fault_share": 0.2, "rows_present": len(results),
            "calls_sent": client.calls_made, "retries": client.calls_made - N,
            "ok": statuses.count("ok"), "unparseable": statuses.count("unparseable"),
            "failed": statuses.count("failed"), "wait_s_total": round(sum(r.wait_s for r in results), 1),
            "requests_that_waited": sum(r.wait_s > 0 for r in results), "wall_s": round(wall, 1)})


if __name__ == "__main__":
    main()
