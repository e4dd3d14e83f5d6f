"""Human validation (paper §6, F.1): audit samples, annotation pages, imported labels.

- `audit_sample`: per axis, a deterministic stratified sample that covers the axis's
  labels, the panel's consensus strata, the evaluated models and the domains.
- `assign_annotators`: each sampled item goes to `per_sample` of the annotators (paper
  F.1.2: three of six), deterministically and balanced per axis.
- `annotation_page`: one self-contained HTML file per annotator and axis (no server,
  works offline, keeps progress in the browser, exports a CSV), with that annotator's
  samples only. It shows the scenario, the thought or action to label, the options and
  the rubric, never a judge's label.
- `import_labels`: annotators' CSVs and the adjudicated labels (UTF-8, with or without a byte-order
  mark; another encoding is refused, saying how to save the file), checked row by row; a sample
  is final once every assigned annotator labelled it, or once it is adjudicated.
"""

from __future__ import annotations

import codecs
import csv
import functools
import html
import io
from pathlib import Path

import jinja2

from aura_eval.util.csv_cells import protect_row, unprotect_row
from aura_eval.util.jsonl import InputError, atomic_write_text, read_jsonl, write_jsonl
from aura_eval.util.pages import finish, script_json, shown_data
from aura_eval.util.prompts import load_prompt
from aura_eval.evaluate.rollout import render_context
from aura_eval.util.stats import consensus, vote
from aura_eval.vocab import AXIS_LABELS, JUDGE_PROMPTS, hash_rank

CSV_FIELDS = ["sample_id", "annotator", "axis", "label", "note"]
ADJUDICATION_FIELDS = ["sample_id", "axis", "final_label", "note"]
DROP = "drop"


