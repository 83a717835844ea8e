"""Golden output of each renderer, from a hand-made report (regenerate with FA_DOCTOR_REGOLD=1)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from fa_doctor.finding import Finding, Remedy, Severity
from fa_doctor.render.human import HumanRenderer
from fa_doctor.render.json import render_json
from fa_doctor.report import SCHEMA, Report

GOLDEN = Path(__file__).parent / "golden"


def sample() -> Report:
    return Report(
        command="check",
        findings=(
            Finding(
                "gpu.found",
                Severity.OK,
                "1 GPU(s) visible (via nvml)",
                "GPU 0: NVIDIA H200 (sm_90)",
                {"source": "nvml"},
            ),
            Finding(
                "override.invalid",
                Severity.FAIL,
                "SGLANG_FLASHATTENTION_VERSION has an invalid value",
                "SGLANG_FLASHATTENTION_VERSION='5' is not one of the documented values 2, 3 or 4.",
                {"variable": "SGLANG_FLASHATTENTION_VERSION", "value": "'5'"},
                (
                    Remedy(
                        "(1) Unset it.",
                        ("unset SGLANG_FLASHATTENTION_VERSION", "export SGLANG_FLASHATTENTION_VERSION=3"),
                    ),
                ),
            ),
            Finding(
                "knob.ignored",
                Severity.WARN,
                "flash-attn[cu13] built for [sm80, sm121]",
                "Brackets must survive: [sm80, sm121] and flash-attn[triton].",
                {"api_key": "s3cret"},
                (Remedy("Reinstall.", ("/opt/venv/bin/python -m pip install 'flash-attn-4[cu13]'",)),),
            ),
        ),
        target={"executable": "/opt/venv/bin/python", "version": "3.12.3"},
        gpus={
            "source": "nvml",
            "driver_version": "580.159.04",
            "devices": [{"index": 0, "name": "NVIDIA H200", "capability": "9.0"}],
        },
        torch={"version": "2.11.0+cu130", "cuda": "13.0"},
        packages=[
            {
                "distribution": "flash-attn-4",
                "version": "4.0.0b36",
                "family": "fa4",
                "location": "/opt/venv/lib/python3.12/site-packages",
            }
        ],
        selection={
            "fa_version": 3,
            "prefill": {
                "fa_version": 3,
                "implementation": "fa3-sgl",
                "backend": "fa3",
                "source": "override",
                "problems": [],
            },
            "decode": {
                "fa_version": 3,
                "implementation": "fa3-sgl",
                "backend": "fa3",
                "source": "override",
                "problems": [],
            },
        },
        timings={"total": 0.0421},
    )


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FA_DOCTOR_REGOLD"):
        path.write_text(text)
    assert text == path.read_text()


def test_json_golden() -> None:
    text = render_json(sample())
    doc = json.loads(text)
    assert doc["schema"] == SCHEMA and doc["exit_code"] == 1 and doc["status"] == "fail"
    assert doc["findings"][2]["evidence"]["api_key"] == "<hidden>"
    assert "smoke" in doc and doc["smoke"] is None
    golden("report.json", text + "\n")


def human(report: Report, verbose: bool) -> str:
    stream = io.StringIO()
    HumanRenderer(stream, verbose=verbose, color=False).render(report)
    return stream.getvalue()


def test_human_golden_summary() -> None:
    text = human(sample(), verbose=False)
    assert "[sm80, sm121]" in text and "flash-attn[triton]" in text  # markup off: brackets survive
    assert "1 passing or informational finding(s) hidden" in text
    golden("report.txt", text)


def test_human_golden_verbose() -> None:
    golden("report-verbose.txt", human(sample(), verbose=True))


def test_human_error_report() -> None:
    assert human(Report("check", error="--python '/x': no such file"), verbose=False).startswith("fa-doctor: --python")


def test_every_severity_has_a_mark_and_exit_row() -> None:
    from fa_doctor.render.human import _MARK

    for severity in Severity:
        assert severity in _MARK
        code = Report("check", (Finding("x.y", severity, "t"),)).exit_code
        assert code == (1 if severity is Severity.FAIL else 0)


def test_home_is_scrubbed(monkeypatch: object) -> None:
    home = os.path.expanduser("~")
    report = Report("check", (Finding("x.y", Severity.WARN, "t", f"at {home}/venv/lib"),))
    assert f"{home}/" not in render_json(report) and "~/venv/lib" in render_json(report)
