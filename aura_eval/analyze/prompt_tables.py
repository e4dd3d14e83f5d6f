"""The tables that are the prompts themselves: Table 1 (the risk mechanisms, from
prompts/taxonomy.yaml), Table 2 (the evaluation taxonomy, each label's definition as its judge
prompt states it) and the appendix of prompt templates (the paper's Tables 4-17).

Each reads prompt files only, so it changes exactly when a prompt or the taxonomy does; every
row names the version of the file it came from.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from aura_eval.artefact_registry import builder
from aura_eval.util.prompts import load_prompt
from aura_eval.vocab import AXIS_LABELS, CONSTRUCTION_PROMPTS, JUDGE_PROMPTS, load_taxonomy

# The paper's table for each prompt it prints (Tables 4-7 and 9-17; Table 8 is a summary).
PAPER_TABLES = {"agent_react": 4, "judge_detection": 5, "judge_action_type": 6, "judge_action_safety": 7,
                **{prompt_id: 9 + i for i, prompt_id in enumerate(CONSTRUCTION_PROMPTS)}}


# -- Table 1 ----------------------------------------------------------------------------------

def risk_mechanisms(taxonomy: dict) -> pd.DataFrame:
    """Table 1: one row per risk mechanism (the taxonomy's `kind: risk` dimensions, RS1-RS6)."""
    rows = [{"dimension": dim, "name": spec["name"], "definition": " ".join(spec["definition"].split()),
             "variation_direction": spec["direction"], "taxonomy_version": int(taxonomy["version"])}
            for dim, spec in taxonomy["dimensions"].items() if spec["kind"] == "risk"]
    return pd.DataFrame(rows, columns=["dimension", "name", "definition", "variation_direction",
                                       "taxonomy_version"])


# -- Table 2 ----------------------------------------------------------------------------------

def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def label_definitions(system: str, labels) -> dict[str, tuple[str | None, str]]:
    """label -> (name, definition) as a judge prompt's system text states them.

    A definition starts on a line `<label> - <name>: <text>` or `<label>: <text>` and goes on
    over the lines indented deeper than it, or while its text has not ended a sentence; a blank
    line or another label's line ends it. A label the text does not define raises ValueError."""
    starts = {label: re.compile(rf"^\s*{re.escape(label)}(?: - (?P<name>[^:\n]+))?: (?P<text>.*)$")
              for label in labels}
    lines = system.splitlines()

    def label_at(line):
        return next((label for label, start in starts.items() if start.match(line)), None)

    found = {}
    for i, line in enumerate(lines):
        label = label_at(line)
        if label is None:
            continue
        if label in found:
            raise ValueError(f"label {label} is defined twice")
        match = starts[label].match(line)
        text = [match["text"].strip()]
        for following in lines[i + 1:]:
            if not following.strip() or label_at(following):
                break
            if _indent(following) <= _indent(line) and re.search(r"[.!?]$", text[-1]):
                break
            text.append(following.strip())
        found[label] = (match["name"].strip() if match["name"] else None, " ".join(text))
    missing = [label for label in labels if label not in found]
    if missing:
        raise ValueError(f"no definition of {', '.join(missing)}")
    return {label: found[label] for label in labels}


def evaluation_taxonomy(prompts: dict) -> pd.DataFrame:
    """Table 2: D0-D3, A0-A5, Safe/Unsafe with each label's name and definition, from the
    judge prompt of its axis (`prompts`: axis -> loaded Prompt)."""
    rows = []
    for axis, labels in AXIS_LABELS.items():
        prompt = prompts[axis]
        try:
            definitions = label_definitions(prompt.system, labels)
        except ValueError as err:
            raise ValueError(f"prompt {prompt.id} v{prompt.version}: {err}") from None
        rows += [{"axis": axis, "label": label, "name": name, "definition": text, "prompt": prompt.id,
                  "prompt_version": prompt.version} for label, (name, text) in definitions.items()]
    return pd.DataFrame(rows, columns=["axis", "label", "name", "definition", "prompt", "prompt_version"])


# -- the appendix of prompt templates (Tables 4-17) -------------------------------------------

def _comment(path: Path) -> str:
    """The file's leading comment: what the prompt is for."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def _fenced(text: str) -> str:
    runs = [len(m) for m in re.findall(r"`{3,}", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}text\n{text.strip()}\n{fence}"


def _type(spec: dict) -> str:
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if "enum" in spec:
        return f"{kind}, one of {', '.join(f'`{v}`' for v in spec['enum'])}"
    if kind == "array":
        items = spec.get("items", {})
        inner = (f"objects {{{', '.join(items.get('properties', {}))}}}" if items.get("type") == "object"
                 else _type(items))
        most = f", at most {spec['maxItems']}" if "maxItems" in spec else ""
        return f"list of {inner}{most}"
    if kind == "string" and "maxLength" in spec:
        return f"string, at most {spec['maxLength']} characters"
    return kind


def schema_summary(schema: dict | None) -> list[str]:
    """One line per answer field: its name, type and whether it is required."""
    if not schema:
        return ["none: the answer is free text, parsed by the rollout stage"]
    required = set(schema.get("required", []))
    return [f"`{field}`: {_type(spec)}{'' if field in required else ' (optional)'}"
            for field, spec in schema.get("properties", {}).items()]


def prompt_templates(paths) -> str:
    """The appendix: every prompt file in the given order (the paper's), with its id, version,
    purpose, system text, user template and answer schema."""
    out = ["Each prompt is a file `prompts/<id>.yaml`; `$name` placeholders are filled in one pass "
           "(`string.Template`), and every model request records the prompt's id and version. "
           "P2-P6 receive the dimension definitions of Table 1 (`prompts/taxonomy.yaml`) as values.", ""]
    for path in map(Path, paths):
        prompt = load_prompt(path.stem, path.parent)
        paper = PAPER_TABLES.get(prompt.id)
        out += [f"### {prompt.id}, version {prompt.version}" + (f" (paper Table {paper})" if paper else ""), "",
                f"{_comment(path)} File `prompts/{path.name}`.", "",
                "**System**", "", _fenced(prompt.system), "",
                "**User template**", "", _fenced(prompt.user), "",
                "**Answer schema**", "", *(f"- {line}" for line in schema_summary(prompt.schema)), ""]
    return "\n".join(out)


# -- the jobs ------------------------------------------------------------------------------------

@builder("table1_risk_mechanisms")
def _table1(inputs, settings):
    (path,) = inputs["taxonomy"]
    return risk_mechanisms(load_taxonomy(Path(path).parent))


@builder("table2_evaluation_taxonomy")
def _table2(inputs, settings):
    by_id = {Path(p).stem: Path(p) for p in inputs["judge_prompts"]}
    return evaluation_taxonomy({axis: load_prompt(pid, by_id[pid].parent) for axis, pid in JUDGE_PROMPTS.items()})


@builder("prompt_templates")
def _prompt_templates(inputs, settings):
    return prompt_templates(inputs["prompt_templates"])
