"""A job-summary page (GitHub's `$GITHUB_STEP_SUMMARY`, a GitLab or Buildkite annotation, a pasted issue).

Status headline with the counts, the selection and GPU lines, a table of what fails or warns, each fix's
commands in a fenced block, and the passing and informational findings folded in `<details>`. Text from the
target is Markdown-escaped: in prose and table cells no character can open a link, emphasis, HTML or a code
span or end a table cell; a fence is longer than any backtick run inside it.
"""

from __future__ import annotations

import re

from fa_doctor.model.finding import Finding, Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.human import gpu_line, selection_line, summary_text
from fa_doctor.render.shell import remedy_lines

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


def fenced(lines: tuple[str, ...] | list[str], info: str = "sh") -> str:
    """A fenced block no line inside can close: the fence is longer than any backtick run in it."""
    body = "\n".join(lines)
    longest = max((len(run) for run in re.findall("`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _row(f: Finding) -> str:
    detail = f.detail if len(f.detail) <= _DETAIL_CHARS else f.detail[:_DETAIL_CHARS] + " …"
    return f"| {_SEVERITY[f.severity]} | {inline(f.title)} | {code(f.id, table=True)} | {inline(detail)} |"


def _table(findings: list[Finding]) -> list[str]:
    return ["| severity | finding | id | detail |", "|---|---|---|---|", *(_row(f) for f in findings)]


class MarkdownRenderer(Renderer):
    name = "markdown"

    def format(self, result: Result) -> str:
        head = f"fa-doctor {result.command}"
        if result.error:
            return f"## ❌ {head}: could not run\n\n{inline(result.error)}\n\nExit code {result.exit_code}.\n"
        status = result.status
        out = [f"## {_ICON[status]} {head}: {status.upper()}", ""]
        out.append(
            f"**{summary_text(result)}** · exit code {result.exit_code}" + (" · strict" if result.strict else "")
        )
        payload = result.check
        target = payload.target
        if target is not None:
            version = ".".join(map(str, target.version))
            out += ["", f"Python: {code(target.executable)} ({version})  ", inline(selection_line(payload)) + "  "]
            out.append(inline(gpu_line(payload)))
        order = sorted(result.findings, key=lambda f: -f.severity.rank)
        loud = [f for f in order if f.severity in (Severity.FAIL, Severity.WARN)]
        quiet = [f for f in order if f not in loud]
        if loud:
            out += ["", "### Failing and warning findings", "", *_table(loud)]
        fixes = [(f, r) for f in loud for r in f.remedies]
        if fixes:
            out += ["", "### Fixes"]
            for f, remedy in fixes:
                out += ["", f"**{inline(f.title)}** ({code(f.id)}): {inline(remedy.text)}"]
                if remedy_lines(remedy):
                    out += ["", fenced(remedy_lines(remedy))]
        if quiet:
            noun = "finding" if len(quiet) == 1 else "findings"
            out += ["", f"<details><summary>{len(quiet)} passing or informational {noun}</summary>", ""]
            out += [*_table(quiet), "", "</details>"]
        # A blank line last: what is appended after it (the step summary file is shared) cannot join the table.
        return "\n".join(out) + "\n\n"
