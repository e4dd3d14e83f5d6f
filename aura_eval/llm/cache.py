"""The persistent, content-addressed response cache: one SQLite file in WAL mode that every job of
a run shares, keyed by the hash of everything that determines a response (`cache_key`), each
response committed as it arrives. The same file holds the leases, the misses, the provider
batches, the budget's spend and the rate limits' buckets, because every job must see them. Damage
is named, checked and never used (`CacheError`, `checksum`), and a replay opens it read-only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

MOUNTINFO = Path("/proc/self/mountinfo")
# File systems shared over a network or between hosts: SQLite's WAL mode is not safe on them.
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs", "lustre", "gpfs",
              "beegfs", "ocfs2", "gfs2", "9p"}
NETWORK_FUSE = {"sshfs", "glusterfs", "ceph", "cephfs", "s3fs", "gcsfuse", "rclone", "juicefs", "goofys"}


class CacheLocationError(RuntimeError):
    """The response cache sits on a file system where SQLite in WAL mode is not safe."""


class CacheError(RuntimeError):
    """The response cache file cannot be used as it is. The message names the file, says what is
    wrong and what to do; `damaged` is true when the file itself is damaged (`cache repair` mends it)."""

    def __init__(self, message: str, path=None, damaged: bool = False):
        super().__init__(message)
        self.path, self.damaged = path, damaged


# A response record is `{content, finish_reason, tokens_in, tokens_out, cost_usd, latency_s, provenance}`
# (`wire.response_record`); `provenance` (response id, system fingerprint, the model the provider
# named, litellm version, prompt id and version, sampling parameters, the UTC time of the first call)
# is absent from rows written before it was recorded, and readers treat it as optional. Every row
# carries the sha256 of its response (`checksum`, added by ALTER TABLE on a file from before it; its
# old rows, with none, are accepted when their response parses), verified on each read: a row that
# fails is not used, counted (`damaged`) and replaced by the next answer.
RESPONSES_TABLE = ("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
                   " request TEXT NOT NULL, response TEXT NOT NULL, checksum TEXT)")
# A request being sent: who sends it (host, pid, the process's start time) and when it last said so.
LEASES_TABLE = ("CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL,"
                " started REAL NOT NULL, claimed_at REAL NOT NULL, renewed_at REAL NOT NULL)")
LEASE_RENEW_S = 5.0  # how often an owner renews its leases
LEASE_STALE_S = 30.0  # a lease not renewed for this long is taken over (its owner hung or died elsewhere)
# Lone surrogates: what a JSON body's invalid escape (e.g. "\ud800") becomes in a Python string.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Owner:
    """Who holds a lease: a process, named by host, pid and start time (a pid is reused, a start time
    with it is not)."""

    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), round(psutil.Process().create_time(), 2))

    def gone(self) -> bool:
        """Whether this owner's process has ended (only knowable on this host; elsewhere False, and
        the lease's age decides)."""
        if self.host != socket.gethostname():
            return False
        try:
            return round(psutil.Process(self.pid).create_time(), 2) != self.started
        except psutil.Error:
            return True


class LeaseRenewer(threading.Thread):
    def __init__(self, path, keys, owner: Owner):
        super().__init__(daemon=True, name="lease-renewer")
        self.path, self.keys, self.owner = path, keys, owner
        self.done = threading.Event()
        self.start()

    def run(self) -> None:
        db = None
        while not self.done.wait(LEASE_RENEW_S):
            keys = list(self.keys())
            if not keys:
                continue
            try:
                db = db or connect(self.path)
                for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
                    chunk = keys[start:start + 500]
                    db.execute(f"UPDATE leases SET renewed_at = ? WHERE host = ? AND pid = ? AND key IN"
                               f" ({','.join('?' * len(chunk))})", (time.time(), self.owner.host, self.owner.pid,
                                                                     *chunk))
            except sqlite3.Error:  # a missed renewal only shortens a lease; the job's next write names the problem
                pass
        if db is not None:
            db.close()

    def stop(self) -> None:
        self.done.set()


