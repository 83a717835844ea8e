"""`fa-doctor exec`: the check, then the same PID becomes COMMAND with its argv and environment untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import gpu_env
from fakeenv import H200, FakeEnv

from fa_doctor.commands.launch import parse_launch
from fa_doctor.probes.environment import OVERRIDE

# A stand-in server: records its PID, argv and environment, then exits with a code of its own.
SERVER = """
import json, os, sys
with open(os.environ["REPORT_TO"], "w") as f:
    json.dump({"pid": os.getpid(), "argv": sys.argv[1:], "env": dict(os.environ)}, f)
sys.exit(7)
"""


def healthy(fenv: FakeEnv) -> FakeEnv:
    fenv.torch()
    fenv.fa4()
    return fenv


def start(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], Path]:
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    report = tmp_path / "report.json"
    full = {**os.environ, **(env or {}), "REPORT_TO": str(report)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fa_doctor", "exec", *[a.replace("SERVER", str(server)) for a in args]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )
    return proc, report


def test_same_pid_argv_untouched_exit_code_is_the_servers(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    server_args = ["--json", "--python", "x", "--", "a b", "$(touch PWNED)", "--attention-backend=fa4"]
    proc, report = start(
        tmp_path,
        "--no-smoke",
        "--",
        python,
        "SERVER",
        *server_args,
        env=gpu_env(tmp_path, H200),
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err  # the server's own exit code
    seen = json.loads(report.read_text())
    assert seen["pid"] == proc.pid  # replaced, not spawned
    assert seen["argv"] == server_args  # nothing after -- read as fa-doctor's, nothing re-quoted
    assert out == ""  # the server's stdout is its own; the report went to stderr
    assert "Status: OK" in err and not (tmp_path / "PWNED").exists()


def test_no_start_on_a_failing_finding(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    proc, report = start(
        tmp_path,
        "--no-smoke",
        "--",
        python,
        "SERVER",
        env={**gpu_env(tmp_path, H200), OVERRIDE: "5"},
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and not report.exists()
    assert "override.invalid" in err


def test_warn_only_starts_anyway(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    proc, report = start(
        tmp_path,
        "--no-smoke",
        "--warn-only",
        "--",
        python,
        "SERVER",
        env={**gpu_env(tmp_path, H200), OVERRIDE: "5"},
    )
    proc.communicate(timeout=60)
    assert proc.returncode == 7 and json.loads(report.read_text())["env"][OVERRIDE] == "5"


def test_unset_override_checks_and_starts_without_it(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    proc, report = start(
        tmp_path,
        "--no-smoke",
        "--unset-override",
        "--",
        python,
        "SERVER",
        env={**gpu_env(tmp_path, H200), OVERRIDE: "5"},
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err
    assert OVERRIDE not in json.loads(report.read_text())["env"]


def test_exec_requires_a_gpu_unless_allowed(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    proc, report = start(tmp_path, "--no-smoke", "--", python, "SERVER")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and not report.exists() and "gpu.none" in err
    proc, report = start(tmp_path, "--no-smoke", "--allow-no-gpu", "--", python, "SERVER")
    proc.communicate(timeout=60)
    assert proc.returncode == 7


def test_json_report_goes_to_stderr(fenv: FakeEnv, tmp_path: Path) -> None:
    python = healthy(fenv).python
    proc, _ = start(
        tmp_path,
        "--no-smoke",
        "--format",
        "json",
        "--",
        python,
        "SERVER",
        env=gpu_env(tmp_path, H200),
    )
    out, err = proc.communicate(timeout=60)
    assert out == "" and json.loads(err[err.index("{") :])["command"] == "exec"


def test_command_not_found_is_127(fenv: FakeEnv, tmp_path: Path) -> None:
    proc, _ = start(
        tmp_path, "--no-smoke", "--allow-no-gpu", "--python", healthy(fenv).python, "--", "/nonexistent/serve"
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 127 and err == "fa-doctor exec: /nonexistent/serve: No such file or directory\n"


def test_exec_without_command_is_a_usage_error(cli: Any) -> None:
    run = cli("exec", "--no-smoke")
    assert run.code == 2


@pytest.mark.parametrize(
    ("argv", "sglang", "flags"),
    [
        (["python", "-m", "sglang.launch_server", "--attention-backend", "fa4"], True, ("fa4", None, None)),
        (["python3", "-m", "sglang.launch_server", "--attention-backend=fa3", "--json"], True, ("fa3", None, None)),
        (
            ["sglang", "serve", "--prefill-attention-backend", "fa4", "--decode-attention-backend=fa3"],
            True,
            (None, "fa4", "fa3"),
        ),
        (["env", "A=1", "python3.12", "-m", "sglang.launch_server"], True, (None, None, None)),
        (
            ["python", "-m", "vllm.entrypoints.openai.api_server", "--attention-backend", "fa4"],
            False,
            (None, None, None),
        ),
        (["python", "train.py", "--attention-backend", "fa4"], False, (None, None, None)),
    ],
)
def test_sglang_launches_are_read(argv: list[str], sglang: bool, flags: tuple[str | None, ...]) -> None:
    launch = parse_launch(argv, {"PATH": os.environ.get("PATH", "")})
    assert launch.sglang is sglang
    assert (launch.flags.attention, launch.flags.prefill, launch.flags.decode) == flags


def test_launch_interpreter_from_a_console_script_shebang(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "venv").mkdir()
    venv_python = tmp_path / "venv" / "python3"
    venv_python.symlink_to(sys.executable)
    script = bindir / "sglang"
    script.write_text(f"#!{venv_python}\nimport sys\n")
    script.chmod(0o755)
    launch = parse_launch(["sglang", "serve", "--attention-backend", "fa4"], {"PATH": str(bindir)})
    assert launch.python == str(venv_python) and launch.flags.attention == "fa4"


def test_launch_flags_drive_the_check(fenv: FakeEnv, tmp_path: Path) -> None:
    """SGLang's flags in COMMAND are what gets checked: fa3 without sglang-kernel cannot run."""
    fenv.torch()
    fenv.fa4()
    fenv.sglang()
    proc, report = start(
        tmp_path,
        "--no-smoke",
        "--format",
        "json",
        "--",
        fenv.python,
        "-m",
        "sglang.launch_server",
        "--attention-backend",
        "fa3",
        env=gpu_env(tmp_path, H200),
    )
    _, err = proc.communicate(timeout=60)
    doc = json.loads(err[err.index("{") :])
    assert proc.returncode == 1 and not report.exists()
    assert doc["selection"]["prefill"]["backend"] == "fa3" and doc["selection"]["prefill"]["source"] == "flag"
