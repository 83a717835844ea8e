"""fish: blocks (`if`/`function`/`begin`... `end`), `and`/`or`, quotes, `(...)` substitutions, continuations.

`set [-gxUlf] NAME VALUE...` is the only shape fish uses to set a variable in a file; it goes whole (or its values
are rewritten). A statement that `and`/`or` on the next line depends on, or one inside a block, becomes `true`.
"""

from __future__ import annotations

import re

from fa_doctor.fix.dialects.base import MENTION, Change, Command, N, Plan, Unsafe, Word, drop_statement, line_of
from fa_doctor.fix.dialects.base import quoted_like as _quoted_like

_WORD = re.compile(r"""(?:'[^'\\\n]*'|"[^"\\$(\n]*"|[^\s'"\\;&|<>()$#{}*?~])+""")
_SETS = set("gxUlfu")
_LONG_SETS = {"--global", "--export", "--universal", "--local", "--function", "--path", "--unpath", "--unexport"}
_NOT_ASSIGN = set("eqnSL")
_LONG_NOT_ASSIGN = {"--erase", "--query", "--names", "--show", "--long"}
_OPEN = {"begin", "if", "while", "for", "function", "switch"}
_STOP = " \t\n;&|<>)"
_SET_IN_TEXT = re.compile(rf"\bset\b[^\n;]*[ \t]{N}\b")  # `set -gx NAME 3` quoted inside another word
_CONTINUE = ("&&", "||", "|", "and", "or", "not", "!")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.t, self.n = text, len(text)
        self.commands: list[Command] = []

    def fail(self, at: int, why: str) -> Unsafe:
        return Unsafe(line_of(self.t, at), f"fa-doctor cannot read this file as fish ({why})")

    def parse_list(self, i: int, closer: str | None, nested: bool) -> int:
        t, n, start = self.t, self.n, i
        stack: list[str] = []
        cmd = Command([], nested, "")

        def end(op: str) -> None:
            nonlocal cmd
            if cmd.words:
                cmd.after = op
                self.commands.append(cmd)
            if not (op == "\n" and not cmd.words and cmd.prev in _CONTINUE):  # `a &&` + newline + `b`
                cmd = Command([], nested, op)

        while i < n:
            c = t[i]
            if c in " \t" or (c == "\r" and t.startswith("\n", i + 1)):
                i += 1
            elif c == "\\" and t.startswith("\n", i + 1):
                i += 2
            elif c == "#":
                j = t.find("\n", i)
                i = n if j < 0 else j
            elif c in "\n;":
                end(c)
                i += 1
            elif c in "&|" and t[i : i + 2] in ("&&", "||"):
                end(t[i : i + 2])
                i += 2
            elif c in "<>" or t.startswith("&>", i):
                cmd.redirect = True
                i += 1
                while i < n and t[i] in "<>&|?":
                    i += 1
            elif c in "&|":
                end(c)
                i += 1
            elif c == ")":
                if closer != ")":
                    raise self.fail(i, "a `)` without its `(`")
                end(")")
                return i + 1
            else:
                j = self.read_word(i)
                word = t[i:j]
                if not cmd.words and not cmd.header and word in (*_OPEN, "end", "else", "and", "or", "not", "!"):
                    if word in _OPEN:
                        stack.append(word)
                        if word not in ("if", "while", "begin"):
                            cmd.words.append(Word(i, j, word))
                            cmd.header = True
                    elif word == "end":
                        if not stack:
                            raise self.fail(i, "`end` without its opening")
                        stack.pop()
                    elif word == "else":
                        k = j
                        while k < n and t[k] in " \t":
                            k += 1
                        j = k + 2 if t.startswith("if", k) and t[k + 2 : k + 3] in ("", *_STOP) else j
                    else:
                        cmd.prev = word
                elif not cmd.words and word == "case" and stack and stack[-1] == "switch":
                    cmd.words.append(Word(i, j, word))
                    cmd.header = True
                else:
                    cmd.nested = cmd.nested or nested or bool(stack)
                    cmd.words.append(Word(i, j, word))
                i = j
        end("")
        if closer:
            raise self.fail(start, "a `(` that is never closed")
        if stack:
            raise self.fail(n, f"a `{stack[-1]}` without its `end`")
        return n

    def read_word(self, i: int) -> int:
        t, n = self.t, self.n
        while i < n:
            c = t[i]
            if c in _STOP or (c == "\r" and t.startswith("\n", i + 1)):
                break
            if c == "\\":
                i += 2
            elif c == "'":
                i = self.quote(i, "'")
            elif c == '"':
                i = self.quote(i, '"')
            elif c == "(" or t.startswith("$(", i):
                i = self.parse_list(i + (1 if c == "(" else 2), ")", True)
            else:
                i += 1
        return min(i, n)

    def quote(self, i: int, q: str) -> int:
        t, start = self.t, i
        i += 1
        while i < self.n:
            if t[i] == "\\":
                i += 2
            elif t[i] == q:
                return i + 1
            elif q == '"' and t.startswith("$(", i):
                i = self.parse_list(i + 2, ")", True)
            else:
                i += 1
        raise self.fail(start, f"a {q} quote that is never closed")


