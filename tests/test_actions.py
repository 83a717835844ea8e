"""Actions render to text a real shell reads back as exactly the same argv, whatever the values hold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fa_doctor.model import actions as A
from fa_doctor.render import shell as S

PLANTED = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "a'b\"c",
    "x; touch PWNED",
    "x > PWNED",
    "two words",
    "line\n touch PWNED",
    "ünïcødé ✓",
    "sglang-kernel>=0.4.10",
    "back\\slash",
    "'",
    "",
    "--",
    "*",
    "~",
    "$HOME",
    "a\tb",
]

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["RECORD_TO"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": None if sys.stdin.isatty() else sys.stdin.read(),
                        "max_jobs": os.environ.get("MAX_JOBS")}}) + "\\n")
"""


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """A working folder whose path itself is hostile, with a recording `python` inside."""
    where = tmp_path / "we $(touch PWNED) ird 'dir'"
    where.mkdir()
    fake = where / "python"
    fake.write_text(RECORDER.format(python=sys.executable))
    fake.chmod(0o755)
    return where


def _paste(shell: str, line: str, box: Path) -> list[dict[str, object]]:
    record = box / "record.jsonl"
    env = {"PATH": os.environ["PATH"], "RECORD_TO": str(record), "HOME": str(box)}
    proc = subprocess.run([shell, "-c", line], cwd=box, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert not list(box.rglob("PWNED")), f"{shell} ran planted code from {line!r}"
    return [json.loads(row) for row in record.read_text().splitlines()] if record.exists() else []


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_pip_install_argv_survives_the_shell(shell: str, box: Path) -> None:
    python = str(box / "python")
    reqs = tuple(p for p in PLANTED if p and not p.startswith("-") and "\n" not in p)
    action = A.PipInstall(python, reqs, ("--no-deps", "--index-url", "$(touch PWNED)"), (), (("MAX_JOBS", "4;x"),))
    (rec,) = _paste(shell, S.render(action, shell), box)
    assert rec["argv"] == ["-m", "pip", "install", "--no-deps", "--index-url", "$(touch PWNED)", *reqs]
    assert rec["max_jobs"] == "4;x"


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_constraints_reach_pip_on_stdin(shell: str, box: Path) -> None:
    action = A.PipInstall(str(box / "python"), ("sglang-kernel==0.4.10",), (), ("torch==2.11.0", "x`touch PWNED`"))
    (rec,) = _paste(shell, S.render(action, shell), box)
    assert rec["argv"] == ["-m", "pip", "install", "-c", "/dev/stdin", "sglang-kernel==0.4.10"]
    assert rec["stdin"] == "torch==2.11.0\nx`touch PWNED`\n"


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_run_and_uninstall_argv_survive(shell: str, box: Path) -> None:
    python = str(box / "python")
    for action in (A.RunCommand((python, *PLANTED)), A.PipUninstall(python, ("a b", "$(touch PWNED)"))):
        (rec,) = _paste(shell, S.render(action, shell), box)
        assert rec["argv"] == list(action.argv[1:])
        (box / "record.jsonl").unlink()


@pytest.mark.parametrize("shell", ["bash", "sh"])
@pytest.mark.parametrize("value", PLANTED)
def test_set_env_value_is_data(shell: str, value: str, box: Path) -> None:
    line = S.render(A.SetEnv("FA_DOCTOR_PROBE", value), shell) + "\n" + 'printf %s "$FA_DOCTOR_PROBE" > out'
    _paste(shell, line, box)
    assert (box / "out").read_text() == value
    _paste(
        shell,
        "export FA_DOCTOR_PROBE=1\n"
        + S.render(A.UnsetEnv("FA_DOCTOR_PROBE"), shell)
        + "\necho ${FA_DOCTOR_PROBE-gone} > out",
        box,
    )
    assert (box / "out").read_text() == "gone\n"


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_move_path_moves_aside(shell: str, box: Path) -> None:
    site = box / "site $(x)"
    pkg = site / "flash_attn"
    pkg.mkdir(parents=True)
    (pkg / "__init__.abi3.so").write_bytes(b"\0")
    action = A.move_aside(str(pkg), str(site))
    _paste(shell, S.render(action, shell), box)
    assert not pkg.exists() and (site / "flash_attn.fa-doctor-backup" / "__init__.abi3.so").exists()
    assert site.exists()


@pytest.mark.parametrize(
    ("path", "root"),
    [("/a/b", "/a/b"), ("/a", "/a/b"), ("/", "/"), ("/ab/c", "/a"), ("/a/../b", "/a"), ("rel/x", "/a")],
)
def test_move_path_refuses_outside_its_root(path: str, root: str) -> None:
    with pytest.raises(ValueError):
        A.move_aside(path, root)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: A.SetEnv("A B", "x"),
        lambda: A.SetEnv("$(x)", "x"),
        lambda: A.UnsetEnv("X;rm"),
        lambda: A.PipInstall("python", ("x",)),
        lambda: A.PipInstall("/p", ()),
        lambda: A.PipInstall("/p", ("--index-url=http://evil",)),
        lambda: A.PipInstall("/p", ("x\ny",)),
        lambda: A.PipInstall("/p", ("x",), ("value-first",)),
        lambda: A.PipInstall("/p", ("x",), (), ("-r evil",)),
        lambda: A.PipUninstall("/p", ("-y",)),
        lambda: A.RunCommand(()),
        lambda: A.RunCommand(("a\0b",)),
        lambda: A.EditFile("relative/.env", A.OVERRIDE),
    ],
)
def test_invalid_actions_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        bad()  # type: ignore[operator]


