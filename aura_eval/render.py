"""Render paper/report.qmd to one self-contained HTML file.

With `quarto` on PATH, Quarto renders it; otherwise pandoc (from the PyPI package
pypandoc_binary) renders the same source after this module resolves its
`{{< include file >}}` shortcodes. The report's inputs are the registered tables and
figures (aura_eval.vocab), given as files: each table is offered to the source as
Markdown at tables/<name>.md (a CSV-only table converted), each figure at figures/<name>.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd

from aura_eval.table_files import markdown

INCLUDE = re.compile(r"^\{\{<\s*include\s+(\S+)\s*>\}\}\s*$", re.M)


def csv_to_markdown(path: Path) -> str:
    return markdown(pd.read_csv(path, keep_default_na=True))


def prepare(source: Path, files: list, build: Path) -> Path:
    """A build folder holding the source, Markdown versions of the tables and the figures."""
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
    target = build / "report.qmd"
    shutil.copy(source, target)
    return target


def resolve_includes(text: str, base: Path) -> str:
    """Replace each include shortcode by the file's text (a missing file says so)."""
    def include(match):
        path = base / match.group(1)
        return path.read_text(encoding="utf-8") if path.is_file() else f"*Missing from this run: `{match.group(1)}`.*\n"
    return INCLUDE.sub(include, text)


def render_report(source, files, out_html) -> str:
    """Render the report from its input files; returns the engine used ("quarto" or "pandoc")."""
    out_html = Path(out_html).resolve()
    build = out_html.parent / "build"
    qmd = prepare(Path(source), files, build)
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