def _set_of_ours(text: str, cmd: Command) -> tuple[int, list[Word]] | None:
    """(index of the name, the values) when `cmd` is `set [options] NAME VALUE...` assigning the override."""
    words = cmd.words
    if cmd.header or words[0].text != "set":
        return None
    j = 1
    while j < len(words) and words[j].text.startswith("-") and words[j].text != "--":
        j += 1
    opts = [w.text for w in words[1:j]]
    j += 1 if j < len(words) and words[j].text == "--" else 0
    if j >= len(words) or words[j].text != N:
        return None
    shorts = {c for o in opts if not o.startswith("--") for c in o[1:]}
    longs = {o for o in opts if o.startswith("--")}
    if shorts & _NOT_ASSIGN or longs & _LONG_NOT_ASSIGN:
        return None  # `set -e NAME`, `set -q NAME`: not an assignment
    line = line_of(text, cmd.start)
    if not (shorts <= _SETS and longs <= _LONG_SETS):
        raise Unsafe(line, f"sets {N} with fish `set` options fa-doctor does not know")
    values = words[j + 1 :]
    if cmd.redirect or any(not _WORD.fullmatch(v.text) for v in values):
        raise Unsafe(line, f"sets {N} in a form fa-doctor does not rewrite safely")
    return j, values


def plan(text: str, value: str | None) -> Plan:
    scanner = _Scanner(text)
    scanner.parse_list(0, None, False)
    commands = sorted(scanner.commands, key=lambda c: c.start)
    out = Plan()
    for k, cmd in enumerate(commands):
        ours = _set_of_ours(text, cmd)
        if ours is None:
            for w in cmd.words:
                if m := MENTION.search(w.text) or _SET_IN_TEXT.search(w.text):
                    raise Unsafe(line_of(text, w.start + m.start()), f"sets {N} in a form fa-doctor does not rewrite")
            continue
        name, values = ours
        opts = [w.text for w in cmd.words[1:name]]
        if any(o == "--universal" or (o[1:2] != "-" and "U" in o) for o in opts):
            out.notes.append(f"A fish universal variable outlives config.fish: also run `set -eU {N}` once.")
        if value is not None:
            if values:
                out.changes.append(Change(values[0].start, values[-1].end, _quoted_like(values[0].text, value)))
            else:
                out.changes.append(Change(cmd.words[name].end, cmd.words[name].end, f" {value}"))
            continue
        after = [c for c in commands[k + 1 :] if c.start >= cmd.end]
        deletable = not (after and after[0].prev in ("and", "or"))  # `and` tests the status of what came before
        out.changes.append(drop_statement(text, cmd, "true", deletable))

    return out
