"""Every real metadata file we hold, read by fa-doctor and by the readers pip relies on.

Files: the corpus copied from released wheels and sdists (tests/corpus/metadata/**: METADATA, *.metadata,
PKG-INFO, requires.txt), the dist-info fixtures, and every distribution installed in this venv. Each is put in
a fresh ``*.dist-info`` / ``*.egg-info`` folder and read by ``importlib.metadata.Distribution.at``: name,
version, every field and ``requires`` must be what fa_doctor.probes.metadata gives. Each requirement is then
read by ``packaging.requirements.Requirement`` and by ``fa_doctor.requirements``: same name and specifier,
and the same marker answer wherever fa-doctor gives one.
"""

from __future__ import annotations

import functools
import re
import sys
from importlib.metadata import Distribution
from pathlib import Path, PurePosixPath

import pytest
from fakeenv import FakeEnv
from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from fa_doctor import requirements
from fa_doctor.probes import metadata
from fa_doctor.probes.distributions import scan_distributions

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "corpus" / "metadata"
FIXTURES = TESTS / "fixtures"
KINDS = {"METADATA": "dist-info", "PKG-INFO": "egg-info", "requires.txt": "requires"}


def _kind(path: Path) -> str | None:
    return KINDS.get(path.name) or ("dist-info" if path.name.endswith(".metadata") else None)


def _files() -> list[tuple[str, Path]]:
    found = sorted(p for p in CORPUS.rglob("*") if p.is_file() and _kind(p)) if CORPUS.is_dir() else []
    found += sorted(FIXTURES.glob("dist-info/*/METADATA")) + sorted(FIXTURES.glob("metadata/*/METADATA"))
    out = [(str(p.relative_to(TESTS)), p) for p in found]
    for entry in dict.fromkeys(sys.path):  # what is installed here: real files written by pip and setuptools
        if entry and Path(entry).is_dir() and "site-packages" in entry:
            for p in sorted([*Path(entry).glob("*.dist-info/METADATA"), *Path(entry).glob("*.egg-info/PKG-INFO")]):
                out.append((f"installed/{p.parent.name}/{p.name}", p))
    return out


FILES = _files()


def _reference(tmp_path: Path, path: Path) -> tuple[Distribution, str, str | None]:
    """importlib.metadata's Distribution for the file, fa-doctor's text of it, and a requires.txt if any."""
    kind, raw = _kind(path), path.read_bytes()
    requires_txt = None
    if kind == "requires":
        info = tmp_path / "corpus.egg-info"
        info.mkdir()
        (info / "PKG-INFO").write_bytes(b"Metadata-Version: 1.0\nName: corpus\nVersion: 0\n")
        (info / "requires.txt").write_bytes(raw)
        requires_txt, raw = metadata.file_text(raw), (info / "PKG-INFO").read_bytes()
    else:
        info = tmp_path / ("corpus-0.dist-info" if kind == "dist-info" else "corpus.egg-info")
        info.mkdir()
        (info / ("METADATA" if kind == "dist-info" else "PKG-INFO")).write_bytes(raw)
    return Distribution.at(info), metadata.file_text(raw), requires_txt


@pytest.mark.parametrize("path", [p for _, p in FILES], ids=[i for i, _ in FILES])
def test_reads_as_importlib_metadata(tmp_path: Path, path: Path) -> None:
    dist, text, requires_txt = _reference(tmp_path, path)
    ours = metadata.parse(text)
    theirs = dist.metadata
    assert ours.get("Content-Type") is None  # the one header under which email would read the body as MIME
    assert list(ours.items()) == list(theirs.items())
    assert (ours.get("Name"), ours.get("Version")) == (dist.name, dist.version)
    for key in {k.lower() for k in theirs}:
        assert (ours.get_all(key) or None) == theirs.get_all(key), key
    requires = ours.get_all("Requires-Dist") or (metadata.requires_txt(requires_txt) if requires_txt else None)
    assert (requires or None) == dist.requires


def test_corpus_is_counted() -> None:
    """The corpus (scripts/fetch_metadata_corpus.py) must not silently shrink: >= 200 real files."""
    assert len(FILES) >= 20
    if CORPUS.is_dir():
        assert sum(1 for i, _ in FILES if i.startswith("corpus/")) >= 200
        assert len(RECORDS) >= 3 and len(EGG_INFOS) >= 5


