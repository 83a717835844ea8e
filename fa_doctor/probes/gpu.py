"""Which NVIDIA GPUs the server will see: NVML, else nvidia-smi, else torch in the target interpreter; every failure
is a line in ``GpuFacts.attempts``, nothing here prints or raises (device order: docs/internals.md, "GPUs")."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from glob import glob
from itertools import takewhile
from typing import Any, TypeVar

from fa_doctor.model.machine import GpuDevice, GpuFacts
from fa_doctor.probes.files import read
from fa_doctor.process import proc

_T = TypeVar("_T")

_PROC_VERSION = "/proc/driver/nvidia/version"
# `import torch` plus CUDA init routinely takes several seconds; a short --timeout must not starve it.
TORCH_MIN_TIMEOUT = 60.0
_SMI_FIELDS = ("index", "uuid", "name", "compute_cap", "memory.total", "driver_version")
_NA = {"", "[n/a]", "n/a", "[not supported]", "[unknown error]", "[insufficient permissions]"}
_ORDINAL = re.compile(r"[+-]?[0-9]+")
_ASCII_INT = re.compile(r"[0-9]{1,9}")  # str.isdigit() also takes "²", which int() refuses
_CAPABILITY = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})")
_MAX_OUTPUT = 1 << 20


# devices, driver version, CUDA version the driver supports
_Found = tuple[list[GpuDevice], str | None, str | None]


def _ordinals(value: str) -> list[int] | None:
    """Ordinal entries as CUDA reads them (strtoul-like), or None when the list is UUID-style."""
    if value.lstrip().startswith(("GPU-", "MIG-")):
        return None
    out: list[int] = []
    for entry in value.split(","):
        # strtoul skips leading blanks and stops at the first non-digit: " 1" and "1gpu" both mean 1.
        m = _ORDINAL.match(entry.strip())
        n = int(m.group()) if m else -1
        if n < 0:
            break
        if n in out:
            return []  # CUDA (and torch's mirror of it) exposes nothing at all on a repeated id
        out.append(n)
    return out


def parse_visible_devices(value: str | None, physical: Sequence[tuple[int, str | None]]) -> list[int] | None:
    """Physical indices in CUDA order for a CUDA_VISIBLE_DEVICES value, as the driver reads it (docs/internals.md);
    None when unset (all visible)."""
    if value is None:
        return None
    known = {p for p, _ in physical}
    ordinals = _ordinals(value)
    if ordinals is not None:
        return list(takewhile(known.__contains__, ordinals))
    prefix = value.lstrip()[:4]
    picked: list[int] = []
    for entry in (e.strip() for e in value.split(",")):
        hits = [p for p, u in physical if entry.startswith(prefix) and u is not None and u.startswith(entry)]
        if len(hits) != 1:
            break
        if hits[0] in picked:
            return []
        picked.append(hits[0])
    return picked


def _remap(devices: Sequence[GpuDevice], value: str | None) -> tuple[GpuDevice, ...]:
    order = parse_visible_devices(value, [(d.physical_index, d.uuid) for d in devices])
    if order is None:
        return tuple(devices)
    by_phys = {d.physical_index: d for d in devices}
    return tuple(replace(by_phys[p], index=i) for i, p in enumerate(order))


def _text(value: object) -> str | None:
    return None if value is None else value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _try(fn: Callable[[], _T]) -> _T | None:
    try:
        return fn()
    except Exception:  # one unsupported NVML field must not cost the whole device
        return None


def _cuda_version(v: object) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else None


def _nvml_query() -> _Found:
    nv: Any = importlib.import_module("pynvml")
    nv.nvmlInit()
    try:
        devices = []
        for i in range(int(nv.nvmlDeviceGetCount())):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            cap = _try(partial(nv.nvmlDeviceGetCudaComputeCapability, h))
            mem = getattr(_try(partial(nv.nvmlDeviceGetMemoryInfo, h)), "total", None)
            name = _text(_try(partial(nv.nvmlDeviceGetName, h))) or "unknown"
            mib = int(mem) // (1024 * 1024) if mem is not None else None
            cap_t = (int(cap[0]), int(cap[1])) if cap else None
            devices.append(GpuDevice(i, i, name, cap_t, mib, _text(_try(partial(nv.nvmlDeviceGetUUID, h)))))
        cuda_fn = getattr(nv, "nvmlSystemGetCudaDriverVersion_v2", None) or nv.nvmlSystemGetCudaDriverVersion
        return devices, _text(_try(nv.nvmlSystemGetDriverVersion)), _cuda_version(_try(cuda_fn))
    finally:
        _try(nv.nvmlShutdown)


def _probe_nvml(timeout: float) -> _Found | str:
    try:  # in a daemon thread: a driver stuck in the kernel must neither hang us nor block interpreter exit
        return proc.bounded(_nvml_query, timeout, "nvml")
    except proc.Deadline:
        return f"timed out after {timeout:g}s"
    except ImportError:
        return "pynvml (nvidia-ml-py) is not installed alongside fa-doctor"
    except Exception as exc:  # any driver failure is data, never a traceback
        return f"{type(exc).__name__}: {exc}"


def _run(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> tuple[int, str, str] | str:
    """Exit status and output, or why there is none."""
    try:
        done = proc.run(argv, timeout, env=env, max_output=_MAX_OUTPUT)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"could not start {argv[0]}: {exc}"
    if done.timed_out:
        return f"timed out after {timeout:g}s"
    if done.returncode is None:
        return "could not be reaped after it exited"
    return done.returncode, done.out(), done.err()


def _first_line(*texts: str) -> str:
    return next((line.strip()[:200] for line in "\n".join(texts).splitlines() if line.strip()), "no output")


def _na(value: str) -> str | None:
    value = value.strip()
    return None if value.lower() in _NA else value


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and _ASCII_INT.fullmatch(value) else None


def _parse_smi(stdout: str, with_cap: bool) -> tuple[list[GpuDevice], str | None]:
    devices: list[GpuDevice] = []
    driver = None
    for line in stdout.splitlines():
        head = line.split(",", 2)
        tail = head[-1].rsplit(",", 3 if with_cap else 2) if len(head) == 3 else []
        index = _int(head[0].strip())
        if len(tail) != (4 if with_cap else 3) or index is None:
            continue  # garbage line; a name holding commas still lands whole in tail[0]
        # (major, minor) from "9.0", else the text as given ("9.0a" or "[N/A]" is not one to trust)
        m = _CAPABILITY.fullmatch(tail[1].strip()) if with_cap else None
        cap = (int(m.group(1)), int(m.group(2))) if m else None
        raw = tail[1].strip()[:64] if with_cap and not m else None
        driver = driver or _na(tail[-1])
        devices.append(GpuDevice(index, index, _na(tail[0]) or "unknown", cap, _int(_na(tail[-2])), _na(head[1]), raw))
    return devices, driver


def _probe_smi(env: Mapping[str, str], timeout: float) -> tuple[list[GpuDevice], str | None] | str:
    exe = shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))
    if exe is None:
        return "not on PATH"
    fields = list(_SMI_FIELDS)
    while True:
        res = _run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"], env, timeout)
        if isinstance(res, str):
            return res
        code, out, err = res
        if code == 0:
            devices, driver = _parse_smi(out, "compute_cap" in fields)
            return (devices, driver) if devices else f"no GPU rows in output: {_first_line(out, err)!r}"
        if "compute_cap" not in fields or "compute_cap" not in out + err:
            return f"exit {code}: {_first_line(err, out)}"
        fields.remove("compute_cap")  # drivers before ~510 cannot report it: retry without


def _driver_present() -> bool:
    """Whether an NVIDIA kernel driver is loaded (/dev/dxg: WSL2's, on the Windows side)."""
    return any(map(os.path.exists, (_PROC_VERSION, "/dev/nvidiactl", "/dev/dxg"))) or bool(glob("/dev/nvidia[0-9]*"))


def _proc_driver_version() -> str | None:
    text = read(_PROC_VERSION, 4096).text()
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9]+(?:\.[0-9]+)+)", text) if text else None
    return m.group(1) if m else None


