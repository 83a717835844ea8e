"""`--show-completion SHELL` and `--install-completion SHELL`: the scripts typer writes for click's completion
(docs/internals.md). Installing writes one file where the shell looks on its own, through `process.atomic`, and
edits no rc file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fa_doctor.process.atomic import write_atomic

PROG, COMPLETE_VAR = "fa-doctor", "_FA_DOCTOR_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
# Loaded from fpath, the file is the body of `_fa-doctor`: the first completion must complete too, not only define.
_ZSH_AUTOLOAD = '\nif [[ "${funcstack[1]}" == "_fa-doctor" ]]; then _fa_doctor_completion "$@"; fi\n'


def script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    text = get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell) + "\n"
    return text + _ZSH_AUTOLOAD if shell == "zsh" else text


def install(shell: str, environ: Mapping[str, str]) -> tuple[Path, str]:
    """Writes the script; returns where, and what the user still has to do (or "")."""
    home = Path(environ.get("HOME") or Path.home())
    data = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    target, todo = {
        "bash": (data / "bash-completion" / "completions" / PROG, ""),
        "zsh": (home / ".zfunc" / f"_{PROG}", "add `fpath+=(~/.zfunc); autoload -Uz compinit; compinit` to ~/.zshrc"),
        "fish": (config / "fish" / "completions" / f"{PROG}.fish", ""),
    }[shell]
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(str(target), script(shell).encode("utf-8"))
    return target, todo
