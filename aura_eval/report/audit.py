"""The audit site (results/audit/): static, offline pages to check any item by hand.

- `index.html`: one compact row per released item and per excluded candidate (every candidate
  lost from variation generation on, with the stage and reason that dropped it:
  aura_eval.construct.funnel.losses, in the words of aura_eval.vocab.LOSS_STAGES and LOSS_REASONS,
  the same as the construction_losses table and the dataset card), the per-run labels packed into
  a short code string, filtered in the browser (plain JavaScript over the embedded JSON blob) by
  domain, dimension, pair label, decision point, status, exclusion stage, exclusion reason, agent
  (run), axis label and panel disagreement; the filter lives in the URL fragment
  (`index.html#agent=X&pair_label=NSP`), so the report's tables link to their rows.
- `items/<item_id>.html`: everything behind one item, from the R-Judge record to the final
  labels; every response with its prompt id and version and its call-log key.
- `audit.css`: the one stylesheet every page shares.

Pages are built run by run (a run's rollouts, judgments and labels become one HTML fragment
per item), so the whole evaluation is never in memory at once.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import jinja2
import markupsafe

from aura_eval.construct.funnel import loss_text, losses
from aura_eval.util.csv_cells import read_csv, unprotect_frame
from aura_eval.util.jsonl import atomic_write_bytes, atomic_write_text, read_jsonl
from aura_eval.util.pages import finish, script_json, shown_data
from aura_eval.vocab import (ACTION_TYPES, AXES, AXIS_LABELS, DETECTION_LEVELS, LOSS_REASONS, LOSS_STAGES, parse_run,
                             reason_category, reason_kind)

TEMPLATES = Path(__file__).resolve().parent / "templates"
CSS = "audit.css"
SECTIONS = {"source": "Source record", "tag": "P1 step tag", "prefix": "Prefix", "variation": "Variation",
            "reviews": "Variation reviews", "classification": "P7 classification", "pair": "Pair",
            "pair_review": "P9 pair review", "runs": "Rollouts and judgments", "labels": "Final labels"}
# Per run and item, four characters in the index: detection, action type, safety (a digit, a digit,
# S/U; "-" when the panel gave no label) and which of the three had no unanimous vote (a bit mask
# 0-7: 1 detection, 2 action type, 4 safety); "...." when the run has no row for the item.
MISSING = "...."


# -- pieces ---------------------------------------------------------------------------------

def step_text(steps: list[dict] | None) -> list[str]:
    """A prefix as lines of text, one header line per step (what the diff compares)."""
    lines = []
    for step in steps or []:
        lines.append(f"## step {step['index']} (turn {step.get('turn', 0)}, {step['role']})")
        if step["role"] == "agent":
            lines += [f"Thought: {step.get('thought') or ''}", f"Action: {step.get('action') or ''}"]
        else:
            lines += str(step.get("content") or "").splitlines() or [""]
    return lines


def step_diff(original: list[dict] | None, varied: list[dict] | None, context: int = 3) -> list[tuple[str, str]]:
    """The varied prefix against the original as a unified diff of their lines: (kind, line)
    with kind one of "hunk", "del", "add", "same"; empty when nothing changed."""
    out = []
    for line in difflib.unified_diff(step_text(original), step_text(varied), "original prefix", "this item",
                                     n=context, lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hunk", "-": "del", "+": "add"}.get(line[:1], "same")
        out.append((kind, line))
    return out


def label_code(row: dict | None) -> str:
    """The four-character code of one run's labels of one item (see MISSING)."""
    if row is None:
        return MISSING
    d, t, s = (row.get(axis) or {} for axis in AXES)
    mask = sum(bit for bit, axis in zip((1, 2, 4), (d, t, s)) if axis.get("stratum") != "unanimous")
    return ((d.get("label") or "-")[-1:] + (t.get("label") or "-")[-1:] + (s.get("label") or "-")[:1]
            + str(mask))


