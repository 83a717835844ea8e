"""`commands/launch.py`: COMMAND followed as the kernel and `env` would run it, without running it: the
interpreter, the environment the server gets, and SGLang's backend flags; where the Python cannot be told,
`problem` says why (never a silent guess, never `--python '-S'`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from fa_doctor.commands.exec import ExecOptions, plan
from fa_doctor.commands.launch import parse_launch, split_string
from fa_doctor.model.options import CheckOptions
from fa_doctor.probes.environment import OVERRIDE


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    """A PATH of its own: python3 and python are links to this interpreter, sh and true are the system's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("python3", "python"):
        (bindir / name).symlink_to(sys.executable)
    for tool in ("sh", "true", "nice"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    return bindir


def script(bindir: Path, name: str, text: str | bytes) -> str:
    path = bindir / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    path.chmod(0o755)
    return str(path)


def base_env(bindir: Path, **extra: str) -> dict[str, str]:
    return {"PATH": str(bindir), OVERRIDE: "3", **extra}


SG = ["-m", "sglang.launch_server", "--attention-backend", "fa4"]

# (argv, what the server's env holds afterwards: name -> value or None for absent, sglang, attention flag)
ENV_CASES: list[tuple[list[str], dict[str, str | None], bool, str | None]] = [
    (["env", f"{OVERRIDE}=5", "python3", *SG], {OVERRIDE: "5"}, True, "fa4"),
    (["env", "-u", OVERRIDE, "python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", f"-u{OVERRIDE}", "python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", f"--unset={OVERRIDE}", "python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", "--unset", OVERRIDE, "python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", "-u", OVERRIDE, f"{OVERRIDE}=4", "python3", *SG], {OVERRIDE: "4"}, True, "fa4"),  # -u, then NAME=
    (["env", "-i", "PATH=BIN", "python3", *SG], {OVERRIDE: None, "PATH": "BIN"}, True, "fa4"),
    (["env", "--ignore-environment", "PATH=BIN", "python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", "-", "PATH=BIN", "A=1", "python3", *SG], {OVERRIDE: None, "A": "1"}, True, "fa4"),
    (["env", "-S", f"{OVERRIDE}=5 python3 -m sglang.launch_server"], {OVERRIDE: "5"}, True, None),
    (["env", f"-S{OVERRIDE}=2 python3", *SG], {OVERRIDE: "2"}, True, "fa4"),
    (["env", f"--split-string=-u {OVERRIDE} python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", "-S", "python3 -m sglang.launch_server --attention-backend 'fa3'"], {}, True, "fa3"),
    (["env", "--", "python3", *SG], {OVERRIDE: "3"}, True, "fa4"),
    (["env", "A=1", "env", f"{OVERRIDE}=5", "env", "-u", "A", "python3", *SG], {OVERRIDE: "5", "A": None}, True, "fa4"),
    (["env", "-iv", "PATH=BIN", "python3", *SG], {OVERRIDE: None}, True, "fa4"),
    (["env", "--default-signal=PIPE", "python3", *SG], {OVERRIDE: "3"}, True, "fa4"),
    (["env", "PYTHONPATH=/opt/extra", "python3", *SG], {"PYTHONPATH": "/opt/extra"}, True, "fa4"),
    (["env", "A==x", "python3", *SG], {"A": "=x"}, True, "fa4"),
]


@pytest.mark.parametrize(("argv", "expect", "sglang", "attention"), ENV_CASES)
def test_env_is_followed(bindir: Path, argv: list[str], expect: dict[str, Any], sglang: bool, attention: Any) -> None:
    argv = [a.replace("BIN", str(bindir)) for a in argv]
    launch = parse_launch(argv, base_env(bindir))
    assert launch.problem is None and launch.python == str(bindir / "python3")
    for name, value in expect.items():
        assert launch.env.get(name) == (value.replace("BIN", str(bindir)) if value else None), name
    assert launch.sglang is sglang and launch.flags.attention == attention


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["env", "--bogus", "python3", *SG], "unknown option"),
        (["env", "-Z", "python3", *SG], "unknown option"),
        (["env", "-S", "python3 'unterminated"], "no closing quote"),
        (["env", "-S", "python3 \\q"], "invalid escape"),
        (["env", "-S", "python3 ${1BAD}"], "cannot expand"),
        (["env", "-u"], "needs a value"),
        (["env", "=x", "python3"], "cannot set"),
        (["env"], "no command"),
        (["env", "A=1"], "no command"),
        ([""], "no command"),
        (["env", "-P", "/opt/bin", "python3"], "not followed"),
        (["no-such-server-binary", "--attention-backend", "fa4"], "not on the server's PATH"),
        (["/no/such/python3", *SG], "does not exist"),
        (["python3.99", *SG], "not on the server's PATH"),
        (["nice", "python3", *SG], "not a Python script"),
        (["true"], "not a Python script"),
    ],
)
def test_what_env_or_the_kernel_would_refuse_is_a_problem(bindir: Path, argv: list[str], words: str) -> None:
    launch = parse_launch(argv, base_env(bindir))
    assert launch.python is None and launch.problem and words in launch.problem


