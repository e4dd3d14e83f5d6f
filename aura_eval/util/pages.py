"""What every generated HTML page does so that any text it shows is shown as text: the report,
the audit site's pages and the annotation pages all call these.

- `script_json(data)`: a JSON blob to place inside a <script> element. `<`, `>` and `&` are
  written as \\u003c, \\u003e, \\u0026 (so no text can open a comment, open or close a script
  element), U+2028 and U+2029 as \\u2028, \\u2029; JSON.parse and JavaScript read the same values.
- `shown(text)`, `shown_data(value)`: NUL and the bidirectional controls (which hide or reorder
  what a reader sees) as visible marks: NUL as U+2400, a control as `[U+202E]`.
- `with_policy(html)`: the page with a meta Content-Security-Policy computed from its own inline
  scripts and styles (sha256 hashes; no nonce, so reruns give the same bytes).
- `finish(html)`: both, in that order; what a page writer calls last on a whole page.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import json
import re
import urllib.parse
from html.parser import HTMLParser

_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029]")


def script_json(data, **dumps) -> str:
    """`data` as JSON safe to place between <script> and </script> (see the module's docstring);
    `dumps` are json.dumps's options (ensure_ascii is off unless given)."""
    text = json.dumps(data, **{"ensure_ascii": False, **dumps})
    # These characters occur only inside JSON strings, where the escape means the same character.
    return _SCRIPT_UNSAFE.sub(lambda m: _SCRIPT_ESCAPES[m.group(0)], text)


# NUL and the bidirectional controls: LRE RLE PDF LRO RLO, LRI RLI FSI PDI, LRM RLM, ALM.
HIDDEN = "\x00" + "".join(map(chr, range(0x202A, 0x202F))) + "".join(map(chr, range(0x2066, 0x206A))) + \
    "\u200e\u200f\u061c"
_MARKS = {c: "\u2400" if c == "\x00" else f"[U+{ord(c):04X}]" for c in HIDDEN}
_HIDDEN = re.compile(f"[{re.escape(HIDDEN)}]")


def shown(text: str) -> str:
    """`text` with NUL as U+2400 (␀) and each bidirectional control as `[U+XXXX]`."""
    return _HIDDEN.sub(lambda m: _MARKS[m.group(0)], text)


def shown_data(value):
    """`value` (JSON-like: dicts, lists, strings, numbers) with every string `shown`; keys too."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown(k) if isinstance(k, str) else k: shown_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown_data(v) for v in value]
    return value


# -- the Content-Security-Policy -------------------------------------------------------------------

def _sha256(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return "'sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode("ascii") + "'"


class _Inventory(HTMLParser):
    """What a page loads and runs: its inline scripts and styles (their text, as the browser hashes
    it), style attributes, external scripts and stylesheets, and the kinds of data: URL it uses."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.styles, self.style_attrs = [], [], set()
        self.script_srcs, self.stylesheets, self.images = [], [], []
        self._open = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("style") is not None:
            self.style_attrs.add(attrs["style"])
        if tag == "script":
            if attrs.get("src") is not None:
                self.script_srcs.append(attrs["src"])
            else:
                self._open = (self.scripts, [])
        elif tag == "style":
            self._open = (self.styles, [])
        elif tag == "link" and "stylesheet" in (attrs.get("rel") or "").split():
            self.stylesheets.append(attrs.get("href") or "")
        elif tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])

    def handle_data(self, data):
        if self._open:
            self._open[1].append(data)

    def handle_endtag(self, tag):
        if self._open and tag in ("script", "style"):
            where, parts = self._open
            # the parser hands the browser's text with newlines normalised to \n
            where.append("".join(parts).replace("\r\n", "\n").replace("\r", "\n"))
            self._open = None


def _data_kind(url: str) -> str | None:
    match = re.match(r"\s*data:([a-z-]+)/", url, re.I)
    return match.group(1).lower() if match else None


