"""dotenv files (`.env`, `server.env`, /etc/environment, systemd EnvironmentFile=): `KEY=value` entries.

A quoted value may span lines; it is data, never an assignment, so text inside it is left alone. A file that is
not a plain list of entries (it has `if`, functions, commands) is read as a shell script instead.
"""

from __future__ import annotations

import re

import fa_doctor.fix.dialects.sh as _sh
from fa_doctor.fix.dialects.base import Change, N, Plan, Unsafe, line_of, quoted_like

_ENTRY = re.compile(r"[ \t]*(?:export[ \t]+)?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*")
_TAIL = re.compile(r"[ \t]*(?:#[^\n]*)?\r?(?:\n|\Z)")
_UNQUOTED = re.compile(r"[^\n]*?(?=[ \t]+#|\r?\n|\r?\Z)")


def _entries(text: str) -> list[tuple[int, int, str, int, int, bool]] | None:
    """(start, start of the next line, key, value start, value end, continued) per entry; None when a line is
    neither an entry, a comment nor blank."""
    out, i, n = [], 0, len(text)
    while i < n:
        j = text.find("\n", i)
        end = n if j < 0 else j
        body = text[i:end].strip(" \t\r")
        if not body or body.startswith("#"):
            i = end + 1
            continue
        m = _ENTRY.match(text, i, end)
        if m is None:
            return None
        p = m.end()
        if p < n and text[p] in "'\"":
            close = p + 1
            while close < n and text[close] != text[p]:
                close += 2 if text[close] == "\\" and text[p] == '"' else 1
            if close >= n:
                return None
            vend = close + 1
            tail = _TAIL.match(text, vend)
            if tail is None:
                return None
            nxt = tail.end()
        else:
            u = _UNQUOTED.match(text, p)
            assert u is not None
            vend = u.end()
            nxt = end + 1
        out.append((i, min(nxt, n), m["key"], p, vend, text[p:vend].endswith("\\") and text[p] not in "'\""))
        i = nxt
    return out


def plan(text: str, value: str | None) -> Plan:
    entries = _entries(text)
    if entries is None:
        return _sh.plan(text, value)
    out = Plan()
    for k, (start, nxt, key, vstart, vend, _continued) in enumerate(entries):
        line = line_of(text, start)
        raw = text[vstart:vend]
        if key != N:
            if N in raw and "\n" in raw:
                out.notes.append(f"line {line}: {N} appears inside the quoted value of {key}; left as it is.")
            elif re.search(rf"(?<![\w$]){N}[ \t]*=", raw):
                return _sh.plan(text, value)  # `export A=1 NAME=3`: one line, several shell words
            continue
        if k and entries[k - 1][5]:
            raise Unsafe(line, "the line before ends with `\\`: shells and systemd read this line as part of it")
        if raw and not _sh.STATIC.fullmatch(raw):
            raise Unsafe(line, f"sets {N} in a form fa-doctor does not rewrite safely ({raw!r})")
        out.changes.append(Change(vstart, vend, quoted_like(raw, value)) if value else Change(start, nxt, ""))
    return out
