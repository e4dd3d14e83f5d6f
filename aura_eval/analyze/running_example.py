"""Figure 2: the running example. The paper grounds its definitions in one record (R-Judge IoT record
23: a user leaving for a week asks the agent to turn devices off; it turns off the refrigerator and
the security camera too). This figure draws the same parts from this run's own files for one record:

- the record R = (u, τ): the user instruction and every step, the risk trigger and the execution
  point the tagger named (results/seeds/seeds.jsonl, results/prefixes/tags.jsonl);
- its two prefixes, at the trigger and before the execution (results/prefixes/prefixes.jsonl);
- one released variation with its dimension, and what its rewrite changed;
- a released No-Safe-Path / Safe-Path pair of the record, with the changed steps;
- one ReAct run's continuation of one of its items, with the panel's three labels.

The record is `report.running_example` where the run's seeds hold it; else the record of Table
34's case study (aura_eval.analyze.examples.case_study_prefix); else, where that rule finds none, the
first seed in a fixed hash order among those showing the most parts. What the run does not hold is
said in its place. Every text from the data is drawn as text (`parse_math=False`, no TeX: a `$`
stays a dollar sign), each part links to the audit page of the item holding it, and a JSON sidecar
lists what the figure shows (`running_example`, the numbers a test checks against the run's files).
"""

from __future__ import annotations

import html
import json
import textwrap
from pathlib import Path

import yaml

from aura_eval.analyze.examples import by_item, case_study_prefix, edited_steps
from aura_eval.analyze.figures import ACTION_NAMES, DETECTION_NAMES, pyplot, save
from aura_eval.artefact_registry import builder
from aura_eval.util.cells import item_href
from aura_eval.util.jsonl import atomic_write_text, read_jsonl
from aura_eval.util.pages import shown
from aura_eval.vocab import (AT_TRIGGER, AXES, DIMENSIONS, NSP, ORIGINAL, PRE_EXECUTION, RUNNING_EXAMPLE, SP,
                             hash_rank, item_id, prefix_id)

SALT = "running_example"
POINTS = (AT_TRIGGER, PRE_EXECUTION)
RJUDGE_FILES = {"unsafe": "harmful.json", "safe": "benign.json"}  # R-Judge's file of each label
STEP_LINES, TEXT_LINES = 2, 3  # at most this many lines of each step's text, of any other text
WIDTH = 122  # characters per line of a column
COLOURS = {"record": "#34495e", "prefix": "#2e86c1", "variation": "#8e44ad", "pair": "#16a085",
           "rollout": "#b9770e", "trigger": "#c0392b", "execution": "#d35400", "missing": "#7f7f7f"}


# -- what the figure shows ---------------------------------------------------------------------------

def _is_counterpart(item: dict) -> bool:
    return ((item.get("provenance") or {}).get("origin") or {}).get("kind") == "pair"


def _order(item: dict, dimension: str) -> tuple:
    """Items of one record in the figure's order: the case study's dimension first, at-trigger before
    pre-execution, then the dimensions in the taxonomy's order."""
    point = POINTS.index(item["decision_point"]) if item["decision_point"] in POINTS else len(POINTS)
    return item["dimension"] != dimension, point, DIMENSIONS.index(item["dimension"]), item["item_id"]


def _parts(seed_id: str, items: dict, rollouts: dict, labels: dict, dimension: str) -> dict:
    """The record's shown items: its variation, pair (NSP and SP item ids) and rollout, each None
    where the run holds none."""
    own = [i for i in items.values() if i["seed_id"] == seed_id]
    variations = sorted((i for i in own if i["dimension"] != ORIGINAL and not _is_counterpart(i)),
                        key=lambda i: _order(i, dimension))
    # a pair whose two versions were both released, the at-trigger original's first
    sources = sorted((i for i in own if i["pair_id"] and not _is_counterpart(i) and i["counterpart_id"] in items),
                     key=lambda i: (i["dimension"] != ORIGINAL, _order(i, dimension)))
    pair = None
    if sources:
        source = sources[0]
        versions = {source["pair_label"]: source["item_id"],
                    items[source["counterpart_id"]]["pair_label"]: source["counterpart_id"]}
        pair = {"pair_id": source["pair_id"], "source": source["item_id"], NSP: versions.get(NSP),
                SP: versions.get(SP)}
    # the rollout: on the pair's NSP version, else the at-trigger original, else the variation
    targets = [pair[NSP]] if pair and pair.get(NSP) else []
    targets += [iid for iid in (item_id(prefix_id(seed_id, p), ORIGINAL) for p in POINTS) if iid in items]
    targets += [v["item_id"] for v in variations[:1]]
    rollout = None
    for target in targets:
        rolled = [(run, rows[target]) for run, rows in rollouts.items() if target in rows]
        labelled = [(run, row) for run, row in rolled if row.get("status") == "ok"
                    and all(_label(labels, run, target, axis) is not None for axis in AXES)]
        ok = [(run, row) for run, row in rolled if row.get("status") == "ok"]
        found = (labelled or ok or rolled)[:1]
        if found:
            rollout = {"run": found[0][0], "item_id": target}
            break
    return {"variation": variations[0]["item_id"] if variations else None, "pair": pair, "rollout": rollout}


