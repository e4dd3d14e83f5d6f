"""A finished run as one shippable archive, and its way back into a checkout for an offline replay.

    python -m aura_eval pack <out.tar.gz> [--configfile config/config.yaml] [--root .]
    python -m aura_eval unpack <archive> <checkout dir> [--force]

`pack` writes a gzipped tar of: `results/dataset/`, `results/tables/`, the report
(`results/report/report.html`), the response cache (`cache/<name>`, a consistent SQLite copy
made with the backup API), the config used (`config/run.yaml`, byte for byte) and its replay
form (`config/replay.yaml`: `llm.replay: true`, `llm.cache: packed/cache/<name>`), the human
labels the run read (`data/human/annotations/*.csv`, `data/human/adjudicated.csv`), R-Judge's
source and licence files (everything directly under `rjudge_dir` that is not data), `TERMS.md`
(the terms of the shipped model responses), `STABLE_DIGESTS.sha256` (`aura_eval.tools.digest` of
every stable file under the run's `results/`, to compare a replay with), `PACK.json` (the code
commit, the config's name, the cache's row count) and `MANIFEST.sha256` (`sha256  path` of every
other file, as `sha256sum -c` reads it). Members are sorted with zeroed times and owners.

`unpack` extracts into `<checkout>/packed/`, verifies every file against the MANIFEST (a
mismatch, a missing or an unlisted file stops it, naming the file, and nothing is placed), puts
the human labels under `<checkout>/data/human/` and prints the replay command:
`snakemake --forceall --configfile packed/config/replay.yaml` rebuilds every file under
`results/` from the cache with zero model calls, and `python -m aura_eval.tools.digest` of the
checkout then equals `packed/STABLE_DIGESTS.sha256`. The checkout must be of the same code
(`PACK.json` names its commit) with the R-Judge data in place.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from pathlib import Path

import yaml

from aura_eval.llm.cache import CacheError, cache_error, connect_readonly
from aura_eval.llm.providers import is_simulated
from aura_eval.tools.digest import stable_digests
from aura_eval.workflow_config import with_schema_defaults

MANIFEST = "MANIFEST.sha256"
DIGESTS = "STABLE_DIGESTS.sha256"
PACKED = "packed"  # the folder of the checkout that unpack fills
RESULT_PARTS = ("results/dataset", "results/tables")
REPORT = "results/report/report.html"
DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")  # R-Judge's data files, not shipped (the checkout has them)


class PackError(RuntimeError):
    """An archive cannot be made, or does not verify."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _commit(where: Path) -> dict:
    def git(*args):
        out = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None
    head = git("rev-parse", "HEAD")
    return {"commit": head, "dirty": bool(git("status", "--porcelain")) if head else None}


def _cache_copy(source: Path, target: Path) -> int:
    """A consistent single-file copy of the SQLite cache (WAL folded in); its row count. The cache is
    read without writing to it (`connect_readonly`); an SQLite error names it (`cache_error`)."""
    try:
        src = connect_readonly(source, purpose="pack")
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
            rows = dst.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        finally:
            dst.close()
            src.close()
    except CacheError as err:
        raise PackError(str(err)) from None
    except sqlite3.Error as err:
        raise PackError(str(cache_error(source, err))) from None
    return rows


def _simulated(config: dict) -> list[str]:
    return sorted(name for name, entry in (config.get("models") or {}).items()
                  if is_simulated(str(entry.get("model", ""))))


