"""The docs are tested: every command, make target, variable, config key and path they name exists
(tests/docs_claims.py reads them); the measurements page's job counts equal dry runs'; CITATION.cff,
the changelog and the version agree; the card and croissant.json say the same; several config files
are merged as Snakemake merges them; the site builds with warnings as errors; and the README's
offline commands run as written on a finished run."""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from tests import docs_claims
from tests.docs_claims import DOCS, ROOT, measured_jobs
from tests.workflow import move_cache

README_MAX_LINES = 160
FIRST_SCREEN = 40  # lines
# The site's share of make test's five minutes (a build took 1.5 s): a budget, not a mechanism.
SITE_BUDGET_S = 60


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_name_and_path_in_the_docs_exists(doc):
    assert docs_claims.claims(doc) == []


def test_the_checker_finds_false_claims():
    assert docs_claims.span_problem("make nonsense")
    assert docs_claims.span_problem("python -m aura_eval pack out.tar.gz --nope")
    assert docs_claims.span_problem("python -m aura_eval cache explode x")
    assert docs_claims.span_problem("python -m aura_eval.digest")
    assert docs_claims.span_problem("AURA_" + "NEVER_NAMED")  # built here, so no file names it
    assert docs_claims.span_problem("llm.no_such_key")
    assert docs_claims.span_problem("config/no-such.yaml")
    assert docs_claims.span_problem("results/no_such_folder/x.jsonl")
    for true in ("make docs", "python -m aura_eval forecast --configfile a.yaml b.yaml", "OPENROUTER_API_KEY",
                 "llm.budget_usd", "models.<name>.api_key_env", "results/tables/<table>.csv", "llm.shapes",
                 "paper/deviations.md", "results/audit/items/<item_id>.html"):
        assert docs_claims.span_problem(true) is None, true


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "paper/deviations.md" in "\n".join(text.splitlines()[:FIRST_SCREEN])
    for guide in ("running-the-paper", "auditing", "method", "cluster", "measurements", "simulation", "testing"):
        assert f"docs/{guide}.md" in text, guide
    assert list(docs_claims.README_PATHS) == [t for t in docs_claims.readme_sections() if t in docs_claims.README_PATHS]
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY"):
        assert variable in docs_claims.readme_sections()["Run the paper's models"]


def test_the_readme_names_every_key_variable_and_server_config_paper_yaml_needs():
    from aura_eval.workflow.config import key_variable, used_models

    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text(encoding="utf-8"))
    section = docs_claims.readme_sections()["Run the paper's models"]
    variables = {key_variable(config["models"][m]) for m in used_models(config)} - {None}
    assert variables and all(v in section for v in variables)
    servers = {spec["api_base"] for spec in config["models"].values() if "api_base" in spec}
    assert servers and all(s in section for s in servers)


def test_every_benchmark_the_measurements_page_lists_runs_in_make_bench():
    listed = set(re.findall(r"benchmarks/(bench_\w+\.py)", (ROOT / "docs/testing.md").read_text(encoding="utf-8")))
    listed |= set(re.findall(r"benchmarks/(bench_\w+\.py)", docs_claims.MEASUREMENTS.read_text(encoding="utf-8")))
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    bench = make.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert listed == {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert listed <= set(re.findall(r"benchmarks/(bench_\w+\.py)", bench))


def test_measured_figures_are_dated_and_placeholders_searchable():
    text = docs_claims.MEASUREMENTS.read_text(encoding="utf-8")
    rows = [r for r in text.split("## Measured figures", 1)[1].splitlines() if re.match(r"^\| \d+ \|", r)]
    assert rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 8, row
        assert "TBD-MEASURE(" in cells[2] or re.match(r"2026-\d\d-\d\d", cells[5]), row
    assert all(re.fullmatch(r"TBD-MEASURE\([^()]+\)", m) for m in re.findall(r"TBD-MEASURE\S*?\)", text))


@pytest.mark.suite
def test_the_simulation_s_job_counts_are_the_measurements_page_s(tmp_path):
    from tests.workflow import planned_jobs, scratch_copy

    expected = measured_jobs()["config/simulate.yaml"]
    jobs = planned_jobs(scratch_copy(tmp_path), "--configfile", "config/simulate.yaml")
    assert {"total": sum(jobs.values()), **{rule: jobs[rule] for rule in expected if rule != "total"}} == expected


def test_the_job_counts_page_names_the_configs_the_dry_runs_use():
    assert set(measured_jobs()) == {"config/config.yaml", "config/config.yaml my-model.yaml", ".test/config/mock.yaml",
                                    "config/simulate.yaml"}
    assert all(counts["total"] > 0 for counts in measured_jobs().values())
    text = (ROOT / "config/README.md").read_text(encoding="utf-8")
    assert docs_claims.readme_yaml("Add a model").strip() in text.replace("```yaml\n", "", 1) or \
        yaml.safe_load(docs_claims.readme_yaml("Add a model")) == yaml.safe_load(
            re.search(r"with `my-model.yaml`:\n\n```yaml\n(.*?)```", text, re.S).group(1))


# -- citation, changelog, version ---------------------------------------------------------------------

def test_citation_cff_is_valid_cff_1_2_0():
    import jsonschema

    schema = json.loads((ROOT / "schemas/citation-cff-1.2.0.json").read_text(encoding="utf-8"))
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER).validate(cff)
    assert cff["authors"] == [{"name": cff["authors"][0]["name"]}]  # an entity until the paper's authors are known


