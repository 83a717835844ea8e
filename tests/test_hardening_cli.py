"""The issue's inputs through the real CLI, for the bullets whose mechanism is in the probes (the CLI's own
bullets, escaping and signals, are tested with the CLI)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fakeenv import FakeEnv

from fa_doctor.probes.modules import by_stem, listdir


def check(cli: Any, fenv: FakeEnv, *extra: str) -> Any:
    listdir.cache_clear()
    by_stem.cache_clear()
    return cli("check", "--python", fenv.python, "--json", "--no-smoke", *extra)


def test_fifo_metadata_is_named_quickly_and_nothing_crashes(cli: Any, fenv: FakeEnv) -> None:
    """Was: the 60 s package-scan bound, then 'probe check crashed ... the other checks still ran'."""
    fenv.torch()
    info = fenv.dist("flash-attn", "2.8.3", {"flash_attn/__init__.py": ""}, top_level=["flash_attn"])
    (info / "METADATA").unlink()
    os.mkfifo(info / "METADATA")
    start = time.monotonic()
    run = check(cli, fenv)
    assert time.monotonic() - start < 20
    assert run.code in (0, 1) and "internal.check_crashed" not in run.ids()
    assert "METADATA is a FIFO" in run.stdout


@pytest.mark.parametrize("where", ["site", "cwd"])
def test_fifo_init_py_on_the_search_path(
    cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Was: blocked forever in modules._uses_extend_path, outside any time bound."""
    fenv.torch()
    base = fenv.site if where == "site" else tmp_path / "work"
    (base / "flash_attn").mkdir(parents=True)
    os.mkfifo(base / "flash_attn" / "__init__.py")
    if where == "cwd":
        fenv.dist("flash-attn", "2.8.3", {"flash_attn/__init__.py": ""}, top_level=["flash_attn"])
        monkeypatch.chdir(base)
    start = time.monotonic()
    run = check(cli, fenv)
    assert time.monotonic() - start < 20
    assert run.code in (0, 1) and "internal.check_crashed" not in run.ids()


@pytest.mark.parametrize("shadow", ["json.py", "platform.py"])
def test_stdlib_shadow_in_the_working_directory_is_not_a_broken_interpreter(
    cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shadow: str
) -> None:
    (tmp_path / shadow).write_text("raise SystemExit('shadowed')\n")
    monkeypatch.chdir(tmp_path)
    run = check(cli, fenv)
    assert run.code in (0, 1), run.stdout
    assert run.doc["target"]["sys_path"][0] == str(tmp_path)


def test_deleted_working_directory(cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    run = check(cli, fenv)
    assert run.code in (0, 1), run.stdout


def test_directory_as_python(cli: Any, tmp_path: Path) -> None:
    run = cli("check", "--python", str(tmp_path), "--json", "--no-smoke")
    assert run.code == 2 and "is a directory, not a Python interpreter" in run.stdout + run.stderr


def test_python2_is_named(cli: Any, tmp_path: Path) -> None:
    code = "import sys; sys.version_info = (2, 7, 18, 'final', 0); exec(sys.argv[2])"
    python = tmp_path / "python2"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{code}" -c "$2"\n')
    python.chmod(0o755)
    run = cli("check", "--python", str(python), "--json", "--no-smoke")
    assert run.code == 2 and "Python 2 is not supported" in run.stdout + run.stderr
    assert "AttributeError" not in run.stdout + run.stderr
