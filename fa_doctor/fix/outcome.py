"""What `fix --apply` did: each step's fate, and the run's (`fa_doctor.fix.apply` makes them)."""

from __future__ import annotations

from dataclasses import dataclass

from fa_doctor.fix.stale import Leftover
from fa_doctor.model.actions import Action


@dataclass(frozen=True, slots=True)
class Step:
    """One action and what became of it. `output` is the tail of what the command printed."""

    action: Action
    description: str
    ok: bool
    message: str
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0
    left_unchanged: bool = False  # a failed step: nothing it changed remains (it changed nothing, or was undone)
    status: str = "done"  # done | failed | refused | skipped | undone | kept (an undo that failed) | proven
    undo: str = ""  # how to put it back by hand


@dataclass(frozen=True, slots=True)
class ApplyResult:
    ran: tuple[Step, ...]  # completed and still in effect, in order
    failed: Step | None  # the step that stopped the run (failed, or refused when nothing could run)
    not_run: tuple[Action, ...]  # never started
    manual: tuple[Action, ...]  # SetEnv / UnsetEnv / RunCommand: for the user (render them with actions.render)
    undone: tuple[Step, ...] = ()  # completed, then put back
    refused: tuple[Step, ...] = ()  # could not be proven: they (and the rest of their group) did not run
    skipped: tuple[Step, ...] = ()  # a build whose clone source does not answer
    interrupted: int | None = None  # the signal that stopped the run
    journal: str | None = None  # the journal file, kept when something went wrong
    state: str = ""  # one sentence: what the environment holds now
    proven: tuple[Step, ...] = ()  # dry run: the steps that would run
    dry_run: bool = False
    leftovers: tuple[Leftover, ...] = ()  # an earlier apply on this target that did not finish

    @property
    def ok(self) -> bool:
        return self.failed is None and self.interrupted is None and not self.refused and not self.blocked

    @property
    def blocked(self) -> bool:
        """Refused for an earlier apply's leftovers (or one still running): nothing was tried."""
        return bool(self.leftovers) and not self.dry_run

    @property
    def unchanged(self) -> bool:
        """Nothing in the environment changed: no step remains in effect, and a failed one left nothing."""
        return not self.ran and (self.failed is None or self.failed.left_unchanged)
