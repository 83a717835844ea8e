"""Installed distributions on the target's search path, read from their metadata only.

Every path entry is listed once; only distributions whose name marks them as part of an FA stack
have their metadata opened, so the cost stays flat in the number of installed distributions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from fa_doctor.families import is_interesting, normalize
from fa_doctor.frozen import field, frozen
from fa_doctor.probes import metadata
from fa_doctor.probes.files import read, read_text
from fa_doctor.probes.modules import listdir

# RECORDs of these are large and own nothing in FA namespaces: skip reading them.
_SKIP_RECORD = frozenset({"torch", "sglang", "vllm", "transformers", "flashinfer-python"})
# Read limits: METADATA headers come first; a RECORD of an FA package is well under a megabyte.
_METADATA_BYTES = 1 << 20
_RECORD_BYTES = 8 << 20
_SMALL_BYTES = 1 << 16


@frozen
class Distribution:
    name: str
    normalized: str
    version: str
    location: str  # the search-path entry holding its metadata
    metadata_dir: str
    requires: tuple[str, ...] = ()
    top_level: tuple[str, ...] = ()
    files: tuple[str, ...] | None = None  # RECORD paths, relative to `location`; None when not read or absent
    installer: str | None = None
    editable_dir: str | None = None  # source tree of an editable install
    direct_url: str | None = None  # URL it was installed from (wheel file names carry the build tag)
    problem: str | None = None  # metadata unreadable

    def to_dict(self) -> dict[str, object]:
        return {
            "distribution": self.name,
            "version": self.version,
            "location": self.location,
            "metadata": self.metadata_dir,
            "installer": self.installer,
            "editable": self.editable_dir,
            "direct_url": self.direct_url,
        }


@frozen
class DistributionScan:
    distributions: tuple[Distribution, ...]  # interesting ones, in search-path order
    total: int  # every distribution seen, interesting or not
    entries: tuple[str, ...]  # search-path directories scanned
    index: Mapping[str, str] = field(default_factory=dict)  # normalised name -> version, first on the path

    def named(self, *names: str) -> list[Distribution]:
        wanted = {normalize(n) for n in names}
        return [d for d in self.distributions if d.normalized in wanted]

    def first(self, *names: str) -> Distribution | None:
        found = self.named(*names)
        return found[0] if found else None


def _name_from_dirname(dirname: str) -> str:
    stem = dirname.rsplit(".", 1)[0]
    return normalize(stem.split("-", 1)[0])


def _read(path: str, limit: int = _RECORD_BYTES) -> str | None:
    return read_text(path, limit)


def _metadata_text(meta_dir: str, expected: str) -> tuple[str | None, str | None]:
    """(text, problem): the first non-empty of METADATA, PKG-INFO and the path itself (an egg-info file), the
    order importlib.metadata tries them in; the problem names the file this kind of folder should hold."""
    problem = f"no {expected} file"
    for name in ("METADATA", "PKG-INFO", ""):
        got = read(os.path.join(meta_dir, name) if name else meta_dir, _METADATA_BYTES)
        if got.data:
            return metadata.file_text(got.data), None
        if name == expected and not got.missing:
            problem = f"{expected} is {got.problem or 'empty'}"
    return None, problem


def _load(entry: str, meta_dir: str) -> Distribution:
    dirname = os.path.basename(os.path.dirname(meta_dir) if meta_dir.endswith("EGG-INFO") else meta_dir)
    is_dist_info = dirname.endswith(".dist-info")
    expected = "METADATA" if is_dist_info else "PKG-INFO"
    text, problem = _metadata_text(meta_dir, expected)
    guess = _name_from_dirname(dirname)
    if text is None:
        return Distribution(guess, guess, "?", entry, meta_dir, problem=problem)
    meta = metadata.parse(text)
    name, version = meta.get("Name"), meta.get("Version")
    if not (name and version):
        problem = f"{expected} has no Name or Version"
    norm = normalize(name or guess)
    # As importlib.metadata: Requires-Dist, else an egg-info requires.txt with its [extra:marker] sections.
    requires = meta.get_all("Requires-Dist")
    if not requires:
        requires_txt = _read(os.path.join(meta_dir, "requires.txt"), _SMALL_BYTES)
        requires = metadata.requires_txt(requires_txt) if requires_txt else []
    top_text = _read(os.path.join(meta_dir, "top_level.txt"), _SMALL_BYTES) or ""
    files: tuple[str, ...] | None = None
    if norm in _SKIP_RECORD:  # large RECORDs that own nothing in FA namespaces: not read
        files = None
    elif is_dist_info:
        record = _read(os.path.join(meta_dir, "RECORD"))
        if record:
            files = metadata.record_paths(record)
    else:
        sources = _read(os.path.join(meta_dir, "installed-files.txt"), _RECORD_BYTES)
        if sources:
            files = tuple(
                os.path.relpath(os.path.normpath(os.path.join(meta_dir, p)), entry) for p in sources.splitlines() if p
            )
    direct = _read(os.path.join(meta_dir, "direct_url.json"), _SMALL_BYTES)
    url = metadata.direct_url(direct) if direct else None
    installer = (_read(os.path.join(meta_dir, "INSTALLER"), 256) or "").strip() or None
    return Distribution(
        name=name or guess,
        normalized=norm,
        version=version or "?",
        location=entry,
        metadata_dir=meta_dir,
        requires=tuple(requires),
        top_level=tuple(t.strip() for t in top_text.splitlines() if t.strip()),
        files=files,
        installer=installer,
        editable_dir=url.editable_dir if url else None,
        direct_url=url.url if url else None,
        problem=problem,
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
        for name, stem in zip(normalized, stems, strict=True):
            index.setdefault(name, stem[1].split("-", 1)[0] if len(stem) > 1 else "?")
        for name, dirname in zip(normalized, metas, strict=True):
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
