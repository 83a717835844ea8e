"""Issue 26: an env file that sets the override is never reported clean.

After `fix --unset-override --env-file F` (the command's pipeline, exit code included), either F was edited and
sourcing it no longer sets the variable, or the command exited 1, named F:LINE and left F byte for byte. "Sets"
is decided by bash itself: each file is sourced in a sandbox (`env -i`, a temporary HOME and folder, no rc files,
stdin from /dev/null, a timeout) with `set -a; . ./F`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fa_doctor.commands.fix import OverrideOptions, unset_override

N = "SGLANG_FLASHATTENTION_VERSION"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def sourced(folder: Path, name: str) -> str:
    """What `set -a; . ./name` leaves in the variable ("unset" when it does not set it)."""
    script = f'set -a; . ./{name} >/dev/null 2>&1; printf %s "${{{N}-unset}}"'
    env = {"HOME": str(folder), "PATH": "/usr/bin:/bin"}
    argv = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "--noprofile", "--norc", "-c", script]
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    return done.stdout


def fix(path: Path, value: int | None = None) -> tuple[int, str]:
    """The exit code of `fix --unset-override [--set N] --env-file PATH`, and what its finding says."""
    result = unset_override(OverrideOptions(shell="bash", set_value=value, env_files=(str(path),)))
    (finding,) = result.findings
    return result.exit_code, f"{finding.title}: {finding.detail}"


def holds(folder: Path, name: str, text: str, value: int | None = None) -> tuple[int, str]:
    """The property, for one file; returns the exit code and the finding's words."""
    path = folder / name
    path.write_bytes(text.encode())
    code, said = fix(path, value)
    if code == 0:
        assert sourced(folder, name) in ("unset", str(value)), (text, path.read_text(), said)
    else:
        assert code == 1, said
        assert path.read_bytes() == text.encode(), said  # byte for byte
        assert sorted(os.listdir(folder)) == sorted({name, "other.sh"} & {*os.listdir(folder)})  # no backup
        lines = [int(n) for n in re.findall(rf"{re.escape(str(path))}:(\d+):", said)]
        assert lines and all(1 <= n <= text.count("\n") + 1 for n in lines), said
    return code, said


# ---- the cases of issue 26: each was "does not set the override", exit 0 -----------------------------------

ISSUE = [
    ("default-expansion", f": ${{{N}:=3}}\n", 1),
    ("read-here-string", f"read -r {N} <<< 3\n", 1),
    ("printf-v", f"printf -v {N} %s 3\n", 1),
    ("quoted-name", f"export '{N}'=3\n", 1),
    ("name-split-by-continuation", "A=1\nSGLANG_FLASHATTENTION_\\\nVERSION=3\n", 2),
]


