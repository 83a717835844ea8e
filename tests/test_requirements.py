"""The small Requires-Dist reader agrees with packaging on real metadata lines and on any marker it answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import Requirement

from fa_doctor.requirements import MAX_MARKER_DEPTH, MAX_MARKER_LENGTH, Req, marker_applies, parse

FIXTURES = Path(__file__).parent / "fixtures" / "dist-info"
ENVS = [
    {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux", "platform_system": "Linux",
     "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""},
    {"python_version": "3.9", "python_full_version": "3.9.1", "sys_platform": "linux", "platform_system": "Linux",
     "platform_machine": "aarch64", "implementation_name": "cpython", "extra": ""},
    {"python_version": "3.12", "python_full_version": "3.12.0rc1", "sys_platform": "darwin",
     "platform_system": "Darwin", "platform_machine": "arm64", "implementation_name": "pypy", "extra": "cu13"},
]  # fmt: skip
PY311 = ENVS[0]


def real_lines() -> list[str]:
    lines = []
    for meta in sorted(FIXTURES.glob("*/METADATA")):
        text = meta.read_text().splitlines()
        lines += [ln.split(":", 1)[1].strip() for ln in text if ln.startswith("Requires-Dist:")]
    return lines


def test_fixtures_have_markers() -> None:
    lines = real_lines()
    assert len(lines) > 100 and sum(";" in ln for ln in lines) > 50


@pytest.mark.parametrize("line", real_lines())
def test_agrees_with_packaging(line: str) -> None:
    ours = parse(line)
    ref = Requirement(line)
    assert ours is not None and ours.name == ref.name
    assert sorted(filter(None, ours.specifier.split(","))) == sorted(filter(None, str(ref.specifier).split(",")))
    if ref.marker is None:
        assert ours.marker is None
        return
    assert ours.marker is not None
    for env in ENVS:
        # Every marker in real metadata is answered, and answered as packaging does.
        assert marker_applies(ours.marker, env) is Marker(ours.marker).evaluate(env), (ours.marker, env)


@pytest.mark.parametrize(
    ("line", "name", "specifier", "marker"),
    [
        ("torch==2.11.0", "torch", "==2.11.0", None),
        ("flash-attn-4 >= 4.0.0b18", "flash-attn-4", ">=4.0.0b18", None),
        ("quack_kernels (>=0.2, <0.7)", "quack_kernels", ">=0.2,<0.7", None),
        ("nvidia-cutlass-dsl[cu13]==4.8.1 ; extra == 'cu13'", "nvidia-cutlass-dsl", "==4.8.1", "extra == 'cu13'"),
        ("einops", "einops", "", None),
        ("einops;", "einops", "", None),
    ],
)
def test_parse_fields(line: str, name: str, specifier: str, marker: str | None) -> None:
    assert parse(line) == Req(name, specifier, marker)


def test_parse_rejects_what_is_not_a_requirement() -> None:
    assert parse("") is None
    assert parse("-e git+https://x") is None


def test_str_round_trips() -> None:
    assert str(Req("torch", ">=2.4", "python_version < '3.11'")) == "torch>=2.4; python_version < '3.11'"
    assert str(Req("torch", "", None)) == "torch"


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        # Equal versions decide each operator at its boundary.
        ("python_version >= '3.11'", True),
        ("python_version > '3.11'", False),
        ("python_version <= '3.11'", True),
        ("python_version < '3.11'", False),
        ("python_version == '3.11'", True),
        ("python_version != '3.11'", False),
        ("python_version > '3.10'", True),
        ("python_version < '3.12'", True),
        ("python_version == '3.11.*'", True),
        ("python_version == '3.1'", False),
        ("python_full_version >= '3.11.7'", True),
        ("python_full_version > '3.11.7'", False),
        ("python_full_version < '3.11.10'", True),  # numeric, not string, comparison
        # ~= is "compatible release", not >=.
        ("python_version ~= '3.9'", True),
        ("python_version ~= '3.11'", True),
        ("python_version ~= '3.12'", False),
        ("python_full_version ~= '3.11.2'", True),
        ("python_full_version ~= '3.10.0'", False),
        ("python_full_version ~= '3.11.8'", False),
        ("python_version === '3.11'", True),
        # Literals on the left compare the literal against the variable.
        ("'3.9' < python_version", True),
        ("'3.12' < python_version", False),
        ("'linux' in sys_platform", True),
        ("'arm' not in platform_machine", True),
        ("'x86' in platform_machine", True),
        ("platform_machine in 'x86_64 aarch64'", True),
        ("platform_machine not in 'x86_64 aarch64'", False),
        ("sys_platform == 'linux'", True),
        ("sys_platform != 'linux'", False),
        ("sys_platform == 'Linux'", False),
        # and binds tighter than or; every branch counts.
        ("python_version >= '3.9' and platform_machine == 'aarch64'", False),
        ("platform_machine == 'aarch64' and python_version >= '3.9'", False),
        ("python_version >= '3.9' and platform_machine == 'x86_64'", True),
        ("platform_machine == 'aarch64' or python_version >= '3.9'", True),
        ("python_version >= '3.9' or platform_machine == 'aarch64'", True),
        ("platform_machine == 'aarch64' or sys_platform == 'win32'", False),
        ("sys_platform == 'win32' and python_version < '3' or platform_machine == 'x86_64'", True),
        ("sys_platform == 'win32' and (python_version < '3' or platform_machine == 'x86_64')", False),
        ("(sys_platform == 'linux')", True),
        ('extra == "cu13"', False),
        ('extra != "cu13"', True),
    ],
)
def test_decisions(marker: str, expected: bool) -> None:
    assert marker_applies(marker, PY311) is expected
    assert Marker(marker).evaluate(PY311) is expected  # the table itself is packaging's answer


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("python_full_version >= '3.11'", True),  # a pre-release interpreter still counts (prereleases=True)
        ("python_full_version < '3.12'", False),
        ("python_full_version == '3.12.0rc1'", True),
        ("python_version ~= '3.12'", True),
    ],
)
def test_prerelease_interpreter(marker: str, expected: bool) -> None:
    assert marker_applies(marker, ENVS[2]) is expected
    assert Marker(marker).evaluate(ENVS[2]) is expected


def test_extra_names_compare_normalised() -> None:
    env = {**PY311, "extra": "cu-13"}
    assert marker_applies('extra == "CU_13"', env) is True
    assert marker_applies('extra == "cu.13"', env) is True
    assert marker_applies('extra == "cu14"', env) is False


@pytest.mark.parametrize(
    "marker",
    [
        "platform_machine ==",
        "unknown_var == 'x'",
        "((",
        "()",
        "(sys_platform == 'linux'",
        "(sys_platform == 'linux' sys_platform == 'linux')",
        "python_version < '3.11' xor",
        "python_version < '3.11' and",
        "python_version '3.11' <",
        "'a' == 'a'",  # no variable: packaging cannot evaluate it
        "python_version == python_full_version",
        "python_version ~= '3'",  # ~= needs two release segments: packaging raises
        "platform_machine < 'z'",  # string ordering differs between packaging releases
        "platform_machine ~= 'x86'",
        "platform_machine === 'x86_64'",
        "python_version <> '3.11'",
        "python_version == '3.11' # comment",
        "python_version\t== '3.11'",
        "python_version = = '3.11'",
        "python_version == Xyz",  # an unknown name, not a literal
    ],
)
def test_unreadable_markers_are_unknown(marker: str) -> None:
    assert marker_applies(marker, PY311) is None


def test_extra_only_requirement_does_not_apply() -> None:
    assert marker_applies('extra == "cu13"', PY311) is False


def nested(depth: int) -> str:
    return "(" * depth + "python_version >= '3.9'" + ")" * depth


def test_nesting_is_bounded() -> None:
    assert marker_applies(nested(MAX_MARKER_DEPTH), PY311) is True
    assert marker_applies(nested(MAX_MARKER_DEPTH + 1), PY311) is None
    assert marker_applies(nested(400), PY311) is None
    assert marker_applies(nested(100_000), PY311) is None
    assert marker_applies("(" * 400 + "python_version >= '3.9'", PY311) is None


def test_length_is_bounded() -> None:
    long = " or ".join(["sys_platform == 'linux'"] * 400)
    assert len(long) > MAX_MARKER_LENGTH
    assert marker_applies(long, PY311) is None
    fits = " or ".join(["sys_platform == 'linux'"] * 100)
    assert len(fits) < MAX_MARKER_LENGTH and marker_applies(fits, PY311) is True
    edge = "sys_platform == '" + "x" * (MAX_MARKER_LENGTH - 18) + "'"
    assert len(edge) == MAX_MARKER_LENGTH and marker_applies(edge, PY311) is False


VARS = ["python_version", "python_full_version", "platform_machine", "sys_platform", "extra", "implementation_name",
        "os_name", "platform_release"]  # fmt: skip
VALUES = ["3.11", "3.9", "3.11.7", "3", "3.11.*", "3.12.0rc1", "3.10.0", "x86_64", "aarch64", "linux", "Linux",
          "cu13", "CU_13", "", "cpython", "2!1.0", "1.0+local", "abc", "3.11 ", "arm"]  # fmt: skip
OPS = ["==", "!=", "<", "<=", ">", ">=", "~=", "===", "in", "not in"]


def _atom() -> st.SearchStrategy[str]:
    var = st.sampled_from(VARS)
    lit = st.sampled_from(VALUES).map(lambda v: f'"{v}"')
    op = st.sampled_from(OPS)
    pair = st.one_of(st.tuples(var, op, lit), st.tuples(lit, op, var))
    return pair.map(lambda t: f"{t[0]} {t[1]} {t[2]}")


MARKERS = st.recursive(
    _atom(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" and ", " or "]), inner).map("".join),
        inner.map(lambda m: f"({m})"),
    ),
    max_leaves=6,
)


def _reference(marker: str, env: dict[str, str]) -> bool | None:
    try:
        return Marker(marker).evaluate(env)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return None


@settings(max_examples=500, deadline=None)
@given(MARKERS, st.sampled_from(ENVS))
def test_any_marker_it_answers_agrees_with_packaging(marker: str, env: dict[str, str]) -> None:
    ours = marker_applies(marker, env)
    if ours is not None:
        assert ours is _reference(marker, env)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="()'\" =<>!~andorinotpython_versionsys_platformx86.1", max_size=80))
def test_garbage_never_raises(marker: str) -> None:
    ours = marker_applies(marker, PY311)
    if ours is not None:
        assert ours is _reference(marker, PY311)
