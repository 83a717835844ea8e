"""dotenv files (`.env`, `server.env`, /etc/environment, systemd EnvironmentFile=): `KEY=value` entries.

Read this way only when every line is a blank, a comment or an entry whose value cannot run or expand anything
(no `$`, backtick or operator; quoted values may span lines): then sourcing it with `set -a; . FILE`, docker's
`--env-file`, systemd and python-dotenv all set exactly the keys it lists. Anything else is read as a shell script.
"""

from __future__ import annotations

import re

import fa_doctor.fix.dialects.sh as _sh
from fa_doctor.fix.dialects.base import Change, N, Plan, line_of, quoted_like

_ENTRY = re.compile(r"[ \t]*(?:export[ \t]+)?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<eq>[ \t]*=[ \t]*)")
_VALUE = re.compile(r"""'[^']*'|"(?:[^"\\$`]|\\[^\n])*"|[^\s'"\\;&|<>()`$#][^\s'"\\;&|<>()`$]*|""")
_TAIL = re.compile(r"[ \t]*(?:#[^\n]*)?\r?(?:\n|\Z)")
# A line that a reader going line by line (docker --env-file) takes as setting the override.
_LINE_SETS = re.compile(rf"^[ \t]*(?:export[ \t]+)?{N}[ \t]*=", re.M)
# `KEY = value` runs KEY in a shell: only where KEY cannot assign or run code.
_SHELL_WORDS = _sh.SETTERS | set(_sh.DECLARE) | set(_sh.REFUSED) | _sh.CODE


def _entries(text: str) -> list[tuple[int, int, str, int, int]] | None:
    """(start, start of the next entry, key, value start, value end) per entry; None when a line is not a
    blank, a comment or a plain entry."""
    out, i, n = [], 0, len(text)
    while i < n:
        j = text.find("\n", i)
        end = n if j < 0 else j
        body = text[i:end].strip(" \t\r")
        if not body or body.startswith("#"):
            i = end + 1
            continue
        m = _ENTRY.match(text, i, end)
        if m is None or (m["eq"] != "=" and m["key"] in _SHELL_WORDS):
            return None
        value = _VALUE.match(text, m.end())
        tail = _TAIL.match(text, value.end()) if value else None
        if value is None or tail is None:
            return None
        out.append((i, tail.end(), m["key"], value.start(), value.end()))
        i = tail.end()
    return out


def plan(text: str, value: str | None) -> Plan:
    entries = _entries(text)
    if entries is None:
        return _sh.plan(text, value)
    out, starts = Plan(), set()
    for start, nxt, key, vstart, vend in entries:
        raw = text[vstart:vend]
        if key != N:
            continue
        if "\n" in raw:
            out.refuse(line_of(text, start), f"sets {N} to a value that spans lines")
            continue
        starts.add(start)
        out.changes.append(Change(vstart, vend, quoted_like(raw, value)) if value else Change(start, nxt, ""))
    for m in _LINE_SETS.finditer(text):
        if m.start() not in starts:
            why = "inside a quoted value: docker's --env-file, which reads line by line, sets it"
            out.refuse(line_of(text, m.start()), f"{N}= stands at the start of a line {why}")
    if out.refusals:
        out.changes.clear()
    return out