def _rank(text: str) -> str:
    return hash_rank(text, "audit:")


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
    round-robin over (panel label, stratum) cells; candidates in a fixed hash order.
    One sample per scenario (item id) while the pool has enough of them, as the paper's
    84 action-safety samples are 84 distinct scenarios (F.1.1): a second agent's rollout
    of an item already in the pool is taken only to fill what remains."""
    pool = sorted(pool, key=lambda r: _rank(r["sample_id"]))
    first: dict = {}
    for row in pool:
        first.setdefault(row["item_id"], row)
    repeats = [r for r in pool if first[r["item_id"]] is not r]
    pool = list(first.values())
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
    for row in repeats[:max(0, size - len(chosen))]:
        take(row)
    return sorted(chosen, key=lambda r: r["sample_id"])


def assign_annotators(samples: list[dict], annotators: list[str], per_sample: int) -> list[dict]:
    """The samples, each with `annotators`: `per_sample` distinct names of `annotators`
    (in their order there), the only people whose labels its import accepts.

    Samples are taken in a fixed hash order of their ids; each goes to the annotators with
    the fewest samples of its axis so far, then the fewest in all, then a hash order of
    (sample id, annotator). Taking the least loaded keeps an axis's counts within one of
    each other (10 samples, 3 of 6 annotators: 5 each). The result depends only on the ids
    and the names: not on the input order, nor on any random state.
    """
    if not 1 <= per_sample <= len(annotators) or len(set(annotators)) != len(annotators):
        raise ValueError(f"{per_sample} annotators per sample from {annotators!r}: need 1..{len(annotators)} "
                         f"distinct names")
    axis_load: dict = {}
    total = dict.fromkeys(annotators, 0)
    chosen: dict = {}
    for sample in sorted(samples, key=lambda s: hash_rank(s["sample_id"], "annotators:")):
        sid, axis = sample["sample_id"], sample["axis"]
        ranked = sorted(annotators, key=lambda a: (axis_load.get((axis, a), 0), total[a],
                                                   hash_rank(f"{sid}/{a}", "annotators:")))
        chosen[sid] = set(ranked[:per_sample])
        for name in chosen[sid]:
            axis_load[(axis, name)] = axis_load.get((axis, name), 0) + 1
            total[name] += 1
    return [{**s, "annotators": [a for a in annotators if a in chosen[s["sample_id"]]]} for s in samples]


def samples_of(samples: list[dict], annotator: str) -> list[dict]:
    """The samples assigned to `annotator`, in file order."""
    return [s for s in samples if annotator in s["annotators"]]


# -- the annotation page -----------------------------------------------------------

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE_TEMPLATE = "annotation_page.html.j2"


@functools.cache
def _page_template():
    """The page's Jinja2 template (aura_eval/evaluate/templates/annotation_page.html.j2).

    Samples, the annotator's name and the rubric are passed to it as values, never
    made part of template source, so braces or "{%" in them are printed as text.
    Autoescape is off because annotation_page escapes each value itself (html.escape,
    and aura_eval.util.pages.script_json for the JSON blob); keep_trailing_newline keeps the
    file's final newline.
    """
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return env.get_template(PAGE_TEMPLATE)


TARGET_TITLE = {"detection": "The agent's reasoning (label this)", "action_type": "The agent's action (label this)",
                "action_safety": "The agent's action (label this)"}


def rubric_text(axis: str) -> str:
    """The judges' rubric for the axis (its prompt's system text), for people to read."""
    text = load_prompt(JUDGE_PROMPTS[axis]).system.strip()
    return text.split("\nAnswer with JSON only")[0].strip()


def annotation_page(samples: list[dict], axis: str, annotator: str) -> str:
    """The self-contained page for one annotator and axis; no judge label is in it.

    Any text shows as text (aura_eval.util.pages): the samples' text, with NUL and bidirectional
    controls as visible marks, sits in a JSON blob no text can break out of, and the page carries
    a Content-Security-Policy that runs only its own script."""
    page_samples = [{"n": n, "sample_id": s["sample_id"],
                     **shown_data({"profile": s["profile"], "context": render_context(s), "target": s["target"],
                                   "rationale": s["reference_rationale"]})}
                    for n, s in enumerate(samples, start=1)]
    data = {"annotator": annotator, "axis": axis, "options": AXIS_LABELS[axis],
            "target_title": TARGET_TITLE[axis], "samples": page_samples}
    return finish(_page_template().render(axis_title=axis.replace("_", " "), annotator=html.escape(annotator),
                                          rubric=html.escape(rubric_text(axis)), data=script_json(data)))


# -- importing labels --------------------------------------------------------------

SAVE_AS = "save it as CSV UTF-8 (Excel: File > Save As > 'CSV UTF-8 (Comma delimited)')"


def _csv_text(path: Path) -> str:
    """The text of an annotation CSV: UTF-8, with or without the byte-order mark Excel's "CSV UTF-8"
    writes. Another encoding (UTF-16, Latin-1, ...) raises InputError naming the file and how to save it."""
    data = path.read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in data:
        raise InputError(f"{path}: the file is UTF-16 (Excel's 'Unicode Text'), not UTF-8; {SAVE_AS}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line}: byte 0x{data[err.start]:02x} is not UTF-8 (the file is in another "
                         f"encoding, such as Latin-1 or Windows-1252); {SAVE_AS}") from None


def _rows(path: Path, fields: list[str]):
    """(row number, row) of a labels CSV with exactly the header `fields` (the header is row 1), each
    cell without the one leading "'" the pages' export (and simulate_annotations) put before text a
    spreadsheet would run (aura_eval.util.csv_cells). A row with more fields than the header raises
    InputError naming the file and row."""
    reader = csv.DictReader(io.StringIO(_csv_text(path), newline=""))
    if reader.fieldnames != fields:
        raise InputError(f"{path}: header must be {','.join(fields)}, got {','.join(reader.fieldnames or [])}")
    for number, row in enumerate(reader, start=2):
        if None in row:  # DictReader's restkey: the fields past the header's
            raise InputError(f"{path}: row {number}: {len(fields) + len(row[None])} fields, but the header has "
                             f"{len(fields)} ({','.join(fields)}); quote a value that holds a comma")
        yield number, unprotect_row(row)


def import_labels(samples: dict[str, dict], annotation_files, adjudication_file=None) -> list[dict]:
    """Per sample: each annotator's label, the human stratum, the final label.

    The files are UTF-8 CSV, with or without a byte-order mark (Excel's "CSV UTF-8"); one in
    another encoding stops the import with InputError naming the file and how to save it. A row
    with more fields than the header, naming an unknown sample, an annotator the sample is not
    assigned to (its `annotators`), a label outside its axis or an axis that does not match its
    sample, or repeating (sample, annotator), stops the import with InputError naming the file
    and row.

    A sample is final (paper F.1.2: labelled by each of its three annotators, or adjudicated)
    only when it is adjudicated in data/human/adjudicated.csv (its label; "drop" removes the
    sample) or every annotator assigned to it has labelled it (`complete`; then the annotators'
    majority, and a tie without adjudication leaves it None: unresolved). A sample some assigned
    annotator has not labelled is `incomplete` and has no final label, whatever the labels it has
    agree on; its human stratum (unanimous, majority, tied) exists only once it is complete.
    """
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
            if row["annotator"] not in sample.get("annotators", []):
                raise InputError(f"{where}: annotator {row['annotator']!r} is not assigned to sample "
                                 f"{row['sample_id']} (assigned: {', '.join(sample.get('annotators', [])) or 'none'})")
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
            if row["final_label"] not in [*AXIS_LABELS[sample["axis"]], DROP]:
                raise InputError(f"{where}: final label {row['final_label']!r} is not one of "
                                 f"{', '.join([*AXIS_LABELS[sample['axis']], DROP])}")
            if row["sample_id"] in adjudicated:
                raise InputError(f"{where}: {row['sample_id']} adjudicated twice")
            adjudicated[row["sample_id"]] = row["final_label"]
    out = []
    for sid, sample in sorted(samples.items()):
        votes = [labels[sid][a] for a in sorted(labels[sid])]
        complete = bool(votes) and set(labels[sid]) == set(sample["annotators"])
        final = adjudicated.get(sid) or (vote(votes, "majority") if complete else None)
        out.append({"sample_id": sid, "axis": sample["axis"], "agent": sample["agent"], "item_id": sample["item_id"],
                    "domain": sample["domain"], "assigned": sample["annotators"],
                    "annotators": sorted(labels[sid]), "labels": votes, "complete": complete,
                    "incomplete": not complete and sid not in adjudicated,
                    "human_stratum": consensus(votes) if complete and len(votes) >= 2 else None,
                    "adjudicated": sid in adjudicated, "final_label": None if final == DROP else final,
                    "retained": final not in (None, DROP), "dropped": final == DROP,
                    "panel_judges": sample["panel_judges"], "panel_votes": sample["panel_votes"],
                    "panel_label": sample["panel_label"], "panel_stratum": sample["panel_stratum"]})
    return out


# -- the jobs ----------------------------------------------------------------------

def validation_sample(panel_paths, rollout_paths, dataset_path, sizes: dict, out_paths: dict, annotators: list[str],
               per_sample: int) -> dict:
    """validation_sample: one audit sample per axis from the panel's labels of the calibration
    agents (the five-judge panel's where that run exists, as in paper F.1), each sample
    assigned to `per_sample` annotators, written to out_paths[axis]."""
    items = {i["item_id"]: i for i in read_jsonl(dataset_path)}
    rollouts = {(r["agent"], r["item_id"]): r for p in rollout_paths for r in read_jsonl(p)}
    panel = [r for p in panel_paths for r in read_jsonl(p) if r.get("format", "react") == "react"]
    sampled = {axis: audit_sample(candidates(axis, panel, rollouts, items), sizes[axis]) for axis in out_paths}
    # One assignment over the three axes: balanced per axis, then in all.
    assigned = assign_annotators([row for rows in sampled.values() for row in rows], annotators, per_sample)
    counts = {}
    for axis, path in out_paths.items():
        rows = [row for row in assigned if row["axis"] == axis]
        write_jsonl(path, rows, key="sample_id")
        counts[axis] = len(rows)
    return counts


def annotation_pages(sample_paths: dict, annotators: list[str], out_dir) -> list[Path]:
    """One page per annotator and axis, with that annotator's samples only (maybe none)."""
    written = []
    for axis, path in sample_paths.items():
        samples = read_jsonl(path)
        for annotator in annotators:
            target = Path(out_dir) / f"{annotator}_{axis}.html"
            atomic_write_text(target, annotation_page(samples_of(samples, annotator), axis, annotator))
            written.append(target)
    return written


def import_human_labels(sample_paths, annotation_files, adjudication_file, out_path) -> list[dict]:
    samples = {s["sample_id"]: s for p in sample_paths for s in read_jsonl(p)}
    rows = import_labels(samples, annotation_files, adjudication_file)
    write_jsonl(out_path, rows, key="sample_id")
    return rows


def simulate_annotations(sample_paths, out_paths, simulation: dict) -> dict:
    """simulate_annotations (a simulated run only): each annotator's CSV, in the pages' export
    format, with the simulator's labels for the samples assigned to them."""
    from aura_eval.simulator import planted as sim

    rows = sim.annotation_rows([s for p in sample_paths for s in read_jsonl(p)], simulation)
    counts = {}
    for path in out_paths:
        annotator = Path(path).stem
        mine = sorted((r for r in rows if r["annotator"] == annotator), key=lambda r: r["sample_id"])
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(protect_row(r) for r in mine)
        atomic_write_text(path, text.getvalue())
        counts[annotator] = len(mine)
    return counts


def human_reference(rows: list[dict]) -> dict:
    """{(item_id, agent, axis): final label} for the retained samples (Tables 21-23)."""
    return {(r["item_id"], r["agent"], r["axis"]): r["final_label"] for r in rows if r["retained"]}