def index_rows(items: list[dict], excluded: dict[str, dict], facts: dict[str, dict], runs: list[str],
               codes: dict[str, dict[str, str]]) -> list[list]:
    """One row per released item and excluded candidate: [id, domain, dimension, pair label,
    decision point, stage (a LOSS_STAGES key) or None, reason as the tables count it (reason_kind)
    or None, the runs' codes joined, the loss as the row shows it (loss_text) or None]."""
    rows = []
    for item in items:
        rows.append([item["item_id"], item["domain"], item["dimension"], item["pair_label"], item["decision_point"],
                     None, None, "".join(codes.get(item["item_id"], {}).get(r, MISSING) for r in runs), None])
    for iid, loss in sorted(excluded.items()):
        f = facts.get(iid, {})
        rows.append([iid, f.get("domain"), f.get("dimension"), f.get("pair_label"), f.get("decision_point"),
                     loss["stage"], reason_kind(loss["reason"]),
                     "".join(codes.get(iid, {}).get(r, MISSING) for r in runs), loss_text(loss)])
    return sorted(rows, key=lambda r: r[0])


def counts(rows: list[list], **where) -> int:
    """Rows matching the filters (column name -> value), as the index's own filter counts them
    (for the facts and loss columns; the browser adds the run filters)."""
    cols = {"domain": 1, "dimension": 2, "pair_label": 3, "decision_point": 4, "stage": 5, "reason": 6}
    return sum(all(r[cols[k]] == v for k, v in where.items()) for r in rows)


# -- rendering --------------------------------------------------------------------------------

def _text(value) -> markupsafe.Markup:
    """Text in an element (not an attribute): only &, < and > need escaping (quotes stay short)."""
    return markupsafe.Markup(str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=autoescape,
                              keep_trailing_newline=True, trim_blocks=True,
                              # item pages show optional fields (absent in older or failed rows) as empty
                              undefined=jinja2.Undefined if autoescape else jinja2.StrictUndefined,
                              lstrip_blocks=True)
    env.filters["text"] = _text
    return env


def _blob(data) -> str:
    """The data a page's script reads: its text with hidden characters marked, safe inside <script>."""
    return script_json(shown_data(data), separators=(",", ":"))


def index_page(rows: list[list], runs: list[str], frame: list[int] | None = None, figure: str = "") -> str:
    """The index; `figure`: the running example's HTML (its inline SVG and caption), shown above the rows."""
    options = {"axis": list(AXES), "labels": {a: list(AXIS_LABELS[a]) for a in AXES}}
    kinds = sorted({r[6] for r in rows if r[6] is not None})
    # the stages in flow order with their titles; each reason's category meaning, the filter's hint
    losses = {"stages": {key: stage.title for key, stage in LOSS_STAGES.items()},
              "meanings": {kind: LOSS_REASONS.get(reason_category(kind), "") for kind in kinds}}
    data = {"runs": runs, "rows": rows, "options": options, "frame": frame or [], "losses": losses,
            "codes": {"detection": [x[-1] for x in DETECTION_LEVELS], "action_type": [x[-1] for x in ACTION_TYPES]}}
    # the index adds cells/<table>.js when a cell's link asks for it: 'strict-dynamic'
    return finish(_env(False).get_template("audit_index.html.j2").render(data=_blob(data), css=CSS, figure=figure),
                  loads_scripts=True)


class Calls:
    """Call-log keys: (scope, item id, endpoint, prompt, sample) -> key, scope being the call
    log's place under results/calls (`construct/vary`, `rollout/<run>`, `judge/<run>/<judge>`)."""

    def __init__(self, paths):
        self.keys = {}
        for path in paths:
            scope = self.scope(path)
            for row in read_jsonl(path):
                self.keys[(scope, row["item_id"], row["endpoint"], row["prompt"], row.get("sample", 0))] = row["key"]

    @staticmethod
    def scope(path) -> str:
        parts = list(Path(path).with_suffix("").parts)
        parts = parts[parts.index("calls") + 1:] if "calls" in parts else parts[-1:]
        if parts and parts[0] == "judge" and len(parts) == 4:
            parts = [parts[0], parts[1], parts[3]]  # detection_type and safety in one scope
        return "/".join(parts)

    def key(self, scope: str, item: str, row: dict | None) -> str | None:
        if not row:
            return None
        call = row.get("call")
        if isinstance(call, dict) and call.get("key"):
            return call["key"]
        if row.get("key"):
            return row["key"]
        return self.keys.get((scope, item, row.get("endpoint"), row.get("prompt"), row.get("sample", 0)))


