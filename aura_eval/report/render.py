"""Render paper/report.qmd to one self-contained HTML file.

With `quarto` on PATH, Quarto renders it; otherwise pandoc (from the PyPI package
pypandoc_binary) renders the same source after this module resolves its
`{{< include file >}}` shortcodes. The report's inputs are the registered tables and
figures (aura_eval.vocab), given as files: each table is offered to the source as
Markdown at tables/<name>.md (a CSV-only table converted), each figure at figures/<name>; the
paper's numbers for every registered table and figure (paper/reference_numbers.yaml,
aura_eval.report.paper_numbers) at tables/paper_<name>.md, and the deviations from the paper
(paper/deviations.md) at deviations.md.

This module also writes the report's own includes (names starting with `_`):
- `tables/_run.md`: the config file(s), the construction funnel in one line;
- `tables/_sources.md`: for each table, the intermediate files it was computed from, linked
  relative to results/report/report.html;
- `tables/_results_notice.md`: what the whole run lacks (no Safe-Path rows, no released rows),
  said once at the top of the results;
- `tables/_headline.md`: a simulated run's notice over the headline comparison;
- `tables/_<name>_totals.md`: the provenance appendix's per-model tables as totals per stage, their
  full CSVs beside the report (aura_eval.report.provenance);
Each figure's image gets the width it was drawn for (its pixels at its dpi), never wider than
the page, and the source gets the report's screen and print styles (STYLE). A figure of
`vocab.INLINE_SVG_FIGURES` (Figure 2) is its SVG, placed in the rendered page (`inline_figures`), so
the links in it lead to the audit site's item pages.

The report shows text as written: Markdown is read without smart typography (READER; Quarto by the
`from:` of paper/report.qmd), so quotes and `--` in quoted trajectories stay as they are; NUL and
bidirectional controls show as visible marks (aura_eval.util.pages.shown), and the page carries a
Content-Security-Policy allowing only its own inline scripts and styles and its data: images.
"""

from __future__ import annotations

import html as html_lib
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pandas as pd

from aura_eval.artefact_registry import TABLES
from aura_eval.report import paper_numbers, provenance
from aura_eval.util.csv_cells import read_csv
from aura_eval.util.jsonl import atomic_write_text
from aura_eval.util.pages import finish, shown
from aura_eval.util.table_files import markdown
from aura_eval.vocab import ACTION_ONLY, FILES, INLINE_SVG_FIGURES, PROMPT_INPUTS

DEVIATIONS = paper_numbers.PATH.parent / "deviations.md"
INCLUDE = re.compile(r"^\{\{<\s*include\s+(\S+)\s*>\}\}\s*$", re.M)
IMAGE = re.compile(r"^!\[(?P<caption>[^\n]*)\]\((?P<path>figures/[^)\s]+\.png)\)(?P<attrs>\{[^}]*\})?[ \t]*$", re.M)
REPORT_DIR = "results/report"  # where report.html lies, relative to the workflow's directory
READER = "markdown-smart"  # pandoc's Markdown without smart quotes and dashes: text as written

# Shown at the top of a simulated run's report, and on every screen and printed page after it.
SIMULATION_BANNER = """
```{=html}
<div class="aura-simulation">SIMULATION: every number, table and figure of this report comes from
the planted-truth simulator <code>aura_sim</code> (config/simulate.yaml), not from any model.</div>
<style>
/* Fixed to the top of the window, whatever precedes it (the table of contents): on every screen,
   and repeated on every printed page. */
.aura-simulation { position: fixed; top: 0; left: 0; right: 0; z-index: 100; background: #b00020; color: #fff;
  padding: .5em 1em; font-weight: bold; font-size: 0.9em; text-align: center; }
.aura-simulation code { color: #fff; }
body { padding-top: 3.5em; }
@media print { body { margin-top: 3.5em; padding-top: 0; } }
</style>
```
"""

# The headline section of a simulated run says whose numbers "ours" are.
SIMULATED_HEADLINE = ("::: {.aura-notice}\n**SIMULATED: \"ours\" below are the planted-truth simulator's numbers "
                      "(config/simulate.yaml), not any model's; the paper's are the paper's.**\n:::\n")

