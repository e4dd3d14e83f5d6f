"""Where the report puts each registered table and figure: the top-level section (`## ` heading) of
paper/report.qmd that includes it. Snakemake's own report (`snakemake --report`) files each table and
figure under that section as its category, so both reports share one layout, the report's source.
"""

from __future__ import annotations

import re
from pathlib import Path

from aura_eval.artefact_registry import FIGURES, TABLES

SOURCE = Path(__file__).resolve().parents[2] / "paper" / "report.qmd"
# a table's include (a collapsed one's: tables/_<name>_totals.md, aura_eval.report.provenance), a figure's image
PLACED = re.compile(r"\{\{<\s*include\s+tables/_?(?P<table>[^.\s]+?)(?:_totals)?\.md\s*>\}\}"
                    r"|\]\(figures/(?P<figure>[^.)\s]+)\.png\)")
OTHER = "Not in the report"


def category(heading: str) -> str:
    """A section heading as a Snakemake report category: a colon would end the reStructuredText link
    target Snakemake makes of each category (two appendices would then share one), so it becomes a dash."""
    return heading.replace(": ", " – ").replace(":", " –")


def sections(source: str | Path = SOURCE) -> dict[str, str]:
    """{table or figure name: the section that first shows it, as a category}; a registered
    artefact the source never shows is filed under OTHER."""
    found, heading = {}, OTHER
    for line in Path(source).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = category(line[3:].strip())
        for match in PLACED.finditer(line):
            found.setdefault(match["table"] or match["figure"], heading)
    return {name: found.get(name, OTHER) for name in [*TABLES, *FIGURES]}
