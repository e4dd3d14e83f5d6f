"""Helpers to run the Snakemake workflow in a scratch copy of the repository."""

import os
import shutil
import time
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

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


CURRENT_TEST = None  # the test being run (tests/conftest.py sets it before the test's fixtures)
RUNS_ENV = "AURA_TEST_RUNS"  # a folder the make targets share between a tier's pytest processes (.ci/run: between targets)


def require_tier(what: str, *markers: str) -> None:
    """Fail the running test unless it carries one of `markers` (see tests/conftest.py)."""
    item = CURRENT_TEST
    if item is not None and not any(item.get_closest_marker(m) for m in markers):
        raise AssertionError(f"{item.nodeid} {what} but is not marked {' or '.join(markers)} "
                             f"(the suite's tiers: tests/conftest.py)")


def snakemake_exe() -> str:
    require_tier("launches Snakemake", "suite", "e2e", "slurm")
    return str(Path(sys.executable).parent / "snakemake")


def snakemake(work: Path, *args: str, check=True, env: dict | None = None) -> subprocess.CompletedProcess:
    """`snakemake --cores 2 ARGS` in `work`; `env`: variables added for this run only."""
    proc = subprocess.run([snakemake_exe(), "--cores", "2", *args], cwd=work, capture_output=True, text=True,
                          timeout=1200, env={**os.environ, **env} if env else None)
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


def shared_run(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The scratch copy holding the finished run `name`, built by `build(work)` once per tier: in the
    folder $AURA_TEST_RUNS names (the make targets set one, so the parallel pytest and the serial one
    after it share the run; .ci/run sets one for all its targets, so the run is built once per CI
    run), else in this pytest's temporary folder. A lock keeps two xdist workers
    from building it twice; a build that failed is not tried again by every test that reads it."""
    from filelock import FileLock

    shared = os.environ.get(RUNS_ENV)
    base = Path(shared) if shared else tmp_path_factory.getbasetemp()
    folder, built, failed = base / name, base / f"{name}.built", base / f"{name}.failed"
    asked = time.monotonic()
    with FileLock(str(base / f"{name}.lock")):
        waited = time.monotonic() - asked
        if failed.exists():
            raise AssertionError(f"the shared run {name!r} failed to build:\n{failed.read_text()}")
        if not built.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what an interrupted build left
            folder.mkdir(parents=True)
            try:
                build(scratch_copy(folder))
            except BaseException as err:
                failed.write_text(str(err))
                raise
            built.touch()
            _runs_log(base, f"{name}: built in {time.monotonic() - asked - waited:.0f} s for {_test_id()}")
        elif waited > 1:
            _runs_log(base, f"{name}: {_test_id()} waited {waited:.0f} s for another process's build")
    return folder / "work"


def _test_id() -> str:
    return f"{CURRENT_TEST.nodeid if CURRENT_TEST else '?'} (pid {os.getpid()})"


def _runs_log(base: Path, line: str) -> None:
    """One line in the shared runs' log (`runs.log` beside them; the make targets print it): which
    test built each run, and any test that waited on another's build (an xdist group split)."""
    with open(base / "runs.log", "a", encoding="utf-8") as log:
        log.write(line + "\n")


def copy_run(work: Path, tmp_path: Path) -> Path:
    """A copy of a finished run for a test that changes it: mtimes and .snakemake kept, so Snakemake
    sees the same finished run."""
    copy = tmp_path / "run"
    shutil.copytree(work, copy, symlinks=True)
    return copy


def sigint_as_in_a_terminal() -> None:
    """Popen's `preexec_fn` for a child a test sends SIGINT (Ctrl-C): SIGINT at its default, as in a
    terminal, whatever the test runner inherited. A runner started in a script's background (`&`,
    `nohup`) ignores SIGINT, its children inherit that, and the child would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def move_cache(source: Path, target: Path) -> None:
    """Move a response cache with its `-wal` and `-shm`. A finished run may leave committed answers in
    the `-wal` (SQLite folds it in only when the last connection closes: two jobs closing at once, or a
    read-only reader closing last, leave it), so the file alone can lack the latest answers."""
    for suffix in ("", "-wal", "-shm"):
        side = source.with_name(source.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))


STUB_KEY_ENV = "AURA_STUB_CRED"  # the key variable the stub-served models of .test/config/mock.yaml name
STUB_CRED = "cred-7f3a9c21e8b4d6059a"  # its value in the mock run: a name that does not look secret
MOCK_ENV = {STUB_KEY_ENV: STUB_CRED}
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


def mock_answer(body: dict, headers) -> str:
    """The stub's answers in the mock run. The third reviewer of each panel never answers with JSON:
    its votes are unparseable, and its text quotes the key it was sent (as some providers' error
    texts do)."""
    from tests.stub_server import schema_answer

    if body["model"].endswith("reviewer-3"):
        auth = headers.get("Authorization", "")
        return f"not json {{ (saw Authorization: {auth}; key={auth.split()[-1]})"
    return schema_answer(body)


def build_mock_run(work: Path) -> None:
    """The whole workflow on .test/config/mock.yaml in `work` (a scratch copy), its construction
    roles answered by a stub server that is gone once the run is built."""
    from tests.stub_server import StubServer

    with StubServer() as server:
        server.state.responder = mock_answer
        config = suite_config(work, "mock.yaml", server.api_base)
        snakemake(work, "--configfile", str(config), env=MOCK_ENV)
