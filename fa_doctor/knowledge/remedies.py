"""Remedies for a match: the entry's own, made exact for the target when its facts are known; installs go
through the one planner (fa_doctor.diagnose.plan.planner), as check's do."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fa_doctor.knowledge.base import Entry
from fa_doctor.model.actions import Action, RunCommand
from fa_doctor.model.finding import Remedy

if TYPE_CHECKING:
    from fa_doctor.model.facts import Facts

_GPU_ARCH = "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv"


def build(entry: Entry, extracted: Mapping[str, str], facts: Facts | None) -> tuple[Remedy, ...]:
    """Facts-dependent remedies first (exact wheel, this machine's glibc/GPU), then the entry's general ones.
    Installs are intents, written by the planner: exact for the target with facts, and without them only the
    `fa-doctor check --python` that would write them (no torch to hold, so no install is printed)."""
    from fa_doctor.diagnose.plan.planner import unique

    general = [r for remedy in entry.remedies for r in _general(remedy, facts)]
    if facts is None:
        return tuple(unique(general))
    return tuple(unique([*_exact(entry, extracted, facts), *general]))


_SHELL_SYNTAX = ("|", ">", "<", ";", "&&", "$(", "`", "cd ")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _general(remedy: Remedy, facts: Facts | None) -> tuple[Remedy, ...]:
    """An entry's remedy for the target: its intent planned, its plain commands as RunCommand actions (so
    `explain` prints what `check` would, quoted the same way); a command that needs the shell stays text."""
    from fa_doctor.diagnose.plan.planner import expand

    python = facts.target.executable if facts is not None else None
    shown = shlex.quote(python) if python else "python"
    text = remedy.text.replace("{python}", shown)
    if remedy.intent is not None:
        return expand(Remedy(text, remedy.commands, intent=remedy.intent), facts)
    actions = tuple(_action(c, python) for c in remedy.commands)
    if remedy.commands and all(a is not None for a in actions):
        return (Remedy(text, (), tuple(a for a in actions if a is not None)),)
    return (Remedy(text, tuple(c.replace("{python}", shown) for c in remedy.commands)),)


def _action(command: str, python: str | None) -> Action | None:
    if any(op in command for op in _SHELL_SYNTAX):
        return None
    words = shlex.split(command)
    if not words or _ASSIGNMENT.match(words[0]):
        return None  # RunCommand carries no environment: the text says it
    return RunCommand(tuple((python or "python") if w == "{python}" else w for w in words))


def _exact(entry: Entry, extracted: Mapping[str, str], facts: Facts) -> tuple[Remedy, ...]:
    out: list[Remedy] = []
    torch = facts.torch
    if entry.category == "abi-mismatch" and torch is not None and torch.version:
        abi = {True: "TRUE", False: "FALSE", None: "unknown"}[torch.cxx11_abi]
        built = [f"; the paste names {extracted['wheel']}"] if extracted.get("wheel") else []
        if extracted.get("abi") == "cxx11":
            built.append("; the missing symbol is a std::string of the other C++ ABI")
        runs = f"The target runs torch {torch.version} (CUDA {torch.cuda or 'none'}, cxx11abi{abi})" + "".join(built)
        probe = "import torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI)"
        command = f'{shlex.quote(facts.target.executable)} -c "{probe}"'
        out.append(Remedy(runs + ": the extension must be built for exactly this torch and ABI.", (command,)))
    if entry.category == "glibc" and facts.target.libc:
        need = extracted.get("glibc_requires", "a newer version")
        out.append(Remedy(f"This system has {facts.target.libc}; the binary needs {need}.", ("ldd --version",)))
    if entry.category in ("arch-unsupported", "fa3-unavailable") and facts.capabilities:
        caps = ", ".join(f"{a}.{b}" for a, b in facts.capabilities)
        out.append(Remedy(f"The target's GPUs have compute capability {caps}.", (_GPU_ARCH,)))
    if entry.reinstall:
        from fa_doctor.diagnose.plan.planner import expand
        from fa_doctor.model.intents import Install

        out.extend(expand(Remedy("", intent=Install(entry.reinstall)), facts))
    return tuple(out)
