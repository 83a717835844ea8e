"""Shell completion, written from the one table of options: the scripts load in real bash, zsh and fish, and the
answers come from the same table the parser reads (a new option completes without a line of completion code)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fa_doctor.cli.completion import candidates, install, script
from fa_doctor.cli.spec import COMMANDS


def complete(line: str, env: dict[str, str] | None = None) -> list[str]:
    words = line.split(" ")
    return candidates({"COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1), **(env or {})})


def fa_doctor(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fa_doctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


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


def test_every_option_of_the_table_completes() -> None:
    for command in COMMANDS.values():
        offered = complete(f"fa-doctor {command.name} --")
        for option in command.options:
            assert option.name in offered, (command.name, option.name)


def test_paths_complete_from_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "venv").mkdir()
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / ".hidden").write_text("")
    monkeypatch.chdir(tmp_path)
    assert complete("fa-doctor check --python ") == ["report.json", "venv/"]
    assert complete("fa-doctor merge re") == ["report.json"]
    assert complete(f"fa-doctor check --python {tmp_path}/v") == [f"{tmp_path}/venv/"]


def test_exec_completes_files_after_the_command_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "serve.sh").write_text("")
    monkeypatch.chdir(tmp_path)
    assert complete("fa-doctor exec -- python3 --") == []  # COMMAND's options are not fa-doctor's
    assert complete("fa-doctor exec -- se") == ["serve.sh"]


def test_the_protocol_through_the_real_program() -> None:
    words = fa_doctor(env={"_FA_DOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "fa-doctor ch", "COMP_CWORD": "1"})
    assert words.returncode == 0 and words.stdout.split() == ["check"]


def test_bash_loads_the_script_and_completes(tmp_path: Path) -> None:
    """Real bash sources the printed script and runs its completion function on a line."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fa-doctor").write_text(f'#!/bin/sh\nexec {sys.executable} -m fa_doctor "$@"\n')
    (bindir / "fa-doctor").chmod(0o755)
    code = (
        f"{script('bash')}\n"
        'COMP_WORDS=(fa-doctor check --no-s); COMP_CWORD=2; _fa_doctor_complete; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0 and run.stdout.split() == ["--no-smoke"], run.stderr


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


@pytest.mark.parametrize(
    ("shell", "where"),
    [
        ("bash", ".local/share/bash-completion/completions/fa-doctor"),
        ("zsh", ".zfunc/_fa-doctor"),
        ("fish", ".config/fish/completions/fa-doctor.fish"),
    ],
)
def test_install_writes_one_file_and_no_rc_file(shell: str, where: str, tmp_path: Path) -> None:
    (tmp_path / ".bashrc").write_text("# mine\n")
    run = fa_doctor(
        "--install-completion", shell, env={"HOME": str(tmp_path), "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""}
    )
    assert run.returncode == 0 and str(tmp_path / where) in run.stderr, run.stderr
    assert (tmp_path / where).read_text() == script(shell)
    assert (tmp_path / ".bashrc").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted([".bashrc", Path(where).name])


def test_install_returns_the_path(tmp_path: Path) -> None:
    where, todo = install("zsh", {"HOME": str(tmp_path)})
    assert where == tmp_path / ".zfunc" / "_fa-doctor" and "fpath" in todo