def _by(rows, field):
    return {r[field]: r for r in rows}


def _run_paths(paths, depth: int) -> dict[str, list]:
    out = {}
    for p in paths:
        out.setdefault(Path(p).parent.name if depth else Path(p).stem, []).append(p)
    return out


def build(inputs: dict, out_dir) -> dict:
    """Write the site under `out_dir` from the workflow's files; `inputs` names them: seeds, tags,
    prefixes, variations, reviews, pool, pairs, pair_reviews, dataset, excluded (one path each) and
    rollouts, judgments, labels, calls (lists). Returns counts."""
    out_dir = Path(out_dir)
    one = {name: read_jsonl(inputs[name]) for name in ("seeds", "tags", "prefixes", "variations", "reviews", "pool",
                                                       "pairs", "pair_reviews", "dataset", "excluded")}
    seeds, tags, prefixes = _by(one["seeds"], "seed_id"), _by(one["tags"], "seed_id"), _by(one["prefixes"], "prefix_id")
    variations, reviews = _by(one["variations"], "variation_id"), _by(one["reviews"], "variation_id")
    pool, pairs, pair_reviews = _by(one["pool"], "item_id"), _by(one["pairs"], "item_id"), _by(one["pair_reviews"],
                                                                                               "item_id")
    pair_of_source = {p["source_item_id"]: p for p in one["pairs"]}
    items = one["dataset"]
    excluded = losses(one["variations"], one["reviews"], one["pairs"], one["pair_reviews"], one["excluded"])
    released = {i["item_id"] for i in items}
    for iid in released:
        excluded.pop(iid, None)
    facts = _facts(items, excluded, prefixes, variations, pool, pairs)
    calls = Calls(inputs.get("calls") or [])

    rollouts, labels = _run_paths(inputs.get("rollouts") or [], 0), _run_paths(inputs.get("labels") or [], 0)
    judgments = _run_paths(inputs.get("judgments") or [], 1)
    runs = sorted(set(rollouts) | set(labels) | set(judgments))
    env = _env(True)
    macros = env.get_template("audit_macros.html.j2").module
    fragments: dict[str, list[str]] = {}
    codes: dict[str, dict[str, str]] = {}
    finals: dict[str, list] = {}
    for run in runs:
        rolled = {r["item_id"]: r for p in rollouts.get(run, []) for r in read_jsonl(p)}
        labelled = {r["item_id"]: r for p in labels.get(run, []) for r in read_jsonl(p)}
        judged = {Path(p).stem: _by(read_jsonl(p), "item_id") for p in sorted(judgments.get(run, []))}
        for iid in sorted(set(rolled) | set(labelled)):
            codes.setdefault(iid, {})[run] = label_code(labelled.get(iid))
            if iid in labelled:
                finals.setdefault(iid, []).append(
                    (run, [(labelled[iid].get(a) or {}).get("label") for a in AXES],
                     [(labelled[iid].get(a) or {}).get("stratum") for a in AXES]))
            rollout = rolled.get(iid)
            votes = [{"judge": judge, "row": rows.get(iid),
                      "keys": {axis: calls.key(f"judge/{run}/{judge}", iid, (rows.get(iid) or {}).get(axis))
                               for axis in AXES}} for judge, rows in judged.items()]
            fragments.setdefault(iid, []).append(str(macros.run_section(
                run=run, agent=parse_run(run)[0], fmt=parse_run(run)[1], rollout=rollout,
                rollout_key=calls.key(f"rollout/{run}", iid, rollout), votes=votes, labels=labelled.get(iid),
                axes=AXES)))

    items_dir = out_dir / "items"
    if items_dir.exists():
        shutil.rmtree(items_dir)
    items_dir.mkdir(parents=True)
    atomic_write_bytes(out_dir / CSS, (TEMPLATES / CSS).read_bytes())
    page = env.get_template("audit_item.html.j2")
    by_item = {i["item_id"]: i for i in items}
    for iid in sorted(released | set(excluded)):
        context = _item_context(iid, by_item.get(iid), excluded.get(iid), facts.get(iid, {}), seeds, tags, prefixes,
                                variations, reviews, pool, pairs, pair_reviews, pair_of_source, calls)
        atomic_write_text(items_dir / f"{iid}.html", finish(page.render(**context, runs_html=fragments.get(iid, []),
                                                                        finals=finals.get(iid, []), axes=AXES,
                                                                        sections=SECTIONS, css=CSS)))
    rows = index_rows(items, excluded, facts, runs, codes)
    members = Members(rows, runs, inputs.get("frame"))
    tables = write_cell_scripts(inputs.get("cells") or [], out_dir / CELLS_DIR, members)
    atomic_write_text(out_dir / "index.html", index_page(rows, runs, members.pairs, running_example(inputs)))
    return {"items": len(items), "excluded": len(excluded), "runs": len(runs), "pages": len(released | set(excluded)),
            "tables": tables}


