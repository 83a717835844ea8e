"""Shell completion from the one table of commands and options (`fa_doctor.cli.spec`).

The script a shell loads calls `fa-doctor` back with `_FA_DOCTOR_COMPLETE=complete_<shell>`, `COMP_WORDS` (the
line's words) and `COMP_CWORD` (the index of the word being completed); fa-doctor prints the candidates, one per
line, and nothing else runs (no probe, no check). Installing writes one file where the shell looks for completions
on its own; no rc file of the user is edited.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from fa_doctor.cli.spec import COMMANDS, FLAG, HELP, ROOT, Command

_BASH = """\
# fa-doctor completion for bash
_fa_doctor_complete() {
    local IFS=$'\\n'
    COMPREPLY=($(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" _FA_DOCTOR_COMPLETE=complete_bash \\
        "${COMP_WORDS[0]}" 2>/dev/null))
    return 0
}
complete -o default -o nospace -F _fa_doctor_complete fa-doctor
"""
_ZSH = """\
#compdef fa-doctor
# fa-doctor completion for zsh
_fa_doctor() {
    local -a candidates
    candidates=("${(@f)$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT - 1)) _FA_DOCTOR_COMPLETE=complete_zsh \\
        "${words[1]}" 2>/dev/null)}")
    [[ -n "${candidates[1]}" ]] && compadd -S '' -- "${candidates[@]}"
}
if [[ "${funcstack[1]}" == "_fa-doctor" ]]; then _fa_doctor "$@"; else compdef _fa_doctor fa-doctor; fi
"""
_FISH = """\
# fa-doctor completion for fish
function __fa_doctor_complete
    set -l tokens (commandline -opc) (commandline -ct)
    set -l index (math (count $tokens) - 1)
    env COMP_WORDS="$tokens" COMP_CWORD=$index _FA_DOCTOR_COMPLETE=complete_fish $tokens[1] 2>/dev/null
end
complete -c fa-doctor -f -a '(__fa_doctor_complete)'
"""
SHELLS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


def script(shell: str) -> str:
    return SHELLS[shell]


def install(shell: str, environ: Mapping[str, str]) -> tuple[Path, str]:
    """Writes the script; returns where, and what the user still has to do (or "")."""
    home = Path(environ.get("HOME") or Path.home())
    data = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    target, todo = {
        "bash": (data / "bash-completion" / "completions" / "fa-doctor", ""),
        "zsh": (home / ".zfunc" / "_fa-doctor", "add `fpath+=(~/.zfunc); autoload -Uz compinit; compinit` to ~/.zshrc"),
        "fish": (config / "fish" / "completions" / "fa-doctor.fish", ""),
    }[shell]
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(script(shell), encoding="utf-8")
    os.replace(temporary, target)
    return target, todo


def _words(environ: Mapping[str, str]) -> tuple[list[str], int]:
    line = environ.get("COMP_WORDS", "")
    try:
        words = shlex.split(line)
    except ValueError:  # an open quote while typing
        words = line.split()
    if line.endswith(" "):
        words.append("")
    try:
        index = int(environ.get("COMP_CWORD", str(len(words) - 1)))
    except ValueError:
        index = len(words) - 1
    while len(words) <= index:
        words.append("")
    return words, index


def _files(prefix: str) -> list[str]:
    folder, _, stem = prefix.rpartition("/")
    base = Path(os.path.expanduser(folder or ".")) if folder or not prefix.startswith("/") else Path("/")
    try:
        entries = sorted(os.scandir(base if folder else "."), key=lambda e: e.name)
    except OSError:
        return []
    shown = f"{folder}/" if folder else ""
    return [
        f"{shown}{e.name}{'/' if e.is_dir() else ''}"
        for e in entries
        if e.name.startswith(stem) and (stem.startswith(".") or not e.name.startswith("."))
    ]


def _values(kind: str, prefix: str) -> list[str]:
    if kind == "files":
        return _files(prefix)
    if not kind:
        return []
    import fa_doctor.cli.values as values

    return [v for v in getattr(values, kind)() if v.startswith(prefix)]


def _flags(command: Command, prefix: str) -> list[str]:
    return [f for o in (*command.options, HELP) for f in o.flags if f.startswith("--") and f.startswith(prefix)]


def candidates(environ: Mapping[str, str]) -> list[str]:
    words, index = _words(environ)
    before, current = words[1:index], words[index]
    command, rest_started, positionals = ROOT, False, 0
    i = 0
    while i < len(before):
        word = before[i]
        option = command.option(word.partition("=")[0]) if word.startswith("-") and not rest_started else None
        if word == "--" and command is not ROOT:
            rest_started = command.rest
        elif option is not None and option.kind != FLAG and "=" not in word:
            i += 1  # its value
        elif not word.startswith("-") or rest_started:
            if command is ROOT:
                command = COMMANDS.get(word, ROOT)
            else:
                positionals += 1
                rest_started = rest_started or command.rest
        i += 1
    previous = before[-1] if before else ""
    option = command.option(previous) if previous.startswith("-") and not rest_started else None
    if option is not None and option.kind != FLAG:
        return _values(option.complete, current)
    if rest_started:
        return _files(current)
    if current.startswith("-"):
        return _flags(command, current)
    if command is ROOT:
        return [name for name in COMMANDS if name.startswith(current)]
    arguments = command.arguments
    if arguments:
        argument = arguments[min(positionals, len(arguments) - 1)]
        return _values(argument.complete, current)
    return []