# The report's layout on screen (a 1280 px window shows every table whole) and in print (A4
# landscape; tables break between rows, repeat their header, and figures fit the page).
STYLE = """
```{=html}
<style>
body { max-width: 75em; }
.aura-table { margin: .4em 0 1.4em; }
.aura-table table { display: table; width: auto; max-width: 100%; font-size: .82rem; border-collapse: collapse;
  margin: .3em 0; overflow: visible; }
.aura-table th, .aura-table td { padding: .2em .5em; vertical-align: top; }
.aura-table th { vertical-align: bottom; border-bottom: 1px solid #888; }
.aura-table tbody tr:nth-child(even) { background: #f5f5f5; }
.aura-table caption { caption-side: top; text-align: left; font-size: .9rem; color: #333; padding-bottom: .3em; }
.nw { white-space: nowrap; }
.aura-empty, .aura-note { color: #555; margin: .3em 0 1.2em; }
.aura-empty { border-left: 3px solid #bbb; padding-left: .6em; }
.aura-notice { border-left: 4px solid #b36b00; background: #fff6e5; padding: .5em .8em; margin: 1em 0; }
.aura-sources td { font-size: .8rem; }
img { max-width: 100%; height: auto; }
svg.aura-inline-figure { max-width: 100%; height: auto; display: block; }
figure { margin: 1em 0 1.6em; }
figcaption { font-size: .9rem; color: #333; }
@media print {
  @page { size: A4 landscape; margin: 12mm; }
  body { max-width: none; padding: 0; font-size: 10pt; }
  .aura-table table { font-size: 7.5pt; }
  thead { display: table-header-group; }
  tr, figure, img, .aura-empty { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  img { max-width: 100% !important; max-height: 165mm; width: auto !important; height: auto !important; }
  svg.aura-inline-figure { max-height: 165mm; width: auto; }
  a { color: inherit; }
  /* The contents' links carry no page numbers: the print opens on the headline comparison instead. */
  #TOC { display: none; }
  /* The prompt appendix's short lines fill two columns of the landscape page. */
  .aura-prompts { column-count: 2; column-gap: 8mm; }
  .aura-prompts pre { font-size: 6.5pt; white-space: pre-wrap; }
  .aura-prompts h3 { break-after: avoid; }
  .aura-sources td { font-size: 6.5pt; padding: 0 .4em; }
}
</style>
<script>
// Printing opens every folded list, so the print shows what the screen can unfold.
window.addEventListener("beforeprint", () => document.querySelectorAll("details").forEach(d => d.open = true));
</script>
```
"""

# The construction funnel in one line: (label, stage in construction_funnel.csv).
FUNNEL_LINE = (("prefixes", "prefixes"), ("variation candidates", "variation candidates"),
               ("kept variations", "kept variations"), ("classified pool", "classified pool"),
               ("kept pairs", "kept pairs"), ("released rows", "released rows"))
# Where the files of each per-job input list lie, for a report rendered without the workflow's list.
FILE_LIST_GLOBS = {"calls": "results/calls/**/*.jsonl", "labels": "results/labels/*.jsonl",
                   "five_judge": "results/reliability/five_judge/*.jsonl",
                   "repeats": "results/reliability/repeats/*.jsonl",
                   "vendor_swap": "results/reliability/vendor_swap/*.jsonl",
                   "samples": "results/validation/sample_*.jsonl",
                   # ReAct runs only: their names carry no format suffix (vocab.run_name)
                   "react_labels": "results/labels/*.jsonl", "react_rollouts": "results/rollouts/*.jsonl"}


def mark_simulated(text: str) -> str:
    """The report source with the simulation banner after its front matter and SIMULATED in its title."""
    text = re.sub(r'^title: "(.*)"$', r'title: "SIMULATED: \1"', text, count=1, flags=re.M)
    return _after_front_matter(text, SIMULATION_BANNER)


def _after_front_matter(text: str, block: str) -> str:
    parts = text.split("---\n", 2)
    if len(parts) == 3 and parts[0] == "":
        return f"---\n{parts[1]}---\n{block}{parts[2]}"
    return block + text


def csv_to_markdown(path: Path) -> str:
    path = Path(path)
    return markdown(read_csv(path, keep_default_na=True), path.stem)


# -- the report's own includes ------------------------------------------------------------------

def _csv(tables: Path, name: str) -> pd.DataFrame | None:
    path = tables / f"{name}.csv"
    return read_csv(path) if path.is_file() else None