@pytest.mark.parametrize(("text", "line"), [c[1:] for c in ISSUE], ids=[c[0] for c in ISSUE])
def test_issue_cases_fail_and_name_the_line(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "server.sh"
    path.write_text(text)
    assert sourced(tmp_path, "server.sh") == "3"  # the file really sets it
    for value in (None, 4):
        code, said = fix(path, value)
        assert code == 1 and f"{path}:{line}:" in said and "unchanged" in said, said
        assert path.read_text() == text and os.listdir(tmp_path) == ["server.sh"]


# ---- more forms, by hand ------------------------------------------------------------------------------------

P = "p=SGLANG_FLASH; q=ATTENTION_VERSION\n"  # the name built at run time
FORMS = [
    f": ${{{N}=3}}",
    f': "${{{N}:=3}}"',
    f'export "{N}=3"',
    f'export {N}"=3"',
    f"declare -gx '{N}'=3",
    f"typeset -x {N}\\=3",
    f"\\export {N}=3",
    f"e\\xport {N}=3",
    f"$'export' {N}=3",
    f"c=export; $c {N}=3",
    f"command export '{N}=3'",
    f"for {N} in 3; do :; done",
    f"select {N} in 3; do break; done <<< 1",
    f": {{{N}}}>/dev/null",
    f"echo {{{N}}}>/dev/null",
    f"(( {N} = 3 ))",
    f"let {N}=3",
    f"x='{N}=3'; (( x ))",
    f"x='{N}=3'; : $(( x ))",
    f"x='{N}=3'; [[ x -eq 0 ]]",
    f"a=(1 2); x='{N}=3'; : ${{a[x]}}",
    f"mapfile -t {N} <<< 3",
    f"set -- -a; getopts a {N}",
    f"coproc {N} {{ :; }}",
    f"eval 'export {N}=3'",
    f'eval "{N}=3"',
    P + 'eval "$p$q=3"',
    P + 'declare -x "$p$q=3"',
    P + 'export "$p$q"=3',
    P + 'printf -v "$p$q" %s 3',
    P + 'read -r "$p$q" <<< 3',
    P + 'declare -n r="$p$q"; r=3',
    P + "r=$p$q; : ${!r:=3}",
    f"declare -n r={N}; r=3",
    f"x={N}; export $x=3",
    f"shopt -s expand_aliases\nalias e=export\ne {N}=3",
    "shopt -s expand_aliases\nalias e='eval \"$x\"'\n" + f"x='{N}=3'\ne",
    f"trap 'export {N}=3' RETURN",
    f"source /dev/stdin <<EOF\nexport {N}=3\nEOF",
    ". ./other.sh",
    "source other.sh",
    f"export {N}=3 2>/dev/null",
    f"{N}=3 :",
    f"{N}+=3",
    f"export {N}=$(echo 3)",
    f"if true; then export {N}=3; fi",
    f"f() {{ export {N}=3; }}; f",
    f"true && export {N}=3",
    f"builtin export {N}=3",
    f"export A=1 {N}=3 B=2",
    f"readonly {N}=3",
    f"( export {N}=3 )",
    f"x=$(export {N}=3; echo 1)",
    f"# export {N}=3",
    f'echo "${N}"; unset {N}; export {N}',
]


@pytest.mark.parametrize("form", FORMS)
def test_hand_written_forms(tmp_path: Path, form: str) -> None:
    (tmp_path / "other.sh").write_text(f"export {N}=3\n")
    holds(tmp_path, "p.sh", f"A=1\n{form}\nB=2\n")
    for folder, value in ((tmp_path / "set", 4),):
        folder.mkdir()
        (folder / "other.sh").write_text(f"export {N}=3\n")
        holds(folder, "p.sh", f"A=1\n{form}\nB=2\n", value)


def test_plain_forms_are_edited_not_refused(tmp_path: Path) -> None:
    """The property would hold if everything were refused: the plain forms must be edited."""
    for i, form in enumerate([f"{N}=3", f"export {N}=3", f"declare -x {N}=3", f"if true; then {N}=3; fi"]):
        folder = tmp_path / str(i)
        folder.mkdir()
        assert holds(folder, "p.sh", f"A=1\n{form}\n")[0] == 0
        assert sourced(folder, "p.sh") == "unset" and (folder / "p.sh.fa-doctor.bak").exists()


# ---- generated: the name spelled and set every way, inside every construct ---------------------------------


def _spellings(cut: int) -> list[str]:
    """The name as bash reads it, written nine ways (`cut` splits it somewhere inside)."""
    a, b = N[:cut], N[cut:]
    return [N, f"'{N}'", f'"{N}"', f"{a}'{b}'", f'{a}"{b}"', f"{a}\\{b}", f"{a}\\\n{b}", f"$'{N}'", f"{a}''{b}"]


_HOW = [
    "{n}=3",
    "export {n}=3",
    "declare -gx {n}=3",
    "typeset -x {n}=3",
    "readonly {n}=3",
    "local {n}=3",
    ": ${{{n}:=3}}",
    "read -r {n} <<< 3",
    "printf -v {n} %s 3",
    "mapfile -t {n} <<< 3",
    "for {n} in 3; do :; done",
    "eval {n}=3",
    "eval 'export {n}=3'",
    "declare -n ref={n}; ref=3",
    "{n}=3 true",
    "export {n}",
]
_AROUND = ["{x}", "if true; then\n  {x}\nfi", "f() {{\n  {x}\n}}\nf", "true && {x}", "{x}; :", "{{ {x}; }}", "( {x} )"]
_AROUND += ["builtin {x}", "command {x}", "{x} # note", "A=1 \\\n  && {x}"]
_QUIET = ["", "# a comment", "A=1", 'export PATH="$HOME/bin:$PATH"', "alias ll='ls -l'", "echo hi >/dev/null"]
_QUIET += [f"# {N}=3", f'[ -n "${N}" ] && echo set >/dev/null', "case $- in *i*) ;; esac", "x=$(printf '%s' 1)"]
_OTHER = st.sampled_from(_QUIET)


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cut=st.integers(1, len(N) - 1),
    spelling=st.integers(0, 8),
    how=st.sampled_from(_HOW),
    around=st.sampled_from(_AROUND),
    before=st.lists(_OTHER, max_size=3),
    after=st.lists(_OTHER, max_size=3),
    value=st.sampled_from([None, 4]),
    name=st.sampled_from(["p.sh", ".bashrc", "server.env", "profile"]),
)
def test_generated_files_are_never_clean_while_they_set_it(
    tmp_path_factory: pytest.TempPathFactory,
    cut: int,
    spelling: int,
    how: str,
    around: str,
    before: list[str],
    after: list[str],
    value: int | None,
    name: str,
) -> None:
    statement = around.format(x=how.format(n=_spellings(cut)[spelling]))
    text = "\n".join([*before, statement, *after]) + "\n"
    holds(tmp_path_factory.mktemp("g"), name, text, value)