def policy(html: str, loads_scripts: bool = False, vouched=()) -> str:
    """The page's policy: nothing but what it holds. Scripts and styles by the sha256 of their inline
    text (`'strict-dynamic'` when `loads_scripts`: a hashed script may add scripts, as the audit
    index adds cells/*.js); scripts from data: URLs by the hashes `vouched` for them (their
    integrity attributes); style attributes by hash with 'unsafe-hashes'; a stylesheet or script of
    the page's own folder by 'self'; images and fonts from data: URLs where the page has them.
    Never 'unsafe-inline' nor a nonce."""
    page = _Inventory()
    page.feed(html)
    page.close()
    scripts = sorted({_sha256(s) for s in page.scripts} | set(vouched))
    if any(_data_kind(src) is None for src in page.script_srcs):
        scripts.append("'self'")
    styles = sorted({_sha256(s) for s in page.styles})
    if page.style_attrs:
        styles += ["'unsafe-hashes'", *sorted({_sha256(s) for s in page.style_attrs})]
    if page.stylesheets:
        styles.insert(0, "'self'")
    data_urls = [_data_kind(u) for u in page.images] + [
        _data_kind(u) for css in page.styles + sorted(page.style_attrs)
        for u in re.findall(r"url\(\s*['\"]?([^'\")]*)", css)]
    directives = [("default-src", ["'none'"])]
    if scripts:
        directives.append(("script-src", scripts + (["'strict-dynamic'"] if loads_scripts else [])))
    if styles:
        directives.append(("style-src", styles))
    if "image" in data_urls:
        directives.append(("img-src", ["data:"]))
    if {"font", "application"} & set(data_urls):
        directives.append(("font-src", ["data:"]))
    directives += [("base-uri", ["'none'"]), ("form-action", ["'none'"])]
    return "; ".join(f"{name} {' '.join(values)}" for name, values in directives)


_DATA_SCRIPT = re.compile(r'<script\b(?P<attrs>[^>]*?)\bsrc="(?P<url>data:[^"]*)"(?P<rest>[^>]*)>', re.I)
_HEAD = re.compile(r"<head\b[^>]*>", re.I)
_CHARSET = re.compile(r"\s*<meta\s+charset=[^>]*>", re.I)


def _vouch_data_scripts(html: str) -> tuple[str, list[str]]:
    """A script loaded from a data: URL (Quarto's embedded resources) gets an integrity attribute,
    whose hash the policy then lists: CSP 3 lets such a hash allow that one script."""
    hashes = []

    def vouch(match):
        if "integrity=" in match.group(0):
            return match.group(0)
        header, _, payload = html_lib.unescape(match["url"]).partition(",")
        body = base64.b64decode(payload) if header.endswith(";base64") else urllib.parse.unquote_to_bytes(payload)
        digest = _sha256(body)
        hashes.append(digest)
        return f'<script{match["attrs"]}src="{match["url"]}" integrity="{digest[1:-1]}"{match["rest"]}>'
    return _DATA_SCRIPT.sub(vouch, html), hashes


def with_policy(html: str, loads_scripts: bool = False) -> str:
    """`html` with `<meta http-equiv="Content-Security-Policy">` opening its <head> (after a
    leading <meta charset>, which must stay within the first 1024 bytes and loads nothing). A page
    without a <head> raises ValueError. Call it once per page, on the finished page."""
    if _HEAD.search(html) is None:
        raise ValueError("a page without <head> cannot carry its Content-Security-Policy")
    html, vouched = _vouch_data_scripts(html)
    rule = policy(html, loads_scripts, vouched)
    at = _HEAD.search(html).end()
    charset = _CHARSET.match(html, at)
    if charset:
        at = charset.end()
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html_lib.escape(rule, quote=False)}">'
    return html[:at] + meta + html[at:]


def finish(html: str, loads_scripts: bool = False) -> str:
    """The page as it is written: its text `shown`, then its policy (hashes of the final scripts)."""
    return with_policy(shown(html), loads_scripts)