@pytest.mark.parametrize(
    ("args", "sglang", "attention"),
    [
        (["-msglang.launch_server", "--attention-backend", "fa4"], True, "fa4"),
        (["-m", "sglang.cli.serve", "--attention-backend=fa3"], True, "fa3"),
        (["-X", "utf8", "-m", "sglang.launch_server", "--attention-backend", "fa4"], True, "fa4"),
        (["-Xutf8", "-Bm", "sglang.launch_server", "--attention-backend", "fa4"], True, "fa4"),
        (["-W", "ignore", "-u", "-msglang.launch_server", "--attention-backend", "fa4"], True, "fa4"),
        (["-IEs", "-m", "sglang.launch_server", "--attention-backend", "fa4"], True, "fa4"),
        (["-Bmsglang.launch_server", "--attention-backend", "fa4"], True, "fa4"),
        (["--check-hash-based-pycs", "never", "-m", "sglang.launch_server", "--attention-backend", "x"], True, "x"),
        (["-m", "sglang", "serve", "--attention-backend", "fa4"], True, "fa4"),
        (["-c", "import sglang; -m sglang.launch_server --attention-backend fa4"], False, None),
        (["-m", "vllm.entrypoints.openai.api_server", "--attention-backend", "fa4"], False, None),
        (["train.py", "-m", "sglang.launch_server", "--attention-backend", "fa4"], False, None),
        (["--", "-m", "sglang.launch_server", "--attention-backend", "fa4"], False, None),
        (["-", "--attention-backend", "fa4"], False, None),
        (["-m"], False, None),
        ([], False, None),
    ],
)
def test_python_options_are_read_as_cpython_reads_them(
    bindir: Path, args: list[str], sglang: bool, attention: str | None
) -> None:
    launch = parse_launch(["python3", *args], base_env(bindir))
    assert launch.python == str(bindir / "python3") and launch.problem is None
    assert launch.sglang is sglang and launch.flags.attention == attention


SHEBANGS: list[tuple[str, str | None, str | None]] = [
    ("#!/usr/bin/env -S python3 -X utf8\n", "python3", None),
    ("#!/usr/bin/env -S python3 -Xutf8 -u\n", "python3", None),
    ("#!/usr/bin/env python3\n", "python3", None),
    ("#!/usr/bin/env  python3  \n", "python3", None),
    ("#! /usr/bin/env python3\n", "python3", None),
    ("#!/usr/bin/env -S -u " + OVERRIDE + " python3\n", "python3", None),
    ("#!PYTHON\n", "python3", None),
    ("#!PYTHON -E\n", "python3", None),
    ("#!/usr/bin/env python3 -X utf8\n", None, "not on the server's PATH"),  # no -S: one word "python3 -X utf8"
    ("#!PYTHON\r\n", None, "does not exist"),  # CRLF: the kernel looks for "python3\r"
    ("#!/bin/sh\nexec python3 -m sglang.launch_server\n", None, "wrapper"),
    ('#!/bin/bash -e\nexec python3 "$@"\n', None, "wrapper"),
    ("import sys\n", None, "not a Python script"),
    ("", None, "not a Python script"),
    ("#!/opt/missing/venv/bin/python3\n", None, "does not exist"),
    ("#!\n", None, "not a Python script"),
]


@pytest.mark.parametrize(("text", "python", "words"), SHEBANGS)
def test_shebangs(bindir: Path, text: str, python: str | None, words: str | None) -> None:
    path = script(bindir, "serve", text.replace("PYTHON", str(bindir / "python3")))
    launch = parse_launch(["serve", "--attention-backend", "fa4"], base_env(bindir))
    if python:
        assert launch.problem is None and launch.python == str(bindir / python)
    else:
        assert launch.python is None and words and launch.problem and words in launch.problem, launch.problem
    assert path in launch.problem if launch.problem and words in ("wrapper", "not a Python script") else True


