"""What every dialect shares: the plan it returns, where the name appears, the rules for dropping a statement or
a word, Unsafe."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from fa_doctor.probes.environment import OVERRIDE

N = OVERRIDE
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(N)}(?![A-Za-z0-9_])")
# After the name: what makes it an assignment (`=`, `+=`, `:=` in `${N:=3}`, zsh's `::=`, `N[0]=`).
_ASSIGNS = re.compile(r"[ \t]*(?:[+:]?:?=|\[)")
# What the shells drop before they read a name: a backslash-newline (anywhere), quotes, backslashes.
_BRACE_ASSIGNS = re.compile(r":{0,2}=")
_HIDING = re.compile(r"\\\r?\n|['\"\\]")


class Unsafe(Exception):
    """The file is left alone: `line` (1-based) and a reason a person can act on."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Change:
    start: int
    end: int
    new: str


@dataclass(slots=True)
class Plan:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refusals: dict[int, str] = field(default_factory=dict)  # line -> why it may set the override; then no edit

    def refuse(self, line: int, reason: str) -> None:
        self.refusals.setdefault(line, reason)


@dataclass(frozen=True, slots=True)
class Word:
    start: int
    end: int
    text: str


@dataclass(slots=True)
class Command:
    """One simple command: its words and what sits around it."""

    words: list[Word]
    nested: bool  # inside a compound statement, a block, a subshell or a substitution
    prev: str  # the operator before it: "" (start of file or line), ";", "&&", "||", "|", "!"...
    after: str = ""  # the operator after it: "\n", "" (end of file), ";", "&&"...
    redirect: bool = False
    header: bool = False  # words of `for x in ...`, `case ... in`, `function f`, `((...))`: never an assignment
    targets: list[Word] = field(default_factory=list)  # what its redirections name
    subshell: bool = False  # in `$(...)` or `( ... )`: it cannot change the variables of the shell that sources

    @property
    def start(self) -> int:
        return self.words[0].start

    @property
    def end(self) -> int:
        return self.words[-1].end


@dataclass(frozen=True, slots=True)
class Mention:
    """Where the name appears once quotes, backslashes and backslash-newlines are dropped: [start, end) in the
    original text; `assigns`: an assignment operator follows; `read`: it is `$N` or `${N...}`."""

    start: int
    end: int
    assigns: bool
    read: bool

    def why(self, text: str) -> str:
        """What hides the name, for a refusal's reason."""
        raw = text[self.start : self.end]
        if "\n" in raw:
            return f"the name {N} is split across lines by `\\`"
        if (
            raw != N
            or text[self.start - 1 : self.start] in ("'", '"', "\\")
            or text[self.end : self.end + 1] in ("'", '"')
        ):
            return f"the name {N} is quoted or escaped"
        return f"a `${{{N}:=...}}` expansion assigns it" if self.read else ""


def mentions(text: str) -> Iterator[Mention]:
    """Every place the name appears as a shell would read it (`SGLANG_"FLASH"...`, `...FLASH\\<newline>ATT...`)."""
    keep: list[int] = []  # offsets in `text` of the characters kept
    at = 0
    for m in _HIDING.finditer(text):
        keep += range(at, m.start())
        at = m.end()
    keep += range(at, len(text))
    flat = "".join(text[i] for i in keep)
    for m in _NAME.finditer(flat):
        start, end = keep[m.start()], keep[m.end() - 1] + 1
        dollar = text[start - 1 : start] == "$" and text[start - 2 : start - 1] != "\\"
        braced = text[max(0, start - 3) : start] in ("${#", "${!") or text[max(0, start - 2) : start] == "${"
        if dollar or braced:  # `$N = 3` in a test compares; only `${N=3}`, `${N:=3}`, `${N::=3}` assign
            yield Mention(start, end, braced and bool(_BRACE_ASSIGNS.match(flat, m.end())), True)
        else:
            yield Mention(start, end, bool(_ASSIGNS.match(flat, m.end())), False)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def quoted_like(old: str | None, value: str) -> str:
    return f"{old[0]}{value}{old[0]}" if old and old[0] in "\"'" and old[-1] == old[0] else value


def remove_words(text: str, words: Sequence[Word], drop: Sequence[int]) -> list[Change]:
    """Remove some (not all) words: each with the gap before it, or with the gap after it where that one holds
    the line break (`A=1 NAME=3 \\` + `B=2`) or the word comes first; no `\\` is left dangling."""
    spans: list[tuple[int, int]] = []
    for i in sorted(drop):
        before = "\n" in text[words[i - 1].end : words[i].start] if i else True
        after = i + 1 < len(words) and "\n" in text[words[i].end : words[i + 1].start]
        if i and (before or not after):
            spans.append((words[i - 1].end, words[i].end))
        else:
            spans.append((words[i].start, words[i + 1].start))
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [Change(lo, hi, "") for lo, hi in merged]


def drop_statement(text: str, cmd: Command, neutral: str) -> Change:
    """The whole statement goes: its lines where it stands alone at the top level (only blanks before it on its
    first line, only blanks or a comment after it on its last), else a neutral statement."""
    if not cmd.nested and cmd.prev in ("", "\n") and cmd.after in ("", "\n"):
        lo = text.rfind("\n", 0, cmd.start) + 1
        nl = text.find("\n", cmd.end)
        rest = text[cmd.end : len(text) if nl < 0 else nl].rstrip("\r").strip(" \t")
        if not text[lo : cmd.start].strip(" \t") and (not rest or rest.startswith("#")):
            return Change(lo, len(text) if nl < 0 else nl + 1, "")
    return Change(cmd.start, cmd.end, neutral)


def apply(text: str, changes: Sequence[Change]) -> str:
    out, at = [], 0
    for c in sorted(changes, key=lambda c: c.start):
        if c.start < at:
            raise ValueError("overlapping edits")  # a dialect bug; edit() reports it as a refusal
        out += [text[at : c.start], c.new]
        at = c.end
    return "".join([*out, text[at:]])
