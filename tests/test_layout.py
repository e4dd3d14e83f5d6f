"""The package's shape: modules import only modules earlier in the flow of files, and nothing
but a model job that calls a litellm provider loads litellm."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "aura_eval"
# The flow: shared vocabulary and helpers, the model module, the simulator (which registers
# itself with the model module), the spine, then the stages in the order their files flow, then the
# tables, figures and report. A module may import only earlier ones.
FLOW = ["vocab", "report.headline_spec", "analyze.construction_spec", "analyze.calls_spec", "analyze.behaviour_spec",
        "analyze.judges_spec", "analyze.human_spec", "analyze.prompt_tables_spec", "analyze.examples_spec",
        "analyze.pipeline_figure_spec", "analyze.running_example_spec", "analyze.figures_spec", "artefact_registry", "util", "util.jsonl", "util.csv_cells", "util.pages", "util.stats", "util.cells", "util.sampling", "util.tokens", "llm.providers", "workflow", "workflow.config",
        "util.table_files", "util.prompts", "llm.answers", "llm.shapes", "llm.types", "llm.settings", "llm.cache", "llm.pricing", "llm.budget",
        "llm.ratelimit", "llm.local", "llm.stop", "llm.auth", "llm.wire", "llm.vendors.base", "llm.vendors.openai_batch",
        "llm.vendors.anthropic_batch", "llm.vendors.gemini_batch", "llm.vendors", "llm.batch", "llm.client", "llm", "simulator.planted", "simulator", "panel", "stage_runner",
        "stage_registry", "workflow.jobs", "workflow.slurm_check", "workflow.run_config",
        "construct", "construct.seeds", "construct.tagging", "construct.common", "construct.variation", "construct.pairing",
        "construct.funnel", "construct.release", "construct.uses", "construct.croissant", "construct.card",
        "evaluate", "evaluate.action_only", "evaluate.rollout", "evaluate.judging", "evaluate.reliability",
        "evaluate.validation", "evaluate.inspect_task", "evaluate.inspect_log",
        "analyze", "analyze.bands", "analyze.paid", "analyze.forecast", "analyze.forecast_text", "analyze.reasons", "analyze.frame", "analyze.behaviour", "analyze.judges",
        "analyze.human", "analyze.construction", "analyze.calls", "analyze.prompt_tables", "analyze.examples",
        "analyze.figures", "analyze.pipeline_figure", "analyze.running_example",
        "report", "report.paper_numbers", "report.headline", "report.sections", "report.provenance", "report.audit",
        "report.render",
        "tools", "tools.check_local_model", "tools.config_doc", "tools.digest", "tools.cache_explain", "tools.cache_repair", "tools.pack", "tools.preflight", "tools.site_setup", "tools.pilot", "__main__"]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aura_eval"):
            base = node.module.removeprefix("aura_eval").lstrip(".")
            for alias in node.names:  # `from aura_eval.llm import local` imports the module llm.local
                name = f"{base}.{alias.name}" if base else alias.name
                found.add(name if name in FLOW else base)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("aura_eval.") for a in node.names if a.name.startswith("aura_eval.")}
    return {name for name in found if name}


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if _module_name(p)}


def test_every_module_has_a_place_in_the_flow():
    assert sorted(set(MODULES) - set(FLOW)) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_backwards(module):
    later = sorted(name for name in _imports(MODULES[module]) if FLOW.index(name) >= FLOW.index(module))
    assert later == [], f"aura_eval.{module} imports later module(s) {later}"


def test_the_model_module_imports_nothing_of_the_workflow():
    """llm/ imports only itself and the shared helpers (util): the workflow registers what it
    adds (the simulator's responder), so the model module never names it."""
    def inside(name, package):
        return name == package or name.startswith(package + ".")

    outside = {module: sorted(name for name in _imports(path) if not inside(name, "llm") and not inside(name, "util"))
               for module, path in MODULES.items() if inside(module, "llm")}
    assert {module: names for module, names in outside.items() if names} == {}


def test_no_module_of_llm_imports_another_inside_a_function():
    """The model module's dependencies all show in its import graph (the lazy imports it keeps are
    of litellm and the providers' SDKs, never of its own files: ARCHITECTURE.md lists them)."""
    hidden = []
    for module, path in MODULES.items():
        if module == "llm" or module.startswith("llm."):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            top = {id(node) for node in tree.body}
            hidden += [f"{module}:{node.lineno}" for node in ast.walk(tree)
                       if isinstance(node, ast.ImportFrom) and id(node) not in top
                       and (node.module or "").startswith("aura_eval")]
    assert hidden == []


@pytest.mark.suite
def test_planning_and_analysis_never_import_litellm():
    modules = ["vocab", "workflow.config", "llm", "llm.providers", "llm.types", "llm.pricing", "llm.budget",
               "llm.ratelimit", "llm.local", "llm.auth", "llm.wire", "llm.vendors", "llm.batch", "llm.client", "simulator.planted", "simulator", "stage_runner", "construct.seeds", "construct.tagging",
               "construct.variation", "construct.pairing", "construct.release", "construct.card", "evaluate.action_only", "evaluate.rollout",
               "evaluate.judging", "evaluate.reliability", "evaluate.validation", "analyze.forecast", "analyze.forecast_text", "analyze.reasons",
               "analyze.frame", "analyze.behaviour", "analyze.judges", "analyze.human", "analyze.construction",
               "analyze.calls", "analyze.prompt_tables", "analyze.examples", "analyze.figures", "analyze.pipeline_figure",
               "analyze.running_example",
               "report.paper_numbers", "report.audit", "report.render", "tools.digest", "tools.cache_explain",
               "tools.cache_repair", "tools.pack", "tools.preflight",
               "__main__"]
    code = "; ".join(f"import aura_eval.{m}" for m in modules) + "; import sys; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.suite
def test_a_simulated_model_job_never_imports_litellm(tmp_path):
    code = ("import sys; from aura_eval.stage_runner import run_stage; from aura_eval.llm.types import Endpoint, Request; "
            "ep = Endpoint(name='j', model='aura_sim/judge'); "
            "rows = run_stage('s', {'cache': sys.argv[1] + '/c.sqlite'}, [1, 2], lambda u: Request(item_id=str(u), "
            "endpoint=ep, messages=[{'role': 'user', 'content': 'x'}], prompt_id='judge_action_safety', "
            "prompt_version=1, role='judge', schema=None), lambda u, r: {'id': str(u), 'status': r.status}, "
            "sys.argv[1] + '/out.jsonl', 'id', sys.argv[1] + '/calls.jsonl', progress=False); "
            "print(len(rows), 'litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2 False"


def test_every_declared_table_and_figure_has_its_builder_in_the_module_beside_its_declaration():
    """Importing a builder module (after the modules it imports) registers exactly the tables and
    figures its spec module declares; the declarations load no pandas or matplotlib."""
    code = """
import importlib, json, sys
from aura_eval import artefact_registry as registry
heavy = sorted(m for m in ("pandas", "matplotlib", "numpy") if m in sys.modules)
order = ["analyze.construction", "analyze.calls", "analyze.behaviour", "analyze.judges", "analyze.human",
         "analyze.prompt_tables", "analyze.examples", "analyze.figures", "analyze.pipeline_figure",
         "analyze.running_example", "report.headline"]
found = {}
for module in order:
    before = set(registry._BUILDERS)
    importlib.import_module("aura_eval." + module)
    found["aura_eval." + module] = sorted(set(registry._BUILDERS) - before)
declared = {}
for name in [*registry.TABLES, *registry.FIGURES]:
    declared.setdefault(registry.artefact(name)[1].module, []).append(name)
print(json.dumps([heavy, found, {m: sorted(n) for m, n in declared.items()}]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, found, declared = json.loads(out.stdout)
    assert heavy == [] and found == declared and sum(map(len, declared.values())) == 34 + 9

    from aura_eval import artefact_registry as registry
    with pytest.raises(KeyError, match="unknown table or figure 'table99'"):
        registry.builder("table99")


# A network model's stage on the stub (argv: folder, stub address, replay): the rows' statuses, and
# whether the job loaded litellm.
_NETWORK_JOB = (
    "import sys; from aura_eval.stage_runner import run_stage; from aura_eval.llm.types import Endpoint, Request; "
    "ep = Endpoint(name='a', model='openai/stub-agent', api_base=sys.argv[2]); "
    "llm = {'cache': sys.argv[1] + '/c.sqlite', 'replay': sys.argv[3] == 'replay', 'max_retries': 0}; "
    "rows = run_stage('s', llm, [1, 2], lambda u: Request(item_id=str(u), endpoint=ep, "
    "messages=[{'role': 'user', 'content': f'x{u}'}], prompt_id='agent_react_json', prompt_version=1, "
    "role='agent', schema=None), lambda u, r: {'id': str(u), 'status': r.status}, sys.argv[1] + '/out.jsonl', "
    "'id', sys.argv[1] + '/calls.jsonl', progress=False); "
    "print(*[r['status'] for r in rows], 'litellm' in sys.modules)")


@pytest.mark.suite
def test_a_job_whose_answers_are_all_cached_never_imports_litellm(tmp_path, stub):
    """A rerun that finds every answer in the cache, and a replay, send nothing and so never pay
    litellm's import (seconds of CPU per job); the first run, which must send, loads it."""
    def job(mode):
        return subprocess.run([sys.executable, "-c", _NETWORK_JOB, str(tmp_path), stub.api_base, mode],
                              capture_output=True, text=True, check=True).stdout.strip()

    assert job("live") == "ok ok True" and len(stub.state.requests) == 2
    assert job("live") == "ok ok False"
    assert job("replay") == "ok ok False" and len(stub.state.requests) == 2


@pytest.mark.suite
def test_collecting_the_suite_loads_no_heavy_library():
    """Collection is paid by every pytest process (each xdist worker too): litellm, inspect_ai and
    matplotlib are loaded inside the tests that use them, never at import of a test module."""
    code = ("import sys, pytest; pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests']); "
            "print(sorted(m for m in ('litellm', 'inspect_ai', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert "tests collected" in out.stdout and out.stdout.strip().splitlines()[-1] == "[]"


def test_the_code_shape_command_sees_every_module_and_no_import_cycle():
    """benchmarks/code_shape.py (docs/measurements.md, rows 51 and 53) on this tree."""
    out = subprocess.run([sys.executable, str(PACKAGE.parent / "benchmarks" / "code_shape.py")], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith(f"modules {len(MODULES) + 1}, ")  # MODULES leaves out the package's __init__
    assert out.rstrip().endswith("cycles: none") and "llm.client.ModelClient" in out
