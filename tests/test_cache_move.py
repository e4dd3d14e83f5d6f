"""A finished run's cache can keep answers in its `-wal`: moving the file alone loses them (the README's
offline commands test once replayed a packed mock run that missed a judge answer for this reason)."""

from aura_eval.llm.cache import ResponseCache, connect_readonly, has_wal_content
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
