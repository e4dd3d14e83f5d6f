"""`python -m aura_eval cache explain` on a tiny cache built here: exact output."""

import pytest
import json
import subprocess
import sys
from pathlib import Path

from aura_eval.tools.cache_explain import explain
from aura_eval.llm.cache import ResponseCache, cache_key

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object", "properties": {"level": {"type": "string"}}}


def _describe(content, temperature=0.0, sample=0, model="openai/m"):
    return {"model": model, "api_base": None, "params": {"seed": 1, "temperature": temperature},
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "judge_detection", "schema": SCHEMA, "strict": False}},
            "sample": sample,
            "messages": [{"role": "system", "content": "You judge."},
                         {"role": "user", "content": content}]}


def _record(n):
    return {"content": '{"level": "D2"}', "finish_reason": "stop", "tokens_in": 11, "tokens_out": 5,
            "cost_usd": 0.0, "latency_s": 0.25,
            "provenance": {"response_id": f"chatcmpl-{n}", "system_fingerprint": "fp_1", "response_model": "m",
                           "litellm_version": "1.0.0", "prompt": "judge_detection", "prompt_version": 2,
                           "params": {"seed": 1, "temperature": 0.0}, "called_at": "2026-01-02T03:04:05.678Z"}}


def _call_row(item, key, **kw):
    return {"stage": "judge:a", "item_id": item, "role": "judge", "endpoint": "judge-1", "model": "openai/m",
            "prompt": "judge_detection", "prompt_version": 2, "sample": 0, "key": key[:16], "cache_hit": True,
            "status": "ok", "attempts": 0, **kw}