# Runs in the target, where CUDA applies CUDA_VISIBLE_DEVICES; the working directory is set aside for the stdlib
# imports (a json.py there must not break us) and put back for torch's, as the server would import it.
_TORCH_SCRIPT = """
import sys
head = [sys.path.pop(0)] if sys.path and not getattr(sys.flags, "safe_path", False) else []
import ctypes, json
sys.path[:0] = head
import torch
props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
devs = [{"name": p.name, "major": p.major, "minor": p.minor, "memory": p.total_memory,
         "uuid": "GPU-%s" % p.uuid if getattr(p, "uuid", None) is not None else None} for p in props]
v = ctypes.c_int(0)
try:
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
except Exception:
    pass
print(json.dumps({"torch_cuda": torch.version.cuda, "driver_cuda": v.value, "devices": devs}))
"""


def _torch_devices(stdout: str, visible: str | None) -> tuple[list[GpuDevice], str | None] | str:
    docs = (_json(line) for line in reversed(stdout.splitlines()))  # import-time chatter may precede our line
    doc = next((d for d in docs if isinstance(d, dict) and isinstance(d.get("devices"), list)), None)
    if doc is None:
        return f"no JSON result in output: {_first_line(stdout)!r}"
    if not doc["devices"]:
        build = doc.get("torch_cuda")
        return f"torch.cuda.device_count() is 0 ({f'CUDA {build} build' if build else 'CPU-only build'})"
    # The child applied CUDA_VISIBLE_DEVICES itself; only ordinal lists tell us the physical index.
    phys = list(range(len(doc["devices"]))) if visible is None else (_ordinals(visible) or [])
    devices = []
    try:
        for i, d in enumerate(doc["devices"]):
            mib = int(d["memory"]) // (1024 * 1024) if d.get("memory") is not None else None
            uuid = str(d["uuid"]) if d.get("uuid") else None
            cap = (int(d["major"]), int(d["minor"]))
            devices.append(GpuDevice(i, phys[i] if i < len(phys) else -1, str(d["name"]), cap, mib, uuid))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return f"malformed JSON result: {type(exc).__name__}: {exc}"
    return devices, _cuda_version(doc.get("driver_cuda"))


