"""What every dialect shares: the plan it returns, the rules for dropping a statement or a word, Unsafe."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from fa_doctor.probes.environment import OVERRIDE

N = OVERRIDE
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Something that looks like it assigns the variable (`NAME=`, `NAME = `), not `$NAME` or `OTHER_NAME=`.
MENTION = re.compile(rf"(?<![\w$]){re.escape(N)}[ \t]*\+?=")


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
    prev: str  # the operator before it: "" (start of file or line), ";", "&&", "||", "|", "!", "and", "or"...
    after: str = ""  # the operator after it: "\n", "" (end of file), ";", "&&"...
    redirect: bool = False
    header: bool = False  # words of `for x in ...`, `case ... in`, `function f`: never an assignment

    @property
    def start(self) -> int:
        return self.words[0].start

    @property
    def end(self) -> int:
        return self.words[-1].end


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def quoted_like(old: str | None, value: str) -> str:
    return f"{old[0]}{value}{old[0]}" if old and old[0] in "\"'" and old[-1] == old[0] else value


def alone(text: str, start: int, end: int, comment: str = "#") -> tuple[int, int] | None:
    """The span of whole physical lines [line start, after the newline) when only blanks stand before `start`
    on its line and only blanks or a comment after `end` on its line; else None."""
    lo = text.rfind("\n", 0, start) + 1
    if text[lo:start].strip(" \t"):
        return None
    nl = text.find("\n", end)
    hi = len(text) if nl < 0 else nl + 1
    rest = text[end : hi if nl < 0 else nl].rstrip("\r").strip(" \t")
    if rest and not (comment and rest.startswith(comment)):
        return None
    return lo, hi


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


def drop_statement(text: str, cmd: Command, neutral: str, deletable: bool, comment: str = "#") -> Change:
    """The whole statement goes: its lines where it stands alone at the top level, else a neutral statement."""
    if deletable and not cmd.nested and cmd.prev in ("", "\n") and cmd.after in ("", "\n"):
        span = alone(text, cmd.start, cmd.end, comment)
        if span:
            return Change(span[0], span[1], "")
    return Change(cmd.start, cmd.end, neutral)


def apply(text: str, changes: Sequence[Change]) -> str:
    out, at = [], 0
    for c in sorted(changes, key=lambda c: c.start):
        if c.start < at:
            raise ValueError("overlapping edits")  # a dialect bug; edit() reports it as a refusal
        out += [text[at : c.start], c.new]
        at = c.end
    return "".join([*out, text[at:]])
