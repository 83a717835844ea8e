"""What a server launch command will run: its interpreter, the environment it gets and, for SGLang, its
attention-backend flags, followed as the kernel and `env` would run it, without running anything (docs/internals.md).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from fa_doctor.model.facts import BackendFlags

_PYTHON = re.compile(r"^python(\d+(\.\d+)?t?)?$")
_SGLANG_MODULES = ("sglang.launch_server", "sglang.cli.serve")
_FLAGS = {"--attention-backend": "attention"} | {f"--{k}-attention-backend": k for k in ("prefill", "decode")}
_SHEBANG_BYTES = 512
_HOPS = 8  # env, #!, env -S, ... (Linux itself follows at most 4 interpreters)
_PY_ARG_OPTS = "WX"  # take a value, then parsing goes on
_PY_LONG_WITH_ARG = ("--check-hash-based-pycs",)
_ENV_FLAGS = "i0v"
_ENV_ARG_OPTS = "uCSP"
_ENV_LONG_FLAGS = ("--ignore-environment", "--null", "--debug", "--list-signal-handling")
_ENV_LONG_SIGNALS = ("--default-signal", "--ignore-signal", "--block-signal")
_ENV_LONG_VALUED = {"--unset": "u", "--chdir": "C", "--split-string": "S"}
# env -S's \X escapes; \_ is a blank in quotes (outside them it separates words)
_S_ESCAPES = dict(zip("ntfvr#$\"'\\_", "\n\t\f\v\r#$\"'\\ ", strict=True))


@dataclass(frozen=True, slots=True)
class Launch:
    argv: tuple[str, ...]
    python: str | None = None  # the interpreter the command runs with, when it can be told
    sglang: bool = False  # an SGLang server launch
    flags: BackendFlags = field(default_factory=BackendFlags)
    env: Mapping[str, str] = field(default_factory=dict)  # what the server process gets, after env's changes
    problem: str | None = None  # why the interpreter could not be told
    python_flags: tuple[str, ...] = ()  # the interpreter's own options before -m/-c/the script (-I, -E, -S, -W error)
    cwd: str | None = None  # the working folder the server starts in (after env -C)
    cannot_start: tuple[str, int] | None = None  # (what a shell says, 127 or 126) when the program cannot run


@dataclass(slots=True)
class _State:
    env: dict[str, str]
    cwd: str


class _Refused(Exception):
    """`env` itself would refuse this command line (a bad option, an unterminated quote in -S)."""


def _backend_flags(args: Sequence[str]) -> BackendFlags:
    found: dict[str, str] = {}
    words = iter(args)
    for arg in words:
        name, eq, value = arg.partition("=")
        if name in _FLAGS and (got := value if eq else next(words, None)) is not None:
            found[_FLAGS[name]] = got
    return BackendFlags(**found)


def _resolve(command: str, state: _State) -> str | None:
    """Where execvp would find `command` with the server's PATH (relative paths against the working folder)."""
    if "/" in command:
        path = os.path.join(state.cwd, command)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(command, path=state.env.get("PATH") or os.defpath)


def _cannot_start(head: str, state: _State) -> tuple[str, int]:
    """What a shell would say of a program that does not resolve: not found (127), or not executable (126)."""
    if "/" in head:
        path = os.path.join(state.cwd, head)
        if os.path.isdir(path) or (os.path.exists(path) and not os.access(path, os.X_OK)):
            return f"{head}: Permission denied" if not os.path.isdir(path) else f"{head}: Is a directory", 126
        return f"{head}: No such file or directory", 127
    return f"{head}: command not found", 127


def shebang(path: str) -> tuple[str, str | None] | None:
    """The `#!` interpreter of a script and its one optional argument (Linux keeps the rest of the line as one
    argument); read with a bounded, non-blocking open."""
    from fa_doctor.probes import files

    head = files.read(path, _SHEBANG_BYTES).data or b""
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "surrogateescape").strip(" \t")  # a CR stays, as in Linux
    interpreter, _, rest = line.replace("\t", " ").partition(" ")
    return (interpreter, rest.strip(" ") or None) if interpreter else None


def split_string(text: str, env: Mapping[str, str]) -> list[str]:
    """`env -S`'s splitting: blanks separate, quotes group, backslash escapes, `${NAME}` expands, `#` starts a
    comment where a word would start, `\\c` ends it all, `\\_` is a blank (a separator outside quotes)."""
    out: list[str] = []
    word: str | None = None
    quote: str | None = None
    i = 0
    while i < len(text):
        c, n = text[i], text[i + 1 : i + 2]
        i += 1
        if quote == "'":
            if c == "'":
                quote = None
            elif c == "\\" and n in ("\\", "'"):
                word, i = (word or "") + n, i + 1
            else:
                word = (word or "") + c
        elif quote is None and (c in " \t\n\v\f\r" or c + n == "\\_"):  # a blank, or \_: the word ends
            if word is not None:
                out.append(word)
            word, i = None, i + 1 if c == "\\" else i
        elif c == "\\":
            if n == "c" and quote is None:
                break
            if n not in _S_ESCAPES:
                raise _Refused(f"env -S: invalid escape \\{n}")
            word, i = (word or "") + _S_ESCAPES[n], i + 1
        elif c == "$" and n == "{":
            end = text.find("}", i)
            name = text[i + 1 : end] if end > 0 else ""
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise _Refused("env -S: a ${NAME} that env cannot expand")
            word, i = (word or "") + env.get(name, ""), end + 1
        elif quote is None and c in "'\"":
            quote, word = c, word or ""
        elif quote == '"' and c == '"':
            quote = None
        elif quote is None and c == "#" and word is None:
            break
        else:
            word = (word or "") + c
    if quote is not None:
        raise _Refused("env -S: no closing quote")
    if word is not None:
        out.append(word)
    return out


