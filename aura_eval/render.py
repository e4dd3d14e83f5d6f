"""Render paper/report.qmd to one self-contained HTML file.

With `quarto` on PATH, Quarto renders it; otherwise pandoc (from the PyPI package
pypandoc_binary) renders the same source after this module resolves its
`{{< include file >}}` shortcodes. The report's inputs are the registered tables and
figures (aura_eval.vocab), given as files: each table is offered to the source as
Markdown at tables/<name>.md (a CSV-only table converted), each figure at figures/<name>; and
the paper's numbers for every registered table and figure (paper/reference_numbers.yaml,
aura_eval.paper_numbers) at tables/paper_<name>.md, and the list of deviations from the paper
(paper/deviations.md) at deviations.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd

from aura_eval import paper_numbers
from aura_eval.table_files import markdown

DEVIATIONS = paper_numbers.PATH.parent / "deviations.md"
INCLUDE = re.compile(r"^\{\{<\s*include\s+(\S+)\s*>\}\}\s*$", re.M)

# Shown at the top of a simulated run's report, and on every screen and printed page after it.
SIMULATION_BANNER = """
```{=html}
<div class="aura-simulation">SIMULATION: every number, table and figure of this report comes from
the planted-truth simulator <code>aura_sim</code> (config/simulate.yaml), not from any model.</div>
<style>
.aura-simulation { position: sticky; top: 0; z-index: 100; background: #b00020; color: #fff;
  padding: .6em 1em; font-weight: bold; border-radius: 0 0 4px 4px; }
.aura-simulation code { color: #fff; }
@media print { .aura-simulation { position: fixed; top: 0; left: 0; right: 0; } body { margin-top: 4em; } }
</style>
```
"""


def mark_simulated(text: str) -> str:
    """The report source with the simulation banner after its front matter and SIMULATED in its title."""
    text = re.sub(r'^title: "(.*)"$', r'title: "SIMULATED: \1"', text, count=1, flags=re.M)
    parts = text.split("---\n", 2)
    if len(parts) == 3 and parts[0] == "":
        return f"---\n{parts[1]}---\n{SIMULATION_BANNER}{parts[2]}"
    return SIMULATION_BANNER + text


def csv_to_markdown(path: Path) -> str:
    return markdown(pd.read_csv(path, keep_default_na=True))


def prepare(source: Path, files: list, build: Path, simulated: bool = False,
            reference: str | Path = paper_numbers.PATH, deviations: str | Path = DEVIATIONS) -> Path:
    """A build folder holding the source (marked when the run is simulated), Markdown versions
    of the tables, the figures, the paper's numbers for each (from `reference`) and the
    deviations from the paper (`deviations`, as deviations.md)."""
    if build.exists():
        shutil.rmtree(build)
    (build / "tables").mkdir(parents=True)
    (build / "figures").mkdir()
    paths = sorted(Path(p) for p in files)
    for path in paths:
        if path.parent.name == "figures":
            shutil.copy(path, build / "figures" / path.name)
        elif path.suffix == ".md":
            shutil.copy(path, build / "tables" / path.name)
        elif path.suffix == ".csv" and path.with_suffix(".md") not in paths:
            (build / "tables" / f"{path.stem}.md").write_text(csv_to_markdown(path), encoding="utf-8")
    paper_numbers.write_all(build / "tables", reference)
    shutil.copy(deviations, build / "deviations.md")
    target = build / "report.qmd"
    text = Path(source).read_text(encoding="utf-8")
    target.write_text(mark_simulated(text) if simulated else text, encoding="utf-8")
    return target


def resolve_includes(text: str, base: Path) -> str:
    """Replace each include shortcode by the file's text (a missing file says so)."""
    def include(match):
        path = base / match.group(1)
        return path.read_text(encoding="utf-8") if path.is_file() else f"*Missing from this run: `{match.group(1)}`.*\n"
    return INCLUDE.sub(include, text)


def render_report(source, files, out_html, simulated: bool = False, reference=paper_numbers.PATH,
                  deviations=DEVIATIONS) -> str:
    """Render the report from its input files, the paper's numbers (`reference`) and the
    deviations (`deviations`); returns the engine used ("quarto" or "pandoc")."""
    out_html = Path(out_html).resolve()
    build = out_html.parent / "build"
    qmd = prepare(Path(source), files, build, simulated, reference, deviations)
    if shutil.which("quarto"):
        subprocess.run(["quarto", "render", qmd.name, "--to", "html", "--output", out_html.name],
                       cwd=build, check=True)
        shutil.move(build / out_html.name, out_html)
        return "quarto"
    import pypandoc

    markdown = build / "report.md"
    markdown.write_text(resolve_includes(qmd.read_text(encoding="utf-8"), build), encoding="utf-8")
    subprocess.run([pypandoc.get_pandoc_path(), markdown.name, "--from", "markdown", "--to", "html5",
                    "--standalone", "--embed-resources", "--toc", "--resource-path", ".",
                    "--variable", "maxwidth=64em",
                    "--output", str(out_html)], cwd=build, check=True)
    return "pandoc"
