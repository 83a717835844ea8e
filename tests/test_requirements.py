"""Requires-Dist lines through packaging: every real line parses, every real marker is decided for a target's
environment, and what the target's files can hold (huge, deeply nested, undecidable) answers None, never raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from fa_doctor.diagnose.requirements import MAX_REQUIREMENT_LENGTH, applies, contains, parse

FIXTURES = Path(__file__).parent / "fixtures" / "dist-info"
PY311 = {
    "python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux", "platform_system": "Linux",
    "platform_machine": "x86_64", "implementation_name": "cpython", "extra": "",
}  # fmt: skip


def real_lines() -> list[str]:
    lines = []
    for meta in sorted(FIXTURES.glob("*/METADATA")):
        text = meta.read_text().splitlines()
        lines += [ln.split(":", 1)[1].strip() for ln in text if ln.startswith("Requires-Dist:")]
    return lines


def test_every_real_line_parses_and_its_marker_is_decided() -> None:
    lines = real_lines()
    assert len(lines) > 100 and sum(";" in ln for ln in lines) > 50
    for line in lines:
        req = parse(line)
        assert req is not None, line
        assert applies(req, PY311) in (True, False), line


def test_extras_and_python_markers_decide_for_the_target() -> None:
    cu13 = parse("nvidia-cutlass-dsl[cu13]==4.8.1 ; extra == 'cu13'")
    assert cu13 is not None and applies(cu13, PY311) is False and applies(cu13, {**PY311, "extra": "cu13"}) is True
    old = parse("torch>=2.4; python_version < '3.11'")
    assert old is not None and applies(old, PY311) is False
    assert applies(old, {**PY311, "python_version": "3.10", "python_full_version": "3.10.4"}) is True


@pytest.mark.parametrize("line", ["", "-e git+https://x", "torch==", "a" * (MAX_REQUIREMENT_LENGTH + 1)])
def test_what_is_not_a_requirement_is_none(line: str) -> None:
    assert parse(line) is None


def test_deep_nesting_is_none_not_a_crash() -> None:
    deep = "x; " + "(" * 2000 + "python_version >= '3.9'" + ")" * 2000
    assert parse(deep) is None


@pytest.mark.parametrize("marker", ["python_version ~= '3'", "platform_machine ~= 'x86'", "unknown_var == 'x'"])
def test_undecidable_markers_are_none_not_an_exception(marker: str) -> None:
    req = parse(f"x; {marker}")
    assert req is None or applies(req, PY311) is None


def test_versions() -> None:
    assert contains(">=2.11,<2.12", "2.11.0+cu130") is True
    assert contains(">4.0.0b9", "4.0.0b10") is True
    assert contains("==2.9.1", "2.10.0") is False
    assert contains("not a spec", "1.0") is None and contains(">=1", "not a version") is None
