"""The target probe: bounded whatever the target's start-up does, and honest about what it was given."""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import pytest
from fakeenv import FakeEnv
from test_hardening_proc import leftovers, marker, script

from fa_doctor.probes import target
from fa_doctor.probes.target import TargetError, TargetProbe

REAL = sys.executable


def wrapper(tmp_path: Path, before: str, name: str = "python") -> str:
    """A fake interpreter: runs `before`, then the real one with the probe's arguments."""
    return script(tmp_path, f'{before}\nexec {REAL} "$@"\n', name)


def test_grandchild_holding_the_pipe_does_not_hold_the_answer(tmp_path: Path) -> None:
    m = marker()
    python = wrapper(tmp_path, f"sleep {m} &")
    start = time.monotonic()
    facts = TargetProbe(python, timeout=15).result()
    assert time.monotonic() - start < 5 and facts.version[0] == 3
    assert leftovers(m) == []


def test_setsid_grandchild_does_not_hold_the_answer_nor_survive(tmp_path: Path) -> None:
    m, ready = marker(), tmp_path / "ready"
    python = wrapper(
        tmp_path, f"setsid sh -c 'echo $$ > {ready}; exec sleep {m}' &\nwhile [ ! -s {ready} ]; do sleep 0.01; done"
    )
    start = time.monotonic()
    assert TargetProbe(python, timeout=15).result().version[0] == 3
    assert time.monotonic() - start < 5
    assert leftovers(m) == []


@pytest.mark.parametrize("setsid", [False, True], ids=["fork", "fork+setsid"])
def test_pth_that_forks_and_sleeps(fenv: FakeEnv, setsid: bool) -> None:
    """The issue's case: a .pth whose forked copy sleeps 40 s holding the pipe took 40 s, then 'no answer'."""
    m = marker()
    body = "os.setsid(), " if setsid else ""
    (fenv.site / "fork.pth").write_text(f"import os; os.fork() == 0 and ({body}os.execvp('sleep', ['sleep', '{m}']))\n")
    start = time.monotonic()
    facts = TargetProbe(fenv.python, timeout=15).result()
    assert time.monotonic() - start < 5 and str(fenv.site) in facts.sys_path
    assert leftovers(m) == []


def test_interpreter_that_never_answers_is_bounded(tmp_path: Path) -> None:
    m = marker()
    python = script(tmp_path, f"sleep {m}\n", "python")
    start = time.monotonic()
    with pytest.raises(TargetError, match="gave no answer within 1 s"):
        TargetProbe(python, timeout=1).result()
    assert time.monotonic() - start < 3
    assert leftovers(m) == []


def test_closed_probe_leaves_nothing(tmp_path: Path) -> None:
    m = marker()
    probe = TargetProbe(script(tmp_path, f"sleep {m}\n", "python"))
    probe.close()
    assert leftovers(m) == []
    with pytest.raises(TargetError):
        probe.result()


@pytest.mark.parametrize("shadow", ["json.py", "platform.py", "os.py", "ast.py"])
def test_stdlib_shadows_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shadow: str) -> None:
    (tmp_path / shadow).write_text("raise SystemExit('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    facts = TargetProbe(REAL).result()
    # The working directory is still reported first, where `python -m sglang.launch_server` has it.
    assert facts.sys_path[0] == str(tmp_path) and facts.cwd == str(tmp_path)


def test_deleted_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    facts = TargetProbe(REAL).result()
    assert facts.cwd is None and facts.version[0] == 3
    assert all(os.path.isabs(p) for p in facts.sys_path) and str(gone) not in facts.sys_path


def test_directory_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="is a directory, not a Python interpreter"):
        TargetProbe(str(tmp_path)).result()


@pytest.mark.parametrize("value", ["", "bin/\x00python"])
def test_empty_or_impossible_path(value: str) -> None:
    with pytest.raises(TargetError, match="needs the path of a Python interpreter"):
        TargetProbe(value).result()


def test_python2_is_named(tmp_path: Path) -> None:
    """A Python 3 dressed as 2.7 runs the real script: its first lines must stop it with the version."""
    code = "import sys; sys.version_info = (2, 7, 18, 'final', 0); exec(sys.argv[2])"
    python = script(tmp_path, f'exec {REAL} -c "{code}" -c "$2"\n', "python2")
    with pytest.raises(TargetError, match=r"is Python 2\.7\.18: Python 2 is not supported"):
        TargetProbe(python).result()


def test_probe_script_parses_as_python2() -> None:
    """Python 2 must get as far as the version test: the script uses no Python 3 only syntax."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from lib2to3 import pygram, pytree
        from lib2to3.pgen2 import driver, parse

    # python_grammar has Python 2's print statement: print("x", end="") is a syntax error there, as in 2.7.
    parser = driver.Driver(pygram.python_grammar, convert=pytree.convert)
    with pytest.raises(parse.ParseError):
        parser.parse_string('import sys\nprint("x", end="")\n')
    parser.parse_string(target._SCRIPT.lstrip("\n"))


def test_printing_site_customisation_does_not_confuse_the_answer(fenv: FakeEnv) -> None:
    (fenv.site / "chatty.pth").write_text("import sys; sys.stdout.write('FA-DOCTOR-TARGET {broken\\n')\n")
    facts = TargetProbe(fenv.python).result()
    assert str(fenv.site) in facts.sys_path
