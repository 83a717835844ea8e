"""One signal path: SIGINT, SIGTERM and SIGHUP end every child group, print "interrupted", still emit one JSON
document, and exit 130/143/129; afterwards no process of the run is left (process-table check).

Deterministic: a test never races the child with a sleep. It waits for a condition (a marker process in the
process table), or it has fa-doctor stop at a named point of its run (`FA_DOCTOR_TEST_PAUSE_AT`, see
`fa_doctor.process.interrupt.checkpoint`): the child announces the point on a pipe, waits, and the signal the test then
sends is delivered at exactly that instruction. Every point of the run is tried with every signal.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import default_signals


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _wait_for(marker: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _processes_with(marker):
            return
        time.sleep(0.05)
    pytest.fail(f"no process with {marker} started")


def _gone(marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _processes_with(marker):
            return True
        time.sleep(0.05)
    return False


def hanging_python(tmp_path: Path, marker: str) -> str:
    """A 'Python' that forks a grandchild into its own session and hangs: the worst target probe there is."""
    import shutil

    sleeper = tmp_path / marker  # a copy of sleep whose name marks every process it runs as
    shutil.copy(shutil.which("sleep") or "/bin/sleep", sleeper)
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nsetsid {sleeper} 1000 &\nexec {sleeper} 999\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_signal_during_a_probe_ends_every_child(tmp_path: Path, sig: int, code: int) -> None:
    marker = f"fa-doctor-test-{uuid.uuid4().hex}"
    python = hanging_python(tmp_path, marker)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fa_doctor", "check", "--no-smoke", "--json", "--python", python],
        stdout=subprocess.PIPE,
        preexec_fn=default_signals,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(marker)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    doc = json.loads(out)  # one document, even now
    assert doc["exit_code"] == code and doc["error"].startswith("interrupted by SIG")
    assert "interrupted" in err
    assert _gone(marker), f"left behind: {_processes_with(marker)}"


def test_timeout_command_leaves_no_child(tmp_path: Path) -> None:
    """`timeout 60 fa-doctor check`: SIGTERM from outside, as CI runners and `timeout` send it (to the command and
    to its whole process group). The signal is `timeout`'s own relay of a SIGTERM it is sent once the probe runs,
    not its timer: the same delivery, with no wait of a fixed length and no race with a slow start."""
    marker = f"fa-doctor-test-{uuid.uuid4().hex}"
    python = hanging_python(tmp_path, marker)
    argv = [sys.executable, "-m", "fa_doctor", "check", "--no-smoke", "--python", python]
    proc = subprocess.Popen(
        ["timeout", "--preserve-status", "60", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_signals,
        text=True,
    )
    try:
        _wait_for(marker)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143 and "interrupted by SIGTERM" in err, err
    assert _gone(marker), f"left behind: {_processes_with(marker)}"


def test_usage_error_does_not_orphan_the_early_probe(tmp_path: Path) -> None:
    marker = f"fa-doctor-test-{uuid.uuid4().hex}"
    python = hanging_python(tmp_path, marker)
    proc = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--python", python, "--bogus"],
        capture_output=True,
        preexec_fn=default_signals,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "bogus" in proc.stderr
    assert _gone(marker), f"left behind: {_processes_with(marker)}"


# ---- signals at named points, deterministically ---------------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[1] / "fa_doctor"
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
BEFORE_REPORT = ["entry", "probe", "cli", "run"]  # the report is still to come: it says "interrupted"
AFTER_REPORT = ["delivered", "cleanup"]  # the report is out: no second one, the exit code says the signal


def paused(
    args: list[str], point: str, sig: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run fa-doctor until it announces `point`, then send `sig`; the whole run, as a completed process."""
    read_end, write_end = os.pipe()
    full = {**os.environ, **(env or {}), "FA_DOCTOR_TEST_PAUSE_AT": point, "FA_DOCTOR_TEST_PAUSE_FD": str(write_end)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fa_doctor", *args],
        stdout=subprocess.PIPE,
        preexec_fn=default_signals,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        pass_fds=(write_end,),
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "r") as announced:
            ready, _, _ = select.select([announced], [], [], 90)  # a bound on a hang, not a race
            line = announced.readline() if ready else ""
        if line != point + "\n":
            proc.kill()
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"fa-doctor did not stop at {point!r} (got {line!r}): {err}")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_every_checkpoint_in_the_code_is_tried() -> None:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        names |= set(re.findall(r"checkpoint\(\"([a-z-]+)\"\)", path.read_text(encoding="utf-8")))
    assert names == {*BEFORE_REPORT, *AFTER_REPORT, "exec"}


@pytest.mark.parametrize(("sig", "code"), SIGNALS)
@pytest.mark.parametrize("point", BEFORE_REPORT + AFTER_REPORT)
def test_a_signal_at_any_point_of_check(fenv: Any, point: str, sig: int, code: int) -> None:
    fenv.torch()
    proc = paused(["check", "--no-smoke", "--json", "--python", fenv.python], point, sig)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    doc = json.loads(proc.stdout)  # exactly one document, whatever the point
    if point in BEFORE_REPORT:
        assert doc["exit_code"] == code and doc["error"] == f"interrupted by {signal.Signals(sig).name}"
        assert "interrupted" in proc.stderr
    else:
        assert doc["error"] is None and doc["target"]["executable"] == fenv.python  # the real report, once


