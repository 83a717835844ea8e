"""The fleet report on a terminal: the verdict, one table row per install group, then each finding once with
the nodes that have it and its fixes, the outliers, and what could not be merged. `-v` lists every node."""

from __future__ import annotations

from fa_doctor.fleet.model import FleetPayload
from fa_doctor.model.finding import Severity
from fa_doctor.model.result import Result
from fa_doctor.render.fleet.common import (
    duplicate_text,
    head,
    install_line,
    node_names,
    payload_of,
    summary_text,
    unlisted,
)
from fa_doctor.render.human import _MARK, _STATUS_STYLE, HumanRenderer

_GROUP_FINDINGS = 3


class FleetHumanRenderer(HumanRenderer):
    name = "human"

    def _report(self, result: Result) -> None:
        payload = payload_of(result)
        self.line(head(result), "bold")
        if result.error:
            self.line(f"fa-doctor: {result.error}", "bold red")
        else:
            status = f"Status: {result.status.upper()} — {summary_text(payload)} (exit {result.exit_code})"
            self.line(status, _STATUS_STYLE.get(result.status))
        if payload.groups:
            self._groups(payload)
        limit = None if self.verbose else 10
        if payload.findings:
            self.line("")
            self.line("Findings (each once, with the nodes that have it):", "bold")
        for f in payload.findings:
            mark, style = _MARK[f.severity]
            self.line(f"{mark} {f.title}  [{f.id}]", style)
            where = "every node of its group" if f.scope == "install" else "some nodes of its group"
            self.line(f"on {len(f.nodes)} node(s), {where}: {node_names(payload, f.nodes, limit)}", indent=4)
            for remedy in f.remedies:
                self.line("fix: " + remedy.text, "bold", indent=4)
                for command in remedy.commands:
                    self.line(command, "cyan", indent=8)
            if f.variants > len(f.remedies):
                self.line(f"({f.variants - len(f.remedies)} more remedy variant(s): --format json has them)", "dim", 4)
        self._others(payload, limit)
        if self.verbose and payload.nodes:
            self.line("")
            self.line("Nodes:", "bold")
            rows = [
                {
                    "node": n.name,
                    "group": payload.groups[n.group].fingerprint,
                    "status": n.status.value,
                    "GPUs": n.gpus,
                    "findings": ", ".join(fid for fid, _ in n.findings) or n.error,
                    "source": n.source,
                }
                for n in payload.nodes
            ]
            self.table(rows, 2)

    def _groups(self, payload: FleetPayload) -> None:
        self.line("")
        self.line("Groups (nodes with the same install fingerprint):", "bold")
        rows = []
        for g in payload.groups:
            loud = [f for f in g.findings if f.severity in (Severity.FAIL, Severity.WARN)]
            shown = ", ".join(f"{f.id} ×{f.nodes}" for f in loud[:_GROUP_FINDINGS])
            more = len(loud) - _GROUP_FINDINGS
            rows.append(
                {
                    "group": g.fingerprint,
                    "nodes": len(g.nodes),
                    "status": g.status,
                    "ok": g.counts.get("ok", 0),
                    "warn": g.counts.get("warn", 0),
                    "fail": g.counts.get("fail", 0),
                    "failing or warning findings": shown + (f" (+{more})" if more > 0 else "") or "—",
                }
            )
        self.table(rows, 2)
        for g in payload.groups:
            self.line(f"{g.fingerprint}: {install_line(g.install)}", "dim", indent=2)
            if self.verbose:
                self.line("nodes: " + node_names(payload, g.nodes, None), "dim", indent=4)

    def _others(self, payload: FleetPayload, limit: int | None) -> None:
        if payload.outliers:
            self.line("")
            self.line("Outliers (install as their group's, result not):", "bold yellow")
            for o in payload.outliers[:limit]:
                self.line(f"{o.node} (group {o.group}): " + "; ".join(o.why), indent=2)
            if limit is not None and len(payload.outliers) > limit:
                self.line(f"... {len(payload.outliers) - limit} more (-v lists them)", "dim", indent=2)
        refused_more, duplicates_more = unlisted(payload)
        for title, items, more in (
            ("Refused reports (not merged):", [(r.source, r.why) for r in payload.refused], refused_more),
            ("Unreachable nodes (no report):", [(u.node, u.why) for u in payload.unreachable], 0),
            (
                "Nodes reported more than once (the newest report of each is merged):",
                [duplicate_text(payload, i) for i in range(len(payload.duplicates))],
                duplicates_more,
            ),
        ):
            if items:
                self.line("")
                self.line(title, "bold yellow")
                for where, why in items[:limit]:
                    self.line(f"{where}: {why}", indent=2)
                hidden = 0 if limit is None else max(0, len(items) - limit)
                notes = [f"-v lists {hidden} of them"] if hidden else []
                notes += [f"merge lists the first {len(items)} and counts the rest"] if more else []
                if hidden or more:
                    self.line(f"... {hidden + more} more ({'; '.join(notes)})", "dim", indent=2)