# Environments markers are evaluated in: fixed values, not this machine's.
_LINUX = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.7",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_release": "6.8.0-60-generic",
    "platform_system": "Linux",
    "platform_version": "#63-Ubuntu SMP PREEMPT_DYNAMIC",
    "python_full_version": "3.11.7",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "sys_platform": "linux",
}
_ENVS = [
    _LINUX,
    {**_LINUX, "python_version": "3.10", "python_full_version": "3.10.14", "implementation_version": "3.10.14"},
    {**_LINUX, "python_version": "3.13", "python_full_version": "3.13.1", "implementation_version": "3.13.1"},
    {**_LINUX, "python_version": "3.9", "python_full_version": "3.9.0", "platform_machine": "aarch64"},
    {**_LINUX, "sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64"},
    {**_LINUX, "sys_platform": "win32", "platform_system": "Windows", "os_name": "nt", "platform_machine": "AMD64"},
]
_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]*)['"]""")


@functools.cache
def _disagreements(line: str) -> tuple[str, ...]:
    """Where fa_doctor.requirements reads one requirement differently from packaging (empty: they agree)."""
    ours = requirements.parse(line)
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return ()  # pip rejects it too; fa-doctor only has to survive it (it did: parse returned)
    if ours is None:
        return (f"{line!r}: fa-doctor cannot read it",)
    problems = []
    if ours.name != req.name:
        problems.append(f"{line!r}: name {ours.name!r} != {req.name!r}")
    if req.url is None and SpecifierSet(ours.specifier) != req.specifier:
        problems.append(f"{line!r}: specifier {ours.specifier!r} != {str(req.specifier)!r}")
    if (ours.marker is None) != (req.marker is None):
        problems.append(f"{line!r}: marker {ours.marker!r} != {req.marker!r}")
    elif ours.marker is not None and req.marker is not None:
        problems += _marker_disagreements(line, ours.marker, req.marker)
    return tuple(problems)


def _marker_disagreements(line: str, text: str, marker: Marker) -> list[str]:
    out = []
    for env in _ENVS:
        for extra in {"", *_EXTRA.findall(text)}:
            full = {**env, "extra": extra}
            answer = requirements.marker_applies(text, full)
            expected = marker.evaluate(full)
            if answer is not None and answer != expected:
                out.append(f"{line!r}: marker {answer} != packaging's {expected} for {full}")
    return out


@pytest.mark.parametrize("path", [p for _, p in FILES], ids=[i for i, _ in FILES])
def test_requirements_read_as_packaging(path: Path) -> None:
    text = metadata.file_text(path.read_bytes())
    lines = metadata.requires_txt(text) if _kind(path) == "requires" else metadata.parse(text).get_all("Requires-Dist")
    problems = [p for line in lines for p in _disagreements(line)]
    assert not problems, "\n".join(problems)


RECORDS = sorted(FIXTURES.glob("dist-info/*.dist-info/RECORD")) + sorted(CORPUS.glob("**/*.dist-info/RECORD"))
EGG_INFOS = sorted(CORPUS.glob("**/*.egg-info"))


@pytest.mark.parametrize("record", RECORDS, ids=[str(p.relative_to(TESTS)) for p in RECORDS])
def test_record_as_importlib_metadata(record: Path) -> None:
    files = Distribution.at(record.parent).files
    assert files is not None
    ours = metadata.record_paths(metadata.file_text(record.read_bytes()))
    assert [str(PurePosixPath(p)) for p in ours] == [str(f) for f in files]


@pytest.mark.parametrize("info", EGG_INFOS, ids=[str(p.relative_to(TESTS)) for p in EGG_INFOS])
def test_egg_info_folder_as_importlib_metadata(info: Path) -> None:
    """A whole sdist egg-info folder: PKG-INFO's Requires-Dist, else requires.txt, as Distribution.requires."""
    dist = Distribution.at(info)
    ours = metadata.parse(metadata.file_text((info / "PKG-INFO").read_bytes()))
    requires = ours.get_all("Requires-Dist")
    if not requires and (info / "requires.txt").is_file():
        requires = metadata.requires_txt(metadata.file_text((info / "requires.txt").read_bytes()))
    assert (ours.get("Name"), ours.get("Version"), requires or None) == (dist.name, dist.version, dist.requires)


def test_installed_records_as_importlib_metadata() -> None:
    checked = 0
    for ident, path in FILES:
        record = path.parent / "RECORD"
        if ident.startswith("installed/") and record.is_file():
            files = Distribution.at(path.parent).files or []
            ours = metadata.record_paths(metadata.file_text(record.read_bytes()))
            assert [str(PurePosixPath(p)) for p in ours] == [str(f) for f in files], record
            checked += 1
    assert checked >= 10


def test_sglang_real_metadata_gives_139_requirements(tmp_path: Path) -> None:
    path = FIXTURES / "dist-info" / "sglang-0.5.23.dist-info" / "METADATA"
    dist, text, _ = _reference(tmp_path, path)
    requires = metadata.parse(text).get_all("Requires-Dist")
    assert len(requires) == 139 and requires == dist.requires


def test_scan_of_a_site_holding_sglang_reports_its_pins(tmp_path: Path) -> None:
    env = FakeEnv(tmp_path, sys.executable, tmp_path / "site-packages")  # the site alone: no interpreter needed
    text = (FIXTURES / "dist-info" / "sglang-0.5.23.dist-info" / "METADATA").read_text(encoding="utf-8")
    env.dist("sglang", "0.5.23", {"sglang/__init__.py": ""}, metadata=text, top_level=["sglang"])
    (dist,) = scan_distributions([str(env.site)]).named("sglang")
    assert (dist.version, dist.problem, len(dist.requires)) == ("0.5.23", None, 139)
    assert "torch==2.14.1" in dist.requires and "sglang-kernel==0.4.10" in dist.requires
