"""The one result type every command returns (findings, a typed payload, timings), and the exit-code contract."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fa_doctor.model.finding import Finding, Severity

if TYPE_CHECKING:
    from fa_doctor.diagnose.derive.selection import Selection
    from fa_doctor.fix.apply import ApplyResult
    from fa_doctor.fix.envfile import EditResult
    from fa_doctor.knowledge import Match
    from fa_doctor.model.actions import Action
    from fa_doctor.model.install import Distribution
    from fa_doctor.model.machine import GpuDevice, GpuFacts, HostFacts, TargetFacts, TorchBuild
    from fa_doctor.smoke import SmokeResult
    from fa_doctor.smoke.verdicts import Proven

SCHEMA = "fa-doctor.report/1"

EXIT_OK = 0  # healthy, or warnings only
EXIT_FAIL = 1  # a failing finding (or a warning under --strict)
EXIT_ERROR = 2  # misuse, or fa-doctor itself failed


@dataclass(frozen=True, slots=True)
class PackageRow:
    dist: Distribution
    family: str | None  # the FA family it belongs to


@dataclass(frozen=True, slots=True)
class DeviceSmoke:
    device: GpuDevice
    result: SmokeResult


@dataclass(frozen=True, slots=True)
class SmokeSection:
    implementations: tuple[str, ...] = ()
    results: tuple[DeviceSmoke, ...] = ()
    per_gpu: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # implementation -> GPU -> status
    # The verdict cache (docs/smoke.md): reused instead of run; what it depends on; when and where it was proven;
    # the parts that changed since the last stored verdict (why the kernels ran again).
    cached: bool = False
    fingerprint: str | None = None
    proven: Proven | None = None
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckPayload:
    """What `check` found, typed: renderers read fields, not dict keys."""

    host: HostFacts | None = None  # where it ran (a fleet merge names the node by it)
    target: TargetFacts | None = None
    gpus: GpuFacts | None = None
    torch: TorchBuild | None = None
    packages: tuple[PackageRow, ...] = ()
    selection: Selection | None = None
    smoke: SmokeSection | None = None


@dataclass(frozen=True, slots=True)
class ExplainPayload:
    """What `explain` found: the ranked matches (the envelope's `matches`), and the target when one was read."""

    matches: tuple[Match, ...]
    input_chars: int
    target: TargetFacts | None = None


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One repair `fix` would run: the finding it answers, the remedy it comes from, the typed action."""

    finding: str
    remedy: str
    action: Action
    description: str
    command: str  # the action as a POSIX shell line


@dataclass(frozen=True, slots=True)
class FixPayload:
    mode: str  # "unset-override" | "plan" | "apply"
    dry_run: bool = False  # unset-override with --dry-run: nothing written, diffs shown
    shell: str | None = None
    shell_code: str | None = None  # for eval, in `shell`'s syntax
    eval_hint: str | None = None
    edits: tuple[EditResult, ...] = ()
    plan: tuple[PlanStep, ...] = ()
    applied: ApplyResult | None = None
    fixed: tuple[str, ...] = ()  # finding ids that failed or warned before --apply and no longer do
    remaining: tuple[str, ...] = ()
    check: CheckPayload | None = None


class CannotRun(Exception):
    """A command was given something it cannot work with (unreadable input, ...): exit code 2, no traceback."""


@dataclass(frozen=True, slots=True)
class Result:
    command: str
    findings: tuple[Finding, ...] = ()
    payload: Any = None  # a frozen dataclass of the command's own (CheckPayload, ...), or None
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds
    strict: bool = False
    error: str | None = None  # set when fa-doctor could not do its job at all
    signal: int | None = None  # set when a signal ended the run

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=Severity.OK)

    @property
    def status(self) -> str:
        if self.error or self.signal is not None:
            return "fail"
        return "ok" if self.worst is Severity.INFO else self.worst.value

    @property
    def counts(self) -> dict[Severity, int]:
        return {s: sum(1 for f in self.findings if f.severity is s) for s in Severity}

    @property
    def exit_code(self) -> int:
        if self.signal is not None:
            return 128 + self.signal  # ended by signal N: 128 + N, as shells report it
        if self.error or any(f.id.startswith("internal.") for f in self.findings):
            return EXIT_ERROR
        worst = self.worst
        return EXIT_FAIL if worst is Severity.FAIL or (self.strict and worst is Severity.WARN) else EXIT_OK

    @property
    def check(self) -> CheckPayload:
        """The check payload, or an empty one (renderers of other commands' results read it too)."""
        if isinstance(self.payload, CheckPayload):
            return self.payload
        inner = getattr(self.payload, "check", None)  # fix carries the check it planned from
        return inner if isinstance(inner, CheckPayload) else CheckPayload()
