"""Structure-aware edits of the override in env files: sh (bash, zsh), dotenv and systemd; fish, PowerShell and csh
files are refused. Each dialect returns a Plan: spans to replace, or the lines that may set the override otherwise
(then nothing is edited). For sh, `Scanner` tokenizes and `_Prover` decides; the rules: docs/fix.md."""

from __future__ import annotations

import os
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
    """The file is left alone; its args: the line (1-based) and a reason a person can act on."""


@dataclass(frozen=True, slots=True)
class Change:
    start: int
    end: int
    new: str


@dataclass(slots=True)
class Plan:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refusals: dict[int, str] = field(default_factory=dict)  # line -> why it may set the override; then no edit at all

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
        quoted = text[self.start - 1 : self.start] in ("'", '"', "\\") or text[self.end : self.end + 1] in ("'", '"')
        if raw != N or quoted:
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


# ---- which dialect: from the name where it says, else the text ----------------------------------------------

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


def plan(dialect: str, text: str, value: str | None) -> Plan:
    """The edits of `text` in `dialect`. A shell fa-doctor does not read is refused: every line that names the
    variable (any case: PowerShell's are not case-sensitive), or the whole file where none does (code it sources
    may still set it)."""
    plans = {"sh": sh_plan, "systemd": systemd_plan, "dotenv": dotenv_plan}
    if dialect in plans:
        return plans[dialect](text, value)
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
            return sh_plan(text, value)
        raw = _VALUE.match(text, m.end())
        if not (raw and (tail := _TAIL.match(text, raw.end()))):
            return sh_plan(text, value)
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


def logical_lines(text: str) -> Iterator[tuple[int, int, int]]:
    """(start, end of content, start of the next logical line) of each entry, continuations joined."""
    i = 0
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
        yield start, end, nxt
        i = nxt


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
            out.refuse(*e.args)
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
    if out.changes and not out.refusals:
        out.notes.insert(0, RELOAD)
    return out


# ---- sh: reading the text -----------------------------------------------------------------------------------

# A value with nothing that expands or runs: quotes without `$` or backticks inside "...", no operators.
STATIC = re.compile(r"""(?:'[^'\n]*'|"(?:[^"\\$`\n]|\\[^\n])*"|\\[^\n]|[^\s'"\\;&|<>()`$#])+""")
ASSIGN = re.compile(rf"(?P<name>{IDENT})(?P<op>\+?=)(?P<val>.*)\Z", re.S)
_ARRAY = re.compile(rf"{IDENT}(?:\[[^]]*\])?\+?=\Z")
_CLOSE = {"fi": ("if",), "done": ("while", "until", "for"), "esac": ("case",), "}": ("{",)}
_OPEN = {"if": "if", "while": "while", "until": "until", "{": "{", "for": "for", "select": "for", "case": "case"}
_KEYWORDS = {"if", "while", "until", "{", "for", "select", "case", "then", "do", "else", "elif", "!", "time"}
_KEYWORDS |= {"function", "[[", *_CLOSE}
_DELIM = " \t\n;&|<>()"
_OPENED = {'"': "a double quote", "`": "a backtick", "}": "a `${`"}
_REDIRECT = re.compile(r"&>>|&>|<<<|<<-|<<|<>|<&|>&|>>|>\||<|>")