def test_one_version_in_pyproject_package_citation_changelog_and_release():
    import aura_eval
    from aura_eval import vocab

    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "aura_eval.__version__"}
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", changelog, re.M)
    assert releases[0] == ("Unreleased", "")
    assert releases[1] == (aura_eval.__version__, vocab.RELEASE_DATE)
    assert all(date for _, date in releases[1:])
    assert str(cff["version"]) == aura_eval.__version__ == vocab.RELEASE_VERSION
    assert str(cff["date-released"]) == vocab.RELEASE_DATE


def test_the_card_and_croissant_share_each_use_and_risk_text():
    from aura_eval.construct import card, croissant, uses

    facts = {"name": "AURA-Eval", "simulated": False, "description": "d", "models": {"generator": ["m"]},
             "tags": [], "seeds": 2, "funnel": {"prefixes": 3}, "excluded": 0, "domains": "IoT 2",
             "sizes": {"items": 2, "action_only_subset": 1, "excluded": 0}}
    text = "\n".join(card._release_lines(facts))
    for heading in ("## Uses", "## Out-of-scope use", "## Bias, risks and limitations", "## Personal information",
                    "## Citation"):
        assert text.count(heading + "\n") == 1, heading
    rai = croissant.rai(facts)
    for line in uses.intended_uses() + uses.out_of_scope_uses():
        assert line in text and line in " ".join(rai["dataUseCases"])
    for line in uses.biases(facts) + uses.limitations(facts):
        assert line in text
    assert rai["dataBiases"] == uses.biases(facts) and rai["dataLimitations"] == uses.limitations(facts)
    assert rai["personalSensitiveInformation"] == uses.personal_information() in text
    bibtex = uses.citation()
    assert bibtex in text and croissant.croissant({}, facts)["citeAs"] == bibtex
    assert "@misc{aura_eval_release_" in bibtex and "R-Judge" in bibtex


# -- several config files -------------------------------------------------------------------------------

def test_configs_merge_as_snakemake_merges_them():
    from snakemake.utils import update_config

    from aura_eval.workflow.config import merge_configs

    first = {"models": {"a": {"model": "x", "params": {"t": 0}}}, "seeds": 8, "roles": {"judges": ["a", "b"]}}
    second = {"models": {"a": {"params": {"m": 1}}, "b": {"model": "y"}}, "seeds": "all", "roles": {"judges": ["b"]}}
    expected = json.loads(json.dumps(first))
    update_config(expected, second)
    assert merge_configs(first, second) == expected
    assert first["models"]["a"]["params"] == {"t": 0}  # the inputs are left as they were


def _overlay(tmp_path) -> Path:
    path = tmp_path / "my-model.yaml"
    path.write_text(docs_claims.readme_yaml("Add a model"), encoding="utf-8")
    return path


@pytest.mark.suite  # the forecast's imports take seconds
@pytest.mark.parametrize("style", ["list", "repeated"])
def test_forecast_takes_several_config_files(tmp_path, capsys, style):
    from aura_eval.__main__ import main

    files = [str(ROOT / "config/config.yaml"), str(_overlay(tmp_path))]
    flags = ["--configfile", *files] if style == "list" else ["--configfile", files[0], "--configfile", files[1]]
    assert main(["forecast", *flags, "--root", str(ROOT), "--no-results", "--out", str(tmp_path / "fc")]) == 0
    rows = json.loads((tmp_path / "fc/forecast.json").read_text())["rows"]
    endpoints = {r["endpoint"] for r in rows}
    assert {"my-model", "smollm2-agent"} <= endpoints  # the default's agent and the added one


def test_make_forecast_passes_every_config_file():
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", "forecast", "CONFIG=config/config.yaml my-model.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert re.search(r"-m aura_eval forecast --configfile config/config.yaml my-model.yaml$", dry.stdout, re.M), dry.stdout


