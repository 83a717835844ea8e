"""Golden output of the human and JSON renderers, from a typed result (regenerate with FA_DOCTOR_REGOLD=1), and
the render boundary: escaping and scrubbing happen once, for every format."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from samples import sample

from fa_doctor.cli.deliver import render
from fa_doctor.commands.failed import error_result, interrupted_result
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.result import SCHEMA, Result
from fa_doctor.render.base import FORMATS, Renderer, renderer_for
from fa_doctor.render.escape import escape

GOLDEN = Path(__file__).parent / "golden"
HOSTILE = "2.8.3\x1b[2;1H\x1b[2K\x1b[32mStatus: OK\x1b]0;pwned\x07\r\u202e\udcff"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FA_DOCTOR_REGOLD"):
        path.write_text(text)
    assert text == path.read_text()


def test_json_golden() -> None:
    text = render(sample(), "json")
    doc = json.loads(text)
    assert doc["schema"] == SCHEMA and doc["exit_code"] == 1 and doc["status"] == "fail"
    assert doc["summary"] == {"ok": 1, "info": 1, "warn": 1, "fail": 1}
    assert doc["findings"][2]["evidence"]["api_key"] == "<hidden>"
    assert doc["target"]["version"] == "3.12.3" and doc["gpus"]["devices"][0]["capability"] == "9.0"
    assert doc["packages"][0]["family"] == "fa4" and doc["packages"][0]["distribution"] == "flash-attn-4"
    assert doc["selection"]["prefill"]["implementation"] == "fa3-sgl"
    assert doc["smoke"]["results"][0]["device"]["name"] == "NVIDIA H200"
    assert doc["smoke"]["results"][0]["cases"][0]["max_abs_err"] == 0.0078
    assert doc["timings_ms"] == {"total": 42.1, "smoke": 27100.0}
    golden("report.json", text)


def test_json_has_no_nan_and_no_repr() -> None:
    result = Result("check", (Finding("x.y", Severity.WARN, "t", evidence={"a": float("nan"), "b": float("inf")}),))
    doc = json.loads(render(result, "json"), parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert doc["findings"][0]["evidence"] == {"a": None, "b": None}


def test_human_golden_summary() -> None:
    text = render(sample(), "human")
    assert "[sm80, sm121]" in text and "flash-attn[triton]" in text  # markup off: brackets survive
    assert "Status: FAIL — 1 failing, 1 warning(s), 1 ok, 1 info (exit 1)" in text
    assert "(2 passing or informational finding(s) hidden" in text  # 1 + 1 + 1 + 1 shown or hidden: 4
    golden("report.txt", text)


def test_human_golden_verbose() -> None:
    text = render(sample(), "human", verbose=True)
    assert "{" not in text and "[{" not in text and "'index'" not in text  # no Python reprs
    assert "devices:" in text and "NVIDIA H200" in text and "varlen_bf16_d128_causal" in text
    assert text.count("flash-attn-4  4.0.0b36") == 1  # a package once
    golden("report-verbose.txt", text)


def test_human_error_report() -> None:
    assert render(error_result("check", "--python '/x': no such file"), "human").startswith("fa-doctor: --python")


def test_interrupted_result_exit_codes() -> None:
    assert interrupted_result("check", 2).exit_code == 130
    assert interrupted_result("check", 15).exit_code == 143
    assert interrupted_result("check", 1).exit_code == 129
    doc = json.loads(render(interrupted_result("check", 15), "json"))
    assert doc["error"] == "interrupted by SIGTERM" and doc["exit_code"] == 143 and doc["status"] == "fail"


def test_every_severity_has_a_mark_and_exit_row() -> None:
    from fa_doctor.render.human import _MARK

    for severity in Severity:
        assert severity in _MARK
        code = Result("check", (Finding("x.y", severity, "t"),)).exit_code
        assert code == (1 if severity is Severity.FAIL else 0)
        strict = Result("check", (Finding("x.y", severity, "t"),), strict=True).exit_code
        assert strict == (1 if severity in (Severity.FAIL, Severity.WARN) else 0)
    assert Result("check", (Finding("internal.check_crashed", Severity.FAIL, "t"),)).exit_code == 2


@pytest.mark.parametrize("fmt", ["human", "json"])
def test_home_is_scrubbed_except_in_commands(fmt: str) -> None:
    home = os.path.expanduser("~")
    result = Result(
        "check",
        (
            Finding(
                "x.y",
                Severity.WARN,
                "t",
                f"at {home}/venv/lib and /tmp{home}/x",
                remedies=(Remedy("r", (f"{home}/venv/bin/python -m pip install x",)),),
            ),
        ),
    )
    text = render(result, fmt)
    assert "~/venv/lib" in text and f"/tmp{home}/x" in text  # a home inside another path stays
    assert f"{home}/venv/bin/python -m pip" in text  # commands keep absolute paths


def test_url_credentials_are_hidden() -> None:
    result = Result("check", (Finding("x.y", Severity.WARN, "t", evidence={"url": "https://user:tok@host/a.whl"}),))
    text = render(result, "json")
    assert "tok@" not in text and "https://***@host/a.whl" in text


@pytest.mark.parametrize("fmt", ["human", "json"])
def test_hostile_text_is_escaped_once_for_every_format(fmt: str) -> None:
    result = Result(
        "check",
        (
            Finding(
                "package.found",
                Severity.FAIL,
                f"flash-attn {HOSTILE}",
                HOSTILE,
                {"version": HOSTILE},
                (Remedy(HOSTILE, (f"pip install {HOSTILE}",)),),
            ),
        ),
    )
    text = render(result, fmt)
    for raw in ("\x1b", "\x07", "\r", "\u202e", "\udcff"):
        assert raw not in text
    assert "\\x1b[2K" in text or "\\\\x1b[2K" in text  # visible, and escaped once (JSON doubles the backslash)


def test_escape_keeps_tabs_and_shows_line_breaks() -> None:
    assert escape("a\nb\tc\x00d\x9be") == "a\\nb\tc\\x00d\\x9be"
    assert escape("a\nb\tc\x00d\x9be", one_line=False) == "a\nb\tc\\x00d\\x9be"  # JSON keeps the value


def test_boundary_does_not_mutate_the_result() -> None:
    result = Result("check", (Finding("x.y", Severity.WARN, HOSTILE),))
    render(result, "json")
    assert result.findings[0].title == HOSTILE


def test_every_format_has_a_renderer() -> None:
    for fmt in FORMATS:
        try:
            renderer = renderer_for(fmt)
        except ModuleNotFoundError:
            pytest.skip(f"{fmt} renderer not built yet")
        assert isinstance(renderer, Renderer) and renderer.name == fmt


def test_verbose_tables_never_truncate_and_detail_is_not_repeated() -> None:
    uuid = "GPU-7896bed1-c710-8407-8916-c0791095cb61"
    devices = [{"index": 0, "name": "NVIDIA H200", "uuid": uuid, "path": "/opt/a/very/long/path/" * 8}]
    result = Result(
        "check",
        (
            Finding(
                "gpu.found",
                Severity.OK,
                "t",
                "fa4: flash-attn-4 4.0.0b36",
                {"fa4": "flash-attn-4 4.0.0b36", "devices": devices},
            ),
        ),
    )
    text = render(result, "human", verbose=True, width=80)
    assert "…" not in text and "cb61" in text  # folded onto the next line, not cut
    assert uuid in render(result, "human", verbose=True, width=400)
    assert text.count("flash-attn-4 4.0.0b36") == 1
    assert not any(line.endswith(" ") for line in text.splitlines())


@pytest.mark.parametrize("quiet", [False, True])
def test_a_refused_remedy_says_why_and_is_never_offered_as_doable(quiet: bool) -> None:
    """Issue #26: a remedy the planner marked refused (`Remedy.refused`) shows its reason in the human report, and
    no `fa-doctor can do it` hint, while a remedy fa-doctor can carry out keeps its hint."""
    from fa_doctor.model.actions import PipInstall

    install = (PipInstall("/opt/venv/bin/python", ("flash-attn==2.8.3",), ("--no-deps",)),)
    refused = Remedy("Build it from source.", actions=install, refused="nvcc is not installed here")
    doable = Remedy("Reinstall it.", actions=install)
    result = Result(
        "check", (Finding("package.broken", Severity.FAIL, "flash-attn will not import", "", {}, (refused, doable)),)
    )
    text = render(result, "human", width=200, quiet=quiet)
    build, reinstall = text.split("fix: Build it from source.")[1].split("fix: Reinstall it.")
    assert "(fa-doctor will not do it here: nvcc is not installed here; run it by hand)" in build
    assert "fa-doctor can do it" not in build
    assert "(fa-doctor can do it: fa-doctor fix --apply --only package.broken)" in reinstall
    assert "will not do it" not in reinstall
    hostile = Remedy("Build it.", actions=install, refused="no nvcc\n::error::owned")
    text = render(Result("check", (Finding("package.broken", Severity.FAIL, "x", "", {}, (hostile,)),)), "human")
    assert "no nvcc\\n::error::owned" in text and not any(line.startswith("::") for line in text.splitlines())
