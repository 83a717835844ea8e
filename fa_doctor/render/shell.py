"""Shell text: the one place an action becomes a line to paste, quoted for the shell it is pasted into (every
renderer, `fix --apply`'s report), and the code `fix --unset-override` prints for the calling shell to evaluate."""

from __future__ import annotations

import re
import shlex
from enum import Enum
from typing import TYPE_CHECKING, Any

from fa_doctor.catalog.knobs import OVERRIDE
from fa_doctor.model.finding import Finding, Remedy

if TYPE_CHECKING:  # the actions load with the first remedy: a healthy report has none
    from fa_doctor.model.actions import Action, BuildFromClone, PipInstall, SetEnv, UnsetEnv

_FISH_SAFE = re.compile(r"[A-Za-z0-9_@+=:,./-]+\Z")


class Shell(str, Enum):
    BASH = "bash"
    ZSH = "zsh"
    SH = "sh"
    FISH = "fish"
    POWERSHELL = "powershell"

    @property
    def posix(self) -> bool:
        return self in (Shell.BASH, Shell.ZSH, Shell.SH)


SHELLS = tuple(s.value for s in Shell)
VALID_SET = (2, 3, 4)  # `fix --unset-override --set N`: the override's valid values


def quote(word: str, shell: Shell) -> str:
    """One argument, quoted so the shell passes it through as exactly this string."""
    if shell.posix:
        return shlex.quote(word)
    if shell is Shell.FISH:  # in fish's single quotes only \\ and \' are escapes; newlines, $, (, ` are literal
        return word if _FISH_SAFE.match(word) else "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"
    # PowerShell: single quotes are verbatim; a quote (including the typographic ones PowerShell also
    # accepts as quotes) is escaped by doubling it.
    return "'" + re.sub("(['\u2018\u2019\u201a\u201b])", r"\1\1", word) + "'"


def _pick(shell: Shell, posix: str, fish: str, powershell: str) -> str:
    """The form for `shell`: sh's (bash, zsh, sh), fish's or PowerShell's."""
    return posix if shell.posix else fish if shell is Shell.FISH else powershell


def _join(argv: tuple[str, ...], shell: Shell) -> str:
    if shell.posix:
        return shlex.join(argv)
    # PowerShell's `&` runs a quoted program name; every argument quoted, so `--` and `-x` reach it untouched.
    return ("" if shell is Shell.FISH else "& ") + " ".join(quote(a, shell) for a in argv)


def render(action: Action, shell: Shell | str = Shell.BASH) -> str:
    """The one line to paste into `shell` for this action."""
    from fa_doctor.model.actions import BuildFromClone, MovePath, PipInstall, SetEnv, UnsetEnv

    shell = Shell(shell)
    if isinstance(action, UnsetEnv):
        name = action.name
        return _pick(shell, f"unset {name}", f"set -e {name}", f"Remove-Item Env:{name} -ErrorAction SilentlyContinue")
    if isinstance(action, SetEnv):
        name, value = action.name, quote(action.value, shell)
        return _pick(shell, f"export {name}={value}", f"set -gx {name} {value}", f"$env:{name} = {value}")
    if isinstance(action, PipInstall):
        return _render_pip(action, shell)
    if isinstance(action, BuildFromClone):
        return _render_build(action, shell)
    if isinstance(action, MovePath) and shell is Shell.POWERSHELL:
        return f"Move-Item -LiteralPath {quote(action.path, shell)} -Destination {quote(action.backup, shell)}"
    return _join(action.argv, shell)


def _render_pip(action: PipInstall, shell: Shell) -> str:
    command = _join(action.argv, shell)
    prefix = ""  # PowerShell sets variables as statements before the pipeline, not inside it
    if action.env:
        if shell.posix:
            command = " ".join(f"{k}={shlex.quote(v)}" for k, v in action.env) + " " + command
        elif shell is Shell.FISH:
            command = "env " + " ".join(quote(f"{k}={v}", shell) for k, v in action.env) + " " + command
        else:
            prefix = "".join(f"$env:{k} = {quote(v, shell)}; " for k, v in action.env)
    if action.constraints:  # the pins reach pip on stdin (`-c /dev/stdin`)
        words = [quote(c, shell) for c in action.constraints]
        feed = ", ".join(words) if shell is Shell.POWERSHELL else "printf '%s\\n' " + " ".join(words)
        command = f"{feed} | {command}"
    return prefix + command


def _render_build(action: BuildFromClone, shell: Shell) -> str:
    """One line: a fresh `mktemp -d` folder, the clone and the build inside it, the caller's directory untouched
    (a subshell in sh, `pushd`/`popd` in fish, `Push-Location`/`Pop-Location` in PowerShell)."""
    clone = _join(action.clone_argv, shell)
    pip = _render_pip(action.install, shell)
    return _pick(
        shell,
        f'(d=$(mktemp -d) && cd "$d" && {clone} && {pip})',
        f"begin; set -l d (mktemp -d); and pushd $d; and {clone}; and {pip}; popd; end",
        "& { $d = Join-Path ([IO.Path]::GetTempPath()) ([guid]::NewGuid()); New-Item -ItemType Directory -Path $d "
        f"| Out-Null; Push-Location -LiteralPath $d; try {{ {clone}; if ($LASTEXITCODE -eq 0) {{ {pip} }} }} "
        "finally { Pop-Location } }",
    )


