"""A finished run's cache can keep answers in its `-wal`: moving the file alone loses them (the README's
offline commands test once replayed a packed mock run that missed a judge answer for this reason)."""

from aura_eval.llm.cache import ResponseCache, connect_readonly, fold_at_end, has_wal_content
from tests.workflow import move_cache


def _cache_with_answers_in_its_wal(path):
    """As a run leaves it when the last writer closes while another connection is open (here a
    read-only reader, as the forecast's; two jobs closing at once do the same): no connection folds
    the -wal into the file."""
    writer = ResponseCache(path)
    writer.put("early", {"q": 0}, {"a": 0})
    writer.close()  # alone: folded into the file
    writer = ResponseCache(path)
    writer.put("late", {"q": 1}, {"a": 1})
    reader = connect_readonly(path, purpose="test")
    reader.execute("SELECT count(*) FROM responses").fetchone()
    writer.close()  # not the last connection: no fold
    reader.close()  # read-only: cannot fold
    assert has_wal_content(path)


def test_moving_a_cache_keeps_the_answers_in_its_wal(tmp_path):
    source = tmp_path / "mock.sqlite"
    _cache_with_answers_in_its_wal(source)
    alone = tmp_path / "alone.sqlite"
    alone.write_bytes(source.read_bytes())  # the file without its -wal: the late answer is lost
    assert ResponseCache(alone).get("late") is None and ResponseCache(alone).get("early") is not None

    target = tmp_path / "cache" / "responses.sqlite"
    target.parent.mkdir()
    move_cache(source, target)
    moved = ResponseCache(target)
    assert moved.get("early") is not None and moved.get("late") is not None
    assert not source.exists() and not has_wal_content(source)


def test_a_run_s_end_folds_its_cache_into_one_file(tmp_path):
    """What the Snakefile's onsuccess and onerror do (rules/common.smk, fold_cache_at_end): the
    answers left in the -wal go into the file, so the file alone holds them all."""
    source = tmp_path / "mock.sqlite"
    _cache_with_answers_in_its_wal(source)
    note = fold_at_end(source)
    assert note.startswith(f"response cache {source}: folded the run's last answers") and not has_wal_content(source)
    alone = tmp_path / "alone.sqlite"
    alone.write_bytes(source.read_bytes())
    assert ResponseCache(alone).get("late") is not None and ResponseCache(alone).get("early") is not None
    assert fold_at_end(source) is None and fold_at_end(tmp_path / "absent.sqlite") is None


def test_a_cache_another_connection_holds_is_left_for_the_next_start(tmp_path):
    source = tmp_path / "mock.sqlite"
    _cache_with_answers_in_its_wal(source)
    reader = connect_readonly(source, purpose="test")
    reader.execute("BEGIN")  # a read transaction open elsewhere: the -wal cannot be emptied under it
    reader.execute("SELECT count(*) FROM responses").fetchone()
    try:
        note = fold_at_end(source)
    finally:
        reader.close()
    assert "not folded into the file yet" in note and "next run's start folds it" in note
