"""The sh/bash/zsh tokenizer: where each simple command starts and ends, how deep it sits, which text is a
comment, a quoted string or a here-document body. It runs and expands nothing."""

from __future__ import annotations

import re

from fa_doctor.fix.dialects.base import IDENT, Command, Unsafe, Word, line_of

# A value with nothing that expands or runs: quotes without `$` or backticks inside "...", no operators.
STATIC = re.compile(r"""(?:'[^'\n]*'|"(?:[^"\\$`\n]|\\[^\n])*"|\\[^\n]|[^\s'"\\;&|<>()`$#])+""")
ASSIGN = re.compile(rf"(?P<name>{IDENT})(?P<op>\+?=)(?P<val>.*)\Z", re.S)
_ARRAY = re.compile(rf"{IDENT}(?:\[[^]]*\])?\+?=\Z")
_CLOSE = {"fi": ("if",), "done": ("while", "until", "for"), "esac": ("case",), "}": ("{",)}
_KEYWORDS = {"if", "while", "until", "{", "for", "select", "case", "then", "do", "else", "elif", "!", "time"}
_KEYWORDS |= {"function", "[[", *_CLOSE}
_DELIM = " \t\n;&|<>()"
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
                    j = t.index(")", i) + 1  # `name()`: a function; its body, a compound command, follows
                    cmd.header = True
                    end("")
                    i = j
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
        if word in ("if", "while", "until", "{"):
            stack.append([word, ""])
        elif word in ("for", "select"):
            stack.append(["for", ""])
        elif word == "case":
            stack.append(["case", "hdr"])
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
            elif c == '"':
                i = self.skip_dquote(i + 1)
            elif c == "`":
                i = self.skip_backtick(i + 1)
            elif c == "$":
                i = self.dollar(i)
            else:
                i += 1
        return min(i, n)

    def dollar(self, i: int) -> int:
        """The end of the expansion at `i`; parsed once (the prover asks again while it reads words)."""
        if i not in self.ends:
            self.ends[i] = self._dollar(i)
        return self.ends[i]

    def _dollar(self, i: int) -> int:
        t = self.t
        nx = t[i + 1 : i + 2]
        if nx == "'":
            j = i + 2
            while j < self.n and t[j] != "'":
                j += 2 if t[j] == "\\" else 1
            if j >= self.n:
                raise self.fail(i, "a $'...' quote that is never closed")
            return j + 1
        if nx == "(":
            return self.skip_arith(i + 3) if t.startswith("((", i + 1) else self.parse_list(i + 2, ")", True)
        if nx == "{":
            return self.skip_brace(i + 2)
        return i + 1

    def skip_dquote(self, i: int) -> int:
        t, start = self.t, i - 1
        while i < self.n:
            c = t[i]
            if c == '"':
                return i + 1
            if c == "\\":
                i += 2
            elif c == "`":
                i = self.skip_backtick(i + 1)
            elif c == "$":
                i = self.dollar(i)
            else:
                i += 1
        raise self.fail(start, "a double quote that is never closed")

    def skip_backtick(self, i: int) -> int:
        start = i - 1
        while i < self.n:
            if self.t[i] == "\\":
                i += 2
            elif self.t[i] == "`":
                return i + 1
            else:
                i += 1
        raise self.fail(start, "a backtick that is never closed")

    def skip_brace(self, i: int) -> int:
        t, start, depth = self.t, i - 2, 1
        while i < self.n:
            c = t[i]
            if c == "\\":
                i += 2
            elif c == "'":
                j = t.find("'", i + 1)
                i = self.n if j < 0 else j + 1
            elif c == '"':
                i = self.skip_dquote(i + 1)
            elif c == "$":
                i = self.dollar(i)
            elif c == "}":
                depth -= 1
                if not depth:
                    return i + 1
                i += 1
            else:
                i += 1
        raise self.fail(start, "a `${` that is never closed")

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
                continue
            if c in "'\"`$":
                i = self.read_word(i) if c != "$" else self.dollar(i)
                continue
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
                continue
            j = self.read_word(i)
            if j == i:
                break
            i = j
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
