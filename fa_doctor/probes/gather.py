"""Every probe of a check, run once, into one `Facts`: the GPUs in a background thread, the target interpreter (its
search path drives the rest), then its distributions, torch build and SGLang source, each bounded in time."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from fa_doctor.model.facts import Facts
from fa_doctor.model.install import DistributionScan, SglangFacts
from fa_doctor.model.machine import GpuFacts, TargetFacts, TorchBuild
from fa_doctor.model.options import CheckOptions
from fa_doctor.probes.target import TargetProbe
from fa_doctor.process.proc import bounded


def _installed(target: TargetFacts) -> tuple[DistributionScan, TorchBuild | None, SglangFacts | None]:
    from fa_doctor.probes import environment
    from fa_doctor.probes.distributions import scan_distributions
    from fa_doctor.probes.torch_build import read_torch_build

    scan = scan_distributions(target.sys_path)
    sglang = None
    if sglang_dist := scan.first("sglang"):
        from fa_doctor.probes.sglang_source import read_sglang

        sglang = read_sglang(sglang_dist, environment.OVERRIDE, scan)
    return scan, read_torch_build(target.sys_path), sglang


def gather(
    options: CheckOptions,
    timings: dict[str, float],
    pending: TargetProbe | None = None,
    meanwhile: Callable[[], None] = lambda: None,
) -> Facts:
    """`meanwhile` runs while the target's interpreter starts (the caller imports what follows the answer)."""
    from fa_doctor.probes.environment import capture, find_git, find_nvcc
    from fa_doctor.probes.gpu import TORCH_MIN_TIMEOUT, early_answer, probe_gpus

    python = options.python or sys.executable
    env = dict(os.environ if options.env is None else options.env)
    if pending is not None and not pending.answers(python, options.env, options.cwd, options.python_flags):
        pending.close()  # an early probe that asked something else (another interpreter, environment, folder)
        pending = None
    pending = pending or TargetProbe(python, env=options.env, cwd=options.cwd, flags=options.python_flags)
    gpu_box: dict[str, GpuFacts] = {}

    wait = options.gpu_timeout * 2 + TORCH_MIN_TIMEOUT + 10

    def gpus() -> None:
        t0 = time.perf_counter()
        early = early_answer(python, env, options.gpu_timeout, wait)  # fa_doctor.entry's, if it asked the same
        gpu_box["v"] = early or probe_gpus(python, env, timeout=options.gpu_timeout)
        timings["probe.gpu"] = time.perf_counter() - t0

    thread = threading.Thread(target=gpus, name="fa-doctor gpu probe", daemon=True)
    thread.start()
    meanwhile()
    start = time.perf_counter()
    target = pending.result()
    timings["probe.target"] = time.perf_counter() - start
    t0 = time.perf_counter()
    scan, torch, sglang = bounded(lambda: _installed(target), options.scan_timeout, "the package scan")
    timings["probe.packages"] = time.perf_counter() - t0
    # NVML and nvidia-smi get gpu_timeout each, the torch fallback at least a minute, one after the other.
    thread.join(wait)
    gpu_facts = gpu_box.get("v") or GpuFacts(
        "none", (), None, None, env.get("CUDA_VISIBLE_DEVICES"), ("the GPU probe did not finish in time",)
    )
    knobs, arch = capture(env), options.gpu_arch or ()
    return Facts(target, gpu_facts, torch, scan, knobs, sglang, options.flags, arch, find_nvcc(env), find_git(env))
