"""Which interpreter a bare check judges (issue 23): --python, else the active venv's python, else the active conda
environment's, else the first python3 on PATH; built with real venvs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fa_doctor.probes.target import choose


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("venvs")
    out = {}
    for name in ("server", "conda"):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / name)], check=True, timeout=120)
        out[name] = root / name
    return out


def test_the_active_venv_is_judged(venvs: dict[str, Path]) -> None:
    env = {"VIRTUAL_ENV": str(venvs["server"]), "CONDA_PREFIX": str(venvs["conda"]), "PATH": os.defpath}
    chosen = choose(None, env)
    assert chosen.python == str(venvs["server"] / "bin" / "python") and chosen.why == "$VIRTUAL_ENV"
    assert not chosen.own


def test_then_the_conda_environment(venvs: dict[str, Path]) -> None:
    chosen = choose(None, {"CONDA_PREFIX": str(venvs["conda"]), "PATH": os.defpath})
    assert chosen.python == str(venvs["conda"] / "bin" / "python") and chosen.why == "$CONDA_PREFIX"


def test_then_python3_on_path(venvs: dict[str, Path], tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(venvs["server"] / "bin" / "python")
    chosen = choose(None, {"PATH": f"{bin_dir}{os.pathsep}{os.defpath}", "VIRTUAL_ENV": "relative/ignored"})
    assert chosen.python == str(bin_dir / "python3") and chosen.why == "python3 on PATH"


def test_explicit_wins_and_fa_doctors_own_is_named(venvs: dict[str, Path]) -> None:
    chosen = choose(sys.executable, {"VIRTUAL_ENV": str(venvs["server"])})
    assert chosen.python == sys.executable and chosen.why == "--python" and chosen.own


def test_a_venv_without_a_python_is_skipped(tmp_path: Path, venvs: dict[str, Path]) -> None:
    chosen = choose(None, {"VIRTUAL_ENV": str(tmp_path), "CONDA_PREFIX": str(venvs["conda"]), "PATH": os.defpath})
    assert chosen.why == "$CONDA_PREFIX"
