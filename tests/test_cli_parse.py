"""The command line as typer declares it and click reads it: the rules users rely on (values, flags, exec's
COMMAND, FA_DOCTOR_* defaults), misuse as exit 2 in the format asked for, and a round trip over every declared
option: any line built from the declarations, in any spelling, reads back to the values it was built from."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import typer.main
from clirun import invoke
from hypothesis import given
from hypothesis import strategies as st

from fa_doctor.cli.app import UsageError, app
from fa_doctor.diagnose.derive import VALID
from fa_doctor.model.result import Result
from fa_doctor.render.base import FORMATS
from fa_doctor.render.shell import SHELLS

COMMANDS: dict[str, Any] = typer.main.get_command(app).commands  # type: ignore[attr-defined]


def read(*args: str) -> Any:
    """What the real command makes of a line (click's context: parsed and checked, nothing run)."""
    return COMMANDS[args[0]].make_context(args[0], list(args[1:]))


def misuse(*args: str, env: dict[str, str] | None = None) -> str:
    run = invoke(list(args), env=env)
    assert run.exit_code == 2 and run.stdout == "" and "Traceback" not in run.stderr, (run.stdout, run.stderr)
    return " ".join(run.stderr.split())


def test_values_in_both_spellings_and_defaults() -> None:
    ctx = read("check", "--python=/a/python", "--timeout", "12", "--json")
    p = ctx.params
    assert p["python"] == "/a/python" and p["timeout"] == 12.0 and p["as_json"] is True
    assert p["fmt"] == "human" and p["strict"] is False and p["gpus"] is None
    given_here = {n for n in p if ctx.get_parameter_source(n).name == "COMMANDLINE"}
    assert given_here == {"python", "timeout", "as_json"}


def test_the_next_word_is_the_value_whatever_it_looks_like() -> None:
    p = read("check", "--python", "--json").params
    assert p["python"] == "--json" and p["as_json"] is False


def test_short_flags_combine() -> None:
    p = read("check", "-vq").params
    assert p["verbose"] is True and p["quiet"] is True
    assert "No such option" in misuse("check", "-vx") and "-x" in misuse("check", "-vx")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["check", "--jso"], ("No such option", "--jso")),  # no abbreviations
        (["check", "--json=1"], "does not take a value"),
        (["check", "--python"], "requires an argument"),
        (["check", "--timeout", "nan"], "--timeout"),
        (["check", "--timeout", "soon"], "'soon' is not a number of seconds"),
        (["check", "--format", "yaml"], "'yaml': one of human"),
        (["check", "stray"], "unexpected extra argument"),
        (["chekc"], "No such command 'chekc'"),
        (["--bogus", "check", "--json"], ("No such option", "--bogus")),  # before the command: not dropped
        (["--json", "check"], ("No such option", "--json")),
        (["exec"], "Missing argument 'COMMAND'"),
        (["exec", "--", ""], "COMMAND is empty"),
        (["merge"], "Missing argument 'PATH'"),
        (["fleet", "slurm"], "'slurm': one of ray"),
        (["explain", "--limit", "0"], "needs 1 to 50"),
        (["merge", "--expect", "x", "a.json"], "not a whole number"),
        (["fix", "--set", "5"], "'5': one of 2, 3, 4"),
        (["fix", "--shell", "tcsh"], "'tcsh': one of bash"),
        (["fix", "--env-file", " "], "needs a file path"),
        (["fix", "--plan", "--apply"], "--plan and --apply exclude each other"),
        (["fix", "--unset-override", "--apply"], "does not combine with --plan, --apply"),
        (["fleet", "ray", "--node-timeout", "0"], "at least 1"),
        (["--show-completion", "tcsh"], "'tcsh': one of bash, zsh, fish"),
        (["--install-completion", "tcsh"], "'tcsh': one of bash, zsh, fish"),
    ],
)
def test_misuse_names_what_is_wrong(args: list[str], needle: str | tuple[str, ...]) -> None:
    text = misuse(*args)  # click's words differ between releases ("No such option: -x", "No such option '-x'")
    assert all(n in text for n in ((needle,) if isinstance(needle, str) else needle)), text
    assert text.startswith("Usage: fa-doctor") and "-h' for help" in text


