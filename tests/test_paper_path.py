"""The paper's path as a user with keys and a cluster walks it (issue 41): the vLLM servers' lines
match the config, only rollouts call them, the batch overlay batches the judges alone, the site
command makes a profile and a site config, the config recorded with the results is what pack and
forecast act on, a failed run counts its failed calls; and (e2e) every command of the path, as the
README and the guides write it, runs against the provider emulators (Snakemake's as dry runs: the
whole workflow on the emulated paper config is the dialect test's, and the cluster guide's
`site_setup` and run command run for real on the one-node SLURM in tests/test_slurm.py)."""

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests import docs_claims
from tests.docs_claims import ROOT, readme_sections, shell_lines

PAPER = ROOT / "config" / "paper.yaml"
OVERLAY = ROOT / "config" / "paper-batch-judges.yaml"
GUIDE = "docs/running-the-paper.md"
CLUSTER_GUIDE = "docs/cluster.md"


def load(*paths):
    from aura_eval.workflow.config import load_configs

    return load_configs(paths)


# -- the vLLM servers ---------------------------------------------------------------------------------

def vllm_lines() -> list[list[str]]:
    return [shlex.split(line) for line in shell_lines(docs_claims.text_of(GUIDE)) if line.startswith("vllm serve ")]


def flag(tokens: list[str], name: str) -> str | None:
    return tokens[tokens.index(name) + 1] if name in tokens else None


def test_the_vllm_serve_lines_serve_the_names_and_ports_the_config_calls():
    config = yaml.safe_load(PAPER.read_text())
    hosted = {name: e for name, e in config["models"].items() if e["model"].startswith("hosted_vllm/")}
    lines = vllm_lines()
    assert len(hosted) == len(lines) == 2
    table = docs_claims.text_of(GUIDE)
    for name, entry in hosted.items():
        served = entry["model"].split("/", 1)[1]
        line = [t for t in lines if flag(t, "--served-model-name") == served]
        assert line, f"no `vllm serve` line serves {served} ({name})"
        assert flag(line[0], "--port") == str(urlparse(entry["api_base"]).port), name
        repo = line[0][2]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and f"`{repo}`" in table  # the table names the repository
        assert f"| `{name}` | `{entry['model']}` | `{repo}` |" in table


def test_only_the_rollout_jobs_call_the_self_hosted_servers():
    from aura_eval import stage_registry
    from aura_eval.workflow import jobs
    from aura_eval.workflow.config import complete_config

    config, _ = complete_config(yaml.safe_load(PAPER.read_text()))
    hosted = {n for n, e in config["models"].items() if e["model"].startswith("hosted_vllm/")}
    callers = set()
    for stage in stage_registry.registry().values():
        for job in jobs.stage_jobs(config, tuple(stage.wildcards)):
            if hosted & set(jobs.job_models(config, stage.role, job)):
                callers.add((stage.rule, job.get("run")))
    assert callers == {("rollout", "realsafe-r1-32b"), ("rollout", "realsafe-r1-32b.action_only"),
                       ("rollout", "stair-llama3-8b")}
    guide = " ".join(docs_claims.text_of(GUIDE).split())
    assert all(f"`{run}`" in guide for _, run in callers)  # the guide names the same three jobs


# -- the batch overlay --------------------------------------------------------------------------------

def test_the_batch_overlay_batches_the_three_judges_and_no_construction_role():
    from aura_eval.workflow.config import CONSTRUCTION_ROLES, as_list, check_config, complete_config

    config, _ = complete_config(load(PAPER, OVERLAY))
    check_config(config)
    batched = {name for name, entry in config["models"].items() if entry.get("batch")}
    assert batched == set(config["roles"]["judges"]) and len(batched) == 3
    construction = {m for role in (*CONSTRUCTION_ROLES, "tagger") for m in as_list(config["roles"][role])}
    assert not batched & construction
    assert config["llm"]["budget_usd"] > 0
    # the overlay changes no result: the config recorded with a run of it is the paper's
    from aura_eval.workflow.run_config import differences

    assert differences(load(PAPER, OVERLAY), load(PAPER)) == []


def test_the_paper_s_gemini_id_is_the_one_google_lists():
    config = yaml.safe_load(PAPER.read_text())
    gemini = {e["model"] for e in config["models"].values() if e["model"].startswith("gemini/")}
    assert gemini == {"gemini/gemini-3.1-pro-preview"}
    assert "`gemini/gemini-3.1-pro-preview`" in docs_claims.text_of(GUIDE)


# -- the site's profile and config --------------------------------------------------------------------

def site_root(tmp_path) -> Path:
    (tmp_path / "profiles/slurm").mkdir(parents=True)
    (tmp_path / "profiles/slurm/config.yaml").write_bytes((ROOT / "profiles/slurm/config.yaml").read_bytes())
    return tmp_path


