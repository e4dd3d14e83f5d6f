"""Checksums of a run's results that two runs of the same inputs must share.

`stable_digests` hashes every file under results/ except those named in
aura_eval.vocab.VOLATILE_FILES, and hashes call logs without the fields named in
VOLATILE_FIELDS (latency, cache hit). Two runs from the same cache give the same digests.

    python -m aura_eval.tools.digest [folder holding results/]   # one "sha256  path" line per file
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from aura_eval.vocab import VOLATILE_FIELDS, VOLATILE_FILES


def _stable_bytes(path: Path, rel: str) -> bytes:
    fields = next((f for prefix, f in VOLATILE_FIELDS.items() if rel.startswith(prefix)), None)
    if fields is None:
        return path.read_bytes()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return "".join(json.dumps({k: v for k, v in row.items() if k not in fields}, ensure_ascii=False) + "\n"
                   for row in rows).encode()


def stable_digests(root: str | Path = ".") -> dict[str, str]:
    """{path under root: sha256} for every stable file under root/results/."""
    root = Path(root)
    out = {}
    for path in sorted((root / "results").rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(VOLATILE_FILES):
            out[rel] = hashlib.sha256(_stable_bytes(path, rel)).hexdigest()
    return out


if __name__ == "__main__":
    for rel, digest in stable_digests(sys.argv[1] if len(sys.argv) > 1 else ".").items():
        print(f"{digest}  {rel}")
