"""Shell completion through typer (click's completion, typer's scripts): the answers come from the options typer
declares, the scripts load in real bash, zsh and fish, and installing writes one file, edits no rc file and never
writes through a planted link (issue 28)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from clirun import invoke

from fa_doctor.cli.app import app
from fa_doctor.cli.completion import install, script

COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


def complete(line: str) -> list[str]:
    """The bash protocol, through the real CLI: the candidates for the last word of `line`."""
    words = line.split(" ")
    run = invoke(
        [], env={"_FA_DOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    )
    assert run.exit_code == 0, run.stderr
    return run.stdout.split()


def fa_doctor(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


@pytest.fixture
def on_path(tmp_path: Path) -> dict[str, str]:
    """`fa-doctor` on PATH, as a shell's completion function calls it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fa-doctor").write_text(f'#!/bin/sh\nexec {sys.executable} -m fa_doctor "$@"\n')
    (bindir / "fa-doctor").chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}


def test_commands_options_and_values() -> None:
    assert complete("fa-doctor ch") == ["check"]
    assert complete("fa-doctor ") == list(COMMANDS)
    assert complete("fa-doctor check --qu") == ["--quiet"]
    assert complete("fa-doctor check --format ") == ["human", "json", "github", "junit", "markdown"]
    assert complete("fa-doctor check --format j") == ["json", "junit"]
    assert complete("fa-doctor fix --set ") == ["2", "3", "4"]
    assert complete("fa-doctor fix --shell f") == ["fish"]
    assert complete("fa-doctor fleet ") == ["ray"]
    assert complete("fa-doctor --show-completion ") == ["bash", "zsh", "fish"]
    assert "--warn-only" in complete("fa-doctor exec --") and "--warn-only" not in complete("fa-doctor check --")


def test_every_declared_option_completes() -> None:
    for name, command in COMMANDS.items():
        offered = complete(f"fa-doctor {name} --")
        for param in command.params:
            for flag in (*param.opts, *param.secondary_opts):
                assert not flag.startswith("--") or flag in offered, (name, flag)


def test_paths_and_commands_are_left_to_the_shell() -> None:
    """No candidates: the scripts fall back to the shell's own file completion (bash -o default, zsh _files,
    fish's files)."""
    assert complete("fa-doctor check --python ") == []
    assert complete("fa-doctor merge re") == []
    assert complete("fa-doctor exec -- se") == []
    assert complete("fa-doctor exec -- python3 --") == []  # COMMAND's options are not fa-doctor's


def test_a_completion_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\n")
    python.chmod(0o755)
    assert complete(f"fa-doctor check --python {python} --no-s") == ["--no-smoke"]
    assert not marker.exists()


