"""Inventory findings: conflicts, broken, shadowed, duplicate and missing installs."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator, Mapping

from fa_doctor.catalog import names
from fa_doctor.catalog.families import FA_DISTRIBUTIONS, GUARDED_TOP_LEVEL, IMPLEMENTATIONS, family_of
from fa_doctor.diagnose.checks import remedies
from fa_doctor.diagnose.contain import collected
from fa_doctor.diagnose.derive.inventory import ImplState, inside, owner_roots, unmet_requirements
from fa_doctor.diagnose.derive.requires import installed, name_of
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.install import Distribution, ModuleSpot

# Requirements that break imports when wrong (torch pins of compiled builds, the FA4 runtime).
_CHECKED_REQUIREMENTS: dict[str, tuple[str, ...] | None] = {
    **{name: None for name in (names.FLASH_ATTN_4, *names.FA4_ALIASES)},
    **{name: (names.TORCH,) for name in names.SGL_KERNELS},
    # The servers: every requirement, as `pip check` reports them (the server dies on them first).
    **{name: None for name in names.SERVERS},
}


def inventory(facts: Facts, states: dict[str, ImplState]) -> list[Finding]:
    if listing := {s.impl.key: f"{s.dist.name} {s.dist.version}" for s in states.values() if s.dist}:
        head = Finding(
            "package.found",
            Severity.OK,
            "FlashAttention packages found",
            "; ".join(f"{k}: {v}" for k, v in listing.items()),
            listing,
        )
    else:
        head = Finding(
            "package.none",
            Severity.FAIL,
            "No FlashAttention implementation is installed",
            f"None of {', '.join(sorted({i.distributions[0] for i in IMPLEMENTATIONS}))} is installed for "
            f"{facts.target.executable}.",
            {"searched": list(facts.scan.entries), "distributions_seen": facts.scan.total},
            remedies.reinstall("fa3-sgl" if facts.scan.first(names.SGLANG) else "fa4", first=True),
        )
    return [head, *freshness(facts)]


# Whose releases fa-doctor's catalog tracks and judges by: the servers, the FA packages and SGLang's kernels.
_TRACKED = (*names.SERVERS, *names.SGL_KERNELS, names.FLASH_ATTN, names.FLASH_ATTN_4)


def freshness(facts: Facts) -> Iterator[Finding]:
    """One info finding when an installed server, FA or kernel release is newer than every release fa-doctor's
    catalog holds: what fa-doctor knows ends at the catalog's date."""
    from packaging.version import Version

    from fa_doctor.catalog import ecosystem, releases

    newer = []
    for name in _TRACKED:
        have = installed(facts, name)
        if have is None or not ecosystem.known(name) or ecosystem.exists(name, have):
            continue  # a release the catalog holds (its newest is looked up only for one it does not)
        if (newest := ecosystem.latest(name, pre=True)) is None:
            continue
        if Version(have.split("+", 1)[0]) > Version(newest):  # both parsed already: installed() and latest()
            newer.append(f"{name} {have} (the catalog's newest: {newest})")
    if not newer:
        return
    date = releases.GENERATED_ON
    yield Finding(
        "package.newer_than_catalog",
        Severity.INFO,
        f"fa-doctor's knowledge of releases ends at {date}",
        f"{'; '.join(newer)} {'is' if len(newer) == 1 else 'are'} newer than fa-doctor's catalog of releases "
        f"(generated {date} from the package index and the released wheels). What it says about "
        f"{'this release' if len(newer) == 1 else 'these releases'} comes from the installed files or the newest "
        "release it knows, not from the released artifacts.",
        {"catalog_generated_on": date, "newer": newer},
        (
            remedies.run(
                "Update fa-doctor (its catalog is part of the package), or regenerate the catalog from a checkout "
                "of fa-doctor: `python scripts/regen_catalog.py` (docs/catalog.md).",
                ("python", "-m", "pip", "install", "--upgrade", "fa-doctor"),
            ),
        ),
    )


