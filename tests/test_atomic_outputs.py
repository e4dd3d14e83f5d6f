"""Every output is written through a temporary file in its folder and a rename, with the mode the
umask gives: figures (PNG, SVG), the audit site's item pages, index and stylesheet, the report, and
every file of `util.jsonl`'s helpers. A kill then leaves the old file or the new one, never a cut or
empty one (a kill once left a 0-byte figure), and no output is left 0600 by `mkstemp`."""

import os
import stat

import pytest

from aura_eval.analyze.figures import pyplot, save
from aura_eval.report import audit, render
from aura_eval.util import jsonl
from aura_eval.util.jsonl import atomic_write_bytes, atomic_write_text, write_jsonl
from tests.test_audit import P, site_inputs  # noqa: F401  (the audit tests' inputs, as a fixture)
from tests.test_report import REPORT, _results


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def renamed(monkeypatch):
    """The targets of every rename the writers make."""
    targets = []
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        targets.append(os.path.abspath(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(jsonl.os, "replace", replace)
    return targets


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_written_files_get_the_umask_mode_not_mkstemps_0600(tmp_path, umask_022):
    atomic_write_text(tmp_path / "a.txt", "x\n")
    atomic_write_bytes(tmp_path / "b.bin", b"\0")
    write_jsonl(tmp_path / "c.jsonl", [{"id": 1}])
    assert [mode(tmp_path / n) for n in ("a.txt", "b.bin", "c.jsonl")] == [0o644] * 3
    os.umask(0o077)
    atomic_write_text(tmp_path / "d.txt", "private\n")
    assert mode(tmp_path / "d.txt") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "c.jsonl", "d.txt"]  # no temp file left


def test_a_figure_that_fails_midway_leaves_the_old_files_whole(tmp_path, umask_022, monkeypatch, renamed):
    from matplotlib.figure import Figure

    plt = pyplot()
    png, svg = tmp_path / "fig.png", tmp_path / "fig.svg"
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save(fig, png, svg)
    assert mode(png) == mode(svg) == 0o644 and {str(png), str(svg)} <= set(renamed)
    old = png.read_bytes(), svg.read_bytes()
    real = Figure.savefig

    def dies_in_the_svg(self, target, *args, **kwargs):
        if kwargs.get("format") == "svg" or str(target).endswith(".svg"):
            raise KeyboardInterrupt("killed while drawing the SVG")
        return real(self, target, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", dies_in_the_svg)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    with pytest.raises(KeyboardInterrupt):
        save(fig, png, svg)
    assert (png.read_bytes(), svg.read_bytes()) == old  # neither file was opened in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png", "fig.svg"]


def test_audit_pages_index_and_stylesheet_are_renamed_into_place(site_inputs, umask_022, renamed):  # noqa: F811
    files, site = site_inputs
    audit.build(files, site)
    pages = sorted(str(p) for p in (site / "items").glob("*.html"))
    assert pages and f"{P}.RS2.html" in "".join(pages)
    for path in pages + [str(site / "index.html"), str(site / "audit.css")]:
        assert path in renamed, path
        assert mode(path) == 0o644, path


def test_the_report_is_renamed_into_place(tmp_path, umask_022, renamed):
    files, html = _results(tmp_path)
    render.report(REPORT, files, html)
    assert str(html) in renamed and mode(html) == 0o644
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert not [p for p in html.parent.iterdir() if p.name.endswith(".tmp")]