def valid_unicode(record):
    """(record, n): the record with every lone surrogate in its strings (invalid Unicode, which cannot be
    stored as UTF-8) replaced by U+FFFD, and how many were replaced."""
    count = 0

    def fix(value):
        nonlocal count
        if isinstance(value, str):
            fixed, n = _SURROGATE.subn("\ufffd", value)
            count += n
            return fixed
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return fix(record), count


def repair_command(path) -> str:
    return f"python -m aura_eval cache repair {path}"


def damaged_error(path, what: str) -> CacheError:
    """The one message for a damaged cache file: which file, what is wrong, what to do."""
    return CacheError(
        f"response cache {path} is damaged ({what}). Nothing more is read from it or sent. With no run "
        f"using the file, run `{repair_command(path)}`: it keeps every intact answer and the file's other "
        f"tables, moves the damaged file aside and says how many answers were lost; the rerun then pays only "
        f"for those. Do not delete the file or its -wal: that loses every answer it holds.", path, damaged=True)


def cache_error(path, err: BaseException) -> CacheError:
    """A CacheError for an SQLite (or decoding) error raised by the cache file at `path`: locked, not
    writable, a failing disk, else damaged."""
    text = str(err) or type(err).__name__
    low = text.lower()
    name = Path(path).name
    if "locked" in low or "busy" in low:
        return CacheError(f"response cache {path} stayed locked by another process past the wait ({text}). Is "
                          f"another run or a `cache repair` using it? Wait for it, or stop it, and rerun.", path)
    if "readonly" in low or "read-only" in low or "unable to open" in low or "permission" in low \
            or "cantopen" in low:
        return CacheError(f"response cache {path} cannot be opened for writing ({text}). SQLite writes the file "
                          f"and, beside it, {name}-wal and {name}-shm: the file and its folder must be writable by "
                          f"this user. A replay (llm.replay: true) only reads the file.", path)
    if "disk i/o" in low or "full" in low:
        return CacheError(f"response cache {path}: the disk failed or is full ({text}). Free space or move "
                          f"llm.cache to a healthy local disk, then rerun: every answer committed is kept.", path)
    return damaged_error(path, text)


def names_the_file(method):
    """Turn every SQLite error a cache method raises into a CacheError naming the file (`self.path`)."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except CacheError:
            raise
        except (sqlite3.Error, json.JSONDecodeError) as err:
            raise cache_error(self.path, err) from None
    return guarded


def checksum(response: bytes) -> str:
    """The sha256 of a stored response's bytes (its JSON, UTF-8): what each row carries."""
    return hashlib.sha256(response).hexdigest()