def test_the_protocol_through_the_real_program() -> None:
    words = fa_doctor(env={"_FA_DOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "fa-doctor ch", "COMP_CWORD": "1"})
    assert words.returncode == 0 and words.stdout.split() == ["check"]


def test_odd_completion_requests_answer_at_once() -> None:
    """A huge word index completes like the last word (no hang, no traceback); a missing or non-numeric one is
    refused with one line, exit 1; a word list far longer than a shell holds still answers."""
    bash = {"_FA_DOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "fa-doctor ch"}
    huge = fa_doctor(env={**bash, "COMP_CWORD": "9" * 40})
    assert huge.returncode == 0 and "check" in huge.stdout.split(), huge.stderr
    for cword in ("abc", "-5", "", "\u0661"):
        odd = fa_doctor(env={**bash, "COMP_CWORD": cword})
        assert odd.returncode == 1 and odd.stdout == "" and "COMP_CWORD" in odd.stderr, (cword, odd.stderr)
        assert "Traceback" not in odd.stderr
    missing = fa_doctor(env=bash)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    long = fa_doctor(env={**bash, "COMP_WORDS": "fa-doctor " + "x " * 20000, "COMP_CWORD": "20001"})
    assert long.returncode == 0 and "Traceback" not in long.stderr


def test_bash_loads_the_script_and_completes(on_path: dict[str, str]) -> None:
    """Real bash sources the printed script and runs its completion function on a line."""
    code = (
        f"{script('bash')}\n"
        "COMP_WORDS=(fa-doctor check --no-s); COMP_CWORD=2; _fa_doctor_completion fa-doctor\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    run = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=60, env=on_path)
    assert run.returncode == 0 and run.stdout.split() == ["--no-smoke"], run.stderr


def test_zsh_autoloads_the_installed_file_and_completes(on_path: dict[str, str], tmp_path: Path) -> None:
    """Real zsh loads the installed file from fpath, as compinit does, and completes on the first try."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    where, _ = install("zsh", {"HOME": str(tmp_path)})
    code = (
        f"fpath=({where.parent} $fpath); autoload -Uz _fa-doctor\n"
        'compdef() { :; }; _files() { print files; }; _arguments() { print -r -- "$@"; }\n'
        "words=(fa-doctor check --no-s); CURRENT=3; _fa-doctor\n"
    )
    run = subprocess.run(["zsh", "-f", "-c", code], capture_output=True, text=True, timeout=60, env=on_path)
    assert run.returncode == 0 and '"--no-smoke"' in run.stdout, (run.stdout, run.stderr)


def test_fish_loads_the_script_and_completes(on_path: dict[str, str]) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    code = 'fa-doctor --show-completion fish | source; complete -C "fa-doctor check --format j"'
    run = subprocess.run(["fish", "-c", code], capture_output=True, text=True, timeout=60, env=on_path)
    assert run.returncode == 0 and run.stdout.split() == ["json", "junit"], run.stderr


@pytest.mark.parametrize(("shell", "check"), [("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])])
def test_the_other_scripts_parse(shell: str, check: list[str], tmp_path: Path) -> None:
    if shutil.which(check[0]) is None:
        pytest.skip(f"{check[0]} is not installed")
    path = tmp_path / f"completion.{shell}"
    path.write_text(script(shell))
    run = subprocess.run([*check, str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_show_completion(shell: str) -> None:
    run = fa_doctor("--show-completion", shell, env={})
    assert run.returncode == 0 and "_FA_DOCTOR_COMPLETE" in run.stdout and run.stdout == script(shell), run.stderr


def test_an_unknown_shell_is_a_usage_error() -> None:
    run = fa_doctor("--show-completion", "tcsh", env={})
    assert run.returncode == 2 and "tcsh" in run.stderr and run.stdout == ""


WHERE = {
    "bash": ".local/share/bash-completion/completions/fa-doctor",
    "zsh": ".zfunc/_fa-doctor",
    "fish": ".config/fish/completions/fa-doctor.fish",
}


@pytest.mark.parametrize("shell", sorted(WHERE))
def test_install_writes_one_file_and_no_rc_file(shell: str, tmp_path: Path) -> None:
    where = WHERE[shell]
    (tmp_path / ".bashrc").write_text("# mine\n")
    run = fa_doctor(
        "--install-completion", shell, env={"HOME": str(tmp_path), "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""}
    )
    assert run.returncode == 0 and str(tmp_path / where) in run.stderr and run.stdout == "", run.stderr
    assert (tmp_path / where).read_text() == script(shell)
    assert (tmp_path / ".bashrc").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted([".bashrc", Path(where).name])


def test_install_returns_the_path(tmp_path: Path) -> None:
    where, todo = install("zsh", {"HOME": str(tmp_path)})
    assert where == tmp_path / ".zfunc" / "_fa-doctor" and "fpath" in todo


@pytest.mark.parametrize("shell", sorted(WHERE))
def test_install_never_writes_through_a_planted_link(shell: str, tmp_path: Path) -> None:
    """Links planted at the target and at every name a temporary file of the old writer took (pid-named): the
    files they point to stay as they were, and the target becomes a file of its own."""
    home = tmp_path / "home"
    target = home / WHERE[shell]
    target.parent.mkdir(parents=True)
    victims = []
    for name in (target.name, f".{target.name}.{os.getpid()}.tmp", f".{target.name}.tmp"):
        victim = tmp_path / f"victim-{len(victims)}"
        victim.write_text("the user's own file\n")
        (target.parent / name).symlink_to(victim)
        victims.append(victim)
    where, _ = install(shell, {"HOME": str(home)})
    assert where == target and not target.is_symlink() and target.read_text() == script(shell)
    assert all(v.read_text() == "the user's own file\n" for v in victims)
    left = sorted(p.name for p in target.parent.iterdir())
    assert left == sorted([target.name, f".{target.name}.{os.getpid()}.tmp", f".{target.name}.tmp"])
