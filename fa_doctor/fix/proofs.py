"""Before `fix --apply` changes anything, every step is proven (docs/fix.md, "Prove every step"): the planner's own
rule first (`diagnose.plan.feasible`, on the target as read now), then pip's resolver (`--dry-run --report`) for an
install, and the checks of an uninstall or a move; what cannot be proven is Refused."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fa_doctor.catalog import names
from fa_doctor.catalog.families import normalize
from fa_doctor.diagnose.plan import feasible
from fa_doctor.model.actions import Action, MovePath, PipUninstall
from fa_doctor.model.install import Distribution

# pip's own words when the index (or a proxy) cannot be reached; any one of them settles it.
NETWORK = re.compile(
    r"Failed to establish a new connection|NewConnectionError|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|ReadTimeoutError|"
    r"Max retries exceeded|Could not fetch URL|ProxyError|SSLError|Connection (?:aborted|reset)|"
    r"No route to host|Read timed out|Connection timed out|Could not resolve host|unable to access",
    re.IGNORECASE,
)


class Failed(Exception):
    """A step ran and failed (its exit code and output kept for the report)."""

    def __init__(self, message: str, returncode: int | None = None, output: str = "") -> None:
        super().__init__(message)
        self.returncode, self.output = returncode, output


class Refused(Exception):
    """The step cannot be proven safe; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Inventory:
    """The target's distributions, read from its search path just before the proofs."""

    copies: Mapping[str, tuple[Distribution, ...]]  # normalised name -> copies, first on the path first
    protected: frozenset[str]  # torch and every exact pin of an installed server

    def first(self, name: str) -> Distribution | None:
        found = self.copies.get(normalize(name), ())
        return found[0] if found else None


def forget_listings() -> None:
    """The check's folder listings are cached: stale once anything may have changed."""
    from fa_doctor.probes import modules

    modules.listdir.cache_clear()
    modules.by_stem.cache_clear()


def scan(sys_path: Sequence[str], interesting: Callable[[str], bool]) -> tuple[Distribution, ...]:
    """The distributions on the path as they are now."""
    from fa_doctor.probes.distributions import scan_distributions

    forget_listings()
    return scan_distributions(sys_path, interesting).distributions


def read_inventory(sys_path: Sequence[str]) -> Inventory:
    copies: dict[str, list[Distribution]] = {}
    for dist in scan(sys_path, lambda name: True):
        copies.setdefault(dist.normalized, []).append(dist)
    servers = [copies[normalize(s)][0] for s in names.SERVERS if copies.get(normalize(s))]
    return Inventory({k: tuple(v) for k, v in copies.items()}, feasible.protected_names(servers))


def ground(inventory: Inventory, sys_path: Sequence[str], env: Mapping[str, str]) -> feasible.Ground:
    """The ground the feasibility rule reads, from the target as it is now (the planner read it from the check)."""
    from fa_doctor.probes.environment import find_git, find_nvcc
    from fa_doctor.probes.torch_build import read_torch_build

    build = read_torch_build(sys_path) if inventory.first(names.TORCH) is not None else None
    dists = [d for copies in inventory.copies.values() for d in copies]
    cuda = build is not None and bool(build.cuda)
    return feasible.ground_from(dists, cuda_torch=cuda, nvcc=find_nvcc(env), git=find_git(env))


def check_feasible(action: Action, ground: feasible.Ground, torch_move: bool) -> None:
    """The planner's rule, asked again on the target as it is now: what it refuses is refused here."""
    why = feasible.refusal(action, ground, torch_move=torch_move, allow_torch_change=torch_move)
    if why is not None:
        raise Refused(f"{why}; not run")


@dataclass(slots=True)
class InstallProof:
    """What pip said it would do, and what that replaces."""

    items: list[tuple[str, str, bool]]  # (name, version, requested)
    replaces: list[Distribution]  # installed copies pip will take out