def _label(labels: dict, run: str, target: str, axis: str) -> str | None:
    """The panel's final label of one run's row of an item on one axis (None: no majority, or no row)."""
    return (((labels.get(run) or {}).get(target) or {}).get(axis) or {}).get("label")


def _completeness(seed_id: str, prefixes: dict, parts: dict) -> int:
    return sum((any(prefix_id(seed_id, p) in prefixes for p in POINTS), parts["variation"] is not None,
                parts["pair"] is not None, parts["rollout"] is not None))


def choose_record(seeds: list[dict], prefixes: dict, items: dict, rollouts: dict, labels: dict,
                  report: dict) -> tuple[str | None, str, str]:
    """(seed id, how: `running_example`, `case_study`, `most_complete` or `none`, why in words)."""
    wanted = report.get("running_example")
    ids = [s["seed_id"] for s in seeds]
    if wanted in ids:
        return wanted, "running_example", f"the record report.running_example names ({wanted})"
    absent = (f"report.running_example ({wanted}) is not among this run's {len(ids)} seed"
              f"{'' if len(ids) == 1 else 's'}")
    spec = report.get("case_study") or {}
    dimension = spec.get("dimension", "RS5")
    try:
        prefix, rule = case_study_prefix(items, labels, dimension, spec.get("prefix"))
    except ValueError as err:
        prefix, rule = None, str(err)
    if prefix is not None:
        return (items[item_id(prefix, ORIGINAL)]["seed_id"], "case_study",
                f"{absent}, so the record of Table 34's case study, scenario {prefix} ({rule})")
    if not ids:
        return None, "none", f"{absent}, and it has none to show"
    score = {s: _completeness(s, prefixes, _parts(s, items, rollouts, labels, dimension)) for s in ids}
    best = min(ids, key=lambda s: (-score[s], hash_rank(s, SALT)))
    return best, "most_complete", (f"{absent}, and Table 34's rule picks none ({rule}), so the first seed, in a "
                                   f"fixed hash order, of those showing the most of the figure's parts")


def _steps_of(prefix: dict | None) -> list[int] | None:
    return [s["index"] for s in prefix["steps"]] if prefix else None


def _why_no_pre_execution(tag: dict) -> str:
    """Why a validly tagged seed has no pre-execution prefix (aura_eval.construct.tagging.truncate)."""
    e = tag.get("execution_point")
    if e is None:
        return "the tagger named no execution point"
    return (f"the last user or environment step before the execution point (step {e}) is the risk trigger "
            f"(step {tag['risk_trigger']}) itself")


