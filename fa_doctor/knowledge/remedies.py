"""Remedies for a match: the entry's own, made exact for the target when its facts are known.

This is the one place that builds remedies (issue 6 turns them into typed actions: switch here).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fa_doctor.actions import Action, PipInstall, RunCommand
from fa_doctor.finding import Remedy
from fa_doctor.knowledge.base import Entry

if TYPE_CHECKING:
    from fa_doctor.facts import Facts

_GPU_ARCH = "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv"


def build(entry: Entry, extracted: Mapping[str, str], facts: Facts | None) -> tuple[Remedy, ...]:
    """Facts-dependent remedies first (exact wheel, this machine's glibc/GPU), then the entry's general ones."""
    general = tuple(_general(r, facts) for r in entry.remedies)
    if facts is None:
        return general
    return _exact(entry, extracted, facts) + general


_SHELL_SYNTAX = ("|", ">", "<", ";", "&&", "$(", "`", "cd ")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _general(remedy: Remedy, facts: Facts | None) -> Remedy:
    """An entry's remedy as typed actions (so `explain` prints what `check` would, quoted the same way): a
    `{python} -m pip install` becomes a PipInstall into the target that holds torch and the server's pins; other
    plain commands become RunCommand. A command that needs the shell (a pipe, `cd`) stays text."""
    python = facts.target.executable if facts is not None else None
    shown = shlex.quote(python) if python else "python"
    text = remedy.text.replace("{python}", shown)
    try:
        actions = tuple(_action(c, python, facts) for c in remedy.commands)
    except ValueError:
        actions = (None,)
    if remedy.commands and all(a is not None for a in actions):
        return Remedy(text, (), tuple(a for a in actions if a is not None))
    return Remedy(text, tuple(c.replace("{python}", shown) for c in remedy.commands))


def _action(command: str, python: str | None, facts: Facts | None) -> Action | None:
    if any(op in command for op in _SHELL_SYNTAX):
        return None
    words = shlex.split(command)
    env = []
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    argv = [(python or "python") if w == "{python}" else w for w in words]
    if not argv:
        return None
    if words[:1] == ["{python}"] and argv[1:4] == ["-m", "pip", "install"] and python:
        from fa_doctor.checks.remedies import keep

        rest = argv[4:]
        options = tuple(w for w in rest if w.startswith("-"))
        reqs = tuple(w for w in rest if not w.startswith("-"))
        return PipInstall(python, reqs, options, keep(facts) if facts is not None else (), tuple(env))
    if env:
        return None  # RunCommand carries no environment: the text says it
    return RunCommand(tuple(argv))


def _exact(entry: Entry, extracted: Mapping[str, str], facts: Facts) -> tuple[Remedy, ...]:
    out: list[Remedy] = []
    torch = facts.torch
    if entry.category == "abi-mismatch" and torch is not None and torch.version:
        abi = {True: "TRUE", False: "FALSE", None: "unknown"}[torch.cxx11_abi]
        built = []
        if extracted.get("wheel"):
            built.append(f"the paste names {extracted['wheel']}")
        if extracted.get("abi") == "cxx11":
            built.append("the missing symbol is a std::string of the other C++ ABI")
        out.append(
            Remedy(
                f"The target runs torch {torch.version} (CUDA {torch.cuda or 'none'}, cxx11abi{abi})"
                + (f"; {'; '.join(built)}" if built else "")
                + ": the extension must be built for exactly this torch and ABI.",
                (
                    f'{shlex.quote(facts.target.executable)} -c "import torch; print(torch.__version__, '
                    'torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI)"',
                ),
            )
        )
    if entry.category == "glibc" and facts.target.libc:
        need = extracted.get("glibc_requires", "a newer version")
        out.append(Remedy(f"This system has {facts.target.libc}; the binary needs {need}.", ("ldd --version",)))
    if entry.category in ("arch-unsupported", "fa3-unavailable") and facts.capabilities:
        caps = ", ".join(f"{a}.{b}" for a, b in facts.capabilities)
        out.append(Remedy(f"The target's GPUs have compute capability {caps}.", (_GPU_ARCH,)))
    if entry.reinstall:
        from fa_doctor.checks.remedies import reinstall

        out.extend(reinstall(facts, entry.reinstall))
    return tuple(out)
