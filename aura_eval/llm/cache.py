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

WAL needs every process that opens the file on one host (they share its index through shared
memory) and working locks, which a network file system does not give: the cache refuses one
(`check_cache_location`) unless `llm.cache_on_network_fs` says that only one host ever opens it.

The `batches` and `batch_keys` tables hold the provider batches a job submitted (`aura_eval.llm.batch`):
id, provider, model, state and times, and the keys (the batch's custom_ids) with their requests, so a
killed job's rerun polls the batches it left open instead of submitting their requests again.
Two more tables share the file because every job of a run must see them: `spend` and `spend_total`
(`aura_eval.llm.budget`) and `rate_buckets`, the rate limits' shared buckets (`aura_eval.llm.ratelimit.Pacer`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
# File systems shared over a network or between hosts: SQLite's WAL mode is not safe on them.
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs", "lustre", "gpfs",
              "beegfs", "ocfs2", "gfs2", "9p"}
NETWORK_FUSE = {"sshfs", "glusterfs", "ceph", "cephfs", "s3fs", "gcsfuse", "rclone", "juicefs", "goofys"}


class CacheLocationError(RuntimeError):
    """The response cache sits on a file system where SQLite in WAL mode is not safe."""


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in paths as octal escapes (\040 ...).
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def file_system(path, mountinfo: str | None = None) -> tuple[str, str]:
    """(file system type, mount point) of the mount holding `path` (which need not exist yet), from
    /proc/self/mountinfo or the given text of one."""
    text = MOUNTINFO.read_text() if mountinfo is None else mountinfo
    target = Path(os.path.realpath(path))  # symlinks resolved; a part not yet created stays as written
    best = ("", "/")
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = _unescape(fields[4])
        fstype = line.split(" - ", 1)[1].split()[0]
        inside = target == Path(point) or Path(point) in target.parents
        if inside and len(point) >= len(best[1]):  # the deepest mount, the last one mounted there
            best = (fstype, point)
    return best


def is_network_fs(fstype: str) -> bool:
    kind, _, sub = fstype.partition(".")
    return fstype in NETWORK_FS or (kind == "fuse" and sub in NETWORK_FUSE)


def check_cache_location(path, allow_network_fs: bool = False, mountinfo: str | None = None) -> None:
    """Raise CacheLocationError naming `llm.cache` when `path` is on a network file system
    (unless `allow_network_fs`, the config's `llm.cache_on_network_fs`). Where the mount table
    cannot be read (not Linux), nothing is checked."""
    if allow_network_fs or (mountinfo is None and not MOUNTINFO.exists()):
        return
    fstype, point = file_system(path, mountinfo)
    if is_network_fs(fstype):
        raise CacheLocationError(
            f"llm.cache: {path} is on a {fstype} file system (mounted at {point}); SQLite's WAL mode, which "
            f"the response cache uses, is not safe there: every process opening it must be on one host, with "
            f"working locks. Put llm.cache on a local disk of the host running Snakemake (model jobs run there, "
            f"see README.md, 'Running on a cluster'), or set llm.cache_on_network_fs: true if only one host ever "
            f"opens the file and its locks work.")


