"""The smoke step's use of the verdict cache: reuse a passing verdict whose fingerprint holds, store a new one.

The fingerprint (fa_doctor/smoke/verdict_key.py) is computed from facts the static check already gathered plus
stat calls; the store is fa_doctor/smoke/verdicts.py. `--fresh` (and `--no-cache`, which asks for the kernels to
be compiled again) runs the kernels whatever is stored; a run that does not pass on every GPU removes the
stored verdict of its fingerprint, so a failure is never followed by a reused success.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import fa_doctor
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding
from fa_doctor.model.machine import GpuDevice
from fa_doctor.model.options import CheckOptions

if TYPE_CHECKING:
    from fa_doctor.smoke import SmokeResult, SmokeTarget
    from fa_doctor.smoke.verdict_key import Fingerprint
    from fa_doctor.smoke.verdicts import Proven, Verdict


_MAX_NAMED = 20  # changed files named in the report


class VerdictCache:
    def __init__(
        self,
        facts: Facts,
        options: CheckOptions,
        targets: Sequence[SmokeTarget],
        devices: Sequence[GpuDevice],
        pins: Sequence[str],
    ) -> None:
        from fa_doctor.smoke import verdict_key, verdicts

        self.env = options.env
        self.devices = list(devices)
        self.ids = [d.uuid or str(d.index) for d in devices]
        self.verdict: Verdict | None = None
        self.proven: Proven | None = None
        self.changed: tuple[str, ...] = ()
        self.fingerprint: Fingerprint | None
        try:
            self.fingerprint = verdict_key.compute(facts, targets, devices, pins, self.env, options.python_flags)
        except Exception:  # a verdict that cannot be fingerprinted is run, never reused
            self.fingerprint = None
            return
        if options.fresh or not options.use_cache:
            return
        found = verdicts.load(self.fingerprint.value, self.env)
        if found is not None:
            moved = self._moved(found, targets)
            if not moved:
                self.verdict = found
                return
            self.changed = tuple(moved)
            return
        self.changed = self._why_not(verdicts.latest(self.env))

    def _moved(self, found: Verdict, targets: Sequence[SmokeTarget]) -> list[str]:
        """What makes a stored verdict of this fingerprint unusable: results for other GPUs or implementations
        (only a foreign file has those), or a module folder the child imported from that changed since."""
        from fa_doctor.smoke import verdict_key

        wanted = {(i, t.key) for i in self.ids for t in targets}
        if {(device, r.key) for device, r in found.results} != wanted or len(found.results) != len(wanted):
            return ["results"]
        if not found.watch:
            return ["loaded"]  # a verdict that does not say what it loaded is not one to trust
        now = verdict_key.watch(found.watch)
        return [f"loaded:{path}" for path, value in found.watch.items() if now[path] != value][:_MAX_NAMED]

    def _why_not(self, stored: list[Verdict]) -> tuple[str, ...]:
        """The parts that changed since the newest verdict for the same implementations (the report's
        `smoke.changed`): what a reader wants to know when a healthy node suddenly pays for a smoke test."""
        assert self.fingerprint is not None
        same = [v for v in stored if v.parts.get("smoke") == self.fingerprint.parts.get("smoke")]
        return tuple(self.fingerprint.changed(same[0].parts)) if same else ()

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
        return Finding(
            finding.id,
            finding.severity,
            f"{finding.title} (verdict reused: proven {p.at} on {p.host})",
            finding.detail,
            {**finding.evidence, "cached": True, "proven_at": p.at, "proven_on": p.host},
            finding.remedies,
        )

    def settle(self, outcomes: Sequence[tuple[GpuDevice, SmokeResult]], complete: bool) -> None:
        """After a run: a verdict that passed everywhere is stored; anything else removes the stored one."""
        from fa_doctor.smoke import verdict_key, verdicts

        if self.fingerprint is None or self.verdict is not None:
            return
        if not complete or not outcomes or any(r.status != "passed" for _, r in outcomes):
            verdicts.forget(self.fingerprint.value, self.env)
            return
        proven = verdicts.Proven(
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            os.uname().nodename,
            fa_doctor.__version__,
            verdicts.describe_gpus([(d.index, d.name, d.uuid) for d in self.devices]),
        )
        by_device = {id(d): i for d, i in zip(self.devices, self.ids, strict=True)}
        results = tuple((by_device[id(d)], r) for d, r in outcomes)
        loaded = verdict_key.watched(r for _, r in results)
        if loaded is None:
            return  # the children did not say what they loaded: nothing to key a reuse on
        watch = verdict_key.watch(loaded)
        verdict = verdicts.Verdict(self.fingerprint.value, self.fingerprint.parts, proven, results, watch)
        if verdicts.store(verdict, self.env) is None:
            self.proven = proven

    def section(self) -> dict[str, Any]:
        """The SmokeSection's cache fields."""
        return {
            "cached": self.verdict is not None,
            "fingerprint": self.fingerprint.value if self.fingerprint else None,
            "proven": self.verdict.proven if self.verdict else self.proven,
            "changed": self.changed,
        }
