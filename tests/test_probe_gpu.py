from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import stat
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fa_doctor.model.machine import GpuDevice, GpuFacts
from fa_doctor.probes import gpu
from fa_doctor.probes.gpu import parse_visible_devices, probe_gpus

UUID0 = "GPU-5f1e2d3c-0000-1111-2222-333344445555"
UUID1 = "GPU-a2b3c4d5-6666-7777-8888-9999aaaabbbb"
PHYSICAL: list[tuple[int, str | None]] = [(0, UUID0), (1, UUID1)]
H200_CSV = f"0, {UUID0}, NVIDIA H200, 9.0, 143771, 580.159.04\n1, {UUID1}, NVIDIA H200, 9.0, 143771, 580.159.04\n"
NO_DRIVER = "torch: skipped, no NVIDIA driver on this machine (no /proc/driver/nvidia, no /dev/nvidia*)"


def script(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def smi_env(tmp_path: Path, body: str, **extra: str) -> dict[str, str]:
    """An environment whose PATH holds only a fake nvidia-smi (plus the basics a shell needs)."""
    bindir = tmp_path / "bin"
    script(bindir, "nvidia-smi", body)
    return {"PATH": f"{bindir}:/usr/bin:/bin", **extra}


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import pynvml` fail exactly as if it were not installed.
    monkeypatch.setitem(sys.modules, "pynvml", None)


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_driver_present", lambda: False)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_driver_present", lambda: True)


# --- CUDA_VISIBLE_DEVICES ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("0,1", [0, 1]),
        ("1,0", [1, 0]),
        ("1", [1]),
        ("0,7,1", [0]),  # 7 does not exist: the list stops there
        ("", []),
        ("-1", []),
        ("abc", []),
        ("1,abc,0", [1]),
        (" 1", [1]),
        ("0, 1 ", [0, 1]),
        ("1gpu", [1]),  # strtoul reads the leading digits
        ("+1", [1]),
        (",0", []),
        ("0,0", []),  # a repeated device hides every device
        ("1,0,1", []),
        ("GPU-5f1e", [0]),
        ("GPU-a2b3,GPU-5f1e", [1, 0]),
        (f"{UUID1}", [1]),
        ("GPU-", []),  # matches both: ambiguous, so invalid
        ("GPU-ffff", []),
        ("GPU-a2b3,GPU-ffff,GPU-5f1e", [1]),
        ("GPU-a2b3,GPU-a2", []),
        ("GPU-a2b3,0", [1]),  # the other style ends the list
        ("0,GPU-a2b3", [0]),
        ("MIG-1234", []),
    ],
)
def test_parse_visible_devices(value: str | None, expected: list[int] | None) -> None:
    assert parse_visible_devices(value, PHYSICAL) == expected


def test_parse_visible_devices_mig_uuid_matches_when_listed() -> None:
    physical: list[tuple[int, str | None]] = [(0, UUID0), (3, "MIG-0a1b2c3d-4e5f")]
    assert parse_visible_devices("MIG-0a1b", physical) == [3]


def test_parse_visible_devices_sparse_physical_and_missing_uuid() -> None:
    physical: list[tuple[int, str | None]] = [(2, None), (5, UUID1)]
    assert parse_visible_devices("5,2,0", physical) == [5, 2]
    assert parse_visible_devices("GPU-a2", physical) == [5]


@given(st.one_of(st.none(), st.text(alphabet="0123456789,- GPUMIa2b5f+x", max_size=20), st.text(max_size=20)))
def test_parse_visible_devices_never_raises(value: str | None) -> None:
    out = parse_visible_devices(value, PHYSICAL)
    assert out is None or (len(set(out)) == len(out) and set(out) <= {0, 1})


# --- nvidia-smi -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_nvml", "no_driver")
class TestNvidiaSmi:
    @pytest.mark.usefixtures("no_driver")
    def test_two_h200(self, tmp_path: Path) -> None:
        facts = probe_gpus("/nonexistent/python", smi_env(tmp_path, f"cat <<'EOF'\n{H200_CSV}EOF\n"))
        assert facts.source == "nvidia-smi"
        assert facts.driver_version == "580.159.04"
        assert facts.cuda_driver_version is None
        assert facts.visible_devices is None
        assert facts.devices == (
            GpuDevice(0, 0, "NVIDIA H200", (9, 0), 143771, UUID0),
            GpuDevice(1, 1, "NVIDIA H200", (9, 0), 143771, UUID1),
        )
        assert facts.attempts == ("nvml: skipped, no NVIDIA driver on this machine",)

    def test_query_arguments(self, tmp_path: Path) -> None:
        log = tmp_path / "args"
        facts = probe_gpus("py", smi_env(tmp_path, f'echo "$@" > {log}\necho "0, {UUID0}, X, 8.0, 1, 1.0"\n'))
        assert facts.source == "nvidia-smi"
        fields = "index,uuid,name,compute_cap,memory.total,driver_version"
        assert log.read_text().split() == [f"--query-gpu={fields}", "--format=csv,noheader,nounits"]

    @pytest.mark.parametrize(("cvd", "physical"), [("1,0", [1, 0]), ("0,7,1", [0]), ("GPU-a2b3", [1]), ("", [])])
    def test_visible_devices_remap(self, tmp_path: Path, cvd: str, physical: list[int]) -> None:
        env = smi_env(tmp_path, f"cat <<'EOF'\n{H200_CSV}EOF\n", CUDA_VISIBLE_DEVICES=cvd)
        facts = probe_gpus("py", env)
        assert facts.source == "nvidia-smi"
        assert facts.visible_devices == cvd
        assert [(d.index, d.physical_index) for d in facts.devices] == list(enumerate(physical))
        assert all(d.uuid == (UUID0, UUID1)[d.physical_index] for d in facts.devices)

    def test_not_applicable_fields_and_comma_in_name(self, tmp_path: Path) -> None:
        out = (
            "0, [N/A], NVIDIA A100-SXM4-80GB, [N/A], [Not Supported], [N/A]\n"
            f"1, {UUID1}, Weird, Inc. GPU, 8.6, 24576, 550.54.15\n"
        )
        facts = probe_gpus("py", smi_env(tmp_path, f"cat <<'EOF'\n{out}EOF\n"))
        assert facts.devices == (
            GpuDevice(0, 0, "NVIDIA A100-SXM4-80GB", None, None, None, "[N/A]"),
            GpuDevice(1, 1, "Weird, Inc. GPU", (8, 6), 24576, UUID1),
        )
        assert facts.devices[0].capability is None  # unknown, not healthy: a check can warn
        assert facts.driver_version == "550.54.15"

    @pytest.mark.parametrize(
        "body",
        [
            "echo 'hello world'\n",
            "printf '\\377\\376\\0binary,,,,,,\\n'\n",
            "echo 'x, GPU-1, name, 9.0, 1, 2'\n",  # non-numeric index
            "echo '0, GPU-1, name'\n",  # too few fields
            "true\n",  # no output at all
        ],
    )
    def test_garbage_output(self, tmp_path: Path, body: str) -> None:
        facts = probe_gpus("py", smi_env(tmp_path, body))
        assert (facts.source, facts.devices) == ("none", ())
        assert facts.attempts[1].startswith("nvidia-smi: no GPU rows in output")
        assert facts.attempts[2] == NO_DRIVER

    def test_garbage_lines_are_skipped(self, tmp_path: Path) -> None:
        body = f"cat <<'EOF'\nWARNING: infoROM is corrupted at gpu 0000:00:00.0\n{H200_CSV}EOF\n"
        facts = probe_gpus("py", smi_env(tmp_path, body))
        assert [d.physical_index for d in facts.devices] == [0, 1]

    def test_driver_failure(self, tmp_path: Path) -> None:
        msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        facts = probe_gpus("py", smi_env(tmp_path, f'echo "{msg}"\nexit 9\n'))
        assert facts.source == "none"
        assert facts.attempts[1] == f"nvidia-smi: exit 9: {msg}"

    def test_old_driver_without_compute_cap(self, tmp_path: Path) -> None:
        log = tmp_path / "calls"
        body = (
            f'echo "$1" >> {log}\n'
            'case "$1" in *compute_cap*)\n'
            "  echo 'Field \"compute_cap\" is not a valid field to query.'\n"
            "  echo; echo 'Run \"nvidia-smi --help\" for usage information.'\n"
            "  exit 2;;\n"
            "esac\n"
            f"echo '0, {UUID0}, Tesla V100-SXM2-32GB, 32510, 470.82.01'\n"
        )
        facts = probe_gpus("py", smi_env(tmp_path, body))
        assert facts.source == "nvidia-smi"
        assert facts.devices == (GpuDevice(0, 0, "Tesla V100-SXM2-32GB", None, 32510, UUID0),)
        assert facts.driver_version == "470.82.01"
        assert log.read_text().splitlines() == [
            "--query-gpu=index,uuid,name,compute_cap,memory.total,driver_version",
            "--query-gpu=index,uuid,name,memory.total,driver_version",
        ]

    def test_hang_times_out_and_kills_the_process_group(self, tmp_path: Path) -> None:
        pidfile = tmp_path / "sleep.pid"
        # The shell is killed on timeout; its background child must not survive holding our pipes.
        env = smi_env(tmp_path, f"sleep 30 &\necho $! > {pidfile}\nwait\n")
        start = time.monotonic()
        facts = probe_gpus("py", env, timeout=1)
        assert time.monotonic() - start < 2.5
        assert facts.source == "none"
        assert facts.attempts[1] == "nvidia-smi: timed out after 1s"
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        assert not _alive(pid)

    @pytest.mark.usefixtures("no_driver")
    def test_not_on_path(self, tmp_path: Path) -> None:
        facts = probe_gpus("py", {"PATH": str(tmp_path)})
        assert facts == GpuFacts(
            source="none",
            devices=(),
            driver_version=None,
            cuda_driver_version=None,
            visible_devices=None,
            attempts=(
                "nvml: skipped, no NVIDIA driver on this machine",
                "nvidia-smi: not on PATH",
                NO_DRIVER,
            ),
        )

    def test_env_defaults_to_os_environ(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        env = smi_env(tmp_path, f"cat <<'EOF'\n{H200_CSV}EOF\n")
        monkeypatch.setenv("PATH", env["PATH"])
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        facts = probe_gpus("py")
        assert facts.visible_devices == "1"
        assert [(d.index, d.physical_index) for d in facts.devices] == [(0, 1)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie awaiting its reaper is dead for our purpose


# --- NVML -------------------------------------------------------------------------------------------------


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="a real NVML is present")
def test_real_pynvml_without_library_fails_gracefully(tmp_path: Path) -> None:
    pytest.importorskip("pynvml")
    facts = probe_gpus("py", {"PATH": str(tmp_path)})
    assert facts.source == "none"
    assert facts.attempts[0].startswith("nvml: NVMLError_LibraryNotFound")
    assert facts.attempts[1] == "nvidia-smi: not on PATH"


class NvmlMemory:
    total = 150_754_820_096 + 1_048_575  # MiB are floored, never rounded up


class FakePynvml(types.ModuleType):
    """A stand-in for pynvml, shaped like nvidia-ml-py's API, on a machine with two H200s."""

    def __init__(self, *, as_bytes: bool = False) -> None:
        super().__init__("pynvml")
        self.as_bytes = as_bytes
        self.calls: list[str] = []

    def _enc(self, text: str) -> str | bytes:
        return text.encode() if self.as_bytes else text

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        return self._enc("NVIDIA H200")

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> NvmlMemory:
        return NvmlMemory()

    def nvmlDeviceGetUUID(self, handle: int) -> str | bytes:
        return self._enc((UUID0, UUID1)[handle])

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self._enc("580.159.04")

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 13000


@pytest.mark.parametrize("as_bytes", [False, True])
def test_nvml_two_h200(driver: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, as_bytes: bool) -> None:
    fake = FakePynvml(as_bytes=as_bytes)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    facts = probe_gpus("py", {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": "1"})
    device = GpuDevice(0, 1, "NVIDIA H200", (9, 0), 143771, UUID1)
    assert facts == GpuFacts("nvml", (device,), "580.159.04", "13.0", "1", ())
    assert fake.calls == ["init", "shutdown"]


class NvmlFieldsUnsupported(FakePynvml):
    def nvmlDeviceGetMemoryInfo(self, handle: int) -> NvmlMemory:
        raise RuntimeError("Not Supported")

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        raise RuntimeError("Not Supported")

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12040


def test_nvml_partial_failures_keep_the_device(driver: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", NvmlFieldsUnsupported(as_bytes=True))
    facts = probe_gpus("py", {"PATH": str(tmp_path)})
    assert facts.devices[1] == GpuDevice(1, 1, "NVIDIA H200", None, None, UUID1)
    assert facts.cuda_driver_version == "12.4"


class NVMLError_DriverNotLoaded(Exception):  # pynvml's own spelling
    pass


class NvmlNoDriver(FakePynvml):
    def nvmlInit(self) -> None:
        raise NVMLError_DriverNotLoaded("Driver Not Loaded")


@pytest.mark.usefixtures("no_driver")
def test_nvml_init_error_is_recorded(driver: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = NvmlNoDriver()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    facts = probe_gpus("py", {"PATH": str(tmp_path)})
    assert facts.source == "none"
    assert facts.attempts[0] == "nvml: NVMLError_DriverNotLoaded: Driver Not Loaded"
    assert fake.calls == []  # no shutdown after a failed init


class NvmlHung(FakePynvml):
    release = threading.Event()

    def nvmlInit(self) -> None:
        self.release.wait(30)


@pytest.mark.usefixtures("no_driver")
def test_nvml_hang_times_out(driver: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", NvmlHung())
    start = time.monotonic()
    try:
        facts = probe_gpus("py", {"PATH": str(tmp_path)}, timeout=0.5)
    finally:
        NvmlHung.release.set()  # let the abandoned daemon thread finish
    assert time.monotonic() - start < 1.5
    assert facts.attempts[0] == "nvml: timed out after 0.5s"
    assert facts.source == "none"


class NvmlNoGpus(FakePynvml):
    def nvmlDeviceGetCount(self) -> int:
        return 0


def test_nvml_zero_gpus_falls_through_to_nvidia_smi(
    driver: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", NvmlNoGpus())
    facts = probe_gpus("py", smi_env(tmp_path, f"cat <<'EOF'\n{H200_CSV}EOF\n"))
    assert facts.source == "nvidia-smi"
    assert facts.attempts == ("nvml: driver reports 0 GPUs",)


# --- torch in the target interpreter ----------------------------------------------------------------------

TORCH_JSON = {
    "torch_cuda": "13.0",
    "driver_cuda": 13000,
    "devices": [{"name": "NVIDIA H200", "major": 9, "minor": 0, "memory": 150754820096 + 1048575, "uuid": UUID1}],
}


def fake_python(tmp_path: Path, body: str) -> str:
    return str(script(tmp_path / "py", "python", body))


@pytest.mark.usefixtures("no_nvml", "driver")
class TestTorchFallback:
    def test_parses_json_and_inherits_visible_devices(self, tmp_path: Path) -> None:
        body = (
            '[ "$1" = "-c" ] || exit 3\n'
            '[ "$CUDA_VISIBLE_DEVICES" = "1" ] || exit 4\n'
            "echo 'some warning printed at import'\n"
            f"echo '{json.dumps(TORCH_JSON)}'\n"
        )
        facts = probe_gpus(fake_python(tmp_path, body), {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": "1"})
        assert facts.source == "torch"
        assert facts.devices == (GpuDevice(0, 1, "NVIDIA H200", (9, 0), 143771, UUID1),)
        assert facts.cuda_driver_version == "13.0"
        assert facts.attempts == (
            "nvml: pynvml (nvidia-ml-py) is not installed alongside fa-doctor",
            "nvidia-smi: not on PATH",
        )

    def test_uuid_visible_devices_leave_physical_index_unknown(self, tmp_path: Path) -> None:
        body = f"echo '{json.dumps(TORCH_JSON)}'\n"
        facts = probe_gpus(fake_python(tmp_path, body), {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": "GPU-a2"})
        assert [(d.index, d.physical_index) for d in facts.devices] == [(0, -1)]

    @pytest.mark.parametrize(
        ("body", "attempt"),
        [
            ("echo 'not json at all'\n", "torch: no JSON result in output: 'not json at all'"),
            ('echo \'{"devices": [{"name": 1}]}\'\n', "torch: malformed JSON result: KeyError: 'major'"),
            ("echo '{\"devices\": [7]}'\n", "torch: malformed JSON result: AttributeError:"),
            ('echo \'{"devices": [], "torch_cuda": null}\'\n', "torch: torch.cuda.device_count() is 0 (CPU-only"),
            (
                "echo boom >&2\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
                "torch: exit 1: ModuleNotFoundError: No module named 'torch'",
            ),
        ],
    )
    def test_bad_child_output(self, tmp_path: Path, body: str, attempt: str) -> None:
        facts = probe_gpus(fake_python(tmp_path, body), {"PATH": str(tmp_path)})
        assert (facts.source, facts.devices) == ("none", ())
        assert facts.attempts[2].startswith(attempt)

    def test_hang_times_out(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(gpu, "TORCH_MIN_TIMEOUT", 0.0)
        start = time.monotonic()
        facts = probe_gpus(
            fake_python(tmp_path, f"exec {shutil.which('sleep')} 30\n"), {"PATH": str(tmp_path)}, timeout=1
        )
        assert time.monotonic() - start < 2.5
        assert facts.attempts[2] == "torch: timed out after 1s"

    def test_target_python_missing(self, tmp_path: Path) -> None:
        facts = probe_gpus(str(tmp_path / "nope" / "python"), {"PATH": str(tmp_path)})
        assert facts.source == "none"
        assert facts.attempts[2].startswith(f"torch: could not start {tmp_path / 'nope' / 'python'}:")

    def test_real_cpu_torch_sees_no_gpu(self, tmp_path: Path) -> None:
        pytest.importorskip("torch")  # only to skip cleanly; the probe itself runs torch in a child
        facts = probe_gpus(sys.executable, {"PATH": os.environ.get("PATH", ""), "CUDA_VISIBLE_DEVICES": ""})
        assert facts.source == "none"
        assert facts.attempts[-1].startswith("torch: torch.cuda.device_count() is 0")


@pytest.mark.usefixtures("no_nvml", "no_driver")
def test_no_driver_skips_torch_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    python = fake_python(tmp_path, f"touch {marker}\necho '{json.dumps(TORCH_JSON)}'\n")
    facts = probe_gpus(python, {"PATH": str(tmp_path)})
    assert facts.source == "none"
    assert facts.attempts[-1] == NO_DRIVER
    assert not marker.exists()


def test_to_dict_is_json_ready() -> None:
    facts = GpuFacts(
        "nvml",
        (GpuDevice(0, 1, "NVIDIA H200", (9, 0), 143771, UUID1),),
        "580.159.04",
        "13.0",
        "1",
        ("nvidia-smi: not on PATH",),
    )
    assert json.loads(json.dumps(facts.to_dict())) == {
        "source": "nvml",
        "devices": [
            {
                "index": 0,
                "physical_index": 1,
                "name": "NVIDIA H200",
                "capability": "9.0",
                "memory_mib": 143771,
                "uuid": UUID1,
                "capability_raw": None,
            }
        ],
        "driver_version": "580.159.04",
        "cuda_driver_version": "13.0",
        "visible_devices": "1",
        "attempts": ["nvidia-smi: not on PATH"],
    }


@pytest.mark.usefixtures("no_nvml")
def test_unexpected_error_becomes_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken() -> bool:
        raise PermissionError("/dev/nvidiactl: Permission denied")

    monkeypatch.setattr(gpu, "_driver_present", broken)
    facts = probe_gpus("py", {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": "0"})
    assert (facts.source, facts.devices, facts.visible_devices) == ("none", (), "0")
    assert facts.attempts[-1] == "gpu probe failed: PermissionError: /dev/nvidiactl: Permission denied"
