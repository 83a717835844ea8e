"""Make reports safe to paste: the home folder becomes ~, secret-looking values and URL credentials are hidden
(a remedy's commands are not scrubbed: render/boundary.py)."""

from __future__ import annotations

import os
import re

SECRET_NAME = re.compile(
    r"token|secret|passw|api[_-]?key|access[_-]?key|credential|authorization|auth[_-]?token|private"
    r"|(?:^|[^a-z])(?:key|pass|pwd)(?:$|[^a-z])",
    re.IGNORECASE,
)
# scheme://user:password@host or scheme://token@host
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"]+@")
_PATH_CHAR = r"[\w.~+-]"
# NAME=value, NAME = "value", $env:NAME = 'v', ${env:NAME}="v", "NAME=v w" (systemd): a value stops at the quote
# that opened the word, else at the end of its own quotes, else at a blank.
_ASSIGNED = re.compile(
    r"""(?P<q>["']?)(?P<name>[A-Za-z_][\w.-]*)(?P<eq>\}?[ \t]*=[ \t]*)"""
    r"""(?P<val>"(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s"']*)"""
)
_FISH_SET = re.compile(r"(?P<pre>\bset(?:[ \t]+-[-\w]+)*[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+)(?P<val>[^;#\n]*)")
_PS_SET = re.compile(
    r"""(?i)(?P<pre>(?:\b(?:set-item|new-item|set-content|si|ni|sc)\b[^\n]*?env:[\\/]?(?P<name>[A-Za-z_]\w*)"""
    r"""['"]?[ \t]+(?:-value[ \t]+)?)|setenvironmentvariable\([ \t]*['"](?P<name2>[A-Za-z_]\w*)['"][ \t]*,[ \t]*)"""
    r"""(?P<val>'[^']*'?|"[^"]*"?|[^\s,)]*)"""
)


def scrub_text(text: str) -> str:
    if "@" in text:
        text = _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
    home = os.path.expanduser("~").rstrip("/")
    if home not in ("", "~") and home in text:  # a substring test first: most strings hold no path (a fleet: ~10^6)
        # Only where the home folder starts a path (`/adv/x`, `'/adv/x'`, `=/adv`), not inside one (`/tmp/adv/x`).
        text = re.sub(rf"(?<!{_PATH_CHAR})(?<!/){re.escape(home)}(?=/|$|[^\w.~+-])", "~", text)
    return text


def hide_secret_values(line: str) -> str:
    """One line of a file shown to a person (a diff): the values of secret-looking names become <hidden>, and
    URL credentials go, in every syntax an env file uses (sh, dotenv, systemd, fish `set`, PowerShell)."""
    out, at, pos = [], 0, 0
    while m := _ASSIGNED.search(line, pos):
        if not SECRET_NAME.search(m["name"]):
            pos = m.end("eq")  # a value may itself hold `"SECRET=..."` (systemd): look inside it
            continue
        stop = m.end()
        if m["q"]:  # "NAME=v w": everything up to the quote that opened the word
            close = line.find(m["q"], m.end("eq"))
            stop = len(line) if close < 0 else close + 1
        out += [line[at : m.start()], f"{m['q']}{m['name']}{m['eq']}<hidden>{m['q']}"]
        at = pos = stop
    line = "".join([*out, line[at:]])
    line = _FISH_SET.sub(lambda m: m["pre"] + "<hidden>" if SECRET_NAME.search(m["name"]) else m[0], line)
    line = _PS_SET.sub(lambda m: m["pre"] + "<hidden>" if SECRET_NAME.search(m["name"] or m["name2"]) else m[0], line)
    return _URL_CREDENTIALS.sub(r"\g<scheme>***@", line)