class Scanner:
    def __init__(self, text: str) -> None:
        self.t, self.n = text, len(text)
        self.commands: list[Command] = []
        self.heredocs: list[tuple[int, int]] = []
        self.comments: list[tuple[int, int]] = []
        self.ends: dict[int, int] = {}
        self.pending: list[tuple[str, bool, int]] = []

    def fail(self, at: int, why: str) -> Unsafe:
        return Unsafe(line_of(self.t, at), f"fa-doctor cannot read this file as a shell script ({why})")

    def parse_list(self, i: int, closer: str | None, nested: bool) -> int:
        t, n, start = self.t, self.n, i
        stack: list[list[str]] = []  # [kind, mode]; a case is in mode "hdr", "pat" or "list"
        cmd = Command([], nested, "")

        def end(op: str) -> None:
            nonlocal cmd
            if cmd.words:
                cmd.after = op
                cmd.subshell = closer == ")" or any(kind == "(" for kind, _ in stack)
                self.commands.append(cmd)
            if not (op == "\n" and not cmd.words and cmd.prev in ("&&", "||", "|", "!")):  # `a &&` + newline + `b`
                cmd = Command([], nested, op)

        while i < n:
            c = t[i]
            if c in " \t" or (c == "\r" and t.startswith("\n", i + 1)):
                i += 1
            elif c == "\\" and t.startswith("\n", i + 1):
                i += 2
            elif c == "#":
                j = t.find("\n", i)
                self.comments.append((i, n if j < 0 else j))
                i = n if j < 0 else j
            elif c == "\n":
                end("\n")
                i = self.read_heredocs(i + 1)
            elif stack and stack[-1] == ["case", "pat"] and not cmd.words:
                j = self.read_word(i)
                if t[i:j] == "esac":
                    stack.pop()
                    i = j
                else:
                    i = self.read_pattern(i)
                    stack[-1][1] = "list"
            elif c == ";":
                op = ";;&" if t.startswith(";;&", i) else ";;" if t.startswith(";;", i) else ";&"
                if t.startswith(op, i):
                    if not stack or stack[-1][0] != "case":
                        raise self.fail(i, f"`{op}` outside a case")
                    stack[-1][1] = "pat"
                end(";")
                i += len(op) if t.startswith(op, i) else 1
            elif c in "&|":
                two = t[i : i + 2]
                if two == "&>":
                    i = self.redirect(i, cmd)
                    continue
                op = two if two in ("&&", "||", "|&") else c
                end("|" if op == "|&" else op)
                i += len(op)
            elif c in "<>":
                i = self.redirect(i, cmd)
            elif c == "(":
                if not cmd.words and t.startswith("((", i):
                    j = self.skip_arith(i + 2)
                    cmd.words.append(Word(i, j, t[i:j]))
                    cmd.header, i = True, j
                elif not cmd.words:
                    stack.append(["(", ""])
                    cmd.nested, i = True, i + 1
                elif len(cmd.words) == 1 and t[i + 1 :].lstrip(" \t").startswith(")"):
                    cmd.header, i = True, t.index(")", i) + 1  # `name()`: a function; a compound body follows
                    end("")
                else:
                    raise self.fail(i, "a `(` in an unexpected place")
            elif c == ")":
                if stack and stack[-1][0] == "(":
                    end(")")
                    stack.pop()
                    i += 1
                elif closer == ")" and not stack:
                    end(")")
                    return i + 1
                else:
                    raise self.fail(i, "a `)` without its `(`")
            else:
                j = self.read_word(i)
                if j == i:
                    raise self.fail(i, f"an unexpected {c!r}")
                word = t[i:j]
                if cmd.header and stack and stack[-1] == ["case", "hdr"] and word == "in":
                    end("")
                    stack[-1][1] = "pat"
                elif not cmd.words and not cmd.header and self.keyword(word, stack, i, cmd):
                    if word == "function":
                        cmd.words.append(Word(i, j, word))
                        j = self.read_word(self.skip_blanks(j))  # the name; `()` and the body follow
                        end("")
                    elif word == "[[":
                        j = self.skip_dbracket(j)
                        cmd.words.append(Word(i, j, t[i:j]))
                    elif word in ("for", "select", "case"):
                        cmd.words.append(Word(i, j, word))
                        cmd.header = True
                else:
                    cmd.nested = cmd.nested or nested or bool(stack)
                    cmd.words.append(Word(i, j, word))
                i = j
        end("")
        if closer:
            raise self.fail(start, "a `$(` that is never closed")
        if stack:
            raise self.fail(n, f"a `{stack[-1][0]}` that is never closed")
        if self.pending:
            raise self.fail(n, f"a here-document without its `{self.pending[0][0]}` line")
        return n

    def keyword(self, word: str, stack: list[list[str]], at: int, cmd: Command) -> bool:
        """Reserved words at the start of a command: move the nesting; True when `word` was one."""
        if word in _OPEN:
            stack.append([_OPEN[word], "hdr" if word == "case" else ""])
        elif word in _CLOSE:
            if not stack or stack[-1][0] not in _CLOSE[word]:
                raise self.fail(at, f"`{word}` without its opening")
            stack.pop()
        elif word in ("!", "time"):
            cmd.prev = "!"
        return word in _KEYWORDS

    def skip_blanks(self, i: int) -> int:
        while i < self.n and self.t[i] in " \t":
            i += 1
        return i

    def read_word(self, i: int) -> int:
        t, n, start = self.t, self.n, i
        while i < n:
            c = t[i]
            if c in _DELIM or (c == "\r" and t.startswith("\n", i + 1)):
                if c == "(" and i > start and (t[i - 1] in "@!+?*" or _ARRAY.match(t, start, i)):
                    i = self.skip_parens(i)  # extglob, zsh glob qualifiers, arrays
                    continue
                break
            if c == "\\":
                i += 2
            elif c == "'":
                j = t.find("'", i + 1)
                if j < 0:
                    raise self.fail(i, "a single quote that is never closed")
                i = j + 1
            elif c in '"`':
                i = self.skip(i + 1, c)
            elif c == "$":
                i = self.dollar(i)
            else:
                i += 1
        return min(i, n)

    def dollar(self, i: int) -> int:
        """The end of the expansion at `i`; parsed once (the prover asks again while it reads words)."""
        if i in self.ends:
            return self.ends[i]
        t, j = self.t, i + 1
        if t.startswith("$'", i):
            j = i + 2
            while j < self.n and t[j] != "'":
                j += 2 if t[j] == "\\" else 1
            if j >= self.n:
                raise self.fail(i, "a $'...' quote that is never closed")
            j += 1
        elif t.startswith("$(", i):
            j = self.skip_arith(i + 3) if t.startswith("((", i + 1) else self.parse_list(i + 2, ")", True)
        elif t.startswith("${", i):
            j = self.skip(i + 2, "}")
        self.ends[i] = j
        return j

    def skip(self, i: int, close: str) -> int:
        """The end of a `"..."`, a backtick string or a `${...}` (`close`: `"`, a backtick, `}`) whose body starts at
        `i`; a backtick string ends at the first unescaped backtick."""
        t, start = self.t, i - (2 if close == "}" else 1)
        while i < self.n:
            c = t[i]
            if c == close:
                return i + 1
            if c == "\\":
                i += 2
            elif c == "$" and close != "`":
                i = self.dollar(i)
            elif c == "`" and close == '"':
                i = self.skip(i + 1, "`")
            elif c == '"' and close == "}":
                i = self.skip(i + 1, '"')
            elif c == "'" and close == "}":
                j = t.find("'", i + 1)
                i = self.n if j < 0 else j + 1
            else:
                i += 1
        raise self.fail(start, f"{_OPENED[close]} that is never closed")

    def skip_arith(self, i: int) -> int:
        t, start, depth = self.t, i, 0
        while i < self.n:
            if t[i] == "(":
                depth += 1
            elif t[i] == ")":
                if not depth and t.startswith("))", i):
                    return i + 2
                depth -= 1
                if depth < 0:
                    break
            i += 1
        raise self.fail(start, "a `((` that is never closed")

    def skip_parens(self, i: int) -> int:
        t, start, depth = self.t, i, 0
        while i < self.n:
            c = t[i]
            if c == "\\":
                i += 2
            elif c in "'\"`$":
                i = self.read_word(i) if c != "$" else self.dollar(i)
            else:
                depth += {"(": 1, ")": -1}.get(c, 0)
                i += 1
                if not depth:
                    return i
        raise self.fail(start, "a `(` that is never closed")

    def skip_dbracket(self, i: int) -> int:
        t, start = self.t, i
        while i < self.n:
            if t.startswith("]]", i) and (i + 2 >= self.n or t[i + 2] in " \t\r\n;&|)"):
                return i + 2
            c = t[i]
            if c in "'\"`$":
                i = self.read_word(i) if c != "$" else self.dollar(i)
            else:
                i += 2 if c == "\\" else 1
        raise self.fail(start, "a `[[` that is never closed")

    def read_pattern(self, i: int) -> int:
        t = self.t
        i = i + 1 if t[i] == "(" else i
        while i < self.n:
            i = self.skip_blanks(i)
            if t.startswith(")", i):
                return i + 1
            if t.startswith("|", i):
                i += 1
            elif (j := self.read_word(i)) > i:
                i = j
            else:
                break
        raise self.fail(i, "a case pattern without its `)`")

    def redirect(self, i: int, cmd: Command) -> int:
        t = self.t
        if t[i] in "<>" and t.startswith("(", i + 1):  # process substitution: a word, not a redirection
            j = self.parse_list(i + 2, ")", True)
            cmd.words.append(Word(i, j, t[i:j]))
            return j
        m = _REDIRECT.match(t, i)
        assert m is not None
        if cmd.words and cmd.words[-1].end == i and cmd.words[-1].text.isdigit():
            cmd.words.pop()  # `2>`: the descriptor, not an argument
        cmd.redirect = True
        j = self.skip_blanks(m.end())
        k = self.read_word(j)
        if k == j:
            raise self.fail(i, "a redirection without its target")
        cmd.targets.append(Word(j, k, t[j:k]))
        if m[0] in ("<<", "<<-"):
            self.pending.append((re.sub(r"""['"\\]""", "", t[j:k]), m[0] == "<<-", i))
        return k

    def read_heredocs(self, i: int) -> int:
        for delim, strip, at in self.pending:
            body = i
            while True:
                j = self.t.find("\n", i)
                line = self.t[i : self.n if j < 0 else j].rstrip("\r")
                if (line.lstrip("\t") if strip else line) == delim:
                    self.heredocs.append((body, i))
                    i = self.n if j < 0 else j + 1
                    break
                if j < 0:
                    raise self.fail(at, f"a here-document without its `{delim}` line")
                i = j + 1
        self.pending.clear()
        return i