def conflicts(facts: Facts) -> list[Finding]:
    owners: dict[str, list[str]] = defaultdict(list)
    for dist in facts.scan.distributions:
        for rel in dist.files or ():
            top = rel.split("/", 1)[0]
            if top.split(".", 1)[0] in GUARDED_TOP_LEVEL and not rel.endswith(".pyc"):
                owners[os.path.join(dist.location, rel)].append(f"{dist.name} {dist.version}")
    by_pair: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path, dists in owners.items():
        if len(set(dists)) > 1:
            by_pair[tuple(sorted(set(dists)))].append(path)
    if not by_pair:
        return []
    from fa_doctor.model.intents import ReinstallOwners  # here: a healthy check builds no remedy

    return [
        Finding(
            "package.conflict",
            Severity.FAIL,
            f"{' and '.join(pair)} own the same files",
            f"{len(paths)} file(s) under {os.path.commonpath(paths) if len(paths) > 1 else paths[0]} belong to "
            f"{len(pair)} distributions: whichever was installed last overwrote the other's copy, and uninstalling "
            "either deletes files the other needs.",
            {"distributions": list(pair), "files": sorted(paths)[:20], "count": len(paths)},
            (remedies.planned(ReinstallOwners(pair)),),
        )
        for pair, paths in by_pair.items()
    ]


@collected
def broken_and_shadowed(facts: Facts, states: dict[str, ImplState]) -> Iterator[Finding]:
    for state in states.values():
        if (dist := state.dist) is None:
            continue
        if state.broken:
            yield Finding(
                "package.broken",
                Severity.FAIL,
                f"{state.impl.label} is installed but broken",
                " ".join(state.broken),
                {
                    "implementation": state.impl.key,
                    "distribution": dist.name,
                    "version": dist.version,
                    "location": dist.location,
                    "reasons": list(state.broken),
                },
                remedies.reinstall(state.impl.key),
            )
        if state.shadowed:
            yield Finding(
                "package.shadowed",
                Severity.FAIL,
                f"`import {state.spot.name}` does not load {dist.name}",
                state.shadowed + ". Something earlier on the search path (a source checkout in the working directory, "
                "PYTHONPATH, or another site directory) wins.",
                {
                    "module": state.spot.name,
                    "resolves_to": state.spot.origin,
                    "distribution": dist.name,
                    "installed_at": dist.location,
                },
                (
                    remedies.run(
                        "Run the server from outside the source checkout, or remove the earlier copy from the path "
                        "(check PYTHONPATH and user site-packages).",
                        ("printenv", "PYTHONPATH"),
                    ),
                    *remedies.reinstall(state.impl.key),
                ),
            )


@collected
def unmanaged(facts: Facts, spots: Mapping[str, ModuleSpot]) -> Iterator[Finding]:
    """FA import names that resolve to files no installed distribution owns (a checkout, a leftover)."""
    for name, spot in spots.items():
        origin = spot.origin
        if not spot.found or origin is None or any(_owns(d, name, origin) for d in facts.scan.distributions):
            continue
        yield Finding(
            "package.unmanaged",
            Severity.WARN,
            f"`import {name}` loads files no installed distribution owns",
            f"{name} resolves to {origin}, which no distribution's metadata lists: a source checkout, a "
            "copied folder, or what an uninstall left behind. Its version cannot be known.",
            {"module": name, "resolves_to": origin},
            _move_stray(spot.name, spot.kind, origin, spot.search_locations, spot.entry),
        )


def _owns(dist: Distribution, name: str, origin: str) -> bool:
    in_files = (f.split("/", 1)[0].split(".")[0] == name for f in dist.files or ())
    return inside(origin, owner_roots(dist)) and (name in dist.top_level or any(in_files))


