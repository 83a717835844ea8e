"""What a check wants done, stated as data: the planner (`fa_doctor.diagnose.plan.planner`), run once after every
check, chooses versions, constraints and options for this machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True, slots=True)
class Install:
    """Install (or reinstall) one FA implementation (`fa2`, `fa3-sgl`, `fa3`, `fa4`, `fa4-sglang`, `vllm-fa`);
    `first` keeps only the planner's preferred way."""

    implementation: str
    first: bool = False


@dataclass(frozen=True, slots=True)
class ReinstallSame:
    """These exact `name==version` again, without touching anything they depend on."""

    specs: tuple[str, ...]
    text: str


@dataclass(frozen=True, slots=True)
class Rebuild:
    """Rebuild a source-only package against the installed torch (pip's wheel cache must not be reused)."""

    name: str
    text: str
    env: tuple[tuple[str, str], ...] = ()  # build switches (FLASH_ATTN_CUDA_ARCHS=100)
    from_source: bool = False  # compile here: never a prebuilt wheel (`--no-binary NAME`)


@dataclass(frozen=True, slots=True)
class Satisfy:
    """What `requirer` declares and lacks: (requirement line, what is installed or "not installed")."""

    requirer: str
    unmet: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class InstallTorch:
    """torch is missing: install what the server and the FA packages declare."""


@dataclass(frozen=True, slots=True)
class CudaTorch:
    """torch is a CPU build: the CUDA build of the same release, for this GPU and driver."""

    version: str


@dataclass(frozen=True, slots=True)
class ReinstallOwners:
    """Two distributions own the same files: reinstall so the right copy is the one left on disk."""

    owners: tuple[str, ...]  # "name version"


@dataclass(frozen=True, slots=True)
class Override:
    """Unset the override; `valid`, a version that can work here, is offered as an alternative remedy."""

    valid: int | None = None


Intent = Union[Install, ReinstallSame, Rebuild, Satisfy, InstallTorch, CudaTorch, ReinstallOwners, Override]


def describe(intent: Intent) -> str:
    """One plain phrase for documentation (docs/errors.md)."""
    if isinstance(intent, Install):
        return f"install or reinstall `{intent.implementation}` (`fa-doctor check --python PATH` prints it)"
    if isinstance(intent, Rebuild):
        extra = ", from source" if intent.from_source else ""
        env = "".join(f", {k}={v}" for k, v in intent.env)
        return f"rebuild `{intent.name}` against the installed torch (no build isolation, no wheel cache{extra}{env})"
    if isinstance(intent, ReinstallSame):
        return "reinstall " + ", ".join(f"`{s}`" for s in intent.specs) + " without dependencies"
    return type(intent).__name__