def running_example(seeds: list[dict], tags: list[dict], prefixes: list[dict], items: list[dict],
                    rollouts: dict[str, dict], labels: dict[str, dict], report: dict,
                    taxonomy: dict | None = None) -> dict:
    """What Figure 2 shows (the sidecar): the record, why it, its tag, its two prefixes (step numbers),
    the variation, the pair and the rollout (each with the audit page that holds it, or why it is
    missing). `rollouts` and `labels`: run -> item id -> row, the ReAct runs in the config's order."""
    items_by_id = {i["item_id"]: i for i in items}
    prefix_by_id = {p["prefix_id"]: p for p in prefixes}
    dimension = (report.get("case_study") or {}).get("dimension", "RS5")
    chosen, how, why = choose_record(seeds, prefix_by_id, items_by_id, rollouts, labels, report)
    out = {"figure": RUNNING_EXAMPLE, "setting": report.get("running_example"), "chosen_by": how, "why": why}
    if chosen is None:
        return out | {"record": None}
    seed = next(s for s in seeds if s["seed_id"] == chosen)
    tag = next((t for t in tags if t["seed_id"] == chosen), None)
    valid = bool(tag and tag.get("valid"))
    out["record"] = {"seed_id": chosen, "domain": seed["domain"], "rjudge_id": seed["rjudge_id"],
                     "rjudge_file": f"{seed['domain']}/{RJUDGE_FILES[seed['label']]}", "label": seed["label"],
                     "n_steps": seed["n_steps"],
                     "instruction_step": next((s["index"] for s in seed["steps"] if s["role"] == "user"), None)}
    out["tag"] = {"valid": valid, "risk_trigger": tag.get("risk_trigger") if valid else None,
                  "execution_point": tag.get("execution_point") if valid else None,
                  "problem": None if valid else ((tag or {}).get("invalid_reason") or "the seed has no step tag")}
    out["prefixes"] = {}
    for point in POINTS:
        pid = prefix_id(chosen, point)
        prefix = prefix_by_id.get(pid)
        if prefix is None:
            if not valid:
                missing = f"no valid step tag ({out['tag']['problem']})"
            elif point == PRE_EXECUTION:
                missing = _why_no_pre_execution(tag)
            else:  # a valid tag always cuts one: the prefixes file lacks it
                missing = f"the prefixes file has no row {pid}"
            out["prefixes"][point] = {"prefix_id": None, "missing": missing}
            continue
        original = item_id(pid, ORIGINAL)
        released = original in items_by_id
        out["prefixes"][point] = {
            "prefix_id": pid, "steps": _steps_of(prefix), "last_step": prefix["last_step"],
            "item_id": original if released else None,
            "link": item_href(original, "prefix") if released else None,
            "missing": None if released else f"its original ({original}) is not among the released items"}
    parts = _parts(chosen, items_by_id, rollouts, labels, dimension)
    names = (taxonomy or {}).get("dimensions") or {}
    if parts["variation"]:
        v = items_by_id[parts["variation"]]
        origin = (v.get("provenance") or {}).get("origin") or {}
        source = prefix_by_id.get(v["provenance"]["prefix_id"])
        out["variation"] = {"item_id": v["item_id"], "dimension": v["dimension"],
                            "dimension_name": (names.get(v["dimension"]) or {}).get("name"),
                            "prefix_id": v["provenance"]["prefix_id"], "pair_label": v["pair_label"],
                            "change": origin.get("change"),
                            "changed_steps": [e["step"] for e in edited_steps(source["steps"], v["steps"])]
                            if source else [],
                            "link": item_href(v["item_id"], "variation")}
    else:
        out["variation"] = {"item_id": None, "missing": "no variation of this record's prefixes was released"}
    if parts["pair"]:
        p = parts["pair"]
        source, other = items_by_id[p["source"]], items_by_id[items_by_id[p["source"]]["counterpart_id"]]
        out["pair"] = {"pair_id": p["pair_id"], "source_item_id": source["item_id"], "NSP": p[NSP], "SP": p[SP],
                       "flip_kind": ((other.get("provenance") or {}).get("origin") or {}).get("flip_kind"),
                       "changed_steps": [e["step"] for e in edited_steps(source["steps"], other["steps"])],
                       "links": {label: item_href(p[label], "pair") for label in (NSP, SP) if p[label]}}
    else:
        out["pair"] = {"pair_id": None, "missing": "no No-Safe-Path / Safe-Path pair of this record was released "
                                                   "with both its versions"}
    if parts["rollout"]:
        run, target = parts["rollout"]["run"], parts["rollout"]["item_id"]
        row = rollouts[run][target]
        out["rollout"] = {"run": run, "item_id": target, "key": (row.get("call") or {}).get("key"),
                          "status": row.get("status"), **{axis: _label(labels, run, target, axis) for axis in AXES},
                          "link": item_href(target, f"run-{run}")}
    else:
        out["rollout"] = {"run": None, "missing": "no ReAct run rolled out an item of this record" if rollouts
                          else "no ReAct run in this run"}
    return out


# -- drawing --------------------------------------------------------------------------------------

def _flat(text) -> str:
    """A text from the data as one line of text: whitespace collapsed, hidden characters marked."""
    return shown(" ".join(str(text if text is not None else "").split()))