def verified(response: bytes | None, stored_checksum: str | None) -> tuple[dict | None, str | None]:
    """(record, None) for a stored response that is intact, else (None, why): its checksum differs,
    or (a row from before checksums) its bytes are not a JSON object."""
    if response is None:
        return None, "no response stored"
    if stored_checksum is not None and checksum(response) != stored_checksum:
        return None, "checksum mismatch"
    try:
        record = json.loads(response.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "not UTF-8 JSON"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    return record, None


def _intact(response, stored_checksum) -> int:
    # SQL function: whether a stored row may stay (put replaces one that is not)
    return int(verified(response, stored_checksum)[1] is None)


def side_files(path) -> tuple[Path, Path]:
    """The `-wal` and `-shm` files SQLite keeps beside `path`."""
    path = Path(path)
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def has_wal_content(path) -> bool:
    """Whether a `-wal` beside `path` may hold committed answers (it exists and is not empty)."""
    wal = side_files(path)[0]
    try:
        return wal.stat().st_size > 0
    except FileNotFoundError:
        return False


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


# WAL needs every process that opens the file on one host (they share its index through shared
# memory) and working locks, which a network file system does not give: the cache refuses one
# unless `llm.cache_on_network_fs` says that only one host ever opens it.
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


def connect_readonly(path: Path, wait_s: float = 60.0, purpose: str = "replay mode (llm.replay: true)"):
    """The cache file opened read-only (a `mode=ro` URI): nothing is written, the journal mode is left
    as it is. Without a `-wal` holding answers the file is opened `immutable` too, so SQLite creates no
    `-wal` or `-shm` beside it and a file in a folder this user cannot write still reads; a `-wal` that
    holds answers is read with it, and one that cannot be read is refused (the answers it holds would
    be missed). Raises CacheError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CacheError(f"{purpose} reads the response cache of a finished run, and there is no file {path} "
                         f"(llm.cache): is the path mistyped? Point llm.cache at the run's cache (an unpacked "
                         f"archive's is under packed/cache/).", path)
    wal = side_files(path)[0]
    if os.path.lexists(wal) and not (wal.is_file() and os.access(wal, os.R_OK)):
        raise CacheError(f"{purpose}: {wal} exists but cannot be read: it may hold answers a run committed "
                         f"and never folded into {path.name}, so reading without it could miss them. Make it "
                         f"readable by this user (and {path.name}-shm beside it), or run once without replay "
                         f"on a writable copy to fold it in. Never delete a -wal: it holds committed answers.",
                         path)
    query = "mode=ro" if has_wal_content(path) else "mode=ro&immutable=1"
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=wait_s,
                             isolation_level=None)
        db.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
        db.execute("PRAGMA query_only=ON")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the schema: damage shows here
    except sqlite3.Error as err:
        if has_wal_content(path) and ("unable to open" in str(err) or "readonly" in str(err)):
            raise CacheError(f"{purpose}: {path}'s -wal holds answers a run committed, and reading it needs "
                             f"{path.name}-shm beside it, which cannot be created or opened ({err}). Make the "
                             f"folder writable, or run once without replay on a writable copy to fold the -wal "
                             f"in.", path) from None
        raise cache_error(path, err) from None
    return db


def _columns(db, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})").fetchall()]


class ResponseCache:
    """The response cache of one job. `readonly` (a replay) opens the file read-only and writes
    nothing: `put` refuses, `record_miss` and the batch records are skipped. Every SQLite error
    becomes a CacheError naming the file. `damaged` maps each key whose row failed its checksum in
    this job to why: `get` answered None for it, and `put` replaces it."""

    def __init__(self, path: str | Path, allow_network_fs: bool = False, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self.damaged: dict[str, str] = {}
        check_cache_location(self.path, allow_network_fs)
        self._open()

    @names_the_file
    def _open(self) -> None:
        if self.readonly:
            self._db = connect_readonly(self.path)
            columns = _columns(self._db, "responses")
            if not columns:
                raise CacheError(f"replay mode (llm.replay: true): {self.path} holds no responses table: it is "
                                 f"not a response cache (is llm.cache mistyped?)", self.path)
            self._checksum_column = "checksum" if "checksum" in columns else "NULL"
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = connect(self.path)
            self._db.execute(RESPONSES_TABLE)
            self._db.execute(LEASES_TABLE)
            if "checksum" not in _columns(self._db, "responses"):  # a file from before checksums
                try:
                    self._db.execute("ALTER TABLE responses ADD COLUMN checksum TEXT")
                except sqlite3.OperationalError as err:  # another job added it first
                    if "duplicate column" not in str(err):
                        raise
            self._checksum_column = "checksum"
            self._db.create_function("aura_intact", 2, _intact, deterministic=True)

    @names_the_file
    def get(self, key: str) -> dict | None:
        """The stored record of `key`, or None: not held, or its row failed its checksum (then
        `damaged[key]` says why, and the next `put` of the key replaces it)."""
        row = self._db.execute(f"SELECT CAST(response AS BLOB), {self._checksum_column} FROM responses"
                               f" WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        record, why = verified(row[0], row[1])
        if why is not None:
            self.damaged[key] = why
        return record

    @names_the_file
    def put(self, key: str, request: dict, response: dict) -> None:
        """Store a response with its checksum. First writer wins: a response once stored is the
        reproduction, unless its row is damaged (fails its checksum), which this one replaces."""
        if self.readonly:
            raise CacheError(f"response cache {self.path} is open read-only (replay): nothing is stored", self.path)
        text = json.dumps(response, sort_keys=True, ensure_ascii=False)
        self._db.execute(
            "INSERT INTO responses (key, model, request, response, checksum) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET model = excluded.model, request = excluded.request,"
            " response = excluded.response, checksum = excluded.checksum"
            " WHERE NOT aura_intact(CAST(responses.response AS BLOB), responses.checksum)",
            (key, request.get("model", ""), json.dumps(request, sort_keys=True, ensure_ascii=False), text,
             checksum(text.encode("utf-8"))),
        )

    def put_first(self, key: str, request: dict, response: dict) -> dict:
        """Store `response` unless the key is already held, and return the stored record: when
        two jobs send the same request at once, both use the first one stored (so a replay,
        which reads that one, writes the same rows)."""
        self.put(key, request, response)
        return self.get(key) or response

    @names_the_file
    def record_miss(self, key: str, request: dict, *, prompt: str, stage: str, item_id: str, reason: str) -> None:
        """Keep the description of a request the cache could not answer (the last miss per key: a
        failed call, a refused budget), so `python -m aura_eval cache explain` can say how it differs
        from the nearest cached request; nothing when read-only (a replay writes nothing)."""
        if self.readonly:
            return
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS misses (key TEXT PRIMARY KEY, model TEXT NOT NULL, prompt TEXT,"
            " stage TEXT, item_id TEXT, reason TEXT, request TEXT NOT NULL)")
        self._db.execute(
            "INSERT OR REPLACE INTO misses (key, model, prompt, stage, item_id, reason, request)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, request.get("model", ""), prompt, stage, item_id, reason,
             json.dumps(request, sort_keys=True, ensure_ascii=False)))

    # -- leases: one sender per request across every run sharing the file ------------------
    @names_the_file
    def claim(self, key: str, owner: Owner) -> tuple[str, dict | None]:
        """In one `BEGIN IMMEDIATE` transaction: ("cached", record) when the answer is stored; ("held",
        lease) when another live owner is sending the request; else ("claimed", None), the lease now
        this owner's (taking over one whose owner is gone or silent for LEASE_STALE_S)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            record = self.get(key)  # inside this transaction (a damaged row counts as absent)
            if record is not None:
                return "cached", record
            lease = self._lease(key)
            if lease is not None and lease["owner"] != owner and self.live(lease):
                return "held", lease
            now = time.time()
            self._db.execute("INSERT OR REPLACE INTO leases (key, host, pid, started, claimed_at, renewed_at)"
                             " VALUES (?, ?, ?, ?, ?, ?)", (key, owner.host, owner.pid, owner.started, now, now))
        return "claimed", None

    def _lease(self, key: str) -> dict | None:
        row = self._db.execute("SELECT host, pid, started, claimed_at, renewed_at FROM leases WHERE key = ?",
                               (key,)).fetchone()
        if row is None:
            return None
        return {"owner": Owner(row[0], row[1], row[2]), "claimed_at": row[3], "renewed_at": row[4]}

    @staticmethod
    def live(lease: dict) -> bool:
        """Whether a lease still stands: renewed within LEASE_STALE_S and its owner not known gone."""
        return time.time() - lease["renewed_at"] < LEASE_STALE_S and not lease["owner"].gone()

    @names_the_file
    def holder(self, key: str, owner: Owner) -> dict | None:
        """The live lease another owner holds on `key`, or None (no transaction: a look, not a claim)."""
        if self.readonly:
            return None
        lease = self._lease(key)
        return lease if lease is not None and lease["owner"] != owner and self.live(lease) else None

    def renewer(self, keys, owner: Owner) -> LeaseRenewer:
        """A started thread that renews `keys()` (the leases held now) every LEASE_RENEW_S on its own
        connection, so a job whose event loop is busy (an import, a long parse) keeps its leases."""
        return LeaseRenewer(self.path, keys, owner)

    @names_the_file
    def release(self, key: str, owner: Owner) -> None:
        self._db.execute("DELETE FROM leases WHERE key = ? AND host = ? AND pid = ?", (key, owner.host, owner.pid))

    # -- provider batches (aura_eval.llm.batch) ---------------------------------------------
    # The batches a job submitted: id, provider, model, state and times, and the keys (the batch's
    # custom_ids) with their requests, so a killed job's rerun polls the batches it left open
    # instead of submitting their requests again.
    def _has_table(self, name: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (name,)).fetchone() is not None

    def _batch_tables(self) -> bool:
        """Whether the batch tables exist, creating them unless read-only."""
        if self.readonly:
            return self._has_table("batch_keys")
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
        return True

    @names_the_file
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

    @names_the_file
    def open_batches(self, keys) -> dict[str, str]:
        """{key: batch id} of the given keys that an open (not yet ingested) batch holds."""
        keys = list(keys)
        if not keys or not self._batch_tables():
            return {}
        found = {}
        for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
            chunk = keys[start:start + 500]
            found.update(self._db.execute(
                "SELECT k.key, k.batch_id FROM batch_keys k JOIN batches b ON b.batch_id = k.batch_id"
                f" WHERE b.ingested_at IS NULL AND k.key IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        return found

    @names_the_file
    def batch(self, batch_id: str) -> dict | None:
        if not self._batch_tables():
            return None
        cursor = self._db.execute("SELECT * FROM batches WHERE batch_id = ?", (batch_id,))
        row = cursor.fetchone()
        return dict(zip([c[0] for c in cursor.description], row)) if row else None

    @names_the_file
    def batch_items(self, batch_id: str) -> dict[str, dict]:
        """{key: {request, prompt, prompt_version, outcome, error}} of one batch."""
        if not self._batch_tables():
            return {}
        rows = self._db.execute("SELECT key, request, prompt, prompt_version, outcome, error FROM batch_keys"
                                " WHERE batch_id = ?", (batch_id,)).fetchall()
        return {key: {"request": json.loads(request), "prompt": prompt, "prompt_version": version,
                      "outcome": outcome, "error": error} for key, request, prompt, version, outcome, error in rows}

    @names_the_file
    def update_batch(self, batch_id: str, *, state: str, polled_at: str, ingested_at: str | None = None,
                     reason: str | None = None) -> None:
        self._batch_tables()
        self._db.execute("UPDATE batches SET state = ?, polled_at = ?, ingested_at = COALESCE(?, ingested_at),"
                         " reason = COALESCE(?, reason) WHERE batch_id = ?",
                         (state, polled_at, ingested_at, reason, batch_id))

    @names_the_file
    def record_batch_outcomes(self, batch_id: str, outcomes: dict[str, tuple[str, str | None]]) -> None:
        """Each key's outcome in its batch: ("ok", None) or ("failed", the error)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("UPDATE batch_keys SET outcome = ?, error = ? WHERE batch_id = ? AND key = ?",
                                 [(outcome, error, batch_id, key) for key, (outcome, error) in outcomes.items()])

    @names_the_file
    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()


def read_ahead(path) -> None:
    """Read the file (and its -wal) once from start to end, so that what reads it next (quick_check,
    then the jobs) finds its pages in the page cache: quick_check visits the pages in b-tree order,
    scattered over the file, which on a cold disk is ten times slower than one sequential read
    (benchmarks/bench_cache_check.py). Unreadable side files are left to SQLite to report."""
    for name in (Path(path), side_files(path)[0]):
        try:
            with open(name, "rb", buffering=0) as f:
                while f.read(1 << 20):
                    pass
        except OSError:
            pass


def fold_at_end(path) -> str | None:
    """After a run's last job (the Snakefile's `onsuccess` and `onerror`): fold the answers left in
    `<cache>-wal` into the file and empty the `-wal`, so the finished cache is one file to copy alone.

    SQLite folds the `-wal` only when the last connection closes, and not always then: two jobs
    closing at once each leave it to the other, and a writer that closes while a read-only reader
    is open leaves it to a reader that cannot. The answers are safe there (every reader reads the
    `-wal`; the next run's start folds it), but a copy of the file alone would lack them. A note
    when something was folded; a note and no error when it could not be (another run holds the
    file: its own end or the next start folds it)."""
    path = Path(path)
    if not path.is_file() or not has_wal_content(path):
        return None
    try:
        db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        try:
            busy, logged, copied = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            why = "another connection holds it" if busy or logged != copied else None
        finally:
            db.close()
    except sqlite3.Error as err:
        why = str(err)
    if why:
        return (f"response cache {path}: the answers in {path.name}-wal are not folded into the file yet "
                f"({why}); keep the -wal beside the file: the next run's start folds it")
    return f"response cache {path}: folded the run's last answers from {path.name}-wal into the file"


def check_at_start(path, *, replay: bool = False, allow_network_fs: bool = False) -> list[str]:
    """The cache file checked once before the first job (the Snakefile's `onstart`); the notes to
    print. Raises CacheLocationError for a network file system and CacheError, naming the file,
    when the run cannot use it: damaged (`PRAGMA quick_check` finds a problem, or raises), not
    writable (unless `replay`), or, in replay mode, missing or with an unreadable `-wal`.

    A file that does not exist yet is announced (every answer will be paid). Outside replay, a
    `-wal` a killed run left (answers it committed and never folded into the file) is folded in
    here, so nothing later depends on that side file."""
    path = Path(path)
    check_cache_location(path, allow_network_fs)
    if path.is_dir():
        raise CacheError(f"llm.cache: {path} is a folder; it must name the cache file (e.g. "
                         f"{path / 'responses.sqlite'})", path)
    if not path.exists() or path.stat().st_size == 0:
        if replay:
            raise CacheError(f"replay mode (llm.replay: true) needs the response cache of a finished run, and "
                             f"{'there is no file' if not path.exists() else 'an empty file is'} at {path} "
                             f"(llm.cache): is the path mistyped? Nothing was run.", path)
        return [f"new cache at {path}: every answer will be paid (no cache file there yet; if you meant an "
                f"existing one, stop now and fix llm.cache)"]
    notes = []
    folded = not replay and has_wal_content(path)
    started = time.perf_counter()
    read_ahead(path)
    try:
        if replay:
            db = connect_readonly(path)
        else:
            if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
                raise sqlite3.OperationalError("attempt to write a readonly database")
            db = sqlite3.connect(path, timeout=60.0, isolation_level=None)
            db.execute("PRAGMA busy_timeout=60000")
    except sqlite3.Error as err:
        raise cache_error(path, err) from None
    try:
        try:
            problems = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.Error as err:  # whatever quick_check raises on, the file is damaged
            raise damaged_error(path, f"PRAGMA quick_check: {err}") from None
        if problems != ["ok"]:
            shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            raise damaged_error(path, f"PRAGMA quick_check: {shown}")
        try:
            if not replay:
                db.execute("BEGIN IMMEDIATE")  # can this user write it? (nothing is written)
                db.execute("ROLLBACK")
                if folded:  # copied into the file, without waiting for any other process
                    _, logged, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    folded = logged == copied
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            rows = db.execute("SELECT count(*) FROM responses").fetchone()[0] if "responses" in tables else 0
        except sqlite3.Error as err:
            raise cache_error(path, err) from None
    finally:
        db.close()
    if replay and "responses" not in tables:
        raise CacheError(f"replay mode (llm.replay: true): {path} holds no responses table: it is not a "
                         f"response cache (is llm.cache mistyped?)", path)
    if folded:
        notes.append(f"response cache {path}: folded in the answers a stopped run left in {path.name}-wal "
                     f"(never delete a -wal by hand: it holds committed answers)")
    notes.append(f"response cache {path}: {rows:,} answers, {path.stat().st_size / 1e6:,.1f} MB, quick_check ok "
                 f"({time.perf_counter() - started:.1f} s)" + (", read-only (replay)" if replay else ""))
    return notes
