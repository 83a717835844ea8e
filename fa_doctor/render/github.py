"""GitHub Actions workflow commands: an annotation per finding that is not ok, the rest in a collapsed group,
guarded so no text from the target can act as a command (docs/render.md: the runner's rules)."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import TYPE_CHECKING

from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.human import _MARK, gpu_line, selection_line, summary_text, verdict
from fa_doctor.render.shell import remedy_lines

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetPayload

# GitHub shows 10 annotations of each kind per step (50 per job) and drops the rest silently.
ANNOTATIONS_PER_KIND = 10
_DETAIL_CHARS = 4000  # an annotation is a note, not a log: the JSON report carries the whole text
_FLEET_KIND = {Severity.FAIL: "error", Severity.WARN: "warning"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str) -> str:
    """`::command key=value,key=value::message`, as the toolkit's `issueCommand` writes it (empty values left out;
    values stripped: the runner trims the property list anyway)."""
    values = {key: value.strip() for key, value in properties.items()}
    props = ",".join(f"{key}={escape_property(value)}" for key, value in values.items() if value)
    return f"::{command}{' ' + props if props else ''}::{escape_data(message)}"


def fix_lines(remedies: tuple[Remedy, ...]) -> list[str]:
    return [line for r in remedies for line in (f"Fix: {r.text}", *(f"    {c}" for c in remedy_lines(r)))]


def finding_body(f: Finding, limit: int = _DETAIL_CHARS) -> str:
    """The detail and every fix with its commands, as plain text (also the JUnit failure text)."""
    detail = f.detail if len(f.detail) <= limit else f.detail[:limit] + " … (cut; --format json has it all)"
    return "\n".join(([detail] if detail else []) + fix_lines(f.remedies))


def annotation_kind(f: Finding, strict: bool) -> str | None:
    if f.severity is Severity.FAIL or f.id.startswith("internal.") or (strict and f.severity is Severity.WARN):
        return "error"
    return {Severity.WARN: "warning", Severity.INFO: "notice"}.get(f.severity)


def guarded(lines: list[str]) -> list[str]:
    """Plain log lines the runner will not read as commands, whatever they hold."""
    if not lines:
        return []
    token = "fa-doctor-" + hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return [f"::stop-commands::{token}", *lines, f"::{token}::"]


def _document(out: list[str], group: str, log: list[str], notes: list[tuple[str, str, str]], summary: str) -> str:
    """`out`, the log in a collapsed group, an annotation per (kind, message, title), then the summary line."""
    if log:
        out += [workflow_command("group", group), *guarded(log), "::endgroup::"]
    out += [workflow_command(kind, message, title=title) for kind, message, title in notes]
    if over := sorted(kind for kind, n in Counter(kind for kind, _, _ in notes).items() if n > ANNOTATIONS_PER_KIND):
        summary += f"; GitHub shows {ANNOTATIONS_PER_KIND} {'/'.join(over)} annotations per step: all are above"
    return "\n".join([*out, summary]) + "\n"


class GithubRenderer(Renderer):
    name = "github"

    def format(self, result: Result) -> str:
        head = f"fa-doctor {result.command}"
        if result.error:
            failed = workflow_command("error", result.error, title=f"{head} could not run")
            return f"{failed}\n{head}: FAIL — fa-doctor could not run (exit {result.exit_code})\n"
        payload = result.check
        target = payload.target
        log = [selection_line(payload), gpu_line(payload)] if target is not None else []
        quiet = [f for f in result.findings if annotation_kind(f, result.strict) is None]
        log += [f"{_MARK[f.severity][0]} {f.title}  [{f.id}]" + (f" — {f.detail}" if f.detail else "") for f in quiet]
        where = f" · {target.executable} (Python {'.'.join(map(str, target.version))})" if target else ""
        notes = [
            (kind, finding_body(f), f"{f.title} [{f.id}]")
            for f in sorted(result.findings, key=lambda f: -f.severity.rank)
            if (kind := annotation_kind(f, result.strict))
        ]
        return _document([], head + where, log, notes, f"{head}: {verdict(result, summary_text(result))}")

    def fleet(self, result: Result, payload: FleetPayload) -> str:
        title = payload.head(result.command)
        out = [workflow_command("error", result.error, title=f"{title} could not merge")] if result.error else []
        log = [f"{g.fingerprint}: {len(g.nodes)} node(s), {g.status} — {g.install.line()}" for g in payload.groups]
        loud = "error" if result.strict else "warning"
        notes = []
        for f in payload.findings:
            if kind := ("error" if result.strict and f.severity is Severity.WARN else _FLEET_KIND.get(f.severity)):
                body = f"on {len(f.nodes)} node(s) ({f.scope}): {payload.node_names(f.nodes)}"
                notes.append((kind, "\n".join([body, *fix_lines(f.remedies)]), f"{f.title} [{f.id}]"))
        notes += [(loud, "; ".join(o.why), f"outlier {o.node} (group {o.group})") for o in payload.outliers]
        lists = payload.others()
        notes += [("error", why, f"no report from {node}") for node, why in lists["unreachable"][0]]
        rows, more = lists["refused"]
        notes += [(loud, why, f"report not merged: {source}") for source, why in rows]
        if more:
            notes.append((loud, "counted, not listed: merge lists the first few", f"{more} more reports not merged"))
        rows, more = lists["duplicates"]
        notes += [(loud, why, f"node reported more than once: {node}") for node, why in rows]
        if more:
            notes.append((loud, "counted, not listed", f"{more} more nodes reported more than once"))
        summary = f"{title}: {verdict(result, payload.summary())}"
        return _document(out, f"{title}: {len(payload.groups)} group(s)", log, notes, summary)