def _count(value) -> str:
    return "—" if value is None or pd.isna(value) else f"{int(value):,}"


def funnel_line(tables: Path) -> str:
    """`157 seeds → 191 prefixes → … → 1,206 released rows (the paper: …)` from the seed and funnel tables."""
    seeds, funnel = _csv(tables, "seed_composition"), _csv(tables, "construction_funnel")
    if funnel is None:
        return "*The construction funnel is missing from this run.*"
    by_stage = funnel.set_index("stage")
    ours, paper = [], []
    if seeds is not None and (seeds["domain"] == "All").any():
        row = seeds[seeds["domain"] == "All"].iloc[0]
        ours.append(f"{_count(row['total'])} seeds")
        paper.append(_count(row["paper_total"]))
    for label, stage in FUNNEL_LINE:
        if stage in by_stage.index:
            ours.append(f"{_count(by_stage.loc[stage, 'ours'])} {label}")
            paper.append(_count(by_stage.loc[stage, "paper"]))
    return f"Funnel: {' → '.join(ours)} (the paper: {' → '.join(paper)})."


def results_notice(tables: Path) -> str:
    """What the whole run lacks, said once: no released rows, or no Safe-Path (No-Safe-Path) rows."""
    composition = _csv(tables, "table29_composition")
    if composition is None:
        return ""
    ours = {(by, value): n for by, value, n in zip(composition["by"], composition["value"], composition["ours"])}
    total = ours.get(("all", "rows"), 0)
    if not total:
        lack = "This run released no rows, so no model was evaluated: every result table and figure below is empty."
    elif not ours.get(("pair_label", "SP"), 0):
        lack = ("This run released no Safe-Path rows (all {:,} rows are No-Safe-Path): every SP column, the NSP − SP "
                "gaps (Tables 31 and 32) and the Safe-Path panels of the figures are empty.").format(total)
    elif not ours.get(("pair_label", "NSP"), 0):
        lack = ("This run released no No-Safe-Path rows (all {:,} rows are Safe-Path): every NSP column, the NSP − SP "
                "gaps (Tables 31 and 32), the flips (Tables 35 and 36) and the NSP panels are empty.").format(total)
    else:
        return ""
    return f"::: {{.aura-notice}}\n**{lack}**\n:::\n"


def _link(path: str) -> str:
    href = os.path.relpath(path, REPORT_DIR).replace(os.sep, "/")
    return f'<a href="{href}"><code>{path}</code></a>'


def resolve_sources(root: Path) -> dict[str, dict]:
    """Each table's inputs, {input name: path or paths}, relative to the workflow's directory
    `root`, per-job lists found on disk (used when the workflow did not pass its own)."""
    def found(entry):
        if entry in PROMPT_INPUTS:
            return [f"prompts/{prompt}.yaml" for prompt in PROMPT_INPUTS[entry]]
        if entry in FILE_LIST_GLOBS:
            paths = sorted(str(p.relative_to(root)) for p in root.glob(FILE_LIST_GLOBS[entry]))
            return [p for p in paths if not p.endswith(f"{ACTION_ONLY}.jsonl")] if entry.startswith("react_") else paths
        return FILES[entry]
    return {name: {entry: found(entry) for entry in spec.inputs} for name, spec in TABLES.items()}


def _inputs_html(paths) -> str:
    if isinstance(paths, str):
        return _link(paths)
    paths = [str(p) for p in paths]
    if not paths:
        return "<em>none in this run</em>"
    if len(paths) <= 4:
        return "<br>".join(_link(p) for p in paths)
    # a long list stays out of the page (and its print): sources.csv names every file
    return f"{len(paths)} files under <code>{os.path.commonpath(paths)}/</code>"


