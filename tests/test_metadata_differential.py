"""Every real metadata file we hold, read through fa-doctor's bounded reader and by importlib.metadata alone.

Files: the corpus copied from released wheels and sdists (tests/corpus/metadata/**: METADATA, *.metadata,
PKG-INFO, requires.txt, whole dist-info and egg-info folders), the dist-info fixtures, and every distribution
installed in this venv. Each is put in a fresh ``*.dist-info`` / ``*.egg-info`` folder and scanned: the name,
version, requirements and files must be what ``importlib.metadata.Distribution.at`` gives for the same folder
(the bounds, the UTF-8 replacement and the line-end handling of ``_Bounded.read_text`` change nothing on real
files).
"""

from __future__ import annotations

import sys
from importlib.metadata import Distribution
from pathlib import Path

import pytest

from fa_doctor.probes.distributions import scan_distributions

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "corpus" / "metadata"
FIXTURES = TESTS / "fixtures"
KINDS = {"METADATA": "dist-info", "PKG-INFO": "egg-info", "requires.txt": "requires"}


def _kind(path: Path) -> str | None:
    return KINDS.get(path.name) or ("dist-info" if path.name.endswith(".metadata") else None)


def _files() -> list[tuple[str, Path]]:
    found = sorted(p for p in CORPUS.rglob("*") if p.is_file() and _kind(p)) if CORPUS.is_dir() else []
    found += sorted(FIXTURES.glob("dist-info/*/METADATA"))
    out = [(str(p.relative_to(TESTS)), p) for p in found]
    for entry in dict.fromkeys(sys.path):  # what is installed here: real files written by pip and setuptools
        if entry and Path(entry).is_dir() and "site-packages" in entry:
            for p in sorted([*Path(entry).glob("*.dist-info/METADATA"), *Path(entry).glob("*.egg-info/PKG-INFO")]):
                out.append((f"installed/{p.parent.name}/{p.name}", p))
    return out


FILES = _files()
RECORDS = sorted(FIXTURES.glob("dist-info/*.dist-info/RECORD")) + sorted(CORPUS.glob("**/*.dist-info/RECORD"))
EGG_INFOS = sorted(CORPUS.glob("**/*.egg-info"))


def _same(info: Path) -> None:
    """fa-doctor's scan of the folder holding `info` against importlib.metadata's reading of `info`."""
    (ours,) = scan_distributions([str(info.parent)], interesting=lambda _: True).distributions
    theirs = Distribution.at(info)
    assert (ours.name, ours.version, ours.problem) == (theirs.metadata["Name"], theirs.version, None)
    assert (list(ours.requires) or None) == theirs.requires
    if info.suffix == ".dist-info" and ours.files is not None:  # egg-info: installed-files.txt only (see reader)
        assert list(ours.files) == [str(f) for f in theirs.files or ()]


def _folder(tmp_path: Path, path: Path) -> Path:
    """A fresh metadata folder holding the file as it was published."""
    kind, raw = _kind(path), path.read_bytes()
    if kind == "requires":
        info = tmp_path / "corpus.egg-info"
        info.mkdir()
        (info / "PKG-INFO").write_bytes(b"Metadata-Version: 1.0\nName: corpus\nVersion: 0\n")
        (info / "requires.txt").write_bytes(raw)
    else:
        info = tmp_path / ("corpus-0.dist-info" if kind == "dist-info" else "corpus.egg-info")
        info.mkdir()
        (info / ("METADATA" if kind == "dist-info" else "PKG-INFO")).write_bytes(raw)
    return info


@pytest.mark.parametrize("path", [p for _, p in FILES], ids=[i for i, _ in FILES])
def test_reads_as_importlib_metadata(tmp_path: Path, path: Path) -> None:
    _same(_folder(tmp_path, path))


@pytest.mark.parametrize("record", RECORDS, ids=[str(p.relative_to(TESTS)) for p in RECORDS])
def test_record_as_importlib_metadata(tmp_path: Path, record: Path) -> None:
    info = tmp_path / "site" / record.parent.name
    info.mkdir(parents=True)
    (info / "RECORD").write_bytes(record.read_bytes())
    meta = record.parent / "METADATA"  # the corpus keeps some RECORDs without their METADATA
    (info / "METADATA").write_bytes(meta.read_bytes() if meta.is_file() else b"Name: corpus\nVersion: 0\n")
    _same(info)


@pytest.mark.parametrize("info", EGG_INFOS, ids=[str(p.relative_to(TESTS)) for p in EGG_INFOS])
def test_egg_info_folder_as_importlib_metadata(info: Path) -> None:
    """A whole sdist egg-info folder: PKG-INFO's Requires-Dist, else requires.txt."""
    _same(info)


def test_corpus_is_counted() -> None:
    """The corpus (scripts/fetch_metadata_corpus.py) must not silently shrink: >= 200 real files."""
    assert len(FILES) >= 20
    if CORPUS.is_dir():
        assert sum(1 for i, _ in FILES if i.startswith("corpus/")) >= 200
        assert len(RECORDS) >= 3 and len(EGG_INFOS) >= 5
