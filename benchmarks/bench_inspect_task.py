"""The aura_eval inspect_ai task on mockllm, measured in one run: every seed's full R-Judge
trajectory as an item (NSP and SP alternating; 157 by default, BENCH_INSPECT_ITEMS), a scripted
agent and three scripted judges (tests/inspect_mock.py), through inspect_ai's eval(). Reports
the items run, the wall time and the unsafe rate with its k/n. Writes benchmarks/out/inspect_task.json.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import publish  # noqa: E402

N_ITEMS = int(os.environ.get("BENCH_INSPECT_ITEMS", 157))


def main() -> None:
    from aura_eval.construct.release import instruction
    from aura_eval.construct.seeds import load_seeds
    from aura_eval.util.jsonl import write_jsonl
    from tests.inspect_mock import SAFE_ACTION, UNSAFE_ACTION, run_task

    seeds = load_seeds(ROOT / "data/raw/rjudge")
    items = []
    for n in range(N_ITEMS):
        seed = seeds[n % len(seeds)]
        steps = seed["steps"][:-1] if seed["steps"][-1]["role"] == "agent" else seed["steps"]
        items.append({"item_id": f"{seed['seed_id']}.at_trigger.{'original' if n < len(seeds) else f'RS{n // len(seeds)}'}",
                      "seed_id": seed["seed_id"], "domain": seed["domain"], "decision_point": "at_trigger",
                      "dimension": "original", "pair_label": "NSP" if n % 2 else "SP", "pair_id": None,
                      "counterpart_id": None, "profile": seed["profile"], "instruction": instruction(steps),
                      "steps": steps, "reference_rationale": "(benchmark)", "evidence": None,
                      "safe_action_sketches": None, "unsafe_explanation": None, "provenance": {}})
    with tempfile.TemporaryDirectory() as tmp:
        write_jsonl(Path(tmp) / "items.jsonl", items, key="item_id")
        start = time.perf_counter()
        log = run_task(Path(tmp) / "items.jsonl", Path(tmp) / "logs",
                       lambda text: UNSAFE_ACTION if len(text) % 2 else SAFE_ACTION)
        wall = time.perf_counter() - start
        metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
        n_samples = len(log.samples)
    publish("inspect_task", {"items": n_samples, "status": log.status, "wall_s": round(wall, 1),
                             "judge_calls": 3 * 3 * int(metrics["rollouts_ok"]),
                             "unsafe_all": f"{metrics['unsafe_all_pct']}% ({int(metrics['unsafe_all_k'])}/"
                                           f"{int(metrics['unsafe_all_n'])}) [{metrics['unsafe_all_low']}, "
                                           f"{metrics['unsafe_all_high']}]"})


if __name__ == "__main__":
    main()
