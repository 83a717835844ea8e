"""`--quiet`: the verdict line and what fails (each failing finding with its fixes), nothing else. Under --strict a
warning fails, so it is shown too; an error of fa-doctor itself is its one line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fa_doctor.model.finding import Severity
from fa_doctor.model.result import Result
from fa_doctor.render.human import _STATUS_STYLE, HumanRenderer, summary_text, verdict

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetPayload


class QuietRenderer(HumanRenderer):
    name = "human"

    def _report(self, result: Result) -> None:
        if result.error:
            self.line(f"fa-doctor {result.command}: {result.error}", "bold red")
            return
        text = f"fa-doctor {result.command}: {verdict(result, summary_text(result))}"
        self.prose(text, _STATUS_STYLE.get(result.status))
        failing = {Severity.FAIL, Severity.WARN} if result.strict else {Severity.FAIL}
        for f in result.findings:
            if f.severity in failing:
                self.finding(f)

    def fleet(self, result: Result, payload: FleetPayload) -> str:
        return self._printed(self._quiet_fleet, result, payload)

    def _quiet_fleet(self, result: Result, payload: FleetPayload) -> None:
        """`merge -q`, `fleet ray -q`: the verdict line and each failing finding with its nodes and fixes."""
        if result.error:
            self.line(f"fa-doctor {result.command}: {result.error}", "bold red")
            return
        self.prose(
            f"fa-doctor {result.command}: {verdict(result, payload.summary())}", _STATUS_STYLE.get(result.status)
        )
        failing = {Severity.FAIL, Severity.WARN} if result.strict else {Severity.FAIL}
        for f in payload.findings:
            if f.severity in failing:
                self.fleet_finding(payload, f, 10)
