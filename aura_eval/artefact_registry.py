"""The registry of the report's tables and figures, beside the registry of model stages (stage_registry).

A table or figure is declared once, with `vocab.table` or `vocab.figure`, in the small module beside
the one that builds it: `analyze/behaviour_spec.py` declares the tables `analyze/behaviour.py` builds
(inputs, caption, formats, config keys, column headers). The builder module registers each one's
builder with `@builder(name)`, and its empty-table reason beside it (aura_eval.analyze.frame.
register_tables). The declarations stay apart from the builders because Snakemake's parse, which
plans one job per table and figure from TABLES and FIGURES, must not load pandas or matplotlib: only
the job that builds an artefact imports its builder's module (`builder_of`).

Adding a table: its declaration in the spec module, its builder in the module beside it, its place
in paper/report.qmd.
"""

from __future__ import annotations

import dataclasses
import importlib

from aura_eval.analyze import (behaviour_spec, calls_spec, construction_spec, examples_spec, figures_spec, human_spec,
                               judges_spec, pipeline_figure_spec, prompt_tables_spec, running_example_spec)
from aura_eval.report import headline_spec
from aura_eval.vocab import Artefact

# The spec modules, in the order the registry lists their tables and figures (the report's sources
# appendix, the audit site's cell scripts).
SPEC_MODULES = (headline_spec, construction_spec, calls_spec, behaviour_spec, judges_spec, human_spec,
                prompt_tables_spec, examples_spec, pipeline_figure_spec, running_example_spec, figures_spec)


def _collect(kind: str) -> dict[str, Artefact]:
    out: dict[str, Artefact] = {}
    for spec in SPEC_MODULES:
        for declared in getattr(spec, kind, ()):
            if declared.name in out:
                raise ValueError(f"{declared.name!r} is declared twice ({spec.__name__} and {out[declared.name].module})")
            out[declared.name] = dataclasses.replace(declared, module=spec.__name__.removesuffix("_spec"))
    return out


TABLES = _collect("TABLES")
FIGURES = _collect("FIGURES")


def artefact(name: str) -> tuple[str, Artefact]:
    """("table" or "figure", its declaration); an unknown name raises naming the known ones."""
    if name in TABLES:
        return "table", TABLES[name]
    if name in FIGURES:
        return "figure", FIGURES[name]
    raise KeyError(f"unknown table or figure {name!r} (known: {', '.join([*TABLES, *FIGURES])})")


_BUILDERS: dict[str, object] = {}


def builder(name: str):
    """Register the function that builds the declared table or figure `name` (in the module its
    declaration sits beside).

    A table's builder takes (inputs, config) and returns a DataFrame (or, for a Markdown-only
    table, its text); a figure's takes (inputs, png, svg). `inputs` maps each declared input
    name to its path (or list of paths)."""
    artefact(name)  # only declared names

    def register(func):
        _BUILDERS[name] = func
        return func
    return register


def builder_of(name: str):
    """The builder of `name`, importing its module (pandas, matplotlib) only now: the job's own."""
    _, spec = artefact(name)
    importlib.import_module(spec.module)
    return _BUILDERS[name]