@pytest.mark.parametrize("args", [["-h"], *([name, "--help"] for name in COMMANDS)])
def test_every_help(args: list[str]) -> None:
    run = invoke(args)
    assert run.exit_code == 0 and run.stdout.startswith("Usage: fa-doctor") and "Exit codes:" in run.stdout, run


def test_fa_doctor_alone_shows_what_it_can_do_as_misuse() -> None:
    run = invoke([])
    assert run.exit_code == 2 and run.stdout == "" and "Commands:" in run.stderr and "check" in run.stderr


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str) -> None:
    from fa_doctor import __version__

    run = invoke([flag])
    assert run.exit_code == 0 and run.stdout == f"fa-doctor {__version__}\n"


def test_a_repeated_option_keeps_the_last_value_and_a_repeatable_one_all() -> None:
    assert read("check", "--timeout", "5", "--timeout", "7").params["timeout"] == 7.0
    assert list(read("fix", "--only", "a.b", "--only=c.d").params["only"]) == ["a.b", "c.d"]


def test_exec_command_starts_at_the_first_positional_or_double_dash() -> None:
    p = read("exec", "--json", "python3", "-m", "sglang.launch_server", "--json", "--help").params
    assert list(p["command_args"]) == ["python3", "-m", "sglang.launch_server", "--json", "--help"]
    p = read("exec", "--warn-only", "--", "--odd-name", "-x").params
    assert list(p["command_args"]) == ["--odd-name", "-x"] and p["warn_only"] is True


def test_options_and_positionals_mix_elsewhere() -> None:
    p = read("merge", "a.json", "--strict", "b", "--", "--c.json", "-").params
    assert list(p["paths"]) == ["a.json", "b", "--c.json", "-"] and p["strict"] is True
    assert read("explain", "-", "--json").params["text"] == "-"


def test_help_before_exec_command_but_not_after() -> None:
    run = invoke(["exec", "--help"])
    assert run.exit_code == 0 and "Usage: fa-doctor exec" in run.stdout
    assert list(read("exec", "--", "server", "--help").params["command_args"]) == ["server", "--help"]


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"FA_DOCTOR_TIMEOUT": "9", "FA_DOCTOR_STRICT": "yes", "FA_DOCTOR_QUIET": ""}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FA_DOCTOR_FORMAT", "json")
    ctx = read("check", "--format", "github")
    p = ctx.params
    assert p["timeout"] == 9.0 and p["strict"] is True and p["quiet"] is False and p["fmt"] == "github"
    assert ctx.get_parameter_source("timeout").name == "ENVIRONMENT"
    assert ctx.get_parameter_source("quiet").name == "DEFAULT"  # empty: unset
    monkeypatch.setenv("FA_DOCTOR_NO_SMOKE", "maybe")
    monkeypatch.delenv("FA_DOCTOR_FORMAT")
    with pytest.raises(UsageError):
        read("check")
    assert "FA_DOCTOR_NO_SMOKE" in misuse("check")  # named, whatever the click release
    assert read("check", "--no-smoke").params["no_smoke"] is True  # the line wins, the variable is not read


@pytest.mark.parametrize(
    ("args", "env", "fmt"),
    [
        (["check", "--json", "--bogus"], {}, "json"),
        (["check", "--bogus", "--json"], {}, "json"),  # read past the error
        (["check", "--format=junit", "--bogus"], {}, "junit"),
        (["check", "--bogus"], {"FA_DOCTOR_FORMAT": "github"}, "github"),
        (["check", "--timeout", "nan"], {"FA_DOCTOR_FORMAT": "json"}, "json"),
        (["check", "--python", "--json", "--bogus"], {}, "human"),  # --json is a value there
        (["exec", "--bogus", "--", "server", "--json"], {}, "human"),  # COMMAND's --json is not ours
        (["check", "--format", "yaml"], {}, "human"),
        (["check", "--bogus"], {"FA_DOCTOR_FORMAT": "yaml"}, "human"),
        (["nonsense", "--json"], {}, "human"),
    ],
)
def test_the_format_a_usage_error_answers_in(args: list[str], env: dict[str, str], fmt: str) -> None:
    run = invoke(args, env=env)
    assert run.exit_code == 2
    stream = run.stderr if args[0] == "exec" else run.stdout
    if fmt == "human":
        assert run.stdout == "" and "Error: " in run.stderr
    elif fmt == "json":
        doc = json.loads(stream)
        assert doc["exit_code"] == 2 and doc["error"] and doc["command"] == args[0]
    elif fmt == "junit":
        assert stream.startswith("<?xml")
    else:
        assert "::error" in stream