def test_site_setup_copies_the_template_with_the_site_s_values(tmp_path):
    from aura_eval.tools.site_setup import main

    root = site_root(tmp_path)
    template = (root / "profiles/slurm/config.yaml").read_text()
    cache = str(tmp_path / "local/responses.sqlite")
    assert main(["--partition", "gpu", "--account", "lab-1", "--cache", cache, "--root", str(root)]) == 0
    profile = yaml.safe_load((root / "profiles/site/config.yaml").read_text())
    shipped = yaml.safe_load(template)
    assert profile["default-resources"] == dict(shipped["default-resources"], slurm_partition="gpu",
                                                slurm_account="lab-1")
    assert {k: v for k, v in profile.items() if k != "default-resources"} == \
        {k: v for k, v in shipped.items() if k != "default-resources"}
    assert (root / "profiles/slurm/config.yaml").read_text() == template  # the template stays as shipped
    assert yaml.safe_load((root / "config/site.yaml").read_text()) == {"llm": {"cache": cache}}
    # no accounting: no account line; squeue as the status command
    assert main(["--partition", "gpu", "--status-command", "squeue", "--cache", cache, "--root", str(root),
                 "--force"]) == 0
    profile = yaml.safe_load((root / "profiles/site/config.yaml").read_text())
    assert "slurm_account" not in profile["default-resources"] and profile["slurm-status-command"] == "squeue"
    assert "<your-" not in (root / "profiles/site/config.yaml").read_text()


def test_site_setup_refuses_a_cache_on_a_network_file_system_and_a_changed_file(tmp_path, monkeypatch, capsys):
    from aura_eval.llm import cache as cache_module
    from aura_eval.tools.site_setup import main

    root = site_root(tmp_path)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n"
                         "40 22 0:40 / /shared rw - nfs4 server:/export rw\n")
    monkeypatch.setattr(cache_module, "MOUNTINFO", mountinfo)
    assert main(["--partition", "gpu", "--cache", "/shared/aura/responses.sqlite", "--root", str(root)]) == 1
    assert "nfs4" in capsys.readouterr().err and not (root / "profiles/site").exists()
    assert main(["--partition", "gpu", "--cache", "/var/tmp/x/responses.sqlite", "--root", str(root)]) == 0
    assert main(["--partition", "other", "--cache", "/var/tmp/x/responses.sqlite", "--root", str(root)]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["--partition", "bad name", "--root", str(root), "--force"]) == 1


# -- the config recorded with the results --------------------------------------------------------------

def test_the_recorded_config_round_trips_and_differences_name_what_changes_results(tmp_path):
    from aura_eval.workflow.run_config import RUN_CONFIG, differences, record, recorded_config

    paper = load(PAPER)
    assert recorded_config(tmp_path) is None
    record(paper, ["config/paper.yaml", "my-model.yaml"], root=tmp_path)
    found = recorded_config(tmp_path)
    assert found.config == paper and found.files == ("config/paper.yaml", "my-model.yaml")
    assert found.path == tmp_path / RUN_CONFIG
    assert yaml.safe_load(found.path.read_text()) == paper  # itself a valid --configfile
    moved = json.loads(json.dumps(paper))
    moved["llm"]["cache"] = "/var/tmp/u/aura-eval/responses.sqlite"
    moved["models"]["gpt-5.4"]["batch"] = True
    assert differences(moved, paper) == []  # where the cache lives and batch mode change no answer
    moved["seeds"] = 8
    moved["models"]["realsafe-r1-32b-agent"]["api_base"] = "http://gpu-7:8000/v1"  # part of the cache key
    assert differences(moved, paper) == ["models.realsafe-r1-32b-agent.api_base", "seeds"]


def test_pack_takes_the_recorded_config_and_refuses_another(tmp_path, capsys):
    from aura_eval.__main__ import main
    from aura_eval.workflow.run_config import record
    from aura_eval.tools.pack import PackError, run_configfiles

    from tests.test_unpack_checks import finished_run

    root = finished_run(tmp_path / "run")
    config = {"rjudge_dir": "rjudge", "seeds": 8, "llm": {"cache": "cache/run.sqlite", "replay": False}}
    (root / "config").mkdir(exist_ok=True)
    (root / "config/config.yaml").write_text(yaml.safe_dump(dict(config, seeds=4)))
    (root / "config/run.yaml").write_text(yaml.safe_dump(dict(config, llm={"cache": "elsewhere.sqlite"})))
    assert run_configfiles(None, root)[0] == ["config/config.yaml"]  # no record: the default, with a note
    record(config, ["config/run.yaml"], root=root)
    assert run_configfiles(None, root)[0] is None  # the record
    assert run_configfiles(["config/run.yaml"], root)[0] == ["config/run.yaml"]  # the same in what counts
    with pytest.raises(PackError, match=r"made with config/run.yaml .*differ in seeds"):
        run_configfiles(["config/config.yaml"], root)
    assert main(["pack", str(tmp_path / "a.tar.gz"), "--configfile", "config/config.yaml", "--root", str(root)]) == 1
    assert "differ in seeds" in capsys.readouterr().err and not (tmp_path / "a.tar.gz").exists()
    assert main(["pack", str(tmp_path / "b.tar.gz"), "--root", str(root)]) == 0
    import tarfile

    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        packed = yaml.safe_load(tar.extractfile("config/run.yaml").read())
        info = json.loads(tar.extractfile("PACK.json").read())
    assert packed == config and info["config"] == "results/run/config.yaml"