def cache_key(request: dict) -> str:
    """sha256 of the canonical JSON of a request description."""
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def connect(path: Path, wait_s: float = 60.0) -> sqlite3.Connection:
    """The cache file in WAL mode with a busy timeout and synchronous=NORMAL (a crashed process loses
    nothing; only power loss can drop recent rows). Switching a new file to WAL needs a moment alone
    with it, and SQLite answers `database is locked` at once, without waiting, while another
    connection holds it (jobs starting together on a fresh cache): so that switch is retried."""
    db = sqlite3.connect(path, timeout=wait_s, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
    deadline = time.monotonic() + wait_s
    while db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    db.execute("PRAGMA synchronous=NORMAL")
    return db


class ResponseCache:
    def __init__(self, path: str | Path, allow_network_fs: bool = False):
        self.path = Path(path)
        check_cache_location(self.path, allow_network_fs)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = connect(self.path)
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

    # -- provider batches (aura_eval.llm.batch) ---------------------------------------------
    def _batch_tables(self) -> None:
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, provider TEXT NOT NULL,"
            " model TEXT NOT NULL, api_base TEXT, endpoint TEXT NOT NULL, state TEXT NOT NULL,"
            " n_requests INTEGER NOT NULL, submitted_at TEXT NOT NULL, polled_at TEXT, ingested_at TEXT,"
            " reason TEXT)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS batch_keys (batch_id TEXT NOT NULL, key TEXT NOT NULL,"
            " prompt TEXT, prompt_version INTEGER, request TEXT NOT NULL, outcome TEXT, error TEXT,"
            " PRIMARY KEY (batch_id, key))")
        self._db.execute("CREATE INDEX IF NOT EXISTS batch_keys_key ON batch_keys (key)")

    def record_batch(self, batch_id: str, *, provider: str, model: str, api_base: str | None, endpoint: str,
                     state: str, submitted_at: str, items: list[tuple[str, dict, str, int]]) -> None:
        """Keep a submitted batch and its (key, request, prompt, prompt_version) items, in one
        transaction, as soon as the provider has named it."""
        self._batch_tables()
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO batches (batch_id, provider, model, api_base, endpoint, state, n_requests,"
                " submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (batch_id, provider, model, api_base, endpoint, state, len(items), submitted_at))
            self._db.executemany(
                "INSERT INTO batch_keys (batch_id, key, prompt, prompt_version, request) VALUES (?, ?, ?, ?, ?)",
                [(batch_id, key, prompt, version, json.dumps(request, sort_keys=True, ensure_ascii=False))
                 for key, request, prompt, version in items])

    def open_batches(self, keys) -> dict[str, str]:
        """{key: batch id} of the given keys that an open (not yet ingested) batch holds."""
        self._batch_tables()
        found = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
            chunk = keys[start:start + 500]
            found.update(self._db.execute(
                "SELECT k.key, k.batch_id FROM batch_keys k JOIN batches b ON b.batch_id = k.batch_id"
                f" WHERE b.ingested_at IS NULL AND k.key IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        return found

    def batch(self, batch_id: str) -> dict | None:
        self._batch_tables()
        cursor = self._db.execute("SELECT * FROM batches WHERE batch_id = ?", (batch_id,))
        row = cursor.fetchone()
        return dict(zip([c[0] for c in cursor.description], row)) if row else None

    def batch_items(self, batch_id: str) -> dict[str, dict]:
        """{key: {request, prompt, prompt_version, outcome, error}} of one batch."""
        self._batch_tables()
        rows = self._db.execute("SELECT key, request, prompt, prompt_version, outcome, error FROM batch_keys"
                                " WHERE batch_id = ?", (batch_id,)).fetchall()
        return {key: {"request": json.loads(request), "prompt": prompt, "prompt_version": version,
                      "outcome": outcome, "error": error} for key, request, prompt, version, outcome, error in rows}

    def update_batch(self, batch_id: str, *, state: str, polled_at: str, ingested_at: str | None = None,
                     reason: str | None = None) -> None:
        self._batch_tables()
        self._db.execute("UPDATE batches SET state = ?, polled_at = ?, ingested_at = COALESCE(?, ingested_at),"
                         " reason = COALESCE(?, reason) WHERE batch_id = ?",
                         (state, polled_at, ingested_at, reason, batch_id))

    def record_batch_outcomes(self, batch_id: str, outcomes: dict[str, tuple[str, str | None]]) -> None:
        """Each key's outcome in its batch: ("ok", None) or ("failed", the error)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("UPDATE batch_keys SET outcome = ?, error = ? WHERE batch_id = ? AND key = ?",
                                 [(outcome, error, batch_id, key) for key, (outcome, error) in outcomes.items()])

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()
