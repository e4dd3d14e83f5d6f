"""Reading and writing the JSONL files every stage exchanges.

Files are written atomically (a temporary file renamed into place) so a failed
stage never leaves a partial output behind, sorted by id and with the key order
the caller built, so a rerun from the cache is byte-identical.
"""

from __future__ import annotations

import json
import os
import tempfile
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


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