def terms_note(config: dict, licence_files: list[str]) -> str:
    simulated = _simulated(config)
    providers = sorted({str(e.get("model", "")).split("/", 1)[0] for e in (config.get("models") or {}).values()
                        if not is_simulated(str(e.get("model", "")))})
    if any("LICEN" in f.upper() for f in licence_files):
        licence = f"its licence and source notes are shipped as {', '.join(licence_files)}."
    else:
        licence = (f"no licence file is present under the run's `rjudge_dir`, so "
                   f"{', '.join(licence_files) or 'no file'} is shipped as its source note and R-Judge's "
                   f"own terms (https://github.com/Lordog/R-Judge) apply.")
    if simulated:
        sim = (f"Simulated models in this run: {', '.join(simulated)} (`aura_sim/`). Their answers are synthetic, "
               f"drawn by AURA-Eval's planted-truth simulator (`aura_eval/simulator/planted.py`), not written by any model.")
    else:
        sim = "No model of this run is simulated; answers of `aura_sim/` models would be synthetic."
    return "\n\n".join([
        "# Terms of this archive",
        "**The source data.** Every item derives from R-Judge (Yuan et al., 2024, \"R-Judge: Benchmarking "
        "Safety Risk Awareness for LLM Agents\", Findings of EMNLP 2024): " + licence + " The records "
        "themselves are not in this archive; the dataset's rows quote and rewrite them.",
        "**Model responses.** The response cache (`cache/`) and every `raw_response` in `results/` are "
        f"outputs of the models named in `config/run.yaml` (litellm providers: {', '.join(providers) or 'none'}). "
        "They are the providers' outputs and remain under each provider's terms of use (including any limits "
        "on using outputs to train or evaluate other models); whoever redistributes or reuses them must "
        "respect those terms. Responses of the embedded model (`aura_local/`) are outputs of "
        "SmolLM2-135M-Instruct under its licence; litellm's canned answers (`mock_response`) and a test "
        "stub's answers are fixed test strings.",
        "**Simulated responses.** " + sim + " Simulated answers are never cached, so a replay recomputes "
        "them; numbers drawn from them describe the simulator, not any model.",
        "**Provenance.** Each cached response carries its provider response id, system fingerprint, "
        "litellm version, prompt id and version, sampling parameters, the UTC time and latency of the first "
        "call, tokens and cost (rows cached before this was recorded lack these fields); "
        "`python -m aura_eval cache explain` reads them.",
    ]) + "\n"


def _replay_config(config: dict, cache_name: str) -> str:
    replay = json.loads(json.dumps(config))  # a deep copy without YAML anchors
    replay.setdefault("llm", {})["replay"] = True  # a config may leave `llm` to its defaults
    replay["llm"]["cache"] = f"{PACKED}/cache/{cache_name}"
    header = ("# The packed run's config in replay mode (written by `python -m aura_eval pack`): every answer\n"
              "# comes from the packed cache; a request it does not hold stops the job (CacheMissError).\n")
    return header + yaml.safe_dump(replay, sort_keys=False, allow_unicode=True)


def _add(tar: tarfile.TarFile, name: str, data: bytes | Path) -> None:
    info = tarfile.TarInfo(name)
    info.mtime, info.mode = 0, 0o644
    if isinstance(data, bytes):
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        info.size = data.stat().st_size
        with data.open("rb") as f:
            tar.addfile(info, f)