# ---- what a command can do to the shell's variables ---------------------------------------------------------

DYN = "\0"  # stands for an expansion in unquote(): text fa-doctor cannot know
# Builtins that assign the variables their arguments name (bash, zsh, ksh; csh's setenv, fish's set).
SETTERS = {"read", "getopts", "mapfile", "readarray", "wait", "set", "vared", "zparseopts", "zstyle", "getln"}
SETTERS |= {"zformat", "strftime", "compgen", "setenv", "print", "printf"}
# Declarations: the options that only export, protect or print (others make references, integers, arrays).
DECLARE = {"export": "fnp", "readonly": "fp", "declare": "xgrpfFltu", "typeset": "xgrpfFltu", "local": "xgrpfFltu"}
_EDITABLE = {"export": "", "readonly": "", "declare": "xgr", "typeset": "xgr", "local": "xgr"}
REFUSED = dict.fromkeys(("source", "."), "runs another file, which may set it: check that file with --env-file too")
REFUSED |= dict.fromkeys(("integer", "float"), "makes arithmetic variables, whose assignments can set any variable")
REFUSED |= {"enable": "loads a builtin from a shared library", "fc": "runs commands again from the history"}
REFUSED |= {"coproc": "sets the variable it names", "sched": "runs code later", "zmodload": "loads a module"}
REFUSED |= {"let": "assigns through arithmetic, which can set any variable"}
REFUSED |= {"nameref": "makes a reference, whose assignments set another variable"}
CODE = {"eval", "trap", "alias"}  # their arguments are code: read when written out, refused when computed
# dotenv's `KEY = value` runs KEY in a shell: read as dotenv only where KEY cannot assign or run code.
_SHELL_WORDS = SETTERS | set(DECLARE) | set(REFUSED) | CODE
_WRAPPERS = {"builtin", "command", "exec", "noglob", "nocorrect", "-", "time"}
_BENIGN = {"unset", "echo", "printf", "print", "test", "[", *DECLARE}  # where naming the variable is harmless
_PROMPTS = {"PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT", "PROMPT2", "RPROMPT", "RPS1", "RPROMPT2"}
_SINGLE_QUOTED = re.compile(r"""\\.|"(?:\\.|[^"\\])*"|'[^']*'""", re.S)
_ARITH_EXP = re.compile(r"\$\(\(|\$\[")
_BRACED = re.compile(r"\$\{")
_ZSH_INDEX = re.compile(r"\$\w+(\[[^]]*\])")  # zsh: `$a[i]` is a subscript
_ARITH_VAR = re.compile(r"[A-Za-z_$`]")
_ARITH_TARGET = re.compile(rf"{IDENT}[ \t]*=(?!=)")
_ARITH_TEST = re.compile(r"\s-(?:eq|ne|lt|le|gt|ge)\s")
_SIMPLE_DOLLAR = re.compile(r"\w+|[@*#?$!0-9-]")
_SUBSCRIPT = re.compile(r"\[([^]]*)\]")
_PLAIN_INDEX = re.compile(r"[@*]|-?[0-9]*")
_PARAM = re.compile(r"[#!]?(?:\w+|[@*#?$!-])(?P<sub>\[[^]]*\])?(?P<off>:[^-=+?][^}]*)?")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


