"""The scenarios of tests/test_smoke_harness.py: the fakes in this folder, run through the real smoke child.

Each child imports torch (1-2 s), so run_all() starts them all at once and the tests read the results.
The compiled extensions are built with the system C compiler, so importing them fails with a real
`undefined symbol` ImportError.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fa_doctor.smoke import SmokeResult, SmokeTarget
from fa_doctor.smoke.runner import run_smoke

FAKES = Path(__file__).resolve().parent
PYTHON = sys.executable
FA2 = SmokeTarget("fa2", "flash_attn", "fa2")
FA4 = SmokeTarget("fa4", "flash_attn.cute", "cute")
SGL = SmokeTarget("fa3-sgl", "sgl_kernel.flash_attn", "sgl")
CXX_TORCH_SYMBOL = "_ZN3c104cuda9SetDeviceEi"  # c10::cuda::SetDevice(int): absent from a CPU torch
OLD_ABI_SYMBOL = "_ZN5torch3jit17parseSchemaOrNameERKSsb"  # old-ABI std::string: torch exports the __cxx11 one
# The hang's whole child (torch's import included) must reach its kernel call inside this: on a 2-core machine
# running two suites at once, torch's import alone took over 3 s (a red CI one run in several). 15 s leaves room.
HANG_TIMEOUT = 15.0


@dataclass
class Run:
    result: Any  # a SmokeResult, or what a multi-run job returns
    seconds: float
    timeout: float
    progress: list[str] = field(default_factory=list)


def child_env(*roots: Path, **extra: str) -> dict[str, str]:
    drop = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "FAKE_FA_MODE")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("FLASH_ATTENTION_CUTE_DSL")}
    env["PYTHONPATH"] = os.pathsep.join(str(r) for r in [*roots, FAKES / "common"])
    env.update(extra)
    return env


def build_extension(folder: Path, module: str, symbol: str) -> None:
    """A C extension whose PyInit_ calls a C++-mangled torch function that no loaded library defines."""
    src = folder / f"{module}.c"
    src.write_text(f"extern void {symbol}(int);\nvoid *PyInit_{module}(void) {{ {symbol}(0); return 0; }}\n")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(folder / f"{module}{suffix}"), str(src)]
    subprocess.run(cmd, check=True, timeout=60, capture_output=True)


def job(target: SmokeTarget, env: dict[str, str], **kw: Any) -> Callable[[list[str]], SmokeResult]:
    options: dict[str, Any] = {"device": "cpu", "timeout": 60, **kw}
    return lambda progress: run_smoke(PYTHON, target, env=env, progress=progress.append, **options)


def fa2(mode: str, **extra: str) -> Callable[[list[str]], SmokeResult]:
    return job(FA2, child_env(FAKES / "fa2", FAKE_FA_MODE=mode, **extra))


def cute_runs(cache: Path) -> Callable[[list[str]], tuple[SmokeResult, ...]]:
    """Cold, warm, then cache disabled: the three runs depend on each other, so one job runs them in turn."""
    env = child_env(FAKES / "cute", FAKE_COMPILE_SECONDS="0.3")
    runs = [job(FA4, env, use_cache=True, cache_dir=str(cache))] * 2
    runs.append(job(FA4, env, use_cache=False, cache_dir=str(cache.parent / "unused")))
    return lambda progress: tuple(run(progress) for run in runs)


def benchmark_dry_run(out: Path) -> subprocess.CompletedProcess[str]:
    script = FAKES.parents[1] / "benchmarks" / "smoke_fa4.py"
    cmd = [PYTHON, str(script), "--fake-cpu", "--repeat", "1", "--fake-compile-seconds", "0.1", "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=child_env())


def run_all(tmp: Path) -> dict[str, Any]:
    """Every scenario, concurrently; returns a Run per name, plus "tmp"."""
    shutil.copytree(FAKES / "abi", tmp / "abi")
    build_extension(tmp / "abi", "flash_attn_2_cuda", CXX_TORCH_SYMBOL)
    shutil.copytree(FAKES / "sgl", tmp / "sgl")
    build_extension(tmp / "sgl" / "sgl_kernel", "flash_ops", OLD_ABI_SYMBOL)
    (tmp / "broken_torch" / "torch").mkdir(parents=True)
    (tmp / "broken_torch" / "torch" / "__init__.py").write_text("import torch_needs_this_missing_module\n")
    (tmp / "a_file").write_text("")
    jobs: dict[str, tuple[float, Callable[[list[str]], Any]]] = {
        # The two sequential chains (three and four children) first, so that they do not finish last.
        "benchmark": (120, lambda p: benchmark_dry_run(tmp / "bench.json")),
        "cute": (180, cute_runs(tmp / "cache" / "cute-dsl")),
        "ok": (60, fa2("ok", FAKE_FA_PRINT_ENV="1")),
        "wrong": (60, fa2("wrong")),
        "nan": (60, fa2("nan")),
        "raises": (60, fa2("raises")),
        "segfault": (60, fa2("segfault")),
        "warn": (60, fa2("warn")),
        "noisy": (60, fa2("noisy")),
        "abi": (60, job(FA2, child_env(tmp / "abi"))),
        "sgl": (60, job(SGL, child_env(tmp / "sgl"))),
        "nocutlass": (60, job(FA4, child_env(FAKES / "nocutlass"), cache_dir=str(tmp / "a_file" / "sub"))),
        "no_gpu": (60, job(FA2, child_env(FAKES / "fa2"), device="cuda")),
        "no_torch": (60, job(FA2, child_env(tmp / "broken_torch"))),
        "pinned": (60, job(FA2, child_env(FAKES / "fa2", FAKE_FA_PRINT_ENV="1"), visible_devices="3")),
    }

    def timed(name: str) -> Run:
        limit, work = jobs[name]
        progress: list[str] = []
        start = time.perf_counter()
        result = work(progress)
        return Run(result, time.perf_counter() - start, limit, progress)

    # The hang starts alone and the others only once it is inside its kernel call, so that a loaded CPU
    # cannot stretch its torch import past the timeout.
    in_call = threading.Event()

    def hang() -> Run:
        start = time.perf_counter()
        progress: list[str] = []

        def seen(message: str) -> None:
            progress.append(message)
            if message == "running first FA kernel call":
                in_call.set()

        env = child_env(FAKES / "fa2", FAKE_FA_MODE="hang")
        result = run_smoke(PYTHON, FA2, device="cpu", timeout=HANG_TIMEOUT, env=env, progress=seen)
        in_call.set()
        return Run(result, time.perf_counter() - start, HANG_TIMEOUT, progress)

    with ThreadPoolExecutor(max_workers=4) as pool:
        hung = pool.submit(hang)
        in_call.wait(30)
        futures = {name: pool.submit(timed, name) for name in jobs}
        return {name: f.result() for name, f in futures.items()} | {"tmp": tmp, "hang": hung.result()}
