"""Versioned prompt files (prompts/<id>.yaml): system text, user template, JSON schema.

Templates use `$name` placeholders (string.Template). Values are inserted in one
pass and never re-read as template source, so a trajectory containing `{x}`,
`{{ x }}`, `{% ... %}` or `$x` reaches the model literally.
"""

from __future__ import annotations

import copy
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from aura_eval.vocab import PROMPTS_DIR


@dataclass(frozen=True)
class Prompt:
    id: str
    version: int
    system: str
    user: str
    schema: dict | None

    def messages(self, **values: str) -> list[dict]:
        """System and user messages with `values` inserted in both; a missing value raises KeyError."""
        try:
            # Strip the template, never the values: inserted text stays exact.
            system = string.Template(self.system.strip()).substitute(values)
            user = string.Template(self.user.strip()).substitute(values)
        except KeyError as err:
            raise KeyError(f"prompt {self.id} v{self.version}: no value for placeholder {err}") from None
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_PARSED: dict[tuple, dict] = {}  # (path, mtime_ns, size) -> its parsed YAML: a forecast renders thousands of prompts


def _parsed(path: Path) -> dict:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        _PARSED[key] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return copy.deepcopy(_PARSED[key])  # a caller may change its schema


def load_prompt(prompt_id: str, prompts_dir: str | Path = PROMPTS_DIR) -> Prompt:
    path = Path(prompts_dir) / f"{prompt_id}.yaml"
    spec = _parsed(path)
    missing = {"id", "version", "system", "user"} - set(spec)
    if missing:
        raise ValueError(f"{path}: missing keys {sorted(missing)}")
    if spec["id"] != prompt_id:
        raise ValueError(f"{path}: id {spec['id']!r} does not match the file name")
    return Prompt(id=spec["id"], version=int(spec["version"]), system=spec["system"], user=spec["user"],
                  schema=spec.get("schema"))
