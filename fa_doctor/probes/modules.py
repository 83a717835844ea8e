"""Where an import name resolves on a search path, found as importlib's PathFinder/FileFinder would (a package with
`__init__`, then an extension, then a `.py`; namespace portions last; `pkgutil.extend_path`), without importing."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache

from fa_doctor.model.install import ModuleSpot
from fa_doctor.probes.files import is_regular, read

# extend_path is called near the top of an __init__.py; the rest is not read.
_INIT_BYTES = 65536


@lru_cache(maxsize=4096)
def listdir(path: str) -> frozenset[str]:
    """One listing per directory per run: shared by the distribution scan and module lookups."""
    try:
        return frozenset(os.listdir(path))
    except OSError:
        return frozenset()


@lru_cache(maxsize=4096)
def by_stem(path: str) -> dict[str, tuple[str, ...]]:
    """Directory entries grouped by the part before the first dot: lookups stay O(1) in big site-packages."""
    groups: dict[str, list[str]] = {}
    for name in listdir(path):
        groups.setdefault(name.split(".", 1)[0], []).append(name)
    return {k: tuple(v) for k, v in groups.items()}


@lru_cache(maxsize=16)
def _extension_pattern(python: tuple[int, int]) -> re.Pattern[str]:
    return re.compile(rf"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(\.cpython-{python[0]}{python[1]}[^.]*|\.abi3)?\.so$")


def _find_in(directory: str, leaf: str, ext: re.Pattern[str]) -> tuple[str, str] | None:
    """(kind, origin) for `leaf` in one directory, or ("namespace", dir), or None; only a regular file counts as a
    module or an ``__init__``, as in importlib's FileFinder (a FIFO is never opened)."""
    names = listdir(directory)
    if leaf in names:
        pkg = os.path.join(directory, leaf)
        inner = listdir(pkg)
        for init in ("__init__.py", "__init__.pyc"):
            if init in inner and is_regular(os.path.join(pkg, init)):
                return "package", os.path.join(pkg, init)
        if any(n.startswith("__init__.") and n.endswith(".so") and is_regular(os.path.join(pkg, n)) for n in inner):
            return "package", pkg
        if os.path.isdir(pkg):
            return "namespace", pkg
    for n in by_stem(directory).get(leaf, ()):  # grouped by the part before the first dot: the name ext matches
        if ext.match(n) and is_regular(os.path.join(directory, n)):
            return "extension", os.path.join(directory, n)
    for suffix in (".py", ".pyc"):
        if leaf + suffix in names and is_regular(os.path.join(directory, leaf + suffix)):
            return "module", os.path.join(directory, leaf + suffix)
    return None


def _uses_extend_path(init_file: str) -> bool:
    data = read(init_file, _INIT_BYTES).data
    return data is not None and b"extend_path" in data


def _search(leaf: str, locations: Sequence[str], ext: re.Pattern[str], name: str) -> ModuleSpot:
    portions: list[str] = []
    for entry in locations:
        hit = _find_in(entry, leaf, ext) if entry and os.path.isdir(entry) else None
        if hit is None:
            continue
        kind, origin = hit
        if kind == "namespace":
            portions.append(origin)
            continue
        search = (os.path.dirname(origin) if origin.endswith(("__init__.py", "__init__.pyc")) else origin,)
        return ModuleSpot(name, kind, origin, search if kind == "package" else (), entry)
    if portions:
        return ModuleSpot(name, "namespace", portions[0], tuple(portions), os.path.dirname(portions[0]))
    return ModuleSpot(name, "missing", None)


def resolve(name: str, sys_path: Sequence[str], python: tuple[int, int]) -> ModuleSpot:
    """Resolve a dotted module name. Parents must be packages, as importing them would require."""
    ext = _extension_pattern(python)
    parts = name.split(".")
    spot = _search(parts[0], sys_path, ext, parts[0])
    for depth, leaf in enumerate(parts[1:], start=2):
        if spot.kind not in ("package", "namespace"):
            missing_note = f"{spot.name} is not a package" if spot.found else f"{spot.name} is missing"
            return ModuleSpot(name, "missing", None, note=missing_note)
        locations = spot.search_locations
        if spot.kind == "package" and spot.origin and _uses_extend_path(spot.origin):
            sub = os.path.join(*spot.name.split("."))
            locations = tuple(dict.fromkeys([*locations, *(os.path.join(p, sub) for p in sys_path if p)]))
        spot = _search(leaf, locations, ext, ".".join(parts[:depth]))
    return spot
