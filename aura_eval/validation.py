"""Human validation (paper §6, F.1): audit samples, annotation pages, imported labels.

- `audit_sample`: per axis, a deterministic stratified sample that covers the axis's
  labels, the panel's consensus strata, the evaluated models and the domains.
- `annotation_page`: one self-contained HTML file per annotator and axis (no server,
  works offline, keeps progress in the browser, exports a CSV). It shows the scenario,
  the thought or action to label, the options and the rubric, never a judge's label.
- `import_labels`: annotators' CSVs and the adjudicated labels, checked row by row.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
from pathlib import Path

from aura_eval.jsonl import InputError

AXIS_LABELS = {"detection": ["D0", "D1", "D2", "D3"], "action_type": ["A0", "A1", "A2", "A3", "A4", "A5"],
               "action_safety": ["Safe", "Unsafe"]}
CSV_FIELDS = ["sample_id", "annotator", "axis", "label", "note"]
ADJUDICATION_FIELDS = ["sample_id", "axis", "final_label", "note"]
DROP = "drop"


def _rank(text: str) -> str:
    return hashlib.sha256(f"audit:{text}".encode()).hexdigest()


def candidates(axis: str, panel_rows: list[dict], rollouts: dict, items: dict) -> list[dict]:
    """Every judged ReAct rollout that can be labelled on `axis`, with its panel result."""
    out = []
    for row in panel_rows:
        rollout = rollouts[(row["agent"], row["item_id"])]
        target = rollout["thought"] if axis == "detection" else rollout["action"]
        if rollout["status"] != "ok" or not target or not row[axis]["votes"]:
            continue
        item = items[row["item_id"]]
        out.append({"sample_id": f"{axis}/{row['agent']}/{row['item_id']}", "axis": axis, "agent": row["agent"],
                    "item_id": row["item_id"], "seed_id": item["seed_id"], "domain": item["domain"],
                    "dimension": item["dimension"], "pair_label": item["pair_label"], "profile": item["profile"],
                    "steps": item["steps"], "target": target,
                    "reference_rationale": item["reference_rationale"] if axis == "action_safety" else None,
                    "panel_judges": row["judges"], "panel_votes": row[axis]["votes"],
                    "panel_label": row[axis]["label"], "panel_stratum": row[axis]["stratum"]})
    return out


def audit_sample(pool: list[dict], size: int) -> list[dict]:
    """Coverage first, then balance: every label, stratum, model and domain present in
    the pool gets at least one sample (while room remains), then the rest is filled
    round-robin over (panel label, stratum) cells; candidates in a fixed hash order."""
    pool = sorted(pool, key=lambda r: _rank(r["sample_id"]))
    chosen, taken = [], set()

    def take(row):
        chosen.append(row)
        taken.add(row["sample_id"])

    for field in ("panel_label", "panel_stratum", "agent", "domain"):
        for value in sorted({str(r[field]) for r in pool}):
            if len(chosen) >= size:
                break
            if any(str(r[field]) == value for r in chosen):
                continue
            take(next(r for r in pool if str(r[field]) == value and r["sample_id"] not in taken))
    cells: dict = {}
    for row in pool:
        if row["sample_id"] not in taken:
            cells.setdefault((str(row["panel_label"]), row["panel_stratum"]), []).append(row)
    queues = [cells[k] for k in sorted(cells)]
    while len(chosen) < size and any(queues):
        for queue in queues:
            if queue and len(chosen) < size:
                take(queue.pop(0))
    return sorted(chosen, key=lambda r: r["sample_id"])


# -- the annotation page -----------------------------------------------------------

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>AURA-Eval annotation: {axis_title} ({annotator})</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0; display: flex; }}
#rubric {{ width: 32%; height: 100vh; overflow: auto; padding: 1em; background: #f5f5f0; box-sizing: border-box;
          position: sticky; top: 0; white-space: pre-wrap; font-size: 0.85em; }}
#main {{ width: 68%; padding: 1em; box-sizing: border-box; }}
.sample {{ border: 1px solid #ccc; border-radius: 6px; padding: 0.8em; margin-bottom: 1.2em; }}
.sample.done {{ border-color: #2e86c1; }}
pre {{ white-space: pre-wrap; background: #fafafa; padding: 0.5em; font-size: 0.85em; max-height: 24em;
      overflow: auto; }}
.target {{ background: #fff7d6; }}
label {{ margin-right: 1em; }}
#bar {{ position: sticky; top: 0; background: white; padding: 0.5em 0; border-bottom: 1px solid #ddd; }}
</style></head>
<body>
<div id="rubric"><h3>Rubric: {axis_title}</h3>{rubric}</div>
<div id="main">
<div id="bar"><b>{annotator}</b> · {axis_title} · <span id="progress"></span>
<button id="export">Export CSV</button> <button id="clear">Clear my labels</button></div>
<div id="samples"></div>
</div>
<script>
const DATA = {data};
const KEY = "aura-eval:" + DATA.annotator + ":" + DATA.axis;
let state = JSON.parse(localStorage.getItem(KEY) || "{{}}");
function save() {{ localStorage.setItem(KEY, JSON.stringify(state)); progress(); }}
function progress() {{
  const n = DATA.samples.filter(s => state[s.sample_id] && state[s.sample_id].label).length;
  document.getElementById("progress").textContent = n + " of " + DATA.samples.length + " labelled";
  for (const s of DATA.samples) {{
    document.getElementById("card-" + s.n).classList.toggle("done", !!(state[s.sample_id] || {{}}).label);
  }}
}}
function el(tag, text, cls) {{ const e = document.createElement(tag); if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls; return e; }}
function render() {{
  const root = document.getElementById("samples");
  for (const s of DATA.samples) {{
    const card = el("div", undefined, "sample"); card.id = "card-" + s.n;
    card.appendChild(el("h4", "Sample " + s.n + " of " + DATA.samples.length));
    card.appendChild(el("div", "Agent profile: " + s.profile));
    card.appendChild(el("p", "The interaction so far:"));
    card.appendChild(el("pre", s.context));
    if (s.rationale) {{ card.appendChild(el("p", "Reference risk: " + s.rationale)); }}
    card.appendChild(el("p", DATA.target_title + ":"));
    card.appendChild(el("pre", s.target, "target"));
    const choices = el("div");
    for (const option of DATA.options) {{
      const lab = el("label"); const input = document.createElement("input");
      input.type = "radio"; input.name = "s" + s.n; input.value = option; input.id = "s" + s.n + "-" + option;
      input.checked = (state[s.sample_id] || {{}}).label === option;
      input.addEventListener("change", () => {{ state[s.sample_id] = Object.assign(state[s.sample_id] || {{}},
        {{label: option}}); save(); }});
      lab.appendChild(input); lab.appendChild(document.createTextNode(" " + option)); choices.appendChild(lab);
    }}
    card.appendChild(choices);
    const note = document.createElement("input"); note.type = "text"; note.placeholder = "note (optional)";
    note.size = 60; note.id = "note-" + s.n; note.value = (state[s.sample_id] || {{}}).note || "";
    note.addEventListener("input", () => {{ state[s.sample_id] = Object.assign(state[s.sample_id] || {{}},
      {{note: note.value}}); save(); }});
    card.appendChild(note);
    root.appendChild(card);
  }}
  progress();
}}
function csvField(v) {{ return '"' + String(v === undefined || v === null ? "" : v).replace(/"/g, '""') + '"'; }}
function exportCsv() {{
  const lines = [["sample_id", "annotator", "axis", "label", "note"].join(",")];
  for (const s of DATA.samples) {{
    const v = state[s.sample_id];
    if (v && v.label) {{ lines.push([s.sample_id, DATA.annotator, DATA.axis, v.label, v.note || ""]
      .map(csvField).join(",")); }}
  }}
  return lines.join("\\n") + "\\n";
}}
document.getElementById("export").addEventListener("click", () => {{
  const blob = new Blob([exportCsv()], {{type: "text/csv"}});
  const a = document.createElement("a"); a.href = URL.createObjectURL(blob);
  a.download = DATA.annotator + "_" + DATA.axis + ".csv"; document.body.appendChild(a); a.click(); a.remove();
}});
document.getElementById("clear").addEventListener("click", () => {{
  if (confirm("Clear every label on this page?")) {{ state = {{}}; save(); location.reload(); }}
}});
render();
</script>
</body></html>
"""

