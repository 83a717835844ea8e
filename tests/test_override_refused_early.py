"""An invalid override is refused before any kernel runs (issue 23): the server would refuse to start, so the
kernel test (9.8 s on an H200) would only delay saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import gpu_env
from fakeenv import FakeEnv

from fa_doctor.smoke import runner

H200 = "0, GPU-5f1e2c3a-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771"


def test_an_invalid_override_runs_no_kernel(
    cli: Any, fenv: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fenv.torch()
    fenv.fa4()
    calls: list[str] = []
    monkeypatch.setattr(runner, "run_smoke", lambda *a, **kw: calls.append("ran") or pytest.fail("a kernel ran"))
    env = {**gpu_env(tmp_path, H200), "SGLANG_FLASHATTENTION_VERSION": "5"}
    run = cli("check", "--json", "--python", fenv.python, env=env)
    doc = json.loads(run.stdout)
    assert run.code == 1 and calls == []
    ids = {f["id"]: f for f in doc["findings"]}
    assert ids["override.invalid"]["severity"] == "fail"
    assert "refuse to start" in ids["smoke.skipped"]["title"]
