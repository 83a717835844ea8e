"""fa_doctor.process.proc: bounded reads, nothing left behind, one registry the signal handler can end.

Every test checks the process table afterwards, by a marker of its own (a unique `sleep` duration in the
command line), not by the token the code under test looks for.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fa_doctor.process import proc

_serial = itertools.count()


def marker() -> str:
    """A `sleep` argument no other process has: 900-999 s plus a fraction unique to this test run."""
    return f"{900 + next(_serial)}.{os.getpid() % 100000:05d}"


def _alive(arg: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if arg.encode() in argv and state != b"Z":
            found.append(int(name))
    return found


def leftovers(*args: str, wait: float = 3.0) -> list[int]:
    """Processes still running with one of these markers, after giving SIGKILL time to land."""
    end = time.monotonic() + wait
    while True:
        found = [pid for arg in args for pid in _alive(arg)]
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.05)


def running(*args: str, wait: float = 30.0) -> None:
    """Until a process with each of these markers runs: a test that then finds none left proves something (a
    signal sent before a script started its children would end them unborn). The wait ends as soon as they are."""
    end = time.monotonic() + wait
    while missing := [arg for arg in args if not _alive(arg)]:
        assert time.monotonic() < end, f"no process with {missing} started in {wait:g} s"
        time.sleep(0.01)


def script(tmp_path: Path, body: str, name: str = "child.sh") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_grandchild_holding_the_pipe_neither_extends_the_bound_nor_survives(tmp_path: Path) -> None:
    m = marker()
    done = proc.run([script(tmp_path, f"sleep {m} &\necho answer\n")], 20, grace=0.3)
    assert not done.timed_out and done.returncode == 0 and done.out() == "answer\n"
    assert done.seconds < 3
    assert leftovers(m) == []


def test_setsid_grandchild_of_an_exited_parent_is_found_by_its_token(tmp_path: Path) -> None:
    m = marker()
    # The parent exits once the grandchild is in its own session; it is then re-parented to init.
    ready = tmp_path / "ready"
    body = (
        f"setsid sh -c 'echo $$ > {ready}; exec sleep {m}' &\n"
        f"while [ ! -s {ready} ]; do sleep 0.01; done\necho answer\n"
    )
    done = proc.run([script(tmp_path, body)], 20, grace=0.3)
    assert done.out() == "answer\n" and done.seconds < 3
    assert leftovers(m) == []


def test_setsid_grandchild_with_an_empty_environment_is_found_through_its_parent(tmp_path: Path) -> None:
    m, n = marker(), marker()
    body = f"env -i /usr/bin/setsid /usr/bin/sleep {m} >/dev/null 2>&1 &\nsleep {n}\n"
    done = proc.run([script(tmp_path, body)], 1.0)
    assert done.timed_out and done.seconds < 3
    assert leftovers(m, n) == []


def test_timeout_kills_the_group_and_reports_it(tmp_path: Path) -> None:
    m, n = marker(), marker()
    done = proc.run([script(tmp_path, f"sleep {m} &\nsleep {n}\n")], 1.0)
    assert done.timed_out and done.returncode == -signal.SIGKILL
    assert 0.9 < done.seconds < 3
    assert leftovers(m, n) == []


def test_child_that_closes_its_pipes_and_lives_on_still_times_out(tmp_path: Path) -> None:
    m = marker()
    done = proc.run([script(tmp_path, f"exec >&- 2>&-\nsleep {m}\n")], 1.0)
    assert done.timed_out and done.seconds < 3
    assert leftovers(m) == []


def test_output_is_bounded_and_the_tail_kept(tmp_path: Path) -> None:
    done = proc.run([script(tmp_path, "head -c 3000000 /dev/zero\necho END\n")], 20, max_output=1000)
    assert done.truncated and len(done.stdout) == 1000 and done.stdout.endswith(b"END\n")


def test_start_failures_raise_like_popen(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        proc.Child([str(tmp_path / "missing")])
    with pytest.raises(PermissionError):
        proc.Child([str(tmp_path)])
    assert list(proc._LIVE) == []


def started(pid: int, name: str, wait: float = 30.0) -> None:
    """Until `pid` runs `name` (its exec is done). A signal that lands between fork and exec hits Python's
    handler inherited by the forked child, which never runs: the child then ignores it. Real callers never
    signal a child that early on purpose; a test that expects SIGTERM to be the cause of death must not."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if name.encode() in fh.read():
                    return
        except OSError:
            return
        time.sleep(0.01)


