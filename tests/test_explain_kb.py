"""The knowledge base (fa_doctor/knowledge/errors.json): valid, complete, documented, and rejected when malformed."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from fa_doctor.knowledge import CATEGORIES, KnowledgeError, load
from fa_doctor.knowledge.base import CAUSES, parse
from fa_doctor.render.shell import remedy_lines

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from errors_md import markdown  # noqa: E402

RAW = json.loads((ROOT / "fa_doctor" / "knowledge" / "errors.json").read_text(encoding="utf-8"))


def test_loads_once_and_validates() -> None:
    entries = load()
    assert entries is load() and len(entries) >= 40
    assert len({e.id for e in entries}) == len(entries)


def test_every_category_has_entries() -> None:
    assert {e.category for e in load()} == set(CATEGORIES)


def test_every_smoke_cause_has_an_entry() -> None:
    assert {e.smoke_cause for e in load()} == set(CAUSES)


def test_confirm_with_names_documented_findings() -> None:
    documented = set(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \|", (ROOT / "docs" / "findings.md").read_text(), re.M))
    for e in load():
        assert set(e.confirm_with) <= documented, (e.id, set(e.confirm_with) - documented)


def test_remedy_commands_are_single_lines() -> None:
    for e in load():
        for r in e.remedies:
            assert r.text.strip() and all("\n" not in c for c in remedy_lines(r)), e.id


def test_docs_errors_md_is_generated_from_the_json() -> None:
    # Regenerate: python scripts/errors_md.py
    doc = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    assert doc == markdown()
    for e in load():
        assert f"`{e.id}`" in doc


def _bad(mutate: Any) -> dict[str, Any]:
    doc = copy.deepcopy(RAW)
    mutate(doc["entries"][0])
    return doc


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update(category="not-a-category"),
        lambda e: e.update(id="Bad Id"),
        lambda e: e.update(patterns=[]),
        lambda e: e.update(remedies=[]),
        lambda e: e.update(patterns=[{"find": "Upper Case", "weight": 0.5}]),
        lambda e: e.update(patterns=[{"find": "x", "re": "(unclosed", "weight": 0.5}]),
        lambda e: e.update(patterns=[{"find": "x", "weight": 1.5}]),
        lambda e: e.update(patterns=[{"field": "nope", "in": ["a"], "weight": 0.5}]),
        lambda e: e.update(links=["http://insecure.example"]),
        lambda e: e.update(confirm_with=["Not An Id"]),
        lambda e: e.update(extract=["no_such_group"]),
        lambda e: e.update(smoke_cause="no_such_cause"),
        lambda e: e.update(surprise=1),
        lambda e: e.update(title=""),
    ],
)
def test_malformed_entries_are_rejected(mutate: Any) -> None:
    with pytest.raises(KnowledgeError):
        parse(_bad(mutate))


def test_duplicate_ids_and_bad_documents_are_rejected() -> None:
    doc = copy.deepcopy(RAW)
    doc["entries"].append(copy.deepcopy(doc["entries"][0]))
    with pytest.raises(KnowledgeError):
        parse(doc)
    for bad in (None, [], {"version": 2, "entries": []}, {"version": 1}):
        with pytest.raises(KnowledgeError):
            parse(bad)
