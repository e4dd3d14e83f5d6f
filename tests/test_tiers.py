"""The tiers' parallel part keeps each shared run's tests on one xdist worker (`--dist loadgroup`),
so the run is built once; a pytest or pytest-xdist release that drops the grouping fails here
rather than building runs twice in silence (pytest 9.2 did: pytest-xdist issue 1386). CI's three
targets together run every test once, and share one folder of whole-workflow runs."""

import json
import os
import re
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


MARKERS_OUT = '''
import json, os

def pytest_collection_finish(session):
    with open(os.environ["MARKERS_OUT"], "w") as out:
        json.dump({item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in session.items}, out)
'''


def _selections(makefile: str) -> dict[str, list[str]]:
    """The `-m` expressions of each test target's pytest commands in the Makefile."""
    targets = {}
    for target in ("test-fast", "test", "test-e2e", "test-slurm"):
        recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
        targets[target] = re.findall(r'-m (?:"([^"]+)"|(\w+))', recipe)
    return {t: [a or b for a, b in found] for t, found in targets.items()}


def test_ci_runs_make_test_test_e2e_and_test_slurm_which_together_select_every_test_once(tmp_path):
    """No test is left out of CI or run twice: .ci/run runs the three targets, and of every collected
    test exactly one `-m` selection of theirs picks it (the fast tier is a part of `make test`); the
    SLURM tests are `make test-slurm`'s, and only theirs."""
    from _pytest.mark.expression import Expression

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ci = open(os.path.join(root, ".ci", "run")).read().split()
    assert {"test", "test-e2e", "test-slurm"} <= set(ci), ci
    selections = _selections(open(os.path.join(root, "Makefile")).read())
    assert selections["test-fast"] == ["fast"] and len(selections["test"]) == 2 and len(selections["test-e2e"]) == 2
    assert selections["test-slurm"] == ["slurm"]
    (tmp_path / "markers_out.py").write_text(MARKERS_OUT)
    out = tmp_path / "markers.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "markers_out",
                           "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MARKERS_OUT": str(out), "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-2000:]
    markers = json.loads(out.read_text())
    assert len(markers) > 700

    def picked_by(targets):
        expressions = [Expression.compile(e) for t in targets for e in selections[t]]
        return {node: sum(e.evaluate(lambda name, **_: name in set(names)) for e in expressions)
                for node, names in markers.items()}

    picked = picked_by(["test", "test-e2e", "test-slurm"])
    assert [n for n, k in picked.items() if k != 1] == []
    slurm_tests = {n for n, k in picked_by(["test-slurm"]).items() if k}
    assert slurm_tests and slurm_tests == {n for n in markers if "test_slurm.py" in n}


PROBE = """
probe:
\t$(SHARED_RUNS) && echo "$$AURA_TEST_RUNS" > "$(OUT)" && touch "$$AURA_TEST_RUNS/made-by-probe"
"""


def test_the_make_targets_keep_a_shared_runs_folder_already_set_and_remove_only_their_own(tmp_path):
    """The Makefile's SHARED_RUNS: with AURA_TEST_RUNS unset a target makes a folder and removes it at
    its end; with it set (.ci/run sets one for all its targets) it uses that one and keeps it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    (tmp_path / "probe.mk").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "AURA_TEST_RUNS" and not k.startswith("MAKE")}

    def probe(**extra):
        out = tmp_path / "out.txt"
        proc = subprocess.run(["make", "-s", "-f", "Makefile", "-f", str(tmp_path / "probe.mk"), "probe",
                               f"OUT={out}"], cwd=root, capture_output=True, text=True, timeout=60,
                              env={**env, **extra})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return out.read_text().strip()

    own = probe()
    assert own and not os.path.exists(own)  # made and removed
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "sim_small.built").touch()
    assert probe(AURA_TEST_RUNS=str(shared)) == str(shared)
    assert sorted(p.name for p in shared.iterdir()) == ["made-by-probe", "sim_small.built"]
    ci = open(os.path.join(root, ".ci", "run")).read()
    assert 'export AURA_TEST_RUNS="$runs"' in ci and "trap" in ci and 'rm -rf "$runs"' in ci
