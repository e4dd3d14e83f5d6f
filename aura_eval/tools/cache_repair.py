"""Check and repair a response cache file.

    python -m aura_eval cache check <cache>
    python -m aura_eval cache repair <cache>

`check` opens the file read-only (it writes nothing, and may run beside a run) and reports its rows per
table, its size (with a `-wal` beside it), `PRAGMA integrity_check`, and the answers whose checksum
fails. `repair` salvages a damaged file: it refuses while any process has the file open (it tries
the locks SQLite's connections hold, and keeps them while it works, so no run can open the file
meanwhile), copies the file (zero-padded to the page count its header names, so a file cut short
still yields its first part) with its `-wal`, and reads every table from the copy row by row, in
rowid order, stepping over what cannot be read. An answer is kept when its key is the hash of its
stored request description and its response matches its checksum (a row from before checksums:
when it parses); every other table (batches, batch_keys, spend, spend_total, misses, rate_buckets,
whatever the file holds) is copied as it reads. The damaged file moves aside with its `-wal` and
`-shm` (`<name>.damaged-<n>`), the salvaged one takes its place, and the counts kept and lost are
returned: a rerun then sends only the lost requests again.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aura_eval.llm.cache import (RESPONSES_TABLE, CacheError, cache_key, checksum, connect_readonly, has_wal_content,
                                 side_files, verified)

# SQLite's POSIX lock bytes (os_unix.c): PENDING, RESERVED and the SHARED range of the database file,
# and in the -shm the DMS byte every WAL connection holds a read lock on while it is open.
LOCK_START, LOCK_SIZE = 0x40000000, 2 + 510
SHM_DMS = 120 + 8
MAX_ROWID = 2 ** 63 - 1
STRETCH_CAP = 100_000  # rowids read one by one past the last readable row when nothing after it reads


class RepairError(RuntimeError):
    """The cache cannot be repaired now (in use, missing, or nothing readable); the message says why."""


@dataclass
class TableCount:
    read: int = 0  # rows read from the damaged file
    kept: int = 0  # rows written to the repaired one
    dropped: int = 0  # rows read but refused (answers: key or checksum; others: text not UTF-8, a clash)
    unreadable: int = 0  # rowids whose row could not be read
    highest: int = 0  # the highest rowid read
    tail_lost: bool = False  # nothing could be read past some rowid
    named: int = 0  # answers only: the highest rowid the table's b-tree still names (how many the file held)
    estimated: int = 0  # answers only: the highest rowid estimated where the b-tree's right-most path breaks
    why: dict = field(default_factory=dict)  # reason -> answers dropped for it


# -- reading a damaged file row by row ------------------------------------------------------------

def _readable_rows(db, table: str, columns: str, count: TableCount):
    """(rowid, *columns) of every row of `table` that reads, in rowid order: a range scan, and where it
    fails, a probe ahead (rowid + 1, 2, 4, ...) for the next place a seek works, then every rowid of the
    stretch skipped read one at a time. `count` gets the unreadable rowids."""
    scan = f'SELECT rowid, {columns} FROM "{table}" WHERE rowid > ? ORDER BY rowid'
    after = f'SELECT rowid, {columns} FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT 1'
    one = f'SELECT rowid, {columns} FROM "{table}" WHERE rowid = ?'
    last = 0
    while True:
        try:
            for row in db.execute(scan, (last,)):
                if row[0] <= last:  # out of order: a damaged page read as rows
                    raise sqlite3.DatabaseError("rowids out of order")
                last = row[0]
                yield row
            return
        except sqlite3.DatabaseError:
            pass
        step, found, probe = 1, None, None
        while last + step <= MAX_ROWID:
            probe = last + step
            try:
                found = db.execute(after, (probe,)).fetchone()
                if found is not None and found[0] < probe:
                    raise sqlite3.DatabaseError("rowid out of order")
                break
            except sqlite3.DatabaseError:
                step *= 2
        else:
            probe = None
        end = probe if probe is not None else min(MAX_ROWID, last + STRETCH_CAP)
        if probe is None:
            count.tail_lost = True
        for rowid in range(last + 1, end):  # the stretch skipped, one row at a time
            try:
                row = db.execute(one, (rowid,)).fetchone()
                if row is not None and row[0] != rowid:
                    raise sqlite3.DatabaseError("another rowid than asked")
            except sqlite3.DatabaseError:
                if probe is not None:  # past the last readable row, a rowid need not exist
                    count.unreadable += 1
                continue
            if row is not None:
                yield row
        if probe is None or found is None:
            return
        last = found[0]
        yield found


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at `at`: (value, where the next field starts)."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def highest_rowid_named(copy: Path, root: int, page_size: int) -> tuple[int, int]:
    """(the highest rowid the table's b-tree still names, an estimate of its highest rowid), read
    from the raw pages down the right-most path: each interior page's last divider (every row to its
    right has a larger rowid) and, if the path reaches it, the right-most leaf's last rowid, which
    is then exact. Where the path breaks, the subtree right of the last divider is estimated as
    large as that page's other subtrees on average. A file cut short still has its root (an early
    page), so this tells how many answers it held (their rowids are dense: answers are never
    deleted) where the rows themselves are gone. (0, 0) where the root does not parse."""
    highest, page, seen, low, estimate = 0, root, set(), 0, 0
    with open(copy, "rb") as f:
        while page and page not in seen:
            seen.add(page)
            f.seek((page - 1) * page_size)
            data = f.read(page_size)
            head = 100 if page == 1 else 0
            if len(data) < page_size or data[head] not in (0x05, 0x0D):
                break
            interior = data[head] == 0x05
            cells = int.from_bytes(data[head + 3:head + 5], "big")
            pointers = head + (12 if interior else 8)
            try:
                last = low
                for k in range(cells):
                    at = int.from_bytes(data[pointers + 2 * k:pointers + 2 * k + 2], "big")
                    if not pointers + 2 * cells <= at < page_size:
                        raise ValueError
                    if interior:
                        rowid = _varint(data, at + 4)[0]
                    else:
                        rowid = _varint(data, _varint(data, at)[1])[0]
                    if rowid < last:  # dividers and leaf rows are in order; anything else is damage
                        raise ValueError
                    last = rowid
            except (ValueError, IndexError):
                break
            highest = max(highest, last)
            if not interior:
                return highest, highest
            estimate = last + (last - low) // max(cells, 1)
            low, page = last, int.from_bytes(data[head + 8:head + 12], "big")
    return highest, max(highest, estimate)


def _text(value) -> str | None:
    """A TEXT value read as bytes, decoded; None when it is not UTF-8."""
    if value is None or isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _answers(src, dst, table: str, count: TableCount) -> None:
    cols = {_text(row[1]) for row in src.execute('PRAGMA table_info("responses")').fetchall()}
    stored_sum = "checksum" if "checksum" in cols else "NULL"
    rows = _readable_rows(src, "responses", f"key, request, CAST(response AS BLOB), {stored_sum}", count)
    for rowid, key, request, response, stored in rows:
        count.read += 1
        count.highest = max(count.highest, rowid)
        key, request_text, stored = _text(key), _text(request), _text(stored)
        record, why = verified(None if response is None else bytes(response), stored)
        if why is None:
            try:
                described = json.loads(request_text) if request_text is not None else None
            except ValueError:
                described = None
            if not isinstance(described, dict):
                why = "request description unreadable"
            elif key is None or cache_key(described) != key:
                why = "key does not match its request"
        if why is not None:
            count.dropped += 1
            count.why[why] = count.why.get(why, 0) + 1
            continue
        text = bytes(response).decode("utf-8")
        cur = dst.execute("INSERT OR IGNORE INTO responses (key, model, request, response, checksum)"
                          " VALUES (?, ?, ?, ?, ?)",
                          (key, str(described.get("model", "")), request_text, text, checksum(bytes(response))))
        if cur.rowcount:
            count.kept += 1
        else:
            count.dropped += 1
            count.why["the same key twice"] = count.why.get("the same key twice", 0) + 1


def _table(src, dst, table: str, count: TableCount) -> None:
    """Copy the rows of `table` that read, rowids and types kept; a row whose text is not UTF-8 or
    that clashes with a row already copied is dropped."""
    cols = [_text(row[1]) for row in src.execute(f'PRAGMA table_info("{table}")').fetchall()]
    selected = ", ".join(f'typeof("{c}"), "{c}"' for c in cols)
    insert = (f'INSERT OR IGNORE INTO "{table}" (rowid, {", ".join(f"{chr(34)}{c}{chr(34)}" for c in cols)})'
              f' VALUES ({", ".join("?" * (len(cols) + 1))})')
    for row in _readable_rows(src, table, selected, count):
        count.read += 1
        count.highest = max(count.highest, row[0])
        values = []
        for kind, value in zip(row[1::2], row[2::2]):
            if kind == b"text":
                value = _text(value)
                if value is None:
                    break
            values.append(value)
        else:
            if dst.execute(insert, (row[0], *values)).rowcount:
                count.kept += 1
                continue
        count.dropped += 1


def _roots(src) -> list[tuple[str, int]]:
    """(table, root page) of the damaged file's tables, as far as they read."""
    return [(_text(name), root) for _, name, root in _readable_rows(src, "sqlite_master", "name, rootpage",
                                                                     TableCount())
            if _text(name) and isinstance(root, int)]


