"""Odd invocations: each gets a clear message and a defined exit code, never a traceback (issue: hardening)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from fakeenv import FakeEnv


def fa_doctor(*args: str, stdin: Any = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args], capture_output=True, text=True, timeout=60, stdin=stdin, **kw
    )


def shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)


def healthy(fenv: FakeEnv) -> str:
    fenv.torch()
    fenv.fa4()
    return fenv.python


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--python", ""], "--python"),
        (["--python", "   "], "--python"),
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", "inf"], "--timeout"),
        (["--timeout", "-inf"], "--timeout"),
        (["--timeout", "0.5"], "--timeout"),
        (["--format", "yaml"], "--format"),
        (["--gpus", "²"], "--gpus"),
        (["--junit-xml", ""], "--junit-xml"),
        (["--json=1"], "--json"),
    ],
)
def test_bad_options_are_usage_errors_in_json_too(args: list[str], needle: str) -> None:
    if args != ["--json=1"]:  # that one asks for JSON, however oddly
        human = fa_doctor("check", "--no-smoke", *args)
        assert human.returncode == 2 and human.stdout == "" and "Traceback" not in human.stderr
        assert needle in human.stderr
    as_json = fa_doctor("check", "--no-smoke", "--json", *args)
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and doc["exit_code"] == 2 and doc["error"] and "Traceback" not in as_json.stderr


def test_format_json_is_the_same_as_json_flag(fenv: FakeEnv) -> None:
    python = healthy(fenv)
    a = json.loads(fa_doctor("check", "--no-smoke", "--json", "--python", python).stdout)
    b = json.loads(fa_doctor("check", "--no-smoke", "--format=json", "--python", python).stdout)
    assert [f["id"] for f in a["findings"]] == [f["id"] for f in b["findings"]]


def test_dash_h_is_help() -> None:
    for args in (["-h"], ["check", "-h"], ["exec", "-h"]):
        run = fa_doctor(*args)
        assert run.returncode == 0 and "Usage:" in run.stdout


def test_closed_stderr_with_json(fenv: FakeEnv) -> None:
    run = shell(f"{sys.executable} -m fa_doctor check --json --python {healthy(fenv)} 2>&-")
    doc = json.loads(run.stdout)
    assert run.returncode == 0 and doc["exit_code"] == 0 and doc["status"] == "warn"  # gpu.none: a warning


def test_closed_stderr_healthy_exits_0(fenv: FakeEnv) -> None:
    run = shell(f'{sys.executable} -m fa_doctor check --no-smoke --python {healthy(fenv)} 2>&-; echo "rc=$?"')
    assert run.stdout.strip().endswith("rc=0")


def test_closed_stdout_is_exit_2_without_traceback(fenv: FakeEnv) -> None:
    run = shell(f"{sys.executable} -m fa_doctor check --no-smoke --json --python {healthy(fenv)} >&-")
    assert run.returncode == 2 and "Traceback" not in run.stderr and "stdout is closed" in run.stderr


def test_reader_that_leaves_is_exit_2(fenv: FakeEnv) -> None:
    python = healthy(fenv)
    run = shell(
        f'{sys.executable} -m fa_doctor check --no-smoke -v --python {python} | true; echo "rc=${{PIPESTATUS[0]}}"'
    )
    assert run.stdout.strip() == "rc=2" and "Traceback" not in run.stderr


def test_server_json_after_double_dash_is_not_ours() -> None:
    """`exec ... -- server --json`: a usage error of fa-doctor answers in fa-doctor's format (human), not JSON."""
    run = fa_doctor("exec", "--bogus", "--", "server", "--json")
    assert run.returncode == 2 and run.stdout == "" and "bogus" in run.stderr


def test_option_values_are_not_taken_for_flags() -> None:
    """`--python --json` means a Python called '--json' (an error about it), not a JSON request."""
    run = fa_doctor("check", "--python", "--json", "--bogus")
    assert run.returncode == 2 and run.stdout == ""


@pytest.mark.parametrize("cc", ["9.0a", "[N/A]"])
def test_unreadable_compute_capability_is_a_warning_not_a_healthy_gpu(
    cli: Any, fenv: FakeEnv, tmp_path: Any, cc: str
) -> None:
    from conftest import gpu_env

    healthy(fenv)
    row = f"0, GPU-5f1e2c3a-0000-4000-8000-000000000000, NVIDIA H200, {cc}, 143771"
    run = cli("check", "--no-smoke", "--json", "--python", fenv.python, env=gpu_env(tmp_path, row))
    finding = run.finding("gpu.capability_unknown")
    assert finding["severity"] == "warn" and cc in finding["detail"] and "cc None" not in run.stdout
    assert run.code == 0 and not [i for i in run.ids() if i.startswith("internal.")]
