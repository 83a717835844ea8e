"""The fleet report as a job-summary page: the verdict, a table of groups, a table of findings with their
nodes, each fix once in a fenced block, then outliers and what could not be merged. Node text is escaped with
the Markdown renderer's own rules (`inline`, `code`, `fenced`)."""

from __future__ import annotations

from fa_doctor.model.finding import Severity
from fa_doctor.model.result import Result
from fa_doctor.render.base import Renderer
from fa_doctor.render.fleet.common import (
    duplicate_text,
    head,
    install_line,
    node_names,
    payload_of,
    summary_text,
    unlisted,
)
from fa_doctor.render.markdown import code, fenced, inline

_ICON = {"ok": "✅", "warn": "⚠️", "fail": "❌"}
_SEVERITY = {Severity.OK: "✅ ok", Severity.INFO: "ℹ️ info", Severity.WARN: "⚠️ warn", Severity.FAIL: "❌ fail"}


class FleetMarkdownRenderer(Renderer):
    name = "markdown"

    def format(self, result: Result) -> str:
        payload = payload_of(result)
        status = result.status
        out = [f"## {_ICON[status]} {head(result)}: {status.upper()}", ""]
        if result.error:
            out += [inline(result.error), ""]
        out.append(f"**{inline(summary_text(payload))}** · exit code {result.exit_code}")
        if payload.groups:
            out += ["", "### Groups", "", "| group | nodes | status | ok / warn / fail | install | findings |"]
            out.append("|---|---|---|---|---|---|")
            for g in payload.groups:
                found = ", ".join(
                    f"{code(f.id, table=True)} ×{f.nodes}" for f in g.findings if f.severity is not Severity.INFO
                )
                counts = f"{g.counts.get('ok', 0)} / {g.counts.get('warn', 0)} / {g.counts.get('fail', 0)}"
                cells = [code(g.fingerprint, table=True), str(len(g.nodes)), g.status, counts]
                cells += [inline(install_line(g.install)), found or "—"]
                out.append("| " + " | ".join(cells) + " |")
        loud = [f for f in payload.findings if f.severity in (Severity.FAIL, Severity.WARN)]
        if loud:
            out += ["", "### Failing and warning findings", "", "| severity | finding | id | scope | nodes |"]
            out.append("|---|---|---|---|---|")
            for f in loud:
                cells = [_SEVERITY[f.severity], inline(f.title), code(f.id, table=True), f.scope]
                cells.append(f"{len(f.nodes)}: {inline(node_names(payload, f.nodes))}")
                out.append("| " + " | ".join(cells) + " |")
            fixes = [(f, r) for f in loud for r in f.remedies]
            if fixes:
                out += ["", "### Fixes"]
            for f, remedy in fixes:
                out += ["", f"**{inline(f.title)}** ({code(f.id)}): {inline(remedy.text)}"]
                if remedy.commands:
                    out += ["", fenced(remedy.commands)]
        refused_more, duplicates_more = unlisted(payload)
        sections = (
            ("Outliers", "node", [(o.node, f"group {o.group}: " + "; ".join(o.why)) for o in payload.outliers], 0),
            ("Refused reports", "source", [(r.source, r.why) for r in payload.refused], refused_more),
            ("Unreachable nodes", "node", [(u.node, u.why) for u in payload.unreachable], 0),
            (
                "Nodes reported more than once",
                "node",
                [duplicate_text(payload, i) for i in range(len(payload.duplicates))],
                duplicates_more,
            ),
        )
        for title, column, rows, more in sections:
            if rows:
                out += ["", f"### {title}", "", f"| {column} | why |", "|---|---|"]
                out += [f"| {inline(where)} | {inline(why)} |" for where, why in rows]
                if more:
                    out.append(f"| … {more} more | counted, not listed |")
        return "\n".join(out) + "\n\n"
