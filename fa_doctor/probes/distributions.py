"""Installed distributions on the target's search path, read with importlib.metadata's `PathDistribution`, FA-stack
names only, through probes/files.py; what cannot be read is a `problem` (docs/internals.md, "Distributions")."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Sequence
from functools import cached_property
from importlib.metadata import PackageMetadata, PathDistribution
from pathlib import Path
from urllib.parse import unquote, urlsplit

from fa_doctor.catalog.families import is_interesting, normalize
from fa_doctor.model.install import Distribution, DistributionScan
from fa_doctor.probes.files import read
from fa_doctor.probes.modules import listdir

_SKIP_RECORD = frozenset({"torch", "sglang", "vllm", "transformers", "flashinfer-python"})
# Each file is read up to its limit ("": an egg-info that is a file); RECORDs of _SKIP_RECORD are large, not read.
_LIMITS = {
    **dict.fromkeys(("METADATA", "PKG-INFO", ""), 1 << 20),
    **dict.fromkeys(("RECORD", "installed-files.txt"), 8 << 20),
    "INSTALLER": 256,
}
_SMALL_BYTES = 1 << 16  # requires.txt, top_level.txt, direct_url.json, entry_points.txt


def _name_from_dirname(dirname: str) -> str:
    return normalize(dirname.rsplit(".", 1)[0].split("-", 1)[0])


class _Bounded(PathDistribution):
    """importlib.metadata's reader of one metadata folder, its files read through probes/files.py (bad UTF-8
    replaced, line ends as `Path.read_text`); why a file gave no text is kept in `problems`, by name."""

    def __init__(self, folder: str) -> None:
        super().__init__(Path(folder))
        self.folder = folder
        self.problems: dict[str, str] = {}

    @cached_property
    def metadata(self) -> PackageMetadata:  # read once: `requires` asks for it again
        return super().metadata

    def read_text(self, filename: str | os.PathLike[str]) -> str | None:
        name = os.fspath(filename)
        got = read(os.path.join(self.folder, name) if name else self.folder, _LIMITS.get(name, _SMALL_BYTES))
        if not got.data:
            self.problems[name] = got.problem or "empty"
            return None
        text = got.data.decode("utf-8", "replace")
        return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _first(meta: PackageMetadata, key: str) -> str | None:
    return str(values[0]) if (values := meta.get_all(key)) else None


def _files(dist: _Bounded, entry: str, egg: bool) -> tuple[str, ...] | None:
    """The installed files, relative to `entry`: an egg-info's from installed-files.txt (as Python 3.12 reads it),
    never SOURCES.txt (the source tree, not what a build put on the path)."""
    if egg:
        listed = dist.read_text("installed-files.txt")
        if not listed:
            return None
        return tuple(
            os.path.relpath(os.path.normpath(os.path.join(dist.folder, p)), entry) for p in listed.splitlines() if p
        )
    try:
        found = dist.files
    except (csv.Error, ValueError, TypeError):  # a RECORD row importlib.metadata cannot read (a bad size, 4 columns)
        return None
    return None if found is None else tuple(str(f) for f in found)


def _direct_url(text: str | None) -> tuple[str | None, str | None]:
    """(url, source tree of an editable install from a local folder) of a PEP 610 direct_url.json, or neither."""
    try:
        data = json.loads(text or "null")
    except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested deeper than the stack
        return None, None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url:
        return None, None
    dir_info = data.get("dir_info")
    parts = urlsplit(url)
    if not (isinstance(dir_info, dict) and dir_info.get("editable") is True and parts.scheme == "file"):
        return url, None
    path = unquote(parts.path)
    return url, (path if parts.netloc in ("", "localhost") else f"//{parts.netloc}{path}") or None


def _load(entry: str, meta_dir: str) -> Distribution:
    dirname = os.path.basename(os.path.dirname(meta_dir) if meta_dir.endswith("EGG-INFO") else meta_dir)
    is_dist_info = dirname.endswith(".dist-info")
    expected = "METADATA" if is_dist_info else "PKG-INFO"
    dist = _Bounded(meta_dir)
    meta = dist.metadata  # METADATA, else PKG-INFO, else the path itself (an egg-info file)
    guess = _name_from_dirname(dirname)
    # None of them gave text (newer importlib.metadata then answers None, 3.10-3.12 an empty message).
    if meta is None or {"METADATA", "PKG-INFO", ""} <= dist.problems.keys():
        why = dist.problems[expected]
        missing = f"no {expected} file" if why == "no such file" else f"{expected} is {why}"
        return Distribution(guess, guess, "?", entry, meta_dir, problem=missing)
    name, version = _first(meta, "Name"), _first(meta, "Version")
    problem = None if name and version else f"{expected} has no Name or Version"
    norm = normalize(name or guess)
    requires = tuple(dist.requires or ())  # Requires-Dist, else requires.txt with its [extra:marker] sections
    top = tuple((dist.read_text("top_level.txt") or "").split())
    files = None if norm in _SKIP_RECORD else _files(dist, entry, not is_dist_info)
    installer = (dist.read_text("INSTALLER") or "").strip() or None
    url, editable = _direct_url(dist.read_text("direct_url.json"))
    return Distribution(
        name or guess, norm, version or "?", entry, meta_dir, requires, top, files, installer, editable, url, problem
    )


def scan_distributions(
    sys_path: Sequence[str], interesting: Callable[[str], bool] = is_interesting
) -> DistributionScan:
    found: list[Distribution] = []
    index: dict[str, str] = {}
    total = 0
    entries: list[str] = []
    for entry in dict.fromkeys(p for p in sys_path if p):
        names = listdir(entry)
        if not names:
            continue
        entries.append(entry)
        metas = sorted(n for n in names if n.endswith((".dist-info", ".egg-info")))
        total += len(metas)
        # One pass over all names at C speed (a site-packages can hold thousands): normalise, then index.
        # "/" joins them: the one character (with NUL) that no file name can hold, so the split gives them back.
        stems = [n.rsplit(".", 1)[0].split("-", 1) for n in metas]
        joined = "/".join(s[0] for s in stems).lower().replace("_", "-").replace(".", "-")
        normalized = [normalize(n) if "--" in n else n for n in joined.split("/")] if metas else []
        for name, stem, dirname in zip(normalized, stems, metas, strict=True):
            index.setdefault(name, stem[1].split("-", 1)[0] if len(stem) > 1 else "?")
            if interesting(name):
                found.append(_load(entry, os.path.join(entry, dirname)))
        # An .egg directory (easy_install, `setup.py install`) is itself a search-path entry.
        if entry.endswith(".egg") and "EGG-INFO" in names:
            total += 1
            if interesting(_name_from_dirname(os.path.basename(entry))):
                found.append(_load(entry, os.path.join(entry, "EGG-INFO")))
    # METADATA beats the directory name; the first on the path wins.
    first: dict[str, str] = {}
    for dist in found:
        first.setdefault(dist.normalized, dist.version)
    index.update({k: v for k, v in first.items() if v != "?"})
    return DistributionScan(tuple(found), total, tuple(entries), index)