def _json(line: str) -> object:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested garbage
        return None


def probe_gpus(python: str, env: Mapping[str, str] | None = None, timeout: float = 10.0) -> GpuFacts:
    """Find the GPUs the server will see; ``python`` is the target interpreter, used only for torch."""
    env = os.environ if env is None else env
    attempts: list[str] = []
    try:
        return _probe(python, env, timeout, attempts)
    except Exception as exc:  # a bug here must still end as data, not a traceback
        attempts.append(f"gpu probe failed: {type(exc).__name__}: {exc}")
        return GpuFacts("none", (), None, None, env.get("CUDA_VISIBLE_DEVICES"), tuple(attempts))


def _probe(python: str, env: Mapping[str, str], timeout: float, attempts: list[str]) -> GpuFacts:
    visible = env.get("CUDA_VISIBLE_DEVICES")

    def facts(source: str, devices: Sequence[GpuDevice], driver: str | None, cuda: str | None) -> GpuFacts:
        return GpuFacts(source, tuple(devices), driver, cuda, visible, tuple(attempts))

    # libnvidia-ml ships with the driver: without one, skip importing pynvml (tens of ms on every run).
    nvml = _probe_nvml(timeout) if _driver_present() else "skipped, no NVIDIA driver on this machine"
    if isinstance(nvml, str):
        attempts.append(f"nvml: {nvml}")
    elif not nvml[0]:
        attempts.append("nvml: driver reports 0 GPUs")
    else:
        return facts("nvml", _remap(nvml[0], visible), nvml[1], nvml[2])

    if not isinstance(smi := _probe_smi(env, timeout), str):
        return facts("nvidia-smi", _remap(smi[0], visible), smi[1], None)
    attempts.append(f"nvidia-smi: {smi}")

    if not _driver_present():
        attempts.append("torch: skipped, no NVIDIA driver on this machine (no /proc/driver/nvidia, no /dev/nvidia*)")
        return facts("none", (), None, None)
    res = _run([python, "-c", _TORCH_SCRIPT], env, max(timeout, TORCH_MIN_TIMEOUT))
    if isinstance(res, str):
        attempts.append(f"torch: {res}")
    elif res[0] != 0:
        lines = [ln for ln in res[2].splitlines() if ln.strip()]
        attempts.append(f"torch: exit {res[0]}: {lines[-1].strip()[:200] if lines else _first_line(res[1])}")
    elif isinstance(found := _torch_devices(res[1], visible), str):
        attempts.append(f"torch: {found}")
    else:
        return facts("torch", found[0], _proc_driver_version(), found[1])
    return facts("none", (), None, None)


# The early probe, beside the CLI's imports; a check asking the same question takes its answer, once.
early: tuple[tuple[str, dict[str, str], float], threading.Thread, dict[str, GpuFacts]] | None = None


def start_early(python: str, env: Mapping[str, str], timeout: float = 10.0) -> None:
    global early
    key = (python, dict(env), timeout)
    if early is not None and early[0] == key:
        return  # started from the command line before the options were parsed, asking the same
    box: dict[str, GpuFacts] = {}

    def probe() -> None:
        box["v"] = probe_gpus(python, key[1], timeout)

    thread = threading.Thread(target=probe, name="fa-doctor early gpu probe", daemon=True)
    thread.start()
    early = (key, thread, box)


def early_answer(python: str, env: Mapping[str, str], timeout: float, wait: float) -> GpuFacts | None:
    """The early probe's answer to this question (waiting at most `wait` seconds), else None."""
    global early
    if early is None or early[0] != (python, dict(env), timeout):
        return None
    _key, thread, box = early
    early = None
    thread.join(wait)
    return box.get("v")