def pack(out, configfile="config/config.yaml", root=".") -> dict:
    """Write the archive; a summary (files, bytes, cache rows)."""
    root, out = Path(root).resolve(), Path(out)
    config_path = (Path(configfile) if Path(configfile).is_absolute() else root / configfile).resolve()
    if not config_path.is_file():
        raise PackError(f"pack: no config file {config_path}")
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    filled = with_schema_defaults(config)  # the keys a config leaves out, as the workflow fills them
    cache = Path(filled["llm"]["cache"])
    cache = cache if cache.is_absolute() else root / cache
    for part in (*RESULT_PARTS, REPORT):
        if not (root / part).exists():
            raise PackError(f"pack: {part} is missing under {root}: finish the run first")
    if not cache.is_file():
        raise PackError(f"pack: the config's response cache {cache} does not exist")
    members: dict[str, bytes | Path] = {}
    for part in RESULT_PARTS:
        for path in sorted((root / part).rglob("*")):
            if path.is_file():
                members[path.relative_to(root).as_posix()] = path
    members[REPORT] = root / REPORT
    human = sorted((root / "data/human/annotations").glob("*.csv")) + [
        p for p in [root / "data/human/adjudicated.csv"] if p.is_file()]
    for path in human:
        members[path.relative_to(root).as_posix()] = path
    rjudge = Path(filled["rjudge_dir"])
    rjudge = rjudge if rjudge.is_absolute() else root / rjudge
    licence_files = []
    for path in sorted(rjudge.iterdir()) if rjudge.is_dir() else []:
        if path.is_file() and path.suffix.lower() not in DATA_SUFFIXES:
            licence_files.append(f"rjudge/{path.name}")
            members[f"rjudge/{path.name}"] = path
    members["config/run.yaml"] = config_path.read_bytes()
    members["config/replay.yaml"] = _replay_config(config, cache.name).encode()
    members["TERMS.md"] = terms_note(config, licence_files).encode()
    members[DIGESTS] = "".join(f"{d}  {rel}\n" for rel, d in stable_digests(root).items()).encode()
    with tempfile.TemporaryDirectory() as tmp:
        cache_copy = Path(tmp) / cache.name
        rows = _cache_copy(cache, cache_copy)
        members[f"cache/{cache.name}"] = cache_copy
        code = _commit(Path(__file__).resolve().parents[2])
        members["PACK.json"] = (json.dumps({
            "config": config_path.relative_to(root).as_posix() if config_path.is_relative_to(root)
            else config_path.as_posix(),
            "code_commit": code["commit"], "code_dirty": code["dirty"], "cache": cache.name, "cache_rows": rows,
            "simulated_models": _simulated(config),
            "replay": f"snakemake --forceall --configfile {PACKED}/config/replay.yaml"}, indent=2) + "\n").encode()
        digests = {name: _sha256(data) if isinstance(data, bytes) else _file_sha256(data)
                   for name, data in members.items()}
        members[MANIFEST] = "".join(f"{digests[n]}  {n}\n" for n in sorted(digests)).encode()
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        with open(partial, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in [MANIFEST, *sorted(n for n in members if n != MANIFEST)]:
                _add(tar, name, members[name])
        partial.replace(out)
    return {"files": len(members), "bytes": out.stat().st_size, "cache_rows": rows}


def _verify(folder: Path) -> list[str]:
    """The files of an extracted archive, checked against its MANIFEST; PackError names the first bad one."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise PackError(f"unpack: the archive has no {MANIFEST}")
    listed = {}
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise PackError(f"unpack: {MANIFEST} line {number} is not `sha256  path`")
        listed[name] = digest
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {MANIFEST}
    for name in sorted(listed):
        if name not in present:
            raise PackError(f"unpack: {name} is listed in {MANIFEST} but missing from the archive")
        actual = _file_sha256(folder / name)
        if actual != listed[name]:
            raise PackError(f"unpack: checksum mismatch for {name}: {MANIFEST} says {listed[name]}, "
                            f"the file has {actual}")
    extra = sorted(present - set(listed))
    if extra:
        raise PackError(f"unpack: {extra[0]} is in the archive but not in {MANIFEST}")
    return sorted(listed)


def unpack(archive, checkout, force: bool = False) -> dict:
    """Verify the archive and place it in the checkout; a summary (files, the replay command)."""
    archive, checkout = Path(archive), Path(checkout)
    if not checkout.is_dir():
        raise PackError(f"unpack: no checkout folder {checkout}")
    target = checkout / PACKED
    if target.exists() and any(target.iterdir()) and not force:
        raise PackError(f"unpack: {target} is not empty (pass --force to replace it)")
    with tempfile.TemporaryDirectory(dir=checkout, prefix=".unpack-") as tmp:
        staging = Path(tmp) / PACKED
        staging.mkdir()
        try:
            with tarfile.open(archive, "r:gz") as tar:
                for member in tar.getmembers():
                    if not (member.isfile() or member.isdir()):
                        raise PackError(f"unpack: {member.name} is not a plain file")
                tar.extractall(staging, filter="data")
        except (tarfile.TarError, OSError, EOFError) as err:
            raise PackError(f"unpack: {archive} is not a readable .tar.gz: {err}") from err
        files = _verify(staging)
        placed = []
        for name in files:  # the human labels the run read go where the rules read them
            if name.startswith("data/human/"):
                dest = checkout / name
                if dest.exists() and dest.read_bytes() != (staging / name).read_bytes() and not force:
                    raise PackError(f"unpack: {dest} exists and differs from the packed one (pass --force)")
                placed.append((staging / name, dest))
        if target.exists():
            shutil.rmtree(target)
        for source, dest in placed:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
        staging.replace(target)
    info = json.loads((target / "PACK.json").read_text())
    return {"files": len(files), "folder": target.as_posix(), "code_commit": info.get("code_commit"),
            "replay": info["replay"]}
