"""The paper's own numbers, to stand beside ours in the report.

`paper/reference_numbers.yaml` maps a registered table or figure (aura_eval.artefact_registry.TABLES,
FIGURES) to the numbers the paper's text states for it, each with what it is, the value as the
paper writes it and the sentence that states it, copied verbatim. `load` reads and checks the
file; `markdown` gives one artefact's "Paper's numbers" table (or says the paper states none);
`write_all` writes `paper_<artefact>.md` for every registered artefact, which the report includes
under the table or figure (render.prepare calls it).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from aura_eval.artefact_registry import FIGURES, TABLES, artefact
from aura_eval.util.jsonl import atomic_write_text

PATH = Path(__file__).resolve().parents[2] / "paper" / "reference_numbers.yaml"
FIELDS = ("what", "value", "sentence")
COLUMNS = {"what": "what", "value": "paper value", "sentence": "the paper's sentence"}


class PaperNumbersError(ValueError):
    """The reference file is malformed: the message names the file and the entry."""


def no_number(kind: str) -> str:
    return f"*The paper's text states no number for this {kind}.*\n"


def not_collected(kind: str) -> str:
    return f"*No paper numbers are recorded for this {kind} (paper/reference_numbers.yaml).*\n"


def load(path: str | Path = PATH) -> dict[str, list[dict]]:
    """Artefact name -> its entries (each {what, value, sentence}, all non-empty text).

    Raises PaperNumbersError naming the file and the entry for an unknown artefact name, an
    entry that is not a mapping, a missing, empty, non-text or unknown field."""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise PaperNumbersError(f"{path}: not valid YAML: {err}") from None
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise PaperNumbersError(f"{path}: expected a mapping of table or figure names to lists of entries")
    known = [*TABLES, *FIGURES]
    numbers = {}
    for name, entries in spec.items():
        if name not in known:
            raise PaperNumbersError(f"{path}: unknown table or figure {name!r} (known: {', '.join(known)})")
        entries = [] if entries is None else entries
        if not isinstance(entries, list):
            raise PaperNumbersError(f"{path}: {name}: expected a list of entries, got {type(entries).__name__}")
        for i, entry in enumerate(entries, 1):
            where = f"{path}: {name} entry {i}"
            if not isinstance(entry, dict):
                raise PaperNumbersError(f"{where}: expected a mapping with {', '.join(FIELDS)}")
            missing = [f for f in FIELDS if f not in entry]
            if missing:
                raise PaperNumbersError(f"{where}: missing field(s) {', '.join(missing)}")
            unknown = sorted(str(f) for f in entry if f not in FIELDS)
            if unknown:
                raise PaperNumbersError(f"{where}: unknown field(s) {', '.join(unknown)} (fields: {', '.join(FIELDS)})")
            for field in FIELDS:
                if not isinstance(entry[field], str) or not entry[field].strip():
                    raise PaperNumbersError(f"{where}: {field} must be non-empty text (quote numbers), "
                                            f"got {entry[field]!r}")
        numbers[name] = [{f: e[f] for f in FIELDS} for e in entries]
    return numbers


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown(name: str, numbers: dict[str, list[dict]]) -> str:
    """One artefact's "Paper's numbers" table: what, paper value, the paper's sentence."""
    kind, _ = artefact(name)
    if name not in numbers:
        return not_collected(kind)
    entries = numbers[name]
    if not entries:
        return no_number(kind)
    df = pd.DataFrame([{COLUMNS[f]: _cell(e[f]) for f in FIELDS} for e in entries])
    return "**The paper's numbers**\n\n" + df.to_markdown(index=False, disable_numparse=True) + "\n"


def write_all(folder: str | Path, path: str | Path = PATH) -> list[Path]:
    """Write paper_<name>.md into `folder` for every registered table and figure."""
    numbers = load(path)
    written = []
    for name in [*TABLES, *FIGURES]:
        target = Path(folder) / f"paper_{name}.md"
        atomic_write_text(target, markdown(name, numbers))
        written.append(target)
    return written
