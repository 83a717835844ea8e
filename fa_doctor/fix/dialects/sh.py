"""sh, bash and zsh: which statements may set the override, over the commands shscan.Scanner finds.

Nothing is run or expanded. The file is edited only when every way it could set the override is a plain
assignment fa-doctor rewrites (`N=3`, `export N=3`, `declare -x N=3`); any other statement that may set it is
refused with its line: the name written another way (quoted, split by `\\`-newline, `${N:=3}`, an argument of
`read`, `printf -v`, `for`...), a name or a command fa-doctor cannot read (`declare "$v=3"`, `$cmd`), code from
elsewhere (`source`, `eval "$(...)"`), arithmetic on variables (which can assign any of them).
"""

from __future__ import annotations

import re

from fa_doctor.fix.dialects.base import (
    IDENT,
    Change,
    Command,
    N,
    Plan,
    Unsafe,
    Word,
    drop_statement,
    line_of,
    mentions,
    quoted_like,
    remove_words,
)
from fa_doctor.fix.dialects.shscan import ASSIGN, STATIC, Scanner

# ---- what a command can do to the shell's variables ---------------------------------------------------------

DYN = "\0"  # stands for an expansion in unquote(): text fa-doctor cannot know
# Builtins that assign the variables their arguments name (bash, zsh, ksh; csh's setenv, fish's set).
SETTERS = {"read", "getopts", "mapfile", "readarray", "wait", "set", "vared", "zparseopts", "zstyle", "getln"}
SETTERS |= {"zformat", "strftime", "compgen", "setenv", "print", "printf"}
# Declarations: the options that only export, protect or print (others make references, integers, arrays).
DECLARE = {"export": "fnp", "readonly": "fp", "declare": "xgrpfFltu", "typeset": "xgrpfFltu", "local": "xgrpfFltu"}
_EDITABLE = {"export": "", "readonly": "", "declare": "xgr", "typeset": "xgr", "local": "xgr"}
REFUSED = {
    "source": "runs another file, which may set it: check that file with --env-file too",
    ".": "runs another file, which may set it: check that file with --env-file too",
    "enable": "loads a builtin from a shared library",
    "fc": "runs commands again from the history",
    "coproc": "sets the variable it names",
    "sched": "runs code later",
    "zmodload": "loads a module",
    "let": "assigns through arithmetic, which can set any variable",
    "integer": "makes arithmetic variables, whose assignments can set any variable",
    "float": "makes arithmetic variables, whose assignments can set any variable",
    "nameref": "makes a reference, whose assignments set another variable",
}
CODE = {"eval", "trap", "alias"}  # their arguments are code: read when written out, refused when computed
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
                j = self.sc.skip_dquote(i + 1)
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
                i = self.sc.skip_backtick(i + 1)
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
            body = self.t[at + 2 : self.sc.skip_brace(at + 2) - 1]
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
        inner = plan(code, None, self.depth + 1) if self.depth < 2 else None
        if inner is None or inner.refusals or inner.changes:
            why = next(iter(inner.refusals.values()), f"it sets {N}") if inner else "it nests code too deeply"
            self.refuse(at, f"{what} runs `{_clip(code)}`, where {why}")

    def command(self, cmd: Command) -> None:
        if cmd.subshell:  # in `$(...)` or `( ... )` nothing reaches this shell's variables: only the edits count
            kept, self.out.refusals = self.out.refusals, {}
            self.check(cmd)  # (the name itself is still checked, by check_mentions)
            self.out.refusals = kept
        else:
            self.check(cmd)

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
        for w in args:
            u = self.unquote(w)
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
            for k in ours:
                w = words[k]
                old = w.text[len(N) + 1 :]
                self.out.changes.append(Change(w.start + len(N) + 1, w.end, quoted_like(old, self.value)))
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
            by = [c for a, b, c in self.context if a <= m.start < b]
            if m.why(t):
                self.refuse(m.start, m.why(t))
            elif by:
                self.refuse(m.start, f"`{_clip(by[-1])}` may set {N} (it names it)")
            else:
                self.refuse(m.start, f"sets {N} in a form fa-doctor does not rewrite")


def plan(text: str, value: str | None, depth: int = 0) -> Plan:
    """The edits, or (in `refusals`) every line that may set the override in a form fa-doctor does not edit."""
    p = _Prover(text, value, depth)
    try:
        p.sc.parse_list(0, None, False)
        for cmd in list(p.sc.commands):
            p.command(cmd)
    except Unsafe as e:
        p.out.refuse(e.line, e.reason)
    else:
        p.check_mentions()
    if p.out.refusals:
        p.out.changes.clear()
    return p.out
