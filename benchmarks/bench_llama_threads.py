"""The embedded model's llama.cpp threads: wall and CPU seconds of one 300-token answer of
SmolLM2-135M on 1 and on 2 threads, alternating (BENCH_REPEATS rounds, 2). Run it quiet, then
beside other work: llama.cpp's threads spin-wait on each other, so two threads on a shared core
can be several times slower than one (docs/measurements.md, row 52). Writes
benchmarks/out/llama_threads.json."""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", 2))
PROMPT = "Write a long story about a robot. " * 20


def one(threads: int) -> dict:
    from llama_cpp import Llama

    from aura_eval.llm import local

    model = Llama(model_path=str(local.model_path("smollm2-135m-instruct")), n_ctx=2048, n_threads=threads,
                  verbose=False)
    wall, cpu = time.perf_counter(), time.process_time()
    out = model.create_chat_completion(messages=[{"role": "user", "content": PROMPT}], max_tokens=300,
                                       temperature=0.0, seed=0)
    return {"threads": threads, "wall_s": round(time.perf_counter() - wall, 2),
            "cpu_s": round(time.process_time() - cpu, 2), "tokens": out["usage"]["completion_tokens"],
            "load": os.getloadavg()[0]}


def main():
    runs = [one(n) for _ in range(REPEATS) for n in (1, 2)]
    publish("llama_threads", {"runs": runs})


if __name__ == "__main__":
    main()
