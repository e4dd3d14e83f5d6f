"""Select the R-Judge seed trajectories (paper §4, C.1).

R-Judge ships one folder per domain with `harmful.json` (label 1) and
`benign.json` (label 0). AURA-Eval keeps the records whose `attack_type` is
"unintended" and flattens each trajectory (a list of turns, each a list of
steps) into ordered steps, keeping every text exactly as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

from aura_eval.util.jsonl import InputError, write_jsonl
from aura_eval.vocab import DOMAINS, STEP_ROLES, hash_rank, seed_id

LABEL_FILES = {"harmful.json": 1, "benign.json": 0}
ATTACK_TYPES = ("unintended", "injection")
# Paper, §4 and C.1: the 157 unintended-risk seeds.
PAPER_COUNTS = {"Program": 48, "Application": 39, "IoT": 30, "Web": 23, "Finance": 17}
PAPER_LABELS = {"unsafe": 101, "safe": 56}

_STRING_FIELDS = ("scenario", "profile", "goal", "risk_description")


def _fail(path, record_id, message):
    raise InputError(f"{path}: record id={record_id}: {message}")


def _check_step(path, rid, where, step):
    if not isinstance(step, dict):
        _fail(path, rid, f"{where} is not an object")
    role = step.get("role")
    if role not in STEP_ROLES:
        _fail(path, rid, f"{where} has unknown role {role!r} (allowed: {', '.join(STEP_ROLES)})")
    expected = {"role", "thought", "action"} if role == "agent" else {"role", "content"}
    if set(step) != expected:
        _fail(path, rid, f"{where} ({role}) must have fields {sorted(expected)}, has {sorted(step)}")
    # R-Judge leaves some texts null (e.g. the closing environment step); they stay null.
    for field in sorted(expected - {"role"}):
        if step[field] is not None and not isinstance(step[field], str):
            _fail(path, rid, f"{where} ({role}) field {field!r} must be a string or null")


def _invalid_text(value, where: str):
    """(where, character position) of the first text under `value` (keys too) that is not valid
    Unicode: a lone surrogate, which JSON's `\\ud800` escapes let through and UTF-8 cannot write; or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            return where, err.start
        return None
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = (_invalid_text(key, f"a key of {where}") if isinstance(key, str) else None) or \
            _invalid_text(child, f"{where}[{key!r}]")
        if found:
            return found
    return None


def check_record(path, index: int, record, expected_label: int) -> None:
    """Raise InputError naming the file and record when `record` is malformed, a text that is not
    valid Unicode included (named by its id where that is an integer, else by its index)."""
    if not isinstance(record, dict):
        raise InputError(f"{path}: record at index {index} is not an object")
    invalid = _invalid_text(record, "record")
    if invalid:
        where, position = invalid
        name = f"record id={record['id']} (index {index})" if isinstance(record.get("id"), int) else \
            f"record at index {index}"
        raise InputError(f"{path}: {name}: {where} is not valid Unicode (a lone surrogate at character "
                         f"{position}, e.g. from a \\ud800 escape); fix that text in the file")
    rid = record.get("id", f"<missing, index {index}>")
    if not isinstance(record.get("id"), int) or isinstance(record.get("id"), bool):
        _fail(path, rid, "field 'id' is missing or not an integer")
    for field in _STRING_FIELDS:
        if not isinstance(record.get(field), str):
            _fail(path, rid, f"field {field!r} is missing or not a string")
    if record.get("label") not in (0, 1) or isinstance(record.get("label"), bool):
        _fail(path, rid, f"field 'label' must be 0 or 1, got {record.get('label')!r}")
    if record["label"] != expected_label:
        _fail(path, rid, f"label {record['label']} does not match the file (expected {expected_label})")
    if record.get("attack_type") not in ATTACK_TYPES:
        _fail(path, rid, f"field 'attack_type' must be one of {ATTACK_TYPES}, got {record.get('attack_type')!r}")
    contents = record.get("contents")
    if not isinstance(contents, list) or not contents:
        _fail(path, rid, "field 'contents' (the trajectory) is missing or empty")
    for t, turn in enumerate(contents):
        if not isinstance(turn, list) or not turn:
            _fail(path, rid, f"turn {t} is not a non-empty list of steps")
        for s, step in enumerate(turn):
            _check_step(path, rid, f"turn {t} step {s}", step)
    first = contents[0][0]
    if first["role"] != "user":
        _fail(path, rid, "the trajectory does not start with a user step")