def sources_markdown(sources: dict) -> str:
    """A table: each registered table, its CSV/Markdown, and the intermediate files it was computed
    from (`sources`: table -> {input name: path or paths})."""
    rows = ['<table class="aura-sources">', "<thead><tr><th>Table</th><th>Its files</th>"
            "<th>Computed from</th></tr></thead>", "<tbody>"]
    for name, spec in TABLES.items():
        own = "<br>".join(_link(p) for p in spec.outputs("table").values())
        given = sources.get(name) or {}
        if not isinstance(given, dict):
            given = {"files": given}
        inputs = "<br>".join(_inputs_html(paths) for paths in given.values()) or "<em>not recorded</em>"
        label = spec.caption.split(":")[0] if spec.caption.startswith("Table") else ""
        title = f"{label}<br><code>{name}</code>" if label else f"<code>{name}</code>"
        rows.append(f"<tr><td>{title}</td><td>{own}</td><td>{inputs}</td></tr>")
    rows += ["</tbody>", "</table>"]
    return "```{=html}\n" + "\n".join(rows) + "\n```\n"


def run_markdown(tables: Path, configfiles) -> str:
    if configfiles:
        config = "Config file" + ("s" if len(configfiles) > 1 else "") + ": " + ", ".join(
            f"`{c}`" for c in configfiles) + " (later files override earlier ones)." * (len(configfiles) > 1)
    else:
        config = "Config file: not recorded (this report was rendered outside the workflow)."
    return f"{config}\n\n{funnel_line(tables)}\n"


def _png_width(path: Path) -> int | None:
    """The width, in CSS pixels, a PNG was drawn for: its pixels at its dpi (pHYs; else 150 dpi)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    width = struct.unpack(">I", data[16:20])[0]
    dpi = 150.0
    at = data.find(b"pHYs")
    if at > 0:
        x, _, unit = struct.unpack(">IIB", data[at + 4:at + 13])
        if unit == 1 and x:
            dpi = x * 0.0254
    return round(width * 96 / dpi)


# Where an inline figure goes: a slot the rendered page gets its SVG in (inline_figures). Markdown never
# makes this element from a table's text (cells escape `<`), only size_figures does.
INLINE_SLOT = '<div class="aura-inline-slot" data-figure="{name}" data-caption="{caption}"></div>'
_SLOT = re.compile(r'<div class="aura-inline-slot" data-figure="(?P<name>[A-Za-z0-9_]+)" '
                   r'data-caption="(?P<caption>[^"]*)"></div>')


def size_figures(text: str, build: Path) -> str:
    """Each figure line with the width its PNG was drawn for; a missing figure says so; an inline
    figure's line becomes the slot its SVG is placed in, and links to its files."""
    def sized(match):
        path = build / match["path"]
        if not path.is_file():
            return f"*Missing from this run: `{match['path']}` ({match['caption'].split(':')[0]}).*"
        name = Path(match["path"]).stem
        if name in INLINE_SVG_FIGURES and not path.with_suffix(".svg").is_file():
            return f"*Missing from this run: `figures/{name}.svg` ({match['caption'].split(':')[0]}).*"
        if name in INLINE_SVG_FIGURES:
            slot = INLINE_SLOT.format(name=name, caption=html_lib.escape(match["caption"].replace("`", "")))
            return (f"```{{=html}}\n{slot}\n```\n\n[The figure as SVG](../figures/{name}.svg), "
                    f"[as PNG](../figures/{name}.png), [what it shows, as JSON](../figures/{name}.json)")
        if match["attrs"]:
            return match.group(0)
        width = _png_width(path)
        # A wide figure is scaled to the page; its SVG beside results/report/ opens at full size.
        full = f"../{match['path'][:-len('.png')]}.svg"
        return (f"![{match['caption']}]({match['path']})" + (f'{{width="{width}px"}}' if width else "")
                + f"\n\n[Open the figure at full size (SVG)]({full})")
    return IMAGE.sub(sized, text)


def inline_figures(page: str, build: Path) -> str:
    """The rendered page with each inline figure's slot replaced by its SVG and caption (the figure
    files in build/figures/)."""
    from aura_eval.analyze.running_example import figure_html

    def place(match):
        figures = build / "figures"
        return figure_html(figures / f"{match['name']}.svg", figures / f"{match['name']}.json",
                           html_lib.unescape(match["caption"]))
    return _SLOT.sub(place, page)