def test_terminate_all_ends_children_other_threads_are_collecting(tmp_path: Path) -> None:
    m, n = marker(), marker()
    plain = proc.Child([script(tmp_path, f"sleep {m}\n", "plain.sh")])
    # Ignores SIGTERM (and its sleep inherits that): only the SIGKILL after the grace ends it.
    ready = tmp_path / "trapped"
    stubborn = proc.Child([script(tmp_path, f"trap '' TERM\ntouch {ready}\nsleep {n}\n", "stubborn.sh")])
    results: dict[str, proc.Completed] = {}
    threads = [
        threading.Thread(target=lambda c=c, k=k: results.__setitem__(k, c.collect(30)))
        for k, c in (("plain", plain), ("stubborn", stubborn))
    ]
    for t in threads:
        t.start()
    started(plain.pid, "plain.sh")
    end = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < end:  # the stubborn shell has set its trap
        time.sleep(0.01)
    assert set(list(proc._LIVE)) >= {plain.pid, stubborn.pid}
    start = time.monotonic()
    assert proc.terminate_all(signal.SIGTERM, grace=0.5) >= 2
    for t in threads:
        t.join(5)
    assert time.monotonic() - start < 10  # the grace is 0.5 s; the rest is a loaded machine
    assert results["plain"].returncode == -signal.SIGTERM
    assert results["stubborn"].returncode == -signal.SIGKILL
    assert leftovers(m, n) == []
    assert plain.pid not in list(proc._LIVE) and stubborn.pid not in list(proc._LIVE)


def test_an_exception_inside_collect_kills_the_child(tmp_path: Path) -> None:
    m = marker()
    rfd, wfd = os.pipe()
    os.write(wfd, b"event\n")
    child = proc.Child([script(tmp_path, f"sleep {m}\n")])

    def interrupted(chunk: bytes) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        child.collect(30, extra={rfd: interrupted})
    os.close(wfd)
    assert leftovers(m) == [] and child.pid not in list(proc._LIVE)


def test_exit_hook_ends_children_never_collected(tmp_path: Path) -> None:
    """An early probe abandoned by a usage error: the interpreter exits, the child goes too."""
    m = marker()
    code = f"from fa_doctor.process import proc\nproc.Child(['sleep', '{m}'])\nraise SystemExit(2)\n"
    done = subprocess.run([sys.executable, "-c", code], timeout=30, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert leftovers(m) == []


def test_terminate_all_ends_a_child_caught_between_start_and_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal whose handler runs right after Popen returns, before the child is registered (the handler
    calls terminate_all, then raises): the child and what it started must still end."""
    m, n = marker(), marker()
    real = subprocess.Popen

    def popen_then_signal(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[call-overload]
        running(m, n)  # it has started its own children
        proc.terminate_all(signal.SIGTERM, grace=0.5)  # what the CLI's handler does
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", popen_then_signal)
    with pytest.raises(KeyboardInterrupt):
        proc.Child([script(tmp_path, f"sleep {m} &\nsleep {n}\n")])
    assert leftovers(m, n) == []


def test_terminate_all_ends_children_started_without_proc(tmp_path: Path) -> None:
    m = marker()
    stray = subprocess.Popen([script(tmp_path, f"sleep {m}\n")], start_new_session=True)
    # /proc/<pid>/task/*/children is read without stopping the tasks; under load a just-forked child can show
    # up a moment late (proc(5)). Wait until the kernel lists it, as it does long before a signal could come.
    deadline = time.monotonic() + 5
    while stray.pid not in proc._children(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.01)
    started(stray.pid, "child.sh")
    assert proc.terminate_all(signal.SIGTERM, grace=0.5) >= 1
    # The shell and its sleep both get SIGTERM; when the sleep dies first, the shell can reap it and exit 143
    # before its own signal lands (seen on a loaded machine). Either way SIGTERM ended the tree.
    assert stray.wait(5) in (-signal.SIGTERM, 128 + signal.SIGTERM) and leftovers(m) == []
