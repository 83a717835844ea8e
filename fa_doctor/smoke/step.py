"""The smoke-test part of `check`: which implementations, on which GPUs, one child each; or the stored verdict of
an unchanged node (commands/verdict_cache.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from fa_doctor.diagnose.checks import node, unmet
from fa_doctor.diagnose.contain import crash_finding
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.diagnose.derive.selection import Selection
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy
from fa_doctor.model.machine import GpuDevice
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import DeviceSmoke, SmokeSection
from fa_doctor.smoke.cache import VerdictCache

if TYPE_CHECKING:
    from fa_doctor.diagnose.derive import Derived
    from fa_doctor.smoke.runner import SmokeResult, SmokeTarget

# (module, calling convention) a server really loads for each implementation key.
_API = {
    "fa2": ("flash_attn", "fa2"),
    "fa3": ("flash_attn_interface", "fa3"),
    "fa3-sgl": ("sgl_kernel.flash_attn", "sgl"),
    "fa4": ("flash_attn.cute", "cute"),
    "fa4-sglang": ("", "cute"),  # module from the installed SGLang (its FA4 home moved over time)
    "vllm-fa": ("vllm.vllm_flash_attn", "vllm"),
}


def smoke_keys(facts: Facts, selection: Selection | None, states: dict[str, ImplState], every: bool) -> list[str]:
    if every:
        return [k for k, s in states.items() if s.installed and (k != "fa4-sglang" or s.spot.found)]
    keys = [p.implementation for p in (selection.phases if selection else ()) if p.implementation and p.version]
    if not keys and selection is not None and selection.prefill.source == "auto":
        # Nothing usable was selected, but what is installed still gets run: its import error is the diagnosis.
        return smoke_keys(facts, selection, states, every=True)
    return list(dict.fromkeys(k for k in keys if k is not None))


def pin_for(device: GpuDevice, facts: Facts) -> str:
    """CUDA_VISIBLE_DEVICES value that shows this one device (UUIDs avoid CUDA/NVML ordering differences)."""
    if device.uuid:
        return device.uuid
    raw = facts.gpus.visible_devices
    if raw is not None and facts.gpus.source == "torch":
        entries = [e.strip() for e in raw.split(",")]
        if device.index < len(entries):
            return entries[device.index]
    return str(device.physical_index)


def smoke_step(
    facts: Facts,
    options: CheckOptions,
    derived: Derived,
    progress: Callable[[str], None] | None,
    refused: str | None = None,
) -> tuple[list[Finding], SmokeSection]:
    """`refused`: why the server would refuse to start (an invalid override): the kernels are not run."""
    from fa_doctor.smoke.findings import skipped_finding, smoke_findings
    from fa_doctor.smoke.runner import SmokeTarget

    keys = smoke_keys(facts, derived.selection, derived.states, options.smoke_all)
    section = SmokeSection(tuple(keys))
    if refused:  # the server would not start: a kernel test (seconds to minutes) would only delay saying so
        return [skipped_finding(f"{refused}: the server would refuse to start", require_gpu=False)], section
    if not keys:
        return [skipped_finding("no FA implementation is selected or installed", require_gpu=False)], section
    if facts.torch is None:
        return [skipped_finding("torch is not installed in the target interpreter", require_gpu=False)], section
    devices = list(facts.gpus.devices)  # already restricted to --gpus
    if not devices:
        return [skipped_finding("no GPU is visible", require_gpu=options.require_gpu)], section

    def reinstall(key: str, problem: object) -> tuple[Remedy, ...]:
        # A module missing for another distribution (sglang's orjson) is that distribution's remedy, not FA's.
        return unmet.for_problem(facts, key, problem)

    targets = [SmokeTarget(key, *_module(facts, key)) for key in keys]
    cache = VerdictCache(facts, options, targets, devices, [pin_for(d, facts) for d in devices])
    findings: list[Finding] = []
    rows: list[DeviceSmoke] = []
    per_gpu: dict[str, dict[str, str]] = {}
    outcomes: list[tuple[GpuDevice, SmokeResult]] = []
    for target in targets:
        results = cache.results(target)
        if results is None:
            results = run_on_devices(facts, target, devices, options, progress)
        statuses: list[tuple[GpuDevice, str]] = []
        for device, result in zip(devices, results, strict=True):
            if isinstance(result, Exception):
                findings.append(_on_device(crash_finding("smoke", result), device, len(devices)))
                statuses.append((device, "crashed"))
                continue
            outcomes.append((device, result))
            rows.append(DeviceSmoke(device, result))
            statuses.append((device, result.status))
            for f in smoke_findings(result, reinstall=reinstall):
                findings.append(_on_device(cache.mark(f), device, len(devices)))
        per_gpu[target.key] = {str(d.index): s for d, s in statuses}
        findings += node.compare_smoke(target.key, statuses)
    cache.settle(outcomes, complete=len(outcomes) == len(devices) * len(targets))
    return findings, SmokeSection(tuple(keys), tuple(rows), per_gpu, **cache.section())


def _module(facts: Facts, key: str) -> tuple[str, str]:
    module, api = _API[key]
    if key == "fa4-sglang":
        module = facts.sglang.fa4_module if facts.sglang else "sglang.kernels.ops.attention.flash_attn.cute"
    return module, api


def run_on_devices(
    facts: Facts,
    target: SmokeTarget,
    devices: list[GpuDevice],
    options: CheckOptions,
    progress: Callable[[str], None] | None,
) -> list[SmokeResult | Exception]:
    """One child per device, each pinned to its GPU with CUDA_VISIBLE_DEVICES, in parallel.

    FA4 with its compile cache: the first device compiles alone, the others then start warm together, instead of
    N children compiling the same kernels at once and racing on the cache folder.
    """
    from fa_doctor.smoke.runner import run_smoke

    results: list[SmokeResult | Exception] = [RuntimeError("the smoke runner did not return")] * len(devices)

    def one(slot: int, device: GpuDevice) -> None:
        try:
            results[slot] = run_smoke(
                facts.target.executable,
                target,
                timeout=options.timeout,
                use_cache=options.use_cache,
                visible_devices=pin_for(device, facts),
                env=options.env,  # exec: COMMAND's environment, flags and folder, as the server will have them
                python_flags=options.python_flags,
                cwd=options.cwd,
                progress=(lambda message: progress(f"GPU {device.index}: {message}")) if progress else None,
            )
        except Exception as exc:  # becomes an internal.check_crashed finding for this GPU
            results[slot] = exc

    order = list(enumerate(devices))
    if target.api == "cute" and options.use_cache and len(order) > 1:
        one(*order.pop(0))
    threads = [threading.Thread(target=one, args=pair, daemon=True) for pair in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _on_device(f: Finding, device: GpuDevice, count: int) -> Finding:
    evidence = {**f.evidence, "gpu": device.index, "gpu_name": device.name}
    title = f"GPU {device.index}: {f.title}" if count > 1 else f.title
    return Finding(f.id, f.severity, title, f.detail, evidence, f.remedies)
