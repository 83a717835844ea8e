"""Every renderer keeps text from the target on one line: a line break in a path, a flag, metadata or a child's
output never starts a line of a report, so it cannot pose as fa-doctor's own line or reach a CI runner as a
workflow command (`exec` writes its human report to stderr, which GitHub's runner reads). The one boundary does
it (render/boundary.py with render/escape.py); fa-doctor's own line breaks inside a detail come from `Lines`."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import subprocess
import sys
import xml.etree.ElementTree as ET
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from fakeenv import make_env
from test_render_ci import sample

from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.lines import Lines
from fa_doctor.model.result import Result
from fa_doctor.render.base import renderer_for
from fa_doctor.render.boundary import prepare
from fa_doctor.render.escape import escape

# What a hostile string carries after its first line: workflow commands in both forms, a fake fa-doctor line.
TAIL = "\n::error::PWNED1\r\n  ::warning title=x::PWNED2\n##[add-mask]PWNED3\u2028::notice::PWNED4\n✓ all good  [x.y]"
STARTS = ("::error::PWNED1", "::warning title=x::PWNED2", "##[add-mask]", "::notice::PWNED4", "✓ all good")
FORMATS = ("human", "markdown", "junit", "github")


def poison(value: Any, depth: int = 0) -> Any:
    """The same result with TAIL appended to every string in it (ids and paths included)."""
    if isinstance(value, Enum) or depth > 30:
        return value
    if isinstance(value, Lines):
        return Lines(part + TAIL for part in value.parts)
    if isinstance(value, str):
        return value + TAIL
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fresh = copy.copy(value)
        for f in dataclasses.fields(value):
            object.__setattr__(fresh, f.name, poison(getattr(value, f.name), depth + 1))
        return fresh
    if isinstance(value, dict):
        return {poison(k, depth + 1): poison(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(poison(v, depth + 1) for v in value)
    return value


def poisoned() -> Result:
    """The sample report with every string poisoned but fa-doctor's own names: the command, finding ids, timings."""
    clean = sample()
    hostile: Result = poison(clean)
    findings = tuple(
        # an empty `refused` stays empty: a set one adds its own line (issue #26), as it does in a clean report
        dataclasses.replace(h, id=c.id, remedies=tuple(dataclasses.replace(hr, refused="") for hr in h.remedies))
        for h, c in zip(hostile.findings, clean.findings, strict=True)
    )
    assert not any(r.refused for f in clean.findings for r in f.remedies)
    return dataclasses.replace(hostile, command=clean.command, timings=clean.timings, findings=findings)


def rendered(result: Result, fmt: str, verbose: bool) -> str:
    return renderer_for(fmt, verbose=verbose, width=1_000_000).render(result)  # no table folding


def assert_no_hostile_line(text: str) -> None:
    for line in text.splitlines():
        stripped = line.lstrip()
        assert not stripped.startswith(STARTS), line
        assert "##[" not in line, line  # the runner's old form is read anywhere in a line


@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_poisoned_report_has_exactly_the_lines_of_a_clean_one(fmt: str, verbose: bool) -> None:
    clean, hostile = sample(), poisoned()
    a, b = rendered(clean, fmt, verbose), rendered(hostile, fmt, verbose)
    assert "PWNED1" in b  # the text is there, escaped
    assert len(b.splitlines()) == len(a.splitlines()), fmt
    assert_no_hostile_line(b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_error_result_stays_on_one_line(fmt: str) -> None:
    result = Result("check", error="cannot start /opt/x" + TAIL)
    text = rendered(result, fmt, False)
    assert_no_hostile_line(text)
    assert len(rendered(Result("check", error="cannot start /opt/x"), fmt, False).splitlines()) == len(
        text.splitlines()
    )


def test_junit_text_and_attributes_hold_no_line_break_from_the_target() -> None:
    root = ET.fromstring(rendered(poisoned(), "junit", True))
    for el in root.iter():
        for value in el.attrib.values():
            assert "\n" not in value and "\r" not in value
        for line in (el.text or "").splitlines():
            assert not line.lstrip().startswith(STARTS)


def test_json_keeps_the_exact_values() -> None:
    doc = json.loads(rendered(poisoned(), "json", False))
    assert doc["target"]["executable"] == "/opt/venv/bin/python3.12" + TAIL.replace("\r", "\\x0d")
    assert "\n::error::PWNED1" in doc["findings"][0]["detail"]


def test_lines_keep_fa_doctors_breaks_and_escape_each_part() -> None:
    detail = Lines(["served: /a" + TAIL, "  ::error::PWNED5", "Judged against: sm_90"])
    result = Result("check", (Finding("binary.x", Severity.FAIL, "t", detail),))
    shown = prepare(result).findings[0].detail
    assert isinstance(shown, Lines) and shown.count("\n") == 2
    assert shown.parts[1] == "  \\x3a:error::PWNED5"
    human = rendered(result, "human", False)
    assert_no_hostile_line(human)
    assert "    Judged against: sm_90" in human.splitlines()


def test_lines_survive_copy_pickle_replace_and_json() -> None:
    lines = Lines(["a", "b\nc"])
    assert lines == "a\nb\nc" and isinstance(lines, str)
    for twin in (copy.copy(lines), copy.deepcopy(lines), pickle.loads(pickle.dumps(lines))):
        assert isinstance(twin, Lines) and twin.parts == ("a", "b\nc")
    f = Finding("x.y", Severity.WARN, "t", lines)
    assert dataclasses.replace(f, title="u").detail.parts == ("a", "b\nc")  # type: ignore[attr-defined]
    assert json.dumps(lines) == '"a\\nb\\nc"'


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\x0d\\nb"),
        ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),
        ("a\x85b\x0bc\x0cd", "a\\x85b\\x0bc\\x0cd"),
        ("::error::x", "\\x3a:error::x"),
        ("  \t::add-mask::x", "  \t\\x3a:add-mask::x"),
        ("a ::error::x", "a ::error::x"),  # not at a line start: nothing to defuse
        ("c10::Error at::Tensor", "c10::Error at::Tensor"),  # C++ names stay readable
        ("x ##[add-mask]y", "x ##\\x5b" + "add-mask]y"),
        ("\x1b]0;t\x07", "\\x1b]0;t\\x07"),
        ("tab\tkept", "tab\tkept"),
    ],
)
def test_escape_table(text: str, shown: str) -> None:
    assert escape(text) == shown