def _follow_env(args: list[str], state: _State) -> list[str]:
    """`env [OPTION]... [NAME=VALUE]... COMMAND`: apply what it changes to `state`; returns COMMAND and its args."""
    ignore, unset, i = False, [], 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in _ENV_LONG_FLAGS or name in _ENV_LONG_SIGNALS:
                ignore = ignore or name == "--ignore-environment"
                continue
            if name not in _ENV_LONG_VALUED:
                raise _Refused(f"env: unknown option {arg}")
            ch, given = _ENV_LONG_VALUED[name], value if eq else None
        else:
            rest = arg[1:].lstrip(_ENV_FLAGS)  # flags, then at most one option that takes a value
            ignore = ignore or arg == "-" or "i" in arg[1 : len(arg) - len(rest)]
            if not rest:
                continue
            ch, given, name = rest[0], rest[1:] or None, "-" + rest[0]
            if ch not in _ENV_ARG_OPTS:
                raise _Refused(f"env: unknown option -{ch}")
        if given is None:
            if i >= len(args):
                raise _Refused(f"env: {name} needs a value")
            given, i = args[i], i + 1
        if ch == "u":
            unset.append(given)
        elif ch == "C":
            state.cwd = os.path.join(state.cwd, given)
        elif ch == "S":
            args, i = [*split_string(given, state.env), *args[i:]], 0
        else:
            raise _Refused("env -P (a BSD search path) is not followed")
    if ignore:
        state.env.clear()
    for name in unset:
        state.env.pop(name, None)
    while i < len(args) and "=" in args[i]:
        name, _, value = args[i].partition("=")
        if not name:
            raise _Refused(f"env: cannot set {args[i]!r}")
        state.env[name] = value
        i += 1
    return args[i:]


def _python_launch(argv: tuple[str, ...], python: str | None, args: list[str], state: _State) -> Launch:
    """`python [options] (-m MODULE | -c CMD | SCRIPT | -) [args]`, options combined as CPython allows (`-Bm`)."""

    def made(own: Sequence[str], sglang: bool = False, after: Sequence[str] = ()) -> Launch:  # own: python's options
        flags = _backend_flags(after) if sglang else BackendFlags()
        return Launch(argv, python, sglang, flags, dict(state.env), python_flags=tuple(own), cwd=state.cwd)

    i = start = 0
    while i < len(args):
        start, arg = i, args[i]
        if arg == "--" or arg == "-" or not arg.startswith("-"):
            rest = args[i + 1 :] if arg == "--" else args[i:]  # the script and its arguments
            serve = bool(rest) and os.path.basename(rest[0]) == "sglang" and rest[1:2] == ["serve"]
            return made(args[:i], serve, rest[2:])
        if arg.startswith("--"):
            i += 2 if arg in _PY_LONG_WITH_ARG else 1
            continue
        j = next((j for j, ch in enumerate(arg) if j and ch in "cm" + _PY_ARG_OPTS), 0)  # the one taking a value
        inline = arg[j + 1 :] if j else ""
        i += 2 if j and not inline else 1
        if not j or arg[j] in _PY_ARG_OPTS:
            continue
        own = [*args[:start], arg[:j]] if j > 1 else args[:start]  # `-Bm mod`: -B is the interpreter's own
        if arg[j] == "c":
            return made(own)
        value = inline or (args[start + 1] if start + 1 < len(args) else "")
        serve = value == "sglang" and args[i : i + 1] == ["serve"]
        return made(own, value in _SGLANG_MODULES or serve, args[i + 1 :] if serve else args[i:])
    return made(args[:start])


def parse_launch(argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> Launch:
    """`env`: what fa-doctor passes to COMMAND; the result's `env` is what the server gets after `env`'s changes."""
    state = _State(dict(env), cwd or os.getcwd())
    full = tuple(argv)
    args = list(argv)

    def unknown(problem: str, args: Sequence[str] = ()) -> Launch:
        serve = bool(args) and os.path.basename(args[0]) == "sglang" and list(args[1:2]) == ["serve"]
        flags = _backend_flags(args[2:]) if serve else BackendFlags()
        return Launch(full, None, serve, flags, dict(state.env), problem, cwd=state.cwd)

    try:
        for _ in range(_HOPS):
            if not args or not args[0]:
                return unknown("there is no command to run")
            head, name = args[0], os.path.basename(args[0])
            if name == "env":
                args = _follow_env(args[1:], state)
                continue
            where = _resolve(head, state)
            missing = f"{head} does not exist" if "/" in head else f"{head} is not on the server's PATH"
            stop = None if where else _cannot_start(head, state)
            if _PYTHON.match(name):  # what it would run is read even when the interpreter is missing
                launch = _python_launch(full, where, args[1:], state)
                return launch if where else replace(launch, problem=missing, cannot_start=stop)
            if where is None:
                return replace(unknown(missing, args), cannot_start=stop)
            found = shebang(where)
            if found is None:
                return unknown(f"{where} is not a Python script (a binary, or a script without #!)", args)
            interpreter, optional = found
            if not os.path.exists(os.path.join(state.cwd, interpreter)):
                return unknown(f"{where}: its #! interpreter {interpreter} does not exist", args)
            if os.path.basename(interpreter) != "env" and not _PYTHON.match(os.path.basename(interpreter)):
                return unknown(f"{where} is run by {interpreter}, a wrapper fa-doctor cannot see through", args)
            args = [interpreter, *([optional] if optional else []), where, *args[1:]]
        return unknown("too many levels of env and #! lines")
    except _Refused as exc:
        return unknown(str(exc))