def _schema(src) -> list[tuple[str, str, str]]:
    """(type, name, sql) of the tables and indexes the damaged file names, as far as they read."""
    entries = []
    for _, kind, name, sql in _readable_rows(src, "sqlite_master", "type, name, sql", TableCount()):
        kind, name, sql = _text(kind), _text(name), _text(sql)
        if kind in ("table", "index") and name and sql and not name.startswith("sqlite_"):
            entries.append((kind, name, sql))
    return entries


# -- the file: locks, a padded copy, the swap -----------------------------------------------------

@contextmanager
def _held(path: Path):
    """Hold the locks SQLite's connections take on `path` (and its -shm) until the block ends; raise
    RepairError when another process holds one (a run, a job, a `cache check` has it open). The
    copy is read through the descriptor yielded: closing any other descriptor of the file would
    drop this process's locks on it."""
    fd = os.open(path, os.O_RDWR)
    shm_fd = None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, LOCK_SIZE, LOCK_START, os.SEEK_SET)
            shm = side_files(path)[1]
            if shm.exists():
                shm_fd = os.open(shm, os.O_RDWR)
                fcntl.lockf(shm_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DMS, os.SEEK_SET)
        except OSError:
            raise RepairError(f"cache repair: {path} is in use by another process (a running workflow or job, "
                              f"or another cache command): stop it, then repair") from None
        yield fd
    finally:
        if shm_fd is not None:
            os.close(shm_fd)
        os.close(fd)


