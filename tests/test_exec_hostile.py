"""A hostile round against `exec`'s reading of COMMAND: odd argv, `env` abuse and broken `#!` lines. Whatever
COMMAND is, parse_launch answers (never raises, never blocks) and either names an interpreter that exists or
says why it cannot; what reaches a report stays on one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fa_doctor.commands.launch import Launch, parse_launch

LONG = "x" * 10_000

ARGV: list[list[str]] = [
    ["--"],
    ["-"],
    ["-m"],
    ["env", "-S", ""],
    ["env", "-S", "   "],
    ["env", "-S", "\\c python3"],
    ["env", "-S", "# only a comment"],
    ["env", "-S", "env -S 'env -S python3'"],
    ["env"] * 20 + ["python3"],
    ["env", "-i"],
    ["env", "--unset="],
    ["env", "-u", ""],
    ["env", "--split-string"],
    ["env", "--chdir"],
    ["env", "-S", "'" * 1001],
    ["env", "-S", "${"],
    ["env", "-S", "${PATH"],
    ["env", "-C", "", "python3"],
    ["env", "-vvvvvv0i", "PATH=/usr/bin:/bin", "python3"],
    ["env", "-i", "python3"],  # no PATH at all: execvp's default path
    ["python3", "-W"],
    ["python3", "-X"],
    ["python3", "-m", ""],
    ["python3", "-msglang.launch_server", "--attention-backend"],
    ["python3", "-m", "sglang.launch_server", "--attention-backend=a\nb::error::x"],
    ["/"],
    ["."],
    ["..."],
    ["a\nb::error::x"],
    ["\udcff"],
    [" python3"],
    ["python3 "],
    [LONG],
    ["env", f"{LONG}=1", "python3"],
    ["env", "-S", " ".join(["A=1"] * 2000) + " python3"],
    ["/proc/self/fd/0"],
    ["/dev/null"],
]


def check_answer(launch: Launch) -> None:
    assert (launch.python is None) == (launch.problem is not None) or launch.python is None
    if launch.python is not None:
        assert os.path.exists(launch.python), launch
    else:
        assert launch.problem


@pytest.mark.parametrize("argv", ARGV, ids=range(len(ARGV)))
def test_any_argv_is_answered(argv: list[str]) -> None:
    check_answer(parse_launch(argv, dict(os.environ)))


SHEBANG_FILES: list[bytes] = [
    b"#!" + b"/" * 600 + b"\n",
    b"#!\x00python3\n",
    b"#!/usr/bin/env\n",
    b"#!/usr/bin/env -S\n",
    b"#!/usr/bin/env -S ''\n",
    b"#!\xff\xfe/python3\n",
    b"#!/usr/bin/env -S python3 'unterminated\n",
    b"#!/usr/bin/env serve\n",  # itself again, through env, forever
    b"#!/tmp\n",  # a folder
    b"#!/usr/bin/env -i python3\n",  # no -S: env reads one option word "-i python3"
    b"#!/usr/bin/env -S -i python3\n",
    b"#!/usr/bin/env -S python3 -c 'import sys' -m sglang.launch_server\n",
    b"#!/dev/null\n",
    b"#!" + b"a" * 100_000,
    b"\xef\xbb\xbf#!/usr/bin/env python3\n",  # a BOM: the kernel sees no #!
]


@pytest.mark.parametrize("content", SHEBANG_FILES, ids=range(len(SHEBANG_FILES)))
def test_any_shebang_is_answered(tmp_path: Path, content: bytes) -> None:
    serve = tmp_path / "serve"
    serve.write_bytes(content)
    serve.chmod(0o755)
    check_answer(parse_launch(["serve"], {"PATH": f"{tmp_path}:/usr/bin:/bin"}))


def test_an_unreadable_script(tmp_path: Path) -> None:
    serve = tmp_path / "serve"
    serve.write_text("#!/usr/bin/env python3\n")
    serve.chmod(0o111)
    launch = parse_launch([str(serve)], {"PATH": "/usr/bin:/bin"})
    check_answer(launch)


def test_a_symlink_loop_as_command(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    launch = parse_launch([str(tmp_path / "a")], {"PATH": "/usr/bin"})
    assert launch.python is None and launch.problem


HOSTILE = "/tmp/x\n::error::PWNED\r\n##[add-mask]PWNED2"


@pytest.mark.parametrize(
    "command",
    [
        [HOSTILE],
        ["env", f"A={HOSTILE}", HOSTILE],
        [sys.executable, "-m", "sglang.launch_server", "--attention-backend", "fa3\n::error::PWNED"],
    ],
)
def test_hostile_command_text_stays_on_its_line(command: list[str]) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fa_doctor",
            "exec",
            "--no-smoke",
            "--allow-no-gpu",
            "--warn-only",
            "-v",
            "--",
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in proc.stderr
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("env: "):
            continue  # COMMAND's own words, once fa-doctor has become it
        assert not line.lstrip().startswith(("::error", "##[")) and "##[add-mask]" not in line, line
