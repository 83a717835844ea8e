"""The small Requires-Dist reader agrees with packaging on real metadata lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from fa_doctor.requirements import marker_applies, parse

FIXTURES = Path(__file__).parent / "fixtures" / "dist-info"
ENVS = [
    {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux", "platform_system": "Linux",
     "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""},
    {"python_version": "3.9", "python_full_version": "3.9.1", "sys_platform": "linux", "platform_system": "Linux",
     "platform_machine": "aarch64", "implementation_name": "cpython", "extra": ""},
]


def real_lines() -> list[str]:
    lines = []
    for meta in FIXTURES.glob("*/METADATA"):
        text = meta.read_text().splitlines()
        lines += [ln.split(":", 1)[1].strip() for ln in text if ln.startswith("Requires-Dist:")]
    return lines


@pytest.mark.parametrize("line", real_lines())
def test_agrees_with_packaging(line: str) -> None:
    ours = parse(line)
    ref = Requirement(line)
    assert ours is not None and ours.name == ref.name
    assert ours.specifier.replace(" ", "") in (str(ref.specifier), "") or set(ours.specifier.split(",")) == set(
        str(ref.specifier).split(","))
    for env in ENVS:
        if ref.marker is None:
            assert ours.marker is None
            continue
        answer = marker_applies(ours.marker or "", env)
        assert answer is None or answer == Marker(str(ref.marker)).evaluate(env)


@pytest.mark.parametrize("marker", ["platform_machine ==", "unknown_var == 'x'", "((", "python_version < '3.11' xor"])
def test_unreadable_markers_are_unknown(marker: str) -> None:
    assert marker_applies(marker, ENVS[0]) is None


def test_extra_only_requirement_does_not_apply() -> None:
    assert marker_applies('extra == "cu13"', ENVS[0]) is False
