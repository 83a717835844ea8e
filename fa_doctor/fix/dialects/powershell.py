"""PowerShell profiles: statements, `{}` blocks, strings (here-strings too), comments, backtick continuations.

Shapes that set the override: `$env:NAME = 'v'`, `${env:NAME} = "v"`, `Set-Item`/`New-Item`/`Set-Content` on
`Env:NAME`, `[Environment]::SetEnvironmentVariable('NAME', 'v'[, 'Process'])`. The statement goes whole; inside a
block, or where it is not alone on its line, it becomes `$null = $null`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fa_doctor.fix.dialects.base import Change, Command, N, Plan, Unsafe, Word, drop_statement, line_of, quoted_like

# A literal: quoted text without expansion, or a number (a bare word would run a command: `= Get-Pin`).
_VAL = r"""'(?:[^'\n]|'')*'|"[^"`$\n]*"|[0-9]+(?:\.[0-9]+)?"""
_ENV = rf"(?:\$(?i:env):{N}|\$\{{(?i:env):{N}\}})"
_ASSIGN = re.compile(rf"{_ENV}[ \t]*=[ \t]*(?P<val>{_VAL})")
_CMDLET = re.compile(r"(?i:set-item|new-item|set-content|si|ni|sc)(?P<args>(?:[ \t]+\S+)+)")
_ARG = re.compile(r"""'(?:[^'\n]|'')*'|"[^"\n]*"|\S+""")
_PATH = re.compile(rf"""(?P<q>['"]?)(?i:env:)[\\/]?{N}(?P=q)""")
_DOTNET = re.compile(
    rf"\[(?i:(?:system\.)?environment)\]::(?i:setenvironmentvariable)\([ \t]*(?P<q>['\"]){N}(?P=q)[ \t]*,"
    rf"[ \t]*(?P<val>{_VAL})[ \t]*(?:,[ \t]*(?P<target>[^)]*?))?[ \t]*\)"
)
_PROCESS = re.compile(r"""(?i)(['"])process\1|\[(?:system\.)?environmentvariabletarget\]::process""")
ASSIGNS = re.compile(
    rf"(?i:\$\{{?env:){N}\}}?[ \t]*[-+*/?]?=(?!=)|(?i:(?:set|new|copy|move|rename)-item|set-content|\bs[ic]\b|\bni\b)"
    rf"[^\n]*(?i:env:)[\\/]?{N}\b|(?i:setenvironmentvariable)[^\n]*\b{N}\b"
)
_SINGLE, _DOUBLE = "'\u2018\u2019\u201a\u201b", '"\u201c\u201d\u201e'


@dataclass(slots=True)
class _Stmt:
    start: int
    end: int
    container: str  # "" top level, "{", "(", "["
    prev: str
    after: str = ""
    blocks: list[tuple[int, int]] = field(default_factory=list)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.t, self.n = text, len(text)
        self.stmts: list[_Stmt] = []

    def fail(self, at: int, why: str) -> Unsafe:
        return Unsafe(line_of(self.t, at), f"fa-doctor cannot read this file as PowerShell ({why})")

    def parse(self, i: int, closer: str) -> int:
        t, n, begin = self.t, self.n, i
        cur: _Stmt | None = None
        prev = ""

        def close(op: str) -> None:
            nonlocal cur, prev
            if cur is not None:
                cur.after = op
                self.stmts.append(cur)
            cur, prev = None, op

        def mark(at: int, to: int) -> None:
            nonlocal cur
            if cur is None:
                cur = _Stmt(at, to, {"}": "{", ")": "(", "]": "["}.get(closer, ""), prev)
            cur.end = to

        while i < n:
            c = t[i]
            if c in " \t\r":
                i += 1
            elif c == "`":
                if t[i + 1 : i + 3].lstrip("\r")[:1] == "\n":
                    i = t.index("\n", i) + 1
                else:
                    mark(i, min(i + 2, n))
                    i += 2
            elif t.startswith("<#", i):
                j = t.find("#>", i + 2)
                i = n if j < 0 else j + 2
            elif c == "#" and (i == 0 or t[i - 1] in " \t\r\n;{}()"):
                j = t.find("\n", i)
                i = n if j < 0 else j
            elif c == "\n":
                ends_open = cur is not None and t[cur.start : cur.end].rstrip()[-1:] in ("|", "=", ",")
                if closer in (")", "]") or ends_open:
                    i += 1
                else:
                    close("\n")
                    i += 1
            elif c == ";":
                close(";")
                i += 1
            elif t[i : i + 2] in ("&&", "||") or c == "|":
                op = t[i : i + 2] if t[i : i + 2] in ("&&", "||") else "|"
                mark(i, i)
                close(op)
                i += len(op)
            elif c in "})]":
                if c != closer:
                    raise self.fail(i, f"a `{c}` without its opening")
                close(c)
                return i + 1
            elif c in "{([" or t[i : i + 2] in ("$(", "@(", "@{"):
                at = i
                i += 1 if c in "{([" else 2
                inner = "}" if t[i - 1] == "{" else ")" if t[i - 1] == "(" else "]"
                i = self.parse(i, inner)
                mark(at, i)
                if inner == "}" and cur is not None:
                    cur.blocks.append((at, i))
            elif t.startswith(("@'", '@"'), i) and t[i + 2 : i + 4].lstrip(" \t\r")[:1] == "\n":
                end = re.compile(rf"\n[ \t]*{re.escape(t[i + 1])}@").search(t, i)
                if end is None:
                    raise self.fail(i, "a here-string that is never closed")
                mark(i, end.end())
                i = end.end()
            elif c in _SINGLE or c in _DOUBLE:
                j = self.string(i)
                mark(i, j)
                i = j
            else:
                mark(i, i + 1)
                i += 1
        close("")
        if closer:
            raise self.fail(begin, f"a block or group without its `{closer}`")
        return n

    def string(self, i: int) -> int:
        t, quotes = self.t, _SINGLE if self.t[i] in _SINGLE else _DOUBLE
        j = i + 1
        while j < self.n:
            c = t[j]
            if c == "`" and quotes is _DOUBLE:
                j += 2
            elif c in quotes:
                if t[j + 1 : j + 2] and t[j + 1] in quotes:
                    j += 2
                else:
                    return j + 1
            elif quotes is _DOUBLE and t.startswith("$(", j):
                j = self.parse(j + 2, ")")
            else:
                j += 1
        raise self.fail(i, "a quote that is never closed")


