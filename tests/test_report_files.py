"""Report files (`--junit-xml`, `--markdown`, `GITHUB_STEP_SUMMARY`) are regular files or nothing: written without
blocking on a FIFO, without following a link planted in a shared folder; anything else is refused with a clear
message and exit code 2. Each run is a real process with a deadline: a write that blocks fails the test, never
hangs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest
from fakeenv import FakeEnv

Target = Callable[[Path], Path]


def run(fenv: FakeEnv, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    fenv.torch()
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--no-smoke", "--python", fenv.python, *args],
        capture_output=True,
        text=True,
        timeout=60,  # a blocked write would hang here: subprocess.TimeoutExpired fails the test
        env=full,
    )


def fifo(tmp: Path) -> Path:
    path = tmp / "report.fifo"
    os.mkfifo(path)
    return path


def link_to_secret(tmp: Path) -> Path:
    (tmp / "victim").write_text("precious\n")
    (tmp / "shared").mkdir(mode=0o1777)
    link = tmp / "shared" / "report"
    link.symlink_to(tmp / "victim")
    return link


def dangling_link(tmp: Path) -> Path:
    link = tmp / "report"
    link.symlink_to(tmp / "created-through-the-link")
    return link


def link_to_null(tmp: Path) -> Path:
    link = tmp / "report"
    link.symlink_to(os.devnull)
    return link


def directory(tmp: Path) -> Path:
    (tmp / "adir").mkdir()
    return tmp / "adir"


def missing_parent(tmp: Path) -> Path:
    return tmp / "no" / "such" / "report"


def dev_null(tmp: Path) -> Path:
    return Path(os.devnull)


def dev_stdout(tmp: Path) -> Path:
    return Path("/dev/stdout")  # a link to /proc/self/fd/1: not followed


BAD: dict[str, tuple[Target, str]] = {
    "fifo without a reader": (fifo, "FIFO"),
    "link in a sticky world-writable folder": (link_to_secret, "symbolic link"),
    "dangling link": (dangling_link, "symbolic link"),
    "link to /dev/null": (link_to_null, "symbolic link"),
    "directory": (directory, "directory"),
    "missing parent": (missing_parent, "No such file"),
    "character device": (dev_null, "not a regular file"),
    "/dev/stdout": (dev_stdout, "symbolic link"),
}
OPTIONS = ("--junit-xml", "--markdown", "--output", "summary")


def _args(option: str, path: Path) -> tuple[tuple[str, ...], dict[str, str]]:
    if option == "summary":
        return ("--step-summary",), {"GITHUB_STEP_SUMMARY": str(path)}
    return (option, str(path)), {}


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("case", list(BAD))
def test_a_target_that_is_not_a_regular_file_is_refused(fenv: FakeEnv, tmp_path: Path, option: str, case: str) -> None:
    make, words = BAD[case]
    target = make(tmp_path)
    args, env = _args(option, target)
    proc = run(fenv, *args, env=env)
    assert proc.returncode == 2, proc.stderr
    assert f"cannot write {target}" in proc.stderr and words in proc.stderr
    assert "Traceback" not in proc.stderr
    if case == "link in a sticky world-writable folder":
        assert (tmp_path / "victim").read_text() == "precious\n"
    if case == "dangling link":
        assert not (tmp_path / "created-through-the-link").exists()


@pytest.mark.parametrize("option", OPTIONS)
def test_a_fifo_with_a_reader_is_refused_too(fenv: FakeEnv, tmp_path: Path, option: str) -> None:
    path = fifo(tmp_path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # someone is reading: the open would succeed
    try:
        args, env = _args(option, path)
        proc = run(fenv, *args, env=env)
        assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr
        assert os.read(reader, 100) == b""  # nothing was written into it
    finally:
        os.close(reader)


def test_a_fifo_refusal_does_not_wait_for_a_reader(fenv: FakeEnv, tmp_path: Path) -> None:
    """The old code blocked in open() until a reader came; a reader that comes late must find nothing."""
    path = fifo(tmp_path)
    seen: list[bytes] = []
    done = threading.Event()

    def late_reader() -> None:
        if not done.wait(30):  # only after fa-doctor exited (or the deadline): it never waited for us
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            seen.append(os.read(fd, 100))
            os.close(fd)

    thread = threading.Thread(target=late_reader, daemon=True)
    thread.start()
    proc = run(fenv, "--junit-xml", str(path))
    done.set()
    thread.join(5)
    assert proc.returncode == 2 and not seen


def test_an_existing_longer_file_is_replaced_whole(fenv: FakeEnv, tmp_path: Path) -> None:
    junit, md = tmp_path / "r.xml", tmp_path / "r.md"
    junit.write_text("STALE" * 20_000)
    md.write_text("STALE" * 20_000)
    proc = run(fenv, "--junit-xml", str(junit), "--markdown", str(md))
    assert proc.returncode in (0, 1), proc.stderr
    assert junit.read_text().startswith("<?xml") and "STALE" not in junit.read_text()
    assert md.read_text().startswith("## ") and "STALE" not in md.read_text()


def test_the_step_summary_is_appended_not_replaced(fenv: FakeEnv, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    proc = run(fenv, "--step-summary", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode in (0, 1), proc.stderr
    text = summary.read_text()
    assert text.startswith("# earlier step\n") and "fa-doctor check" in text


def test_a_new_file_is_created_with_the_umask(fenv: FakeEnv, tmp_path: Path) -> None:
    junit = tmp_path / "new.xml"
    proc = run(fenv, "--junit-xml", str(junit))
    assert proc.returncode in (0, 1), proc.stderr
    mask = os.umask(0)
    os.umask(mask)
    assert junit.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_hostile_report_path_is_shown_escaped(fenv: FakeEnv, tmp_path: Path) -> None:
    bad = tmp_path / "a\n::error::pwned\x1b[2J"
    bad.mkdir()
    proc = run(fenv, "--junit-xml", str(bad))
    assert proc.returncode == 2
    assert not any(line.startswith("::") for line in proc.stderr.splitlines())
    assert "\x1b" not in proc.stderr


# ---- hostile round: more targets ------------------------------------------------------------------------


def socket_file(tmp: Path) -> Path:
    import socket

    path = tmp / "report.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1)  # kept open by the test's frame below
    socket_file.keep = sock  # type: ignore[attr-defined]
    return path


def link_to_directory(tmp: Path) -> Path:
    (tmp / "adir").mkdir()
    (tmp / "report").symlink_to(tmp / "adir")
    return tmp / "report"


MORE: dict[str, tuple[Target, str]] = {
    "unix socket": (socket_file, "cannot write"),
    "link to a directory": (link_to_directory, "symbolic link"),
    "/proc file": (lambda tmp: Path("/proc/self/status"), "cannot write"),
    "/dev/zero": (lambda tmp: Path("/dev/zero"), "not a regular file"),
}


@pytest.mark.parametrize("option", ["--junit-xml", "summary"])
@pytest.mark.parametrize("case", list(MORE))
def test_more_targets_are_refused(fenv: FakeEnv, tmp_path: Path, option: str, case: str) -> None:
    make, words = MORE[case]
    args, env = _args(option, make(tmp_path))
    proc = run(fenv, *args, env=env)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("path", ["", "TMP/new-report/", "TMP/missing/"])
def test_an_empty_or_folder_path_is_refused(fenv: FakeEnv, tmp_path: Path, path: str) -> None:
    proc = run(fenv, "--junit-xml", path.replace("TMP", str(tmp_path)))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert not (tmp_path / "new-report").exists()


def test_an_empty_step_summary_variable_says_so(fenv: FakeEnv) -> None:
    proc = run(fenv, "--step-summary", env={"GITHUB_STEP_SUMMARY": ""})
    assert proc.returncode in (0, 1) and "GITHUB_STEP_SUMMARY is not set" in proc.stderr


def test_a_relative_path_is_written_in_the_working_folder(fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    proc = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--no-smoke", "--python", fenv.python, "--markdown", "r.md"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert (tmp_path / "r.md").read_text().startswith("## ")


EXEC = [sys.executable, "-m", "fa_doctor", "exec", "--no-smoke", "--allow-no-gpu", "--step-summary"]


def test_exec_with_an_unwritable_report_does_not_start_the_server(fenv: FakeEnv, tmp_path: Path) -> None:
    fenv.torch()
    fenv.fa4()
    started = tmp_path / "started"
    proc = subprocess.run(
        [*EXEC, "--python", fenv.python, "--", "touch", str(started)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(fifo(tmp_path))},
    )
    assert proc.returncode == 2 and "FIFO" in proc.stderr and not started.exists()


@pytest.mark.parametrize("fmt", ["human", "json", "junit"])
def test_output_puts_the_report_in_the_file_and_nothing_on_stdout(fenv: FakeEnv, tmp_path: Path, fmt: str) -> None:
    """-o/--output: the report a pipe would get (no colour, no terminal wrapping), replacing the file whole."""
    out = tmp_path / "report"
    out.write_text("x" * 100_000)
    piped = run(fenv, "--format", fmt)
    proc = run(fenv, "--format", fmt, "-o", str(out))
    assert proc.returncode == piped.returncode and proc.returncode in (0, 1), proc.stderr
    assert proc.stdout == ""
    written = out.read_text()
    if fmt == "json":  # the same document but for its timings
        assert json.loads(written)["findings"] == json.loads(piped.stdout)["findings"]
    elif fmt == "junit":
        assert ElementTree.fromstring(written).tag == ElementTree.fromstring(piped.stdout).tag
    else:
        assert written.splitlines()[:3] == piped.stdout.splitlines()[:3] and "\x1b[" not in written


def test_output_of_fix_unset_override_holds_the_shell_code(fenv: FakeEnv, tmp_path: Path) -> None:
    out = tmp_path / "unset.sh"
    proc = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "fix", "--unset-override", "--shell", "bash", "--output", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == "" and out.read_text() == "unset SGLANG_FLASHATTENTION_VERSION\n"
