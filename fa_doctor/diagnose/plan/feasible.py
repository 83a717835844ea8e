"""Whether fa-doctor can carry out an action here: the one rule the planner marks remedies by and `fix --apply`
refuses by, in the same words (docs/fix.md, "One rule for what fa-doctor can do")."""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from fa_doctor.catalog import names
from fa_doctor.catalog.families import normalize
from fa_doctor.catalog.knobs import OVERRIDE
from fa_doctor.diagnose.derive.requires import version_of
from fa_doctor.model.actions import (
    Action,
    BuildFromClone,
    EditFile,
    MovePath,
    PipInstall,
    PipUninstall,
    RunCommand,
    SetEnv,
    UnsetEnv,
)
from fa_doctor.model.facts import Facts
from fa_doctor.model.install import Distribution

_REQ = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9._,-]*\])?\s*(?:[<>=!~].*)?\Z")
_URL_REQ = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9._,-]*\])?\s*@\s*)?https://\S+\Z")
_PIN = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?\s*===?\s*[^,\s)]+\s*\)?\s*\Z")
_FORBIDDEN_OPTIONS = ("-e", "--editable", "-r", "--requirement", "-c", "--constraint", "--src")
_BUILDS = ("--no-build-isolation", "--no-binary")  # how the planner asks for a build against this torch
SET_VALUES = (None, "2", "3", "4")  # what an env-file edit may write (None: remove the line)


@dataclass(frozen=True, slots=True)
class Ground:
    """What the rule reads of the target."""

    torch: str | None = None  # the installed torch's version as written; None: no torch installed
    cuda_torch: bool = False  # that torch is a CUDA build
    nvcc: str | None = None  # the CUDA compiler a build would use
    git: str | None = None
    protected: frozenset[str] = frozenset({names.TORCH})  # torch and every exact pin of the installed server
    protected_paths: frozenset[tuple[str, str]] = frozenset()  # (their metadata folders and packages, "torch 2.11.0")
    twice: frozenset[tuple[str, int]] = frozenset()  # (name, copies) of names with more than one copy on the path


def refusal(
    action: Action, ground: Ground, *, torch_move: bool = False, allow_torch_change: bool = False
) -> str | None:
    """None when fa-doctor can carry out `action` here, else why not; `torch_move`: the remedy is marked as replacing
    torch, allowed only with `allow_torch_change`."""
    if isinstance(action, (SetEnv, UnsetEnv)):
        return "it changes a variable of the calling shell, which a child process cannot do: paste it there"
    if isinstance(action, RunCommand):
        return "it is a command to run and read, not a repair"
    if isinstance(action, BuildFromClone):
        why = _build(ground)
        if why is None and ground.git is None:
            why = f"git is not installed here; the build needs a clone of {action.repo}"
        return why or _install(action.install, ground, torch_move, allow_torch_change, own=action.requirement)
    if isinstance(action, PipInstall):
        return _install(action, ground, torch_move, allow_torch_change, own=None)
    if isinstance(action, PipUninstall):
        return _uninstall(action, ground)
    if isinstance(action, MovePath):
        return _move(action, ground)
    if isinstance(action, EditFile):
        if action.variable != OVERRIDE:
            return f"fa-doctor edits only {OVERRIDE} in files, not {action.variable}"
        if action.value not in SET_VALUES:
            return f"{OVERRIDE} can be set to 2, 3 or 4 only, not {action.value!r}"
        return None
    return f"not an action fa-doctor can run: {type(action).__name__}"


def _name(requirement: str) -> str | None:
    head = re.split(r"[\[=<>!~;@\s]", requirement.strip(), maxsplit=1)[0]
    return normalize(head) if head and not head.startswith("https:") else None


def _build(ground: Ground) -> str | None:
    if ground.torch is None:
        return "it compiles against the installed torch, and no torch is installed"
    if not ground.cuda_torch:
        return f"it compiles CUDA code against torch {ground.torch}, which is not a CUDA build"
    if ground.nvcc is None:
        return (
            "it compiles CUDA code, and there is no nvcc here (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda): install "
            "a CUDA toolkit of torch's CUDA major first, or build where one is"
        )
    return None


