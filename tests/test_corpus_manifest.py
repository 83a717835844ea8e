"""The metadata corpus (tests/corpus/metadata) is exactly what its MANIFEST.json lists, byte for byte.

The files are real released metadata, fetched by scripts/fetch_metadata_corpus.py; a file edited by hand, added
without the script or dropped from the folder fails here.
"""

from __future__ import annotations

import datetime
import email
import hashlib
import json
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus" / "metadata"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))
NOT_CORPUS = {"MANIFEST.json", ".gitignore"}


def _files() -> set[str]:
    return {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file() and p.name not in NOT_CORPUS}


def test_every_file_is_in_the_manifest_and_every_entry_is_a_file() -> None:
    files = _files()
    assert files - set(MANIFEST) == set(), "files missing from MANIFEST.json"
    assert set(MANIFEST) - files == set(), "MANIFEST.json lists files that are not there"


@pytest.mark.parametrize("rel", sorted(MANIFEST))
def test_sha256_and_entry(rel: str) -> None:
    entry = MANIFEST[rel]
    data = (CORPUS / rel).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert set(entry) == {"url", "artifact", "artifact_sha256", "member", "sha256", "fetched"}
    name, artifact = rel.split("/")[:2]
    # the path says what the file is: <project>/<artifact file name>[.metadata | /<member>]
    assert artifact in (entry["artifact"], entry["artifact"] + ".metadata")
    assert entry["url"].startswith("https://files.pythonhosted.org/") and entry["url"].endswith("/" + entry["artifact"])
    datetime.date.fromisoformat(entry["fetched"])
    assert name == name.lower() and "_" not in name  # normalised project name


def test_size_and_count() -> None:
    files = _files()
    assert len(files) >= 230
    assert sum((CORPUS / f).stat().st_size for f in files) < 6_000_000


@pytest.mark.parametrize("rel", sorted(r for r in MANIFEST if r.endswith((".metadata", "PKG-INFO"))))
def test_metadata_files_have_a_metadata_version(rel: str) -> None:
    msg = email.message_from_bytes((CORPUS / rel).read_bytes())
    assert msg["Metadata-Version"], rel
    assert msg["Name"] and msg["Version"], rel


def test_requires_txt_sections_of_every_kind_are_present() -> None:
    sections = set()
    for rel in MANIFEST:
        if rel.endswith("requires.txt"):
            for line in (CORPUS / rel).read_text(encoding="utf-8").splitlines():
                if line.startswith("["):
                    extra, colon, marker = line.strip("[]").partition(":")
                    sections.add(("extra" if extra else "") + (":marker" if colon and marker else ""))
    assert {"extra", ":marker", "extra:marker"} <= sections
