"""One signal path: SIGINT, SIGTERM and SIGHUP end every child group, print "interrupted", still emit one JSON
document, and exit 130/143/129; afterwards no process of the run is left (process-table check)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest


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
    """`timeout 2 fa-doctor check`: SIGTERM from outside, as CI runners and `timeout` send it."""
    marker = f"fa-doctor-test-{uuid.uuid4().hex}"
    python = hanging_python(tmp_path, marker)
    proc = subprocess.run(
        [
            "timeout",
            "--preserve-status",
            "3",
            sys.executable,
            "-m",
            "fa_doctor",
            "check",
            "--no-smoke",
            "--python",
            python,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 143 and "interrupted by SIGTERM" in proc.stderr
    assert _gone(marker), f"left behind: {_processes_with(marker)}"


def test_usage_error_does_not_orphan_the_early_probe(tmp_path: Path) -> None:
    marker = f"fa-doctor-test-{uuid.uuid4().hex}"
    python = hanging_python(tmp_path, marker)
    proc = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--python", python, "--bogus"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "bogus" in proc.stderr
    assert _gone(marker), f"left behind: {_processes_with(marker)}"