def test_make_pack_and_forecast_pass_no_config_unless_told():
    for target in ("pack", "forecast"):
        dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", target], cwd=ROOT, capture_output=True,
                             text=True, timeout=30)
        assert re.search(rf"-m aura_eval {target}( \S+)?\s*$", dry.stdout, re.M), dry.stdout
        assert "--configfile" not in dry.stdout


# -- a failed run's end ------------------------------------------------------------------------------------

def test_the_end_of_a_failed_run_counts_the_failed_calls(tmp_path):
    import time

    from aura_eval.stage_runner import failed_calls_summary, failure_problem

    logs = tmp_path / "logs"
    (logs / "judge").mkdir(parents=True)
    calls = [{"status": "failed", "error": "Timeout: slow"}] * 3 + [{"status": "ok"}] * 97
    (logs / "judge/a.log").write_text("progress\nStageFailed: " + failure_problem("judge_safety", calls, 0) + "\n")
    calls = [{"status": "failed", "error": "APIError: 502"}] + [{"status": "ok"}] * 9
    (logs / "rollout.log").write_text(failure_problem("rollout", calls, 0) + "\n")
    (logs / "ok.log").write_text("rollout: 10 calls, 10 ok\n")
    assert failed_calls_summary(logs).startswith("4 call(s) failed in 2 job(s) (judge_safety, rollout); ")
    assert "a plain rerun of the same command sends only the failed calls" in failed_calls_summary(logs)
    assert failed_calls_summary(logs, since=time.time() + 60) is None  # logs of an earlier run
    assert failed_calls_summary(tmp_path / "none") is None


# -- the path's commands, as written, against the emulators (e2e) -------------------------------------------

PATHS = ("Run the paper's models", "Add a model", "Run on a cluster")


def path_commands() -> list[str]:
    """Every command of the paper's path: the README's three paths and the two guides' first blocks,
    in order, without the key exports (the test sets its own) and the vLLM servers (checked above)."""
    lines = [line for title in PATHS for line in shell_lines(readme_sections()[title])]
    for guide in (GUIDE, CLUSTER_GUIDE):  # each guide's opening block, above its first section
        lines += shell_lines(docs_claims.text_of(guide).split("\n## ", 1)[0])
    commands = []
    for line in lines:
        command = docs_claims.command_of(line)
        if command.startswith(("export ", "vllm serve ")) or command in commands:
            continue
        commands.append(command)
    return commands


def as_dry_run(command: str) -> str:
    """A snakemake command as a dry run (a real run of the paper's path is the dialect test's)."""
    tokens = shlex.split(command)
    if tokens[0] == "snakemake" and "-n" not in tokens:
        tokens.insert(1, "-n")
    return shlex.join(tokens)


def test_the_path_s_commands_are_the_ones_this_test_runs():
    commands = path_commands()
    assert any(c.startswith("python -m aura_eval.tools.site_setup") for c in commands)
    assert any("--profile profiles/site" in c and "config/site.yaml" in c for c in commands)
    assert any(c.startswith("make preflight") for c in commands) and any(c.startswith("make forecast") for c in commands)
    assert all("--keep-going" in c for c in commands if c.startswith("snakemake --") and "kubernetes" not in c)
    assert not any("profiles/slurm" in c for c in commands)  # the template is copied, not used as shipped


