"""The one argument parser (fa_doctor.cli.parse) against its rules, and a round trip over the whole table: any
line built from the spec, in any spelling, parses back to the values it was built from."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fa_doctor.cli.parse import Parsed, UsageError, forwarded, parse, requested_format
from fa_doctor.cli.spec import COMMANDS, FLAG, MANY, ROOT, Command, Option


def ok(*args: str, env: dict[str, str] | None = None) -> Parsed:
    return parse(list(args), env or {})


def bad(*args: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(UsageError) as exc:
        parse(list(args), env or {})
    return exc.value.message


def test_values_in_both_spellings_and_defaults() -> None:
    p = ok("check", "--python=/a/python", "--timeout", "12", "--json")
    assert p["python"] == "/a/python" and p["timeout"] == 12.0 and p["json"] is True
    assert p["format"] == "human" and p["strict"] is False and p["gpus"] is None
    assert p.given == {"python": "command line", "timeout": "command line", "json": "command line"}


def test_the_next_word_is_the_value_whatever_it_looks_like() -> None:
    assert ok("check", "--python", "--json")["python"] == "--json"
    assert ok("check", "--python", "--json")["json"] is False


def test_short_flags_combine() -> None:
    p = ok("check", "-vq")
    assert p["verbose"] is True and p["quiet"] is True
    assert "-x" in bad("check", "-vx")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["check", "--jso"], "No such option: --jso"),  # no abbreviations
        (["check", "--json=1"], "does not take a value"),
        (["check", "--python"], "requires an argument"),
        (["check", "--timeout", "nan"], "--timeout"),
        (["check", "--format", "yaml"], "'yaml': one of human"),
        (["check", "stray"], "unexpected extra argument"),
        (["chekc"], "No such command 'chekc'. (Possible commands: check)"),
        (["--bogus", "check", "--json"], "No such option: --bogus"),  # before the command: not dropped
        (["--json", "check"], "No such option: --json"),
        (["exec"], "Missing argument 'COMMAND'"),
        (["merge"], "Missing argument 'PATH...'"),
        (["fleet", "slurm"], "'slurm': one of ray"),
        (["explain", "--limit", "0"], "needs 1 to 50"),
        (["merge", "--expect", "x", "a.json"], "not a whole number"),
        (["fix", "--set", "5"], "takes 2, 3, 4"),
        (["--show-completion", "tcsh"], "one of bash, zsh, fish"),
    ],
)
def test_misuse_names_what_is_wrong(args: list[str], needle: str) -> None:
    assert needle in bad(*args)


def test_a_repeated_option_keeps_the_last_value_and_many_keeps_all() -> None:
    assert ok("check", "--timeout", "5", "--timeout", "7")["timeout"] == 7.0
    assert ok("fix", "--only", "a.b", "--only=c.d")["only"] == ("a.b", "c.d")


def test_exec_command_starts_at_the_first_positional_or_double_dash() -> None:
    p = ok("exec", "--json", "python3", "-m", "sglang.launch_server", "--json", "--help")
    assert p["command"] == ["python3", "-m", "sglang.launch_server", "--json", "--help"] and not p.help
    p = ok("exec", "--warn-only", "--", "--odd-name", "-x")
    assert p["command"] == ["--odd-name", "-x"] and p["warn_only"] is True
    assert ok("exec", "--", "")["command"] == [""]  # the CLI says COMMAND is empty


def test_options_and_positionals_mix_elsewhere() -> None:
    p = ok("merge", "a.json", "--strict", "b", "--", "--c.json", "-")
    assert p["paths"] == ["a.json", "b", "--c.json", "-"] and p["strict"] is True
    assert ok("explain", "-", "--json")["text"] == "-"


def test_help_anywhere_before_the_command_wins_over_errors() -> None:
    assert ok("check", "--bogus", "--help").help
    assert ok("--help").help and ok("--help").command is ROOT
    assert not ok("exec", "--", "server", "--help").help


def test_environment_defaults() -> None:
    env = {"FA_DOCTOR_TIMEOUT": "9", "FA_DOCTOR_STRICT": "yes", "FA_DOCTOR_QUIET": "", "FA_DOCTOR_FORMAT": "json"}
    p = ok("check", "--format", "github", env=env)
    assert p["timeout"] == 9.0 and p["strict"] is True and p["quiet"] is False and p["format"] == "github"
    assert p.given["timeout"] == "FA_DOCTOR_TIMEOUT" and "quiet" not in p.given  # empty: unset
    assert "FA_DOCTOR_NO_SMOKE" in bad("check", env={"FA_DOCTOR_NO_SMOKE": "maybe"})
    assert ok("check", "--no-smoke", env={"FA_DOCTOR_NO_SMOKE": "maybe"})["no_smoke"] is True  # the line wins


def test_resilient_reads_past_errors() -> None:
    p = parse(["check", "--bogus", "--json", "--timeout", "x"], {}, resilient=True)
    assert p["json"] is True and len(p.errors) == 2


@pytest.mark.parametrize(
    ("args", "env", "fmt"),
    [
        (["check", "--json", "--bogus"], {}, "json"),
        (["check", "--format=junit", "--bogus"], {}, "junit"),
        (["check", "--bogus"], {"FA_DOCTOR_FORMAT": "github"}, "github"),
        (["check", "--python", "--json", "--bogus"], {}, "human"),
        (["exec", "--bogus", "--", "server", "--json"], {}, "human"),
        (["check", "--format", "yaml"], {}, "human"),
        (["nonsense", "--json"], {}, "human"),
    ],
)
def test_the_format_a_usage_error_answers_in(args: list[str], env: dict[str, str], fmt: str) -> None:
    assert requested_format(args, env) == fmt


def test_fleet_forwards_the_check_options_it_was_given() -> None:
    p = ok("fleet", "ray", "--no-smoke", "--gpus", "0,1", "--json", "--timeout", "30", "--address", "h:1")
    assert forwarded(p) == ("--no-smoke", "--timeout", "30.0", "--gpus", "0,1")
    assert forwarded(ok("fleet", "ray", env={"FA_DOCTOR_STRICT": "1"})) == ("--strict",)


# ---- the round trip over the table --------------------------------------------------------------------------

_SAMPLES = {
    "python": "/srv/venv/bin/python",
    "format": "markdown",
    "junit": "out.xml",
    "markdown": "sum.md",
    "timeout": "42.5",
    "gpus": "0,3",
    "gpu_arch": "sm_90,sm_100",
    "attention": "fa4",
    "prefill": "fa3",
    "decode": "flashinfer",
    "file": "err.txt",
    "limit": "7",
    "set_value": "3",
    "shell": "fish",
    "env_files": "/etc/default/sglang",
    "only": "override.invalid",
    "expect": "16",
    "address": "10.0.0.1:6379",
    "node_timeout": "90",
}
_POSITIONAL = {"exec": ["python3", "-m", "sglang.launch_server"], "merge": ["reports/"], "fleet": ["ray"]}


def _words(option: Option, spelling: int) -> list[str]:
    if option.kind == FLAG:
        return [option.flags[spelling % len(option.flags)]]
    value = _SAMPLES[option.dest]
    return [f"{option.name}={value}"] if spelling % 2 else [option.name, value]


@given(data=st.data())
def test_any_line_from_the_table_parses_back(data: st.DataObject) -> None:
    command: Command = data.draw(st.sampled_from(list(COMMANDS.values())))
    chosen = data.draw(st.lists(st.sampled_from(command.options), unique_by=lambda o: o.dest))
    chosen = data.draw(st.permutations(chosen))
    argv = [command.name]
    for option in chosen:
        argv += _words(option, data.draw(st.integers(0, 3)))
    argv += ["--", *_POSITIONAL[command.name]] if command.name in _POSITIONAL else []
    p = parse(argv, {})
    for option in chosen:
        expected: object = True
        if option.kind != FLAG:
            text = _SAMPLES[option.dest]
            expected = (
                float(text) if option.check == "seconds" else int(text) if option.check in ("limit", "count") else text
            )
            expected = (expected,) if option.kind == MANY else expected
        assert p[option.dest] == expected and p.given[option.dest] == "command line", (argv, option.dest)
    untouched = [o for o in command.options if o not in chosen]
    assert all(p[o.dest] == o.default for o in untouched)


def test_a_usage_error_quoting_the_line_stays_on_one_line() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--timeout", "1\n::error::owned"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and not any(line.startswith("::") for line in done.stderr.splitlines())
    assert "owned" in done.stderr


def test_help_lists_the_valid_values_from_where_they_are_defined() -> None:
    from fa_doctor.cli.help import render
    from fa_doctor.cli.values import formats, override_values, shells

    text = " ".join(render(COMMANDS["fix"]).split())
    for values in (formats(), override_values(), shells()):
        assert f"one of: {', '.join(values)}" in text
