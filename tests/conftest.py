from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakeenv import FakeEnv, fake_nvidia_smi, make_env

from fa_doctor.cli import app
from fa_doctor.probes.environment import KNOBS
from fa_doctor.probes.modules import by_stem, listdir


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test sees the developer's knobs, GPUs or caches; directory listings are not cached across tests."""
    for name in KNOBS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "PATH",
        os.pathsep.join(
            p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()
        ),
    )
    monkeypatch.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    listdir.cache_clear()
    by_stem.cache_clear()
    yield
    listdir.cache_clear()
    by_stem.cache_clear()


@pytest.fixture
def fenv(tmp_path: Path) -> FakeEnv:
    return make_env(tmp_path)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        return json.loads(self.stdout)  # type: ignore[no-any-return]

    def ids(self) -> list[str]:
        return [f["id"] for f in self.doc["findings"]]

    def finding(self, fid: str) -> dict[str, Any]:
        found = [f for f in self.doc["findings"] if f["id"] == fid]
        assert found, f"{fid} not in {self.ids()}"
        return found[0]  # type: ignore[no-any-return]


def gpu_env(tmp_path: Path, *rows: str) -> dict[str, str]:
    return fake_nvidia_smi(tmp_path / "bin", rows)


@pytest.fixture
def cli() -> Any:
    def invoke(*args: str, env: dict[str, str] | None = None) -> Run:
        listdir.cache_clear()
        by_stem.cache_clear()
        result = CliRunner().invoke(app, list(args), env=env)
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Run(result.exit_code, result.stdout, result.stderr)

    return invoke
