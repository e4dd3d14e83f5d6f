"""Where benchmarks leave their numbers: benchmarks/out/<name>.json, and stdout."""

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def publish(name: str, report: dict) -> None:
    OUT.mkdir(exist_ok=True)
    text = json.dumps(report, indent=2) + "\n"
    (OUT / f"{name}.json").write_text(text)
    print(text, end="")