def test_env_s_shebang_carries_its_env_changes(bindir: Path) -> None:
    script(bindir, "serve", f"#!/usr/bin/env -S {OVERRIDE}=5 python3\n")
    launch = parse_launch(["serve"], base_env(bindir))
    assert launch.python == str(bindir / "python3") and launch.env[OVERRIDE] == "5"


def test_sglang_console_script(bindir: Path) -> None:
    script(bindir, "sglang", f"#!{bindir / 'python3'}\nimport sys\n")
    launch = parse_launch(["sglang", "serve", "--attention-backend", "fa4"], base_env(bindir))
    assert launch.python == str(bindir / "python3") and launch.sglang and launch.flags.attention == "fa4"


def test_sglang_console_script_with_a_missing_interpreter_still_shows_its_flags(bindir: Path) -> None:
    script(bindir, "sglang", "#!/opt/gone/bin/python3\n")
    launch = parse_launch(["sglang", "serve", "--decode-attention-backend", "fa3"], base_env(bindir))
    assert launch.python is None and "/opt/gone/bin/python3 does not exist" in (launch.problem or "")
    assert launch.sglang and launch.flags.decode == "fa3"


def test_a_shebang_loop_ends(bindir: Path) -> None:
    path = bindir / "loop"
    script(bindir, "loop", f"#!{path}\n")
    launch = parse_launch(["loop"], base_env(bindir))
    assert launch.python is None and launch.problem


def test_a_fifo_as_command_does_not_block(bindir: Path) -> None:
    fifo = bindir / "server"
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    launch = parse_launch([str(fifo)], base_env(bindir))
    assert launch.python is None and launch.problem


def test_env_chdir_resolves_a_relative_interpreter(bindir: Path, tmp_path: Path) -> None:
    launch = parse_launch(["env", "-C", str(tmp_path), "./bin/python3", *SG], base_env(bindir))
    assert launch.python == os.path.join(str(tmp_path), "./bin/python3") and launch.sglang


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a b  c", ["a", "b", "c"]),
        ("'a b' \"c d\"", ["a b", "c d"]),
        ("a\\_b", ["a", "b"]),
        ('"a\\_b"', ["a b"]),
        ("a ${HOME}x", ["a", "/homex"]),
        ("a \\c b", ["a"]),
        ("a #b c", ["a"]),
        ("a#b", ["a#b"]),
        ("'it''s'", ["its"]),
        ('"\\t"', ["\t"]),
        ("''", [""]),
    ],
)
def test_split_string_as_env_does(text: str, words: list[str]) -> None:
    assert split_string(text, {"HOME": "/home"}) == words


def test_plan_checks_the_environment_the_server_gets(bindir: Path) -> None:
    options = ExecOptions(CheckOptions(), ("env", f"{OVERRIDE}=5", "python3", *SG))
    check, _ = plan(options, {"PATH": str(bindir)})
    assert check.env is not None and check.env[OVERRIDE] == "5" and check.python == str(bindir / "python3")
    assert check.flags.attention == "fa4"


def test_plan_unset_override_then_env_sets_it_again(bindir: Path) -> None:
    options = ExecOptions(CheckOptions(), ("env", f"{OVERRIDE}=5", "python3"), unset_override=True)
    check, _ = plan(options, {"PATH": str(bindir), OVERRIDE: "3"})
    assert check.env is not None and check.env[OVERRIDE] == "5"  # what the server would really get


def test_plan_never_names_an_option_word_as_the_interpreter(bindir: Path) -> None:
    script(bindir, "serve", "#!/usr/bin/env -S python3 -X utf8\n")
    check, launch = plan(ExecOptions(CheckOptions(), ("serve",)), {"PATH": str(bindir)})
    assert check.python == str(bindir / "python3") and launch.problem is None


def test_plan_falls_back_to_the_servers_python3_for_a_wrapper(bindir: Path) -> None:
    script(bindir, "run.sh", "#!/bin/sh\nexec python3 -m sglang.launch_server\n")
    check, launch = plan(ExecOptions(CheckOptions(), ("run.sh",)), {"PATH": str(bindir)})
    assert launch.python is None and "wrapper" in (launch.problem or "")
    assert check.python == str(bindir / "python3")  # the server's PATH, not fa-doctor's own interpreter