@pytest.mark.e2e
def test_every_command_of_the_paper_s_path_runs_against_the_emulators(tmp_path):
    from tests.emulators import EMULATORS
    from tests.test_docs import _as_installed
    from tests.test_provider_dialects import KEY_ENV, EMULATOR_CRED, emulated_config
    from tests.workflow import scratch_copy

    emulators = {name: cls() for name, cls in EMULATORS.items()}
    for emulator in emulators.values():
        emulator.__enter__()
    try:
        work = scratch_copy(tmp_path)
        env = _as_installed(work)
        paper = yaml.safe_load(PAPER.read_text())
        # config/paper.yaml as the path names it: its entries, each pointed at its provider's emulator
        emulated = emulated_config(paper, {name: e.api_base for name, e in emulators.items()})
        (work / "config/paper.yaml").write_text(yaml.safe_dump(emulated, sort_keys=False))
        (work / "my-model.yaml").write_text(docs_claims.readme_yaml("Add a model"))
        env.update({KEY_ENV: EMULATOR_CRED, "SLURM_CONF": str(ROOT / "tests/slurm-no-controller.conf")})
        for command in path_commands():
            if "my-model.yaml" in command and "preflight" in command:
                continue  # my-model.yaml's entry has no emulator (a real OpenAI model)
            ran = as_dry_run(command)
            if "profiles/kubernetes" in command:  # the volume the guide has the user fill (docs/cluster.md)
                store = tmp_path / "store"
                for part in ("data", "prompts", "paper"):
                    if not (store / "storage" / part).exists():
                        shutil.copytree(work / part, store / "storage" / part)
                ran += f" --default-storage-prefix {shlex.quote(str(store / 'storage'))}"
            proc = subprocess.run(ran, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"{ran}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            if command.startswith("make preflight"):
                assert "OK" in proc.stdout and "unknown model" not in proc.stdout, proc.stdout
            if command.startswith("python -m aura_eval.tools.site_setup"):
                assert (work / "profiles/site/config.yaml").is_file() and (work / "config/site.yaml").is_file()
        # the preflight's requests reached every dialect the emulated paper config uses
        assert all(e.state.counts()["requests"] > 0 for e in emulators.values())
    finally:
        for emulator in emulators.values():
            emulator.__exit__()


@pytest.mark.e2e
def test_a_run_with_failed_calls_keeps_going_and_its_end_counts_them(stub, tmp_path):
    """A tagger whose every call fails (500, no retry): under --keep-going the run fails at its end,
    and that end says how many calls failed and that a plain rerun sends only those."""
    from tests.workflow import scratch_copy, snakemake

    work = scratch_copy(tmp_path)
    stub.state.default = "500"
    config = {"seeds": 2, "llm": {"cache": "cache/failing.sqlite", "max_retries": 0, "backoff_s": 0.01},
              "models": {"tagger": {"model": "openai/stub-fails", "api_base": stub.api_base,
                                    "api_key_env": "AURA_STUB_CRED", "vendor": "stub"}},
              "roles": {"tagger": "tagger"}}
    path = work / "failing.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = snakemake(work, "results/prefixes/tags.jsonl", "--keep-going", "--configfile", "config/config.yaml",
                     str(path), check=False, env={"AURA_STUB_CRED": "stub-cred"})
    assert proc.returncode != 0
    assert "2 call(s) failed in 1 job(s) (tag_steps); every answer received is in the cache, so a plain rerun " \
           "of the same command sends only the failed calls" in proc.stderr, proc.stderr[-3000:]
    recorded = yaml.safe_load((work / "results/run/config.yaml").read_text())
    assert recorded["models"]["tagger"]["model"] == "openai/stub-fails"  # the run's config, recorded at its start


@pytest.mark.e2e  # litellm's import and a request per entry: beside the path's other emulator test
def test_the_preflight_names_a_model_id_each_provider_does_not_know():
    """Each provider of config/paper.yaml answers `unknown model` the way it does (OpenAI's 404, Anthropic's
    not_found_error, Gemini's NOT_FOUND, OpenRouter's 400, ...): the preflight names it for every entry."""
    from aura_eval.tools import preflight as pf
    from aura_eval.workflow.config import complete_config
    from tests.emulators import EMULATORS
    from tests.emulators.base import UNKNOWN_MODEL
    from tests.test_provider_dialects import KEY_ENV, EMULATOR_CRED, emulated_config

    emulators = {name: cls() for name, cls in EMULATORS.items()}
    for emulator in emulators.values():
        emulator.__enter__()
        emulator.state.default = UNKNOWN_MODEL
    old = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = EMULATOR_CRED
    try:
        config, _ = complete_config(emulated_config(yaml.safe_load(PAPER.read_text()),
                                                    {name: e.api_base for name, e in emulators.items()}))
        checks = pf.run(config)
        assert checks and all(not c.ok and "unknown model" in c.text for c in checks), \
            [(c.name, c.text) for c in checks if c.ok or "unknown model" not in c.text]
        assert {c.model.split("/", 1)[0] for c in checks} == {"openai", "anthropic", "gemini", "deepseek",
                                                             "openrouter", "hosted_vllm"}
    finally:
        if old is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = old
        for emulator in emulators.values():
            emulator.__exit__()