def prepare(source: Path, files: list, build: Path, simulated: bool = False, sources: dict | None = None,
            configfiles=None, reference: str | Path = paper_numbers.PATH, deviations: str | Path = DEVIATIONS) -> Path:
    """A build folder holding the source (styled, and marked when the run is simulated), Markdown
    versions of the tables, the report's own includes, the figures, the paper's numbers for each
    (from `reference`) and the deviations from the paper (`deviations`, as deviations.md)."""
    if build.exists():
        shutil.rmtree(build)
    (build / "tables").mkdir(parents=True)
    (build / "figures").mkdir()
    paths = sorted(Path(p) for p in files)
    for path in paths:
        if path.parent.name == "figures":
            shutil.copy(path, build / "figures" / path.name)
        elif path.suffix == ".md":
            (build / "tables" / path.name).write_text(shown(path.read_text(encoding="utf-8")), encoding="utf-8")
        elif path.suffix == ".csv":
            shutil.copy(path, build / "tables" / path.name)  # read by the report's own includes
            if path.with_suffix(".md") not in paths:
                (build / "tables" / f"{path.stem}.md").write_text(shown(csv_to_markdown(path)), encoding="utf-8")
    tables, out_dir = build / "tables", build.parent  # out_dir: where report.html lies
    (tables / "_run.md").write_text(run_markdown(tables, configfiles), encoding="utf-8")
    every_file = provenance.sources_csv(sources or {}, out_dir)
    (tables / "_sources.md").write_text(f"Every file behind each table, one per row: {every_file}.\n\n"
                                        + sources_markdown(sources or {}), encoding="utf-8")
    (tables / "_results_notice.md").write_text(results_notice(tables), encoding="utf-8")
    (tables / "_headline.md").write_text(SIMULATED_HEADLINE if simulated else "", encoding="utf-8")
    for name in provenance.COLLAPSED:
        (tables / f"_{name}_totals.md").write_text(provenance.collapsed(tables, out_dir, name), encoding="utf-8")
    paper_numbers.write_all(tables, reference)
    shutil.copy(deviations, build / "deviations.md")
    target = build / "report.qmd"
    text = _after_front_matter(size_figures(Path(source).read_text(encoding="utf-8"), build), STYLE)
    target.write_text(mark_simulated(text) if simulated else text, encoding="utf-8")
    return target


def resolve_includes(text: str, base: Path) -> str:
    """Replace each include shortcode by the file's text (a missing file says so)."""
    def include(match):
        path = base / match.group(1)
        return path.read_text(encoding="utf-8") if path.is_file() else f"*Missing from this run: `{match.group(1)}`.*\n"
    return INCLUDE.sub(include, text)


def report(source, files, out_html, simulated: bool = False, sources: dict | None = None,
                  configfiles=None, reference=paper_numbers.PATH, deviations=DEVIATIONS) -> str:
    """Render the report from its input files, the paper's numbers (`reference`) and the
    deviations (`deviations`); returns the engine used ("quarto" or "pandoc").

    `sources` maps each table to the files it was computed from (paths relative to the workflow's
    directory; the report rule passes them); without it they are looked up on disk from the
    report's location (results/report/report.html). `configfiles` are the run's config files."""
    out_html = Path(out_html).resolve()
    build = out_html.parent / "build"
    if sources is None:
        sources = resolve_sources(out_html.parent.parent.parent)
    qmd = prepare(Path(source), files, build, simulated, sources, configfiles, reference, deviations)
    if shutil.which("quarto"):
        # the source's front matter has Quarto read it as READER (`from:`)
        subprocess.run(["quarto", "render", qmd.name, "--to", "html", "--output", out_html.name],
                       cwd=build, check=True)
        built = build / out_html.name
        engine = "quarto"
    else:
        import pypandoc

        markdown_file = build / "report.md"
        markdown_file.write_text(resolve_includes(qmd.read_text(encoding="utf-8"), build), encoding="utf-8")
        # --columns: pipe tables wider than it would get fixed relative column widths; the browser's own
        # layout (and the report's style) fits them better.
        built = build / "report.html"
        subprocess.run([pypandoc.get_pandoc_path(), markdown_file.name, "--from", READER, "--to", "html5",
                        "--standalone", "--embed-resources", "--toc", "--toc-depth", "3", "--resource-path", ".",
                        "--columns", "100000", "--variable", "maxwidth=75em",
                        "--output", built.name], cwd=build, check=True)
        engine = "pandoc"
    # rendered in build/, given its inline figures and its policy, then put in place by a rename (never a half report)
    atomic_write_text(out_html, finish(inline_figures(built.read_text(encoding="utf-8"), build)))
    built.unlink()
    return engine