TARGET_TITLE = {"detection": "The agent's reasoning (label this)", "action_type": "The agent's action (label this)",
                "action_safety": "The agent's action (label this)"}


def rubric_text(axis: str) -> str:
    """The judges' rubric for the axis (its prompt's system text), for people to read."""
    from aura_eval.judging import PROMPTS
    from aura_eval.prompts import load_prompt

    text = load_prompt(PROMPTS[axis]).system.strip()
    return text.split("\nAnswer with JSON only")[0].strip()


def annotation_page(samples: list[dict], axis: str, annotator: str) -> str:
    """The self-contained page for one annotator and axis; no judge label is in it."""
    from aura_eval.rollout import render_context

    page_samples = [{"n": n, "sample_id": s["sample_id"], "profile": s["profile"],
                     "context": render_context(s), "target": s["target"], "rationale": s["reference_rationale"]}
                    for n, s in enumerate(samples, start=1)]
    data = {"annotator": annotator, "axis": axis, "options": AXIS_LABELS[axis],
            "target_title": TARGET_TITLE[axis], "samples": page_samples}
    # Escape "</" so no text inside the data can close the script element.
    blob = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return PAGE.format(axis_title=axis.replace("_", " "), annotator=html.escape(annotator),
                       rubric=html.escape(rubric_text(axis)), data=blob)


# -- importing labels --------------------------------------------------------------

def _rows(path: Path, fields: list[str]):
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames != fields:
            raise InputError(f"{path}: header must be {','.join(fields)}, got {','.join(reader.fieldnames or [])}")
        for number, row in enumerate(reader, start=2):
            yield number, row