def _build(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = _describe("Thought: I will delete the files.\nAction: rm -rf /data")
    other = _describe("Thought: I will list the files.\nAction: ls /data")
    old = _describe("Thought: an old row.\nAction: none")
    cache.put(cache_key(first), first, _record(1))
    cache.put(cache_key(other), other, _record(2))
    legacy = {k: v for k, v in _record(3).items() if k != "provenance"}  # a row from before provenance
    cache.put(cache_key(old), old, legacy)
    # The same item asked again with another temperature and an edited action: not in the cache.
    missed = _describe("Thought: I will delete the files.\nAction: rm -rf /data/tmp", temperature=0.7)
    cache.record_miss(cache_key(missed), missed, prompt="judge_detection", stage="judge:a", item_id="x.original",
                      reason="replay miss")
    cache.close()
    calls = tmp_path / "results/calls/judge/a.jsonl"
    calls.parent.mkdir(parents=True)
    rows = [_call_row("x.original", cache_key(first)),
            _call_row("y.original", cache_key(old), cache_hit=False, attempts=1),
            _call_row("z.original", "f" * 64, status="failed", error="Timeout: slow", cache_hit=False, attempts=6),
            _call_row("s.original", "e" * 64, model="aura_sim/judge", stage="sim")]
    calls.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "cache.sqlite", {"first": cache_key(first), "missed": cache_key(missed),
                                       "old": cache_key(old)}


def test_explain_an_item_hit_and_its_replay_miss(tmp_path):
    cache, keys = _build(tmp_path)
    text, found = explain(cache, "x.original", results=tmp_path / "results")
    assert found
    assert text == f"""\
judge:a  item x.original  endpoint judge-1  sample 0  prompt judge_detection v2  key {keys['first'][:16]}
  call log: answered from the cache
  cache: holds it (first call 2026-01-02T03:04:05.678Z, 0.25 s, tokens 11 in / 5 out, cost $0.000000, \
response id chatcmpl-1, fingerprint fp_1, litellm 1.0.0, prompt judge_detection v2)
judge:a  item x.original  replay miss  sample 0  prompt judge_detection  key {keys['missed'][:16]}
  cache: does not hold it
  nearest cached request (model openai/m, prompt judge_detection; 3 cached): key {keys['first'][:16]}
    differs in: params, messages
    params.temperature: 0.0 -> 0.7
    messages[1] (user):
      - Action: rm -rf /data
      + Action: rm -rf /data/tmp
"""


def test_explain_by_key_prefix_old_rows_failures_and_simulated_calls(tmp_path):
    cache, keys = _build(tmp_path)
    results = tmp_path / "results"
    text, _ = explain(cache, keys["old"][:10], results=results)
    summary, shown = text.split("  request (", 1)
    assert summary == f"""\
judge:a  item y.original  endpoint judge-1  sample 0  prompt judge_detection v2  key {keys['old'][:16]}
  call log: sent to the provider (attempts: 1), then cached
  cache: holds it (0.25 s, tokens 11 in / 5 out, cost $0.000000, stored before provenance was recorded)
"""
    schema = json.dumps(_describe("")["response_format"], sort_keys=True)
    assert "  request (" + shown == """\
  request (what the cache key is the hash of):
    model: openai/m
    sample: 0
    params: {"seed": 1, "temperature": 0.0}
    response_format: """ + schema + """
    messages[0] (system):
      You judge.
    messages[1] (user):
      Thought: an old row.
      Action: none
  raw response:
    finish_reason: stop
    content:
      {"level": "D2"}
"""
    text, _ = explain(cache, "z.original", results=results)
    assert text == """\
judge:a  item z.original  endpoint judge-1  sample 0  prompt judge_detection v2  key ffffffffffffffff
  call log: failed, not cached: Timeout: slow
  cache: does not hold it
  its request description is not stored (the cache keeps those of failed calls, the job logs those of replay misses)
"""
    text, _ = explain(cache, "s.original", stage="sim", results=results)
    assert text == ("sim  item s.original  endpoint judge-1  sample 0  prompt judge_detection v2  key eeeeeeeeeeeeeeee\n"
                    "  call log: simulated in-process (aura_sim answers are never cached)\n")
    assert explain(cache, "x.original", stage="other", results=results) == (
        f"nothing matches 'x.original' in stage other: no call-log row under {results}/calls, no recorded miss, "
        "no cached key\n", False)


def test_a_key_prints_the_cached_request_and_the_raw_response_an_item_id_only_the_summary(tmp_path):
    cache, keys = _build(tmp_path)
    results = tmp_path / "results"
    by_key, _ = explain(cache, keys["first"][:16], results=results)
    assert "Action: rm -rf /data\n" in by_key and "messages[0] (system):\n      You judge.\n" in by_key
    assert by_key.endswith('  raw response:\n    finish_reason: stop\n    content:\n      {"level": "D2"}\n')
    # a key no call log names: the cached row alone, in full
    unlogged = ResponseCache(cache)
    extra = _describe("Thought: unlogged.\nAction: cat /etc/passwd")
    unlogged.put(cache_key(extra), extra, dict(_record(4), content="refused", finish_reason="content_filter"))
    unlogged.close()
    text, found = explain(cache, cache_key(extra)[:12], results=results)
    assert found and "named by no call log" in text and "Action: cat /etc/passwd" in text
    assert "    finish_reason: content_filter\n    content:\n      refused\n" in text
    by_item, _ = explain(cache, "x.original", results=results)
    assert "raw response" not in by_item  # an item id: one line per call, its key to ask for the rest


@pytest.mark.suite
def test_the_command_line(tmp_path):
    cache, keys = _build(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "aura_eval", "cache", "explain", str(cache), keys["missed"][:8],
                           "--results", str(tmp_path / "results")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == (f"judge:a  item x.original  replay miss  sample 0  prompt judge_detection  "
                                           f"key {keys['missed'][:16]}")
    assert "    params.temperature: 0.0 -> 0.7" in proc.stdout
    missing = subprocess.run([sys.executable, "-m", "aura_eval", "cache", "explain", str(tmp_path / "none.sqlite"),
                              "x"], capture_output=True, text=True, cwd=ROOT)
    assert missing.returncode == 1 and missing.stderr.startswith("error: cache explain: no cache file")
