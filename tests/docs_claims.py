"""What the docs claim, read from their text: the inline code spans of a known shape (make targets,
`python -m aura_eval` commands with their flags, environment variables, config keys, repository
paths), the shell commands of the README's four paths, and the job counts of the measurements page.
Each `*_problem` function says what is false about one claim, or None; tests/test_docs.py asks them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "ARCHITECTURE.md", "config/README.md", "results/README.md", "aura_eval/evaluate/README.md",
        *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
MEASUREMENTS = ROOT / "docs" / "measurements.md"
# Folders the workflow and the tools write (never committed); a path under results/ must also match
# a file or folder the rules or the package name.
WRITTEN = ("results", "logs", "cache", "packed", "simulation", ".snakemake", "benchmarks/out", "docs/_build")
# Paths the code builds from parts, so no literal names them whole (vocab: `results/{folder}/{name}.{ext}`).
BUILT_PATHS = ("results/tables/{name}", "results/figures/{name}")
# The README's four paths, whose shell commands tests/test_docs.py runs as written (but `(online)` ones).
README_PATHS = ("Run the paper's models", "Audit a number", "Add a model", "Run on a cluster")
ONLINE = "(online)"

FENCE = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$", re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
VARIABLE = re.compile(r"^(?:export )?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=\S*)?$")
CONFIG_KEY = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_<>]+)+$")
PATH = re.compile(r"^[\w.<>{}*/-]+$")
EXTENSIONS = (".md", ".yaml", ".yml", ".py", ".smk", ".jsonl", ".json", ".csv", ".html", ".txt", ".cff",
              ".sqlite", ".toml", ".gz", ".qmd", ".png", ".svg", ".rst", ".cfg", ".js", ".sha256")


def text_of(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


def spans(text: str) -> list[str]:
    """The inline code spans outside fenced blocks."""
    return SPAN.findall(FENCE.sub("", text))


def shell_lines(text: str) -> list[str]:
    """Every command line of the fenced sh/bash/console blocks (comments and blank lines left out)."""
    lines = []
    for block in FENCE.finditer(text):
        head, *body, _ = block.group(0).split("\n")
        if head.strip("`").strip() in ("sh", "bash", "shell", "console"):
            joined = "\n".join(body).replace("\\\n", " ")
            lines += [line.strip() for line in joined.split("\n") if line.strip() and not line.strip().startswith("#")]
    return lines


def command_of(line: str) -> str:
    """A shell line without its trailing comment."""
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


# -- what exists -------------------------------------------------------------------------------------

@cache
def make_targets() -> frozenset:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return frozenset(m.group(1) for m in re.finditer(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))


@cache
def code_text() -> str:
    """The code and configs a variable may be named in."""
    parts = [ROOT / "Makefile", ROOT / "Snakefile", ROOT / "Dockerfile"]
    for folder, pattern in (("aura_eval", "*.py"), ("rules", "*.smk"), ("scripts", "*.py"), ("tests", "*.py"),
                            ("benchmarks", "*.py"), ("config", "*.yaml"), (".test/config", "*.yaml"),
                            ("profiles", "*.yaml")):
        parts += sorted((ROOT / folder).rglob(pattern))
    return "\n".join(p.read_text(encoding="utf-8") for p in parts if p.is_file())


@cache
def config_keys() -> tuple:
    from aura_eval.tools import config_doc

    return tuple(key for key, _, _ in config_doc.rows())


@cache
def schema_top_keys() -> frozenset:
    from aura_eval.workflow.config import load_schema

    return frozenset(load_schema()["properties"])


@cache
def named_paths() -> tuple:
    """The paths the rules, scripts and package name in string literals (what the workflow writes and
    the inputs it reads from a user, such as data/human/), as (regex, sample) pairs."""
    found = set()
    sources = [ROOT / "Snakefile", *(ROOT / "rules").rglob("*.smk"), *(ROOT / "aura_eval").rglob("*.py"),
               *(ROOT / "scripts").rglob("*.py")]
    for path in sources:
        found |= {p for p in re.findall(r"""["']([\w.{}<>*-]+/[^"'\s]*)["']""", path.read_text(encoding="utf-8"))
                  if "://" not in p}
    found |= set(BUILT_PATHS)
    roots = {p.name for p in ROOT.iterdir()} | {w.split("/")[0] for w in WRITTEN}
    # only paths under a known root whose first two segments are literal names (no "{folder}/{file}")
    return tuple((_pattern(p), _sample(p)) for p in found
                 if p.split("/")[0] in roots and not re.search(r"[{<*]", "/".join(p.split("/")[:2])))


def _sample(path: str) -> str:
    """A path with each placeholder replaced by one name."""
    return re.sub(r"\{[^}]*\}|<[^>]*>|\*", "X", path.rstrip("/"))


def _pattern(path: str) -> re.Pattern:
    """A path with `{wildcard}`, `<placeholder>`, `*` or an f-string field as a regex over its segments."""
    parts = re.split(r"(\{[^}]*\}|<[^>]*>|\*)", path.rstrip("/"))
    return re.compile("".join("[^/]+" if p[:1] in "{<*" and p else re.escape(p) for p in parts))


@cache
def _help(argv: tuple) -> str:
    from aura_eval.__main__ import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


# -- the checks --------------------------------------------------------------------------------------

def make_problem(command: str) -> str | None:
    target = command.split()[1] if len(command.split()) > 1 else None
    if target is None or "=" in target:
        return None  # bare `make` or `make VAR=...`: the default goal
    return None if target in make_targets() else f"no make target {target!r} in the Makefile"


def aura_command_problem(command: str) -> str | None:
    """`python -m aura_eval <command> ...`: each subcommand is one `--help` lists, each flag one its
    command's `--help` lists. `python -m aura_eval.<module>`: the module exists."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    module = tokens[2]
    if module != "aura_eval":
        return None if importlib.util.find_spec(module) else f"no module {module}"
    path: list[str] = []
    for token in tokens[3:]:
        if token in ("|", "&&", ";", ">"):
            break
        helptext = _help(tuple(path))
        if token.startswith("-"):
            flag = token.split("=")[0]
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helptext):
                return f"`python -m aura_eval {' '.join(path)}` has no flag {flag}"
            continue
        commands = re.search(r"^\s*\{([\w,-]+)\}", helptext, re.M)
        if commands:
            if token in commands.group(1).split(","):
                path.append(token)
            elif not token.startswith(("<", "...")):
                return f"`python -m aura_eval {' '.join(path)}` has no command {token!r}"
            else:
                return None  # a placeholder where the command goes
    return None