def running_example(inputs: dict) -> str:
    """Figure 2 for the index (its SVG inline, each part linking to an item page: `../audit/items/...`
    resolves from results/audit/ as from results/report/), or "" where the inputs name none."""
    from aura_eval.analyze.running_example import figure_html
    from aura_eval.artefact_registry import FIGURES
    from aura_eval.vocab import RUNNING_EXAMPLE

    if not inputs.get("running_example"):
        return ""
    return figure_html(inputs["running_example"], inputs.get("running_example_shown"),
                       FIGURES[RUNNING_EXAMPLE].caption + ".")


CELLS_DIR = "cells"  # one script per linked table: the rows of each of its cells (aura_eval.util.cells)


class Members:
    """The (index row, run) pairs a cell's members point to, flattened into `pairs` for the index:
    first the analysis frame's rows in order (so a frame row number is its own position), then any
    named member (`run|item`, `|item`: aura_eval.util.cells.key) the frame lacks. -1: no such run (an
    item alone) or an item the index lacks (which would be a bug)."""

    def __init__(self, rows: list[list], runs: list[str], frame_path=None):
        self.row_at = {row[0]: i for i, row in enumerate(rows)}
        self.run_at = {run: k for k, run in enumerate(runs)}
        self.pairs: list[int] = []
        self.position: dict[tuple[int, int], int] = {}
        if frame_path:
            frame = read_csv(frame_path, usecols=["run", "item_id"], dtype=str)
            for item, run in zip(frame["item_id"], frame["run"]):
                self._add((self.row_at.get(item, -1), self.run_at.get(run, -1)))

    def _add(self, pair: tuple[int, int]) -> int:
        self.pairs.extend(pair)
        self.position.setdefault(pair, len(self.pairs) // 2 - 1)
        return len(self.pairs) // 2 - 1

    def of(self, member) -> int:
        if isinstance(member, int):
            return member
        run, item = member.split("|", 1)
        pair = (self.row_at.get(item, -1), self.run_at.get(run, -1))
        return self.position[pair] if pair in self.position else self._add(pair)


def write_cell_scripts(paths, out_dir: Path, members: Members) -> int:
    """cells/<table>.js for each table's recorded cells (`<table>.cells.json` beside its CSV): the
    caption, the reader's column headers, each row's name (its key columns) and member lists."""
    import pandas as pd

    from aura_eval.util import cells, table_files
    from aura_eval.artefact_registry import TABLES

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for path in map(Path, paths):
        name = path.name[:-len(".cells.json")]
        recorded = cells.read(path)
        table = unprotect_frame(pd.read_csv(path.with_name(f"{name}.csv"), dtype=str, keep_default_na=False))
        keys = [c for c in table.columns if c in table_files.KEY_COLUMNS  # the model cell names its run
                and not (c == "run" and "model" in table.columns)]
        rows = {pos: {"name": " · ".join(table.iloc[int(pos)][c] for c in keys if table.iloc[int(pos)][c]),
                      "cells": {column: {part: [members.of(m) for m in listed] for part, listed in lists.items()}
                                for column, lists in columns.items()}}
                for pos, columns in recorded.items()}
        headers = {c: table_files.header(c, name) for m in recorded.values() for c in m} | {cells.ROW: "the row"}
        data = {"caption": TABLES[name].caption, "headers": headers, "rows": rows}
        atomic_write_text(out_dir / f"{name}.js", f"AUDIT_CELLS[{script_json(name)}] = {_blob(data)};\n")
    return len(paths)


def _facts(items, excluded, prefixes, variations, pool, pairs) -> dict[str, dict]:
    """Domain, dimension, pair label and decision point of every row the index lists."""
    out = {i["item_id"]: {k: i[k] for k in ("domain", "dimension", "pair_label", "decision_point")} for i in items}
    for iid in excluded:
        source = pairs.get(iid) or variations.get(iid) or pool.get(iid) or {}
        prefix = prefixes.get(source.get("prefix_id"), {})
        label = source.get("pair_label") or ((pool.get(iid) or {}).get("classification") or {}).get("pair_label")
        out[iid] = {"domain": source.get("domain") or prefix.get("domain"),
                    "dimension": source.get("dimension"), "pair_label": label,
                    "decision_point": source.get("decision_point") or prefix.get("decision_point")}
    return out


def _item_context(iid, item, exclusion, facts, seeds, tags, prefixes, variations, reviews, pool, pairs, pair_reviews,
                  pair_of_source, calls) -> dict:
    pair = pairs.get(iid) or pair_of_source.get(iid)
    source_id = pair["source_item_id"] if iid in pairs else iid
    pooled = pool.get(source_id if iid in pairs else iid)
    variation = variations.get(source_id)
    prefix_id = ((item or {}).get("provenance") or {}).get("prefix_id") or (pair or variation or pooled or {}).get(
        "prefix_id")
    prefix = prefixes.get(prefix_id)
    seed_id = (item or pair or variation or pooled or prefix or {}).get("seed_id")
    seed, tag = seeds.get(seed_id), tags.get(seed_id)
    if item is not None:
        steps = item["steps"]
    elif iid in pairs:
        steps = pairs[iid].get("steps")
    else:
        steps = (variation or pooled or {}).get("steps") or (prefix or {}).get("steps")
    review = reviews.get(source_id)
    pair_review = pair_reviews.get(pair["item_id"]) if pair else None

    def keyed(scope, unit, row):
        return calls.key(scope, unit, row)

    if exclusion is not None:
        exclusion = {**exclusion, "title": LOSS_STAGES[exclusion["stage"]].title}
    return {"item_id": iid, "item": item, "exclusion": exclusion, "facts": facts, "seed": seed, "tag": tag,
            "tag_key": keyed("tag_steps", seed_id, tag), "prefix": prefix, "steps": steps,
            "is_original": facts.get("dimension") == "original" and iid not in pairs,
            "diff": step_diff((prefix or {}).get("steps"), steps) if prefix and steps is not None else [],
            "variation": variation, "variation_key": keyed("construct/vary", source_id, variation),
            "review": review, "review_keys": [keyed("construct/review_variations", source_id, v)
                                              for v in (review or {}).get("votes", [])],
            "classification": (pooled or {}).get("classification"),
            "classification_key": keyed("construct/classify", (pooled or {}).get("item_id"),
                                        (pooled or {}).get("classification")),
            "pair": pair, "pair_key": keyed("construct/generate_pairs", (pair or {}).get("source_item_id"), pair),
            "pair_review": pair_review,
            "pair_review_keys": [keyed("construct/review_pairs", pair["item_id"], v)
                                 for v in (pair_review or {}).get("votes", [])] if pair else []}


def audit_site(inputs: dict, index_path) -> dict:
    """audit_site job: the site in the folder of `index_path` (results/audit/, a directory output)."""
    Path(index_path).parent.mkdir(parents=True, exist_ok=True)
    return build(inputs, Path(index_path).parent)