def header_pages(head: bytes, path=None) -> tuple[int, int | None]:
    """(page size, the page count the header names) of an SQLite file's first 100 bytes; the count
    is None where the header does not vouch for it (its change counter and version-valid-for differ)."""
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        raise RepairError(f"cache repair: {path} does not start with an SQLite header (its first page is damaged, "
                          f"or it is not a cache file): nothing can be salvaged by this tool; restore the cache from "
                          f"a copy (`make pack` keeps one)")
    size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if size == 1 else size
    pages = int.from_bytes(head[28:32], "big")
    valid = pages > 0 and head[24:28] == head[92:96]
    return page_size, pages if valid else None


def _padded_copy(fd: int, target: Path, source: Path) -> dict:
    """Copy the file open at `fd` to `target`, zero-padded to whole pages and to the page count in its
    header; what was found."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, 100, 0)
    page_size, pages = header_pages(head, source)
    whole = -(-size // page_size) * page_size
    length = max(whole, (pages or 0) * page_size)
    with open(target, "wb") as out:
        offset = 0
        while offset < size:
            block = os.pread(fd, 1 << 20, offset)
            if not block:
                break
            out.write(block)
            offset += len(block)
        out.truncate(length)  # the zeros SQLite reads as unwritten pages
    return {"bytes": size, "page_size": page_size, "header_pages": pages, "padded_to": length}


def _aside(path: Path) -> Path:
    n = 1
    while any(os.path.lexists(p) for p in (path.with_name(f"{path.name}.damaged-{n}"),
                                           *side_files(path.with_name(f"{path.name}.damaged-{n}")))):
        n += 1
    return path.with_name(f"{path.name}.damaged-{n}")


def repair(cache_path) -> dict:
    """Salvage a damaged cache (see the module's docstring); the counts. Raises RepairError when the
    file is missing, in use, or has no readable schema (then nothing is moved)."""
    path = Path(cache_path)
    if not path.is_file():
        raise RepairError(f"cache repair: no cache file {path}")
    started = time.perf_counter()
    wal, shm = side_files(path)
    with _held(path) as fd, tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.repair-") as tmp:
        copy, fixed = Path(tmp) / "damaged.sqlite", Path(tmp) / "repaired.sqlite"
        found = _padded_copy(fd, copy, path)
        if has_wal_content(path):  # committed answers not yet folded into the file
            with open(wal, "rb") as src, open(side_files(copy)[0], "wb") as out:
                out.write(src.read())
        src = sqlite3.connect(copy, isolation_level=None)
        src.text_factory = bytes
        try:
            try:
                src.execute("PRAGMA cell_size_check=ON")
                schema = _schema(src)
            except sqlite3.DatabaseError as err:
                raise RepairError(f"cache repair: {path}: its schema (first page) cannot be read ({err}): nothing "
                                  f"can be salvaged by this tool; restore the cache from a copy (`make pack` "
                                  f"keeps one)") from None
            dst = sqlite3.connect(fixed, isolation_level=None)
            dst.execute("BEGIN")
            dst.execute(RESPONSES_TABLE)
            counts: dict[str, TableCount] = {}
            for kind, name, sql in schema:
                if kind == "table" and name != "responses":
                    dst.execute(sql)
            for kind, name, _ in [("table", "responses", "")] + schema:
                if kind != "table" or name in counts:
                    continue
                counts[name] = TableCount()
                try:
                    (_answers if name == "responses" else _table)(src, dst, name, counts[name])
                except sqlite3.DatabaseError as err:  # its columns cannot even be listed
                    counts[name].tail_lost = True
                    counts[name].why[str(err)] = 0
            roots = dict(_roots(src))
            if "responses" in roots:
                counts["responses"].named, counts["responses"].estimated = highest_rowid_named(
                    copy, roots["responses"], found["page_size"])
            for kind, name, sql in schema:
                if kind == "index":
                    try:
                        dst.execute(sql)
                    except sqlite3.DatabaseError:  # its table was lost, or its rows clash: the data is kept
                        pass
            _sequence(src, dst)
            dst.execute("COMMIT")
            dst.execute("PRAGMA journal_mode=WAL")
            dst.close()
        finally:
            src.close()
        aside = _aside(path)
        moved = []
        for side, target in zip((wal, shm), side_files(aside)):
            if os.path.lexists(side):  # before the new file is placed: SQLite would read an old -wal with it
                os.replace(side, target)
                moved.append(target.name)
        try:
            os.link(path, aside)  # the damaged file stays named while the repaired one replaces it at once
        except OSError:
            os.replace(path, aside)
        os.chmod(fixed, os.stat(fd).st_mode & 0o777)
        os.replace(fixed, path)
    answers = counts["responses"]
    return {"path": str(path), "aside": str(aside), "aside_side_files": moved, "file": found,
            "answers": answers, "tables": {k: v for k, v in counts.items() if k != "responses"},
            "seconds": round(time.perf_counter() - started, 2)}


def _sequence(src, dst) -> None:
    """AUTOINCREMENT counters (sqlite_sequence), where they read, so no id is handed out twice."""
    try:
        rows = src.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    except sqlite3.DatabaseError:
        return
    for name, seq in rows:
        name = _text(name)
        if name and dst.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone():
            if not dst.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", (seq, name)).rowcount:
                dst.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (name, seq))


def answers_held(a: TableCount) -> int:
    """How many answers the damaged file held, as far as it tells (at least): the highest rowid read or
    named by its b-tree (answers are never deleted, so their rowids run 1, 2, ...)."""
    return max(a.highest, a.named, a.kept + a.dropped + a.unreadable)


def repair_text(done: dict) -> str:
    """What `cache repair` prints: kept and lost, per table, and where the damaged file went."""
    a = done["answers"]
    held = answers_held(a)
    past = held - a.kept - a.dropped - a.unreadable
    lines = [f"repaired {done['path']} in {done['seconds']:.1f} s: kept {a.kept:,} of the {held:,} answers the file "
             f"held; lost {held - a.kept:,} ({a.dropped:,} read but refused, {a.unreadable:,} unreadable"
             + (f", {past:,} past rowid {a.highest:,}, where the file can no longer be read" if past > 0 else "")
             + ")"]
    if a.tail_lost and a.estimated > held:
        lines.append(f"  nothing reads past rowid {a.highest:,}, and the table's b-tree names rows up to {held:,}: "
                     f"the file held at least {held:,} answers, about {a.estimated:,} (so about "
                     f"{a.estimated - a.kept:,} lost)")
    for why, n in sorted(a.why.items()):
        lines.append(f"  refused: {n:,} {why}")
    for name, t in sorted(done["tables"].items()):
        lines.append(f"  table {name}: kept {t.kept:,} rows" + (f", lost {t.dropped + t.unreadable:,}"
                                                              if t.dropped or t.unreadable else "")
                     + ("; rows past the damage unknown" if t.tail_lost else ""))
    f = done["file"]
    if f["header_pages"] and f["padded_to"] > f["bytes"]:
        lines.append(f"  the file was cut short: {f['bytes']:,} of the {f['padded_to']:,} bytes its header names")
    side = f" (with {', '.join(done['aside_side_files'])})" if done["aside_side_files"] else ""
    lines.append(f"the damaged file is now {done['aside']}{side}; delete it once the rerun is done")
    lines.append("a rerun sends only the lost requests again (and, in replay mode, stops on the first of them)")
    return "\n".join(lines) + "\n"


# -- check ----------------------------------------------------------------------------------------

def check(cache_path) -> tuple[str, bool]:
    """(the report, whether the file is intact): rows per table, size, `PRAGMA integrity_check`, and
    the answers that fail their checksum. Opens the file read-only and writes nothing."""
    path = Path(cache_path)
    if not path.is_file():
        raise RepairError(f"cache check: no cache file {path}")
    wal = side_files(path)[0]
    size = f"{path.stat().st_size:,} bytes" + (f" (+ {wal.name} {wal.stat().st_size:,} bytes of answers not yet "
                                               f"folded in: never delete it)" if has_wal_content(path) else "")
    lines, ok = [f"{path}: {size}"], True
    with open(path, "rb") as f:
        head = f.read(100)
    try:
        page_size, pages = header_pages(head, path)
    except RepairError as err:
        return "\n".join(lines + [f"  DAMAGED: {err}".replace("cache repair: ", "")]) + "\n", False
    if pages and pages * page_size > path.stat().st_size:
        ok = False
        lines.append(f"  cut short: {path.stat().st_size:,} of the {pages * page_size:,} bytes its header names")
    try:
        db = connect_readonly(path, purpose="cache check")
    except CacheError as err:
        return "\n".join(lines + [f"  cannot be opened: {err}"]) + "\n", False  # it names the repair
    db.text_factory = bytes
    try:
        try:
            problems = [_text(r[0]) for r in db.execute("PRAGMA integrity_check(20)").fetchall()]
        except sqlite3.DatabaseError as err:
            problems = [f"integrity_check raised: {err}"]
        if problems == ["ok"]:
            lines.append("  integrity: ok (PRAGMA integrity_check)")
        else:
            ok = False
            lines.append("  integrity: DAMAGED (PRAGMA integrity_check):")
            lines += [f"    {p}" for p in problems[:20]]
        try:
            tables = [_text(n) for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                                      " ORDER BY name").fetchall()]
        except sqlite3.DatabaseError as err:
            tables, ok = [], False
            lines.append(f"  the schema cannot be read: {err}")
        counted = []
        for name in tables:
            count = TableCount()
            try:
                if name == "responses":
                    _answer_checks(db, count)
                else:
                    for row in _readable_rows(db, name, "1", count):
                        count.read += 1
                        count.highest = max(count.highest, row[0])
            except sqlite3.DatabaseError:
                count.tail_lost = True
            ok = ok and not (count.unreadable or count.tail_lost or count.dropped)
            counted.append(f"{name} {count.read:,}" + (f" (+{count.unreadable:,} unreadable)" if count.unreadable
                                                       else "") + (" (damaged past rowid "
                                                                   f"{count.highest:,})" if count.tail_lost else ""))
            if name == "responses":
                legacy = count.why.get("legacy", 0)
                lines.append(f"  answers: {count.read:,} read, {count.read - count.dropped - legacy:,} match their "
                             f"checksum, {legacy:,} from before checksums (parse as JSON), {count.dropped:,} damaged")
        lines.append("  rows: " + ", ".join(counted))
    finally:
        db.close()
    if not ok:
        lines.append(f"  run `python -m aura_eval cache repair {path}` with no run using the file: it keeps every "
                     f"intact answer and moves the damaged file aside")
    return "\n".join(lines) + "\n", ok


def _answer_checks(db, count: TableCount) -> None:
    cols = {_text(row[1]) for row in db.execute('PRAGMA table_info("responses")').fetchall()}
    stored_sum = "checksum" if "checksum" in cols else "NULL"
    for rowid, response, stored in _readable_rows(db, "responses", f"CAST(response AS BLOB), {stored_sum}", count):
        count.read += 1
        count.highest = max(count.highest, rowid)
        stored = _text(stored)
        if verified(None if response is None else bytes(response), stored)[1] is not None:
            count.dropped += 1
        elif stored is None:
            count.why["legacy"] = count.why.get("legacy", 0) + 1
