"""The project's vocabulary: the one definition of every name that stages, rules, tables,
the report and the tests share. Nothing here imports more than the standard library and
PyYAML, so the Snakefile, planning and analysis can import it cheaply.

- the R-Judge domains and step roles, the decision points, the dimensions (read from
  prompts/taxonomy.yaml, their source), No-Safe-Path / Safe-Path, the three judge axes and
  their labels, the rollout formats;
- the id grammar: seed, prefix, item, pair and run names, and the names a config gives (NAME_PATTERN);
- the construction losses: the stages at which a candidate can be lost and the reason categories,
  each with the text a reader sees;
- how a table or figure is declared (`Artefact`, `table`, `figure`: the declarations live beside
  their builders and aura_eval.artefact_registry collects them);
- the files whose bytes may differ between two runs of the same inputs (timings, cache hits).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aura_eval import __version__

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"

# -- R-Judge and trajectories ---------------------------------------------------------
DOMAINS = ("Application", "Finance", "IoT", "Program", "Web")
STEP_ROLES = ("user", "agent", "environment")
EDITABLE_ROLES = ("user", "environment")  # what a variation may rewrite; agent steps stay exact

# -- decision points (paper §4.2, C.2) ------------------------------------------------
AT_TRIGGER, PRE_EXECUTION = "at_trigger", "pre_execution"


# -- dimensions (paper B.2, B.3): prompts/taxonomy.yaml is their source -------------------
def load_taxonomy(prompts_dir: str | Path = PROMPTS_DIR) -> dict:
    """The variation dimensions: id -> name, kind, definition, direction (and the file's version)."""
    path = Path(prompts_dir) / "taxonomy.yaml"
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    dims = tuple(spec.get("dimensions") or {})
    expected = tuple(f"RS{i}" for i in range(1, 7)) + tuple(f"SD{i}" for i in range(1, 6))
    if dims != expected:
        raise ValueError(f"{path}: dimensions must be {', '.join(expected)} in that order, got {', '.join(dims)}")
    return spec


ORIGINAL = "original"
VARIED_DIMENSIONS = tuple(load_taxonomy()["dimensions"])  # RS1-RS6, SD1-SD5
DIMENSIONS = (ORIGINAL,) + VARIED_DIMENSIONS  # an item's dimension
FLIP_DIMENSIONS = ("RS2", "RS5")  # the paper's SAFE->UNSAFE flip analysis (Tables 35, 36)
FIG8_MIN_N = 5  # Figure 8 shows a cell's unsafe rate only when at least this many rows fall in it

# -- pair labels (paper §4.2, A.1) ------------------------------------------------------
NSP, SP = "NSP", "SP"
PAIR_LABELS = (NSP, SP)
OPPOSITE = {NSP: SP, SP: NSP}

# -- the three judge axes (paper §5, Tables 5-7) ---------------------------------------------
AXES = ("detection", "action_type", "action_safety")
DETECTION_LEVELS = ("D0", "D1", "D2", "D3")
ACTION_TYPES = ("A0", "A1", "A2", "A3", "A4", "A5")
SAFETY_LABELS = ("Safe", "Unsafe")
SAFE, UNSAFE = SAFETY_LABELS
AXIS_LABELS = {"detection": DETECTION_LEVELS, "action_type": ACTION_TYPES, "action_safety": SAFETY_LABELS}
AWARE = ("D2", "D3")  # the risk is named (comprehension or projection)
REFUSAL = "A5"
JUDGE_PROMPTS = {"detection": "judge_detection", "action_type": "judge_action_type",
                 "action_safety": "judge_action_safety"}
# The field of each judge prompt's answer that holds the label.
LABEL_FIELDS = {"detection": "level", "action_type": "action_type", "action_safety": "safety"}

# -- rollout formats (paper §5.1, J.4) ----------------------------------------------------------
REACT, ACTION_ONLY = "react", "action_only"
# (format, an agent's `output`) -> prompt; `output: json` suits models whose decoding follows a schema.
AGENT_PROMPTS = {(REACT, "text"): "agent_react", (ACTION_ONLY, "text"): "agent_action_only",
                 (REACT, "json"): "agent_react_json", (ACTION_ONLY, "json"): "agent_action_only_json"}
GROUP_MARK = {"frontier": "★", "open-weight": "○", "safety-tuned": "◇"}

# -- reliability runs (paper F.2-F.5) -------------------------------------------------------
RELIABILITY_KINDS = ("five_judge", "repeats", "vendor_swap")


# -- the id grammar -------------------------------------------------------------------------
def seed_id(domain: str, rjudge_id: int) -> str:
    """`<domain>-<R-Judge id>`, e.g. `iot-007`."""
    return f"{domain.lower()}-{rjudge_id:03d}"


def prefix_id(seed: str, point: str) -> str:
    """`<seed id>.<decision point>`, e.g. `iot-007.at_trigger`."""
    return f"{seed}.{point}"


def item_id(prefix: str, dimension: str) -> str:
    """`<prefix id>.<dimension>`: the original prefix or one of its variations."""
    return f"{prefix}.{dimension}"


def counterpart_item_id(source_item: str) -> str:
    """A generated pair counterpart: `<source item id>.pair`."""
    return f"{source_item}.pair"


def pair_id(source_item: str) -> str:
    """The id the two versions of a pair share: `pair:<source item id>`."""
    return f"pair:{source_item}"


RUN_SEPARATOR = "."


# The call-log groups of the model stages, in flow order, come from their registry (aura_eval.stage_registry).
def stage_group(stage: str) -> str:
    """The stage a call log's `stage` field belongs to: `judge_safety:<run>:<judge>` -> `judge_safety`,
    `reliability:<kind>:<agent>` -> `reliability:<kind>`."""
    parts = stage.split(":")
    return ":".join(parts[:2]) if parts[0] == "reliability" else parts[0]


def run_name(agent: str, fmt: str) -> str:
    """File name of one agent × prompt format: `gpt-5.4` or `gpt-5.4.action_only`."""
    return agent if fmt == REACT else f"{agent}{RUN_SEPARATOR}{ACTION_ONLY}"


def parse_run(run: str) -> tuple[str, str]:
    """(agent, format) of a run name."""
    suffix = RUN_SEPARATOR + ACTION_ONLY
    return (run[: -len(suffix)], ACTION_ONLY) if run.endswith(suffix) else (run, REACT)


# -- names a config gives (models, agents, annotators) --------------------------------------------------
# A name becomes a file name, a wildcard value and part of a run id, so it is a letter or digit, then up
# to 99 letters, digits, `_`, `.` or `-` (no `/`, space or newline), and it never ends in a suffix the run
# ids add: agent `x.action_only` would be agent x's action-only run. schemas/config.schema.yaml repeats
# the pattern (`$defs.name`; a test holds them equal); workflow.config.check_config says what is wrong.
_NAME_FIRST, _NAME_REST, NAME_MAX = "A-Za-z0-9", "A-Za-z0-9_.-", 100
NAME_PATTERN = f"^[{_NAME_FIRST}][{_NAME_REST}]{{0,{NAME_MAX - 1}}}$"
RUN_SUFFIXES = (RUN_SEPARATOR + ACTION_ONLY,)


def name_problem(name) -> str | None:
    """What keeps `name` from naming a model, agent or annotator (a phrase: `contains '/'`), or None.
    The whole string must match NAME_PATTERN (a trailing newline too, which Python's `$` lets by)."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    bad = sorted(set(re.findall(f"[^{_NAME_REST}]", name)))
    if bad:
        return f"contains {', '.join(map(repr, bad))}"
    if not re.match(f"[{_NAME_FIRST}]", name):
        return f"starts with {name[0]!r}"
    if len(name) > NAME_MAX:
        return f"has {len(name)} characters"
    suffix = next((s for s in RUN_SUFFIXES if name.endswith(s)), None)
    if suffix:
        agent = name[:-len(suffix)]
        return f"ends in {suffix!r}, a run id's suffix ({name!r} is the {ACTION_ONLY} run of agent {agent!r})"
    if not re.fullmatch(NAME_PATTERN, name):  # not reached: the phrases above cover every way to miss it
        return f"does not match {NAME_PATTERN}"
    return None


NAME_RULE = (f"a name is a letter or digit, then at most {NAME_MAX - 1} letters, digits, '_', '.' or '-' "
             f"({NAME_PATTERN}), not ending in {', '.join(map(repr, RUN_SUFFIXES))}: it names files and run ids")


def hash_rank(text: str, salt: str = "") -> str:
    """A fixed order of ids, independent of file order and of Python's hash seed."""
    return hashlib.sha256(f"{salt}{text}".encode()).hexdigest()


# -- construction losses: where a candidate can be lost and why --------------------------------------
# One vocabulary for the funnel (results/construct/funnel.json), its tables (construction_losses,
# variations_by_dimension), the dataset card and the audit index: the same loss reads the same in each.
@dataclass(frozen=True)
class LossStage:
    """A construction stage at which a candidate can be lost."""

    key: str  # its loss entry in funnel.json, and construction_losses.csv's `where` and the audit index's `stage`
    title: str  # what a reader sees: the Stage column, the dataset card, the audit index's filter and rows
    passed: str  # the funnel's count of the rows it lets through (construction_funnel's `stage` column)
    column: str | None = None  # that count per dimension: variations_by_dimension's column, if it has one


LOSS_STAGES = {s.key: s for s in (
    LossStage("relevance losses", "Relevance (P2)", "variation candidates", "candidates"),
    LossStage("generation losses", "Variation generation (P3/P4)", "parseable variations", "parseable"),
    LossStage("gate rejections", "Variation gate", "passed gate", "passed_gate"),
    LossStage("review losses", "Variation review (P5/P6)", "kept variations", "kept"),
    LossStage("pair generation losses", "Pair generation (P8)", "parseable pairs"),
    LossStage("pair rejections", "Pair checks", "passed pair checks"),
    LossStage("pair review losses", "Pair review (P9)", "kept pairs"),
    LossStage("excluded rows", "Release", "released rows", "released_rows"),
)}

# The reason categories: every reason a construction file records for a loss (a rejection,
# a skip reason, an exclusion) is `<category>` or `<category>: <what exactly>`, and that text is
# what the tables, the card and the audit index show. Category -> its meaning (the card's legend,
# the audit index's hint).
# A model call's statuses that lose a candidate (aura_eval.llm.answers.STATUS_TABLE defines them all).
FAILED, UNPARSEABLE, TRUNCATED, REFUSED = "failed", "unparseable", "truncated", "refused"
OVER_CAP, MALFORMED, GATE, PREFIX = "over the per-prefix cap", "malformed", "gate", "prefix"
NO_USABLE_LABEL, NO_MAJORITY = "no usable label", "no majority to keep"
BY_CONFIG, UNDERSPECIFIED = "excluded by the config", "underspecified request"
LOSS_REASONS = {
    FAILED: "the model call failed",
    UNPARSEABLE: "the model's answer did not parse against the prompt's schema",
    TRUNCATED: "the model's answer was cut at max_tokens (or inside its reasoning block)",
    REFUSED: "the model or its provider declined the task (a refusal, a safety filter)",
    OVER_CAP: "beyond the config's construction.max_candidates_per_prefix for its prefix",
    MALFORMED: "a rewrite that is not one entry per editable step, or a row without a user instruction "
               "or ending with an agent step",
    GATE: "the rewrite breaks the gate: steps or roles changed, an agent step edited, a step emptied, or "
          "nothing changed",
    PREFIX: "the truncated counterpart is not the start of its full rewrite",
    NO_USABLE_LABEL: "no complete label: a risk rationale, and a safe-action sketch (Safe-Path) or why "
                     "fulfilment is unsafe (No-Safe-Path)",
    NO_MAJORITY: "fewer than a strict majority of the whole review panel voted keep",
    BY_CONFIG: "listed under the config's construction.exclusions",
    UNDERSPECIFIED: "an instruction shorter than the config's construction.min_instruction_words",
}


def reason_category(reason: str) -> str | None:
    """The category a loss reason starts with (`gate: step 3 was emptied` -> `gate`); None for a
    reason that starts with none (a file written before the categories)."""
    return next((c for c in LOSS_REASONS if reason == c or reason.startswith(f"{c}:")), None)


def reason_kind(reason: str) -> str:
    """A loss reason as the tables count it and the audit index filters it: its bracketed lists,
    ranges and numbers (step indices, counts, character positions) replaced by N
    (`gate: step 3 was emptied` -> `gate: step N was emptied`)."""
    return re.sub(r"\[[^\]]*\]|\b\d+(?:\.\.\d+)?\b", "N", reason)


# -- the release's terms: one definition for the card, the Croissant file and the pack ---------------
# Every released row adapts an R-Judge trajectory, so the data carries R-Judge's terms. R-Judge's README
# (github.com/Lordog/R-Judge, rjudgebench.github.io) names CC BY-NC-SA without a version; we use 4.0.
@dataclass(frozen=True)
class Licence:
    id: str  # the Hugging Face card's `license` value
    spdx: str
    name: str
    url: str


CODE_LICENCE = "Apache-2.0"  # the repository's code (LICENSE, pyproject.toml)
DATA_LICENCE = Licence("cc-by-nc-sa-4.0", "CC-BY-NC-SA-4.0",
                       "Creative Commons Attribution-NonCommercial-ShareAlike 4.0 International",
                       "https://creativecommons.org/licenses/by-nc-sa/4.0/")
RJUDGE_URL = "https://github.com/Lordog/R-Judge"
RJUDGE_LICENCE_STATEMENT = "distributed under the CC BY-NC-SA (Attribution-NonCommercial-ShareAlike) license"
RJUDGE_CITATION = ("Tongxin Yuan, Zhiwei He, Lingzhong Dong, Yiming Wang, Ruijie Zhao, Tian Xia, Lizhen Xu, "
                   "Binglin Zhou, Fangqi Li, Zhuosheng Zhang, Rui Wang, and Gongshen Liu. 2024. R-Judge: "
                   "Benchmarking Safety Risk Awareness for LLM Agents. In Findings of the Association for "
                   "Computational Linguistics: EMNLP 2024, pages 1467-1490. doi:10.18653/v1/2024.findings-emnlp.79")
RJUDGE_SHORT = "R-Judge, Yuan et al., Findings of EMNLP 2024"
# The paper this project reproduces; its text names no authors or venue, so neither is given here.
PAPER_TITLE = "AURA-Eval: Evaluation Framework for Acting Under Risk Awareness in LLM Agent Trajectories"
RELEASE_VERSION = __version__  # the dataset release's version (Croissant `version`) is the software's
RELEASE_DATE = "2026-12-04"  # the version's date (Croissant `datePublished`, CITATION.cff, CHANGELOG.md): fixed, so reruns stay identical
RELEASE_CREATOR = "AURA-Eval reference implementation (the contributors of this repository)"  # Croissant `creator`


def data_terms() -> str:
    """The release's data terms in one paragraph of Markdown (the card, the Croissant file, the pack)."""
    return (f"The data is released under {DATA_LICENCE.name} ({DATA_LICENCE.spdx}, {DATA_LICENCE.url}). "
            f"Every row adapts a trajectory of R-Judge ({RJUDGE_CITATION}; {RJUDGE_URL}), whose README says "
            f"its data is \"{RJUDGE_LICENCE_STATEMENT}\" without naming a version; this release uses 4.0, the "
            f"current one. Give credit to R-Judge and to AURA-Eval, use the data for non-commercial purposes "
            f"only, and share what you adapt from it under the same licence. The code that builds it is "
            f"under {CODE_LICENCE} (the repository's LICENSE).")


# -- files that several jobs read ------------------------------------------------------------------
FILES = {
    "seeds": "results/seeds/seeds.jsonl",
    "tags": "results/prefixes/tags.jsonl",
    "prefixes": "results/prefixes/prefixes.jsonl",
    "relevance": "results/construct/relevance.jsonl",
    "candidates": "results/construct/candidates.jsonl",
    "variations": "results/construct/variations.jsonl",
    "variation_reviews": "results/construct/variation_reviews.jsonl",
    "pool": "results/construct/pool.jsonl",
    "pairs": "results/construct/pairs.jsonl",
    "pair_reviews": "results/construct/pair_reviews.jsonl",
    "funnel": "results/construct/funnel.json",
    "dataset": "results/dataset/aura_eval.jsonl",
    "card": "results/dataset/README.md",
    "excluded": "results/dataset/excluded.jsonl",
    "subset": "results/dataset/action_only_subset.jsonl",
    "croissant": "results/dataset/croissant.json",
    "frame": "results/analysis/labels_long.csv",
    "human": "results/validation/human_labels.jsonl",
    "paper_numbers": "paper/reference_numbers.yaml",  # the paper's stated numbers (aura_eval.report.paper_numbers)
}
# Inputs that are one file per job of a stage (samples: the audit sample of each axis); rules/common.smk
# expands them for the configured run.
# react_labels and react_rollouts: the ReAct runs only (one per agent), for what shows thoughts.
FILE_LISTS = ("calls", "labels", "react_labels", "react_rollouts", "five_judge", "repeats", "vendor_swap", "samples")

# The prompt templates in the paper's order (agent prompts, Table 4; judges, Tables 5-7; P1-P9,
# Tables 9-17), and the inputs that are prompt files: name -> prompt ids (prompts/<id>.yaml).
CONSTRUCTION_PROMPTS = ("p1_step_tagging", "p2_dimension_relevance", "p3_intensity_variation",
                        "p4_context_variation", "p5_intensity_review", "p6_context_review",
                        "p7_pair_classification", "p8_pair_generation", "p9_pair_review")
PROMPT_TEMPLATES = ("agent_react", "agent_react_json", "agent_action_only", "agent_action_only_json",
                    *JUDGE_PROMPTS.values(), *CONSTRUCTION_PROMPTS)
PROMPT_INPUTS = {"taxonomy": ("taxonomy",), "judge_prompts": tuple(JUDGE_PROMPTS.values()),
                 "prompt_templates": PROMPT_TEMPLATES}


# -- how a table or figure is declared (aura_eval.artefact_registry collects the declarations) ------
EXTENSIONS = {"cells": "cells.json"}  # a format's file extension where it is not the format's name
LINKED_FORMATS = ("csv", "md", "cells")  # a table whose every number links to the rows it counts (aura_eval.util.cells)


@dataclass(frozen=True)
class Artefact:
    """A table or figure of the report: its own job, reading only `inputs` (names from FILES,
    FILE_LISTS or PROMPT_INPUTS) and, where `config` names config keys (top-level, or `section.key`:
    that one entry of a section, under its section), only those values. Declared with `table` or
    `figure` in the pandas-free `<builder>_spec.py` beside the module that builds it."""

    name: str
    inputs: tuple[str, ...]
    caption: str
    formats: tuple[str, ...] = ("csv", "md")
    config: tuple[str, ...] = ()
    # Why its cells link to no list of items (a table with the "cells" format links every cell: aura_eval.util.cells).
    not_items: str = ""
    # A column's header where it means something else in this table than elsewhere (util.table_files.HEADERS).
    headers: dict = field(default_factory=dict, compare=False, hash=False)
    module: str = ""  # the module that registers its builder: the spec module's name less `_spec` (set by the registry)

    def outputs(self, kind: str) -> dict[str, str]:
        folder = "tables" if kind == "table" else "figures"
        return {fmt: f"results/{folder}/{self.name}.{EXTENSIONS.get(fmt, fmt)}" for fmt in self.formats}


def table(name: str, inputs, caption: str, **kw) -> Artefact:
    return Artefact(name, tuple(inputs), caption, **kw)


def figure(name: str, inputs, caption: str, formats=("png", "svg"), **kw) -> Artefact:
    return Artefact(name, tuple(inputs), caption, formats=formats, **kw)


# Figure 2, the running example: drawn from one record's files, with a JSON sidecar listing what it shows
# (aura_eval.analyze.running_example); the report and the audit index embed its SVG inline, every part
# linked to the audit page of the item that holds it.
RUNNING_EXAMPLE = "fig2_running_example"
INLINE_SVG_FIGURES = (RUNNING_EXAMPLE,)


# -- what may differ between two runs of the same inputs --------------------------------------------
# Every other file under results/ is byte-identical on a rerun from the cache (aura_eval.tools.digest;
# tests/test_workflow.py checks it).
VOLATILE_FIELDS = {"results/calls/": ("latency_s", "cache_hit", "attempts", "wait_s")}  # JSONL rows: only these fields differ
VOLATILE_FILES = ("results/tables/model_calls.csv",  # its cache_hits column
                  "results/tables/model_calls.md",  # the same, for the report
                  "results/tables/run_summary.md",  # requests answered from the cache
                  "results/tables/forecast_vs_actual.csv",  # calls sent and spent in this run (not cached)
                  "results/tables/forecast_vs_actual.md",  # the same, for the report
                  "results/forecast/",  # `make forecast`'s output: what existed when it ran (no rule writes it)
                  "results/run/",  # the config recorded at the run's start (aura_eval.workflow.run_config): a replay's says replay
                  "results/report/")  # the report's run section shows the summary above
