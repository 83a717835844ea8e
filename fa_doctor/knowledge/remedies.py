"""Remedies for a match: the entry's own, made exact for the target when its facts are known.

This is the one place that builds remedies (issue 6 turns them into typed actions: switch here).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fa_doctor.finding import Remedy
from fa_doctor.knowledge.base import Entry

if TYPE_CHECKING:
    from fa_doctor.facts import Facts

_GPU_ARCH = "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv"


def build(entry: Entry, extracted: Mapping[str, str], facts: Facts | None) -> tuple[Remedy, ...]:
    """Facts-dependent remedies first (exact wheel, this machine's glibc/GPU), then the entry's general ones."""
    python = shlex.quote(facts.target.executable) if facts is not None else "python"
    general = tuple(
        Remedy(r.text.replace("{python}", python), tuple(c.replace("{python}", python) for c in r.commands))
        for r in entry.remedies
    )
    if facts is None:
        return general
    return _exact(entry, extracted, facts) + general


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
