"""The container image the Kubernetes profile names (root Dockerfile): it installs exactly the
pinned environment, the way `make venv` does, and nothing else.

No Docker engine runs here, so the image is not built: the test reads the Dockerfile, the Makefile
recipe it runs and the pin files, and asks pip to resolve requirements.txt with constraints.txt from
scratch (as a fresh image does), which must give exactly the pinned set."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines()
                                            if not line.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, flags=re.M)]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"{path.name}: '{line}' is not pinned with =="
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _venv_recipe() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^\$\(VENV\)/\.installed:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    return [line.strip() for line in recipe.group(1).splitlines()]


@pytest.mark.suite
def test_the_image_installs_through_make_venv_and_nothing_else():
    steps = _instructions(ROOT / "Dockerfile")
    base = next(args for op, args in steps if op == "FROM")
    # a fixed patch release of the Python the pins were resolved on, not a floating tag
    assert re.fullmatch(rf"python:{sys.version_info.major}\.{sys.version_info.minor}\.\d+-slim-\w+", base), base
    runs = [args for op, args in steps if op == "RUN"]
    assert not any("pip " in run or "conda" in run for run in runs), "Python packages only through make venv"
    assert sum("make venv" in run for run in runs) == 1
    assert ("COPY", ". .") in steps
    pip_lines = [line for line in _venv_recipe() if "/pip install" in line]
    assert pip_lines == ["$(BIN)/pip install --quiet --upgrade pip -c constraints.txt",
                         "$(BIN)/pip install -r requirements.txt -c constraints.txt",
                         "$(BIN)/pip install --no-deps --no-build-isolation -e . || $(BIN)/pip install --no-deps -e ."]
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "results/*", "cache", ".snakemake", ".env"} <= set(ignored)


def test_every_requirement_is_pinned_to_its_constraint():
    requirements, constraints = _pins(ROOT / "requirements.txt"), _pins(ROOT / "constraints.txt")
    assert {name: version for name, version in requirements.items() if constraints.get(name) != version} == {}
    assert {"pip", "setuptools", "datasets", "mlcroissant", "inspect-ai"} <= set(constraints)


def test_the_kubernetes_profile_names_the_image_make_image_builds():
    profile = yaml.safe_load((ROOT / "profiles/kubernetes/config.yaml").read_text())
    image = re.search(r"^IMAGE \?= (\S+)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    assert profile["container-image"].rsplit("/", 1)[-1].split(":")[0] == image.split(":")[0] == "aura-eval"
    assert "docker build -t $(IMAGE) ." in (ROOT / "Makefile").read_text()


@pytest.mark.e2e  # pip's resolver over the whole requirement set (19 s): the slower tier
def test_a_fresh_install_resolves_to_exactly_the_pinned_set(tmp_path):
    """What a fresh image gets: pip resolves requirements.txt with constraints.txt ignoring what this
    venv holds; every package it would install is pinned, at its pin, and every pin is used."""
    report = tmp_path / "install.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), "-r", "requirements.txt", "-c", "constraints.txt"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    resolved = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}
    pins = _pins(ROOT / "constraints.txt")
    assert {n: v for n, v in resolved.items() if pins.get(n) != v} == {}
    assert set(pins) - set(resolved) == set()
