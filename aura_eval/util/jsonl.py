"""Reading and writing the JSONL files every stage exchanges.

Files are written atomically (a temporary file renamed into place) so a failed
stage never leaves a partial output behind, sorted by id and with the key order
the caller built, so a rerun from the cache is byte-identical. Every writer of an
output (JSONL, tables, figures, the audit site, the report) goes through
`atomic_write_text`, `atomic_write_bytes` or `atomic_target`: a kill leaves the old
file or the new one, never a cut one, and the new file gets the mode the umask
gives (0o666 & ~umask), not the 0o600 of a bare `mkstemp`.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator


class InputError(ValueError):
    """Bad input: the message names the file and the record."""


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """The rows of a JSONL file one at a time; an invalid line raises InputError naming file and line."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}: line {number}: invalid JSON ({err.msg})") from None


def read_jsonl(path: str | Path) -> list[dict]:
    """All rows of a JSONL file; an invalid line raises InputError naming file and line."""
    return list(iter_jsonl(path))


def dumps(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(", ", ": "))


def umask() -> int:
    """The process's umask (read from /proc where it can be, so no thread sees it changed)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_target(path: str | Path) -> Iterator[Path]:
    """A temporary path in `path`'s folder to write to; on a clean exit it gets the mode a plain
    `open` would give (0o666 & ~umask) and is renamed onto `path`; on an error it is removed and
    `path` is left as it was. For writers that want a file name (matplotlib, pandoc)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in its folder and a rename."""
    with atomic_target(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8, `\\n` line ends) to `path` through a temporary file and a rename."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_jsonl(path: str | Path, rows: Iterable[dict], key: str | tuple[str, ...] | None = "id") -> None:
    """Write rows sorted by `key` (a field or tuple of fields; None keeps the order)."""
    rows = list(rows)
    if key is not None:
        fields = (key,) if isinstance(key, str) else key
        rows.sort(key=lambda row: tuple(_sortable(row.get(f)) for f in fields))
    atomic_write_text(path, "".join(dumps(row) + "\n" for row in rows))


def _sortable(value):
    # None sorts first; mixed types compare by their JSON text.
    return (value is not None, value if isinstance(value, (int, float, str)) else json.dumps(value))
