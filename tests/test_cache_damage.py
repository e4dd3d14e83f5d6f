"""A damaged cache is named, checked and salvaged, never used wrongly (issue 27, item 3).

Small caches built here through ResponseCache, damaged by writing bytes at an offset or cutting the
file short: the start check (`check_at_start`, the Snakefile's onstart), one message naming the
file in a job, row checksums, `cache check` and `cache repair`, a replay that writes nothing, a
-wal left by a kill, and a new or missing cache file."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aura_eval.simulator  # noqa: F401  (registers the aura_sim responder, as the stage runner does)
from aura_eval.__main__ import main
from aura_eval.llm import CacheMissError, Endpoint, Request
from aura_eval.llm import cache as cache_module
from aura_eval.llm.budget import Budget
from aura_eval.llm.cache import CacheError, ResponseCache, cache_key, check_at_start, checksum, side_files
from aura_eval.llm.client import ModelClient
from aura_eval.llm.ratelimit import Pacer
from aura_eval.stage_runner import StageRun
from aura_eval.tools.cache_repair import RepairError, answers_held, check, repair

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
FILLER = "the agent deletes the backup folder after asking the user " * 30  # about 1.7 KB per answer


def requests(stub, n, start=0):
    endpoint = Endpoint(name="stub", model="openai/stub", params={"temperature": 0.0},
                        api_base=stub.api_base if stub else "http://127.0.0.1:9/v1")
    return [Request(item_id=f"item-{i:04d}", endpoint=endpoint, prompt_id="p_test", prompt_version=1,
                    role="tester", schema=SCHEMA, messages=[{"role": "user", "content": f"question {i}"}])
            for i in range(start, start + n)]


def settings(path, **more):
    return {"cache": str(path), "replay": False, "concurrency": {"default": 8}, "max_retries": 0,
            "backoff_s": 0.01, "timeout_s": 5, **more}


def answer(text):
    return {"content": json.dumps({"answer": text}), "finish_reason": "stop", "tokens_in": 10, "tokens_out": 400,
            "cost_usd": 0.001, "latency_s": 0.5}


def build(path, stub=None, n=300, other_tables=False) -> list[Request]:
    """A cache of n answers ("cached item-0007 ..."), keyed as the client keys them; with
    `other_tables`, first a recorded miss, a batch with its keys, a budget's spend and a rate bucket."""
    client = ModelClient(settings(path), "t", progress=False)
    reqs = requests(stub, n)
    if other_tables:
        client.cache.record_miss("f" * 64, {"model": "openai/stub"}, prompt="p_test", stage="t", item_id="x",
                                 reason="failed")
        client.cache.record_batch("batch_1", provider="openai", model="openai/stub", api_base=None,
                                  endpoint="/v1/chat/completions", state="completed", submitted_at="2026-01-01",
                                  items=[("e" * 64, {"model": "openai/stub"}, "p_test", 1)])
        budget = Budget(path, 10.0)
        hold, _ = budget.reserve("d" * 64, "t", "openai/stub", 0.5)
        budget.settle(hold, 0.25)
        budget._db.close()
        pacer = Pacer({"rpm_openai": 600}, path)
        pacer.reserve({"rpm_openai": 1})
        pacer._db.close()
    for req in reqs:
        described = client.describe(req)
        client.cache.put(cache_key(described), described, answer(f"cached {req.item_id} {FILLER}"))
    client.cache.close()
    assert not side_files(path)[0].exists()  # the last connection closed: everything is in the file
    return reqs


