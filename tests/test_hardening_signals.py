"""Signals on the process that runs the smoke test: no child may outlive it, whatever kills it.

A driver process runs run_smoke the way `fa-doctor check` does (in a worker thread, or in the main thread);
the test signals the driver and then reads the process table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import default_signals
from smoke_fakes.scenarios import FAKES, child_env
from test_hardening_proc import leftovers, marker, running, script

from fa_doctor.smoke import SmokeTarget
from fa_doctor.smoke.runner import run_smoke

DRIVER = """
import json, os, signal, sys, threading, time
from fa_doctor.process import proc
from fa_doctor.smoke import SmokeTarget
from fa_doctor.smoke.runner import run_smoke

mode, python, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if mode == "handler":  # the contract the CLI's handler follows: end every child group, then exit
    def handler(signum, frame):
        proc.terminate_all(signal.SIGTERM, grace=1.0)
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, handler)

def work():
    run_smoke(python, SmokeTarget("fa2", "flash_attn", "fa2"), device="cpu", timeout=600, env=env)

def announce():
    while not list(proc._LIVE):
        time.sleep(0.01)
    print(list(proc._LIVE)[0], flush=True)

if mode == "main":
    threading.Thread(target=announce, daemon=True).start()
    work()
else:
    threading.Thread(target=work, daemon=True).start()
    announce()
    time.sleep(600)
"""


def gone(pid: int, wait: float = 30.0) -> bool:
    """True once `pid` has exited (a zombie waiting for init to reap it counts as gone)."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def drive(mode: str, python: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, mode, python, json.dumps(env)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        preexec_fn=default_signals,
    )
    assert driver.stdout is not None
    child = int(driver.stdout.readline())
    return driver, child


def test_sigterm_with_the_handler_ends_children_and_grandchildren(tmp_path: Path) -> None:
    m, n = marker(), marker()
    python = script(tmp_path, f"sleep {m} &\nsleep {n}\n", "python")
    driver, child = drive("handler", python, dict(os.environ))
    running(m, n)
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(60) == 128 + signal.SIGTERM
    assert gone(child) and leftovers(m, n) == []


def test_sigint_in_the_main_thread_ends_the_child(tmp_path: Path) -> None:
    m, n = marker(), marker()
    python = script(tmp_path, f"sleep {m} &\nsleep {n}\n", "python")
    driver, child = drive("main", python, dict(os.environ))
    running(m, n)
    driver.send_signal(signal.SIGINT)
    driver.wait(60)  # generous: a loaded CI machine (two suites at once) is slow, and the wait ends early
    assert gone(child) and leftovers(m, n) == []


HUNG_KERNEL = """import os, subprocess, time
def flash_attn_varlen_func(**kwargs):
    subprocess.Popen(["sleep", os.environ["HELPER"]])  # a helper in the child's group, like a compiler
    open(os.environ["READY"], "w").close()
    time.sleep(3600)  # stuck in the kernel: the child writes nothing more that could fail on a dead parent
"""


@pytest.mark.parametrize("wrapped", [False, True], ids=["python", "wrapper-without-exec"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM-unhandled"])
def test_parent_killed_outright_the_smoke_child_ends_itself(tmp_path: Path, sig: signal.Signals, wrapped: bool) -> None:
    """`kill -9 fa-doctor`, or `timeout 5 fa-doctor` before any handler is installed: no handler runs, so the
    real child watches its parent and ends its own group (it would hold GPU memory otherwise). The target
    "python" may be a wrapper script that runs the interpreter as its child instead of exec'ing it."""
    (tmp_path / "flash_attn").mkdir()
    (tmp_path / "flash_attn" / "__init__.py").write_text(HUNG_KERNEL)
    m, ready = marker(), tmp_path / "ready"
    env = {**child_env(tmp_path), "HELPER": m, "READY": str(ready)}
    python = script(tmp_path, f'{sys.executable} "$@"\n', "python") if wrapped else sys.executable
    driver, child = drive("thread", python, env)
    end = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert ready.exists()
    driver.send_signal(sig)
    driver.wait(60)  # generous: a loaded CI machine (two suites at once) is slow, and the wait ends early
    assert gone(child) and leftovers(m) == []


@pytest.mark.parametrize("bad", [["--no-such-option"], ["--timeout", "abc"], ["--gpus", "x,y"]])
def test_usage_error_leaves_no_early_probe(tmp_path: Path, bad: list[str]) -> None:
    """entry.py starts the target probe before the CLI parses anything; a usage error must not orphan it."""
    m = marker()
    python = script(tmp_path, f"sleep {m}\n", "python")
    done = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--python", python, *bad],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 2, done.stderr
    assert leftovers(m) == []


def test_wrapper_without_exec_is_not_taken_for_a_dead_parent(tmp_path: Path) -> None:
    python = script(tmp_path, f'{sys.executable} "$@"\n', "python")
    env = child_env(FAKES / "fa2", FAKE_FA_MODE="ok")
    result = run_smoke(python, SmokeTarget("fa2", "flash_attn", "fa2"), device="cpu", timeout=60, env=env)
    assert result.status == "passed" and result.phases["total"] > 0.5  # long enough for the watch to look
