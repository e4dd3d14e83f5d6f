"""A finished run as one shippable archive (`pack`), and its verified way back into a checkout for
an offline replay (`unpack`): the replay rebuilds every file under `results/` from the packed cache
with zero model calls, and its stable digests equal the packed `STABLE_DIGESTS.sha256`.

    python -m aura_eval pack <out.tar.gz> [--configfile config/config.yaml [more.yaml ...]] [--root .]
    python -m aura_eval unpack <archive> <checkout dir> [--force] [--max-size 4GiB] [--max-files 100000]
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shlex
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import zlib
from pathlib import Path

import yaml

from aura_eval.workflow import run_config
from aura_eval.llm.cache import CacheError, cache_error, connect_readonly
from aura_eval.llm.providers import is_simulated
from aura_eval.tools.digest import stable_digests
from aura_eval.vocab import RJUDGE_URL, data_terms
from aura_eval.workflow.config import DEFAULT_CONFIGFILE, ConfigError, load_configs, with_schema_defaults

MANIFEST = "MANIFEST.sha256"
DIGESTS = "STABLE_DIGESTS.sha256"
PACKED = "packed"  # the folder of the checkout that unpack fills
RESULT_PARTS = ("results/dataset", "results/tables")
REPORT = "results/report/report.html"
REPORT_CSVS = "results/report/tables"  # the full CSVs the report's provenance links (aura_eval.report.provenance)
DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")  # R-Judge's data files, not shipped (the checkout has them)
REPLAY_CONFIG = "config/replay.yaml"
REPLAY = f"snakemake --forceall --configfile {PACKED}/{REPLAY_CONFIG}"  # the command unpack prints, never the archive's
HUMAN_LABELS = re.compile(r"data/human/(annotations/[^/]+\.csv|adjudicated\.csv)")  # what unpack places in a checkout
MAX_SIZE = 4 << 30  # bytes of files an archive may unpack to (unpack --max-size)
MAX_FILES = 100_000  # members an archive may hold (unpack --max-files)
MANIFEST_MAX = 64 << 20  # the MANIFEST is read into memory
HEADER_ALLOWANCE = 64 << 10  # uncompressed bytes per member beyond its declared size (its headers, read-ahead)


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
        shipped = f"R-Judge's licence and source notes are shipped as {', '.join(licence_files)}."
    else:
        shipped = (f"No licence file is present under the run's `rjudge_dir`; {', '.join(licence_files) or 'no file'} "
                   f"is shipped as R-Judge's source note, and R-Judge's own terms ({RJUDGE_URL}) apply.")
    if simulated:
        sim = (f"Simulated models in this run: {', '.join(simulated)} (`aura_sim/`). Their answers are synthetic, "
               f"drawn by AURA-Eval's planted-truth simulator (`aura_eval/simulator/planted.py`), not written by any model.")
    else:
        sim = "No model of this run is simulated; answers of `aura_sim/` models would be synthetic."
    return "\n\n".join([
        "# Terms of this archive",
        "**The data and its licence.** " + data_terms() + " " + shipped + " The R-Judge records themselves are "
        "not in this archive; the dataset's rows quote and rewrite them. `LICENSE` is the code's licence.",
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


def inspect_logs(config: dict, root: Path) -> dict[str, Path]:
    """`inspect/<agent>/[action_only/]<file name>` -> the inspect log of each agent given by one (its
    rollouts' `inspect.log` names the file, so a replay from the packed copy writes the same rows)."""
    found = {}
    for agent, spec in sorted((config.get("agents") or {}).items()):
        for key, folder in (("inspect_log", ""), ("inspect_log_action_only", "action_only/")):
            if key in spec:
                path = Path(spec[key]) if Path(spec[key]).is_absolute() else root / spec[key]
                if not path.is_file():
                    raise PackError(f"pack: agent {agent!r}: its {key} {path} does not exist")
                found[f"inspect/{agent}/{folder}{path.name}"] = path
    return found


def _run_config(paths: list[Path], root: Path) -> bytes:
    """`config/run.yaml`: one file byte for byte; several merged (as the run merged them), with a header."""
    if len(paths) == 1:
        return paths[0].read_bytes()
    header = "".join(f"#   {_config_name(p, root)}\n" for p in paths)
    return ("# The run's config: these files merged in this order, as Snakemake merges its --configfile's\n"
            f"# (written by `python -m aura_eval pack`):\n{header}"
            + yaml.safe_dump(load_configs(paths), sort_keys=False, allow_unicode=True)).encode()


def _config_name(path: Path, root: Path) -> str:
    """A config's name in PACK.json: its path under the run folder, or its file name (no absolute path)."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


def run_configfiles(configfiles, root=".") -> tuple[list | None, str | None]:
    """(the config files to pack, a note for the user or None). None given: the config recorded with the
    results (`run_config.RUN_CONFIG`, returned as None: pack reads the record), else the default config
    with a note. Given files that differ from the record in what changes results: a PackError naming the
    keys and the config the results were made with."""
    recorded = run_config.recorded_config(Path(root) / "")
    if not configfiles:
        if recorded is not None:
            return None, f"pack: the run's config, recorded with the results ({run_config.RUN_CONFIG})"
        return [DEFAULT_CONFIGFILE], (f"pack: no config recorded with the results ({run_config.RUN_CONFIG}: results of "
                                      f"an older run); packing {DEFAULT_CONFIGFILE}: name the run's config with "
                                      f"--configfile (make pack CONFIG=...) if it was another")
    if recorded is not None:
        root = Path(root).resolve()
        paths = [Path(n) if Path(n).is_absolute() else root / n for n in configfiles]
        try:
            found = run_config.differences(load_configs(paths), recorded.config)
        except ConfigError as err:
            raise PackError(f"pack: {err}") from err
        if found:
            raise PackError(f"pack: {run_config.mismatch_text(configfiles, recorded, found)}; pack with no "
                            f"--configfile (make pack without CONFIG) to pack the recorded one")
    return list(configfiles), None


def pack(out, configfiles=(DEFAULT_CONFIGFILE,), root=".") -> dict:
    """Write the archive; a summary (files, bytes, cache rows). `configfiles`: the run's config file, or
    its files in order, merged as Snakemake merges them; None: the config recorded with the results
    (`results/run/config.yaml`, `aura_eval.workflow.run_config`).

    A gzipped tar of: `results/dataset/`, `results/tables/`, the report (`results/report/report.html`),
    the response cache (`cache/<name>`, a consistent SQLite copy made with the backup API), the config
    used (`config/run.yaml`: the config recorded with the results, byte for byte, when no `--configfile`
    is given; a given one must not differ from that record in what changes results
    (`run_configfiles`); where no run recorded one, the file byte for byte, or, where several
    `--configfile`s were merged, the merged config with a header naming them) and its replay form
    (`config/replay.yaml`: `llm.replay: true`, `llm.cache: packed/cache/<name>`), the human labels the
    run read (`data/human/annotations/*.csv`, `data/human/adjudicated.csv`), the inspect logs of agents
    given by one (`inspect/<agent>/[action_only/]<file>`; the replay config names these copies),
    R-Judge's source and licence files (everything directly under `rjudge_dir` that is not data), the
    code's `LICENSE`, `TERMS.md` (the data's licence, CC BY-NC-SA 4.0 after R-Judge, and the terms of
    the shipped model responses), `STABLE_DIGESTS.sha256` (`aura_eval.tools.digest` of every stable
    file under the run's `results/`), `PACK.json` (the code commit, the config's path under the run
    folder or, outside it, its file name, a list of them where several were merged: no absolute path;
    the cache's row count) and `MANIFEST.sha256` (`sha256  path` of every other file, as `sha256sum -c`
    reads it), written first. Members are sorted with zeroed times and owners. The MANIFEST guards
    against damage, not against tampering: whoever can change a file can change its line (compare the
    archive's own sha256 with one published through a channel you trust)."""
    root, out = Path(root).resolve(), Path(out)
    recorded = run_config.recorded_config(root) if configfiles is None else None
    if configfiles is None and recorded is None:
        raise PackError(f"pack: no config recorded with the results under {root} ({run_config.RUN_CONFIG}): "
                        f"name the run's config with --configfile")
    names = [] if recorded else ([configfiles] if isinstance(configfiles, (str, Path)) else list(configfiles))
    config_paths = [(Path(name) if Path(name).is_absolute() else root / name).resolve() for name in names]
    for config_path in config_paths:
        if not config_path.is_file():
            raise PackError(f"pack: no config file {config_path}")
    try:
        config = recorded.config if recorded else load_configs(config_paths)
    except ConfigError as err:
        raise PackError(f"pack: {err}") from err
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
    for path in sorted((root / REPORT_CSVS).glob("*.csv")):
        members[path.relative_to(root).as_posix()] = path
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
    code_licence = Path(__file__).resolve().parents[2] / "LICENSE"  # the repository's, not the run folder's
    if code_licence.is_file():
        members["LICENSE"] = code_licence
    members["config/run.yaml"] = recorded.path.read_bytes() if recorded else _run_config(config_paths, root)
    replayed = json.loads(json.dumps(config))  # agents given by an inspect log read the packed copy
    for name, path in inspect_logs(config, root).items():
        members[name] = path
        agent, key = name.split("/")[1], "inspect_log_action_only" if "/action_only/" in name else "inspect_log"
        replayed["agents"][agent][key] = f"{PACKED}/{name}"
    members[REPLAY_CONFIG] = _replay_config(replayed, cache.name).encode()
    members["TERMS.md"] = terms_note(config, licence_files).encode()
    members[DIGESTS] = "".join(f"{d}  {rel}\n" for rel, d in stable_digests(root).items()).encode()
    with tempfile.TemporaryDirectory() as tmp:
        cache_copy = Path(tmp) / cache.name
        rows = _cache_copy(cache, cache_copy)
        members[f"cache/{cache.name}"] = cache_copy
        code = _commit(Path(__file__).resolve().parents[2])
        members["PACK.json"] = (json.dumps({
            # No absolute path: a config outside the run folder is named by its file name.
            "config": run_config.RUN_CONFIG if recorded else _config_name(config_paths[0], root)
            if len(config_paths) == 1 else [_config_name(p, root) for p in config_paths],
            "code_commit": code["commit"], "code_dirty": code["dirty"], "cache": cache.name, "cache_rows": rows,
            "simulated_models": _simulated(config),
            "replay": REPLAY}, indent=2) + "\n").encode()
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


def parse_size(text) -> int:
    """A size in bytes from `4294967296`, `4GiB`, `4G` (K/M/G/T and KiB/.../TiB: powers of 1024) or `4GB`
    (KB/MB/GB/TB: powers of 1000); PackError for anything else or for zero."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = found and found.group(2).lower()
    if not found or unit not in _UNITS or int(float(found.group(1)) * _UNITS[unit]) < 1:
        raise PackError(f"unpack: {str(text)!r} is not a size (bytes, or a number with a unit such as 500MiB or 8G)")
    return int(float(found.group(1)) * _UNITS[unit])


_UNITS = {"": 1, "b": 1, **{p: 1024 ** (i + 1) for i, p in enumerate("kmgt")},
          **{p + "ib": 1024 ** (i + 1) for i, p in enumerate("kmgt")},
          **{p + "b": 1000 ** (i + 1) for i, p in enumerate("kmgt")}}


def _shown(name: str) -> str:
    """An archive's name as an error line shows it: escaped if it holds a control character."""
    return name if name.isprintable() else ascii(name)


def _checked_name(name: str) -> str:
    """An archive path unpack accepts: relative, `/`-separated, printable, no empty, `.` or `..` part."""
    parts = name.split("/")
    if not name or name.startswith("/") or not name.isprintable() or any(p in ("", ".", "..") for p in parts):
        raise PackError(f"unpack: the archive path {_shown(name)} is absolute, not printable or leaves its "
                        f"folder (`..`, `.`, empty parts)")
    return name


def _manifest(data: bytes, max_files: int) -> dict[str, str]:
    """{path: sha256} of a MANIFEST's `sha256  path` lines; PackError names the first bad line."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise PackError(f"unpack: {MANIFEST} is not UTF-8 text: {err}") from err
    if len(lines) > max_files:
        raise PackError(f"unpack: {MANIFEST} lists {len(lines):,} files, more than the limit of {max_files:,} "
                        f"(pass --max-files to allow more)")
    listed = {}
    for number, line in enumerate(lines, 1):
        digest, sep, name = line.partition("  ")
        if not sep or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise PackError(f"unpack: {MANIFEST} line {number} is not `sha256  path`")
        if _checked_name(name) in listed or name == MANIFEST:
            raise PackError(f"unpack: {MANIFEST} line {number} lists {_shown(name)} again")
        listed[name] = digest
    return listed


class _Bounded:
    """The archive's uncompressed stream, refusing to read more than `limit` bytes: a header whose own data
    (a long name, PAX records) runs past what the members declared stops here, not in memory."""

    def __init__(self, raw):
        self.raw, self.read_bytes, self.limit = raw, 0, 2 * HEADER_ALLOWANCE

    def read(self, size=-1):
        data = self.raw.read(size)
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise PackError(f"unpack: the archive holds more data than its members declare (over "
                            f"{self.limit:,} bytes read)")
        return data


def _extract(archive: Path, staging: Path, max_size: int, max_files: int) -> list[str]:
    """The archive read as one stream into `staging`, each member checked before it is written: its name, its
    type (regular files and folders only), the member count, the running size, its place in the MANIFEST
    (which must come first) and, as it is written, its sha256. PackError at the first fault; the files."""
    listed, seen, count, total, padded = None, set(), 0, 0, 0
    try:
        with gzip.open(archive, "rb") as gz, tarfile.open(fileobj=(stream := _Bounded(gz)), mode="r|") as tar:
            for member in tar:
                count += 1
                if count > max_files:
                    raise PackError(f"unpack: the archive has more than {max_files:,} members (pass --max-files "
                                    f"to allow more)")
                name = _checked_name(member.name)
                if not (member.isfile() or member.isdir()) or member.issparse():
                    kind = ("a link" if member.issym() or member.islnk() else "a device or pipe"
                            if member.isdev() else "a sparse file" if member.issparse() else "not a plain file")
                    raise PackError(f"unpack: {name} is {kind}: only regular files and folders are unpacked")
                total += member.size
                if total > max_size:
                    raise PackError(f"unpack: the archive's files pass {max_size:,} bytes at {name} (pass "
                                    f"--max-size to allow more)")
                padded += -(-member.size // 512) * 512
                stream.limit = padded + (count + 2) * HEADER_ALLOWANCE
                if listed is None:
                    if name != MANIFEST or not member.isfile():
                        raise PackError(f"unpack: the archive's first member is {name}, not {MANIFEST}")
                    if member.size > MANIFEST_MAX:
                        raise PackError(f"unpack: {MANIFEST} is over {MANIFEST_MAX:,} bytes")
                    listed = _manifest(tar.extractfile(member).read(), max_files)
                    continue
                if member.isdir():
                    _place(staging / name, None)
                    continue
                if name not in listed:
                    raise PackError(f"unpack: {name} is in the archive but not in {MANIFEST}")
                if name in seen:
                    raise PackError(f"unpack: {name} is in the archive twice")
                seen.add(name)
                actual = _place(staging / name, tar.extractfile(member))
                if actual != listed[name]:
                    raise PackError(f"unpack: checksum mismatch for {name}: {MANIFEST} says {listed[name]}, "
                                    f"the file has {actual}")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise PackError(f"unpack: {archive} is not a readable .tar.gz: {err}") from err
    if listed is None:
        raise PackError(f"unpack: the archive has no {MANIFEST}")
    missing = sorted(set(listed) - seen)
    if missing:
        raise PackError(f"unpack: {missing[0]} is listed in {MANIFEST} but missing from the archive")
    return sorted(listed)


def _place(dest: Path, source) -> str | None:
    """A folder (source None) or a file written from `source` under the staging folder; the file's sha256.
    A name that collides with an earlier one (a file where a folder is, or the reverse) is the archive's fault."""
    try:
        if source is None:
            dest.mkdir(parents=True, exist_ok=True)
            return None
        dest.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with source, dest.open("xb") as out:
            for block in iter(lambda: source.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
        return digest.hexdigest()
    except OSError as err:
        raise PackError(f"unpack: cannot write {dest.name} in the staging folder: {err}") from err


def _check_contents(staging: Path, files: list[str]) -> dict:
    """PACK.json (a JSON object) and the replay config (llm.replay: true, its cache a file of the archive under
    packed/), as an offline replay needs them; PACK.json's content."""
    present = set(files)
    if "PACK.json" not in present:
        raise PackError("unpack: the archive has no PACK.json")
    try:
        info = json.loads((staging / "PACK.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PackError(f"unpack: PACK.json is not valid JSON: {err}") from err
    if not isinstance(info, dict):
        raise PackError("unpack: PACK.json is not a JSON object")
    if REPLAY_CONFIG not in present:
        raise PackError(f"unpack: the archive has no {REPLAY_CONFIG}")
    try:
        replay = yaml.safe_load((staging / REPLAY_CONFIG).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise PackError(f"unpack: {REPLAY_CONFIG} is not valid YAML: {' '.join(str(err).split())}") from err
    llm = replay.get("llm") if isinstance(replay, dict) else None
    if not isinstance(llm, dict) or llm.get("replay") is not True:
        raise PackError(f"unpack: {REPLAY_CONFIG} is not in replay mode (it needs llm.replay: true)")
    cache = llm.get("cache")
    if not (isinstance(cache, str) and cache.startswith(PACKED + "/") and cache[len(PACKED) + 1:] in present):
        raise PackError(f"unpack: {REPLAY_CONFIG}'s llm.cache {_shown(str(cache))} is not a file of the archive "
                        f"under {PACKED}/")
    return info


def unpack(archive, checkout, force: bool = False, max_size: int = MAX_SIZE, max_files: int = MAX_FILES) -> dict:
    """Verify the archive and place it in the checkout; a summary (files, the folder, the replay command).

    Every check runs first, on a staging folder inside the checkout: the stream (see `_extract`), PACK.json,
    the replay config (`_check_contents`) and, without `force`, the human labels against those in place. A
    refusal is a PackError and leaves the checkout as it was, without the staging folder. Then `packed/` is
    replaced and only the human labels the rules read (`data/human/annotations/*.csv`,
    `data/human/adjudicated.csv`) are copied out of it. The replay command is the project's, not the archive's.
    """
    archive, checkout = Path(archive), Path(checkout)
    if not checkout.is_dir():
        raise PackError(f"unpack: no checkout folder {checkout}")
    if not archive.is_file():
        raise PackError(f"unpack: no archive {archive}")
    target = checkout / PACKED
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise PackError(f"unpack: {target} is not a folder")
    if target.exists() and any(target.iterdir()) and not force:
        raise PackError(f"unpack: {target} is not empty (pass --force to replace it)")
    with tempfile.TemporaryDirectory(dir=checkout, prefix=".unpack-") as tmp:
        staging = Path(tmp) / PACKED
        staging.mkdir()
        files = _extract(archive, staging, max_size, max_files)
        info = _check_contents(staging, files)
        labels = [name for name in files if HUMAN_LABELS.fullmatch(name)]
        for name in labels:
            dest = checkout / name
            same = dest.is_file() and _file_sha256(dest) == _file_sha256(staging / name)
            if dest.exists() and not force and not same:
                raise PackError(f"unpack: {dest} exists and differs from the packed one (pass --force)")
        # Every check has passed: from here on the checkout changes.
        for name in labels:
            dest = checkout / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(staging / name, dest)
        if target.exists():
            target.replace(Path(tmp) / "previous")  # removed with the staging folder
        staging.replace(target)
    commit = info.get("code_commit")
    return {"files": len(files), "folder": target.as_posix(), "labels": labels,
            "code_commit": commit if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{7,64}", commit) else None,
            "replay": f"cd {shlex.quote(str(checkout))} && {REPLAY}"}
