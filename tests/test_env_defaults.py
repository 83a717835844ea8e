"""FA_DOCTOR_* variables give the common options their defaults (a unit file or a pod spec sets them once); a bad
value is a usage error (exit 2), the command line still wins. Colour: --no-color, FORCE_COLOR, NO_COLOR, a TTY."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from fakeenv import FakeEnv

from fa_doctor.render.progress import wants_color

ESC = "\x1b["


def test_format_and_python_from_the_environment(cli: Any, fenv: FakeEnv) -> None:
    run = cli("check", "--no-smoke", env={"FA_DOCTOR_FORMAT": "json", "FA_DOCTOR_PYTHON": fenv.python})
    assert run.doc["target"]["python"] == fenv.python


def test_the_command_line_wins(cli: Any, fenv: FakeEnv) -> None:
    run = cli("check", "--no-smoke", "--format", "human", "--python", fenv.python, env={"FA_DOCTOR_FORMAT": "json"})
    assert run.stdout.startswith("fa-doctor check")


@pytest.mark.parametrize(
    ("name", "value", "key"),
    [("FA_DOCTOR_STRICT", "1", "strict"), ("FA_DOCTOR_STRICT", "true", "strict"), ("FA_DOCTOR_STRICT", "no", None)],
)
def test_flags_from_the_environment(cli: Any, fenv: FakeEnv, name: str, value: str, key: str | None) -> None:
    doc = cli("check", "--no-smoke", "--json", "--python", fenv.python, env={name: value}).doc
    assert doc["strict"] is (key is not None)


def test_no_smoke_and_quiet_from_the_environment(cli: Any, fenv: FakeEnv) -> None:
    run = cli("check", "--python", fenv.python, env={"FA_DOCTOR_NO_SMOKE": "1", "FA_DOCTOR_QUIET": "yes"})
    assert run.stdout.startswith("fa-doctor check: ") and "smoke" not in run.stdout.split("\n")[0].lower()


@pytest.mark.parametrize(
    "env",
    [
        {"FA_DOCTOR_FORMAT": "xml"},
        {"FA_DOCTOR_TIMEOUT": "soon"},
        {"FA_DOCTOR_TIMEOUT": "nan"},
        {"FA_DOCTOR_NO_SMOKE": "maybe"},
        {"FA_DOCTOR_QUIET": "loud"},
        {"FA_DOCTOR_GPUS": "first"},
        {"FA_DOCTOR_GPU_ARCH": "sm_9x"},
    ],
)
def test_an_invalid_value_is_a_usage_error(cli: Any, fenv: FakeEnv, env: dict[str, str]) -> None:
    run = cli("check", "--python", fenv.python, env=env)
    name = next(iter(env))
    assert run.code == 2 and name in run.stderr, run.stderr


def test_a_usage_error_answers_in_the_format_from_the_environment() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--timeout", "nan"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FA_DOCTOR_FORMAT": "json"},
    )
    doc = json.loads(run.stdout)
    assert run.returncode == 2 and doc["exit_code"] == 2 and "--timeout" in doc["error"]


def test_help_names_the_variables(cli: Any) -> None:
    text = " ".join(cli("check", "--help").stdout.split())
    for name in ("FA_DOCTOR_PYTHON", "FA_DOCTOR_FORMAT", "FA_DOCTOR_TIMEOUT", "FA_DOCTOR_NO_SMOKE", "FA_DOCTOR_QUIET"):
        assert name in text


# ---- colour -----------------------------------------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("tty", "flag", "env", "expected"),
    [
        (True, False, {}, True),
        (False, False, {}, False),
        (True, False, {"NO_COLOR": "1"}, False),
        (True, False, {"NO_COLOR": ""}, True),  # no-color.org: present and not empty
        (False, False, {"FORCE_COLOR": "1"}, True),
        (False, False, {"FORCE_COLOR": ""}, False),  # force-color.org: present and not empty
        (False, False, {"FORCE_COLOR": "0"}, True),  # "regardless of its value"
        (True, False, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True),  # force-color.org: checked after NO_COLOR
        (False, True, {"FORCE_COLOR": "1"}, False),  # the command line is the most specific request
    ],
)
def test_colour_order(tty: bool, flag: bool, env: dict[str, str], expected: bool) -> None:
    stream = Tty() if tty else io.StringIO()
    assert wants_color(stream, flag, env) is expected


def test_force_color_colours_a_piped_report(cli: Any, fenv: FakeEnv) -> None:
    coloured = cli("check", "--no-smoke", "--python", fenv.python, env={"FORCE_COLOR": "1"})
    plain = cli("check", "--no-smoke", "--python", fenv.python)
    refused = cli("check", "--no-smoke", "--no-color", "--python", fenv.python, env={"FORCE_COLOR": "1"})
    assert ESC in coloured.stdout and ESC not in plain.stdout and ESC not in refused.stdout
    as_json = cli("check", "--no-smoke", "--json", "--python", fenv.python, env={"FORCE_COLOR": "1"})
    assert ESC not in as_json.stdout
