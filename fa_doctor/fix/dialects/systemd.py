"""systemd units and drop-ins: `Environment=` entries, continued lines (`\\` at the end) and their comments.

Only the override's own assignment leaves an `Environment=` entry that holds several; an entry left with none goes
whole (an empty `Environment=` would reset every earlier assignment), all its continued lines with it. The name
anywhere else (`ExecStart=/usr/bin/env N=3 ...`, `PassEnvironment=N`) is refused with its line; in a comment,
`UnsetEnvironment=`, a value or a `${N}` read it is harmless.
"""

from __future__ import annotations

import re

from fa_doctor.fix.dialects.base import (
    Change,
    N,
    Plan,
    Unsafe,
    Word,
    line_of,
    mentions,
    quoted_like,
    remove_words,
)

_KEY = re.compile(r"[ \t]*(?P<key>[A-Za-z0-9_.-]+)[ \t]*=[ \t]*")
RELOAD = "Reload systemd and restart the service: `systemctl daemon-reload` then `systemctl restart ...`."


def _physical(text: str, i: int) -> tuple[int, int]:
    """(end of the line's content, start of the next line)."""
    j = text.find("\n", i)
    return (len(text), len(text)) if j < 0 else (j, j + 1)


def _comment(text: str, i: int, end: int) -> bool:
    return text[i:end].lstrip(" \t")[:1] in ("#", ";")


def logical_lines(text: str) -> list[tuple[int, int, int]]:
    """(start, end of content, start of the next logical line) of each entry, continuations joined."""
    out, i = [], 0
    while i < len(text):
        end, nxt = _physical(text, i)
        body = text[i:end].strip(" \t\r")
        if not body or body[0] in "#;[":
            i = nxt
            continue
        start = i
        while text[i:end].rstrip("\r").endswith("\\") and nxt < len(text):
            i = nxt
            end, nxt = _physical(text, i)
            while _comment(text, i, end) and nxt < len(text):  # comment lines inside a continuation are skipped
                i = nxt
                end, nxt = _physical(text, i)
        out.append((start, end, nxt))
        i = nxt
    return out


def _words(text: str, p: int, end: int, line: int) -> list[Word]:
    words = []
    while p < end:
        c = text[p]
        if c in " \t\r":
            p += 1
        elif c == "\\" and text[p + 1 : p + 3].lstrip("\r")[:1] in ("\n", ""):
            p = _physical(text, p)[1]
            while p < end and _comment(text, p, _physical(text, p)[0]):
                p = _physical(text, p)[1]
        else:
            start = p
            while p < end and text[p] not in " \t\r":
                if text[p] in "\"'":
                    close = text.find(text[p], p + 1)
                    while close > 0 and text[close - 1] == "\\" and text[close - 2 : close] != "\\\\":
                        close = text.find(text[p], close + 1)
                    if close < 0 or close >= end:
                        raise Unsafe(line, f"sets {N} on a systemd line with an unbalanced quote")
                    p = close + 1
                elif text[p] == "\\":
                    if text[p + 1 : p + 3].lstrip("\r")[:1] in ("\n", ""):
                        break
                    p += 2
                else:
                    p += 1
            words.append(Word(start, p, text[start:p]))
    return words


def unquote_name(word: str) -> str:
    """The variable name a systemd assignment word sets ("" when the word has no `=`)."""
    out, quote, i = [], "", 0
    while i < len(word):
        c = word[i]
        if c == "\\" and i + 1 < len(word):
            out.append(word[i + 1])
            i += 2
            continue
        if c in "\"'" and (not quote or quote == c):
            quote = "" if quote else c
        else:
            out.append(c)
        i += 1
    text = "".join(out)
    return text.split("=", 1)[0] if "=" in text else ""


def plan(text: str, value: str | None) -> Plan:
    out, found = Plan(), list(mentions(text))
    ours: list[tuple[int, int]] = []  # the assignments edited
    harmless: list[tuple[int, int]] = []  # Environment= and UnsetEnvironment= entries
    for start, end, nxt in logical_lines(text):
        m = _KEY.match(text, start, end)
        key = m["key"] if m else ""
        if m and key == "EnvironmentFile":
            out.notes.append(f"The unit also reads {text[m.end() : end].strip()}: check it with --env-file too.")
        if key in ("Environment", "UnsetEnvironment"):
            harmless.append((start, end))
        if not m or key != "Environment" or not any(start <= f.start < end for f in found):
            continue
        try:
            words = _words(text, m.end(), end, line_of(text, start))
        except Unsafe as e:
            out.refuse(e.line, e.reason)
            continue
        mine = [k for k, w in enumerate(words) if unquote_name(w.text) == N]
        for w in words:
            if unquote_name(w.text) != N and re.search(r"[%\\]", w.text.split("=", 1)[0]):
                out.refuse(line_of(text, w.start), "a name built by a specifier or an escape may be " + N)
        ours += [(words[k].start, words[k].end) for k in mine]
        if not mine:
            continue
        if value is not None:
            out.changes += [
                Change(words[k].start, words[k].end, quoted_like(words[k].text, f"{N}={value}")) for k in mine
            ]
        elif len(mine) == len(words):
            out.changes.append(Change(start, nxt, ""))
        else:
            out.changes += remove_words(text, words, mine)
    for f in found:
        if any(a <= f.start < b for a, b in ours):
            continue
        physical = text[text.rfind("\n", 0, f.start) + 1 : f.start].lstrip(" \t")
        if physical[:1] in ("#", ";") or (not f.assigns and (f.read or any(a <= f.start < b for a, b in harmless))):
            continue
        key = _KEY.match(physical)
        by = f" in `{key['key']}=`" if key else ""
        out.refuse(line_of(text, f.start), f.why(text) or f"sets or passes {N}{by}, which fa-doctor does not edit")
    if out.refusals:
        out.changes.clear()
    elif out.changes:
        out.notes.insert(0, RELOAD)
    return out