class _Prover:
    """Walks every command the scanner found (function bodies, branches and substitutions included) and collects
    the edits of plain assignments and the lines that may set the override otherwise."""

    def __init__(self, text: str, value: str | None, depth: int) -> None:
        self.t, self.value, self.depth = text, value, depth
        self.sc = Scanner(text)
        self.out = Plan()
        self.ours: list[tuple[int, int]] = []  # assignments fa-doctor edits
        self.benign: list[tuple[int, int]] = []  # words where the name is harmless (`unset N`, `echo N`)
        self.context: list[tuple[int, int, str]] = []  # every argument and the command it belongs to

    def refuse(self, at: int, reason: str) -> None:
        self.out.refuse(line_of(self.t, at), reason)

    def unquote(self, w: Word) -> str:
        """The word as the shell passes it on, DYN where it expands or globs (so cannot be known)."""
        t, i, out = self.t, w.start, []
        while i < w.end:
            c = t[i]
            if c == "\\":
                out.append("" if t.startswith("\n", i + 1) else t[i + 1 : i + 2])
                i += 2
            elif c == "'":
                j = t.index("'", i + 1)
                out.append(t[i + 1 : j])
                i = j + 1
            elif c == '"':
                j = self.sc.skip(i + 1, '"')
                inner = t[i + 1 : j - 1]
                out.append(DYN if "$" in inner or "`" in inner else re.sub(r'\\([\\"\n])', r"\1", inner))
                i = j
            elif c == "$":
                j = self.sc.dollar(i)
                if j == i + 1 and (m := _SIMPLE_DOLLAR.match(t, j, w.end)):
                    j = m.end()
                out.append(DYN if j > i + 1 else "$")
                i = j
            elif c == "`":
                out.append(DYN)
                i = self.sc.skip(i + 1, "`")
            else:
                out.append(DYN if c in "*?[{" else c)
                i += 1
        return "".join(out)

    def expansions(self, w: Word) -> None:
        """Arithmetic and indirect assignments in a word; in single quotes too where the word sets a prompt,
        which the shell expands later (the code of aliases, traps and eval is read as code)."""
        t = w.text
        if "$" not in t and "[" not in t:
            return
        if not ((a := ASSIGN.match(t)) and a["name"] in _PROMPTS):
            t = _SINGLE_QUOTED.sub(lambda q: q[0] if q[0][0] != "'" else " " * len(q[0]), t)
        for m in _ARITH_EXP.finditer(t):
            at = w.start + m.start()
            if m[0] == "$((":
                self.arith(at, self.t[at + 3 : self.sc.skip_arith(at + 3) - 2])
            else:  # `$[...]`, the old form
                self.arith(at, self.t[at + 2 : self.t.find("]", at) % (len(self.t) + 1)])
        for m in _BRACED.finditer(t):
            at = w.start + m.start()
            body = self.t[at + 2 : self.sc.skip(at + 2, "}") - 1]
            if body[:1] in "!(" and "=" in body:
                self.refuse(at, f"`${{{_clip(body)}}}` assigns a variable whose name fa-doctor cannot read")
            elif p := _PARAM.match(body):
                index = p["sub"] and not _PLAIN_INDEX.fullmatch(p["sub"][1:-1])
                self.arith(at, (p["sub"] if index else "") + (p["off"] or ""))
        for m in _ZSH_INDEX.finditer(t):
            self.arith(w.start + m.start(), "" if _PLAIN_INDEX.fullmatch(m[1][1:-1]) else m[1])
        if (a := ASSIGN.match(t)) and a["val"].startswith("("):  # a=([i]=x): the index is arithmetic
            for s in _SUBSCRIPT.finditer(a["val"]):
                self.arith(w.start, "" if _PLAIN_INDEX.fullmatch(s[1]) else s[1])
        if t.startswith("[[") and _ARITH_TEST.search(t):
            self.arith(w.start, re.sub(r"-(?:eq|ne|lt|le|gt|ge)\b|-\w\b|\[\[|\]\]", "", t))

    def arith(self, at: int, expr: str) -> None:
        """Arithmetic reads a variable's value as an expression (x='N=3'; ((x)) sets N); `i = 0` is harmless."""
        if _ARITH_VAR.search(_ARITH_TARGET.sub("", expr)):
            self.refuse(at, f"arithmetic on variables (`{_clip(expr)}`) can assign any variable, {N} too")

    def code(self, at: int, what: str, code: str) -> None:
        """Code a command runs (`eval '...'`, an alias, a trap): read like the file; refused when computed."""
        if DYN in code:
            self.refuse(at, f"{what} runs code fa-doctor cannot read, which may set {N}")
            return
        inner = sh_plan(code, None, self.depth + 1) if self.depth < 2 else None
        if inner is None or inner.refusals or inner.changes:
            why = next(iter(inner.refusals.values()), f"it sets {N}") if inner else "it nests code too deeply"
            self.refuse(at, f"{what} runs `{_clip(code)}`, where {why}")

    def check(self, cmd: Command) -> None:
        words = cmd.words
        for w in (*words, *cmd.targets):
            self.expansions(w)
        if cmd.header:
            if words[0].text.startswith("(("):
                self.arith(words[0].start, words[0].text[2:-2])
            self.context += [(w.start, w.end, self.t[words[0].start : words[0].end]) for w in words[1:]]
            return
        k = 0
        while k < len(words) and (a := ASSIGN.match(words[k].text)):
            if a["name"] == "PROMPT_COMMAND":
                value = Word(words[k].end - len(a["val"]), words[k].end, a["val"])
                self.code(words[k].start, "PROMPT_COMMAND", self.unquote(value))
            k += 1
        ours = [j for j in range(k) if words[j].text.startswith(N + "=") or words[j].text.startswith(N + "+=")]
        if k == len(words):
            self.assign(cmd, ours, len(ours) == k)
            return
        if ours:
            self.refuse(cmd.start, f"sets {N} only for the command {_clip(words[k].text)!r}")
        name = self.name(words[k])
        while name in _WRAPPERS and k + 1 < len(words):
            k += 1
            while k + 1 < len(words) and words[k].text.startswith("-"):
                k += 1
            name = self.name(words[k])
        args = words[k + 1 :]
        self.context += [(w.start, w.end, name) for w in args]
        if DYN in name:
            self.refuse(words[k].start, f"runs a command whose name fa-doctor cannot read ({_clip(words[k].text)})")
        elif name in REFUSED:
            self.refuse(words[k].start, f"`{_clip(self.t[words[k].start : cmd.end])}` {REFUSED[name]}")
        elif name in CODE:
            self.code_args(name, words[k].start, args)
        elif name in DECLARE:
            self.declare(cmd, k, name)
        elif name in SETTERS and (name not in ("print", "printf") or self.sets_v(args)):
            if any(DYN in self.unquote(w) for w in args):
                self.refuse(words[k].start, f"`{name}` assigns a variable whose name fa-doctor cannot read")
        elif name in _BENIGN or name == "[[":
            self.benign += [(w.start, w.end) for w in words[k:] if self.t[w.end : w.end + 1] not in ("<", ">")]

    def name(self, w: Word) -> str:
        return "[[" if w.text.startswith("[[") else w.text if w.text == "[" else self.unquote(w)

    def sets_v(self, args: list[Word]) -> bool:
        """Whether `printf`/`print` gets `-v NAME` (its leading options; one fa-doctor cannot read may be it)."""
        for u in map(self.unquote, args):
            if DYN in u or (u.startswith("-") and u != "--" and "v" in u):
                return True
            if not u.startswith("-") or u == "--":
                return False
        return False

    def code_args(self, name: str, at: int, args: list[Word]) -> None:
        words = [self.unquote(w) for w in args]
        while words and words[0].startswith("-") and words[0] not in ("-", "--") and name != "eval":
            words.pop(0)
        if name == "eval" and words:
            self.code(at, "`eval`", " ".join(words))
        elif name == "trap" and len(words) > 1 and words[0] not in ("", "-"):
            self.code(at, "`trap`", words[0])
        elif name == "alias":
            for w in words:
                if "=" in w or DYN in w:
                    self.code(at, f"the alias `{_clip(w.split('=', 1)[0])}`", w.split("=", 1)[-1])

    def declare(self, cmd: Command, k: int, name: str) -> None:
        words, ours, names = cmd.words, [], []
        editable = self.t[words[k].start : words[k].end] == name
        for j in range(k + 1, len(words)):
            u = self.unquote(words[j])
            if u[:1] in "-+" and u not in ("-", "+"):
                if not re.fullmatch(rf"[-+][{DECLARE[name]}]+", u):
                    self.refuse(words[j].start, f"`{name} {_clip(u)}` may set a variable fa-doctor cannot follow")
                    return
                editable = editable and bool(re.fullmatch(rf"-[{_EDITABLE[name]}]+", u))
                continue
            var = u.split("=", 1)[0]
            if not re.fullmatch(IDENT, var):
                self.refuse(words[j].start, f"`{name}` sets a variable whose name fa-doctor cannot read")
                return
            names.append(j)
            if var == "PROMPT_COMMAND" and "=" in u:
                self.code(words[j].start, "PROMPT_COMMAND", u.split("=", 1)[1])
            if var == N and "=" not in u and self.t[words[j].end : words[j].end + 1] not in ("<", ">"):
                self.benign.append((words[j].start, words[j].end))  # `export N`: declares, sets nothing
            elif var == N and editable and (a := ASSIGN.match(words[j].text)) and a["name"] == N:
                ours.append(j)
        self.assign(cmd, ours, set(ours) == set(names))

    def assign(self, cmd: Command, ours: list[int], whole: bool) -> None:
        """The edits of the override's plain assignments in one statement (or the reason there is none)."""
        if not ours:
            return
        words, line = cmd.words, cmd.start
        if cmd.redirect:
            self.refuse(line, f"sets {N} on a command with a redirection")
            return
        for k in ours:
            a = ASSIGN.match(words[k].text)
            assert a is not None
            if a["op"] != "=" or (a["val"] and not STATIC.fullmatch(a["val"])):
                self.refuse(line, f"sets {N} in a form fa-doctor does not rewrite ({_clip(a[0])!r})")
                return
        if self.value is None and not whole and any("\n" in w.text for w in words):
            self.refuse(line, f"sets {N} in a statement with a value that spans lines")
            return
        self.ours += [(words[k].start, words[k].end) for k in ours]
        if self.value is not None:
            at = len(N) + 1
            for w in (words[k] for k in ours):
                self.out.changes.append(Change(w.start + at, w.end, quoted_like(w.text[at:], self.value)))
        elif whole:
            self.out.changes.append(drop_statement(self.t, cmd, ":"))
        else:
            self.out.changes += remove_words(self.t, words, ours)

    def check_mentions(self) -> None:
        """Every other place the name appears must be harmless: a comment, a read (`$N`), here-document text,
        or an argument of `unset`, `echo`, `test`... or a bare `export N`."""
        t, sc = self.t, self.sc
        for m in mentions(t):
            where = next(((a, b) for a, b in sc.heredocs if a <= m.start < b), None)
            if any(a <= m.start < b for a, b in (*self.ours, *sc.comments)):
                continue
            if not m.assigns and (m.read or where or any(a <= m.start and m.end <= b for a, b in self.benign)):
                continue
            if where:
                lines = f"lines {line_of(t, where[0])}-{line_of(t, where[1] - 1)}"
                self.refuse(m.start, f"{N} is set inside a here-document ({lines}), text a command reads")
                continue
            by = [f"`{_clip(c)}` may set {N} (it names it)" for a, b, c in self.context if a <= m.start < b]
            self.refuse(m.start, m.why(t) or (by[-1] if by else f"sets {N} in a form fa-doctor does not rewrite"))


def sh_plan(text: str, value: str | None, depth: int = 0) -> Plan:
    """The edits, or (in `refusals`) every line that may set the override in a form fa-doctor does not edit."""
    p = _Prover(text, value, depth)
    try:
        p.sc.parse_list(0, None, False)
        for cmd in list(p.sc.commands):
            kept = p.out.refusals  # in `$(...)` or `( ... )` nothing reaches this shell's variables: only edits count
            if cmd.subshell:
                p.out.refusals = {}  # (the name itself is still checked, by check_mentions)
            p.check(cmd)
            p.out.refusals = kept
    except Unsafe as e:
        p.out.refuse(*e.args)
    else:
        p.check_mentions()
    return p.out
