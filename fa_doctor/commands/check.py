"""`fa-doctor check`: probe, derive, check, smoke-test; returns a Result. No printing here."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fa_doctor.diagnose.contain import contained, crash_finding, probe_failed
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import CheckPayload, PackageRow, Result
from fa_doctor.process.proc import Deadline

if TYPE_CHECKING:  # the probes load lazily, in probes.gather
    from fa_doctor.diagnose.derive import Derived
    from fa_doctor.probes.target import TargetProbe

Progress = Callable[[str], None]


def _load_what_follows() -> None:
    """Import what runs after the target's answer while its interpreter starts (10 ms on a bare venv, 35 ms on
    an H200 server's, whose site runs .pth files): the main thread would only wait for it."""
    from fa_doctor.catalog import ecosystem, releases  # noqa: F401
    from fa_doctor.diagnose.checks import binary, choice, gpu, knobs, override, packages  # noqa: F401
    from fa_doctor.diagnose.derive import inventory, requires, selection  # noqa: F401
    from fa_doctor.probes import distributions, extensions  # noqa: F401


def run_checks(facts: Facts, derived: Derived, options: CheckOptions) -> list[Finding]:
    """Every check, each contained: one that crashes becomes an internal.check_crashed finding."""
    from fa_doctor.diagnose.checks import binary, choice, gpu, knobs, override, packages

    states, pinned, selection = derived.states, derived.pinned, derived.selection
    findings: list[Finding] = []
    static_only = not options.smoke or bool(options.gpu_arch)
    findings += contained("gpu", lambda: gpu.check_gpus(facts, options.require_gpu, static_only))
    findings += contained("torch", lambda: gpu.check_torch(facts))
    findings += contained("packages", lambda: packages.inventory(facts, states))
    findings += contained("conflicts", lambda: packages.conflicts(facts))
    findings += contained("broken", lambda: packages.broken_and_shadowed(facts, states))
    findings += contained("unmanaged", lambda: packages.unmanaged(facts, derived.spots))
    findings += contained("duplicates", lambda: packages.duplicates(facts))
    findings += contained("requirements", lambda: packages.requirements(facts))
    findings += contained("override", lambda: override.check_override(facts, states))
    findings += contained("knobs", lambda: knobs.check_knobs(facts))
    findings += contained("selection", lambda: choice.check_selection(facts, states, selection, pinned))
    findings += contained("binary", lambda: binary.check_binaries(facts, states, options.gpu_arch))
    return findings


def run(options: CheckOptions, progress: Progress | None = None, pending: TargetProbe | None = None) -> Result:
    """TargetError (a bad --python) propagates: the CLI maps it to exit code 2."""
    from fa_doctor.catalog.families import family_of
    from fa_doctor.diagnose.checks import node
    from fa_doctor.diagnose.checks.target import check_target
    from fa_doctor.diagnose.derive import derive
    from fa_doctor.probes.environment import probe_host
    from fa_doctor.probes.gather import gather

    timings: dict[str, float] = {}
    env = os.environ if options.env is None else options.env
    start = time.perf_counter()
    try:
        facts = gather(options, timings, pending, meanwhile=_load_what_follows)
    except Deadline as exc:
        where = CheckPayload(host=probe_host(options.env))
        return Result("check", (probe_failed(exc),), where, timings=timings, strict=options.strict)
    visible = [d.index for d in facts.gpus.devices]
    facts, missing = node.restrict(facts, options.gpu_indices)
    derived: Derived | None = None
    try:
        derived = derive(facts)
    except Exception as exc:  # contained like every check: the probes' facts are still reported
        findings = [crash_finding("inventory", exc, others_ran=False)]
    else:
        findings = run_checks(facts, derived, options)
    findings += contained("node", lambda: node.check_node(facts, missing, visible))
    findings += contained("target", lambda: check_target(facts, options.python_why, os.path.realpath(sys.prefix), env))
    smoke = None
    if options.smoke and derived is not None:
        from fa_doctor.smoke.step import smoke_step

        announce = getattr(progress, "static", None)  # a log (no terminal) gets the static verdict before the kernels
        if callable(announce) and facts.gpus.devices:
            announce(findings, len(facts.gpus.devices))
        refused = next((f.title for f in findings if f.id == "override.invalid" and f.severity is Severity.FAIL), None)
        t0 = time.perf_counter()
        try:
            more, smoke = smoke_step(facts, options, derived, progress, refused)
        except Exception as exc:  # contained like every check
            more = [crash_finding("smoke", exc)]
        findings += more
        timings["smoke"] = time.perf_counter() - t0
    try:  # the planner, after every check: intents become actions for this machine; contained like a check
        if any(f.remedies for f in findings):  # else nothing to plan (and the planner's modules stay unloaded)
            from fa_doctor.diagnose.plan.planner import plan

            findings = plan(findings, facts, options.target_args)
    except Exception as exc:
        findings.append(crash_finding("plan", exc))
    timings["total"] = time.perf_counter() - start
    rows = tuple(PackageRow(d, family_of(d.normalized)) for d in facts.scan.distributions)
    selection = derived.selection if derived else None
    payload = CheckPayload(probe_host(options.env), facts.target, facts.gpus, facts.torch, rows, selection, smoke)
    return Result("check", tuple(findings), payload, timings, options.strict)