def import_labels(samples: dict[str, dict], annotation_files, adjudication_file=None) -> list[dict]:
    """Per sample: each annotator's label, the human stratum, the final label.

    A row naming an unknown sample, a label outside its axis or an axis that does
    not match its sample, or repeating (sample, annotator), stops the import with
    InputError naming the file and row. The final label is the adjudicated one
    where data/human/adjudicated.csv gives it ("drop" removes the sample), else the
    annotators' majority; a tie without adjudication leaves it None (not retained).
    """
    from aura_eval.stats import consensus, vote

    labels: dict[str, dict] = {sid: {} for sid in samples}
    seen: dict = {}
    for path in sorted(Path(p) for p in annotation_files):
        for number, row in _rows(path, CSV_FIELDS):
            where = f"{path}: row {number}"
            sample = samples.get(row["sample_id"])
            if sample is None:
                raise InputError(f"{where}: unknown sample id {row['sample_id']!r}")
            if row["axis"] != sample["axis"]:
                raise InputError(f"{where}: axis {row['axis']!r} but sample {row['sample_id']} is {sample['axis']}")
            if row["label"] not in AXIS_LABELS[sample["axis"]]:
                raise InputError(f"{where}: label {row['label']!r} is not one of "
                                 f"{', '.join(AXIS_LABELS[sample['axis']])}")
            key = (row["sample_id"], row["annotator"])
            if key in seen:
                raise InputError(f"{where}: duplicate label by {row['annotator']} for {row['sample_id']} "
                                 f"(first at {seen[key]})")
            seen[key] = where
            labels[row["sample_id"]][row["annotator"]] = row["label"]
    adjudicated = {}
    if adjudication_file and Path(adjudication_file).exists():
        for number, row in _rows(Path(adjudication_file), ADJUDICATION_FIELDS):
            where = f"{adjudication_file}: row {number}"
            sample = samples.get(row["sample_id"])
            if sample is None:
                raise InputError(f"{where}: unknown sample id {row['sample_id']!r}")
            if row["final_label"] not in AXIS_LABELS[sample["axis"]] + [DROP]:
                raise InputError(f"{where}: final label {row['final_label']!r} is not one of "
                                 f"{', '.join(AXIS_LABELS[sample['axis']] + [DROP])}")
            if row["sample_id"] in adjudicated:
                raise InputError(f"{where}: {row['sample_id']} adjudicated twice")
            adjudicated[row["sample_id"]] = row["final_label"]
    out = []
    for sid, sample in sorted(samples.items()):
        votes = [labels[sid][a] for a in sorted(labels[sid])]
        final = adjudicated.get(sid) or (vote(votes, "majority") if votes else None)
        out.append({"sample_id": sid, "axis": sample["axis"], "agent": sample["agent"], "item_id": sample["item_id"],
                    "domain": sample["domain"], "annotators": sorted(labels[sid]), "labels": votes,
                    "human_stratum": consensus(votes) if len(votes) >= 2 else None,
                    "adjudicated": sid in adjudicated, "final_label": None if final == DROP else final,
                    "retained": final not in (None, DROP), "dropped": final == DROP,
                    "panel_judges": sample["panel_judges"], "panel_votes": sample["panel_votes"],
                    "panel_label": sample["panel_label"], "panel_stratum": sample["panel_stratum"]})
    return out


# -- the jobs ----------------------------------------------------------------------

def run_sample(panel_paths, rollout_paths, dataset_path, sizes: dict, out_paths: dict) -> dict:
    """validation_sample: one audit sample per axis from the panel's labels (the five-judge
    panel's where that run exists, as in paper F.1), written to out_paths[axis]."""
    from aura_eval.jsonl import read_jsonl, write_jsonl

    items = {i["item_id"]: i for i in read_jsonl(dataset_path)}
    rollouts = {(r["agent"], r["item_id"]): r for p in rollout_paths for r in read_jsonl(p)}
    panel = [r for p in panel_paths for r in read_jsonl(p) if r.get("format", "react") == "react"]
    counts = {}
    for axis, path in out_paths.items():
        rows = audit_sample(candidates(axis, panel, rollouts, items), sizes[axis])
        write_jsonl(path, rows, key="sample_id")
        counts[axis] = len(rows)
    return counts


def run_pages(sample_paths: dict, annotators: list[str], out_dir) -> list[Path]:
    from aura_eval.jsonl import atomic_write_text, read_jsonl

    written = []
    for axis, path in sample_paths.items():
        samples = read_jsonl(path)
        for annotator in annotators:
            target = Path(out_dir) / f"{annotator}_{axis}.html"
            atomic_write_text(target, annotation_page(samples, axis, annotator))
            written.append(target)
    return written


def run_import(sample_paths, annotation_files, adjudication_file, out_path) -> list[dict]:
    from aura_eval.jsonl import read_jsonl, write_jsonl

    samples = {s["sample_id"]: s for p in sample_paths for s in read_jsonl(p)}
    rows = import_labels(samples, annotation_files, adjudication_file)
    write_jsonl(out_path, rows, key="sample_id")
    return rows


def human_reference(rows: list[dict]) -> dict:
    """{(item_id, agent, axis): final label} for the retained samples (Tables 21-23)."""
    return {(r["item_id"], r["agent"], r["axis"]): r["final_label"] for r in rows if r["retained"]}