def _cmdlet_value(args: str, base: int) -> tuple[int, int, str] | None:
    """(start, end, text) of the value when the cmdlet's arguments set Env:NAME; None when they do not."""
    tokens = list(_ARG.finditer(args))
    path, val, positional, k = None, None, [], 0
    while k < len(tokens):
        tok = tokens[k][0]
        low = tok.lower()
        if low.startswith("-") and len(low) > 1:
            name = low[1:]
            if name and ("path".startswith(name) or "literalpath".startswith(name)) and k + 1 < len(tokens):
                path, k = tokens[k + 1], k + 2
            elif name and "value".startswith(name) and k + 1 < len(tokens):
                val, k = tokens[k + 1], k + 2
            elif name and "force".startswith(name):
                k += 1
            else:
                return None
        else:
            positional.append(tokens[k])
            k += 1
    path = path or (positional.pop(0) if positional else None)
    val = val or (positional.pop(0) if positional else None)
    if path is None or positional or not _PATH.fullmatch(path[0]) or (val and not re.fullmatch(_VAL, val[0])):
        return None
    return (base + val.start(), base + val.end(), val[0]) if val else (base, base, "")


def plan(text: str, value: str | None) -> Plan:
    scanner = _Scanner(text)
    scanner.parse(0, "")
    out = Plan()
    for s in scanner.stmts:
        body = text[s.start : s.end]
        flat = list(body)
        for lo, hi in s.blocks:  # statements inside a block are looked at on their own
            flat[lo - s.start + 1 : hi - s.start - 1] = " " * (hi - lo - 2)
        line = line_of(text, s.start)
        val: tuple[int, int, str] | None = None
        if m := _ASSIGN.fullmatch(body) or _DOTNET.fullmatch(body):
            if m.re is _DOTNET and m["target"] and not _PROCESS.fullmatch(m["target"]):
                raise Unsafe(line, f"stores {N} in the User or Machine environment, outside this file")
            val = (s.start + m.start("val"), s.start + m.end("val"), m["val"])
        elif (c := _CMDLET.fullmatch(body)) and (got := _cmdlet_value(c["args"], s.start + c.start("args"))):
            val = got
        elif ASSIGNS.search(re.sub(r"`\r?\n", " ", "".join(flat))):  # a backtick continues the line
            raise Unsafe(line, f"sets {N} in a form fa-doctor does not rewrite safely")
        if val is None:
            continue
        if s.container in "([" and s.container:
            raise Unsafe(line, f"sets {N} inside an expression, whose value would change")
        if s.prev in ("|", "&&", "||") or s.after in ("|", "&&", "||"):
            raise Unsafe(line, f"sets {N} in a pipeline or a chain")
        if value is not None:
            if not val[2]:
                raise Unsafe(line, f"sets {N} without a value fa-doctor can rewrite")
            out.changes.append(Change(val[0], val[1], quoted_like(val[2], value)))
            continue
        cmd = Command([Word(s.start, s.end, body)], bool(s.container), s.prev, s.after)
        out.changes.append(drop_statement(text, cmd, "$null = $null", True))
    return out