def variable_problem(name: str) -> str | None:
    return None if re.search(rf"\b{re.escape(name)}\b", code_text()) else \
        f"no code, config or Makefile names the variable {name}"


def config_key_problem(key: str) -> str | None:
    def same(doc: list, row: list) -> bool:
        return all(r == "<name>" or d == r or d.startswith("<") for d, r in zip(doc, row))

    doc = key.split(".")
    for row in map(lambda k: k.split("."), config_keys()):
        if same(doc, row) and (len(doc) <= len(row) or len(row) >= 2):
            return None
    return f"no config key {key} in the schema (config/README.md's table)"


def is_config_key(span: str) -> bool:
    return bool(CONFIG_KEY.match(span)) and span.split(".")[0] in schema_top_keys() and not span.endswith(EXTENSIONS)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (without `aura_eval.`)."""
    found = {}
    for path in (ROOT / "aura_eval").rglob("*.py"):
        parts = path.relative_to(ROOT / "aura_eval").with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def is_code_reference(span: str) -> bool:
    """`module.attribute` shorthand for the package's code (`llm.shapes`, `reliability.calibration_share`):
    a module whose dotted name ends with the first segments, defining the rest (one name) at top level."""
    segments = span.split(".")
    for j in range(len(segments), 0, -1):
        head, rest = ".".join(segments[:j]), segments[j:]
        for name, path in modules().items():
            if name == head or name.endswith("." + head):
                if not rest:
                    return True
                text = path.read_text(encoding="utf-8")
                if len(rest) == 1 and re.search(rf"^(?:async def|def|class) {rest[0]}\b|^{rest[0]}\s*[:=]", text, re.M):
                    return True
    return False


def is_path(span: str) -> bool:
    if not PATH.match(span) or span.startswith("/") or "://" in span or span.startswith(("-", ".")) and not span.startswith(".test/"):
        return False
    first = span.split("/")[0]
    rooted = (ROOT / first).exists() or first in {w.split("/")[0] for w in WRITTEN}
    return rooted and ("/" in span or span.endswith(EXTENSIONS))


@cache
def tree_paths() -> tuple:
    """Every path in the checkout, without version control, environments and caches (read once)."""
    skip = {".git", ".venv", "__pycache__", "node_modules", ".pytest_cache", ".snakemake"}
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        found += [Path(folder, name).relative_to(ROOT).as_posix() for name in dirs + files]
    return tuple(found)


def path_problem(path: str) -> str | None:
    plain = path.rstrip("/")
    if re.search(r"[<{*]", plain):
        pattern = _pattern(plain)
        if any(pattern.fullmatch(p) for p in tree_paths()):
            return None
    elif (ROOT / plain).exists():
        return None
    mine, sample = _pattern(plain), _sample(plain)
    for pattern, named in named_paths():
        # the same path, a file inside a folder the code names, or a folder holding a file it names
        if pattern.fullmatch(sample) or mine.fullmatch(named) or named.startswith(sample + "/") or \
                any(pattern.fullmatch("/".join(sample.split("/")[:k])) for k in range(1, sample.count("/") + 1)):
            return None
    if plain.startswith("results/"):
        return f"{path} is neither in the tree nor a path the workflow writes"
    if any(plain == w or plain.startswith(w + "/") for w in WRITTEN if w != "results"):
        return None
    return f"{path} is not in the tree, nor a path the code names"


def span_problem(span: str) -> str | None:
    """What is false about one inline code span, or None (also for a span of no known shape)."""
    span = span.strip()
    if span.startswith("make "):
        return make_problem(span)
    if span.startswith("python -m aura_eval"):
        return aura_command_problem(span)
    if span.startswith("python benchmarks/"):
        return path_problem(span.split()[1])
    variable = VARIABLE.match(span)
    if variable:
        return variable_problem(variable.group(1))
    if is_config_key(span):
        problem = config_key_problem(span)
        return None if problem and is_code_reference(span) else problem
    if is_path(span):
        return path_problem(span)
    return None


def line_problems(line: str) -> list[str]:
    """What is false in one shell line of a fenced block: its command, and each path it names."""
    command = command_of(line)
    problems = [span_problem(command)] if command.startswith(("make ", "python -m aura_eval")) else []
    for token in shlex.split(command.replace("`", ""), comments=False) if command else []:
        if "=" in token and not token.startswith("-"):
            token = token.split("=", 1)[1]
        if is_path(token) and not token.startswith(("results/", "packed/")):
            problems.append(path_problem(token))
    return [p for p in problems if p]


def claims(doc: str) -> list[tuple[str, str]]:
    """(claim, what is false about it) for every false claim of one document."""
    text = text_of(doc)
    found = [(span, span_problem(span)) for span in spans(text)]
    found += [(line, problem) for line in shell_lines(text) for problem in line_problems(line)]
    return [(claim, problem) for claim, problem in found if problem]


# -- the measurements page's job counts and the README's offline commands -----------------------------

def measured_jobs() -> dict[str, dict[str, int]]:
    """{config files as given to --configfile: {"total": jobs, rule: jobs, ...}} from the page's
    "Job counts" table."""
    section = MEASUREMENTS.read_text(encoding="utf-8").split("## Job counts", 1)[1].split("\n## ", 1)[0]
    counts = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[2].isdigit():
            files = re.match(r"`([^`]+)`", cells[1]).group(1)
            counts[files] = {"total": int(cells[2]),
                             **{rule: int(n) for rule, n in re.findall(r"(\w+) (\d+)", cells[3])}}
    return counts


def readme_sections() -> dict[str, str]:
    text = text_of("README.md")
    return {m.group(1): m.group(2) for m in re.finditer(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.S | re.M)}


def readme_offline_commands() -> list[str]:
    """The commands of the README's four paths that need no key and no network, in order."""
    sections = readme_sections()
    return [command_of(line) for title in README_PATHS for line in shell_lines(sections[title])
            if ONLINE not in line]


def readme_yaml(section: str) -> str:
    """The first YAML block of a README section (the add-a-model path's `my-model.yaml`)."""
    return re.search(r"^```yaml\n(.*?)^```", readme_sections()[section], re.S | re.M).group(1)