def test_fish_quoting() -> None:
    q = S.Shell.FISH
    assert S.quote("plain-1.0", q) == "plain-1.0"
    assert S.quote("it's $(x)", q) == "'it\\'s $(x)'"
    assert S.quote("a\\b", q) == "'a\\\\b'"
    assert S.quote("~", q) == "'~'"
    assert S.render(A.SetEnv("X", "a b"), q) == "set -gx X 'a b'"
    assert S.render(A.UnsetEnv("X"), q) == "set -e X"
    pip = A.PipInstall("/p y/python", ("a>=1",), ("--no-deps",), ("torch==2",), (("MAX_JOBS", "4"),))
    assert (
        S.render(pip, q)
        == "printf '%s\\n' torch==2 | env MAX_JOBS=4 '/p y/python' -m pip install --no-deps -c /dev/stdin 'a>=1'"
    )


def test_powershell_quoting() -> None:
    q = S.Shell.POWERSHELL
    assert S.quote("a'b\u2019c", q) == "'a''b\u2019\u2019c'"
    assert S.quote("$(x) `y`", q) == "'$(x) `y`'"
    assert S.render(A.SetEnv("X", "1"), q) == "$env:X = '1'"
    assert S.render(A.UnsetEnv("X"), q) == "Remove-Item Env:X -ErrorAction SilentlyContinue"
    assert S.render(A.RunCommand(("nvidia-smi", "--")), q) == "& 'nvidia-smi' '--'"
    mv = A.move_aside("/s/flash_attn", "/s")
    assert S.render(mv, q) == "Move-Item -LiteralPath '/s/flash_attn' -Destination '/s/flash_attn.fa-doctor-backup'"
    pip = A.PipInstall("/py", ("x",), (), ("torch==2",), (("MAX_JOBS", "4"),))
    assert S.render(pip, q) == "$env:MAX_JOBS = '4'; 'torch==2' | & '/py' '-m' 'pip' 'install' '-c' '/dev/stdin' 'x'"


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed")
def test_fish_reads_back_the_argv(box: Path) -> None:
    python = str(box / "python")
    action = A.RunCommand((python, *PLANTED))
    (rec,) = _paste("fish", S.render(action, "fish"), box)
    assert rec["argv"] == PLANTED


def test_describe_and_dict_cover_every_kind() -> None:
    every: list[A.Action] = [
        A.SetEnv("X", "1"),
        A.UnsetEnv("X"),
        A.PipInstall("/py", ("a",), ("--no-deps",), ("torch==2",), (("MAX_JOBS", "4"),)),
        A.PipUninstall("/py", ("a",)),
        A.move_aside("/s/a", "/s"),
        A.RunCommand(("nvidia-smi",)),
        A.EditFile("/etc/x.env", A.OVERRIDE, "3"),
        A.BuildFromClone("/py", "https://example.org/r.git", "hopper", ("--no-deps",), ("torch==2",)),
    ]
    assert {type(a) for a in every} == set(A.KINDS)
    for action in every:
        d = A.to_dict(action)
        assert d["kind"] == A.KINDS[type(action)]
        json.dumps(d)
        assert S.describe(action)
        for shell in S.Shell:
            assert S.render(action, shell)
    assert A.to_dict(every[2])["env"] == {"MAX_JOBS": "4"}
    assert S.render(every[6]) == "fa-doctor fix --unset-override --set 3 --env-file /etc/x.env"


# Shells of the property tests run here: a quoting bug must not leave files in the checkout.
_SCRATCH = tempfile.mkdtemp(prefix="fa-doctor-quoting-")
_WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=24)


@settings(max_examples=150, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=5))
def test_any_words_survive_bash_and_sh(words: list[str]) -> None:
    """Property: whatever the words, the shell's printf builtin receives exactly them."""
    line = S.render(A.RunCommand(("printf", "%s\\0", *words)), "bash")
    for shell in ("bash", "sh"):
        out = subprocess.run(
            [shell, "-c", line], capture_output=True, timeout=10, env={"LC_ALL": "C.UTF-8"}, cwd=_SCRATCH
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1] == words
        assert not os.listdir(_SCRATCH)  # nothing was redirected into a file


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed")
@settings(max_examples=40, deadline=None)
@given(st.lists(_WORD.filter(lambda w: "\x1f" not in w), min_size=1, max_size=4))
def test_any_words_survive_fish(words: list[str]) -> None:
    line = S.render(A.RunCommand(("printf", "%s\\x1f", *words)), "fish")
    out = subprocess.run(["fish", "--no-config", "-c", line], capture_output=True, timeout=20, cwd=_SCRATCH)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode("utf-8", "surrogateescape").split("\x1f")[:-1] == words
    assert not os.listdir(_SCRATCH)