# ---- the real CLI ---------------------------------------------------------------------------------------


def fa_doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("fmt", ["human", "markdown", "junit"])
@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_backend_flag_with_a_newline(fmt: str, verbose: list[str]) -> None:
    proc = fa_doctor("check", "--no-smoke", "--format", fmt, *verbose, "--attention-backend", "fa3" + TAIL)
    assert proc.returncode in (0, 1), proc.stderr
    assert "PWNED1" in proc.stdout
    assert_no_hostile_line(proc.stdout + proc.stderr)


def hostile_venv(tmp_path: Path) -> str:
    """A real venv in a folder whose name carries TAIL (venv refuses ':' in a path, so it is renamed after)."""
    env = make_env(tmp_path / "plain")
    odd = tmp_path / ("odd" + TAIL.replace("\r", "").replace("/", ""))
    (tmp_path / "plain").rename(odd)
    return str(odd / Path(env.python).relative_to(tmp_path / "plain"))


def test_target_path_with_a_newline_in_every_report(tmp_path: Path) -> None:
    python = hostile_venv(tmp_path)
    junit, md = tmp_path / "r.xml", tmp_path / "r.md"
    proc = fa_doctor("check", "--no-smoke", "-v", "--python", python, "--junit-xml", str(junit), "--markdown", str(md))
    assert proc.returncode in (0, 1), proc.stderr
    assert "PWNED1" in proc.stdout
    for text in (proc.stdout, proc.stderr, junit.read_text(), md.read_text()):
        assert_no_hostile_line(text)


def test_exec_report_on_stderr_keeps_the_path_on_one_line(tmp_path: Path) -> None:
    python = hostile_venv(tmp_path)
    proc = fa_doctor("exec", "--no-smoke", "--warn-only", "--python", python, "--", "true")
    assert proc.returncode == 0 and "PWNED1" in proc.stderr, proc.stderr
    assert_no_hostile_line(proc.stderr)


# ---- hostile round: separators and command shapes in each text renderer ----------------------------------

SEPARATORS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c"]
LEADS = ["", " ", "\t", "\u00a0", "\u3000", "\u2003"]


@pytest.mark.parametrize("fmt", ["human", "markdown", "junit"])
@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"{ord(s[-1]):04x}" for s in SEPARATORS])
def test_every_line_separator_is_shown_not_obeyed(fmt: str, sep: str) -> None:
    text = f"flash-attn{sep}::error::PWNED{sep}##[add-mask]PWNED"
    result = Result("check", (Finding("x.y", Severity.FAIL, text, text, {"where": text}),))
    out = rendered(result, fmt, True)
    assert_no_hostile_line(out)
    assert len(out.splitlines()) == len(
        rendered(Result("check", (Finding("x.y", Severity.FAIL, "a", "a", {"where": "a"}),)), fmt, True).splitlines()
    )


@pytest.mark.parametrize("lead", LEADS, ids=[f"{ord(c):04x}" if c else "none" for c in LEADS])
@pytest.mark.parametrize("fmt", ["human", "markdown", "junit"])
def test_a_command_at_the_start_of_a_value_is_defused(fmt: str, lead: str) -> None:
    row = {"distribution": lead + "::error::PWNED", "version": "1"}
    result = Result(
        "check", (Finding("x.y", Severity.WARN, lead + "::warning::PWNED2", lead + "::x::y", {"rows": [row]}),)
    )
    assert_no_hostile_line(rendered(result, fmt, True))


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
def test_a_folded_table_cell_cannot_start_a_line_with_a_command(width: int) -> None:
    """Rich folds a long path in a table; wherever the fold falls, the new line does not start with `::`."""
    for k in range(0, 90, 3):
        path = "/o/" + "a" * k + "::error::PWNED" + "/b" * 40
        result = Result("check", (Finding("x.y", Severity.WARN, "t", "d", {"rows": [{"location": path, "n": "1"}]}),))
        assert_no_hostile_line(renderer_for("human", verbose=True, width=width).render(result))


@pytest.mark.parametrize("shape", ["##[", "##[ ", "##[[", "x##[error]y", "##[group]"])
def test_the_old_command_form_is_broken_anywhere(shape: str) -> None:
    result = Result("check", (Finding("x.y", Severity.FAIL, shape, shape),))
    for fmt in ("human", "markdown", "junit", "github"):
        assert "##[" not in rendered(result, fmt, False), fmt
