"""Why a request was (or was not) answered from the response cache.

    python -m aura_eval cache explain <cache> <item id or key prefix> [--stage S] [--results DIR] [--logs DIR]

The request is named by an item id or by the first hex digits of its cache key (the call
log's `key`). For every call-log row under `results/calls/` that matches (and every request
the cache recorded as missed: a failed call, `ResponseCache.record_miss`; or a job's log under
`logs/` names as a replay-mode miss: a replay writes nothing to the cache, so it logs the
request's description as one `replay miss: {json}` line),
it says how the call was answered, whether the cache holds the request and with what
provenance, and, for a request the cache does not hold, which fields of its description differ
from the nearest cached request of the same model and prompt (model, api_base, params,
response_format, sample, and a short diff of the messages). Asked by key (hex digits), it also
prints, for each matching call the cache holds (up to MAX_SHOWN), the cached request as the cache keys it
(model, api_base, sample, params, response_format, every message) and the raw response (finish reason,
refusal, reasoning, content). The cache is opened read-only.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import sqlite3
from pathlib import Path

from aura_eval.llm.cache import connect_readonly
from aura_eval.llm.providers import is_simulated

FIELDS = ("model", "api_base", "params", "response_format", "sample", "messages", "facts")
MAX_MESSAGE_LINES = 6  # changed lines shown per message
WIDTH = 100  # characters of a changed line shown, around its first difference


def _connect(cache_path) -> sqlite3.Connection:
    """The cache read-only, writing nothing (`llm.cache.connect_readonly`)."""
    path = Path(cache_path)
    if not path.is_file():
        raise FileNotFoundError(f"cache explain: no cache file {path}")
    return connect_readonly(path, purpose="cache explain")


def _has_table(db, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _logged(results: Path, query: str, stage: str | None) -> list[dict]:
    rows = []
    for path in sorted((results / "calls").rglob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if query not in line:  # cheap filter before parsing
                    continue
                row = json.loads(line)
                if (row.get("item_id") == query or str(row.get("key", "")).startswith(query)) and (
                        stage is None or row.get("stage") == stage):
                    rows.append(row)
    return sorted(rows, key=lambda r: (r.get("stage") or "", r.get("item_id") or "", r.get("endpoint") or "",
                                       r.get("sample") or 0, r.get("prompt") or ""))


def _misses(db, query: str, stage: str | None) -> list[dict]:
    if not _has_table(db, "misses"):
        return []
    found = db.execute("SELECT key, prompt, stage, item_id, reason, request FROM misses"
                       " WHERE (item_id = ? OR key LIKE ? ESCAPE '\\') ORDER BY stage, item_id, key",
                       (query, _like(query))).fetchall()
    return [{"key": k, "prompt": p, "stage": s, "item_id": i, "reason": r, "request": json.loads(q)}
            for k, p, s, i, r, q in found if stage is None or s == stage]


REPLAY_MISS = "replay miss: "  # the line a replay-mode miss writes to its job's log (ModelClient.raise_replay_miss)


def _logged_misses(logs: Path, query: str, stage: str | None) -> list[dict]:
    """The replay-mode misses the job logs under `logs` describe, matching the query."""
    found = []
    if not logs.is_dir():
        return found
    for path in sorted(logs.rglob("*.log")):
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.startswith(REPLAY_MISS) or query not in line:
                    continue
                try:
                    miss = json.loads(line[len(REPLAY_MISS):])
                except ValueError:
                    continue
                if (miss.get("item_id") == query or str(miss.get("key", "")).startswith(query)) and (
                        stage is None or miss.get("stage") == stage):
                    found.append(miss)
    return found


def _cached(db, key_prefix: str) -> list[tuple[str, dict, dict]]:
    """(key, request, response) of the cached rows whose key starts with key_prefix."""
    found = db.execute("SELECT key, request, response FROM responses WHERE key LIKE ? ESCAPE '\\' ORDER BY key",
                       (_like(key_prefix),)).fetchall()
    return [(k, json.loads(q), json.loads(r)) for k, q, r in found]


def _prompt_of(request: dict, response: dict) -> str | None:
    """The prompt id of a cached row: its provenance's, else its JSON schema's name."""
    prompt = (response.get("provenance") or {}).get("prompt")
    if prompt:
        return prompt
    return ((request.get("response_format") or {}).get("json_schema") or {}).get("name")


def _provenance_line(response: dict) -> str:
    prov = response.get("provenance") or {}
    parts = []
    if prov.get("called_at"):
        parts.append(f"first call {prov['called_at']}")
    if response.get("latency_s") is not None:
        parts.append(f"{response['latency_s']} s")
    if response.get("tokens_in") is not None or response.get("tokens_out") is not None:
        parts.append(f"tokens {response.get('tokens_in')} in / {response.get('tokens_out')} out")
    if response.get("cost_usd") is not None:
        parts.append(f"cost ${response['cost_usd']:.6f}")
    for name, label in (("response_id", "response id"), ("system_fingerprint", "fingerprint"),
                        ("litellm_version", "litellm")):
        if prov.get(name):
            parts.append(f"{label} {prov[name]}")
    if prov.get("prompt"):
        parts.append(f"prompt {prov['prompt']} v{prov.get('prompt_version')}")
    if not prov:
        parts.append("stored before provenance was recorded")
    return ", ".join(parts)


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _format_name(fmt) -> str:
    if fmt is None:
        return "none"
    schema = (fmt.get("json_schema") or {}).get("schema")
    digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:8] if schema else "-"
    return f"{fmt.get('type')} {(fmt.get('json_schema') or {}).get('name', '')} (schema {digest})".replace("  ", " ")


def _window(line: str, at: int) -> str:
    start = max(0, at - 30)
    text = line[start:start + WIDTH]
    return ("..." if start else "") + text + ("..." if start + WIDTH < len(line) else "")


def _message_diff(old: str, new: str) -> list[str]:
    """Changed lines of one message, each cut to a window around its first difference."""
    a, b = (old or "").splitlines(), (new or "").splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        olds, news = a[i1:i2], b[j1:j2]
        for k in range(max(len(olds), len(news))):
            o = olds[k] if k < len(olds) else None
            n = news[k] if k < len(news) else None
            at = next((c for c, (x, y) in enumerate(zip(o or "", n or "")) if x != y),
                      min(len(o or ""), len(n or "")))
            if o is not None:
                out.append(f"- {_window(o, at)}")
            if n is not None:
                out.append(f"+ {_window(n, at)}")
    if len(out) > MAX_MESSAGE_LINES:
        out = out[:MAX_MESSAGE_LINES] + [f"... {len(out) - MAX_MESSAGE_LINES} more changed lines"]
    return out


def differences(wanted: dict, cached: dict) -> tuple[list[str], list[str]]:
    """(names of the differing fields, detail lines) between two request descriptions."""
    names = [f for f in FIELDS if wanted.get(f) != cached.get(f)]
    lines = []
    for name in names:
        old, new = cached.get(name), wanted.get(name)
        if name == "params":
            old, new = old or {}, new or {}
            for param in sorted(set(old) | set(new)):
                if old.get(param) != new.get(param):
                    lines.append(f"params.{param}: "
                                 f"{_short(old[param]) if param in old else '(unset)'} -> "
                                 f"{_short(new[param]) if param in new else '(unset)'}")
        elif name == "response_format":
            lines.append(f"response_format: {_format_name(old)} -> {_format_name(new)}")
        elif name == "messages":
            old, new = old or [], new or []
            if len(old) != len(new):
                lines.append(f"messages: {len(old)} -> {len(new)}")
            for i in range(max(len(old), len(new))):
                o = old[i] if i < len(old) else {}
                n = new[i] if i < len(new) else {}
                if o == n:
                    continue
                role = n.get("role") or o.get("role")
                if o.get("role") != n.get("role") and o and n:
                    role = f"{o.get('role')} -> {n.get('role')}"
                lines.append(f"messages[{i}] ({role}):")
                lines += [f"  {d}" for d in _message_diff(o.get("content"), n.get("content"))]
        else:
            lines.append(f"{name}: {_short(old)} -> {_short(new)}")
    return names, lines


def _similarity(a: dict, b: dict) -> float:
    def text(d):
        return json.dumps(d.get("messages"), sort_keys=True, ensure_ascii=False)[:4000]
    return difflib.SequenceMatcher(None, text(a), text(b), autojunk=False).ratio()


def nearest(db, wanted: dict, prompt: str | None) -> tuple[str, list[tuple[str, dict]]]:
    """(what the candidates are, [(key, request)] best first) among cached requests of the same
    model and prompt (of the same model only where none has the prompt)."""
    model = wanted.get("model", "")
    rows = [(k, json.loads(q), json.loads(r)) for k, q, r in db.execute(
        "SELECT key, request, response FROM responses WHERE model = ? ORDER BY key", (model,))]
    same = [(k, q) for k, q, r in rows if prompt and _prompt_of(q, r) == prompt]
    scope = f"model {model}, prompt {prompt}"
    if not same:
        same = [(k, q) for k, q, _ in rows]
        scope = f"model {model} (none of prompt {prompt})"
    scored = sorted(same, key=lambda kq: (len(differences(wanted, kq[1])[0]), -_similarity(wanted, kq[1]), kq[0]))
    return scope, scored


KEY = re.compile(r"[0-9a-f]{4,64}")  # a query naming a call by its key (the call log's `key`, or a prefix)
MAX_SHOWN = 3  # calls whose request and response a key query prints in full


def _indented(text, indent: str) -> list[str]:
    return [indent + line for line in str(text).splitlines()] or [indent]


def shown_in_full(request: dict, response: dict) -> list[str]:
    """The cached request as the cache keys it and the raw response as the provider gave it."""
    out = ["  request (what the cache key is the hash of):"]
    for name in ("model", "api_base", "sample"):
        if request.get(name) is not None:
            out.append(f"    {name}: {request[name]}")
    if request.get("params"):
        out.append(f"    params: {json.dumps(request['params'], sort_keys=True, ensure_ascii=False)}")
    if request.get("response_format"):
        out.append(f"    response_format: {json.dumps(request['response_format'], sort_keys=True, ensure_ascii=False)}")
    for i, message in enumerate(request.get("messages") or []):
        out.append(f"    messages[{i}] ({message.get('role')}):")
        out += _indented(message.get("content", ""), "      ")
    out.append("  raw response:")
    for name in ("finish_reason", "refusal"):
        if response.get(name) is not None:
            out.append(f"    {name}: {response[name]}")
    if response.get("reasoning"):
        out.append("    reasoning:")
        out += _indented(response["reasoning"], "      ")
    out.append("    content:")
    out += _indented(response.get("content") if response.get("content") is not None else "(none)", "      ")
    return out


def _explain_missing(db, wanted: dict, prompt: str | None) -> list[str]:
    scope, found = nearest(db, wanted, prompt)
    if not found:
        return [f"  the cache holds no request of model {wanted.get('model')}"]
    key, request = found[0]
    names, lines = differences(wanted, request)
    return ([f"  nearest cached request ({scope}; {len(found)} cached): key {key[:16]}",
             f"    differs in: {', '.join(names) if names else 'nothing (same description, other key)'}"]
            + [f"    {line}" for line in lines])


def explain(cache_path, query: str, stage: str | None = None, results="results",
            logs="logs") -> tuple[str, bool]:
    """(the explanation, whether anything matched)."""
    db = _connect(cache_path)
    by_key = bool(KEY.fullmatch(query))  # a key names one call: its request and response are printed
    try:
        logged = _logged(Path(results), query, stage)
        misses = _misses(db, query, stage) + _logged_misses(Path(logs), query, stage)
        miss_by_key = {m["key"][:16]: m for m in misses}
        out = []
        for row in logged:
            key16 = row.get("key") or ""
            out.append(f"{row.get('stage')}  item {row.get('item_id')}  endpoint {row.get('endpoint')}  "
                       f"sample {row.get('sample')}  prompt {row.get('prompt')} v{row.get('prompt_version')}  "
                       f"key {key16}")
            if is_simulated(str(row.get("model", ""))):
                out.append("  call log: simulated in-process (aura_sim answers are never cached)")
                continue
            if row.get("status") == "failed":
                out.append(f"  call log: failed, not cached: {row.get('error')}")
            elif row.get("cache_hit"):
                out.append("  call log: answered from the cache")
            else:
                out.append(f"  call log: sent to the provider (attempts: {row.get('attempts')}), then cached")
            cached = _cached(db, key16) if key16 else []
            if cached:
                out.append(f"  cache: holds it ({_provenance_line(cached[0][2])})")
                if by_key and len(logged) <= MAX_SHOWN:
                    out += shown_in_full(cached[0][1], cached[0][2])
                continue
            out.append("  cache: does not hold it")
            miss = miss_by_key.pop(key16, None)
            if miss is None:
                out.append("  its request description is not stored (the cache keeps those of failed calls, the job "
                           "logs those of replay misses)")
            else:
                out += _explain_missing(db, miss["request"], miss["prompt"])
        for miss in miss_by_key.values():  # missed requests no call log names (a replay miss stops the job)
            if _cached(db, miss["key"]):
                continue
            out.append(f"{miss['stage']}  item {miss['item_id']}  {miss['reason']}  sample "
                       f"{miss['request'].get('sample')}  prompt {miss['prompt']}  key {miss['key'][:16]}")
            out.append("  cache: does not hold it")
            out += _explain_missing(db, miss["request"], miss["prompt"])
        if not out:
            cached = _cached(db, query) if len(query) >= 4 else []
            for key, request, response in cached:
                out.append(f"key {key[:16]}: in the cache, named by no call log under {results} "
                           f"({_provenance_line(response)})")
                if by_key and len(cached) <= MAX_SHOWN:
                    out += shown_in_full(request, response)
        if not out:
            where = f" in stage {stage}" if stage else ""
            return f"nothing matches {query!r}{where}: no call-log row under {results}/calls, no recorded miss, " \
                   f"no cached key\n", False
        return "\n".join(out) + "\n", True
    finally:
        db.close()
