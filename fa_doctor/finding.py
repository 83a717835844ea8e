"""The one result type every check returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from fa_doctor.actions import Action, RunCommand, SetEnv, UnsetEnv, render_all, to_dict
from fa_doctor.probes.environment import OVERRIDE


class Severity(str, Enum):
    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.INFO: 1, Severity.WARN: 2, Severity.FAIL: 3}


@dataclass(frozen=True)
class Remedy:
    """What to do, and the exact commands that do it (copy-pastable, one per line).

    `actions` are the typed steps `fa-doctor fix` runs; their POSIX rendering is appended to `commands`, so
    renderers and older JSON readers see paste-ready lines. `commands` given directly are for text that is
    not an action (a flag to add to the launch command).
    """

    text: str
    commands: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        rendered = render_all(self.actions)
        # Idempotent, so dataclasses.replace() (which passes the rendered commands back in) adds nothing twice.
        if rendered and tuple(self.commands[-len(rendered) :]) != rendered:
            object.__setattr__(self, "commands", tuple(self.commands) + rendered)

    def fix_command(self, finding_id: str) -> str | None:
        """The `fa-doctor fix` command that applies this remedy; None when there is nothing to apply."""
        if finding_id.startswith("explain."):
            return None  # `fix` applies what `check` finds; a pasted error is not a finding of this machine
        steps = [a for a in self.actions if not isinstance(a, RunCommand)]  # a command to run diagnoses
        if not steps:
            return None
        if all(isinstance(a, (SetEnv, UnsetEnv)) and a.name == OVERRIDE for a in steps):
            value = next((a.value for a in steps if isinstance(a, SetEnv)), None)
            only_set = not any(isinstance(a, UnsetEnv) for a in steps)
            tail = f" --set {value}" if only_set and value is not None and value.isdigit() else ""
            return f'eval "$(fa-doctor fix --unset-override{tail})"'
        if all(isinstance(a, (SetEnv, UnsetEnv)) for a in steps):
            return None  # another variable of the calling shell: the printed line is the whole remedy
        return f"fa-doctor fix --apply --only {finding_id}"

    def to_dict(self, finding_id: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "commands": list(self.commands),
            "actions": [to_dict(a) for a in self.actions],
        }
        if finding_id is not None:
            out["fix"] = self.fix_command(finding_id)
        return out


@dataclass(frozen=True)
class Finding:
    """A stable dotted id, a verdict, and what to do about it."""

    id: str
    severity: Severity
    title: str
    detail: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remedies: tuple[Remedy, ...] = ()

    def __post_init__(self) -> None:
        # Findings are shared between renderers: freeze the evidence too.
        object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "title": self.title,
            "detail": self.detail,
            "evidence": dict(self.evidence),
            "remedies": [r.to_dict(self.id) for r in self.remedies],
        }
