"""Structure-aware edits of the override in env files: sh (bash, zsh), dotenv and systemd; fish, PowerShell and csh
files are refused, naming each line with the name. Each dialect returns a Plan: spans to replace, or the lines
that may set the override in a form fa-doctor does not edit (then nothing is edited). The rules: docs/fix.md."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

from fa_doctor.fix.dialects import sh
from fa_doctor.fix.dialects.sh import Change, N, Plan, Unsafe, Word, apply, line_of, mentions, quoted_like, remove_words

__all__ = ["Plan", "apply", "detect", "line_of", "planner", "refused"]

_SYSTEMD_EXT = {".service", ".socket", ".timer", ".mount", ".path", ".slice", ".scope", ".swap", ".target"}
_SH_NAMES = {".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin"}
_SH_NAMES |= {".kshrc", ".envrc", ".bash_aliases", "bashrc", "profile", "zshrc", "zshenv", "bash.bashrc"}
_OTHER_SHELLS = {".fish": "fish", ".ps1": "PowerShell", ".psm1": "PowerShell", ".psd1": "PowerShell"}
_OTHER_SHELLS |= {".csh": "csh", ".tcsh": "tcsh", ".cshrc": "csh", ".tcshrc": "tcsh", ".login": "csh"}
_SECTION = re.compile(r"^[ \t]*\[(?:Unit|Service|Install|Socket|Timer|Mount|Path|Slice|Scope|Swap)\][ \t]*\r?$", re.M)
_SD_HINT = re.compile(rf"^[ \t]*Environment[ \t]*=[^\n]*{re.escape(N)}", re.M)
_DOTENV_SPACED = re.compile(rf"^[ \t]*(?:export[ \t]+)?{re.escape(N)}[ \t]+=", re.M)


def detect(path: str, text: str) -> str:
    """The dialect ("sh", "systemd", "dotenv"; "fish", "PowerShell", "csh", "tcsh" are refused): from the
    name where it says, else the text."""
    name = os.path.basename(path).lower()
    ext = os.path.splitext(name)[1] or name
    if ext in _OTHER_SHELLS:
        return _OTHER_SHELLS[ext]
    if ext in _SYSTEMD_EXT:
        return "systemd"
    if ext in (".sh", ".bash", ".zsh", ".ksh") or name in _SH_NAMES:
        return "sh"
    if _SECTION.search(text) or _SD_HINT.search(text):
        return "systemd"
    if name in ("env", "environment", ".env") or name.endswith(".env") or name.startswith(".env."):
        return "dotenv"
    return "dotenv" if _DOTENV_SPACED.search(text) else "sh"


def planner(dialect: str) -> Callable[[str, str | None], Plan]:
    plans = {"sh": sh.plan, "systemd": systemd_plan, "dotenv": dotenv_plan}
    return plans.get(dialect) or functools.partial(refused, dialect)


def refused(dialect: str, text: str, value: str | None) -> Plan:
    """A shell fa-doctor does not read: every line that names the variable (any case: PowerShell's are not
    case-sensitive), or the whole file where none does (code it sources may still set it)."""
    out, why = Plan(), f"fa-doctor does not edit {dialect} files; remove or change it by hand"
    for m in re.finditer(re.escape(N), text, re.I):
        out.refuse(line_of(text, m.start()), f"names {N}: {why}")
    if not out.refusals:
        out.refuse(1, f"{why} (no line names {N}, but code the file runs may set it)")
    return out


# ---- dotenv: `KEY=value` entries whose values cannot run or expand anything; any other file is read as sh ----

_ENTRY = re.compile(r"[ \t]*(?:export[ \t]+)?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<eq>[ \t]*=[ \t]*)")
_VALUE = re.compile(r"""'[^']*'|"(?:[^"\\$`]|\\[^\n])*"|[^\s'"\\;&|<>()`$#][^\s'"\\;&|<>()`$]*|""")
_TAIL = re.compile(r"[ \t]*(?:#[^\n]*)?\r?(?:\n|\Z)")
# A line that a reader going line by line (docker --env-file) takes as setting the override.
_LINE_SETS = re.compile(rf"^[ \t]*(?:export[ \t]+)?{N}[ \t]*=", re.M)
# `KEY = value` runs KEY in a shell: only where KEY cannot assign or run code.
_SHELL_WORDS = sh.SETTERS | set(sh.DECLARE) | set(sh.REFUSED) | sh.CODE


def dotenv_plan(text: str, value: str | None) -> Plan:
    """Edits of the override's entries; a file where a line is not a blank, a comment or a plain entry is sh."""
    out, starts, i, n = Plan(), set(), 0, len(text)
    while i < n:
        j = text.find("\n", i)
        end = n if j < 0 else j
        body = text[i:end].strip(" \t\r")
        if not body or body.startswith("#"):
            i = end + 1
            continue
        m = _ENTRY.match(text, i, end)
        if m is None or (m["eq"] != "=" and m["key"] in _SHELL_WORDS):
            return sh.plan(text, value)
        raw = _VALUE.match(text, m.end())
        tail = _TAIL.match(text, raw.end()) if raw else None
        if raw is None or tail is None:
            return sh.plan(text, value)
        if m["key"] == N and "\n" in raw[0]:
            out.refuse(line_of(text, i), f"sets {N} to a value that spans lines")
        elif m["key"] == N:
            starts.add(i)
            out.changes.append(Change(*raw.span(), quoted_like(raw[0], value)) if value else Change(i, tail.end(), ""))
        i = tail.end()
    for m in _LINE_SETS.finditer(text):
        if m.start() not in starts:
            why = "inside a quoted value: docker's --env-file, which reads line by line, sets it"
            out.refuse(line_of(text, m.start()), f"{N}= stands at the start of a line {why}")
    if out.refusals:
        out.changes.clear()
    return out


# ---- systemd: `Environment=` entries, continued lines and their comments ---------------------------------------

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
            i += 1
        elif c in "\"'" and (not quote or quote == c):
            quote = "" if quote else c
        else:
            out.append(c)
        i += 1
    text = "".join(out)
    return text.split("=", 1)[0] if "=" in text else ""


def systemd_plan(text: str, value: str | None) -> Plan:
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
