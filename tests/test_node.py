"""Multi-GPU nodes: per-device probing, --gpus, mixed GPUs, and per-device smoke results compared."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import gpu_env
from fakeenv import FakeEnv

from fa_doctor.diagnose.checks.node import compare_smoke
from fa_doctor.model.machine import GpuDevice
from fa_doctor.model.options import CheckOptions
from fa_doctor.probes.gather import gather
from fa_doctor.render.shell import remedy_lines
from fa_doctor.smoke import runner
from fa_doctor.smoke import step as smoke_step

H200S = [f"{i}, GPU-{i:08d}-0000-4000-8000-000000000000, NVIDIA H200, 9.0, 143771" for i in range(4)]
B200_AT_2 = "2, GPU-0000b200-0000-4000-8000-000000000000, NVIDIA B200, 10.0, 183359"


def check(cli: Any, fenv: FakeEnv, *extra: str, env: dict[str, str] | None = None) -> Any:
    return cli("check", "--no-smoke", "--json", "--python", fenv.python, *extra, env=env)


@pytest.fixture
def fa4(fenv: FakeEnv) -> FakeEnv:
    fenv.torch()
    fenv.fa4()
    return fenv


def test_every_visible_gpu_is_reported(cli: Any, fa4: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, fa4, env=gpu_env(tmp_path, *H200S))
    assert [d["index"] for d in run.doc["gpus"]["devices"]] == [0, 1, 2, 3]
    assert "gpu.mixed" not in run.ids() and run.code == 0


def test_mixed_capabilities_are_flagged(cli: Any, fa4: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, fa4, env=gpu_env(tmp_path, H200S[0], H200S[1], B200_AT_2))
    mixed = run.finding("gpu.mixed")
    assert mixed["severity"] == "warn" and "compute capability" in mixed["title"]
    assert mixed["remedies"][0]["commands"] == ["export CUDA_VISIBLE_DEVICES=0,1"]


def test_gpus_option_limits_the_set(cli: Any, fa4: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, fa4, "--gpus", "0,1", env=gpu_env(tmp_path, H200S[0], H200S[1], B200_AT_2))
    assert [d["index"] for d in run.doc["gpus"]["devices"]] == [0, 1]
    assert "gpu.mixed" not in run.ids()


def test_gpus_option_names_a_missing_gpu(cli: Any, fa4: FakeEnv, tmp_path: Path) -> None:
    run = check(cli, fa4, "--gpus", "0,7", env=gpu_env(tmp_path, *H200S[:2]))
    assert run.finding("gpu.missing")["evidence"] == {"requested_missing": [7], "visible": [0, 1]}
    assert run.code == 1


def test_cuda_visible_devices_remaps_indices(cli: Any, fa4: FakeEnv, tmp_path: Path) -> None:
    env = {**gpu_env(tmp_path, *H200S), "CUDA_VISIBLE_DEVICES": "2,0"}
    devices = check(cli, fa4, env=env).doc["gpus"]["devices"]
    assert [(d["index"], d["physical_index"]) for d in devices] == [(0, 2), (1, 0)]


def test_bad_gpus_value_is_usage_error(cli: Any, fa4: FakeEnv) -> None:
    assert cli("check", "--no-smoke", "--gpus", "0,two", "--python", fa4.python).code == 2


def dev(i: int, name: str = "NVIDIA H200") -> GpuDevice:
    return GpuDevice(i, i, name, (9, 0), 143771, f"GPU-{i}")


def test_compare_smoke_flags_one_bad_gpu() -> None:
    findings = compare_smoke("fa4", [(dev(0), "passed"), (dev(1), "crashed"), (dev(2), "passed")])
    (finding,) = findings
    assert finding.id == "smoke.inconsistent" and finding.severity.value == "fail"
    assert "GPU 1" in finding.detail and "export CUDA_VISIBLE_DEVICES=0,2" in remedy_lines(finding.remedies[0])
    assert compare_smoke("fa4", [(dev(0), "passed"), (dev(1), "passed")]) == []
    assert compare_smoke("fa4", [(dev(0), "timeout")]) == []


def test_one_child_per_gpu_pinned_and_parallel(fa4: FakeEnv, tmp_path: Path, monkeypatch: Any) -> None:
    """The orchestration: one run per device, each pinned by UUID, running at the same time; FA4 warms the cache
    on the first device before the others start."""
    for key, value in gpu_env(tmp_path, *H200S).items():
        monkeypatch.setenv(key, value)
    facts = gather(CheckOptions(python=fa4.python), {})
    calls: list[tuple[str | None, float, float]] = []
    lock = threading.Lock()

    def fake_run(python: str, target: Any, **kw: Any) -> runner.SmokeResult:
        start = time.monotonic()
        time.sleep(0.3)
        with lock:
            calls.append((kw["visible_devices"], start, time.monotonic()))
        status = "crashed" if kw["visible_devices"] == "GPU-00000003-0000-4000-8000-000000000000" else "passed"
        return runner.SmokeResult(
            target.key,
            target.module,
            target.api,
            status,
            signal="SIGSEGV" if status == "crashed" else None,
            visible_devices=kw["visible_devices"],
        )

    monkeypatch.setattr(runner, "run_smoke", fake_run)
    target = runner.SmokeTarget("fa4", "flash_attn.cute", "cute")
    devices = list(facts.gpus.devices)
    results = smoke_step.run_on_devices(facts, target, devices, CheckOptions(), None)
    assert [r.visible_devices for r in results if isinstance(r, runner.SmokeResult)] == [
        f"GPU-{i:08d}-0000-4000-8000-000000000000" for i in range(4)
    ]
    first_end = min(end for pin, _, end in calls if pin and pin.startswith("GPU-00000000"))
    rest = [(s, e) for pin, s, e in calls if pin and not pin.startswith("GPU-00000000")]
    assert all(s >= first_end for s, _ in rest)  # cache warmed by GPU 0 first
    assert max(s for s, _ in rest) < min(e for _, e in rest)  # the other three overlapped


def test_smoke_step_reports_per_gpu(fa4: FakeEnv, tmp_path: Path, monkeypatch: Any) -> None:
    for key, value in gpu_env(tmp_path, *H200S[:2]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(
        runner,
        "run_smoke",
        lambda python, target, **kw: runner.SmokeResult(
            target.key,
            target.module,
            target.api,
            "passed" if kw["visible_devices"].startswith("GPU-00000000") else "timeout",
            timeout=kw["timeout"],
            visible_devices=kw["visible_devices"],
        ),
    )
    from fa_doctor.commands.check import run

    report = run(CheckOptions(python=fa4.python, timeout=5))
    ids = [f.id for f in report.findings]
    assert "smoke.inconsistent" in ids and "smoke.timeout" in ids
    assert report.check.smoke is not None and report.check.smoke.per_gpu == {"fa4": {"0": "passed", "1": "timeout"}}
    assert any(f.title.startswith("GPU 1: ") for f in report.findings if f.id == "smoke.timeout")


def test_broken_installs_are_still_smoke_tested(fenv: FakeEnv, tmp_path: Path, monkeypatch: Any) -> None:
    """Nothing usable selected: the installed FA4 is run anyway, so its import error shows up (import.failed)."""
    fenv.torch()
    fenv.fa4(core=False)
    for key, value in gpu_env(tmp_path, H200S[0]).items():
        monkeypatch.setenv(key, value)
    from fa_doctor.diagnose.derive.inventory import assess_all
    from fa_doctor.diagnose.derive.selection import select

    facts = gather(CheckOptions(python=fenv.python), {})
    states = assess_all(facts)
    assert smoke_step.smoke_keys(select(facts, states, None), states, every=False) == ["fa4"]
