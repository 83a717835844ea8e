"""A job-summary page (GitHub's `$GITHUB_STEP_SUMMARY`, a GitLab or Buildkite annotation, a pasted issue): the
verdict, tables of what fails or warns, each fix in a fenced block, the rest folded. Text from the target is
Markdown-escaped: it cannot open a link, emphasis, HTML or a code span, end a table cell or close a fence."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.human import gpu_line, selection_line, summary_text
from fa_doctor.render.shell import remedy_lines

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetFinding, FleetPayload

_ICON = {"ok": "✅", "warn": "⚠️", "fail": "❌"}
_SEVERITY = {Severity.OK: "✅ ok", Severity.INFO: "ℹ️ info", Severity.WARN: "⚠️ warn", Severity.FAIL: "❌ fail"}
# Characters that open or close inline syntax anywhere in a line: code spans, emphasis, links, strikethrough,
# table cells. (Block syntax only starts a line, and `inline` text never starts one but its first.)
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
# A heading, list item or setext underline (`<`/`>` become entities anyway).
_BLOCK_START = re.compile(r"^(\s*)(\d*)([#+=-]|(?<=\d)[.)])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_DETAIL_CHARS = 4000


def inline(text: str) -> str:
    """Text safe in a paragraph or a table cell: escaped, newlines as `<br>`, nothing left to interpret."""
    text = _SPECIAL.sub(r"\\\1", text)
    text = _BLOCK_START.sub(r"\1\2\\\3", text)
    text = re.sub("[&<>]", lambda m: _HTML[m.group()], text)
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def code(text: str, *, table: bool = False) -> str:
    """A code span for an id or a path; in a table, `|` is still escaped (GFM splits cells first)."""
    text = " ".join(text.split())
    if table:
        text = text.replace("|", "\\|")
    ticks = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(lines: Sequence[str], info: str = "sh") -> str:
    """A fenced block no line inside can close: the fence is longer than any backtick run in it."""
    body = "\n".join(lines)
    longest = max((len(run) for run in re.findall("`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _table(title: str, header: str, rows: list[list[str]]) -> list[str]:
    """A `### title` section (none without a title) with a table: `header` names the columns (`a | b`); each row a
    list of cells, already escaped."""
    head = ["", f"### {title}", ""] if title else []
    rule = "|---" * (header.count("|") + 1) + "|"
    return [*head, f"| {header} |", rule, *("| " + " | ".join(row) + " |" for row in rows)]


def _findings(title: str, findings: list[Finding]) -> list[str]:
    rows = []
    for f in findings:
        detail = f.detail if len(f.detail) <= _DETAIL_CHARS else f.detail[:_DETAIL_CHARS] + " …"
        rows.append([_SEVERITY[f.severity], inline(f.title), code(f.id, table=True), inline(detail)])
    return _table(title, "severity | finding | id | detail", rows)


def _fixes(loud: Sequence[Finding | FleetFinding]) -> list[str]:
    out = ["", "### Fixes"] if any(f.remedies for f in loud) else []
    for f in loud:
        for remedy in f.remedies:
            out += ["", f"**{inline(f.title)}** ({code(f.id)}): {inline(remedy.text)}"]
            out += ["", fenced(remedy_lines(remedy))] if remedy_lines(remedy) else []
    return out


class MarkdownRenderer(Renderer):
    name = "markdown"

    def format(self, result: Result) -> str:
        head = f"fa-doctor {result.command}"
        if result.error:
            return f"## ❌ {head}: could not run\n\n{inline(result.error)}\n\nExit code {result.exit_code}.\n"
        status = result.status
        out = [f"## {_ICON[status]} {head}: {status.upper()}", ""]
        strict = " · strict" if result.strict else ""
        out.append(f"**{summary_text(result)}** · exit code {result.exit_code}{strict}")
        payload = result.check
        if (target := payload.target) is not None:
            version = ".".join(map(str, target.version))
            out += ["", f"Python: {code(target.executable)} ({version})  ", inline(selection_line(payload)) + "  "]
            out.append(inline(gpu_line(payload)))
        order = sorted(result.findings, key=lambda f: -f.severity.rank)
        loud = [f for f in order if f.severity in (Severity.FAIL, Severity.WARN)]
        quiet = [f for f in order if f not in loud]
        if loud:
            out += _findings("Failing and warning findings", loud)
        out += _fixes(loud)
        if quiet:
            noun = "finding" if len(quiet) == 1 else "findings"
            out += ["", f"<details><summary>{len(quiet)} passing or informational {noun}</summary>", ""]
            out += [*_findings("", quiet), "", "</details>"]
        # A blank line last: what is appended after it (the step summary file is shared) cannot join the table.
        return "\n".join(out) + "\n\n"

    def fleet(self, result: Result, payload: FleetPayload) -> str:
        status = result.status
        out = [f"## {_ICON[status]} {payload.head(result.command)}: {status.upper()}", ""]
        if result.error:
            out += [inline(result.error), ""]
        out.append(f"**{inline(payload.summary())}** · exit code {result.exit_code}")
        if payload.groups:
            rows = []
            for g in payload.groups:
                found = [f"{code(f.id, table=True)} ×{f.nodes}" for f in g.findings if f.severity is not Severity.INFO]
                counts = f"{g.counts.get('ok', 0)} / {g.counts.get('warn', 0)} / {g.counts.get('fail', 0)}"
                cells = [code(g.fingerprint, table=True), str(len(g.nodes)), g.status, counts]
                rows.append([*cells, inline(g.install.line()), ", ".join(found) or "—"])
            out += _table("Groups", "group | nodes | status | ok / warn / fail | install | findings", rows)
        loud = [f for f in payload.findings if f.severity in (Severity.FAIL, Severity.WARN)]
        if loud:
            rows = []
            for f in loud:
                nodes = f"{len(f.nodes)}: {inline(payload.node_names(f.nodes))}"
                rows.append([_SEVERITY[f.severity], inline(f.title), code(f.id, table=True), f.scope, nodes])
            out += _table("Failing and warning findings", "severity | finding | id | scope | nodes", rows)
        out += _fixes(loud)
        lists = payload.others()
        outliers = [(o.node, f"group {o.group}: " + "; ".join(o.why)) for o in payload.outliers]
        for title, column, (items, more) in (
            ("Outliers", "node", (outliers, 0)),
            ("Refused reports", "source", lists["refused"]),
            ("Unreachable nodes", "node", lists["unreachable"]),
            ("Nodes reported more than once", "node", lists["duplicates"]),
        ):
            if items:
                out += _table(title, f"{column} | why", [[inline(w), inline(y)] for w, y in items])
                if more:
                    out.append(f"| … {more} more | counted, not listed |")
        return "\n".join(out) + "\n\n"