@pytest.mark.parametrize(("sig", "code"), SIGNALS)
@pytest.mark.parametrize("point", ["entry", "cli", "run"])
def test_a_signal_at_any_point_human(fenv: Any, point: str, sig: int, code: int) -> None:
    proc = paused(["check", "--no-smoke", "--python", fenv.python], point, sig)
    assert proc.returncode == code and "Traceback" not in proc.stderr
    assert f"interrupted by {signal.Signals(sig).name}" in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize(("sig", "code"), SIGNALS)
def test_a_signal_after_an_env_file_was_edited(tmp_path: Path, sig: int, code: int) -> None:
    """The clean-up after `fix --env-file` (proc.terminate_all) is a point like any other: 128+N, no traceback."""
    envfile = tmp_path / "server.env"
    envfile.write_text("A=1\nSGLANG_FLASHATTENTION_VERSION=5\n")
    proc = paused(["fix", "--unset-override", "--env-file", str(envfile)], "cleanup", sig)
    assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr
    assert "SGLANG_FLASHATTENTION_VERSION" not in envfile.read_text()


@pytest.mark.parametrize(("sig", "code"), SIGNALS)
def test_exec_a_signal_before_becoming_command(fenv: Any, tmp_path: Path, sig: int, code: int) -> None:
    fenv.torch()
    fenv.fa4()
    started = tmp_path / "started"
    args = ["exec", "--no-smoke", "--allow-no-gpu", "--python", fenv.python, "--", "touch", str(started)]
    proc = paused(args, "delivered", sig)
    assert proc.returncode == code and "Traceback" not in proc.stderr and not started.exists()
    # After the dispositions are restored for COMMAND, a signal does what it would do to COMMAND: the default.
    proc = paused(args, "exec", sig)
    assert proc.returncode == -sig and "Traceback" not in proc.stderr and not started.exists()


@pytest.mark.parametrize(("sig", "code"), SIGNALS)
def test_a_signal_while_the_interpreter_exits(fenv: Any, sig: int, code: int) -> None:
    """The console script's path, with a signal raised from an atexit hook registered before fa-doctor's own:
    it lands after the report, in the interpreter's teardown. No 'Exception ignored' traceback; 128+N."""
    fenv.torch()
    program = (
        "import atexit, os, sys\n"
        f"atexit.register(os.kill, os.getpid(), {int(sig)})\n"
        "from fa_doctor.entry import main\n"
        f"sys.exit(main(['check', '--no-smoke', '--json', '--python', {fenv.python!r}]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=default_signals,
    )
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert proc.returncode == code
    assert json.loads(proc.stdout)["target"]["executable"] == fenv.python  # the report, once


# ---- hostile round: repeated signals, every format, exec, report files ---------------------------------


def paused_twice(args: list[str], point: str, first: int, second: int) -> subprocess.CompletedProcess[str]:
    """Two signals back to back: which one the child takes first is the kernel's business, not the test's."""
    read_end, write_end = os.pipe()
    env = {**os.environ, "FA_DOCTOR_TEST_PAUSE_AT": point, "FA_DOCTOR_TEST_PAUSE_FD": str(write_end)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fa_doctor", *args],
        stdout=subprocess.PIPE,
        preexec_fn=default_signals,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        pass_fds=(write_end,),
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "r") as announced:
            ready, _, _ = select.select([announced], [], [], 90)
            assert ready and announced.readline() == point + "\n"
        proc.send_signal(first)
        proc.send_signal(second)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("point", ["entry", "run", "delivered"])
@pytest.mark.parametrize(
    ("first", "second"),
    [(signal.SIGINT, signal.SIGTERM), (signal.SIGHUP, signal.SIGINT), (signal.SIGTERM, signal.SIGTERM)],
)
def test_a_second_signal_changes_nothing(fenv: Any, point: str, first: int, second: int) -> None:
    proc = paused_twice(["check", "--no-smoke", "--json", "--python", fenv.python], point, first, second)
    assert proc.returncode in (128 + first, 128 + second), proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    doc = json.loads(proc.stdout)  # one document, and it agrees with the exit code when it speaks of a signal
    assert point == "delivered" or doc["exit_code"] == proc.returncode


@pytest.mark.parametrize("fmt", ["github", "junit", "markdown"])
def test_interrupted_in_every_format(fenv: Any, fmt: str) -> None:
    proc = paused(["check", "--no-smoke", "--format", fmt, "--python", fenv.python], "run", signal.SIGINT)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr and "interrupted by SIGINT" in proc.stdout


def test_interrupted_still_writes_the_report_files(fenv: Any, tmp_path: Path) -> None:
    junit = tmp_path / "r.xml"
    proc = paused(["check", "--no-smoke", "--junit-xml", str(junit), "--python", fenv.python], "run", signal.SIGTERM)
    assert proc.returncode == 143 and "interrupted by SIGTERM" in junit.read_text()


def test_exec_interrupted_during_the_check_starts_nothing(fenv: Any, tmp_path: Path) -> None:
    started = tmp_path / "started"
    args = ["exec", "--no-smoke", "--allow-no-gpu", "--python", fenv.python, "--", "touch", str(started)]
    proc = paused(args, "run", signal.SIGINT)
    assert proc.returncode == 130 and not started.exists() and "Traceback" not in proc.stderr
