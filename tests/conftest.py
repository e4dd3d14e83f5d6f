"""The suite's tiers, its guards and its shared whole-workflow runs.

Tiers (markers registered in pyproject.toml; `docs/testing.md` says which make target runs which):
- fast: every test with no other tier marker (added here at collection): unit tests, no Snakemake,
  no litellm, no browser, no wall-time bound;
- suite: heavier tests that `make test` adds (dry runs, small runs, stub servers through litellm,
  the docs site, and the one shared whole-workflow run, the mock run);
- e2e: every other whole-workflow run (`make test-e2e`);
- slurm: profiles/slurm on the one-node SLURM (`make test-slurm`; tests/test_slurm.py).
`serial` marks a test that asserts wall time or drives a browser: the make targets run those after
the parallel part, alone. A test that launches Snakemake without suite, e2e or slurm, drives a browser
without serial, or (in the fast tier) loads litellm fails, naming itself.
"""

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Every Snakemake launch imports the SLURM executor plugin, which asks `scontrol show config`; with
# no controller up that waits 9-10 s (the file says why). tests/test_slurm.py lifts it for its cluster.
from tests.slurm import NO_CONTROLLER  # noqa: E402

os.environ.setdefault("SLURM_CONF", str(NO_CONTROLLER))

from tests import workflow  # noqa: E402
from tests.stub_server import StubServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("suite", "e2e", "slurm")


def pytest_collection_modifyitems(config, items):
    for item in items:
        tiered = any(item.get_closest_marker(tier) for tier in TIERS)
        if item.get_closest_marker("serial") and not tiered:
            raise pytest.UsageError(f"{item.nodeid} is serial but in no tier: mark it suite, e2e or slurm as well")
        if not tiered:
            item.add_marker(pytest.mark.fast)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # before any fixture, so a shared run built in a test's setup is checked against that test
    workflow.CURRENT_TEST = item


@pytest.fixture(autouse=True)
def _guards(request):
    """Fail a fast test that loads litellm, and any test that leaves the process's Ctrl-C or SIGTERM
    handler changed (pytest could no longer be interrupted)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    had_litellm = "litellm" in sys.modules
    yield
    changed = [sig.name for sig, h in handlers.items() if signal.getsignal(sig) != h]
    for sig, h in handlers.items():
        signal.signal(sig, h)
    assert not changed, f"{request.node.nodeid} left the {', '.join(changed)} handler changed"
    if request.node.get_closest_marker("fast") and not had_litellm:
        assert "litellm" not in sys.modules, (
            f"{request.node.nodeid} loads litellm (seconds): mark it suite, or keep it out of the fast tier's path")


@pytest.fixture(autouse=True)
def dummy_openai_key(monkeypatch):
    # The stub accepts any key; litellm's OpenAI client refuses to start without one.
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-key-for-tests")


@pytest.fixture
def stub():
    with StubServer() as server:
        yield server


@pytest.fixture
def llm_settings(tmp_path):
    return {"cache": str(tmp_path / "cache.sqlite"), "replay": False,
            "concurrency": {"default": 8}, "max_retries": 3, "backoff_s": 0.01, "timeout_s": 5}


@pytest.fixture(scope="session")
def rjudge_dir():
    return ROOT / "data" / "raw" / "rjudge"


@pytest.fixture
def rjudge_copy(tmp_path, rjudge_dir):
    target = tmp_path / "rjudge"
    shutil.copytree(rjudge_dir, target)
    return target


# -- the shared whole-workflow runs: each built once per tier (tests.workflow.shared_run) ----------

@pytest.fixture(scope="session")
def mock_run(tmp_path_factory):
    """(work, config): the whole workflow on mock models (.test/config/mock.yaml; the construction
    roles on the stub server, which is gone once the run is built: what reruns a copy of it finds
    their answers cached). Read it only; a test that changes it changes `workflow.copy_run(...)`."""
    work = workflow.shared_run(tmp_path_factory, "mock", workflow.build_mock_run)
    return work, work / ".test" / "config" / "mock.yaml"


def _simulated(name: str):
    def build(work: Path) -> None:
        workflow.snakemake(work, "--configfile", str(workflow.suite_config(work, name)))
    return build


@pytest.fixture(scope="session")
def sim_run(tmp_path_factory):
    """(work, config dict): the small noise-free simulated workflow (.test/config/sim_small.yaml)."""
    import yaml

    work = workflow.shared_run(tmp_path_factory, "sim_small", _simulated("sim_small.yaml"))
    return work, yaml.safe_load((work / ".test/config/sim_small.yaml").read_text())


@pytest.fixture(scope="session")
def noisy_run(tmp_path_factory):
    """(work, config dict): the small noisy simulated workflow (.test/config/sim_noisy.yaml): the
    simulation's tests and the release's read it."""
    import yaml

    work = workflow.shared_run(tmp_path_factory, "sim_noisy", _simulated("sim_noisy.yaml"))
    return work, yaml.safe_load((work / ".test/config/sim_noisy.yaml").read_text())