def test_pack_stores_the_merged_config(tmp_path):
    from aura_eval.tools.pack import pack
    from aura_eval.workflow.config import load_configs

    from tests.test_unpack_checks import finished_run

    root = finished_run(tmp_path / "run")
    (root / "config").mkdir()
    (root / "config/base.yaml").write_text(yaml.safe_dump({"rjudge_dir": "rjudge", "seeds": 8,
                                                            "llm": {"cache": "cache/run.sqlite", "replay": False}}))
    overlay = _overlay(tmp_path)
    pack(tmp_path / "run.tar.gz", configfiles=["config/base.yaml", str(overlay)], root=str(root))
    with tarfile.open(tmp_path / "run.tar.gz") as tar:
        run = yaml.safe_load(tar.extractfile("config/run.yaml").read())
        replay = yaml.safe_load(tar.extractfile("config/replay.yaml").read())
        info = json.loads(tar.extractfile("PACK.json").read())
    assert run == load_configs([root / "config/base.yaml", overlay]) and "my-model" in run["agents"]
    assert replay["agents"] == run["agents"] and replay["llm"]["replay"] is True
    assert info["config"] == ["config/base.yaml", "my-model.yaml"]


# -- the inspect task's default path -----------------------------------------------------------------

def test_the_inspect_task_reads_a_relative_path_from_where_inspect_was_started(tmp_path, monkeypatch):
    from aura_eval.evaluate.inspect_task import DATASET, items_path

    started = tmp_path / "checkout"
    (started / "results/dataset").mkdir(parents=True)
    (started / DATASET).write_text("{}\n")
    task_folder = tmp_path / "checkout/aura_eval/evaluate"
    task_folder.mkdir(parents=True)
    monkeypatch.chdir(task_folder)  # inspect runs a task from its file's folder
    monkeypatch.setenv("PWD", str(started))  # the shell's working directory, which a chdir leaves alone
    assert items_path(DATASET) == started / DATASET
    assert items_path(str(started / DATASET)) == started / DATASET


# -- the site ----------------------------------------------------------------------------------------------

@pytest.mark.suite
def test_the_docs_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("myst_parser", reason="the docs tools are not installed: pip install -r requirements-docs.txt")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(ROOT / "docs"),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - start < SITE_BUDGET_S
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert pages <= {p.stem for p in (tmp_path / "html").glob("*.html")}


# -- the README's offline commands, as written ----------------------------------------------------------

def _as_installed(work: Path) -> dict:
    """The finished run's copy set up as `make venv` leaves a checkout: the Makefile and its inputs,
    the package, and `.venv` being this environment (already installed, so make installs nothing).
    Returns the environment of an activated `.venv`."""
    for name in ("Makefile", "requirements.txt", "constraints.txt", "pyproject.toml", "requirements-docs.txt"):
        shutil.copy(ROOT / name, work / name)
        os.utime(work / name, (0, 0))
    shutil.copytree(ROOT / "aura_eval", work / "aura_eval", ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    venv = work / ".venv"
    venv.mkdir(exist_ok=True)
    for part in ("bin", "lib", "include"):
        if (Path(sys.prefix) / part).exists() and not (venv / part).exists():
            (venv / part).symlink_to(Path(sys.prefix) / part)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / ".installed").touch()
    return {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PWD": str(work)}


@pytest.mark.e2e
@pytest.mark.xdist_group("mock")  # on the worker that builds the mock run it copies
def test_the_readme_s_offline_commands_run_as_written(mock_run, tmp_path):
    """Every command of the README's four paths that needs no key runs as written, in order, in a copy
    of the finished mock run set up as the default run (its config as config/config.yaml, its cache
    at the default's place); among them the inspect command on mockllm with the default dataset path."""
    source, config = mock_run
    work = tmp_path / "run"
    shutil.copytree(source, work, symlinks=True)
    settings = yaml.safe_load((work / config.relative_to(source)).read_text(encoding="utf-8"))
    cache = settings["llm"]["cache"]
    settings["llm"]["cache"] = "cache/responses.sqlite"
    move_cache(work / cache, work / "cache/responses.sqlite")  # with its -wal: the run's last answers may be there
    (work / "config/config.yaml").write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    from aura_eval.workflow.run_config import record

    record(settings, ["config/config.yaml"], root=work)  # the run's recorded config, as a default run records it
    (work / "my-model.yaml").write_text(docs_claims.readme_yaml("Add a model"), encoding="utf-8")
    env = _as_installed(work)
    commands = docs_claims.readme_offline_commands()
    assert any(c.startswith("inspect eval") and "mockllm" in c and "dataset=" not in c for c in commands)
    for command in commands:
        proc = subprocess.run(command, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        if command.startswith("python -m aura_eval.tools.digest"):
            assert proc.stdout == ""  # the replay rebuilt the same run
        if command.startswith("snakemake -n") and "my-model.yaml" in command:
            assert "rollout" in proc.stdout
    assert list((work / "logs").rglob("*.eval")) or list(work.rglob("*.eval"))  # inspect wrote its log
