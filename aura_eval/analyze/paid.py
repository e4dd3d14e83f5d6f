"""What a run has already paid: the answers in its response cache that its own requests key.

The forecast renders a run's requests with the stages' own builders and keys them as the model
module does (`client.describe`, `cache.cache_key`), so an answer the cache holds is one the run
will not pay again, and the cost recorded with it (at its first call) is what it paid. The cache
is read, never written (a running job may be writing it: SQLite's WAL lets both go on).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aura_eval.llm.cache import CacheError, connect_readonly, verified

_CHUNK = 500  # keys per SELECT (SQLite's limit on bound parameters is 32,766 in current builds)


@dataclass(frozen=True)
class PaidAnswer:
    tokens_in: int | None
    tokens_out: int | None
    tokens_reasoning: int | None
    cost_usd: float | None
    called_at: str | None
    latency_s: float | None


class PaidAnswers:
    """The cache file's answers, looked up by key; an absent or unreadable file holds none (and says why)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        self.db, self.problem = None, None
        if self.path is not None and self.path.is_file():
            try:
                self.db = connect_readonly(self.path, purpose="the forecast")
            except CacheError as err:
                self.problem = str(err)

    def lookup(self, keys) -> dict[str, PaidAnswer]:
        keys = list(keys)
        found: dict[str, PaidAnswer] = {}
        if self.db is None:
            return found
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(responses)")}
        checksum = "checksum" if "checksum" in columns else "NULL"  # a file from before checksums
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start:start + _CHUNK]
            rows = self.db.execute(f"SELECT key, CAST(response AS BLOB), {checksum} FROM responses WHERE key IN "
                                   f"({','.join('?' * len(chunk))})", chunk).fetchall()
            for key, response, stored in rows:
                record, _ = verified(response, stored)
                if record is None:  # damaged: the run asks it again
                    continue
                found[key] = PaidAnswer(record.get("tokens_in"), record.get("tokens_out"),
                                        record.get("tokens_reasoning"), record.get("cost_usd"),
                                        (record.get("provenance") or {}).get("called_at"), record.get("latency_s"))
        return found

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


def call_log_answers(path: Path) -> dict[str, PaidAnswer]:
    """{key prefix: answer} of a finished job's call log (a stage without a request builder: its
    requests are drawn inside the job), the answers it used with the cost of their first call."""
    out: dict[str, PaidAnswer] = {}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("status") != "failed" and row.get("key"):
            out.setdefault(row["key"], PaidAnswer(row.get("tokens_in"), row.get("tokens_out"),
                                                  row.get("tokens_reasoning"), row.get("cost_usd"),
                                                  row.get("called_at"), row.get("first_latency_s")))
    return out
