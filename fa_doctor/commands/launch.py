"""What a server launch command will run: its interpreter and, for SGLang, its attention-backend flags.

Read by `exec` (what to check before replacing itself with the command) and by `entry` (which interpreter to
start probing early). Nothing here is interpreted as fa-doctor's own option: the command is only read.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fa_doctor.facts import BackendFlags

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SGLANG_MODULES = ("sglang.launch_server", "sglang.cli.serve")
_FLAGS = {
    "--attention-backend": "attention",
    "--prefill-attention-backend": "prefill",
    "--decode-attention-backend": "decode",
}
_SHEBANG_BYTES = 512


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    python: str | None = None  # the interpreter the command runs with, when it can be told
    sglang: bool = False  # an SGLang server launch
    flags: BackendFlags = field(default_factory=BackendFlags)


def _shebang_python(path: str) -> str | None:
    """The interpreter of a console script (`#!/opt/venv/bin/python3`), read with a bounded, non-blocking open."""
    from fa_doctor.probes import files

    head = files.read(path, _SHEBANG_BYTES).data or b""
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        return shutil.which(words[1]) or words[1]
    return words[0] if words and _PYTHON.match(os.path.basename(words[0])) else None


def _backend_flags(args: Sequence[str]) -> BackendFlags:
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in _FLAGS:
            if eq:
                found[_FLAGS[name]] = value
            elif i + 1 < len(args):
                found[_FLAGS[name]] = args[i + 1]
                i += 1
        i += 1
    return BackendFlags(found.get("attention"), found.get("prefill"), found.get("decode"))


def parse_launch(argv: Sequence[str], env: Mapping[str, str]) -> Launch:
    args = list(argv)
    start = 0
    if args and os.path.basename(args[0]) == "env":  # env [VAR=value ...] COMMAND
        start = 1
        while start < len(args) and (_ASSIGNMENT.match(args[start]) or args[start] in ("-i", "-")):
            start += 1
    rest = args[start:]
    if not rest:
        return Launch(tuple(argv))
    head = os.path.basename(rest[0])
    path = env.get("PATH") or os.defpath
    if _PYTHON.match(head):
        python = shutil.which(rest[0], path=path) or rest[0]
        for i, arg in enumerate(rest[1:-1], start=1):
            if arg == "-m":
                module = rest[i + 1]
                sglang = module in _SGLANG_MODULES or (module == "sglang" and "serve" in rest[i + 2 : i + 3])
                after = rest[i + 2 :]
                return Launch(tuple(argv), python, sglang, _backend_flags(after) if sglang else BackendFlags())
        return Launch(tuple(argv), python)
    script = shutil.which(rest[0], path=path)
    interpreter = _shebang_python(script) if script else None
    if head == "sglang" and rest[1:2] == ["serve"]:
        return Launch(tuple(argv), interpreter, True, _backend_flags(rest[2:]))
    return Launch(tuple(argv), interpreter)
