"""`fa-doctor check`: probe, check, (smoke-test), report. No printing here."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fa_doctor.checks import choice, gpu, knobs, node, override, packages
from fa_doctor.contain import Deadline, bounded, contained, crash_finding
from fa_doctor.derive.inventory import ImplState, assess_all
from fa_doctor.derive.selection import Selection, select
from fa_doctor.facts import BackendFlags, Facts
from fa_doctor.families import family_of
from fa_doctor.finding import Finding
from fa_doctor.probes import environment
from fa_doctor.probes.distributions import DistributionScan, scan_distributions
from fa_doctor.probes.gpu import GpuFacts, probe_gpus
from fa_doctor.probes.sglang_source import SglangFacts, read_sglang
from fa_doctor.probes.target import TargetFacts, TargetProbe
from fa_doctor.probes.torch_build import TorchBuild, read_torch_build
from fa_doctor.report import Report

Progress = Callable[[str], None]
_TORCH_PROBE_SECONDS = 60


@dataclass(frozen=True)
class CheckOptions:
    python: str | None = None
    flags: BackendFlags = field(default_factory=BackendFlags)
    smoke: bool = True
    smoke_all: bool = False
    require_gpu: bool = False
    strict: bool = False
    timeout: float = 300.0
    use_cache: bool = True
    gpu_indices: tuple[int, ...] | None = None  # --gpus: smoke-test only these CUDA indices
    gpu_timeout: float = 10.0
    scan_timeout: float = 60.0
    env: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Installed:
    scan: DistributionScan
    torch: TorchBuild | None
    sglang: SglangFacts | None


def _installed(target: TargetFacts) -> Installed:
    scan = scan_distributions(target.sys_path)
    sglang_dist = scan.first("sglang")
    sglang = read_sglang(sglang_dist, environment.OVERRIDE) if sglang_dist else None
    return Installed(scan, read_torch_build(target.sys_path), sglang)


def gather(options: CheckOptions, timings: dict[str, float], pending: TargetProbe | None = None) -> Facts:
    """Run the probes: the GPU in the background; the target (its path drives the rest), then the disk."""
    python = options.python or sys.executable
    pending = pending or TargetProbe(python)
    env = dict(os.environ if options.env is None else options.env)
    gpu_box: dict[str, GpuFacts] = {}

    def gpus() -> None:
        t0 = time.perf_counter()
        gpu_box["v"] = probe_gpus(python, env, timeout=options.gpu_timeout)
        timings["probe.gpu"] = time.perf_counter() - t0

    thread = threading.Thread(target=gpus, name="fa-doctor gpu probe", daemon=True)
    thread.start()
    start = time.perf_counter()
    target = pending.result()
    timings["probe.target"] = time.perf_counter() - start
    t0 = time.perf_counter()
    installed = bounded(lambda: _installed(target), options.scan_timeout, "the package scan")
    timings["probe.packages"] = time.perf_counter() - t0
    # NVML and nvidia-smi get gpu_timeout each, the torch fallback at least a minute, one after the other.
    thread.join(options.gpu_timeout * 2 + _TORCH_PROBE_SECONDS + 10)
    gpu_facts = gpu_box.get("v") or GpuFacts(
        "none", (), None, None, env.get("CUDA_VISIBLE_DEVICES"), ("the GPU probe did not finish in time",)
    )
    return Facts(
        target, gpu_facts, installed.torch, installed.scan, environment.capture(env), installed.sglang, options.flags
    )


def package_rows(facts: Facts) -> list[dict[str, object]]:
    return [{**d.to_dict(), "family": family_of(d.normalized)} for d in facts.scan.distributions]


def run_checks(facts: Facts, options: CheckOptions) -> tuple[list[Finding], Selection | None, dict[str, ImplState]]:
    findings: list[Finding] = []
    findings += contained("gpu", lambda: gpu.check_gpus(facts, options.require_gpu))
    findings += contained("torch", lambda: gpu.check_torch(facts))
    try:
        states = assess_all(facts)
    except Exception as exc:
        return [*findings, crash_finding("inventory", exc)], None, {}
    findings += contained("packages", lambda: packages.inventory(facts, states))
    findings += contained("conflicts", lambda: packages.conflicts(facts))
    findings += contained("broken", lambda: packages.broken_and_shadowed(facts, states))
    findings += contained("unmanaged", lambda: packages.unmanaged(facts))
    findings += contained("duplicates", lambda: packages.duplicates(facts))
    findings += contained("requirements", lambda: packages.requirements(facts))
    pinned: list[int | None] = [None]

    def check_override() -> list[Finding]:
        result, pinned[0] = override.check_override(facts, states)
        return result

    findings += contained("override", check_override)
    findings += contained("knobs", lambda: knobs.check_knobs(facts))
    selection: list[Selection] = []

    def check_selection() -> list[Finding]:
        selection.append(select(facts, states, pinned[0]))
        return choice.check_selection(facts, states, selection[0], pinned[0])

    findings += contained("selection", check_selection)
    return findings, (selection[0] if selection else None), states


def run_check(options: CheckOptions, progress: Progress | None = None, pending: TargetProbe | None = None) -> Report:
    """TargetError (a bad --python) propagates: the CLI maps it to exit code 2."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    try:
        facts = gather(options, timings, pending)
    except Deadline as exc:
        return Report("check", findings=(crash_finding("probe", exc),), strict=options.strict)
    visible = [d.index for d in facts.gpus.devices]
    facts, missing = node.restrict(facts, options.gpu_indices)
    findings, selection, states = run_checks(facts, options)
    findings += contained("node", lambda: node.check_node(facts, missing, visible))
    smoke_section = None
    if options.smoke:
        from fa_doctor.commands.smoke_step import smoke_step

        t0 = time.perf_counter()
        try:
            more, smoke_section = smoke_step(facts, options, selection, states, progress)
        except Exception as exc:  # contained like every check
            more, smoke_section = [crash_finding("smoke", exc)], None
        findings += more
        timings["smoke"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - start
    return Report(
        command="check",
        findings=tuple(findings),
        target=facts.target.to_dict(),
        gpus=facts.gpus.to_dict(),
        torch=facts.torch.to_dict() if facts.torch else None,
        packages=package_rows(facts),
        selection=selection.to_dict() if selection else None,
        smoke=smoke_section,
        timings=timings,
        strict=options.strict,
    )