def _move_stray(name: str, kind: str, origin: str, search: tuple[str, ...], entry: str | None) -> tuple[Remedy, ...]:
    """Move the module itself (the package folder, or the one file) aside, checked to lie inside its path entry."""
    from fa_doctor.model.actions import move_aside  # here: a healthy check builds no remedy

    text = "Move the stray copy aside (nothing is deleted; or run from another directory), then reinstall the package "
    try:
        if kind in ("package", "namespace"):
            folder = search[0] if search else origin
            root = entry or os.path.dirname(folder)
            if os.path.basename(os.path.normpath(folder)) != name.split(".")[-1]:
                raise ValueError(f"{folder!r} is not the {name} package folder")
            action = move_aside(os.path.abspath(folder), os.path.abspath(root))
        else:
            action = move_aside(os.path.abspath(origin), os.path.abspath(entry or os.path.dirname(origin)))
    except ValueError as exc:
        return (Remedy(f"Remove the stray copy by hand: fa-doctor will not move it ({exc}).", ()),)
    return (Remedy(text + "you want.", actions=(action,)),)


@collected
def duplicates(facts: Facts) -> Iterator[Finding]:
    seen: dict[str, list[str]] = defaultdict(list)
    for dist in facts.scan.distributions:
        seen[dist.normalized].append(f"{dist.version} at {dist.location}")
    for name, where in seen.items():
        if len(where) > 1 and (name in FA_DISTRIBUTIONS or family_of(name) != "other"):
            yield Finding(
                "package.duplicate",
                Severity.WARN,
                f"{name} is installed {len(where)} times",
                f"Only the first on the search path is used: {where[0]}; the others ({'; '.join(where[1:])}) are "
                "shadowed and confuse pip.",
                {"distribution": name, "copies": where},
                _move_shadowed(facts, name),
            )


@collected
def requirements(facts: Facts) -> Iterator[Finding]:
    for dist in facts.scan.distributions:
        if dist.normalized not in _CHECKED_REQUIREMENTS or facts.scan.first(dist.normalized) is not dist:
            continue
        if not (unmet := unmet_requirements(dist, facts, _CHECKED_REQUIREMENTS[dist.normalized])):
            continue
        from fa_doctor.model.intents import Satisfy

        torch_pin = any(name_of(r) == "torch" for r, _ in unmet)
        missing = any(have == "not installed" for _, have in unmet)
        # The FA package behind the distribution, reinstalled (a server's own reinstall is not the remedy).
        key = next((i.key for i in IMPLEMENTATIONS if dist.normalized in i.distributions), None)
        # torch first: a pin on another torch decides what can be done about everything else.
        ordered = sorted(unmet, key=lambda u: name_of(u[0]) != names.TORCH)
        detail = "; ".join(f"requires {r}, found {have}" for r, have in ordered)
        if torch_pin and dist.normalized not in names.SERVERS:
            detail += (
                ". Its compiled kernels link against that torch's C++ symbols: with another torch, import fails "
                "with `undefined symbol`"
            )
        yield Finding(
            "package.requirement",
            Severity.FAIL if missing or torch_pin else Severity.WARN,
            f"{dist.name} {dist.version}: requirements not met",
            detail + ".",
            {
                "distribution": dist.name,
                "version": dist.version,
                "unmet": [{"requirement": r, "found": h} for r, h in unmet],
            },
            (
                remedies.planned(Satisfy(dist.name, tuple(unmet))),
                *(remedies.reinstall(key) if key and dist.normalized not in names.SERVERS else ()),
            ),
        )


def _move_shadowed(facts: Facts, name: str) -> tuple[Remedy, ...]:
    """Move the metadata of every shadowed copy aside, by its path: pip and fa-doctor then see one copy, and the
    copy the server imports is never touched (`pip uninstall NAME` would remove the first one, the server's)."""
    from fa_doctor.model.actions import Action, move_aside

    moves: list[Action] = []
    for dist in facts.scan.named(name)[1:]:
        try:
            moves.append(move_aside(os.path.abspath(dist.metadata_dir), os.path.abspath(dist.location)))
        except ValueError:
            continue
    if not moves:
        return (Remedy("Remove the shadowed copies by hand: fa-doctor cannot move their metadata.", ()),)
    return (
        Remedy(
            "Move the shadowed copies' metadata aside (nothing is deleted; the copy first on the path, the one the "
            "server imports, stays as it is). Their files stay shadowed; delete them by hand once the server runs.",
            actions=tuple(moves),
        ),
    )
