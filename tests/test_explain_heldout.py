"""The labelled report corpora of explain: well-formed, each thread once, and the held-out set as it was labelled.

tests/explain_heldout/ was collected after the rules were frozen (MANIFEST.json's `frozen`: the sha256 of every
rule file) from repositories no other folder has, and every report was recorded with its sha256 before explain
ran on it (benchmarks/explain_manifest.py). A report edited afterwards, or added without being recorded, fails
here.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from fa_doctor.knowledge import CATEGORIES

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS.parent / "scripts"))

from explain_learn import repository  # noqa: E402

HELDOUT = TESTS / "explain_heldout"
MANIFEST = json.loads((HELDOUT / "MANIFEST.json").read_text(encoding="utf-8"))
FOLDERS = ("explain_cases", "explain_reports", "explain_dev", "explain_heldout")
_NAME = re.compile(r"^[a-z0-9-]+__[a-z0-9][a-z0-9._-]*\.txt$")


def _reports(folder: str) -> list[Path]:
    return sorted((TESTS / folder).glob("*.txt"))


def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8").split("\n", 1)[0].removeprefix("source: ").strip()


def test_every_heldout_report_is_recorded_as_labelled() -> None:
    files = {p.name for p in _reports("explain_heldout")}
    assert files == set(MANIFEST["reports"]), "run: python benchmarks/explain_manifest.py label"
    for name, entry in MANIFEST["reports"].items():
        assert hashlib.sha256((HELDOUT / name).read_bytes()).hexdigest() == entry["sha256"], name
        assert entry["source"] == _source(HELDOUT / name)
    assert set(MANIFEST["frozen"]) == {"at", "head", "uncommitted", "rules"} and MANIFEST["frozen"]["rules"]


@pytest.mark.parametrize("folder", ["explain_dev", "explain_heldout"])
def test_reports_are_well_formed(folder: str) -> None:
    for path in _reports(folder):
        assert _NAME.match(path.name), path.name
        assert path.name.split("__")[0] in CATEGORIES, path.name
        lines = path.read_text(encoding="utf-8").split("\n")
        assert lines[0].startswith("source: https://github.com/") and repository(lines[0]), path.name
        assert lines[1].startswith("label: ") and len(lines[1]) > 30, path.name
        assert "".join(lines[2:]).strip(), path.name


def test_no_thread_is_in_two_folders_and_the_heldout_repositories_are_new() -> None:
    seen: dict[str, str] = {}
    for folder in ("explain_dev", "explain_heldout"):
        for path in _reports(folder):
            url = _source(path).lower()
            assert url not in seen, (path.name, seen.get(url))
            seen[url] = path.name
    earlier = {_source(p).lower() for f in ("explain_cases", "explain_reports") for p in _reports(f)}
    assert not earlier & set(seen)
    others = {repository(_source(p)) for f in FOLDERS[:3] for p in _reports(f)}
    heldout = {repository(_source(p)) for p in _reports("explain_heldout")}
    assert heldout and not heldout & others