def flatten_steps(contents: list[list[dict]]) -> list[dict]:
    """Ordered steps with a global index and their turn; texts kept exactly."""
    steps = []
    for turn_number, turn in enumerate(contents):
        for step in turn:
            row = {"index": len(steps), "turn": turn_number, "role": step["role"]}
            if step["role"] == "agent":
                row.update(thought=step["thought"], action=step["action"])
            else:
                row["content"] = step["content"]
            steps.append(row)
    return steps


def load_seeds(rjudge_dir: str | Path, attack_type: str = "unintended") -> list[dict]:
    """Every record of `attack_type` as a seed row, sorted by seed id.

    Checks all 571 records (a malformed record stops with InputError naming the
    file and record, whatever its attack type) and rejects duplicate ids.
    """
    rjudge_dir = Path(rjudge_dir)
    seen: dict[int, Path] = {}
    seeds = []
    for domain in DOMAINS:
        for file_name, label in LABEL_FILES.items():
            path = rjudge_dir / domain / file_name
            if not path.is_file():
                raise InputError(f"{path}: missing R-Judge file")
            try:
                records = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise InputError(f"{path}: invalid JSON at line {err.lineno} ({err.msg})") from None
            if not isinstance(records, list):
                raise InputError(f"{path}: expected a JSON list of records")
            for index, record in enumerate(records):
                check_record(path, index, record, label)
                rid = record["id"]
                if rid in seen:
                    _fail(path, rid, f"duplicate id (also in {seen[rid]})")
                seen[rid] = path
                if record["attack_type"] != attack_type:
                    continue
                steps = flatten_steps(record["contents"])
                seeds.append({
                    "seed_id": seed_id(domain, rid),
                    "domain": domain,
                    "rjudge_id": rid,
                    "label": "unsafe" if label else "safe",
                    "scenario": record["scenario"],
                    "profile": record["profile"],
                    "risk_description": record["risk_description"],
                    "n_turns": len(record["contents"]),
                    "n_steps": len(steps),
                    "steps": steps,
                })
    return sorted(seeds, key=lambda s: s["seed_id"])


def stratified_subset(seeds: list[dict], n) -> list[dict]:
    """`all`, or n seeds stratified by (domain, label).

    Each stratum gets its proportional share by largest remainder (ties broken by
    stratum name), and within a stratum seeds are taken in a fixed hash order, so
    the subset is deterministic.
    """
    if n == "all":
        return list(seeds)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"seeds must be 'all' or a positive integer, got {n!r}")
    if n >= len(seeds):
        return list(seeds)
    strata: dict[tuple, list[dict]] = {}
    for seed in seeds:
        strata.setdefault((seed["domain"], seed["label"]), []).append(seed)
    total = len(seeds)
    quotas = {k: n * len(v) / total for k, v in strata.items()}
    alloc = {k: int(q) for k, q in quotas.items()}
    by_remainder = sorted(strata, key=lambda k: (-(quotas[k] - alloc[k]), k))
    for k in by_remainder[: n - sum(alloc.values())]:
        alloc[k] += 1
    chosen = []
    for k, members in strata.items():
        chosen += sorted(members, key=lambda s: hash_rank(s["seed_id"]))[: alloc[k]]
    return sorted(chosen, key=lambda s: s["seed_id"])


def select_seeds(rjudge_dir, seeds_setting, out_path) -> list[dict]:
    """select_seeds stage: validate all raw records, keep the unintended ones, subset, write."""
    seeds = stratified_subset(load_seeds(rjudge_dir), seeds_setting)
    write_jsonl(out_path, seeds, key="seed_id")
    return seeds