def read_report(path: str) -> list[tuple[str, str, bool]]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        return [
            (normalize(str(i["metadata"]["name"])), str(i["metadata"]["version"]), bool(i.get("requested")))
            for i in doc.get("install", [])
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Refused(f"pip's dry-run report cannot be read ({exc}); not run") from None


def check_report(items: list[tuple[str, str, bool]], inventory: Inventory, may_move_torch: bool) -> list[Distribution]:
    """Refuse what pip would do that fa-doctor may not; return the installed copies it would replace."""
    replaces: list[Distribution] = []
    for name, version, requested in items:
        copies = inventory.copies.get(name, ())
        have = copies[0] if copies else None
        if name == names.TORCH and not may_move_torch and not (have is None and requested):
            # A torch the step names where none is installed changes nothing: that install is the repair.
            verb = f"replace torch {have.version} with {version}" if have else f"install torch {version}"
            raise Refused(f"pip would {verb}; fa-doctor never changes torch without --allow-torch-change")
        if name in inventory.protected and name != names.TORCH and have is not None:
            if have.version != version:
                raise Refused(f"pip would replace {name} {have.version}, which the server pins, with {version}")
            if not requested:
                raise Refused(f"pip would reinstall {name}, which the server pins, though the step does not name it")
        if len(copies) > 1:
            where = ", ".join(f"{c.version} in {c.location}" for c in copies)
            raise Refused(
                f"{name} has {len(copies)} copies on the path ({where}): pip would replace the first, the one the "
                "server imports; move the shadowed copy aside first"
            )
        if have is not None:
            if not os.access(have.location, os.W_OK):
                raise Refused(f"{have.location} is not writable: pip cannot replace {name} there")
            replaces.append(have)
    return replaces


def check_uninstall(action: PipUninstall, inventory: Inventory) -> list[Distribution]:
    """The copies it removes (torch, the server's pins and names with two copies were refused by `feasible`)."""
    out = []
    for raw in action.names:
        copies = inventory.copies.get(normalize(raw), ())
        if not copies:
            raise Refused(f"{raw} is not installed; nothing to uninstall")
        if not os.access(copies[0].location, os.W_OK):
            raise Refused(f"{copies[0].location} is not writable")
        out.append(copies[0])
    return out


def _real(path: str) -> str:
    """The folder resolved, the last name kept (a symlink is moved as a link)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _inside(path: str, root: str) -> bool:
    return path != root and path.startswith(root.rstrip("/") + "/")


def check_move(action: MovePath, inventory: Inventory) -> tuple[str, str]:
    """(source, destination) resolved, once proven."""
    root = os.path.realpath(action.root)
    src, dst = _real(action.path), _real(action.backup)
    if not (_inside(src, root) and _inside(dst, root)):
        raise Refused(f"{action.path} or its backup resolves outside {action.root}; not moved")
    if not os.path.lexists(src):
        raise Refused(f"{action.path} is gone already; nothing to move")
    if os.path.lexists(dst):
        raise Refused(f"{action.backup} exists; not moved (nothing is overwritten)")
    try:
        same = os.stat(os.path.dirname(src)).st_dev == os.stat(os.path.dirname(dst)).st_dev
    except OSError as exc:
        raise Refused(f"cannot read {os.path.dirname(dst)}: {exc.strerror or exc}; not moved") from None
    if not same:
        raise Refused(f"{action.backup} is on another filesystem than {action.path}; not moved")
    for folder in {os.path.dirname(src), os.path.dirname(dst)}:
        if not os.access(folder, os.W_OK):
            raise Refused(f"{folder} is not writable; not moved")
    for name in sorted(inventory.protected):
        have = inventory.first(name)
        if have is None:
            continue
        tops = {*have.top_level, *(("torch",) if name == names.TORCH else ())}
        owned = [have.metadata_dir, *(os.path.join(have.location, t) for t in tops)]
        for path in (_real(p) for p in owned):
            if src == path or _inside(path, src) or _inside(src, path):
                raise Refused(f"{action.path} holds the {name} {have.version} the server imports; not moved")
    return src, dst