def _install(
    pip: PipInstall, ground: Ground, torch_move: bool, allow_torch_change: bool, own: str | None
) -> str | None:
    for opt in pip.options:
        if opt.split("=", 1)[0] in _FORBIDDEN_OPTIONS:
            return f"the option {opt!r} reads files fa-doctor did not make"
    for req in pip.requirements:
        if req != own and (not (_REQ.match(req) or _URL_REQ.match(req)) or "file:" in req):
            return f"{req!r} is not a package name or an https URL (pip would read it from the working directory)"
    if own is None and any(o.split("=", 1)[0] in _BUILDS for o in pip.options) and (why := _build(ground)):
        return why
    torch = ground.torch
    no_deps = "--no-deps" in pip.options
    if torch_move:
        if torch is not None and not allow_torch_change:
            return f"it replaces torch {torch}; fa-doctor does that only with --allow-torch-change"
        return None
    if any(_name(r) == names.TORCH for r in pip.requirements):
        if torch is not None:
            return f"it would replace torch {torch}, and it is not a repair marked as moving torch"
        return None  # no torch to change: installing the one the server declares is the repair
    if torch is None:
        # --no-deps: pip installs exactly the named requirements; otherwise it would pick a torch itself.
        return (
            None if no_deps else "no torch is installed, so pip would choose one for this install: install torch first"
        )
    if version_of(torch) is None:
        return (
            f"the installed torch's version {torch!r} is not a PEP 440 version, so no constraint can hold it "
            "(reinstall torch from a release first)"
        )
    if no_deps:
        return None  # pip installs exactly the named requirements, none of them torch: torch cannot move
    wanted = f"{names.TORCH}=={torch}"
    held = [c.replace(" ", "") for c in pip.constraints if _name(c) == names.TORCH]
    return f"it does not hold torch at {torch} (no {wanted} constraint)" if wanted not in held else None


def _uninstall(action: PipUninstall, ground: Ground) -> str | None:
    copies = dict(ground.twice)
    for raw in action.names:
        name = normalize(raw)
        if name in ground.protected:
            return f"{raw} is torch or pinned by the server: fa-doctor never uninstalls it"
        if name in copies:
            return (
                f"{raw} has {copies[name]} copies on the path: `pip uninstall` would remove the first, the one the "
                "server imports; the shadowed copy is moved aside by its path instead"
            )
    return None


def _inside(path: str, root: str) -> bool:
    return path != root and path.startswith(root.rstrip("/") + "/")


def _move(action: MovePath, ground: Ground) -> str | None:
    for held, label in sorted(ground.protected_paths):
        if action.path == held or _inside(held, action.path) or _inside(action.path, held):
            return f"{action.path} holds the {label} the server imports"
    return None


def protected_names(servers: Iterable[Distribution]) -> frozenset[str]:
    """torch, and every name an installed server pins with `==` (markers are not judged: a pin under any marker
    is kept)."""
    pins = (_PIN.match(text.split(";", 1)[0]) for server in servers for text in server.requires)
    return frozenset({names.TORCH, *(normalize(m.group(1)) for m in pins if m)})


def owned_paths(dist: Distribution) -> tuple[tuple[str, str], ...]:
    """A distribution's metadata folder and its top-level packages (torch's `torch/` even without top_level.txt),
    each with the distribution's name and version."""
    tops = {*dist.top_level, *(("torch",) if dist.normalized == names.TORCH else ())}
    label = f"{dist.normalized} {dist.version}"
    paths = (dist.metadata_dir, *(posixpath.join(dist.location, t) for t in sorted(tops) if t))
    return tuple((posixpath.normpath(p), label) for p in paths)


def ground_from(dists: Iterable[Distribution], *, cuda_torch: bool, nvcc: str | None, git: str | None) -> Ground:
    """The ground from the distributions on the search path (each name's first copy first)."""
    first: dict[str, Distribution] = {}
    counts: Counter[str] = Counter()
    for dist in dists:
        first.setdefault(dist.normalized, dist)
        counts[dist.normalized] += 1
    protected = protected_names(first[s] for s in names.SERVERS if s in first)
    torch = first.get(names.TORCH)
    return Ground(
        torch=torch.version if torch is not None else None,
        cuda_torch=torch is not None and cuda_torch,
        nvcc=nvcc,
        git=git,
        protected=protected,
        protected_paths=frozenset(p for n in sorted(protected) if n in first for p in owned_paths(first[n])),
        twice=frozenset((n, c) for n, c in counts.items() if c > 1),
    )


def ground_of(facts: Facts) -> Ground:
    """The ground as `check` saw it."""
    cuda = facts.torch is not None and bool(facts.torch.cuda)
    return ground_from(facts.scan.distributions, cuda_torch=cuda, nvcc=facts.nvcc, git=facts.git)