def overwrite(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def damage_middle(path):
    overwrite(path, Path(path).stat().st_size // 2, bytes(range(256)) * 16)  # 4 KB


def cut_to_half(path):
    os.truncate(path, Path(path).stat().st_size // 2)


def replace_in_file(path, old: bytes, new: bytes):
    data = Path(path).read_bytes()
    assert data.count(old) == 1, old
    overwrite(path, data.index(old), new)


# -- the start check (the Snakefile's onstart) ------------------------------------------------------

@pytest.mark.parametrize("damage", [damage_middle, cut_to_half])
def test_the_start_check_stops_on_damage_naming_the_file_and_the_repair(tmp_path, damage):
    path = tmp_path / "cache.sqlite"
    build(path)
    assert check_at_start(path)[-1].startswith(f"response cache {path}: 300 answers")
    damage(path)
    with pytest.raises(CacheError) as err:
        check_at_start(path)
    message = str(err.value)
    assert message.startswith(f"response cache {path} is damaged (")
    assert f"`python -m aura_eval cache repair {path}`" in message and err.value.damaged


def test_the_start_check_counts_an_exception_from_quick_check_as_damage(tmp_path):
    path = tmp_path / "cache.sqlite"
    build(path, n=20)
    overwrite(path, 100, b"\xff" * 200)  # inside page 1: the schema itself
    with pytest.raises(CacheError, match="is damaged") as err:
        check_at_start(path)
    assert "cache repair" in str(err.value)


def test_a_new_cache_is_announced_and_a_missing_one_stops_a_replay(tmp_path):
    path = tmp_path / "cache" / "mistyped.sqlite"
    (note,) = check_at_start(path)
    assert note.startswith(f"new cache at {path}: every answer will be paid")
    with pytest.raises(CacheError) as err:
        check_at_start(path, replay=True)
    assert f"at {path} (llm.cache): is the path mistyped?" in str(err.value)
    assert not path.exists() and not path.parent.exists()  # neither check creates anything
    with pytest.raises(CacheError, match="holds no responses table"):  # a file that is not a cache
        other = tmp_path / "other.sqlite"
        sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
        check_at_start(other, replay=True)


@pytest.mark.suite
def test_a_wal_left_by_a_kill_is_folded_in_at_start(tmp_path):
    """A job killed (no close) leaves its answers in the -wal; the start check folds them into the
    file, so a -wal deleted afterwards loses nothing."""
    path = tmp_path / "cache.sqlite"
    build(path, n=5)
    code = textwrap.dedent(f"""
        import os
        from aura_eval.llm.cache import ResponseCache
        cache = ResponseCache({str(path)!r})
        for i in range(20):
            cache.put("k%02d" % i + "0" * 61, {{"model": "m"}}, {{"content": "late answer %d" % i}})
        os._exit(0)  # a kill: no close, no checkpoint
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wal = side_files(path)[0]
    assert wal.stat().st_size > 0
    notes = check_at_start(path)
    assert any("folded in the answers a stopped run left" in n for n in notes), notes
    wal.unlink(missing_ok=True)  # what a user did, thinking it junk
    side_files(path)[1].unlink(missing_ok=True)
    assert len(ResponseCache(path)) == 25


# -- one message naming the file, never a bare traceback -------------------------------------------

@pytest.mark.suite
def test_a_job_on_a_damaged_cache_ends_with_one_message_naming_it(tmp_path):
    path = tmp_path / "cache.sqlite"
    build(path, n=300)
    cut_to_half(path)
    job = textwrap.dedent(f"""
        import aura_eval.simulator
        from aura_eval.llm import Endpoint, Request
        from aura_eval.stage_runner import StageRun
        endpoint = Endpoint(name="stub", model="openai/stub", params={{"temperature": 0.0}},
                            api_base="http://127.0.0.1:9/v1")
        reqs = [Request(item_id="item-%04d" % i, endpoint=endpoint, prompt_id="p_test", prompt_version=1,
                        role="tester", schema=None, messages=[{{"role": "user", "content": "question %d" % i}}])
                for i in range(300)]
        with StageRun("tag_steps", {settings(path)!r}, {str(tmp_path / "calls.jsonl")!r}, progress=False) as run:
            run.results(reqs)
    """)
    proc = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "sqlite3." not in proc.stderr
    (last,) = [line for line in proc.stderr.splitlines() if "damaged" in line]
    assert last.startswith(f"tag_steps: response cache {path} is damaged (")
    assert f"python -m aura_eval cache repair {path}" in last


def test_every_sqlite_error_of_the_cache_names_the_file(tmp_path):
    """Locked, unwritable or damaged: the error is a CacheError naming the file and what to do."""
    path = tmp_path / "cache.sqlite"
    build(path, n=5)
    cache = ResponseCache(path)
    cache._db.execute("PRAGMA query_only=ON")  # as a file this user cannot write
    with pytest.raises(CacheError) as err:
        cache.put("a" * 64, {"model": "m"}, answer("x"))
    assert str(err.value).startswith(f"response cache {path} cannot be opened for writing (")
    cut_to_half(path)
    overwrite(path, 0, b"not a database at all, just some bytes" * 4)
    with pytest.raises(CacheError, match=f"response cache {path} is damaged"):
        ResponseCache(path)
    with pytest.raises(SystemExit) as ended:  # in a job: one message, the job's name first
        StageRun("judge_safety", settings(path), tmp_path / "calls.jsonl", progress=False)
    assert str(ended.value.code).startswith(f"judge_safety: response cache {path} is damaged")


# -- row checksums ---------------------------------------------------------------------------------

@pytest.mark.suite
def test_a_row_that_fails_its_checksum_is_asked_again_replaced_and_counted(stub, tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    reqs = build(path, stub, n=6)
    replace_in_file(path, b"cached item-0002", b"CACHED item-0002")  # still valid UTF-8 JSON: only a checksum tells
    replace_in_file(path, b"cached item-0004", b"cached \xff\xfe\xfdm-0004")  # "Could not decode to UTF-8" before
    assert check_at_start(path)  # the file's structure is intact: only the rows' checksums show it
    stub.state.content = '{"answer": "asked again"}'
    client = ModelClient(settings(path), "t", progress=False)
    results = client.run(reqs)
    assert [r.cache_hit for r in results] == [True, True, False, True, False, True]
    assert [r.parsed["answer"][:16] for r in results] == ["cached item-0000", "cached item-0001", "asked again",
                                                          "cached item-0003", "asked again", "cached item-0005"]
    assert len(stub.state.requests) == 2 and sorted(client.cache.damaged.values()) == ["checksum mismatch"] * 2
    log = capsys.readouterr().err
    assert log.count("is damaged (checksum mismatch): not used; asked again, and the new answer replaces it") == 2
    again = ModelClient(settings(path), "t", progress=False).run(reqs)  # the replaced rows now answer
    assert all(r.cache_hit for r in again) and again[2].parsed == {"answer": "asked again"}
    assert len(stub.state.requests) == 2


@pytest.mark.suite
def test_the_job_log_counts_the_damaged_rows(stub, tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    reqs = build(path, stub, n=3)
    replace_in_file(path, b"cached item-0001", b"cached item-000X")
    with StageRun("tag_steps", settings(path), tmp_path / "calls.jsonl", progress=False) as run:
        run.results(reqs)
    assert (f"WARNING: tag_steps: 1 cached answer(s) in {path} failed their checksum (damaged rows): not used, "
            f"asked again and replaced") in capsys.readouterr().err


def test_rows_from_before_checksums_are_accepted_and_the_column_added(tmp_path):
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL,"
                " response TEXT NOT NULL)")
    old.execute("INSERT INTO responses VALUES (?, 'm', '{}', ?)", ("a" * 64, json.dumps(answer("old row"))))
    old.execute("INSERT INTO responses VALUES (?, 'm', '{}', 'not json {')", ("b" * 64,))
    old.commit()
    old.close()
    cache = ResponseCache(path)
    columns = [row[1] for row in cache._db.execute("PRAGMA table_info(responses)")]
    assert columns == ["key", "model", "request", "response", "checksum"]
    assert cache.get("a" * 64)["content"] == '{"answer": "old row"}' and "a" * 64 not in cache.damaged
    assert cache.get("b" * 64) is None and cache.damaged["b" * 64] == "not UTF-8 JSON"
    cache.put("b" * 64, {"model": "m"}, answer("new"))  # a broken old row is replaced too
    cache.put("a" * 64, {"model": "m"}, answer("second writer"))  # an intact one is not: first writer wins
    assert cache.get("b" * 64)["content"] == '{"answer": "new"}'
    assert cache.get("a" * 64)["content"] == '{"answer": "old row"}'
    stored = cache._db.execute("SELECT response, checksum FROM responses WHERE key = ?", ("b" * 64,)).fetchone()
    assert stored[1] == checksum(stored[0].encode())


# -- replay: read-only, writes nothing --------------------------------------------------------------

def _forced_read_only(monkeypatch):
    """Every SQLite connection of the cache module under `PRAGMA query_only` (root ignores file modes,
    so a read-only file is simulated: any write raises "attempt to write a readonly database")."""
    real = sqlite3.connect

    def connect(*args, **kwargs):
        db = real(*args, **kwargs)
        db.execute("PRAGMA query_only=ON")
        return db

    monkeypatch.setattr(cache_module.sqlite3, "connect", connect)


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("journal", ["wal", "delete"])  # delete: a packed cache's journal mode
def test_a_replay_writes_nothing_and_reads_a_read_only_cache(tmp_path, monkeypatch, capsys, journal):
    folder = tmp_path / "cache"
    folder.mkdir()
    path = folder / "cache.sqlite"
    reqs = build(path, n=4)
    if journal == "delete":
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA journal_mode=DELETE")
    before = _snapshot(folder)
    _forced_read_only(monkeypatch)
    replay = ModelClient(settings(path, replay=True, budget_usd=5.0), "t", progress=False)
    results = replay.run(reqs)
    assert all(r.cache_hit for r in results) and replay.calls_made == 0
    with pytest.raises(CacheMissError, match="replay mode: no cached response for stage t, item item-0009"):
        replay.run(requests(None, 1, start=9))
    assert "replay miss: {" in capsys.readouterr().err  # the miss's description goes to the log, not the file
    replay.cache.close()
    assert check_at_start(path, replay=True)[-1].endswith("read-only (replay)")
    assert _snapshot(folder) == before  # no byte changed, no -wal, -shm or journal, no misses table
    assert "misses" not in {r[0] for r in sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True).execute(
        "SELECT name FROM sqlite_master")}


@pytest.mark.suite
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes (the query_only test covers it)")
def test_a_replay_reads_a_cache_in_a_folder_it_cannot_write(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    path = folder / "cache.sqlite"
    reqs = build(path, n=3)
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        assert all(r.cache_hit for r in ModelClient(settings(path, replay=True), "t", progress=False).run(reqs))
    finally:
        folder.chmod(0o755)


def _killed_writer(path, n=3):
    """Answers committed by a process that was killed: they are only in the -wal. Keys w00, w01, ...
    are the keys of their requests ({"model": "m", "n": i})."""
    code = textwrap.dedent(f"""
        import json, os
        from aura_eval.llm.cache import ResponseCache, cache_key
        cache = ResponseCache({str(path)!r})
        for i in range({n}):
            request = {{"model": "m", "n": i}}
            cache.put(cache_key(request), request, {{"content": json.dumps({{"answer": "in the wal"}})}})
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert side_files(path)[0].stat().st_size > 0


def test_a_replay_reads_a_wal_and_refuses_one_it_cannot_read(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    build(path, n=2)
    _killed_writer(path)
    cache = ResponseCache(path, readonly=True)
    wal_key = cache_key({"model": "m", "n": 1})
    assert cache.get(wal_key)["content"] == '{"answer": "in the wal"}'  # the -wal's answers are read
    cache.close()
    real_access = os.access
    monkeypatch.setattr(cache_module.os, "access",
                        lambda p, mode: False if str(p).endswith("-wal") else real_access(p, mode))
    with pytest.raises(CacheError) as err:
        ResponseCache(path, readonly=True)
    assert str(err.value).startswith(f"replay mode (llm.replay: true): {path}-wal exists but cannot be read")
    with pytest.raises(CacheError, match="-wal exists but cannot be read"):
        check_at_start(path, replay=True)


# -- cache check and cache repair -------------------------------------------------------------------

def test_cache_check_reports_rows_size_and_integrity(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    build(path, n=40, other_tables=True)
    assert main(["cache", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: {path.stat().st_size:,} bytes\n  integrity: ok (PRAGMA integrity_check)\n")
    assert "  answers: 40 read, 40 match their checksum, 0 from before checksums (parse as JSON), 0 damaged" in out
    assert "  rows: batch_keys 1, batches 1, leases 0, misses 1, rate_buckets 1, responses 40, spend 1, spend_total 1" in out
    replace_in_file(path, b"cached item-0003", b"cached item-000?")
    assert main(["cache", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "40 read, 39 match their checksum, 0 from before checksums (parse as JSON), 1 damaged" in out
    assert f"run `python -m aura_eval cache repair {path}`" in out


@pytest.mark.suite
@pytest.mark.parametrize("damage", [damage_middle, cut_to_half])
def test_repair_keeps_every_intact_answer_so_the_rerun_pays_only_for_the_lost(stub, tmp_path, capsys, damage):
    path = tmp_path / "cache.sqlite"
    reqs = build(path, stub, n=300, other_tables=True)
    original = path.read_bytes()
    damage(path)
    damaged = path.read_bytes()
    assert main(["cache", "repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"repaired {path} in ")
    kept = int(out.split("kept ")[1].split(" of")[0].replace(",", ""))
    held = int(out.split("of the ")[1].split(" answers")[0].replace(",", ""))
    assert 0 < kept < 300
    if damage is damage_middle:
        assert kept >= 290 and held == 300  # 4 KB reach a page or two
    else:  # past the cut the rows are gone; the b-tree's root still names (almost) all of them
        assert kept >= 100 and 290 <= held <= 300 and "the file was cut short" in out
    for table in ("batches", "batch_keys", "spend", "spend_total", "misses", "rate_buckets"):  # early pages: whole
        assert f"table {table}: kept 1 rows\n" in out, table
    aside = tmp_path / "cache.sqlite.damaged-1"
    assert aside.read_bytes() == damaged and original  # the damaged file kept aside, as it was
    assert check_at_start(path)[-1].startswith(f"response cache {path}: {kept} answers")
    assert check(path)[1]
    client = ModelClient(settings(path), "t", progress=False)
    results = client.run(reqs)
    assert len(stub.state.requests) == 300 - kept  # the rerun pays for the lost answers only
    assert sum(r.cache_hit for r in results) == kept and all(r.status == "ok" for r in results)
    hits = [r for r in results if r.cache_hit]
    assert all(r.parsed["answer"].startswith(f"cached {r.request.item_id} ") for r in hits)
    db = sqlite3.connect(path)
    assert db.execute("SELECT spent_usd FROM spend_total").fetchone() == (0.25,)
    assert db.execute("SELECT key, outcome FROM batch_keys").fetchall() == [("e" * 64, None)]


def test_repair_refuses_answers_whose_key_or_checksum_does_not_match(tmp_path):
    path = tmp_path / "cache.sqlite"
    reqs = build(path, n=10)
    replace_in_file(path, b'"content": "question 3"', b'"content": "question X"')  # the request, not its key
    replace_in_file(path, b"cached item-0007", b"cached item-0008")  # the response, not its checksum
    done = repair(path)
    a = done["answers"]
    assert (a.kept, a.dropped, answers_held(a)) == (8, 2, 10)
    assert a.why == {"key does not match its request": 1, "checksum mismatch": 1}
    cache = ResponseCache(path)
    client = ModelClient(settings(path), "t", progress=False)
    held = [cache.get(cache_key(client.describe(r))) is not None for r in reqs]
    assert held == [True, True, True, False, True, True, True, False, True, True]


@pytest.mark.suite
def test_repair_refuses_while_the_file_is_in_use(tmp_path):
    path = tmp_path / "cache.sqlite"
    build(path, n=5)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from aura_eval.llm.cache import ResponseCache; "
                               f"c = ResponseCache({str(path)!r}); print(len(c), flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "5"
        before = _snapshot(tmp_path)
        with pytest.raises(RepairError, match=f"cache repair: {path} is in use by another process"):
            repair(path)
        assert _snapshot(tmp_path) == before and not list(tmp_path.glob("*.damaged-*"))
    finally:
        holder.stdin.close()
        holder.wait()
    assert repair(path)["answers"].kept == 5


def test_repair_moves_the_wal_aside_with_the_file_and_keeps_its_answers(tmp_path):
    path = tmp_path / "cache.sqlite"
    build(path, n=60)
    _killed_writer(path, n=3)
    damage_middle(path)
    done = repair(path)
    assert sorted(done["aside_side_files"]) == ["cache.sqlite.damaged-1-shm", "cache.sqlite.damaged-1-wal"]
    assert not side_files(path)[0].exists()
    cache = ResponseCache(path)
    assert 55 <= len(cache) == done["answers"].kept < 63
    for i in range(3):  # the -wal's committed answers are salvaged too
        assert cache.get(cache_key({"model": "m", "n": i})) == {"content": '{"answer": "in the wal"}'}


@pytest.mark.suite
def test_the_command_line_names_a_missing_file_and_never_prints_a_traceback(tmp_path):
    path = tmp_path / "cache.sqlite"
    build(path, n=20)
    overwrite(path, 0, b"\0" * 100)
    for command in ("check", "repair", "explain"):
        proc = subprocess.run([sys.executable, "-m", "aura_eval", "cache", command, str(path),
                               *(["x"] if command == "explain" else [])], capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert str(path) in proc.stdout + proc.stderr


def test_cache_explain_reads_a_replay_miss_from_the_job_logs(tmp_path):
    from aura_eval.tools.cache_explain import explain

    path = tmp_path / "cache.sqlite"
    reqs = build(path, n=2)
    client = ModelClient(settings(path, replay=True), "t", progress=False)
    wanted = client.describe(requests(None, 1, start=7)[0])
    line = "replay miss: " + json.dumps({"key": cache_key(wanted), "stage": "t", "item_id": "item-0007",
                                         "prompt": "p_test", "reason": "replay miss", "request": wanted})
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "t.log").write_text(f"t: call settings: ...\n{line}\n")
    text, found = explain(path, "item-0007", results=tmp_path / "results", logs=tmp_path / "logs")
    assert found and text.startswith(f"t  item item-0007  replay miss  sample 0  prompt p_test  key "
                                     f"{cache_key(wanted)[:16]}\n  cache: does not hold it\n")
    assert "      - question 0\n      + question 7" in text or "      - question 1\n      + question 7" in text
    assert len(reqs) == 2


# -- the workflow's onstart ------------------------------------------------------------------------

@pytest.fixture
def work(tmp_path, monkeypatch):
    from tests.workflow import STUB_KEY_ENV, scratch_copy

    monkeypatch.setenv(STUB_KEY_ENV, "stub-credential-for-the-onstart-check")
    return scratch_copy(tmp_path)


def _run(work, tmp_path, **llm):
    from tests.workflow import snakemake

    extra = tmp_path / "cache_settings.yaml"
    extra.write_text(json.dumps({"llm": {"cache": str(work / "cache" / "mock.sqlite"), **llm}}))
    return snakemake(work, "results/seeds/seeds.jsonl", "--configfile", ".test/config/mock.yaml", str(extra),
                     check=False)


@pytest.mark.suite
def test_onstart_announces_a_new_cache_and_stops_on_a_damaged_one(work, tmp_path):
    path = work / "cache" / "mock.sqlite"
    first = _run(work, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"new cache at {path}: every answer will be paid" in first.stderr
    build(path, n=300)
    cut_to_half(path)
    (work / "results/seeds/seeds.jsonl").unlink()
    damaged = _run(work, tmp_path)
    assert damaged.returncode != 0 and not (work / "results/seeds/seeds.jsonl").exists()
    assert f"response cache {path} is damaged (PRAGMA quick_check" in damaged.stderr
    assert f"python -m aura_eval cache repair {path}" in damaged.stderr
    assert "Traceback" not in damaged.stderr and "sqlite3." not in damaged.stderr


@pytest.mark.suite
def test_onstart_stops_a_replay_without_its_cache(work, tmp_path):
    run = _run(work, tmp_path, replay=True)
    assert run.returncode != 0 and not (work / "results/seeds/seeds.jsonl").exists()
    assert (f"replay mode (llm.replay: true) needs the response cache of a finished run, and there is no file at "
            f"{work / 'cache' / 'mock.sqlite'}") in run.stderr
    assert not (work / "cache" / "mock.sqlite").exists()
