"""The persistent, content-addressed response cache (one SQLite file).

The key hashes everything that determines a response: model, endpoint, messages,
every sampling parameter and the sample index. SQLite in WAL mode with a busy
timeout lets several Snakemake jobs read and write the same file at once; each
response is committed as soon as it arrives, so a crash loses only calls in flight.

A response record is `{content, finish_reason, tokens_in, tokens_out, cost_usd, latency_s,
provenance}`; `provenance` (response id, system fingerprint, the model the provider named,
litellm version, prompt id and version, sampling parameters, the UTC time of the first call)
is absent from rows written before it was recorded, and readers treat it as optional.
The `misses` table keeps the description of every request the cache could not answer (a
replay-mode miss, a failed call), so `python -m aura_eval cache explain` can say how it
differs from the nearest cached request.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path


def cache_key(request: dict) -> str:
    """sha256 of the canonical JSON of a request description."""
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        # WAL with synchronous=NORMAL survives a crashed process; only power loss can drop recent rows.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses ("
            " key TEXT PRIMARY KEY, model TEXT NOT NULL,"
            " request TEXT NOT NULL, response TEXT NOT NULL)"
        )

    def get(self, key: str) -> dict | None:
        row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, request: dict, response: dict) -> None:
        # First writer wins: a response once stored is the reproduction.
        self._db.execute(
            "INSERT OR IGNORE INTO responses (key, model, request, response) VALUES (?, ?, ?, ?)",
            (key, request.get("model", ""), json.dumps(request, sort_keys=True, ensure_ascii=False),
             json.dumps(response, sort_keys=True, ensure_ascii=False)),
        )

    def put_first(self, key: str, request: dict, response: dict) -> dict:
        """Store `response` unless the key is already held, and return the stored record: when
        two jobs send the same request at once, both use the first one stored (so a replay,
        which reads that one, writes the same rows)."""
        self.put(key, request, response)
        return self.get(key) or response

    def record_miss(self, key: str, request: dict, *, prompt: str, stage: str, item_id: str, reason: str) -> None:
        """Keep the description of a request the cache could not answer (the last miss per key)."""
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS misses (key TEXT PRIMARY KEY, model TEXT NOT NULL, prompt TEXT,"
            " stage TEXT, item_id TEXT, reason TEXT, request TEXT NOT NULL)")
        self._db.execute(
            "INSERT OR REPLACE INTO misses (key, model, prompt, stage, item_id, reason, request)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, request.get("model", ""), prompt, stage, item_id, reason,
             json.dumps(request, sort_keys=True, ensure_ascii=False)))

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()
