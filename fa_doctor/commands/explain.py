"""`fa-doctor explain [TEXT | - | --file PATH]`: what a pasted error means, and what to do about it; each ranked
match of fa_doctor.knowledge is an `explain.match` finding (docs/explain.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.lines import Lines
from fa_doctor.model.result import CannotRun, ExplainPayload, Result

if TYPE_CHECKING:
    from fa_doctor.knowledge import Match
    from fa_doctor.probes.target import TargetProbe

_MAX_BYTES = 4_000_000  # a paste longer than this is cut; the matcher keeps head and tail of what is left


@dataclass(frozen=True, slots=True)
class ExplainOptions:
    text: str | None = None  # the paste itself; "-" reads standard input
    file: str | None = None
    python: str | None = None
    limit: int = 5


def read_input(options: ExplainOptions) -> str:
    if options.file is not None:
        from fa_doctor.probes import files

        got = files.read(options.file, _MAX_BYTES)  # regular files only: a FIFO is refused, never waited on
        if got.data is None:
            raise CannotRun(f"--file {options.file!r}: {got.problem}")
        return got.data.decode("utf-8", "replace")
    if options.text is not None and options.text != "-":
        return options.text
    if options.text is None and sys.stdin.isatty():
        raise CannotRun("nothing to explain: give the error text, `-` to read it from standard input, or --file")
    return sys.stdin.buffer.read(_MAX_BYTES + 1)[:_MAX_BYTES].decode("utf-8", "replace")


_STANDING = {"likely": "Likely", "guess": "A guess", "possible": "Possible", "unlikely": "Unlikely"}
# The match's fields an explain.match finding carries as evidence (before the verdict), in this order.
_EVIDENCE = ("id", "category", "confidence", "standing", "extracted", "confirm_with", "links", "reasons")


def _finding(m: Match) -> Finding:
    lines = [m.cause]
    if m.standing == "guess":
        lines.append("The text does not settle the cause: this is the best guess; run fa-doctor check to know.")
    if m.verdict:
        lines.append(f"On this machine: {m.verdict} ({m.verdict_reason}).")
    if m.reasons:
        lines.append("Evidence: " + "; ".join(m.reasons) + ".")
    if m.confirm_with and not m.verdict:
        lines.append(f"`fa-doctor check` confirms it with: {', '.join(m.confirm_with)}.")
    standing = _STANDING.get(m.standing, "")
    title = f"{standing} ({m.confidence:.0%}): {m.title}" if standing else m.title
    d = m.to_dict()
    evidence = {**{k: d[k] for k in _EVIDENCE}, "verdict": m.verdict, "verdict_reason": m.verdict_reason}
    return Finding("explain.match", Severity.INFO, title, Lines(lines), evidence, m.remedies)


def run(
    options: ExplainOptions, progress: Callable[[str], None] | None = None, pending: TargetProbe | None = None
) -> Result:
    """CannotRun (no text to explain) and TargetError propagate: the CLI maps them to exit code 2."""
    from fa_doctor.knowledge import NO_MATCH, explain

    text = read_input(options)
    facts = None
    checked: list[Finding] | None = None
    if options.python:
        from fa_doctor.commands.check import run_checks
        from fa_doctor.diagnose.derive import derive
        from fa_doctor.model.options import CheckOptions
        from fa_doctor.probes.gather import gather

        if progress:
            progress("reading the target's versions")
        check_options = CheckOptions(python=options.python, smoke=False)
        facts = gather(check_options, {}, pending)
        if progress:
            progress("checking the target")
        try:  # check's checks on the target's facts, each contained
            derived = derive(facts)
        except Exception:  # check reports this as a crash finding; explain only loses the machine's verdicts
            checked = []
        else:
            checked = run_checks(facts, derived, check_options)
    matches = tuple(explain(text, facts, options.limit, checked))
    remedy = Remedy("Test the install itself.", ("fa-doctor check",))
    no_match = Finding(
        "explain.no_match", Severity.INFO, "fa-doctor does not recognise this error", NO_MATCH, remedies=(remedy,)
    )
    findings = tuple(_finding(m) for m in matches) or (no_match,)
    payload = ExplainPayload(matches, len(text), facts.target if facts else None)
    return Result("explain", findings, payload)
