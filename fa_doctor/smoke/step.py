"""The smoke-test part of `check`: which implementations, on which GPUs, one child each; or the stored verdict of
an unchanged node (docs/smoke.md, "Verdict cache", gives the rules)."""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import fa_doctor
from fa_doctor.catalog.implementations import BY_KEY
from fa_doctor.diagnose.checks import node, unmet
from fa_doctor.diagnose.contain import crash_finding
from fa_doctor.diagnose.derive.inventory import ImplState
from fa_doctor.diagnose.derive.selection import Selection
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding
from fa_doctor.model.machine import GpuDevice
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import DeviceSmoke, SmokeSection
from fa_doctor.smoke import SmokeResult, SmokeTarget

if TYPE_CHECKING:
    from fa_doctor.diagnose.derive import Derived
    from fa_doctor.smoke.verdict_key import Fingerprint
    from fa_doctor.smoke.verdicts import Proven, Verdict

# The calling convention of each implementation key; the module is the one a server loads (the catalog's, or for
# fa4-sglang the installed SGLang's: its FA4 home moved over time).
_API = {"fa2": "fa2", "fa3": "fa3", "fa3-sgl": "sgl", "fa4": "cute", "fa4-sglang": "cute", "vllm-fa": "vllm"}
_MAX_NAMED = 20  # changed files named in the report


def smoke_keys(selection: Selection | None, states: dict[str, ImplState], every: bool) -> list[str]:
    keys = [p.implementation for p in (selection.phases if selection else ()) if p.implementation and p.version]
    # Nothing usable was selected, but what is installed still gets run: its import error is the diagnosis.
    if every or (not keys and selection is not None and selection.prefill.source == "auto"):
        return [k for k, s in states.items() if s.installed and (k != "fa4-sglang" or s.spot.found)]
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

    keys = smoke_keys(derived.selection, derived.states, options.smoke_all)
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

    # A module missing for another distribution (sglang's orjson) is that distribution's remedy, not FA's.
    reinstall = functools.partial(unmet.for_problem, facts)
    sglang = facts.sglang.fa4_module if facts.sglang else BY_KEY["fa4-sglang"].module
    targets = [SmokeTarget(k, sglang if k == "fa4-sglang" else BY_KEY[k].module, _API[k]) for k in keys]
    cache = VerdictCache(facts, options, targets, devices)
    findings: list[Finding] = []
    rows: list[DeviceSmoke] = []
    per_gpu: dict[str, dict[str, str]] = {}
    for target in targets:
        results = cache.results(target)
        if results is None:
            results = run_on_devices(facts, target, devices, options, progress)
        statuses: list[tuple[GpuDevice, str]] = []
        for device, result in zip(devices, results, strict=True):
            if isinstance(result, Exception):
                made, status = [crash_finding("smoke", result)], "crashed"
            else:
                rows.append(DeviceSmoke(device, result))
                made, status = [cache.mark(f) for f in smoke_findings(result, reinstall=reinstall)], result.status
            statuses.append((device, status))
            findings += [_on_device(f, device, len(devices)) for f in made]
        per_gpu[target.key] = {str(d.index): s for d, s in statuses}
        findings += node.compare_smoke(target.key, statuses)
    cache.settle(rows, complete=len(rows) == len(devices) * len(targets))
    return findings, cache.section(tuple(keys), tuple(rows), per_gpu)


def run_on_devices(
    facts: Facts,
    target: SmokeTarget,
    devices: list[GpuDevice],
    options: CheckOptions,
    progress: Callable[[str], None] | None,
) -> list[SmokeResult | Exception]:
    """One child per device, each pinned to its GPU with CUDA_VISIBLE_DEVICES, in parallel. FA4 with its compile
    cache: the first device compiles alone, then the others start warm together instead of racing on the cache."""
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
    title = f"GPU {device.index}: {f.title}" if count > 1 else f.title
    return dataclasses.replace(f, title=title, evidence={**f.evidence, "gpu": device.index, "gpu_name": device.name})