def describe(action: Action) -> str:
    """One plain sentence for `fix --plan` (values shown with repr, so odd characters stay visible)."""
    from fa_doctor.model.actions import BuildFromClone, EditFile, MovePath, PipInstall, PipUninstall, SetEnv, UnsetEnv

    if isinstance(action, SetEnv):
        return f"Set {action.name} to {action.value!r} in this shell"
    if isinstance(action, UnsetEnv):
        return f"Unset {action.name} in this shell"
    if isinstance(action, (PipInstall, BuildFromClone)):
        if isinstance(action, PipInstall):
            text = f"Install {', '.join(map(repr, action.requirements))} into {action.python!r}"
        else:
            text = f"Clone {action.repo!r} into a fresh temporary folder (mktemp -d) and install its "
            text += f"{action.subdir + '/'!r} folder into {action.python!r}"
        if action.options:
            text += f" with {' '.join(action.options)}"
        if action.constraints:
            text += f", keeping {', '.join(map(repr, action.constraints))}"
        if action.env:
            text += f" ({', '.join(f'{k}={v!r}' for k, v in action.env)})"
        return text
    if isinstance(action, PipUninstall):
        return f"Uninstall {', '.join(map(repr, action.names))} from {action.python!r}"
    if isinstance(action, MovePath):
        return f"Move {action.path!r} aside to {action.backup!r} (nothing is deleted)"
    if isinstance(action, EditFile):
        what = f"set {action.variable} to {action.value!r}" if action.value is not None else f"remove {action.variable}"
        return f"Edit {action.path!r}: {what} (a backup is kept)"
    return f"Run {shlex.join(action.argv)}"


def remedy_lines(remedy: Remedy, shell: str = "bash") -> tuple[str, ...]:
    """Every line to paste, for `shell`: the text commands, then each action rendered and quoted."""
    return tuple(remedy.commands) + tuple(render(a, shell) for a in remedy.actions)


def fix_command(remedy: Remedy, finding_id: str) -> str | None:
    """The `fa-doctor fix` command that applies this remedy; None when there is nothing to apply, or when the
    planner found fa-doctor cannot carry it out here (`remedy.refused`: `fix --apply` would refuse it)."""
    if finding_id.startswith("explain."):
        return None  # `fix` applies what `check` finds; a pasted error is not a finding of this machine
    from fa_doctor.model.actions import RunCommand, SetEnv, UnsetEnv

    steps = [a for a in remedy.actions if not isinstance(a, RunCommand)]  # a command to run diagnoses
    if not steps or remedy.refused:
        return None
    if all(isinstance(a, (SetEnv, UnsetEnv)) and a.name == OVERRIDE for a in steps):
        value = next((a.value for a in steps if isinstance(a, SetEnv)), None)
        only_set = not any(isinstance(a, UnsetEnv) for a in steps)
        tail = f" --set {value}" if only_set and value is not None and value.isdigit() else ""
        return f'eval "$(fa-doctor fix --unset-override{tail})"'
    if all(isinstance(a, (SetEnv, UnsetEnv)) for a in steps):
        return None  # another variable of the calling shell: the printed line is the whole remedy
    argv = ["fa-doctor", "fix", "--apply", *remedy.target, "--only", finding_id]
    if remedy.replaces_torch:
        argv.insert(3, "--allow-torch-change")
    return shlex.join(argv)


def remedy_dict(remedy: Remedy, finding_id: str | None = None) -> dict[str, Any]:
    from fa_doctor.model.actions import to_dict

    out: dict[str, Any] = {"text": remedy.text, "commands": list(remedy_lines(remedy))}
    out |= {"actions": [to_dict(a) for a in remedy.actions], "replaces_torch": remedy.replaces_torch}
    if finding_id is not None:
        out["fix"] = fix_command(remedy, finding_id)
        if remedy.refused:
            out["fix_refused"] = remedy.refused
    return out


def finding_dict(finding: Finding) -> dict[str, Any]:
    out = {"id": finding.id, "severity": finding.severity.value, "title": finding.title, "detail": finding.detail}
    return out | {
        "evidence": dict(finding.evidence),
        "remedies": [remedy_dict(r, finding.id) for r in finding.remedies],
    }


_EVAL = {  # how a shell runs `fix --unset-override`'s output (any other shell: as sh does)
    "fish": "fa-doctor fix --unset-override{args} | source",
    "powershell": "fa-doctor fix --unset-override{args} | Out-String | Invoke-Expression",
}


def override_code(shell: str, set_value: int | None) -> str:
    """Code (ending in a newline) that unsets the override, or sets it to `set_value`. ValueError for an unknown
    shell or a value other than the ints 2, 3, 4 (not a bool, not "3": no text of the caller's reaches shell code)."""
    if shell not in SHELLS:
        raise ValueError(f"unknown shell {shell!r}: expected one of {', '.join(SHELLS)}")
    from fa_doctor.model.actions import SetEnv, UnsetEnv

    if set_value is None:
        action: SetEnv | UnsetEnv = UnsetEnv(OVERRIDE)
    elif type(set_value) is int and set_value in VALID_SET:
        action = SetEnv(OVERRIDE, str(set_value))
    else:
        raise ValueError(f"--set takes 2, 3 or 4, not {set_value!r}")
    return render(action, Shell(shell)) + "\n"


def eval_hint(shell: str, set_value: int | None = None) -> str:
    """How to run override_code's output in `shell` (for messages on stderr and the docs)."""
    args = f" --set {set_value}" if set_value is not None else ""
    return _EVAL.get(shell, 'eval "$(fa-doctor fix --unset-override{args})"').format(args=args)


# Anything a shell, fish or PowerShell might take for the end of a line, and other controls: shown as escapes.
_BREAKS = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")


def as_comments(text: str) -> str:
    """`text` with every line a comment, so that `eval "$(...)"`, `| source` and `| Invoke-Expression` run
    nothing of it (a `--dry-run` diff quotes the env file, whose lines are code)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "".join("# " + _BREAKS.sub(lambda m: f"\\u{ord(m[0]):04x}", line) + "\n" for line in lines)
