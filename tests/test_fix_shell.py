"""`fix --unset-override` shell code, evaluated by real shells with hostile values around it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fa_doctor.probes.environment import detect_shell
from fa_doctor.render.shell import SHELLS, eval_hint, override_code

N = "SGLANG_FLASHATTENTION_VERSION"
HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "3'; touch PWNED; echo '",
    '3"; touch PWNED; echo "',
    "3\ntouch PWNED",
    "; touch PWNED",
]
# The code is produced by a child (as `fa-doctor fix --unset-override` would be) and evaluated by the shell.
PRODUCER = f"{sys.executable} -c 'import sys; from fa_doctor.render.shell import override_code as c; "
PRODUCER += "sys.stdout.write(c(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None))'"
POSIX = [s for s in ("bash", "sh", "dash", "zsh") if shutil.which(s)]


def run_shell(argv: list[str], script: str, cwd: Path, value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, N: value, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([*argv, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("shell", POSIX)
@pytest.mark.parametrize("value", HOSTILE)
def test_posix_eval_unsets_and_sets(tmp_path: Path, shell: str, value: str) -> None:
    syntax = "sh" if shell == "dash" else shell
    for args, expected in (("", "unset"), (" 3", "3"), (" 4", "4")):
        script = (
            f'eval "$({PRODUCER} {syntax}{args})"; '
            f'if [ -n "${{{N}+x}}" ]; then printf "%s" "${N}"; else printf unset; fi; '
            f'sh -c \'printf "|%s" "${{{N}-child-unset}}"\''
        )
        done = run_shell([shell, "-c"], script, tmp_path, value)
        child = "child-unset" if expected == "unset" else expected
        assert done.returncode == 0 and done.stdout == f"{expected}|{child}", (done.stdout, done.stderr)
        assert not (tmp_path / "PWNED").exists()


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
@pytest.mark.parametrize("value", HOSTILE)
def test_fish_source(tmp_path: Path, value: str) -> None:
    for args, expected in (("", "unset"), (" 3", "3")):
        script = f"{PRODUCER} fish{args} | source; if set -q {N}; echo -n ${N}; else; echo -n unset; end"
        done = run_shell(["fish", "-c"], script, tmp_path, value)
        assert done.stdout == expected, done.stderr
        assert not (tmp_path / "PWNED").exists()


@pytest.mark.skipif(shutil.which("pwsh") is None, reason="PowerShell is not installed")
@pytest.mark.parametrize("value", HOSTILE)
def test_powershell_invoke_expression(tmp_path: Path, value: str) -> None:
    for args, expected in (("", "unset"), (" 3", "3")):
        script = (
            f"{PRODUCER.replace(sys.executable, '& ' + repr(sys.executable))} powershell{args} | Out-String | "
            f"Invoke-Expression; if (Test-Path Env:{N}) {{ Write-Host -NoNewline $env:{N} }} "
            "else { Write-Host -NoNewline unset }"
        )
        done = run_shell(["pwsh", "-NoProfile", "-Command"], script, tmp_path, value)
        assert done.stdout == expected, done.stderr
        assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("bad", [5, 0, -1, True, 3.0, "3", "3; touch PWNED", "$(touch PWNED)"])
def test_only_the_ints_2_3_4_are_set(bad: object) -> None:
    for shell in SHELLS:
        with pytest.raises(ValueError):
            override_code(shell, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["tcsh", "", "bash; rm -rf ~", "BASH", "cmd.exe"])
def test_unknown_shell_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="unknown shell"):
        override_code(bad, None)


def test_every_shell_has_code_and_a_hint() -> None:
    for shell in SHELLS:
        assert override_code(shell, None).endswith("\n") and N in override_code(shell, None)
        assert "--set 3" in eval_hint(shell, 3) and "--unset-override" in eval_hint(shell)
    assert eval_hint("fish") == "fa-doctor fix --unset-override | source"


@pytest.mark.parametrize(
    ("probed", "env_shell", "expected"),
    [
        ("bash", "/bin/zsh", "bash"),
        ("zsh", None, "zsh"),
        ("dash", None, "sh"),
        ("-bash", None, "bash"),  # a login shell's argv[0]
        ("pwsh", None, "powershell"),
        ("PowerShell.exe", None, "powershell"),
        ("tcsh", "/usr/bin/fish", "fish"),  # unknown ancestor: $SHELL decides
        (None, "/opt/homebrew/bin/zsh", "zsh"),
        (None, "/bin/tcsh", "sh"),
        (None, None, "sh"),
        (None, "", "sh"),
    ],
)
def test_detect_shell(probed: str | None, env_shell: str | None, expected: str) -> None:
    env = {} if env_shell is None else {"SHELL": env_shell}
    assert detect_shell(env, probe=lambda: probed) == expected


@pytest.mark.parametrize(("shell", "expected"), [("bash", "bash"), ("dash", "sh"), ("fish", "fish")])
def test_detect_shell_from_the_real_parent(tmp_path: Path, shell: str, expected: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    code = "from fa_doctor.probes.environment import detect_shell; print(detect_shell({}))"
    # `; true` keeps the shell alive as python's parent (a lone command would be exec'd in its place)
    done = run_shell([shell, "-c"], f"{sys.executable} -c '{code}'; true", tmp_path, "3")
    assert done.stdout.strip() == expected, done.stderr