class VerdictCache:
    """The smoke step's use of the verdict cache: reuse a passing verdict whose fingerprint holds, store a new one."""

    def __init__(
        self, facts: Facts, options: CheckOptions, targets: Sequence[SmokeTarget], devices: list[GpuDevice]
    ) -> None:
        from fa_doctor.smoke import verdict_key, verdicts

        self.env = options.env
        self.devices = list(devices)
        self.ids = [d.uuid or str(d.index) for d in devices]  # how a stored verdict names each GPU
        self.verdict: Verdict | None = None
        self.proven: Proven | None = None
        self.changed: tuple[str, ...] = ()
        self.fingerprint: Fingerprint | None
        try:
            pins = [pin_for(d, facts) for d in devices]
            self.fingerprint = verdict_key.compute(facts, targets, devices, pins, self.env, options.python_flags)
        except Exception:  # a verdict that cannot be fingerprinted is run, never reused
            self.fingerprint = None
            return
        if options.fresh or not options.use_cache:
            return
        found = verdicts.load(self.fingerprint.value, self.env)
        if found is None:
            # The parts that changed since the newest verdict for the same implementations (`smoke.changed`).
            same = [v for v in verdicts.latest(self.env) if v.parts.get("smoke") == self.fingerprint.parts.get("smoke")]
            self.changed = tuple(self.fingerprint.changed(same[0].parts)) if same else ()
        elif moved := self._moved(found, targets):
            self.changed = tuple(moved)
        else:
            self.verdict = found

    def _moved(self, found: Verdict, targets: Sequence[SmokeTarget]) -> list[str]:
        """What makes a stored verdict of this fingerprint unusable: results for other GPUs or implementations
        (only a foreign file has those), or a file the children loaded that changed since."""
        from fa_doctor.smoke import verdict_key

        wanted = {(i, t.key) for i in self.ids for t in targets}
        if {(device, r.key) for device, r in found.results} != wanted or len(found.results) != len(wanted):
            return ["results"]
        if not found.watch:
            return ["loaded"]  # a verdict that does not say what it loaded is not one to trust
        now = verdict_key.watch(found.watch)
        return [f"loaded:{path}" for path, value in found.watch.items() if now[path] != value][:_MAX_NAMED]

    def results(self, target: SmokeTarget) -> list[SmokeResult | Exception] | None:
        """The stored results of `target`, one per device in order; None when the kernels must run."""
        if self.verdict is None:
            return None
        by_device = {(device, r.key): r for device, r in self.verdict.results}
        return [by_device[(i, target.key)] for i in self.ids]

    def mark(self, finding: Finding) -> Finding:
        """A finding made from a reused result says so, and when and where it was proven."""
        if self.verdict is None:
            return finding
        p = self.verdict.proven
        title = f"{finding.title} (verdict reused: proven {p.at} on {p.host})"
        evidence = {**finding.evidence, "cached": True, "proven_at": p.at, "proven_on": p.host}
        return dataclasses.replace(finding, title=title, evidence=evidence)

    def settle(self, rows: Sequence[DeviceSmoke], complete: bool) -> None:
        """After a run: a verdict that passed everywhere is stored; anything else removes the stored one."""
        from fa_doctor.smoke import verdict_key, verdicts

        if self.fingerprint is None or self.verdict is not None:
            return
        if not complete or not rows or any(row.result.status != "passed" for row in rows):
            verdicts.forget(self.fingerprint.value, self.env)
            return
        gpus = tuple(f"GPU {d.index} {d.name}" + (f" {d.uuid}" if d.uuid else "") for d in self.devices)
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        proven = verdicts.Proven(at, os.uname().nodename, fa_doctor.__version__, gpus)
        results = tuple((row.device.uuid or str(row.device.index), row.result) for row in rows)
        loaded = verdict_key.watched(r for _, r in results)
        if loaded is None:
            return  # the children did not say what they loaded: nothing to key a reuse on
        watch = verdict_key.watch(loaded)
        verdict = verdicts.Verdict(self.fingerprint.value, self.fingerprint.parts, proven, results, watch)
        if verdicts.store(verdict, self.env) is None:
            self.proven = proven

    def section(self, keys: tuple[str, ...], rows: tuple[DeviceSmoke, ...], per_gpu: dict[str, Any]) -> SmokeSection:
        fingerprint = self.fingerprint.value if self.fingerprint else None
        proven = self.verdict.proven if self.verdict else self.proven
        return SmokeSection(keys, rows, per_gpu, self.verdict is not None, fingerprint, proven, self.changed)
