"""`exec` judges what the server will really get, end to end: `env` in COMMAND (assignments, -u, -S), `#!` lines,
wrapper scripts (a warning naming --python, never a silent check of fa-doctor's own Python), the signal
dispositions COMMAND inherits, an empty COMMAND, a missing #! interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv

from fa_doctor.probes.environment import OVERRIDE

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


def default_signals() -> None:
    """What this test process inherited does not leak into fa-doctor (a backgrounded suite has SIGINT ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def exec_(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, **popen: Any
) -> tuple[subprocess.CompletedProcess[str], Path]:
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    report = tmp_path / "report.json"
    full = {**os.environ, **(env or {}), "REPORT_TO": str(report)}
    argv = [sys.executable, "-m", "fa_doctor", "exec", *[a.replace("SERVER", str(server)) for a in args]]
    popen.setdefault("preexec_fn", default_signals)
    proc = subprocess.run(argv, capture_output=True, text=True, env=full, timeout=120, check=False, **popen)
    return proc, report


def doc_of(stderr: str) -> dict[str, Any]:
    return json.loads(stderr[stderr.index("{") :])  # type: ignore[no-any-return]


def on_path(fenv: FakeEnv) -> dict[str, str]:
    return {"PATH": f"{Path(fenv.python).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_env_assignment_in_command_fails_like_our_own_environment(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    cmd = ["env", f"{OVERRIDE}=5", py, "SERVER"]
    proc, report = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--format", "json", "--", *cmd)
    assert proc.returncode == 1 and not report.exists(), proc.stderr
    doc = doc_of(proc.stderr)
    assert any(f["id"] == "override.invalid" and f["severity"] == "fail" for f in doc["findings"])
    assert doc["target"]["executable"] == py  # the command's interpreter, not fa-doctor's


def test_env_dash_u_removes_what_our_environment_set(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    proc, report = exec_(
        tmp_path, "--no-smoke", "--allow-no-gpu", "--", "env", "-u", OVERRIDE, py, "SERVER", env={OVERRIDE: "5"}
    )
    assert proc.returncode == 7, proc.stderr
    assert OVERRIDE not in json.loads(report.read_text())["env"]


def test_env_split_string_assignment_is_judged(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    proc, report = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--", "env", "-S", f"{OVERRIDE}=9 {py} SERVER")
    assert proc.returncode == 1 and not report.exists() and "override.invalid" in proc.stderr


def test_env_s_shebang_is_followed_not_read_as_python(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    serve = tmp_path / "serve"
    serve.write_text(f"#!/usr/bin/env -S {py} -X utf8\n" + SERVER)
    serve.chmod(0o755)
    proc, report = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--format", "json", "--", str(serve), "a b")
    assert proc.returncode == 7, proc.stderr
    assert "'-S'" not in proc.stderr and "exec.python_unknown" not in proc.stderr
    assert json.loads(report.read_text())["argv"] == ["a b"]


def test_msglang_keeps_the_backend_flags(fenv: FakeEnv, tmp_path: Path) -> None:
    healthy(fenv).sglang()
    cmd = [fenv.python, "-msglang.launch_server", "--attention-backend", "fa3"]
    proc, _ = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--format", "json", "--", *cmd)
    doc = doc_of(proc.stderr)
    assert doc["selection"]["prefill"]["backend"] == "fa3" and doc["selection"]["prefill"]["source"] == "flag"


def test_a_wrapper_script_is_a_warning_naming_python(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    wrapper = tmp_path / "run.sh"
    wrapper.write_text(f'#!/bin/sh\nexec {py} "$@"\n')
    wrapper.chmod(0o755)
    args = ("--no-smoke", "--allow-no-gpu", "--format", "json", "--", str(wrapper), "SERVER")
    proc, _ = exec_(tmp_path, *args, env=on_path(fenv))
    assert proc.returncode == 7, proc.stderr  # a warning does not stop the server
    doc = doc_of(proc.stderr)
    warning = next(f for f in doc["findings"] if f["id"] == "exec.python_unknown")
    assert warning["severity"] == "warn" and "/bin/sh" in warning["detail"]
    assert any("--python" in r["text"] for r in warning["remedies"])
    assert doc["target"]["executable"] != sys.executable  # not fa-doctor's own, silently


def test_a_wrapper_script_human_report_says_so(fenv: FakeEnv, tmp_path: Path) -> None:
    healthy(fenv)
    wrapper = tmp_path / "run.sh"
    wrapper.write_text("#!/bin/sh\nexit 0\n")
    wrapper.chmod(0o755)
    proc, _ = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--", str(wrapper), env=on_path(fenv))
    assert proc.returncode == 0 and "--python" in proc.stderr and "exec.python_unknown" in proc.stderr


def test_no_broken_pipe_message(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    proc, _ = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--python", py, "--", "bash", "-c", "yes | head -1")
    assert proc.returncode == 0 and proc.stdout == "y\n"
    assert "Broken pipe" not in proc.stderr and "rror" not in proc.stderr.split("Status:")[0]


def _ignored(status: str) -> set[int]:
    mask = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    return {n for n in range(1, 65) if mask & (1 << (n - 1))}


PRINT_STATUS = "import sys; sys.stdout.write(open('/proc/self/status').read())"


def test_command_gets_default_dispositions(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    proc, _ = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--python", py, "--", "/bin/cat", "/proc/self/status")
    assert proc.returncode == 0, proc.stderr
    ignored = _ignored(proc.stdout)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert int(sig) not in ignored, sig


def test_what_the_caller_ignored_stays_ignored(fenv: FakeEnv, tmp_path: Path) -> None:
    """nohup: SIGHUP ignored by the caller stays ignored for the server; Python's own SIGPIPE ignore does not."""
    py = healthy(fenv).python
    proc, _ = exec_(
        tmp_path,
        "--no-smoke",
        "--allow-no-gpu",
        "--python",
        py,
        "--",
        "/bin/cat",
        "/proc/self/status",
        preexec_fn=lambda: (default_signals(), signal.signal(signal.SIGHUP, signal.SIG_IGN)),
    )
    ignored = _ignored(proc.stdout)
    assert int(signal.SIGHUP) in ignored and int(signal.SIGPIPE) not in ignored


def test_empty_command_is_a_usage_error_before_any_check(tmp_path: Path) -> None:
    proc, _ = exec_(tmp_path, "--no-smoke", "--", "")
    assert proc.returncode == 2 and "COMMAND is empty" in proc.stderr
    assert "Status" not in proc.stderr and "internal error" not in proc.stderr


def test_empty_command_json(tmp_path: Path) -> None:
    proc, _ = exec_(tmp_path, "--no-smoke", "--json", "--", "")
    assert proc.returncode == 2 and "COMMAND is empty" in proc.stdout + proc.stderr
    assert "internal error" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("line", ["#!/opt/nowhere/bin/python3", "#!/opt/nowhere/bin/python3 -u", "#!/usr/bin/pyth0n"])
def test_a_missing_interpreter_is_reported_as_that(fenv: FakeEnv, tmp_path: Path, line: str) -> None:
    healthy(fenv)
    serve = tmp_path / "serve"
    serve.write_text(line + "\n" + SERVER)
    serve.chmod(0o755)
    proc, _ = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--", str(serve), env=on_path(fenv))
    missing = line[2:].split()[0]
    assert proc.returncode == 126, proc.stderr
    assert f"bad interpreter '{missing}'" in proc.stderr and "command not found" not in proc.stderr


def test_a_script_with_crlf_shebang_is_a_bad_interpreter(fenv: FakeEnv, tmp_path: Path) -> None:
    py = healthy(fenv).python
    serve = tmp_path / "serve"
    serve.write_bytes(f"#!{py}\r\n".encode() + SERVER.encode())
    serve.chmod(0o755)
    proc, _ = exec_(tmp_path, "--no-smoke", "--allow-no-gpu", "--", str(serve), env=on_path(fenv))
    assert proc.returncode == 126 and "bad interpreter" in proc.stderr and "\\x0d" in proc.stderr