def test_fleet_forwards_the_check_options_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from fa_doctor.commands import fleet

    seen: list[Any] = []

    def run(options: Any, progress: Any = None, early: Any = None) -> Result:
        seen.append(options)
        return Result(command="fleet")

    monkeypatch.setattr(fleet, "run", run)
    args = ["fleet", "ray", "--no-smoke", "--gpus", "0,1", "--json", "--timeout", "30", "--address", "h:1"]
    assert invoke(args).exit_code == 0
    assert sorted(seen[-1].check_args) == sorted(("--no-smoke", "--timeout", "30.0", "--gpus", "0,1"))
    assert (seen[-1].address, seen[-1].deadline) == ("h:1", 600.0)
    assert invoke(["fleet", "ray", "--json"], env={"FA_DOCTOR_STRICT": "1"}).exit_code == 0
    assert seen[-1].check_args == ("--strict",) and seen[-1].strict is True


# ---- the round trip over the declarations ------------------------------------------------------------------

_SAMPLES = {
    "python": "/srv/venv/bin/python",
    "fmt": "markdown",
    "junit": "out.xml",
    "markdown": "sum.md",
    "output": "report.txt",
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
_NUMBERS = {"timeout": float, "node_timeout": float, "limit": int, "expect": int}
_POSITIONAL = {"exec": ["python3", "-m", "sglang.launch_server"], "merge": ["reports/"], "fleet": ["ray"]}


def _options(command: Any) -> list[Any]:
    """Every option but --help; one the samples lack fails the test (add it to _SAMPLES)."""
    return [p for p in command.params if p.param_type_name == "option" and p.name != "help"]


@given(data=st.data())
def test_any_line_from_the_declarations_reads_back(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(COMMANDS)))
    command = COMMANDS[name]
    options = _options(command)
    chosen = data.draw(st.permutations(data.draw(st.lists(st.sampled_from(options), unique_by=lambda o: o.name))))
    argv: list[str] = []
    for option in chosen:
        spelling = data.draw(st.integers(0, 3))
        if option.is_flag:
            argv.append(option.opts[spelling % len(option.opts)])
        else:
            value = _SAMPLES[option.name]
            argv += [f"{option.opts[-1]}={value}"] if spelling % 2 else [option.opts[-1], value]
    argv += ["--", *_POSITIONAL[name]] if name in _POSITIONAL else []
    ctx = command.make_context(name, argv)
    for option in chosen:
        expected: object = True
        if not option.is_flag:
            text = _SAMPLES[option.name]
            expected = _NUMBERS[option.name](text) if option.name in _NUMBERS else text
            expected = [expected] if option.multiple else expected
        got = list(ctx.params[option.name]) if option.multiple else ctx.params[option.name]
        assert got == expected and ctx.get_parameter_source(option.name).name == "COMMANDLINE", (argv, option.name)
    for option in options:
        if option not in chosen:
            assert ctx.get_parameter_source(option.name).name == "DEFAULT", (argv, option.name)


def test_a_usage_error_quoting_the_line_stays_on_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fa_doctor", "check", "--timeout", "1\n::error::owned"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and not any(line.startswith("::") for line in done.stderr.splitlines())
    assert "owned" in done.stderr


def test_help_lists_the_valid_values_from_where_they_are_defined() -> None:
    text = " ".join(invoke(["fix", "--help"]).stdout.split())
    for values in (FORMATS, tuple(str(v) for v in VALID), SHELLS):
        assert f"one of {', '.join(values)}" in text
