"""GitHub Actions workflow commands: one annotation per finding that is not ok, the rest in a collapsed group.

Escaping is the toolkit's own (actions/toolkit `packages/core/src/command.ts`, unescaped by actions/runner's
`ActionCommand.TryParseV2`): data `%` `\\r` `\\n`; properties also `:` and `,`. Two more hazards live in the
runner, not the toolkit: it reads the old `##[command]` form anywhere in a line that is not a `::` command, and a
line that starts with `::` (after leading blanks) is a command. Text from the target therefore goes out only as
the data of our own `::` lines, or between `::stop-commands::TOKEN` and `::TOKEN::`, where the runner obeys
nothing but the token; the token is a hash of the text it guards, which that text cannot contain.
"""

from __future__ import annotations

import hashlib

from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.human import gpu_line, selection_line, summary_text
from fa_doctor.render.shell import remedy_lines

# GitHub shows 10 annotations of each kind per step (50 per job) and drops the rest silently.
ANNOTATIONS_PER_KIND = 10
_DETAIL_CHARS = 4000  # an annotation is a note, not a log: the JSON report carries the whole text
_MARK = {Severity.OK: "✓", Severity.INFO: "i", Severity.WARN: "!", Severity.FAIL: "✗"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str) -> str:
    """`::command key=value,key=value::message`, as the toolkit's `issueCommand` writes it (empty values left out).

    Values are stripped: the runner trims the property list, so a title's outer blanks would not survive anyway.
    """
    values = {key: value.strip() for key, value in properties.items()}
    props = ",".join(f"{key}={escape_property(value)}" for key, value in values.items() if value)
    return f"::{command}{' ' + props if props else ''}::{escape_data(message)}"


def finding_body(f: Finding, limit: int = _DETAIL_CHARS) -> str:
    """The detail and every fix with its commands, as plain text (also the JUnit failure text)."""
    detail = f.detail if len(f.detail) <= limit else f.detail[:limit] + " … (cut; --format json has it all)"
    lines = [detail] if detail else []
    for remedy in f.remedies:
        lines.append(f"Fix: {remedy.text}")
        lines.extend(f"    {command}" for command in remedy_lines(remedy))
    return "\n".join(lines)


def annotation_kind(f: Finding, strict: bool) -> str | None:
    if f.severity is Severity.FAIL or f.id.startswith("internal.") or (strict and f.severity is Severity.WARN):
        return "error"
    if f.severity is Severity.WARN:
        return "warning"
    if f.severity is Severity.INFO:
        return "notice"
    return None


def guarded(lines: list[str]) -> list[str]:
    """Plain log lines the runner will not read as commands, whatever they hold."""
    if not lines:
        return []
    token = "fa-doctor-" + hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return [f"::stop-commands::{token}", *lines, f"::{token}::"]


class GithubRenderer(Renderer):
    name = "github"

    def format(self, result: Result) -> str:
        head = f"fa-doctor {result.command}"
        if result.error:
            failed = workflow_command("error", result.error, title=f"{head} could not run")
            return f"{failed}\n{head}: FAIL — fa-doctor could not run (exit {result.exit_code})\n"
        payload = result.check
        target = payload.target
        out: list[str] = []
        log = [selection_line(payload), gpu_line(payload)] if target is not None else []
        quiet = [f for f in result.findings if annotation_kind(f, result.strict) is None]
        log += [f"{_MARK[f.severity]} {f.title}  [{f.id}]" + (f" — {f.detail}" if f.detail else "") for f in quiet]
        if log:
            where = f" · {target.executable} (Python {'.'.join(map(str, target.version))})" if target else ""
            out += [workflow_command("group", head + where), *guarded(log), "::endgroup::"]
        shown: dict[str, int] = {}
        for f in sorted(result.findings, key=lambda f: -f.severity.rank):
            kind = annotation_kind(f, result.strict)
            if kind is None:
                continue
            shown[kind] = shown.get(kind, 0) + 1
            out.append(workflow_command(kind, finding_body(f), title=f"{f.title} [{f.id}]"))
        summary = f"{head}: {result.status.upper()} — {summary_text(result)} (exit {result.exit_code})"
        over = sorted(kind for kind, n in shown.items() if n > ANNOTATIONS_PER_KIND)
        if over:
            summary += f"; GitHub shows {ANNOTATIONS_PER_KIND} {'/'.join(over)} annotations per step: all are above"
        return "\n".join([*out, summary]) + "\n"
