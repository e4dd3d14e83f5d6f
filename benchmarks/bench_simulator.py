"""Calls per second of the planted-truth simulator (aura_sim), measured in one run:

- through ModelClient's in-process path (what the workflow uses: no litellm, no cache);
- through litellm's custom-provider path (`litellm.completion(model="aura_sim/...")`);
- the import cost of the client without litellm and with it.
Requests are judge requests of the shape the workflow sends (a rendered prefix of about
2 KB and an agent's action). Writes benchmarks/out/simulator.json.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402

N_CALLS = int(os.environ.get("BENCH_CALLS", 20000))
N_LITELLM = int(os.environ.get("BENCH_LITELLM_CALLS", 2000))


def import_seconds(statement: str) -> float:
    code = f"import time; t = time.process_time(); {statement}; print(time.process_time() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.strip())


def judge_requests(n: int):
    from aura_eval.llm.types import Endpoint, Request
    from aura_eval.util.prompts import load_prompt

    prompt = load_prompt("judge_action_safety")
    endpoint = Endpoint(name="j", model="aura_sim/sim-judge-openai", vendor="openai")
    context = "\n".join(f"[Environment]: observation {k} " + "x" * 120 for k in range(14))
    return [Request(item_id=f"item-{i}", endpoint=endpoint, prompt_id=prompt.id, prompt_version=prompt.version,
                    role="judge:action_safety", schema=prompt.schema,
                    messages=prompt.messages(context=context, rationale="r", action_type="A0",
                                             action=f"Simulated action {i} (planted type A0, planted safety "
                                                    f"Unsafe; vendor openai)."))
            for i in range(n)]


def main():
    import aura_eval.simulator  # noqa: F401  (registers the aura_sim responder)
    from aura_eval.llm.client import ModelClient, litellm_module

    report = {"calls": N_CALLS,
              "import_client_s": round(import_seconds("import aura_eval.llm.client"), 2),
              "import_client_and_litellm_s": round(import_seconds(
                  "import aura_eval.llm.client as c; c.litellm_module()"), 2)}
    requests = judge_requests(N_CALLS)
    with tempfile.TemporaryDirectory() as tmp:
        client = ModelClient({"cache": f"{tmp}/c.sqlite", "simulation": {}}, stage="bench", progress=False)
        cpu = time.process_time()
        results = client.run(requests)
        cpu = time.process_time() - cpu
    assert all(r.status == "ok" for r in results)
    report["client_calls_per_s"] = round(N_CALLS / cpu)
    report["client_ms_per_call"] = round(1000 * cpu / N_CALLS, 3)

    litellm = litellm_module()
    sample = requests[:N_LITELLM]
    cpu = time.process_time()
    for req in sample:
        litellm.completion(model=req.endpoint.model, messages=req.messages,
                           response_format={"type": "json_schema",
                                            "json_schema": {"name": req.prompt_id, "schema": req.schema}})
    cpu = time.process_time() - cpu
    report["litellm_calls"] = N_LITELLM
    report["litellm_calls_per_s"] = round(N_LITELLM / cpu)
    report["litellm_over_client"] = round(report["client_calls_per_s"] / report["litellm_calls_per_s"], 1)
    publish("simulator", report)


if __name__ == "__main__":
    main()