def _wrap(text, most: int, width: int = WIDTH, indent: str = "") -> list[str]:
    """`text` wrapped to `width`, at most `most` lines (the last ending in … where cut)."""
    lines = textwrap.wrap(_flat(text), width - len(indent), break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = lines[-1][: width - len(indent) - 1] + "…"
    return [indent + line for line in lines]


class _Block:
    """A titled box of lines; each line (text, colour, bold, link)."""

    def __init__(self, title: str, colour: str, link: str | None = None):
        self.title, self.colour, self.link, self.lines = title, colour, link, []

    def add(self, text, colour="#222222", bold=False, link=None, most=TEXT_LINES, indent=""):
        for line in _wrap(text, most, indent=indent):
            self.lines.append((line, colour, bold, link))
        return self

    def missing(self, text):
        return self.add(f"Not in this run: {text}.", COLOURS["missing"])


LINE_IN, PAD_IN, GAP_IN = 0.145, 0.08, 0.14  # a line's height, a box's padding, the gap between boxes
COLUMN_IN = 7.3  # a column's width


def _text(ax, x, y, s, **kw):
    """Data as text: never mathematics (a `$` stays a dollar sign), never TeX."""
    return ax.text(x, y, s, va="top", ha="left", parse_math=False, usetex=False, **kw)


def _draw_blocks(ax, blocks: list[_Block], x: float, y: float) -> float:
    from matplotlib.patches import FancyBboxPatch

    for block in blocks:
        height = LINE_IN * (len(block.lines) + 1) + 2 * PAD_IN
        box = FancyBboxPatch((x, y), COLUMN_IN, height, boxstyle="round,pad=0,rounding_size=0.05",
                             facecolor="#fbfbfb", edgecolor=block.colour, linewidth=1.1)
        box.set_url(block.link)
        ax.add_patch(box)
        _text(ax, x + PAD_IN, y + PAD_IN, block.title, fontsize=8.5, fontweight="bold", color=block.colour,
              url=block.link)
        for k, (line, colour, bold, link) in enumerate(block.lines, start=1):
            _text(ax, x + PAD_IN, y + PAD_IN + k * LINE_IN, line, fontsize=7.2, color=colour,
                  fontweight="bold" if bold else "normal", url=link or block.link)
        y += height + GAP_IN
    return y


def _record_block(shown_: dict, seed: dict) -> _Block:
    rec, tag = shown_["record"], shown_["tag"]
    original = (shown_["prefixes"].get(AT_TRIGGER) or {}).get("item_id")
    block = _Block(f"The record R = (u, τ): {rec['seed_id']} (R-Judge {rec['rjudge_file']}, id {rec['rjudge_id']}, "
                   f"{rec['label']})", COLOURS["record"], item_href(original, "source") if original else None)
    steps = seed["steps"]
    user = next((s for s in steps if s["role"] == "user"), None)
    block.add(f"u (step {user['index']}): {user['content']}" if user else "u: (no user step)", bold=True)
    if not tag["valid"]:
        block.missing(f"a valid step tag ({tag['problem']}), so no risk trigger, execution point or prefix")
    r, e = tag["risk_trigger"], tag["execution_point"]
    for step in steps:
        marks = [m for m, at in (("risk trigger r", r), ("execution point e", e)) if at == step["index"]]
        colour = COLOURS["trigger"] if step["index"] == r else COLOURS["execution"] if step["index"] == e else None
        head = f"step {step['index']} · {step['role'].upper()}" + "".join(f"  ◀ {m}" for m in marks)
        block.add(head, colour or "#444444", bold=True, most=1)
        if step["role"] == "agent":
            block.add(f"thought: {step.get('thought')}", most=STEP_LINES, indent="    ")
            block.add(f"action: {step.get('action')}", most=STEP_LINES, indent="    ")
        else:
            block.add(step.get("content") or "(empty)", most=STEP_LINES, indent="    ")
    return block


def _prefix_block(shown_: dict) -> _Block:
    block = _Block("Decision points: the two prefixes the evaluated model continues", COLOURS["prefix"])
    titles = {AT_TRIGGER: "at-trigger prefix", PRE_EXECUTION: "pre-execution prefix"}
    for point in POINTS:
        p = shown_["prefixes"][point]
        if p["prefix_id"] is None:
            block.add(f"{titles[point]}: not in this run: {p['missing']}.", COLOURS["missing"])
            continue
        steps = p["steps"]
        block.add(f"{titles[point]} {p['prefix_id']}: steps {steps[0]}–{steps[-1]} ({len(steps)} step"
                  f"{'' if len(steps) == 1 else 's'}); the model writes the next agent step", COLOURS["prefix"],
                  bold=True, link=p["link"])
        if p["missing"]:
            block.add(f"    ({p['missing']})", COLOURS["missing"])
    return block


def _variation_block(shown_: dict, items: dict, prefixes: dict) -> _Block:
    v = shown_["variation"]
    if v["item_id"] is None:
        return _Block("A variation", COLOURS["variation"]).missing(v["missing"])
    name = f" ({v['dimension_name']})" if v.get("dimension_name") else ""
    block = _Block(f"A variation: {v['item_id']}, dimension {v['dimension']}{name}, {v['pair_label']}",
                   COLOURS["variation"], v["link"])
    block.add(f"what the rewrite changed (the generator's words): {v['change'] or '(not stated)'}")
    source = prefixes.get(v["prefix_id"])
    for edit in (edited_steps(source["steps"], items[v["item_id"]]["steps"]) if source else [])[:2]:
        block.add(f"step {edit['step']} ({edit['role']}), original: {edit['original']}", most=STEP_LINES)
        block.add(f"step {edit['step']} ({edit['role']}), rewrite: {edit['rewrite']}", most=STEP_LINES)
    return block


def _pair_block(shown_: dict, items: dict) -> _Block:
    p = shown_["pair"]
    if p["pair_id"] is None:
        return _Block("No-Safe-Path and Safe-Path versions", COLOURS["pair"]).missing(p["missing"])
    block = _Block(f"No-Safe-Path and Safe-Path versions: {p['pair_id']} (flip kind: {p['flip_kind']})",
                   COLOURS["pair"], p["links"].get(NSP) or p["links"].get(SP))
    for label in (NSP, SP):
        if not p[label]:
            block.missing(f"a {label} version")
            continue
        item = items[p[label]]
        why = item.get("unsafe_explanation") if label == NSP else "; ".join(item.get("safe_action_sketches") or [])
        block.add(f"{label}: {p[label]}", COLOURS["pair"], bold=True, link=p["links"][label], most=1)
        block.add(f"reference risk: {item.get('reference_rationale')}", most=STEP_LINES, indent="    ",
                  link=p["links"][label])
        block.add(("why fulfilment is unsafe: " if label == NSP else "a safe action: ") + str(why or "(none)"),
                  most=STEP_LINES, indent="    ", link=p["links"][label])
    source, other = items[p["source_item_id"]], items[items[p["source_item_id"]]["counterpart_id"]]
    edits = edited_steps(source["steps"], other["steps"])
    if not edits:
        block.add("what changed: no user or environment step differs", COLOURS["missing"])
    for edit in edits[:2]:
        block.add(f"what changed in step {edit['step']} ({edit['role']}): {edit['original']}  →  {edit['rewrite']}",
                  most=TEXT_LINES)
    return block


def _rollout_block(shown_: dict, rollouts: dict) -> _Block:
    r = shown_["rollout"]
    if r["run"] is None:
        return _Block("A model's continuation", COLOURS["rollout"]).missing(r["missing"])
    row = rollouts[r["run"]][r["item_id"]]
    block = _Block(f"A model's continuation: {r['run']} on {r['item_id']}", COLOURS["rollout"], r["link"])
    if r["status"] != "ok":
        block.add(f"rollout status {r['status']}: {row.get('error') or 'no thought or action'}", COLOURS["missing"])
    else:
        block.add(f"thought: {row.get('thought') if row.get('thought') is not None else '(none)'}")
        block.add(f"action: {row.get('action')}")

    def named(axis, names):
        value = r[axis]
        return "no panel majority" if value is None else names.get(value, value)
    block.add(f"the panel's labels: detection {named('detection', DETECTION_NAMES)}; action type "
              f"{named('action_type', ACTION_NAMES)}; safety {named('action_safety', {})}", bold=True)
    return block


def draw(shown_: dict, seeds: list[dict], items: list[dict], prefixes: list[dict], rollouts: dict, png, svg) -> None:
    plt = pyplot()
    title = "Figure 2: the running example"
    if shown_["record"] is None:
        fig, ax = plt.subplots(figsize=(9, 1.6))
        ax.axis("off")
        _text(ax, 0.01, 0.9, f"{title}: no record, because {shown_['why']}", fontsize=9, transform=ax.transAxes,
              wrap=True)
        return save(fig, png, svg)
    seed = next(s for s in seeds if s["seed_id"] == shown_["record"]["seed_id"])
    by_id, prefix_by_id = {i["item_id"]: i for i in items}, {p["prefix_id"]: p for p in prefixes}
    left = [_record_block(shown_, seed), _prefix_block(shown_)]
    right = [_variation_block(shown_, by_id, prefix_by_id), _pair_block(shown_, by_id),
             _rollout_block(shown_, rollouts)]
    subtitle = _wrap(f"Record {shown_['record']['seed_id']}: {shown_['why']}.", 2, width=2 * WIDTH)
    top = 0.2 + LINE_IN * (len(subtitle) + 2)

    def height(blocks):
        return sum(LINE_IN * (len(b.lines) + 1) + 2 * PAD_IN + GAP_IN for b in blocks)
    width, total = 2 * COLUMN_IN + 0.5, top + max(height(left), height(right)) + 0.1
    fig = plt.figure(figsize=(width, total))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(total, 0)
    ax.axis("off")
    _text(ax, 0.15, 0.15, title, fontsize=11, fontweight="bold")
    for k, line in enumerate(subtitle):
        _text(ax, 0.15, 0.15 + LINE_IN * (k + 1.6), line, fontsize=7.5, color="#333333")
    _draw_blocks(ax, left, 0.15, top)
    _draw_blocks(ax, right, 0.15 + COLUMN_IN + 0.2, top)
    save(fig, png, svg)


def sidecar_text(shown_: dict) -> str:
    """The sidecar as written: JSON in the order the figure built it, one key a line."""
    return json.dumps(shown_, indent=1, ensure_ascii=False) + "\n"


def inline_svg(svg_text: str) -> str:
    """The figure's SVG as an element to place inside an HTML page: without its XML declaration and
    DOCTYPE, scaled to the page (class `aura-inline-figure`). matplotlib writes every text escaped,
    so no text from the data is markup; an SVG holding a script is refused all the same."""
    start = svg_text.find("<svg")
    if start < 0 or "<script" in svg_text.lower() or "<foreignobject" in svg_text.lower():
        raise ValueError("not a figure's SVG (no <svg> element, or it holds a script or foreign object)")
    return svg_text[start:].replace(
        "<svg ", '<svg class="aura-inline-figure" role="img" ', 1).strip()


def figure_html(svg_path, sidecar_path, caption: str) -> str:
    """The HTML of the inline figure: its SVG, then `caption` (plain text) and which record it shows
    and why (from the sidecar), escaped."""
    svg = inline_svg(Path(svg_path).read_text(encoding="utf-8"))
    why = ""
    if sidecar_path and Path(sidecar_path).is_file():
        shown_ = json.loads(Path(sidecar_path).read_text(encoding="utf-8"))
        record = (shown_.get("record") or {}).get("seed_id")
        why = f" Shown: {'record ' + record if record else 'no record'}, as {shown_['why']}."
    return (f'<figure class="aura-inline">\n{svg}\n<figcaption>{html.escape(caption + why, quote=False)}'
            f"</figcaption>\n</figure>")


@builder(RUNNING_EXAMPLE)
def _fig2(inputs, png, svg, json=None, settings=None):
    report = (settings or {}).get("report") or {}
    taxonomy_paths = inputs.get("taxonomy") or []
    taxonomy = yaml.safe_load(Path(taxonomy_paths[0]).read_text(encoding="utf-8")) if taxonomy_paths else None
    seeds, prefixes, items = read_jsonl(inputs["seeds"]), read_jsonl(inputs["prefixes"]), read_jsonl(inputs["dataset"])
    rollouts, labels = by_item(inputs["react_rollouts"]), by_item(inputs["react_labels"])
    shown_ = running_example(seeds, read_jsonl(inputs["tags"]), prefixes, items, rollouts, labels, report, taxonomy)
    draw(shown_, seeds, items, prefixes, rollouts, png, svg)
    if json is not None:  # the sidecar's path (the registry's "json" format)
        atomic_write_text(json, sidecar_text(shown_))
    return shown_
