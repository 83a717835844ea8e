"""The GPU probe against a misbehaving nvidia-smi and a torch fallback run from a hostile working directory."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from test_hardening_proc import leftovers, marker
from test_probe_gpu import UUID0, UUID1, smi_env

from fa_doctor.probes import gpu
from fa_doctor.probes.gpu import probe_gpus


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)


def rows(*lines: str) -> str:
    return "cat <<'EOF'\n" + "".join(f"{line}\n" for line in lines) + "EOF\n"


@pytest.mark.parametrize("cap", ["9.0a", "[N/A]", "", "9", "9.0.1", "٩.٠", "sm_90", "nine"])
def test_unreadable_capability_is_unknown_not_healthy(tmp_path: Path, cap: str) -> None:
    facts = probe_gpus("py", smi_env(tmp_path, rows(f"0, {UUID0}, NVIDIA H200, {cap}, 143771, 580.159.04")))
    (device,) = facts.devices
    assert device.capability is None
    assert device.capability_raw == cap.strip()
    assert device.to_dict()["capability"] is None and device.to_dict()["capability_raw"] == cap.strip()


def test_readable_capability_has_no_raw_text(tmp_path: Path) -> None:
    facts = probe_gpus("py", smi_env(tmp_path, rows(f"0, {UUID0}, NVIDIA H200, 9.0, 143771, 580.159.04")))
    assert facts.devices[0].capability == (9, 0) and facts.devices[0].capability_raw is None


@pytest.mark.parametrize("index", ["²", "١", "0x1", "-1", "1e3", "99999999999999999999"])
def test_odd_index_drops_that_row_only(tmp_path: Path, index: str) -> None:
    body = rows(
        f"{index}, {UUID0}, NVIDIA H200, 9.0, 143771, 580.159.04",
        f"1, {UUID1}, NVIDIA H200, 9.0, ³, 580.159.04",
    )
    facts = probe_gpus("py", smi_env(tmp_path, body))
    assert facts.source == "nvidia-smi", facts.attempts
    assert [(d.index, d.memory_mib) for d in facts.devices] == [(1, None)]


def test_background_child_keeps_the_output_and_dies(tmp_path: Path) -> None:
    m = marker()
    body = f"sleep {m} &\n" + rows(f"0, {UUID0}, NVIDIA H200, 9.0, 143771, 580.159.04")
    start = time.monotonic()
    facts = probe_gpus("py", smi_env(tmp_path, body), timeout=10)
    assert time.monotonic() - start < 3
    assert facts.source == "nvidia-smi" and facts.devices[0].name == "NVIDIA H200"
    assert leftovers(m) == []


def test_hung_nvidia_smi_is_bounded_and_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_driver_present", lambda: False)
    m = marker()
    start = time.monotonic()
    facts = probe_gpus("py", smi_env(tmp_path, f"sleep {m}\n"), timeout=1)
    assert time.monotonic() - start < 3
    assert facts.source == "none" and "nvidia-smi: timed out after 1s" in facts.attempts
    assert leftovers(m) == []


@pytest.mark.parametrize("shadow", ["json.py", "ctypes.py"])
def test_torch_fallback_ignores_stdlib_shadows_in_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shadow: str
) -> None:
    """The torch fallback runs in the target from the user's cwd: a json.py there must not break it."""
    monkeypatch.setattr(gpu, "_driver_present", lambda: True)
    monkeypatch.chdir(tmp_path)
    (tmp_path / shadow).write_text("raise SystemExit('shadowed')\n")
    fake_torch = tmp_path / "torch"
    fake_torch.mkdir()
    (fake_torch / "__init__.py").write_text(
        "class _P:\n name = 'NVIDIA H200'; major = 9; minor = 0; total_memory = 143771 << 20; uuid = None\n"
        "class cuda:\n device_count = staticmethod(lambda: 1)\n"
        " get_device_properties = staticmethod(lambda i: _P())\n"
        "class version:\n cuda = '12.8'\n"
    )
    facts = probe_gpus(sys.executable, {"PATH": "/usr/bin:/bin"}, timeout=5)
    assert facts.source == "torch", facts.attempts
    assert facts.devices[0].capability == (9, 0)  # and torch itself was the one from the cwd, as for the server
