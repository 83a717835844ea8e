"""The whole result of one command: what renderers present and what the exit code is made from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fa_doctor import __version__
from fa_doctor.finding import Finding, Severity

SCHEMA = "fa-doctor.report/1"

EXIT_OK = 0  # healthy, or warnings only
EXIT_FAIL = 1  # a failing finding (or a warning under --strict)
EXIT_ERROR = 2  # misuse, or fa-doctor itself failed


@dataclass(frozen=True)
class Report:
    command: str
    findings: tuple[Finding, ...] = ()
    target: Mapping[str, Any] | None = None
    gpus: Mapping[str, Any] | None = None
    torch: Mapping[str, Any] | None = None
    packages: Sequence[Mapping[str, Any]] = ()
    selection: Mapping[str, Any] | None = None
    smoke: Mapping[str, Any] | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    strict: bool = False
    error: str | None = None  # set when fa-doctor could not do its job at all

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=Severity.OK)

    @property
    def status(self) -> str:
        if self.error:
            return "fail"
        worst = self.worst
        return "fail" if worst is Severity.FAIL else "warn" if worst is Severity.WARN else "ok"

    @property
    def exit_code(self) -> int:
        if self.error or any(f.id.startswith("internal.") for f in self.findings):
            return EXIT_ERROR
        worst = self.worst
        if worst is Severity.FAIL or (self.strict and worst is Severity.WARN):
            return EXIT_FAIL
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        counts = {s.value: sum(1 for f in self.findings if f.severity is s) for s in Severity}
        return {
            "schema": SCHEMA,
            "tool": "fa-doctor",
            "tool_version": __version__,
            "command": self.command,
            "status": self.status,
            "exit_code": self.exit_code,
            "strict": self.strict,
            "error": self.error,
            "summary": counts,
            "target": dict(self.target) if self.target else None,
            "selection": dict(self.selection) if self.selection else None,
            "gpus": dict(self.gpus) if self.gpus else None,
            "torch": dict(self.torch) if self.torch else None,
            "packages": [dict(p) for p in self.packages],
            "findings": [f.to_dict() for f in self.findings],
            "smoke": dict(self.smoke) if self.smoke else None,
            "timings_ms": {k: round(v * 1000, 1) for k, v in self.timings.items()},
        }


def error_report(command: str, message: str) -> Report:
    return Report(command=command, error=message)
