"""The one result type every check returns."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fa_doctor.actions import Action, RunCommand, SetEnv, UnsetEnv, render_all, to_dict
from fa_doctor.probes.environment import OVERRIDE

if TYPE_CHECKING:
    from fa_doctor.plan.intents import Intent


class Severity(str, Enum):
    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.INFO: 1, Severity.WARN: 2, Severity.FAIL: 3}


@dataclass(frozen=True, slots=True)
class Remedy:
    """What to do, and how: typed `actions` (what `fa-doctor fix` runs), plus `commands` for text that is not
    an action (a flag to add to the launch command).

    A check may leave the how to the planner: `intent` states the goal (install FA3, satisfy sglang's
    requirements) and `fa_doctor.plan.planner` replaces the remedy with concrete ones after every check ran.
    Shell text is made only when a result is rendered (`lines`), for the shell asked for. `target` holds the
    options the remedy was computed for (`--python PATH`), so the `fa-doctor fix` hint acts on the same
    environment; `replaces_torch` marks a remedy that moves torch (`fix --apply` takes it only when asked).
    """

    text: str
    commands: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    intent: Intent | None = None
    target: tuple[str, ...] = ()
    replaces_torch: bool = False

    def lines(self, shell: str = "bash") -> tuple[str, ...]:
        """Every line to paste, for `shell`: the text commands, then each action rendered and quoted."""
        return tuple(self.commands) + render_all(self.actions, shell)

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
        argv = ["fa-doctor", "fix", "--apply", *self.target, "--only", finding_id]
        if self.replaces_torch:
            argv.insert(3, "--allow-torch-change")
        return shlex.join(argv)

    def to_dict(self, finding_id: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "commands": list(self.lines()),
            "actions": [to_dict(a) for a in self.actions],
            "replaces_torch": self.replaces_torch,
        }
        if finding_id is not None:
            out["fix"] = self.fix_command(finding_id)
        return out


@dataclass(frozen=True, slots=True)
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
