"""The tiers' parallel part keeps each shared run's tests on one xdist worker (`--dist loadgroup`),
so the run is built once; a pytest or pytest-xdist release that drops the grouping fails here
rather than building runs twice in silence (pytest 9.2 did: pytest-xdist issue 1386)."""

import os
import subprocess
import sys

import pytest

# a pytest of its own with two workers (a few seconds)
pytestmark = pytest.mark.suite

GROUPED = '''
import os
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i, tmp_path_factory):
    with open(os.environ["WORKERS_SEEN"], "a") as out:
        out.write(f"grouped {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("i", range(4))
def test_free(i):
    with open(os.environ["WORKERS_SEEN"], "a") as out:
        out.write(f"free {os.environ['PYTEST_XDIST_WORKER']}\\n")
'''


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    seen = tmp_path / "seen.txt"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-p", "no:randomly", str(tmp_path / "test_grouped.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "WORKERS_SEEN": str(seen)})
    assert proc.returncode == 0, proc.stdout[-2000:]
    lines = [line.split() for line in seen.read_text().splitlines()]
    grouped = {worker for kind, worker in lines if kind == "grouped"}
    assert len(lines) == 8 and len(grouped) == 1, lines
