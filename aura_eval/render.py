"""Render paper/report.qmd to one self-contained HTML file.

With `quarto` on PATH, Quarto renders it; otherwise pandoc (from the PyPI package
pypandoc_binary) renders the same source after this module resolves its
`{{< include file >}}` shortcodes. Every CSV under results/tables/ is offered to
the source as a Markdown table at tables/<name>.md; figures at figures/<name>.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd

INCLUDE = re.compile(r"^\{\{<\s*include\s+(\S+)\s*>\}\}\s*$", re.M)


def csv_to_markdown(path: Path) -> str:
    from aura_eval.report import markdown

    return markdown(pd.read_csv(path, keep_default_na=True))


def prepare(source: Path, results: Path, build: Path) -> Path:
    """A build folder holding the source, Markdown versions of the tables and the figures."""
    if build.exists():
        shutil.rmtree(build)
    (build / "tables").mkdir(parents=True)
    for path in sorted((results / "tables").glob("*")):
        if path.suffix == ".md":
            shutil.copy(path, build / "tables" / path.name)
        elif path.suffix == ".csv" and not path.with_suffix(".md").exists():
            (build / "tables" / f"{path.stem}.md").write_text(csv_to_markdown(path), encoding="utf-8")
    if (results / "figures").exists():
        shutil.copytree(results / "figures", build / "figures")
    target = build / "report.qmd"
    shutil.copy(source, target)
    return target


def resolve_includes(text: str, base: Path) -> str:
    """Replace each include shortcode by the file's text (a missing file says so)."""
    def include(match):
        path = base / match.group(1)
        return path.read_text(encoding="utf-8") if path.is_file() else f"*Missing from this run: `{match.group(1)}`.*\n"
    return INCLUDE.sub(include, text)


def render_report(source, results, out_html) -> str:
    """Render and return the engine used ("quarto" or "pandoc")."""
    out_html = Path(out_html).resolve()
    build = out_html.parent / "build"
    qmd = prepare(Path(source), Path(results), build)
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
