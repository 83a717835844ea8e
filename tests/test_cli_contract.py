"""The exit-code contract, stdout purity, and the error boundary (README: Exit codes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import gpu_env
from fakeenv import H200, FakeEnv

from fa_doctor.cli import main
from fa_doctor.diagnose.checks import knobs


def healthy(fenv: FakeEnv) -> FakeEnv:
    fenv.torch()
    fenv.fa4()
    return fenv


def test_exit_0_healthy(cli: Any, fenv: FakeEnv, tmp_path: Path) -> None:
    run = cli("check", "--no-smoke", "--json", "--python", healthy(fenv).python, env=gpu_env(tmp_path, H200))
    assert (run.code, run.doc["status"], run.doc["exit_code"]) == (0, "ok", 0)


def test_exit_0_with_warnings_only(cli: Any, fenv: FakeEnv) -> None:
    # No GPU: gpu.none is a warning when the kernels were asked for (with --no-smoke it is information).
    run = cli("check", "--json", "--python", healthy(fenv).python)
    assert (run.code, run.doc["status"]) == (0, "warn")


def test_exit_1_strict_turns_warnings_into_failures(cli: Any, fenv: FakeEnv) -> None:
    python = healthy(fenv).python
    run = cli("check", "--strict", "--json", "--python", python)
    assert (run.code, run.doc["status"], run.doc["exit_code"]) == (1, "warn", 1)
    static = cli("check", "--no-smoke", "--strict", "--json", "--python", python)
    assert (static.code, static.doc["status"]) == (0, "ok")  # a CPU CI job: the missing GPU is information


def test_exit_1_on_failure(cli: Any, fenv: FakeEnv) -> None:
    fenv.torch()
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python)
    assert (run.code, run.doc["status"]) == (1, "fail")


def test_require_gpu_fails_without_gpu(cli: Any, fenv: FakeEnv) -> None:
    run = cli("check", "--no-smoke", "--require-gpu", "--json", "--python", healthy(fenv).python)
    assert run.code == 1 and run.finding("gpu.none")["severity"] == "fail"


@pytest.mark.parametrize("python", ["/nonexistent/python", "/etc/hostname", "false", "definitely-not-a-python"])
def test_exit_2_bad_python_json(cli: Any, python: str) -> None:
    run = cli("check", "--no-smoke", "--json", "--python", python)
    assert run.code == 2
    assert run.doc["exit_code"] == 2 and run.doc["error"] and run.doc["status"] == "fail"


def test_exit_2_bad_python_human(cli: Any) -> None:
    run = cli("check", "--no-smoke", "--python", "/nonexistent/python")
    assert run.code == 2 and run.stdout == "" and "no such file" in run.stderr


def test_exit_2_internal_error_is_a_finding(cli: Any, fenv: FakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(facts: object) -> list[object]:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(knobs, "check_knobs", boom)
    run = cli("check", "--no-smoke", "--json", "--python", healthy(fenv).python)
    crash = run.finding("internal.check_crashed")
    assert "simulated bug" in crash["detail"] and crash["remedies"]
    assert run.code == 2 and "selection.ok" in run.ids()  # the other checks still ran


def test_usage_error_with_json_still_prints_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "--json", "--bogus-option"])
    assert exc.value.code == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "bogus" in doc["error"]


def test_usage_error_human_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "--timeout", "soon"])
    out = capsys.readouterr()
    assert exc.value.code == 2 and out.out == "" and "soon" in out.err


def test_json_stdout_is_pure_with_smoke_chatter(cli: Any, fenv: FakeEnv) -> None:
    run = cli("check", "--json", "--python", healthy(fenv).python)  # smoke on: skipped, no GPU
    # It parsed, so nothing else is on stdout; and it is the whole report, smoke step included.
    assert sorted(run.ids()) == sorted(
        ["gpu.none", "torch.found", "package.found", "override.unset", "selection.ok", "target.chosen", "smoke.skipped"]
    )
    assert run.finding("smoke.skipped")["severity"] == "info"


def test_help_and_static_check_import_no_torch(fenv: FakeEnv) -> None:
    code = (
        "import sys; from fa_doctor.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'flash_attn', 'sgl_kernel', 'sglang')]\n"
        "assert not bad, bad\n"
    )
    for args in (["--help"], ["check", "--no-smoke", "--json", "--python", healthy(fenv).python]):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


def test_python_m_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "fa_doctor", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("fa-doctor ")


# The console script's path, with TargetProbe watched: which interpreter it is started for, and whether the
# command's modules were still to be imported then (the probe's start-up overlaps those imports).
_WATCH = """\
import sys
from fa_doctor.probes import target

class Watched(target.TargetProbe):
    def __init__(self, python, *args, **kw):
        print("early", python, "fa_doctor.commands.check" in sys.modules, file=sys.stderr)
        super().__init__(python, *args, **kw)

target.TargetProbe = Watched
from fa_doctor.entry import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["check", "--no-smoke", "--python", "/x/python"], {}, "/x/python"),
        (["check", "--no-smoke", "--json", "--python=/y/python"], {}, "/y/python"),
        (["check", "--no-smoke"], {"FA_DOCTOR_PYTHON": "/opt/server/bin/python"}, "/opt/server/bin/python"),
        (["check", "--no-smoke", "--python", "/x/python"], {"FA_DOCTOR_PYTHON": "/opt/other"}, "/x/python"),
        (["exec", "--no-smoke", "--", "true"], {"FA_DOCTOR_PYTHON": "/opt/s/python"}, "/opt/s/python"),
        # COMMAND's own interpreter is what will run: it wins over FA_DOCTOR_PYTHON (the report says they differ)
        (["exec", "--no-smoke", "--", sys.executable, "-c", "pass"], {"FA_DOCTOR_PYTHON": "/opt/s/py"}, sys.executable),
        (["fix", "--no-smoke", "--python", "/x/python"], {}, "/x/python"),
        (["check", "--help"], {}, None),
        # a plain check's probe starts from the raw command line, beside typer's imports: before misuse is found
        # (test_cli_signals: it does not outlive the run), and asked again where the parsed options differ
        (["check", "--python", "/x/python", "--bogus"], {}, "/x/python"),
        (["check", "-o", "--python", "--json"], {"FA_DOCTOR_PYTHON": "/opt/s/python"}, ["--json", "/opt/s/python"]),
        (["fix", "--unset-override", "--shell", "bash"], {}, None),  # inspects no interpreter
        (["--version"], {}, None),
        ([], {}, None),
    ],
)
def test_entry_starts_the_target_probe_early(
    args: list[str], env: dict[str, str], expected: str | list[str] | None, tmp_path: Path
) -> None:
    import os

    proc = subprocess.run(
        [sys.executable, "-c", _WATCH, *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env}, cwd=tmp_path,
    )  # fmt: skip
    started = [line.split() for line in proc.stderr.splitlines() if line.startswith("early ")]
    pythons = [expected] if isinstance(expected, str) else expected or []
    assert started == [["early", python, "False"] for python in pythons], proc.stderr


def test_console_script_entry_gives_the_same_report(fenv: FakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    from fa_doctor.entry import main as entry_main

    with pytest.raises(SystemExit) as exc:
        entry_main(["check", "--no-smoke", "--json", "--python", healthy(fenv).python])
    assert exc.value.code == 0 and json.loads(capsys.readouterr().out)["target"]["executable"] == fenv.python
