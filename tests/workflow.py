"""Helpers to run the Snakemake workflow in a scratch copy of the repository."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW_PARTS = ["Snakefile", "rules", "scripts", "prompts", "schemas", "config", "paper", "profiles", "envs",
                  "data", ".test"]


def scratch_copy(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for part in WORKFLOW_PARTS:
        source = ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / part)
    return work


def suite_config(work: Path, name: str, stub_base: str | None = None) -> Path:
    """A config of .test/config/ in the scratch copy (the stub server's address filled in)."""
    path = work / ".test" / "config" / name
    if stub_base is not None:
        path.write_text(path.read_text().replace("http://127.0.0.1:STUB_PORT/v1", stub_base))
    return path


def snakemake(work: Path, *args: str, check=True) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run([str(exe), "--cores", "2", *args], cwd=work, capture_output=True, text=True,
                          timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def planned_jobs(work: Path, *args: str) -> dict[str, int]:
    """{rule: job count} of a dry run (`snakemake -n --quiet rules`), without the total line."""
    dry = snakemake(work, *args, "-n", "--quiet", "rules")
    jobs = {}
    for line in dry.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            jobs[parts[0]] = int(parts[1])
    return jobs


STUB_KEY_ENV = "AURA_STUB_CRED"  # the key variable the stub-served models of .test/config/mock.yaml name
AGENT_MOCK = '{"thought": "mock thought", "action": "mock action"}'


def mock_model(answer: str, **params) -> dict:
    return {"model": "openai/mock-model", "vendor": "mockvendor",
            "params": {"temperature": 0.0, "mock_response": answer, **params}}


def all_stub_config(work: Path, stub_base: str, seeds: int | None = None, cache: str | None = None):
    """(config path, responder): .test/config/mock.yaml with every model served by the stub at `stub_base`
    (so every answer is a request the stub counts), each answering what mock.yaml's canned answer says
    and the construction roles a valid instance of the request's schema. `cache` moves the cache file."""
    import yaml

    from tests.stub_server import schema_answer

    config = yaml.safe_load((ROOT / ".test/config/mock.yaml").read_text())
    canned = {}
    for name, entry in config["models"].items():
        answer = entry["params"].pop("mock_response", None)
        entry.update(model=f"openai/stub-{name}", api_base=stub_base, api_key_env=STUB_KEY_ENV)
        if answer is not None:
            canned[entry["model"].removeprefix("openai/")] = answer
    if seeds is not None:
        config["seeds"] = seeds
    if cache is not None:
        config["llm"]["cache"] = cache
    path = work / ".test/config/all_stub.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    def responder(body: dict, headers) -> str:
        return canned.get(body["model"]) or schema_answer(body)

    return path, responder
